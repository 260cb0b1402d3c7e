"""Rung 3's verdicts on the paper's claims 1-5, by the rules of :mod:`toy_rl.verdicts` (paired tests by seed,
Holm across the claims, direction named, results against counted, BAPO's regime stated).

    results = sweep(grid("lm", "add", RULES, (0, 2, 4), seeds=range(3)))     # toy_rl.experiments
    for line in claim_verdicts(run_summaries(results)):
        print(line)

The inputs are run summaries (:func:`toy_rl.experiments.run_summaries`, each with its ``seed``); runs are paired
by seed.
With one seed per (staleness, rule), the default on a CPU, no test can be made and every claim says so
("not testable: n = 1 < 2 seeds"): a difference of two single runs is not a result, however large it looks
(one held-out accuracy on 100 problems carries ±5 points of binomial noise).
"""
from __future__ import annotations

import math

import numpy as np

from ..plotting import RULE_NAMES
from ..experiments.controls import MIN_EFFECT
from ..verdicts import (BAPO_START, RHO0, Claim, Verdict, judge, paired, reached_text, regime_of,
                       verdict_line)
from .measures import (average, bapo_updates, dominance_shares, entropy_drop, group_runs, reached_share, roughness,
                       run_volatility)
from .run import binomial_se

CLAIMS = {1: "staleness → volatile reward, gradient spikes, entropy falls faster",
          2: "negative-advantage tokens dominate count and loss",
          3: "raising c_high keeps entropy up and helps; lowering c_low hurts (Fig. 7)",
          4: "BAPO keeps ρ near ρ0, entropy steadier, gradient norm smoother (Fig. 8)",
          5: "under staleness BAPO > clip-higher ≥ symmetric (Fig. 11)"}
POINTS = dict(scale=100, unit=" points", min_effect=MIN_EFFECT)   # under 1 point: neither way


def _by_seed(ss: list[dict]) -> dict:
    return {s.get("seed", i): s for i, s in enumerate(ss)}


def compare(what: str, a: str, a_runs: list[dict], b: str, b_runs, expect: str, value, **kw):
    """:func:`toy_rl.verdicts.paired` of ``value(summary)`` over the seeds both sets of runs have (``b_runs`` a
    number: a one-sample test)."""
    A = _by_seed(a_runs)
    if isinstance(b_runs, (int, float)):
        seeds = sorted(A)
        return paired(what, a, [value(A[x]) for x in seeds], b, float(b_runs), expect, **kw)
    B = _by_seed(b_runs)
    seeds = sorted(set(A) & set(B))
    return paired(what, a, [value(A[x]) for x in seeds], b, [value(B[x]) for x in seeds], expect, **kw)


def key(name: str):
    """A summary number as a value function (None -> NaN)."""
    return lambda s: math.nan if s.get(name) is None else s[name]


