"""The flags every `toy-rl` command shares, defined once: one name, one meaning, one default, one check.

A command adds the ones that apply to it through :class:`CommonFlags`; they show under "common options" in
its ``--help``. Values are checked as they are parsed (the type functions below), so a bad value is one line
and exit 2 before anything runs. :func:`settle`, called by ``toy_rl/cli.py`` before the command's ``run``,
fills the defaults (smaller ones under ``--smoke``, unless a flag was given), expands ``--rule all`` and
checks that ``--out`` can be written, without creating anything. Under ``--smoke`` every command honours a
``--steps`` up to its smoke size and refuses a larger one by name (a smoke run stays a smoke run).

    --seeds N        how many seeds (independent repeats); the 95% bands need 2 or more
    --first-seed K   the seeds are K, K+1, ..., K+N-1 (``--seed K`` on commands that make one run)
    --steps N        updates per run
    --threads N      torch CPU threads (default 1 everywhere)
    --out PATH       where results are written
    --json           the result as one strict JSON value on stdout (a missing number is null, never NaN)
    --no-progress    no progress bars
    --smoke          tiny settings that finish in seconds: a check that everything runs, not a result
    --rule R [R ...] symmetric, clip-higher, bapo, or all (the default: all three)
    --group-size G   answers per prompt (group-relative advantages need 2 or more)
    --device D       auto (CUDA if available), cpu or cuda
"""
from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path

from ..experiments.logged import MODES, set_train
from ..strict_json import dumps
from . import expand_rules

DEVICES = ("auto", "cpu", "cuda")


# --- values, checked as they are parsed (argparse type functions) --------------------------------------------
# Their messages start with "must": the parser (toy_rl/cli.py) prints "--flag must ...".

