"""The commands of the `xun` command line, one module each; `xun.cli.main` parses and dispatches to `main(args)`.

Each module is imported only when its command runs, so a command that needs no model (`sessions`,
`history`, `config`) never imports the SDK, and none imports Textual except the full-screen app.
"""
