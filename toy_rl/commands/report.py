"""`toy-rl report`: one rung's default comparison as a one-page report (Markdown or self-contained HTML)."""
from __future__ import annotations

import sys
from pathlib import Path

NAME = "report"
HELP = ("run a rung's default comparison (1 bandit, 2 arithmetic transformer, 3 LoRA on SmolLM2) and write a "
        "one-page report: what was run, key plots, summary table with 95%% bands and tests against symmetric, verdicts")


def add_arguments(p):
    from ..report.document import FORMATS
    from ..report.rungs import RUNGS
    p.add_argument("--rung", type=int, required=True, choices=RUNGS, help="which rung: 1, 2 or 3")
    p.add_argument("--format", choices=FORMATS, default=None,
                   help="html (one self-contained file, images embedded) or md (PNGs written beside it); "
                        "default: from the --out suffix, else html")
    p.add_argument("--out", type=Path, default=None,
                   help="the report file, or a folder for rung<N>.<format> (default runs/report/rung<N>.<format>)")
    p.add_argument("--smoke", action="store_true", help="tiny settings in seconds (a check, not a result)")
    p.add_argument("--seeds", type=int, default=None,
                   help="seeds per rule and staleness (default: rung 1: 20, rung 2: 5, rung 3: 1)")
    p.add_argument("--steps", type=int, default=None,
                   help="updates per run (default: rung 1: 300, rung 2: 200, rung 3: 40)")
    p.add_argument("--runs", type=Path, default=None,
                   help="root of the run folders (default runs; with --smoke a fresh temporary folder)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")


def run(args) -> int:
    from ..report import build_report, write_report
    from ..report.document import check_out
    from ..report.rungs import check_count
    suffix = args.out.suffix.lstrip(".") if args.out is not None else ""
    fmt = args.format or (suffix if suffix in ("html", "md") else "html")
    out = check_out(args.out or Path("runs/report") / f"rung{args.rung}.{fmt}", fmt)   # before any long work
    check_count("seeds", args.seeds)
    check_count("steps", args.steps)
    progress = not args.no_progress and sys.stderr.isatty()
    report = build_report(args.rung, smoke=args.smoke, seeds=args.seeds, steps=args.steps, runs=args.runs,
                          progress=progress)
    files = write_report(report, out, fmt)
    print(report.title)
    for label, value in report.facts:
        print(f"  {label}: {value}")
    print(f"\n{len(report.figures)} figures, {len(report.table.rows)} table rows, {len(report.verdicts)} verdicts")
    print("Written: " + ", ".join(str(f) for f in files))
    return 0
