"""`toy-rl report`: one rung's default comparison as a one-page report (Markdown or self-contained HTML)."""
from __future__ import annotations

from pathlib import Path

from .common import CommonFlags, check_out, extra_outs, print_json, show_progress

NAME = "report"
HELP = ("run a rung's default comparison (1 bandit, 2 arithmetic transformer, 3 LoRA on SmolLM2) and write a "
        "one-page report: what was run, key plots, summary table with 95% bands and tests against symmetric, verdicts")


def add_arguments(p):
    from ..report.document import FORMATS
    from ..report.rungs import RUNGS
    p.add_argument("--rung", type=int, required=True, choices=RUNGS, help="which rung: 1, 2 or 3")
    p.add_argument("--format", choices=FORMATS, default=None,
                   help="html (one self-contained file, images embedded) or md (PNGs written beside it); "
                        "default: from the --out suffix, else html")
    p.add_argument("--runs", type=Path, default=None,
                   help="root of the run folders (default runs; with --smoke a fresh temporary folder)")
    extra_outs(p, "--runs")
    common = CommonFlags(p)
    from ..arithmetic.presets import DEFAULT as RUNG2_PRESET, get_preset
    from ..bandit.config import BanditConfig
    from ..lm.run import DEFAULTS as LORA
    from ..report.runs import (BANDIT_COMPARE, BANDIT_COMPARE_SMOKE, COMPARE_SEEDS, COMPARE_SMOKE_SEEDS, RUNG3,
                               RUNG3_SMOKE)
    by_rung = lambda a, b, c: f"rung 1: {a}, rung 2: {b}, rung 3: {c}"                          # noqa: E731
    seeds = by_rung(BANDIT_COMPARE["seeds"], COMPARE_SEEDS, RUNG3["seeds"])
    smoke_seeds = by_rung(BANDIT_COMPARE_SMOKE["seeds"], COMPARE_SMOKE_SEEDS, RUNG3_SMOKE["seeds"])
    steps = by_rung(BanditConfig().steps, get_preset(RUNG2_PRESET).rl["steps"], LORA["steps"])
    smoke_steps = by_rung(*(smoke_steps_of(rung) for rung in (1, 2, 3)))
    common.seeds(None, help=f"seeds per rule (default {seeds}; --smoke: {smoke_seeds})")
    common.steps(None, help=f"updates per run (default {steps}; --smoke: {smoke_steps})")
    common.out(None, "the report file, or a folder for rung<N>.<format> (default runs/report/rung<N>.<format>)",
               kind="file-or-dir")
    common.json("the files written and the report's facts, table and verdicts")
    common.no_progress()
    common.smoke("tiny settings in seconds (a check, not a result)")


def smoke_steps_of(rung: int) -> int:
    """The most updates a ``--smoke`` report runs on ``rung``."""
    from ..arithmetic.presets import SMOKE_RL
    from ..lm.run import SMOKE as LORA_SMOKE
    from ..report.runs import BANDIT_COMPARE_SMOKE
    return {1: BANDIT_COMPARE_SMOKE["steps"], 2: SMOKE_RL["steps"], 3: LORA_SMOKE["steps"]}[rung]


def run(args) -> int:
    from ..report import build_report, write_report
    if args.smoke and args.steps is not None and args.steps > smoke_steps_of(args.rung):     # as settle() does
        raise ValueError(f"--steps {args.steps} does not go with --smoke, whose rung-{args.rung} runs make at most "
                         f"{smoke_steps_of(args.rung)} updates; drop --smoke for a longer run, or ask for fewer steps")
    suffix = args.out.suffix.lstrip(".") if args.out is not None else ""
    fmt = args.format or (suffix if suffix in ("html", "md") else "html")
    out = check_out(args.out or Path("runs/report") / f"rung{args.rung}.{fmt}", "file-or-dir")  # creates nothing
    report = build_report(args.rung, smoke=args.smoke, seeds=args.seeds, steps=args.steps, runs=args.runs,
                          progress=show_progress(args))
    files = write_report(report, out, fmt)
    if args.json:
        print_json(dict(rung=report.rung, title=report.title, smoke=report.smoke, files=[str(f) for f in files],
                        facts=dict(report.facts), figures=[name for name, _, _ in report.figures],
                        table=dict(headers=report.table.headers, rows=report.table.rows, note=report.table.note),
                        verdicts=report.verdicts, notes=report.notes))
        return 0
    print(report.title)
    for label, value in report.facts:
        print(f"  {label}: {value}")
    print(f"\n{len(report.figures)} figures, {len(report.table.rows)} table rows, {len(report.verdicts)} verdicts")
    print("Written: " + ", ".join(str(f) for f in files))
    return 0
