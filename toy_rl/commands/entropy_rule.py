"""`toy-rl entropy-rule`: check the Entropy-Clip Rule (BAPO Eq. 6–7, App. B) on random softmax instances."""
from __future__ import annotations

from ..bandit.entropy_rule import BASELINES, verify
from ..bandit.quadrants import LOWERS_ENTROPY, QUADRANTS
from .common import CommonFlags, int_at_least, print_json

NAME = "entropy-rule"
HELP = "check ΔH ≈ −Cov(log π, Δz) and the paper's clipped form on random instances (exact vs first order)"


def add_arguments(p):
    common = CommonFlags(p)
    common.sized("--instances", 10_000, 500, "random instances", group=p, metavar="N")
    p.add_argument("--tokens", type=int_at_least(2), default=16, help="K, tokens per instance (default %(default)s)")
    p.add_argument("--baseline", default="current", choices=BASELINES,
                   help="advantages centred under the current or the behaviour policy (default %(default)s)")
    common.seed("the random seed of the instances")
    common.smoke("500 instances instead of 10,000 (a check, not a result)")
    common.json("the report")
    common.no_progress(bars=False)


def run(args) -> int:
    report = verify(instances=args.instances, n_tokens=args.tokens, seed=args.seed, baseline=args.baseline)
    if args.json:
        print_json(report)
        return 0
    f = report["forms"]
    print(f"Entropy-Clip Rule on {report['instances']} random instances (K = {report['n_tokens']}, "
          f"seed {report['seed']}, advantages centred under the {report['baseline']} policy), "
          f"{report['seconds']:.2f} s")
    print(f"step sizes η = {report['etas']}; sign and relative error at η = {report['eta_ref']}, over predictions "
          f"not ~0 (|ΔH_pred| >= {report['zero_tol']}·η)\n")
    print(f"{'prediction':<52}{'sign agrees':>12}{'median rel err':>16}{'error slope':>13}")
    names = {"first_order_vanilla": "−Cov(log π, Δz), vanilla step",
             "first_order_natural": "−Cov(log π, Δz), natural step",
             "paper_natural": "−η·Cov(log π, A·X + C) vs natural step (Eq. 6–7)",
             "paper_vanilla": "−η·Cov(log π, π·(A·X + C)) vs vanilla step",
             "paper_form_on_vanilla_step": "Eq. 6–7 used for a vanilla step (sign only)"}
    for key, label in names.items():
        row = f[key]
        rel = f"{row['median_rel_error']:.2e}" if "median_rel_error" in row else "-"
        slope = f"{row['error_slope']:.3f}" if "error_slope" in row else "-"
        print(f"{label:<52}{row['sign_agreement']:>12.4f}{rel:>16}{slope:>13}")
    print(f"\nfirst-order identity, both modes pooled: sign agreement {report['sign_agreement']:.4f}, "
          f"median relative error {report['median_rel_error']:.2e}, error ∝ η^{report['error_slope']:.3f} (2 expected)")
    print(f"quadrant shares add up to the first-order ΔH to within {report['quadrant_sum_error']:.1e}\n")
    print("Quadrants (App. B.4), mean first-order ΔH per instance at η_ref, natural PG; clip = share of the"
          " quadrant's sampled tokens clipped")
    print(f"{'rule':<12}{'c_low':>7}{'c_high':>8}  " + "".join(f"{q:>24}" for q in QUADRANTS))
    for rule, row in report["quadrants"].items():
        cells = "".join(f"{row[q]['dH_natural']:>+12.2e} clip {row[q]['clip_frac']:>5.3f}" for q in QUADRANTS)
        print(f"{rule:<12}{row['c_low']:>7.2f}{row['c_high']:>8.2f}  {cells}")
    print("expected signs: " + ", ".join(f"{q} {'lowers' if LOWERS_ENTROPY[q] else 'raises'} H" for q in QUADRANTS))
    return 0
