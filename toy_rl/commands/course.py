"""`toy-rl course`: the executed notebooks in docs/course/, built from the run logs committed in results/."""
from __future__ import annotations

from pathlib import Path

from .common import CommonFlags, print_json

NAME = "course"
HELP = ("execute every notebook in full mode from the committed run logs (results/) into docs/course/, "
        "check that those copies still match the code, or collect your own runs' logs into results/; "
        "instructor, slides, html: the instructor pack (docs/instructor/)")
ACTIONS = ("build", "check", "collect", "instructor", "slides", "html")


def add_arguments(p):
    p.add_argument("action", choices=ACTIONS,
                   help="build: write docs/course/*.ipynb and its index; check: execute again and list what "
                        "differs from the committed copies (exit 1 if anything does); collect: copy metrics.jsonl "
                        "and config.json of the runs the notebooks read from --runs into results/; instructor: write "
                        "docs/instructor/solutions.md (every exercise, its reference answer and the checker's verdict "
                        "on it); slides: each notebook's key figure and diagrams as 16:9 PNGs for slides, with alt "
                        "texts (default --out docs/instructor/slides); html: a reading copy docs/course/NN_*.ipynb as "
                        "HTML whose math renders offline (a local MathJax copied beside it)")
    p.add_argument("notebooks", nargs="*", metavar="NOTEBOOK",
                   help="only these notebooks, by number or name (04, 04_arithmetic_transformer); default all")
    p.add_argument("--runs", type=Path, default=Path("runs"), help="collect: where the runs are (default runs)")
    p.add_argument("--out", type=Path, default=None,
                   help="instructor: the page (default docs/instructor/solutions.md); slides: the folder (default "
                        "docs/instructor/slides); html: the .html file for one notebook, or a folder (default "
                        "build/course-html/, not committed)")
    p.add_argument("--only", nargs="+", metavar="EXPERIMENT",
                   help="collect: only these experiments (e.g. bandit-grid/long-failures); the rest of results/ stays")
    p.add_argument("--finished", action="store_true",
                   help="collect: an experiment still training is copied as far as it got: its finished runs, "
                        "each unfinished one named and left out (a damaged log is still refused)")
    p.add_argument("--warm-starts", action="store_true",
                   help="collect: also copy the cached LoRA warm starts into results/warm-starts/, so that runs on "
                        "other machines start from the same adapters (a retrained one differs from CPU to CPU)")
    common = CommonFlags(p)
    common.json("build: one entry per notebook; check: the differences per notebook")


def run(args) -> int:
    from ..course import COURSE, RESULTS, build, check, collect
    from ..course.execute import notebooks
    from ..course.logs import size
    notebooks(args.notebooks)                           # an unknown name: one line, before any work
    if args.action in ("instructor", "slides", "html"):
        return _instructor(args)
    if args.action == "collect":
        skipped: list = []
        written = collect(args.runs, only=args.only, finished=args.finished, skipped=skipped)
        for folder, updates in skipped:
            print(f"left out (still training, {updates} updates logged): {folder}")
        if args.warm_starts:
            from ..lm.warmstart import commit
            for folder in commit():
                print(f"warm start committed: {folder}")
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


def _instructor(args) -> int:
    """The instructor pack's three commands (toy_rl.course.instructor, .slides, .html)."""
    if args.action == "instructor":
        from ..course.instructor import SOLUTIONS_PAGE, write_solutions
        path = write_solutions(args.out or SOLUTIONS_PAGE)
        print(f"wrote {path}")
        return 0
    if args.action == "slides":
        from ..course.slides import SLIDES, render_slides
        entries = render_slides(args.notebooks or None, args.out or SLIDES)
        if args.json:
            print_json(entries, ensure_ascii=False)
        else:
            for e in entries:
                print(f"{e['file']:<36} {e['bytes'] / 1000:6.1f} KB")
            print(f"index: {(args.out or SLIDES) / 'README.md'}")
        return 0
    from ..course.html import HTML_OUT, to_html
    from ..course.execute import notebooks
    chosen = notebooks(args.notebooks)
    out = args.out or HTML_OUT
    if len(chosen) > 1 and out.suffix == ".html":
        raise ValueError("--out names one .html file: give one notebook, or a folder")
    for path in chosen:
        target = out if out.suffix == ".html" else out / f"{path.stem}.html"
        print(f"wrote {to_html(path.stem, target)}")
    return 0
