"""`toy-rl figures`: the key plot of each notebook, from its full configuration, as small PNGs with captions."""
from __future__ import annotations

import json
import sys
from pathlib import Path

NAME = "figures"
HELP = ("draw the key plot of each notebook (00-06) from its full configuration into small PNGs with a caption "
        "each (default docs/figures); finished runs under runs/ are read back, not rerun")


def add_arguments(p):
    from ..report.figures import DOCS_FIGURES, FIGURES, SMOKE_OUT
    p.add_argument("--only", nargs="+", metavar="NAME",
                   help=f"only these figures: {', '.join(FIGURES)}, or their numbers 00-06 (default: all)")
    p.add_argument("--out", type=Path, default=None,
                   help=f"folder for the PNGs, captions.json and README.md (default {DOCS_FIGURES}; with --smoke "
                        f"{SMOKE_OUT})")
    p.add_argument("--smoke", action="store_true",
                   help="tiny versions in seconds (a check, not a result): never written to docs/figures; their runs go "
                        "to a temporary folder")
    p.add_argument("--runs", type=Path, default=None,
                   help="root of the run folders (default runs; with --smoke a fresh temporary folder)")
    p.add_argument("--json", action="store_true", help="print the figure entries as one JSON list")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")


def run(args) -> int:
    from ..report.figures import DOCS_FIGURES, SMOKE_OUT, render_figures, select
    select(args.only)                                        # an unknown name fails before any work
    out = args.out or (SMOKE_OUT if args.smoke else DOCS_FIGURES)
    progress = not args.json and not args.no_progress and sys.stderr.isatty()
    entries = render_figures(args.only, out, smoke=args.smoke, runs=args.runs, progress=progress)
    if args.json:
        print(json.dumps(entries, ensure_ascii=False))
        return 0
    for e in entries:
        if "skipped" in e:
            print(f"{e['name']:<20} skipped: {e['skipped']}")
        else:
            print(f"{e['name']:<20} {e['seconds']:6.1f} s {e['bytes'] / 1000:6.1f} KB  {out / e['file']}")
    print(f"\nCaptions: {out / 'captions.json'}  Index: {out / 'README.md'}")
    return 0
