"""toy_rl.bandit.verdicts: rung 1's verdicts on the paper's claims 1-5 (notebook 02 §7, the rung-1 report) come
from a sweep, five of them with their evidence, and they follow the numbers: constructed summaries where a claim
must hold or fail make it REPRODUCED or NOT REPRODUCED."""
import copy
from dataclasses import replace

import numpy as np
import pytest

from toy_rl.bandit import (BanditConfig, claim_checks, claim_verdicts, negative_dominance, per_seed_summary,
                           rule_tests, sweep)
from toy_rl.bandit.simulate import BanditRun
from toy_rl.bandit.verdicts import CLAIMS, staleness_points
from toy_rl.bandit.views import staleness_curves, verdict_line

KS = (0, 2, 4)
RULES = ("symmetric", "clip-higher", "bapo")


@pytest.fixture(scope="module")
def small():
    """A small sweep (3 seeds x 40 updates) and its per-seed summaries."""
    results = sweep(BanditConfig(steps=40), KS, RULES, range(3))
    return results, {key: per_seed_summary(run) for key, run in results.items()}


def test_five_verdicts_with_evidence_from_a_small_sweep(small):
    results, per = small
    checks = claim_checks(results)
    assert [c["claim"] for c in checks] == [1, 2, 3, 4, 5]
    assert [c["text"] for c in checks] == [CLAIMS[i] for i in range(1, 6)]
    for c in checks:
        assert c["verdict"] in (True, False, "partly") and type(c["verdict"]) in (bool, str)
        assert isinstance(c["evidence"], str) and any(ch.isdigit() for ch in c["evidence"])
    assert "staleness 0 -> 4" in checks[0]["evidence"] and "after 10 updates" in checks[0]["evidence"]
    assert "staleness 2: mean reward BAPO" in checks[4]["evidence"] and "staleness 4:" in checks[4]["evidence"]
    lines = claim_verdicts(results)
    assert lines == [verdict_line(c["claim"], c["text"], c["verdict"], c["evidence"]) for c in checks]
    assert all(line.startswith(f"claim {i} (") for i, line in enumerate(lines, 1))
    # the summaries the notebook passes in are the ones computed by default
    at = staleness_curves({k: results[k, "symmetric"] for k in KS})[1]
    assert staleness_points(results, KS) == at
    assert claim_verdicts(results, per, at) == lines


def test_the_summaries_are_the_notebooks_tables(small):
    results, per = small
    t = rule_tests(per, (2, 4))
    assert set(t) == {2, 4} and t[4]["bapo"] == pytest.approx(per[4, "bapo"]["mean_reward"].mean())
    assert 0 <= t[2]["p_ch_vs_sym"] <= 1 and 0 <= t[2]["p_bapo_vs_ch"] <= 1
    d = negative_dominance(results[0, "symmetric"])
    assert d["mass_early"] == 0.0                    # on-policy every ratio is 1: ρ = 0.5, never below
    assert set(d) == {"count_early", "count_late", "mass_early", "mass_late"}


def test_negative_dominance_counts_what_it_says():
    steps = 8
    m = dict(neg_adv_frac=np.array([[0.6] * 2 + [0.2] * 6, [0.0] * 2 + [0.6] * 6]),
             pos_adv_frac=np.array([[0.1] * 2 + [0.4] * 6, [0.0] * 2 + [0.1] * 6]),
             rho=np.array([[0.3, np.nan] + [0.6] * 6, [0.5] * 2 + [0.4, 0.4, 0.6, 0.6, 0.6, 0.6]]))
    run = BanditRun(BanditConfig(steps=steps), "symmetric", [0, 1], m, {}, None)
    d = negative_dominance(run)                     # first quarter: 2 updates
    assert d["count_early"] == 1.0                  # seed 1's first two updates have no advantage: left out
    assert d["count_late"] == 0.5
    assert d["mass_early"] == pytest.approx(1 / 3)  # seed 0: 0.3 (< 0.5) and a NaN; seed 1: 0.5, 0.5
    assert d["mass_late"] == pytest.approx(2 / 12)


def _set(per, key, name, values):
    per[key][name] = np.asarray(values, dtype=float)


