"""`python -m xun.offline` runs the offline server (same options as `xun offline-server`)."""

from xun.offline.command import main

raise SystemExit(main())
