"""`xun trust`: let the working directory's `.xun/config.toml` set the keys that need trust (see
`xun.agent.trust` and `xun.agent.config.TRUST_REQUIRED_KEYS`), stop trusting it (`--remove`), or list the folders."""

from __future__ import annotations

import argparse

from xun.cli.exits import EXIT_FAILED, EXIT_OK, CommandError
from xun.cli.commands.common import workdir_of


def main(args: argparse.Namespace) -> int:
    from xun.agent.trust import TrustFileError

    try:
        return _main(args)
    except TrustFileError as exc:
        raise CommandError(str(exc), EXIT_FAILED) from None


def _main(args: argparse.Namespace) -> int:
    from xun.base import paths
    from xun.agent.trust import trust_folder, trusted_folders, untrust_folder

    if args.list:
        for folder in trusted_folders():
            print(folder)
        return EXIT_OK
    folder = workdir_of(args)
    if args.remove:
        removed = untrust_folder(folder)
        print(f"xun: {'no longer trusted' if removed else 'was not trusted'}: {folder.resolve()}")
        return EXIT_OK
    key = trust_folder(folder)
    print(
        f"xun: trusted {key}: its .xun/config.toml may now set the provider, prompt files and key bindings "
        f"(remembered in {paths.trusted_folders_path()}; `xun trust --remove` undoes it)"
    )
    return EXIT_OK
