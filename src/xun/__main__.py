"""`python -m xun` is the same as the `xun` command."""

from xun.cli.main import main

raise SystemExit(main())
