"""`toy-rl tour`: the three clipping rules on one batch, from on-policy to very stale."""
from __future__ import annotations

import json
from pathlib import Path

from ..tour import DRIFTS, format_table, run_tour, save_tour

NAME = "tour"
HELP = "compare symmetric, clip-higher and BAPO clipping on synthetic batches of growing staleness"


def add_arguments(p):
    p.add_argument("--drift", type=float, nargs="+", default=list(DRIFTS),
                   help="staleness levels: std of the log-ratio (0 = on-policy); default %(default)s")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=Path("runs/tour"), help="folder for tour.jsonl, table.txt, tour.png")
    p.add_argument("--no-plot", action="store_true", help="skip the PNG")
    p.add_argument("--json", action="store_true", help="print the rows as one JSON list instead of a table")


def run(args) -> int:
    if any(d < 0 for d in args.drift):
        raise ValueError(f"--drift values must be >= 0; got {args.drift}")
    rows = run_tour(drifts=args.drift, seed=args.seed)
    paths = save_tour(rows, args.out, plot=not args.no_plot)
    if args.json:
        print(json.dumps(rows))
        return 0
    print("Each row: one rule on the same synthetic GRPO batch (16 prompts x 8 answers).")
    print("drift = std of log(pi_new/pi_old): 0 is on-policy, larger is staler data.\n")
    print(format_table(rows))
    print("\nHow to read it:")
    print("  - drift 0: ratio = 1, nothing is clipped, the three rules give the same loss.")
    print("  - clip_frac_low/high: share of tokens with no gradient (r < c_low with A < 0 / r > c_high with A > 0).")
    print("  - rho: positive-advantage tokens' share of the loss; BAPO raises its bounds until rho >= 0.4")
    print("    (rho_before is rho at its starting bounds [0.6, 1.2]).")
    print("\nSaved: " + ", ".join(str(p) for p in paths))
    return 0
