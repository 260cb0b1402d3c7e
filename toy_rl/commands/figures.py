"""`toy-rl figures`: the key plot of each notebook, from its full configuration, as small PNGs with captions."""
from __future__ import annotations

from pathlib import Path

from .common import CommonFlags, extra_outs, print_json, show_progress

NAME = "figures"
HELP = ("draw the key plot of each notebook (00-07) from its full configuration into small PNGs with a caption "
        "each (default docs/figures, with --overwrite); finished runs under runs/ are read back, not rerun")


def add_arguments(p):
    from ..report.figures import DOCS_FIGURES, FIGURES, SMOKE_OUT
    p.add_argument("--only", nargs="+", metavar="NAME",
                   help=f"only these figures: {', '.join(FIGURES)}, or their numbers 00-07 (default: all)")
    p.add_argument("--runs", type=Path, default=None,
                   help="root of the run folders (default runs; with --smoke a fresh temporary folder)")
    extra_outs(p, "--runs")
    p.add_argument("--overwrite", action="store_true",
                   help=f"replace the committed figures in {DOCS_FIGURES} (without it the command refuses to, and "
                        "--out DIR draws them elsewhere)")
    common = CommonFlags(p)
    common.train()
    common.out(DOCS_FIGURES, "folder for the PNGs, captions.json and README.md", smoke=SMOKE_OUT)
    common.json("the figure entries")
    common.no_progress()
    common.smoke("tiny versions in seconds (a check, not a result): never written to docs/figures; their runs go "
                 "to a temporary folder")


def run(args) -> int:
    from ..report.figures import check_overwrite, render_figures, select
    out = args.out
    check_overwrite(select(args.only), out, args.overwrite)  # an unknown name, or docs/figures: before any work
    entries = render_figures(args.only, out, smoke=args.smoke, runs=args.runs, progress=show_progress(args),
                             overwrite=args.overwrite)
    if args.json:
        print_json(entries, ensure_ascii=False)
        return 0
    for e in entries:
        if "skipped" in e:
            print(f"{e['name']:<20} skipped: {e['skipped']}")
        else:
            print(f"{e['name']:<20} {e['seconds']:6.1f} s {e['bytes'] / 1000:6.1f} KB  {out / e['file']}")
    print(f"\nCaptions: {out / 'captions.json'}  Index: {out / 'README.md'}")
    return 0
