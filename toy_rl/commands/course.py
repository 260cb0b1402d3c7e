"""`toy-rl course`: the executed notebooks in docs/course/, built from the run logs committed in results/."""
from __future__ import annotations

from pathlib import Path

from .common import CommonFlags, print_json

NAME = "course"
HELP = ("execute every notebook in full mode from the committed run logs (results/) into docs/course/, "
        "check that those copies still match the code, or collect your own runs' logs into results/")
ACTIONS = ("build", "check", "collect")


def add_arguments(p):
    p.add_argument("action", choices=ACTIONS,
                   help="build: write docs/course/*.ipynb and its index; check: execute again and list what "
                        "differs from the committed copies (exit 1 if anything does); collect: copy metrics.jsonl "
                        "and config.json of the runs the notebooks read from --runs into results/")
    p.add_argument("notebooks", nargs="*", metavar="NOTEBOOK",
                   help="only these notebooks, by number or name (04, 04_arithmetic_transformer); default all")
    p.add_argument("--runs", type=Path, default=Path("runs"), help="collect: where the runs are (default runs)")
    p.add_argument("--only", nargs="+", metavar="EXPERIMENT",
                   help="collect: only these experiments (e.g. bandit-grid/long-failures); the rest of results/ stays")
    p.add_argument("--finished", action="store_true",
                   help="collect: an experiment still training is copied as far as it got: its finished runs, "
                        "each unfinished one named and left out (a damaged log is still refused)")
    common = CommonFlags(p)
    common.json("build: one entry per notebook; check: the differences per notebook")


def run(args) -> int:
    from ..course import COURSE, RESULTS, build, check, collect
    from ..course.execute import notebooks
    from ..course.logs import size
    notebooks(args.notebooks)                           # an unknown name: one line, before any work
    if args.action == "collect":
        skipped: list = []
        written = collect(args.runs, only=args.only, finished=args.finished, skipped=skipped)
        for folder, updates in skipped:
            print(f"left out (still training, {updates} updates logged): {folder}")
        print(f"{len(written)} run folders copied into {RESULTS} ({size(RESULTS) / 1e6:.1f} MB)")
        return 0
    if args.action == "build":
        say = None if args.json else (lambda e: print(f"{e['name']:<40} {e['seconds']:7.1f} s "
                                                      f"{e['bytes'] / 1e6:6.2f} MB"))
        entries = build(args.notebooks, on_done=say)
        if args.json:
            print_json(entries)
        else:
            print(f"index: {COURSE / 'README.md'}")
        return 0
    say = None if args.json else (lambda name, diffs: print(
        f"{'ok' if not diffs else 'STALE':<6}{name}" + "".join(f"\n      {d}" for d in diffs)))
    found = check(args.notebooks, on_done=say)
    if not args.json:                 # the text against the outputs beside it (notes: they do not fail the check)
        import nbformat

        from ..course.outputs import unbacked_numbers
        for path in notebooks(args.notebooks):
            copy = COURSE / path.name
            numbers = unbacked_numbers(nbformat.read(copy, as_version=4)) if copy.is_file() else []
            if numbers:
                print(f"note  {path.name}: numbers in the text that no output shows (check them): "
                      + ", ".join(numbers))
    if args.json:
        print_json(found)
    return 1 if any(found.values()) else 0