def int_at_least(low: int):
    """A type function: an integer >= ``low``."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an integer >= {low}; got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be >= {low}; got {value}")
        return value
    parse.__name__ = f"integer >= {low}"
    return parse


positive_int = int_at_least(1)
nonnegative_int = int_at_least(0)


def _number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number; got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number; got {text}")
    return value


def finite_float(text: str) -> float:
    """A type function: a finite number (no nan, no inf)."""
    return _number(text)


def positive_float(text: str) -> float:
    """A type function: a finite number > 0 (step sizes, memory sizes)."""
    value = _number(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a finite number > 0; got {text}")
    return value


def nonnegative_float(text: str) -> float:
    """A type function: a finite number >= 0."""
    value = _number(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0; got {text}")
    return value


def probability(text: str) -> float:
    """A type function: a number in [0, 1]."""
    value = _number(text)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"must be a probability in [0, 1]; got {text}")
    return value


DTYPES = ("auto", "float32", "fp32", "bfloat16", "bf16", "float16", "fp16")   # rungs 3-4's --dtype


def rule_name(text: str) -> str:
    """A type function: one of the clipping rules, or ``all``."""
    from ..clipping import RULES
    if text != "all" and text not in RULES:
        raise argparse.ArgumentTypeError(f"unknown rule {text!r}; choose from {', '.join(RULES)} or all")
    return text


def device_name(text: str) -> str:
    """A type function: auto, cpu, cuda or cuda:N; ``cuda`` on a machine where torch sees no GPU (or a
    PyTorch build without CUDA) fails here, before any work."""
    if text not in DEVICES and not (text.startswith("cuda:") and text[5:].isdigit()):
        raise argparse.ArgumentTypeError(f"must be auto, cpu or cuda; got {text!r}")
    if text.startswith("cuda"):
        import torch
        if not torch.cuda.is_available():
            build = f"CUDA {torch.version.cuda}" if torch.version.cuda else "a CPU-only build"
            raise argparse.ArgumentTypeError(
                f"{text!r} asked for, but torch {torch.__version__} ({build}) sees no GPU; use --device cpu or auto")
    return text


# --- the flags ------------------------------------------------------------------------------------------------

class CommonFlags:
    """Adds the shared flags to one command's parser, each with its one meaning and check. Sizes that
    ``--smoke`` shrinks (``seeds``, ``steps``, ...) are stored as None and filled by :func:`settle`."""

    def __init__(self, parser: argparse.ArgumentParser):
        self.parser = parser
        self.group = parser.add_argument_group("common options (the same name and meaning on every command)")
        self.full, self.smoke_sizes = {}, {}
        parser.set_defaults(_full=self.full, _smoke=self.smoke_sizes, _out_kind=None)

    def sized(self, flag: str, full, smoke=None, help: str = "", type=positive_int, group=None, **kw):
        """A flag whose default is ``full`` (``smoke`` under --smoke); an explicit value wins over both.
        ``full`` None: the default is the callee's (say what it is in ``help``)."""
        dest = flag.lstrip("-").replace("-", "_")
        if full is not None:
            self.full[dest] = full
            if smoke is not None:
                self.smoke_sizes[dest] = smoke
            help += f" (default {_show(full)}" + (f"; --smoke: {_show(smoke)})" if smoke is not None else ")")
        (group or self.group).add_argument(flag, type=type, default=None, help=help, **kw)

    def seeds(self, full, smoke=None, help: str = "how many seeds (independent repeats) per rule and staleness; "
                                                "95%% bands need 2 or more"):
        self.sized("--seeds", full, smoke, help, metavar="N")

    def first_seed(self):
        self.group.add_argument("--first-seed", type=nonnegative_int, default=0, metavar="K",
                                help="the seeds are K, K+1, ..., K+N-1 with N = --seeds (default 0)")

    def seed(self, help: str = "the random seed (this command makes one run)"):
        self.group.add_argument("--seed", type=nonnegative_int, default=0, metavar="K", help=help + " (default 0)")

    def steps(self, full, smoke=None, help: str = "updates per run"):
        self.sized("--steps", full, smoke, help, metavar="N")

    def threads(self):
        self.group.add_argument("--threads", type=positive_int, default=1, metavar="N",
                                help="torch CPU threads (default 1: the small models run fastest on one thread, "
                                     "above all on a busy machine)")

    def out(self, default, help: str, kind: str = "dir", smoke=None):
        """``kind``: what PATH names: "dir" (a folder), "file", or "file-or-dir" (a file, or a folder to put it
        in). ``smoke``: the default under --smoke (smoke runs never mix with full ones). Checked by
        :func:`settle` before any work; nothing is created."""
        self.parser.set_defaults(_out_kind=kind)
        if default is not None:
            self.full["out"] = Path(default)
            help += f" (default {default}" + (f"; --smoke: {smoke})" if smoke is not None else ")")
        if smoke is not None:
            self.smoke_sizes["out"] = Path(smoke)
        self.group.add_argument("--out", type=Path, default=None, metavar="PATH", help=help)

    def json(self, what: str = "the result"):
        self.group.add_argument("--json", action="store_true",
                                help=f"print {what} as strict JSON on stdout instead of text (a missing number is "
                                     "null, never NaN)")

    def no_progress(self, bars: bool = True):
        self.group.add_argument("--no-progress", action="store_true",
                                help="no progress bars" if bars else
                                "no progress bars (this command has none; accepted so that every command takes it)")

    def smoke(self, what: str = "tiny settings that finish in seconds (a check that everything runs, not a result)"):
        self.group.add_argument("--smoke", action="store_true", help=what)

    def rule(self):
        self.group.add_argument("--rule", nargs="+", type=rule_name, default=["all"], metavar="RULE",
                                help="one or more of symmetric, clip-higher, bapo, or all (default all: the three)")

    def group_size(self, full, smoke=None, help: str = "G, answers per prompt (group-relative advantages need >= 2)"):
        self.sized("--group-size", full, smoke, help, type=int_at_least(2), metavar="G")

    def alias(self, old: str, new: str):
        """``old``: a former name of the flag ``new``, still accepted (same value, same check) but not in --help."""
        action = self.parser._option_string_actions[new]
        self.parser.add_argument(old, dest=action.dest, type=action.type, nargs=action.nargs,
                                 default=argparse.SUPPRESS, help=argparse.SUPPRESS)

    def train(self):
        self.group.add_argument("--train", choices=MODES, default=None,
                                help="what may train: missing (read runs/, then the committed logs in results/, "
                                     "train the rest), all (train every run here, ignoring results/), never (read "
                                     "only; a missing run is an error) (default missing, or $TOY_RL_TRAIN)")

    def device(self):
        self.group.add_argument("--device", type=device_name, default="auto",
                                help="auto (CUDA if available, else CPU), cpu or cuda (default auto)")