def test_claims_3_and_5_follow_constructed_summaries(small):
    """Clip-higher clearly beating symmetric (reward and entropy), BAPO clearly beating clip-higher: claims 3 and 5
    REPRODUCED; the same summaries with the order reversed: NOT REPRODUCED."""
    results, per = small
    noise = np.array([-0.01, 0.0, 0.01])
    good = copy.deepcopy(per)
    for k in (2, 4):
        _set(good, (k, "symmetric"), "mean_reward", 0.5 + noise)
        _set(good, (k, "clip-higher"), "mean_reward", 0.6 + noise)
        _set(good, (k, "bapo"), "mean_reward", 0.7 + noise)
        _set(good, (k, "symmetric"), "final_entropy", [0.2] * 3)
        _set(good, (k, "clip-higher"), "final_entropy", [0.4] * 3)
    checks = claim_checks(results, per=good)
    assert checks[2]["verdict"] is True and "higher (p < 0.05) at 2 of 2" in checks[2]["evidence"]
    assert checks[4]["verdict"] is True
    assert "staleness 4: mean reward BAPO 0.700, clip-higher 0.600" in checks[4]["evidence"]
    assert ": REPRODUCED — " in claim_verdicts(results, per=good)[4]

    bad = copy.deepcopy(good)
    for k in (2, 4):
        _set(bad, (k, "clip-higher"), "mean_reward", 0.5 + noise)    # same as symmetric: p = 1
        _set(bad, (k, "bapo"), "mean_reward", 0.4 + noise)           # worse than clip-higher
        _set(bad, (k, "clip-higher"), "final_entropy", [0.1] * 3)    # below symmetric
    checks = claim_checks(results, per=bad)
    assert checks[2]["verdict"] is False and "at 0 of 2" in checks[2]["evidence"]
    assert checks[4]["verdict"] is False
    assert ": NOT REPRODUCED — " in claim_verdicts(results, per=bad)[4]

    # only the entropy part of claim 3 holds: partly
    partly = copy.deepcopy(bad)
    for k in (2, 4):
        _set(partly, (k, "clip-higher"), "final_entropy", [0.4] * 3)
    assert claim_checks(results, per=partly)[2]["verdict"] == "partly"


def test_claim_1_follows_constructed_summaries(small):
    """Entropy falling faster per update and per sample, gradient spikes, more volatile reward: REPRODUCED;
    entropy falling slower on both axes: NOT REPRODUCED."""
    results, per = small
    good, at = copy.deepcopy(per), copy.deepcopy(staleness_points(results, KS))
    at[0].update(entropy_at_update=2.0, entropy_at_samples=2.0)
    at[4].update(entropy_at_update=1.0, entropy_at_samples=1.0)
    _set(good, (0, "symmetric"), "grad_norm_max", [1.0, 1.1, 0.9])
    _set(good, (4, "symmetric"), "grad_norm_max", [3.0, 3.1, 2.9])
    _set(good, (0, "symmetric"), "reward_volatility", [0.01] * 3)
    _set(good, (4, "symmetric"), "reward_volatility", [0.05] * 3)
    c1 = claim_checks(results, per=good, at=at)[0]
    assert c1["verdict"] is True
    assert "entropy after 10 updates 2.00 -> 1.00 (falls faster per update)" in c1["evidence"]
    assert "largest grad norm 1.00 -> 3.00 (spikes)" in c1["evidence"] and "more volatile" in c1["evidence"]
    at[4].update(entropy_at_update=3.0, entropy_at_samples=3.0)
    c1 = claim_checks(results, per=good, at=at)[0]
    assert c1["verdict"] is False and "falls slower per sample" in c1["evidence"]


def test_claim_5_needs_staleness_2_or_4_and_the_sweep_needs_its_runs(small):
    results, _ = small
    only8 = {(0 if k == 0 else 8, rule): run for (k, rule), run in results.items() if k in (0, 4)}
    c5 = claim_checks(only8)[4]
    assert c5["verdict"] == "not tested here" and "neither staleness 2 nor 4" in c5["evidence"]
    with pytest.raises(ValueError, match="staleness 0"):
        claim_checks({key: run for key, run in results.items() if key[0] > 0})
    with pytest.raises(ValueError, match=r"missing \[\(4, 'bapo'\)\]"):
        claim_checks({key: run for key, run in results.items() if key != (4, "bapo")})


def test_verdicts_from_a_lag_mode_sweep():
    """Lag mode (a fresh batch every update, sampled by an older policy): five verdicts as well."""
    results = sweep(replace(BanditConfig(steps=24), mode="lag"), (0, 2), RULES, range(2))
    assert len(claim_verdicts(results)) == 5
