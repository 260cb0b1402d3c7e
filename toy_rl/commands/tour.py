"""`toy-rl tour`: the three clipping rules on one batch, from on-policy to very stale.

No --smoke, --steps or --seeds: the tour trains nothing, it evaluates one synthetic batch per staleness
level (about a second), so there is nothing to shrink or repeat."""
from __future__ import annotations

from pathlib import Path

from ..tour import DRIFTS, format_table, run_tour, save_tour
from .common import CommonFlags, nonnegative_float, print_json

NAME = "tour"
HELP = "compare symmetric, clip-higher and BAPO clipping on synthetic batches of growing staleness"


def add_arguments(p):
    p.add_argument("--drift", type=nonnegative_float, nargs="+", default=list(DRIFTS),
                   help="staleness levels: std of the log-ratio (0 = on-policy); default %(default)s")
    p.add_argument("--no-plot", action="store_true", help="skip the PNG")
    common = CommonFlags(p)
    common.seed("the random seed of the synthetic batch")
    common.out(Path("runs/tour"), "folder for tour.jsonl, table.txt, tour.png")
    common.json("the rows")
    common.no_progress(bars=False)


def run(args) -> int:
    rows = run_tour(drifts=args.drift, seed=args.seed)
    paths = save_tour(rows, args.out, plot=not args.no_plot)
    if args.json:
        print_json(rows)
        return 0
    print("Each row: one rule on the same synthetic GRPO batch (16 prompts x 8 answers).")
    print("drift = std of log(pi_new/pi_old): 0 is on-policy, larger is staler data.\n")
    print(format_table(rows))
    print("\nHow to read it:")
    print("  - drift 0: ratio = 1, nothing is clipped, the three rules give the same loss.")
    print("  - clip_frac_low/high: share of tokens with no gradient (r < c_low with A < 0 / r > c_high with A > 0).")
    print("  - rho: positive-advantage tokens' share of the loss; BAPO raises its bounds until rho >= 0.4")
    print("    (rho_before is rho at its starting bounds [0.6, 1.2]). Here wrong answers are longer than right ones,")
    print("    so rho < 0.4 even on-policy; with nothing clipped there, wider bounds cannot raise it, and BAPO runs to")
    print("    the end of its path (0.9, 3.0) without reaching its target: 'ρ0 reached' says no.")
    print("\nSaved: " + ", ".join(str(p) for p in paths))
    return 0
