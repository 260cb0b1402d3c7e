"""Rung 1's verdicts on the paper's claims 1-5 (DESIGN.md), computed from a bandit sweep.

    results = sweep(BanditConfig(), (0, 2, 4, 8), RULES, range(20))     # {(staleness, rule): BanditRun}
    for line in claim_verdicts(results):                                 # what notebook 02 §7 prints
        print(line)
    checks = claim_checks(results)        # the same as dicts: claim, text, verdict, evidence

Notebook 02 prints these verdicts in its closing section and ``toy-rl report --rung 1`` puts them on its page;
both call :func:`claim_checks`. :func:`claim_verdicts` mirrors :func:`toy_rl.arithmetic.views.claim_verdicts`
(rung 2): one ``verdict_line`` string per claim. The summaries the verdicts read are functions too, so the
notebook's tables and the verdicts are the same numbers: :func:`negative_dominance` (§3, claim 2) and
:func:`rule_tests` (§5, Welch tests of mean reward, claims 3 and 5); claim 1 reads the entropy after a quarter
of the updates and after half the samples from :func:`toy_rl.bandit.views.staleness_curves` (§2).

A verdict is True (REPRODUCED), "partly", or False (NOT REPRODUCED); a reward comparison counts only at
p < 0.05 (Welch's t-test over seeds).
"""
from __future__ import annotations

import numpy as np

from ..stats import welch_test
from .experiments import per_seed_summary
from .simulate import BanditRun

ALPHA = 0.05
RHO0 = 0.4          # BAPO's default target share of the positive tokens
CLAIMS = {1: "staleness: volatile reward, gradient spikes, faster entropy fall",
          2: "negative tokens dominate count and loss",
          3: "raising c_high keeps entropy up and helps",
          4: "BAPO: ρ near ρ0, entropy steadier, gradient smoother",
          5: "BAPO > clip-higher >= symmetric at staleness 2 and 4"}


def negative_dominance(run: BanditRun, quarter: int | None = None) -> dict:
    """How often negative-advantage tokens dominate a run's updates, early and late (notebook 02 §3).

    Shares of updates (over seeds and updates) in which tokens with A < 0 outnumber those with A > 0
    (``count_*``; updates with no advantage at all are left out) and in which they carry most of the
    gradient-carrying loss, ρ < 0.5 (``mass_*``; updates without a ρ left out). ``*_early``: the first
    ``quarter`` updates (default: a quarter of the run), ``*_late``: the rest.
    """
    m = run.metrics
    q = run.config.steps // 4 if quarter is None else quarter
    informative = (m["neg_adv_frac"] + m["pos_adv_frac"]) > 0
    count = np.where(informative, m["neg_adv_frac"] > m["pos_adv_frac"], np.nan)
    mass = np.where(np.isnan(m["rho"]), np.nan, m["rho"] < 0.5 - 1e-9)
    return dict(count_early=np.nanmean(count[:, :q]), count_late=np.nanmean(count[:, q:]),
                mass_early=np.nanmean(mass[:, :q]), mass_late=np.nanmean(mass[:, q:]))


def rule_tests(per: dict, stalenesses) -> dict:
    """Mean reward of the three rules and two Welch tests at each staleness (notebook 02 §5).

    ``per``: {(staleness, rule): per_seed_summary(run)}. Returns {staleness: dict(bapo, clip_higher, symmetric,
    p_bapo_vs_ch, p_ch_vs_sym)}: means over seeds of the mean reward, and the p-values of BAPO against
    clip-higher and of clip-higher against symmetric.
    """
    out = {}
    for k in stalenesses:
        r = {rule: per[k, rule]["mean_reward"] for rule in ("symmetric", "clip-higher", "bapo")}
        out[k] = dict(bapo=r["bapo"].mean(), clip_higher=r["clip-higher"].mean(), symmetric=r["symmetric"].mean(),
                      p_bapo_vs_ch=welch_test(r["bapo"], r["clip-higher"])[1],
                      p_ch_vs_sym=welch_test(r["clip-higher"], r["symmetric"])[1])
    return out


def staleness_points(results: dict, stalenesses) -> dict:
    """The symmetric rule's entropy after a quarter of the updates and after half the samples, per staleness
    (the numbers :func:`toy_rl.bandit.views.staleness_curves` prints beside its figure)."""
    from .views import staleness_points as points
    return points({k: results[k, "symmetric"] for k in stalenesses})


