"""The command line: `xun` and its subcommands (`main` parses and dispatches; `commands/` has one module
per command), and the console output of `xun run`. The top layer: it starts the app, `xun serve` and the
offline server.

May import: every other layer and interface.
"""