def _show(value) -> str:
    return " ".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)


def extra_outs(parser: argparse.ArgumentParser, *flags: str) -> None:
    """Folder flags besides --out that a command writes into (e.g. ``--runs``): :func:`settle` checks them too."""
    parser.set_defaults(_extra_outs=flags)


# --- before the command runs ----------------------------------------------------------------------------------

def settle(args: argparse.Namespace) -> None:
    """Fill the defaults (the smoke ones under --smoke, unless given), expand ``--rule all``, and check that
    ``--out`` (and the other output folders) can be written. ValueError naming the flag otherwise."""
    smoke = getattr(args, "smoke", False)
    args._given = {dest for dest in getattr(args, "_full", {}) if getattr(args, dest, None) is not None}
    most = getattr(args, "_smoke", {}).get("steps")
    if smoke and "steps" in args._given and most is not None and args.steps > most:
        raise ValueError(f"--steps {args.steps} does not go with --smoke, whose runs make at most {most} updates "
                         "(a check that everything runs); drop --smoke for a longer run, or ask for fewer steps")
    for dest, full in getattr(args, "_full", {}).items():
        if getattr(args, dest, None) is None:
            value = args._smoke[dest] if smoke and dest in args._smoke else full
            setattr(args, dest, list(value) if isinstance(value, (list, tuple)) else value)
    if getattr(args, "train", None) is not None:
        set_train(args.train)                         # worker processes inherit it (TOY_RL_TRAIN)
    if hasattr(args, "rule"):
        args._all_rules = "all" in args.rule          # --rule all (the default), not the three named one by one
        args.rule = expand_rules(args.rule)
    if getattr(args, "_out_kind", None) and args.out is not None:
        check_out(args.out, args._out_kind)
    for flag in getattr(args, "_extra_outs", ()):
        value = getattr(args, flag.lstrip("-").replace("-", "_"))
        if value is not None:
            check_out(value, "dir", flag)


def check_out(path, kind: str = "dir", flag: str = "--out") -> Path:
    """Make sure ``path`` can be written (``kind``: "dir", "file" or "file-or-dir", as in
    :meth:`CommonFlags.out`) without creating anything, so that a bad path fails before any work and leaves
    no half-made folder. ValueError naming ``flag`` otherwise."""
    path = Path(path).expanduser()
    if path.exists():
        if kind == "dir" and not path.is_dir():
            raise ValueError(f"{flag}: {path} is a file, not a folder")
        if kind == "file" and path.is_dir():
            raise ValueError(f"{flag}: {path} is a folder, not a file")
        if path.is_file() and not os.access(path, os.W_OK):
            raise ValueError(f"{flag}: {path} exists and is not writable")
    folder = path if kind == "dir" or (kind == "file-or-dir" and path.is_dir()) else path.parent
    existing = folder.absolute()
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise ValueError(f"{flag}: cannot create the folder {folder}: {existing} is a file")
    if not os.access(existing, os.W_OK | os.X_OK):
        where = "it" if existing == folder.absolute() else existing
        raise ValueError(f"{flag}: cannot write to the folder {folder}: {where} is not writable")
    return path


# --- output ---------------------------------------------------------------------------------------------------

def show_progress(args) -> bool:
    """Progress bars only for a person watching: not with --json or --no-progress, not into a pipe or a file."""
    return not getattr(args, "json", False) and not getattr(args, "no_progress", False) and sys.stderr.isatty()


def print_json(x, **kw) -> None:
    print(dumps(x, **kw))