def claim_checks(runs: list[dict], eval_size: int = 100) -> list[Verdict]:
    """Claims 1-5 judged on logged runs (:func:`toy_rl.experiments.run_summaries`, on-policy runs included).
    ``eval_size``: the held-out problems behind each accuracy (only to state its binomial noise)."""
    groups = group_runs(runs)
    ks = sorted({k for k, _ in groups})
    stale = [k for k in ks if k > 0]
    noise = f"one accuracy on {eval_size} problems carries ±{binomial_se(0.5, eval_size):.3f} of binomial noise"
    bapo_runs = [s for k in stale for s in groups.get((k, "bapo"), [])]
    rho0 = RHO0
    u = bapo_updates(bapo_runs)
    regime = regime_of(u["rho_before"], u["c_low"], u["c_high"], rho0, BAPO_START)
    B = regime.bapo()

    n_k = {r: sum((k, r) in groups for k in ks) for r in RULE_NAMES}
    rule1 = max(RULE_NAMES, key=lambda r: n_k[r]) if max(n_k.values(), default=0) > 1 else None
    if rule1 is None:
        c1 = Claim(1, CLAIMS[1], untestable="needs one rule at two or more stalenesses")
    else:
        kk = [k for k in ks if (k, rule1) in groups]
        lo, hi = groups[kk[0], rule1], groups[kk[-1], rule1]
        a, b = f"staleness {kk[-1]}", f"staleness {kk[0]}"
        c1 = Claim(1, CLAIMS[1], [
            compare("entropy drop over the run (first − last 5 updates)", a, hi, b, lo, ">", entropy_drop),
            compare("largest gradient norm", a, hi, b, lo, ">", key("grad_norm_max")),
            compare("std of the batch reward's change per update", a, hi, b, lo, ">", run_volatility)],
            f"{rule1} rule")

    k2 = max((k for k in ks if (k, "symmetric") in groups), default=None)
    if k2 is None:
        c2 = Claim(2, CLAIMS[2], untestable="needs symmetric runs")
    else:
        ss = groups[k2, "symmetric"]
        who = f"symmetric, staleness {k2}"
        c2 = Claim(2, CLAIMS[2], [
            compare("share of updates with more A < 0 than A > 0 tokens", who, ss, "0.5", 0.5, ">",
                    lambda s: dominance_shares(s)["count"]),
            compare("share of updates where A < 0 tokens carry most of the loss (ρ < 0.5)", who, ss, "0.5", 0.5, ">",
                    lambda s: dominance_shares(s)["mass"]),
            compare(f"answer length (tokens), {who}", "failed", ss, "correct", 0.0, ">",
                    lambda s: key("len_wrong")(s) - key("len_correct")(s))],
            f"all runs: tokens with A < 0 {average(runs, 'neg_adv_frac'):.2f} vs A > 0 "
            f"{average(runs, 'pos_adv_frac'):.2f} of the batch")

    k3 = [k for k in stale if (k, "symmetric") in groups and (k, "clip-higher") in groups]
    if not k3:
        c3 = Claim(3, CLAIMS[3], untestable="needs symmetric and clip-higher at a staleness > 0")
    else:
        tests = [t for k in k3 for t in (
            compare(f"final entropy (last 5 updates), staleness {k}", "clip-higher", groups[k, "clip-higher"],
                    "symmetric", groups[k, "symmetric"], ">", key("entropy_last")),
            compare(f"final accuracy, staleness {k}", "clip-higher", groups[k, "clip-higher"], "symmetric",
                    groups[k, "symmetric"], ">", key("final_accuracy"), **POINTS))]
        if regime.ran_as_fixed:
            tests += [compare(f"final accuracy, staleness {k}", B, groups[k, "bapo"], "symmetric",
                              groups[k, "symmetric"], "<", key("final_accuracy"), **POINTS)
                      for k in k3 if (k, "bapo") in groups]
        c3 = Claim(3, CLAIMS[3], tests,
                   ("lowering c_low: BAPO kept its starting bounds, i.e. symmetric with c_low lowered to 0.6"
                    if regime.ran_as_fixed else "lowering c_low is not isolated here") + f"; {noise}",
                   regime if regime.ran_as_fixed else None)

    k4 = [k for k in stale if (k, "bapo") in groups and (k, "symmetric") in groups]
    if not bapo_runs or not k4:
        c4 = Claim(4, CLAIMS[4], untestable="needs BAPO and symmetric at a staleness > 0")
    else:
        need = [s for s in bapo_runs if math.isfinite(reached_share(s, rho0))]
        never = None if need else "the search never had to move (ρ before it ≥ ρ0 in every update)"
        reach = "" if never else reached_text(float(np.nanmean([reached_share(s, rho0) for s in need]))) + "; "
        c4 = Claim(4, CLAIMS[4], [t for k in k4 for t in (
            compare(f"entropy drop over the run, staleness {k}", B, groups[k, "bapo"], "symmetric",
                    groups[k, "symmetric"], "<", entropy_drop),
            compare(f"gradient-norm roughness (mean |change per update|), staleness {k}", B, groups[k, "bapo"],
                    "symmetric", groups[k, "symmetric"], "<", roughness))],
            f"{reach}mean bounds [{average(bapo_runs, 'c_low'):.2f}, {average(bapo_runs, 'c_high'):.2f}] (paper: "
            f"~[0.7, 2.0-2.2]); ρ before the search {average(bapo_runs, 'rho_before'):.3f}, after "
            f"{average(bapo_runs, 'rho'):.3f}", regime, never)

    k5 = [k for k in stale if all((k, r) in groups for r in RULE_NAMES)]
    if not k5:
        c5 = Claim(5, CLAIMS[5], untestable="needs the three rules at a staleness > 0")
    else:
        c5 = Claim(5, CLAIMS[5], [t for k in k5 for t in (
            compare(f"final accuracy, staleness {k}", B, groups[k, "bapo"], "clip-higher", groups[k, "clip-higher"],
                    ">", key("final_accuracy"), **POINTS),
            compare(f"final accuracy, staleness {k}", "clip-higher", groups[k, "clip-higher"], "symmetric",
                    groups[k, "symmetric"], ">=", key("final_accuracy"), **POINTS))],
            f"clip-higher ≥ symmetric is a not-worse part: only a significant loss counts (against); {noise}", regime)
    return judge([c1, c2, c3, c4, c5])


def claim_verdicts(runs: list[dict], eval_size: int = 100) -> list[str]:
    """:func:`claim_checks` as one line per claim (:func:`toy_rl.verdicts.verdict_line`), as notebook 06 prints
    them and the rung-3 report shows them."""
    return [verdict_line(v) for v in claim_checks(runs, eval_size)]
