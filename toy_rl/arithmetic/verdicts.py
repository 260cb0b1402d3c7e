"""Rung 2's verdicts on the paper's claims 1-5, by the rules of :mod:`toy_rl.verdicts` (paired tests by seed,
Holm across the claims, direction named, results against counted, BAPO's regime stated).

    results, _ = load_or_sweep("runs/arithmetic", "add", (0, 2, 4, 8), seeds=5)
    checks = claim_checks(results, ["reuse-2", "reuse-4", "reuse-8"])     # list[Verdict]
    for line in claim_verdicts(results, ["reuse-2", "reuse-4", "reuse-8"]):
        print(line)

The per-seed numbers are :func:`toy_rl.arithmetic.measures.seed_stats`. Runs are paired by their seed id (the
``seed`` every record of :func:`toy_rl.experiments.sweep` / :func:`~toy_rl.experiments.load` carries): a seed
gives every rule and scenario the same warm start and first rollout. Cells with different seeds are compared on
the seeds both have.
"""
from __future__ import annotations

import warnings

import numpy as np

from ..stats import mean_ignoring_nan
from ..experiments.controls import MIN_EFFECT
from ..verdicts import (BAPO_START, RHO0, Claim, Verdict, judge, paired, reached_text, regime_of,
                       verdict_line)
from .measures import seed_stats, updates_of

CLAIMS = {1: "more staleness: reward more volatile, gradient-norm spikes, entropy falls faster",
          2: "negative-advantage tokens dominate count and loss (longer failed answers)",
          3: "raising c_high keeps entropy up and helps; lowering c_low hurts",
          4: "BAPO keeps ρ near ρ0, entropy steadier, gradient norm smoother",
          5: "BAPO > clip-higher >= symmetric (final accuracy)"}
POINTS = dict(scale=100, unit=" points", min_effect=MIN_EFFECT)   # under 1 point: neither way        # accuracies are printed in points


def _pct(x: float) -> str:
    return "n/a" if not np.isfinite(x) else f"{x:.0%}"


def by_seed(stats: dict) -> dict:
    """:func:`~toy_rl.arithmetic.measures.seed_stats` of one cell as {name: {seed id: value}}."""
    ids = stats["seed"].tolist()
    if len(set(ids)) != len(ids):
        raise ValueError(f"runs of one (scenario, rule) need distinct seeds; got seed ids {ids}")
    return {k: dict(zip(ids, v.tolist())) for k, v in stats.items() if k != "seed"}


def compare(what: str, a: str, a_values: dict, b: str, b_values, expect: str, **kw):
    """:func:`toy_rl.verdicts.paired` of per-seed values ({seed id: value}) on the seeds both sides have, or
    against one number (``b_values`` a float: a one-sample test)."""
    if not isinstance(b_values, dict):
        return paired(what, a, list(a_values.values()), b, b_values, expect, **kw)
    seeds = sorted(set(a_values) & set(b_values))
    return paired(what, a, [a_values[x] for x in seeds], b, [b_values[x] for x in seeds], expect, **kw)


def bapo_regime(results: dict, scenarios):
    """BAPO's regime over the updates of its runs in ``scenarios`` that had advantages at all
    (:func:`toy_rl.verdicts.regime_of`)."""
    recs = [r for s in scenarios if (s, "bapo") in results for run in results[s, "bapo"] for r in updates_of(run)
            if (r.get("neg_adv_frac") or 0) + (r.get("pos_adv_frac") or 0) > 0]     # no advantage: no ρ to speak of
    values = lambda k: [np.nan if r.get(k) is None else r[k] for r in recs]
    rho0 = next((r["rho_target"] for r in recs if r.get("rho_target") is not None), RHO0)
    return regime_of(values("rho_before"), values("c_low"), values("c_high"), rho0, BAPO_START)


