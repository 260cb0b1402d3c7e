"""The `toy-rl` command. Each subcommand lives in its own module under
``toy_rl/commands/`` and exposes ``NAME``, ``HELP``, ``add_arguments(parser)``
and ``run(args) -> int``; this file only collects them."""
from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

from . import commands


def _subcommands():
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda i: i.name):
        yield importlib.import_module(f"{commands.__name__}.{info.name}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="toy-rl", description="Off-policy clipping for RL on language models: symmetric, clip-higher, BAPO.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for mod in _subcommands():
        p = sub.add_parser(mod.NAME, help=mod.HELP, description=mod.HELP)
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "_run"):
        parser.print_help()
        return 0
    try:
        return int(args._run(args) or 0)
    except ValueError as err:          # bad input: one clear line, no traceback
        print(f"toy-rl {args.command}: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