def _stalenesses(results: dict) -> list:
    ks = sorted({k for k, _ in results})
    missing = [(k, rule) for k in ks for rule in (("symmetric",) if k == 0 else ("symmetric", "clip-higher", "bapo"))
               if (k, rule) not in results]
    if len(ks) < 2 or 0 not in ks or missing:
        raise ValueError("claim_checks needs a sweep over staleness 0 and at least one staleness > 0, with the "
                         "symmetric rule at every staleness and clip-higher and BAPO at every staleness > 0"
                         + (f"; missing {missing}" if missing else f"; got stalenesses {ks}"))
    return ks


def claim_checks(results: dict, per: dict | None = None, at: dict | None = None) -> list[dict]:
    """One dict per claim 1-5: ``claim`` (number), ``text`` (short claim), ``verdict`` (True, "partly" or
    False) and ``evidence`` (the numbers behind it, one string), computed from a sweep.

    ``results``: {(staleness, rule): BanditRun} from :func:`toy_rl.bandit.sweep`, with staleness 0 (on-policy)
    and at least one staleness > 0; the symmetric rule at every staleness, clip-higher and BAPO at every
    staleness > 0. ``per`` ({key: per_seed_summary(run)}) and ``at`` (:func:`staleness_points`, i.e. the
    numbers of ``staleness_curves`` of the symmetric runs) are computed from ``results`` unless given.
    Claim 5 is judged at stalenesses 2 and 4 (those of them in the sweep).
    """
    from .views import roughness
    ks = _stalenesses(results)
    per = per if per is not None else {key: per_seed_summary(run) for key, run in results.items()}
    at = at if at is not None else staleness_points(results, ks)
    k0, kmax = ks[0], ks[-1]
    stale = [k for k in ks if k > 0]
    dominance = {k: negative_dominance(results[k, "symmetric"]) for k in ks}
    tests = rule_tests(per, stale)
    checks = []

    # 1: symmetric, on-policy -> most stale: entropy falls faster (per update, per sample), spikes, volatility
    st = {k: {"H_update": at[k]["entropy_at_update"], "H_samples": at[k]["entropy_at_samples"]} for k in ks}
    faster_update = st[kmax]["H_update"] < st[k0]["H_update"]
    faster_sample = st[kmax]["H_samples"] < st[k0]["H_samples"]
    g0, gk = per[k0, "symmetric"]["grad_norm_max"], per[kmax, "symmetric"]["grad_norm_max"]
    spikes = gk.mean() > g0.mean() and welch_test(gk, g0)[1] < ALPHA
    vol = {k: per[k, "symmetric"]["reward_volatility"].mean() for k in (k0, kmax)}
    vol_up_update = vol[kmax] > vol[k0]
    c1 = (True if faster_update and faster_sample and spikes and vol_up_update
          else "partly" if faster_update or faster_sample else False)
    e1 = (f"symmetric, staleness {k0} -> {kmax}: entropy after {at[k0]['update']} updates {st[k0]['H_update']:.2f} -> "
          f"{st[kmax]['H_update']:.2f} (falls {'faster' if faster_update else 'slower'} per update), after "
          f"{at[k0]['samples']} samples {st[k0]['H_samples']:.2f} -> {st[kmax]['H_samples']:.2f} (falls "
          f"{'faster' if faster_sample else 'slower'} per sample); largest grad norm {g0.mean():.2f} -> "
          f"{gk.mean():.2f} ({'spikes' if spikes else 'no spikes'}); reward change per update "
          f"{'more' if vol_up_update else 'less'} volatile")
    checks.append((c1, e1))

    # 2: negatives dominate by count (early, every staleness) and by loss mass (once ratios move)
    d0, dk = dominance[k0], dominance[kmax]
    count_early = all(d["count_early"] > 0.5 for d in dominance.values())
    mass_early_stale = dk["mass_early"] > 0.5 and d0["mass_early"] < 0.05
    always = all(d["count_late"] > 0.5 and d["mass_late"] > 0.5 for d in dominance.values())
    c2 = True if always else "partly" if count_early or mass_early_stale else False
    e2 = (f"negatives outnumber positives in at least {min(d['count_early'] for d in dominance.values()):.0%} of early "
          f"updates at every staleness, in at most {max(d['count_late'] for d in dominance.values()):.0%} later; they "
          f"carry most of the loss mass in {d0['mass_early']:.0%} of early updates on-policy, {dk['mass_early']:.0%} "
          f"at staleness {kmax}, {dk['mass_late']:.0%} later")
    checks.append((c2, e2))

    # 3: clip-higher against symmetric: mean reward (significant) and final entropy, at every staleness > 0
    ch_reward = [tests[k]["p_ch_vs_sym"] < ALPHA and tests[k]["clip_higher"] > tests[k]["symmetric"] for k in stale]
    ch_entropy = [per[k, "clip-higher"]["final_entropy"].mean() > per[k, "symmetric"]["final_entropy"].mean()
                  for k in stale]
    c3 = True if all(ch_reward) and all(ch_entropy) else "partly" if any(ch_reward) or any(ch_entropy) else False
    e3 = (f"clip-higher vs symmetric: mean reward higher (p < 0.05) at {sum(ch_reward)} of {len(stale)} stalenesses; "
          f"final entropy higher at {sum(ch_entropy)} of {len(stale)}; lowering c_low is not varied here (notebook 03)")
    checks.append((c3, e3))

    # 4: BAPO reaches its target; entropy at least symmetric's; gradient norm smoother
    b = {k: per[k, "bapo"] for k in stale}
    reached = np.mean([np.nanmean(results[k, "bapo"].metrics["rho_reached"]) for k in stale])
    c_high = np.mean([b[k]["c_high"].mean() for k in stale])
    c_low = np.mean([b[k]["c_low"].mean() for k in stale])
    steadier = all(b[k]["final_entropy"].mean() >= per[k, "symmetric"]["final_entropy"].mean() for k in stale)
    smoother = all(roughness(results[k, "bapo"]).mean() <= roughness(results[k, "symmetric"]).mean() for k in stale)
    c4 = True if reached > 0.9 and steadier and smoother else "partly" if reached > 0.9 else False
    rho_mean = np.nanmean([np.nanmean(b[k]["rho"]) for k in stale])
    where = "above it, not near it" if rho_mean > RHO0 + 0.05 else "below it" if rho_mean < RHO0 - 0.05 else "near it"
    e4 = (f"ρ >= ρ0 after the search in {reached:.0%} of updates, mean ρ {rho_mean:.2f} (ρ0 = {RHO0}: {where}); "
          f"bounds average c_high {c_high:.2f}, c_low {c_low:.2f} (paper: 2.0-2.2 and 0.7); final entropy "
          f"{'at least' if steadier else 'below'} symmetric's at every staleness; gradient norm "
          f"{'smoother' if smoother else 'not smoother'} (mean |update-to-update change|)")
    checks.append((c4, e4))

    # 5: BAPO > clip-higher (significant) >= symmetric, at staleness 2 and 4
    focus = [k for k in (2, 4) if k in tests]
    win = [tests[k]["p_bapo_vs_ch"] < ALPHA and tests[k]["bapo"] > tests[k]["clip_higher"]
           and tests[k]["clip_higher"] >= tests[k]["symmetric"] for k in focus]
    c5 = (bool(win) and all(win)) if focus else "not tested here"
    e5 = ("; ".join(f"staleness {k}: mean reward BAPO {tests[k]['bapo']:.3f}, clip-higher "
                    f"{tests[k]['clip_higher']:.3f}, symmetric {tests[k]['symmetric']:.3f} (BAPO vs clip-higher "
                    f"p = {tests[k]['p_bapo_vs_ch']:.1e})"
                    for k in focus)
          or "not judged: the sweep has neither staleness 2 nor 4")
    checks.append((c5, e5))

    return [dict(claim=i, text=CLAIMS[i], verdict=v if isinstance(v, str) else bool(v), evidence=e)
            for i, (v, e) in enumerate(checks, 1)]


def claim_verdicts(results: dict, per: dict | None = None, at: dict | None = None) -> list[str]:
    """:func:`claim_checks` as one line per claim, 'claim n (text): REPRODUCED / PARTLY / NOT REPRODUCED —
    evidence' (:func:`toy_rl.bandit.views.verdict_line`), as notebook 02 prints them and the rung-1 report
    shows them."""
    from .views import verdict_line
    return [verdict_line(c["claim"], c["text"], c["verdict"], c["evidence"])
            for c in claim_checks(results, per, at)]
