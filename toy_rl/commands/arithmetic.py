"""`toy-rl arithmetic`: rung 2, RL on the small arithmetic transformer under staleness and partial rollout."""
from __future__ import annotations

import json
from pathlib import Path

from ..arithmetic import DEFAULTS, entropy_check
from ..experiments import experiment_name, format_table, grid, summarize, sweep
from ..threads import set_threads
from ..arithmetic.tasks import TASKS
from . import expand_rules

NAME = "arithmetic"
HELP = "RL on a small transformer (arithmetic tasks) with symmetric / clip-higher / BAPO under staleness"


def add_arguments(p):
    p.add_argument("--task", default="add", help=f"one of {', '.join(TASKS)} (default %(default)s)")
    p.add_argument("--rule", nargs="+", default=["all"], help="symmetric, clip-higher, bapo, or all")
    p.add_argument("--staleness", type=int, nargs="+", default=None,
                   help="K values (0 = on-policy); default 0, or none when --partial is given alone")
    p.add_argument("--mode", default="reuse", choices=("reuse", "lag"),
                   help="reuse: a batch serves K+1 updates; lag: sampled K updates behind")
    p.add_argument("--partial", type=int, default=None, metavar="BUDGET",
                   help="run partial rollout with this many tokens per answer per step (besides --staleness "
                        "when that is given too)")
    p.add_argument("--steps", type=int, default=DEFAULTS["steps"])
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--prompts", type=int, default=DEFAULTS["prompts"], help="prompts per update (default %(default)s)")
    p.add_argument("--group-size", type=int, default=DEFAULTS["group_size"],
                   help="answers per prompt, G (default %(default)s)")
    p.add_argument("--lr", type=float, default=DEFAULTS["lr"])
    p.add_argument("--device", default="auto")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (1 is often fastest here)")
    p.add_argument("--out", type=Path, default=Path("runs"))
    p.add_argument("--json", action="store_true", help="print the summary rows as JSON")
    p.add_argument("--entropy-check", action="store_true",
                   help="instead of training: check ΔH ≈ −Cov(log π, Δz) for one update of the warm-started model")


def run(args) -> int:
    rules = expand_rules(args.rule)
    if args.staleness is None:                       # --partial alone runs only the partial-rollout scenario
        args.staleness = [] if args.partial is not None else [0]
    if any(k < 0 for k in args.staleness):
        raise ValueError(f"--staleness must be >= 0 (0 = on-policy); got {args.staleness}")
    if args.partial is not None and args.partial < 1:
        raise ValueError(f"--partial (token budget per step) must be >= 1; got {args.partial}")
    for flag, value, low in (("--seeds", args.seeds, 1), ("--prompts", args.prompts, 1),
                             ("--group-size", args.group_size, 2)):
        if value < low:
            raise ValueError(f"{flag} must be >= {low}; got {value}")
    set_threads(args.threads)
    if args.entropy_check:
        return _entropy_check(args, rules)
    results = sweep(grid("arithmetic", args.task, rules, args.staleness, range(args.seeds), args.mode, args.partial,
                         out=args.out, progress=not args.json, steps=args.steps, lr=args.lr, device=args.device,
                         prompts=args.prompts, group_size=args.group_size, threads=args.threads))
    rows = summarize(results)
    if args.json:
        print(json.dumps(rows))
        return 0
    print(format_table(rows))
    print("\nfinal_accuracy: greedy accuracy on the fixed held-out set after the last update (± half the 95% "
          "t-interval over seeds); auc: accuracy averaged over training; diff/p vs symmetric: paired t-test by seed "
          "in the same scenario; other columns: means over updates.")
    print(f"Metrics (one JSON line per update): {args.out / experiment_name('arithmetic', args.task)}/<scenario>/"
          "<rule>/seed<k>/metrics.jsonl")
    return 0


def _entropy_check(args, rules) -> int:
    report = entropy_check(args.task, rules, device=args.device, seed=0)
    keys = ("positions", "correlation", "sign_agreement", "median_rel_error", "quadrant_dH", "quadrant_clipped")
    rows = {r: {k: report[r][k] for k in keys} for r in rules}
    if args.json:
        print(json.dumps({"rules": rows, "error_slope": report["error_slope"]}))
        return 0
    for r, row in rows.items():
        print(f"{r:<12} positions {row['positions']}, correlation {row['correlation']:.4f}, "
              f"sign agreement {row['sign_agreement']:.4f}, median relative error {row['median_rel_error']:.4f}")
        for q, dh in row["quadrant_dH"].items():
            print(f"    {q:<14} ΔH {dh:+.4f}   clipped {row['quadrant_clipped'][q]:.2f}")
    print(f"error slope against η (log-log, {rules[-1]}): {report['error_slope']:.2f} (≈ 2: first order)")
    return 0