def _per_seed_mean(rows: list[dict]) -> dict:
    """Mean over scenarios of per-seed values ({seed id: value}, NaN-aware), on the seeds every scenario has."""
    seeds = sorted(set.intersection(*(set(r) for r in rows)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return {x: float(np.nanmean([r[x] for r in rows])) for x in seeds}


def _mean(values) -> float:
    """Mean over seeds ({seed id: value}, or any numbers), NaN ignored."""
    return mean_ignoring_nan(list(values.values()) if isinstance(values, dict) else values)


def claim_checks(results: dict, stale: list[str], base: str = "on-policy", focus=None) -> list[Verdict]:
    """Claims 1-5 judged on rung-2 runs ``{(scenario, rule): [records per seed]}``.

    ``stale``: the off-policy scenarios (e.g. reuse-2, reuse-4, reuse-8, or partial-8); ``base``: the
    on-policy scenario they are compared with (only its symmetric runs are used: on-policy the rules
    coincide); ``focus``: the scenarios claim 5 is about (default: those of ``stale`` named reuse-2 /
    reuse-4, else all of ``stale``).
    """
    S = {key: by_seed(seed_stats(runs)) for key, runs in results.items()}
    most = stale[-1]
    sb, sk = S[base, "symmetric"], S[most, "symmetric"]
    regime = bapo_regime(results, stale)
    B = regime.bapo()
    m = _mean

    g0, g1 = m(sb["groups"]), m(sk["groups"])
    caveat = ("" if not (g1 < 0.9 * g0) else
              f"Caveat: {most} trains on {g1:.1f} groups per update against {g0:.0f} in {base}, and a smaller batch "
              "alone makes the sampled reward and the gradient noisier")
    c1 = Claim(1, CLAIMS[1], [
        compare("std of the sampled reward's change per update", most, sk["reward_volatility"], base,
                sb["reward_volatility"], ">"),
        compare("largest gradient norm", most, sk["grad_norm_max"], base, sb["grad_norm_max"], ">"),
        compare("final entropy (lower: a faster fall)", most, sk["final_entropy"], base, sb["final_entropy"], "<")],
        "symmetric rule" + (f". {caveat}" if caveat else ""))

    scen = [base] + list(stale)
    c2 = Claim(2, CLAIMS[2], [
        compare("share of updates with more A < 0 than A > 0 tokens", f"symmetric, {most}", sk["neg_count"], "0.5",
                0.5, ">"),
        compare("share of updates where A < 0 tokens carry most of the loss (ρ < 0.5)", f"symmetric, {most}",
                sk["neg_mass"], "0.5", 0.5, ">"),
        compare(f"answer length (tokens), symmetric, {most}", "failed", sk["len_wrong"], "correct", sk["len_correct"],
                ">")],
        f"symmetric, starting from {_pct(m(sb['start_accuracy']))} held-out accuracy; first quarter / the rest, "
        "by count: " + ", ".join(f"{s} {_pct(m(S[s, 'symmetric']['neg_count_early']))} / "
                                f"{_pct(m(S[s, 'symmetric']['neg_count_late']))}" for s in scen)
        + "; by loss mass: " + ", ".join(f"{s} {_pct(m(S[s, 'symmetric']['neg_mass_early']))} / "
                                         f"{_pct(m(S[s, 'symmetric']['neg_mass_late']))}" for s in scen))

    tests3 = [t for s in stale for t in (
        compare(f"final entropy, {s}", "clip-higher", S[s, "clip-higher"]["final_entropy"], "symmetric",
                S[s, "symmetric"]["final_entropy"], ">"),
        compare(f"final accuracy, {s}", "clip-higher", S[s, "clip-higher"]["final_accuracy"], "symmetric",
                S[s, "symmetric"]["final_accuracy"], ">", **POINTS))]
    if regime.ran_as_fixed:             # BAPO = symmetric with c_low lowered to 0.6: the c_low half is testable
        tests3 += [compare(f"final accuracy, {s}", B, S[s, "bapo"]["final_accuracy"], "symmetric",
                           S[s, "symmetric"]["final_accuracy"], "<", **POINTS) for s in stale]
        low = "lowering c_low: BAPO kept its starting bounds, i.e. symmetric with c_low lowered to 0.6"
    else:
        low = "lowering c_low is not isolated here (BAPO's search moved its bounds)"
    c3 = Claim(3, CLAIMS[3], tests3, low, regime if regime.ran_as_fixed else None)

    need = _per_seed_mean([S[s, "bapo"]["reached_when_needed"] for s in stale])
    never = (None if np.isfinite(list(need.values())).any() else
             "the search never had to move (ρ before it ≥ ρ0 in every update)")
    reach = "" if never else reached_text(float(np.nanmean(list(need.values())))) + "; "
    min_before = np.nanmin([v for s in stale for v in S[s, "bapo"]["rho_before_min"].values()])
    c4 = Claim(4, CLAIMS[4], [t for s in stale for t in (
        compare(f"entropy drop over the run, {s}", B, S[s, "bapo"]["entropy_drop"], "symmetric",
                S[s, "symmetric"]["entropy_drop"], "<"),
        compare(f"gradient-norm roughness (mean |change per update|), {s}", B, S[s, "bapo"]["grad_roughness"],
                "symmetric", S[s, "symmetric"]["grad_roughness"], "<"))],
        f"{reach}lowest ρ before the search {min_before:.3f}; "
        f"bounds average c_low {m([m(S[s, 'bapo']['c_low']) for s in stale]):.2f}, c_high "
        f"{m([m(S[s, 'bapo']['c_high']) for s in stale]):.2f} (paper: ≈ 0.7 and 2.0–2.2)", regime, never)

    focus = focus or [s for s in stale if s in ("reuse-2", "reuse-4")] or list(stale)
    c5 = Claim(5, CLAIMS[5], [t for s in focus for t in (
        compare(f"final accuracy, {s}", B, S[s, "bapo"]["final_accuracy"], "clip-higher",
                S[s, "clip-higher"]["final_accuracy"], ">", **POINTS),
        compare(f"final accuracy, {s}", "clip-higher", S[s, "clip-higher"]["final_accuracy"], "symmetric",
                S[s, "symmetric"]["final_accuracy"], ">=", **POINTS))],
        "clip-higher >= symmetric is a not-worse part: only a significant loss counts (against)", regime)
    return judge([c1, c2, c3, c4, c5])


def claim_verdicts(results: dict, stale: list[str], base: str = "on-policy", focus=None) -> list[str]:
    """:func:`claim_checks` as one line per claim (:func:`toy_rl.verdicts.verdict_line`), as notebooks 04-05
    print them and the rung-2 report shows them."""
    return [verdict_line(v) for v in claim_checks(results, stale, base, focus)]
