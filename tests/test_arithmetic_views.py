"""toy_rl.arithmetic.views and what they draw (toy_rl.arithmetic.measures, .demos, .sweep), and rung 2's verdicts
(toy_rl.arithmetic.verdicts): the plots and sliders of notebooks 04-05 return figures, their numbers move with the
sliders, and they are the library's numbers (toy_rl.experiments' sweep/load/curve, policy_loss, BAPO, the rollout
pool); the verdicts follow paired tests on synthetic runs built to make each claim hold or fail."""
import math
from dataclasses import dataclass

import numpy as np
import pytest
import torch
from matplotlib.figure import Figure

from toy_rl.arithmetic import RULES
from toy_rl.arithmetic.demos import StoredBatch, answer_versions, demo_summary, partial_demo, stale_batch
from toy_rl.arithmetic.measures import TABULAR_SIGN, on_policy_check, rule_tests, seed_stats, stats_table
from toy_rl.arithmetic.sweep import finished, load_or_sweep, scenario_names
from toy_rl.arithmetic.verdicts import claim_checks, claim_verdicts
from toy_rl.arithmetic.views import (budget_callback, clip_callback, clip_view, entropy_check_view, length_view,
                                     partial_curves, rule_bands, rules_callback, scenario_bands, version_map,
                                     warmstart_view)
from toy_rl.experiments import curve, grid, load, sweep
from toy_rl.clipping import BAPO, policy_loss
from toy_rl.plotting import fixed_bounds
from toy_rl.stats import paired_test
from toy_rl.arithmetic.model.gpt import ModelConfig
from toy_rl.rl.entropy_check import QUADRANTS
from toy_rl.stats import welch_test
from toy_rl.arithmetic.tasks import AddTask
from toy_rl.arithmetic.warmstart import WarmstartConfig

TINY = WarmstartConfig(model=ModelConfig(n_layer=1, n_head=2, d_model=32, block_size=64), max_steps=20,
                       batch_size=16, warmup_steps=5, eval_every=10, eval_problems=16, heldout_problems=16)


@dataclass(frozen=True)
class EvenLength(AddTask):
    """"add" whose reward is 1 for an answer of even length: a tiny model earns it half the time, so every
    group carries advantages and the updates move the policy."""
    name = "even-length"

    def reward(self, problem, completion):
        return float(len(completion) % 2 == 0)
FAST = dict(steps=4, prompts=2, group_size=4, eval_every=2, eval_size=8, checkpoint_every=2, warmstart=TINY,
            progress=False)


@pytest.fixture(scope="module", autouse=True)
def _cache(module_cache):
    yield


@pytest.fixture
def shown(monkeypatch):
    out = []
    monkeypatch.setattr("IPython.display.display", lambda obj: out.append(obj))
    return out


# --- synthetic runs: records as the loop writes them ------------------------------------------------

def fake_run(final_acc, reward, entropy, grad, neg=0.4, pos=0.4, rho=0.5, c_low=0.8, c_high=1.2, len_c=3.0,
             len_w=3.0, acc0=0.5, skip=(), groups=16, search=None, rho_after=None, seed=None):
    """Records of one run: one per step (no update at steps in ``skip``), accuracy at 0 and a final record.
    ``rho`` is ρ before BAPO's search, ``rho_after`` after it (default: the same; a list: one per step);
    ``seed`` in every record, as the runner writes it (None: no seed key, as in a log from before the runner)."""
    recs = []
    for t, (r, h, g) in enumerate(zip(reward, entropy, grad)):
        after = rho if rho_after is None else rho_after[t] if isinstance(rho_after, list) else rho_after
        rec = {"step": t, "rule": "x", "staleness": 0, "seconds": 0.1}
        if t == 0:
            rec["accuracy"] = acc0
        if t not in skip:
            rec.update(reward_mean=r, entropy=h, grad_norm=g, neg_adv_frac=neg, pos_adv_frac=pos,
                       rho=after, rho_before=rho, c_low=c_low, c_high=c_high, clip_frac_low=0.01, clip_frac_high=0.02,
                       clip_frac=0.03, len_correct=len_c, len_wrong=len_w, staleness_mean=1.0, staleness_max=2.0,
                       mixed_versions=0.0, groups=groups, ratio_max=1.0, ratio_min=1.0, approx_kl=0.0)
            if search is not None:                      # BAPO's extra fields
                rec.update(rho_reached=float(after >= 0.4), rho_target=0.4,
                           search_steps=search)
        recs.append(rec)
    recs.append({"step": len(reward), "rule": "x", "staleness": 0, "final": True, "accuracy": final_acc})
    if seed is not None:
        for rec in recs:
            rec["seed"] = seed
    return recs


def test_seed_stats_reads_every_number_off_the_records():
    a = fake_run(0.9, [0.1, 0.3, 0.2, 0.6, 0.5, 0.5, 0.5, 0.5], [1.0] * 4 + [0.5] * 4, [1, 3, 2, 2, 2, 2, 2, 9],
                 neg=0.6, pos=0.3, rho=0.45, len_c=3.0, len_w=5.0)
    b = fake_run(0.7, [0.5] * 8, [1.0] * 8, [1] * 8, skip=(2, 5))
    s = seed_stats([a, b])
    assert s["final_accuracy"].tolist() == [0.9, 0.7] and s["start_accuracy"].tolist() == [0.5, 0.5]
    assert s["mean_accuracy"][0] == pytest.approx(0.7)
    assert s["reward_volatility"][0] == pytest.approx(np.std(np.diff([0.1, 0.3, 0.2, 0.6, 0.5, 0.5, 0.5, 0.5])))
    assert s["reward_volatility"][1] == 0.0
    assert s["start_entropy"][0] == 1.0 and s["final_entropy"][0] == 0.5 and s["entropy_drop"][0] == 0.5
    assert s["grad_norm_max"].tolist() == [9.0, 1.0]
    assert s["grad_roughness"][0] == pytest.approx(np.mean(np.abs(np.diff([1, 3, 2, 2, 2, 2, 2, 9]))))
    assert s["neg_count_early"][0] == 1.0 and s["neg_count_late"][0] == 1.0 and s["neg_count_early"][1] == 0.0
    assert s["neg_mass_early"][0] == 1.0 and s["neg_mass_late"][1] == 0.0          # ρ 0.45 < 0.5; 0.5 is not
    assert s["len_wrong"][0] == 5.0 and s["longer_wrong"].tolist() == [1.0, 0.0]
    assert s["update_share"].tolist() == [1.0, 0.75]
    assert math.isnan(s["rho_reached"][0]) and math.isnan(s["reached_when_needed"][0])  # a fixed rule
    assert s["neg_count"].tolist() == [1.0, 0.0] and s["neg_mass"].tolist() == [1.0, 0.0]


def test_updates_without_advantages_have_no_balance_to_count():
    """All answers wrong (or all right): no advantage, ρ is a placeholder (1.0), and such updates are left out of
    claim 2's loss-mass share and of BAPO's regime, instead of counting as "positives dominate"."""
    empty = [fake_run(0.0, [0.0] * 6, [1.0] * 6, [1.0] * 6, neg=0.0, pos=0.0, rho=1.0, c_low=0.6, search=0)] * 2
    s = seed_stats(empty)
    assert np.isnan(s["neg_mass"]).all() and np.isnan(s["neg_count"]).all()
    res = {("on-policy", "symmetric"): empty, **{("reuse-2", r): empty for r in RULES}}
    v = statuses(res, ["reuse-2"])
    assert [t.tested for t in v[2].tests] == [False, False, True]        # count, mass: nothing to count; length
    assert v[2].status == "inconclusive" and v[4].regime.startswith("regime unknown")


def synthetic_results(acc, n_seeds=3, steps=12):
    """{(scenario, rule): runs of seeds 0..n_seeds-1} with final accuracy acc[scenario][rule] + a small per-seed
    spread (seed k: + 0.01 k, 10 % more per rule in symmetric, clip-higher, bapo order, so paired differences
    vary by seed too; a tenth of it in entropy, twice that under staleness)."""
    out = {}
    for scenario, by_rule in acc.items():
        for rule, a in by_rule.items():
            stale = scenario != "on-policy"
            spread = lambda k: 0.01 * k * (1 + 0.1 * ("symmetric", "clip-higher", "bapo").index(rule))
            out[scenario, rule] = [
                fake_run(a + spread(k), reward=list(0.5 + (0.2 if stale else 0.02) * np.sin(np.arange(steps) * (k + 2))),
                         entropy=list(np.linspace(1.0, 0.2 if stale else 0.6, steps) + 0.1 * spread(k) * (1 + stale)),
                         grad=[1.0] * (steps - 1) + [5.0 + 0.2 * k if stale else 1.0 + 0.1 * k],
                         c_low=0.6 if rule == "bapo" else 0.8, c_high=1.28 if rule == "clip-higher" else 1.2,
                         seed=k)
                for k in range(n_seeds)]
    return out


def statuses(res, stale, **kw):
    return {v.claim: v for v in claim_checks(res, stale, **kw)}


def test_claims_supported_when_built_to_hold():
    good = synthetic_results({"on-policy": {r: 0.6 for r in RULES},
                              "reuse-2": {"symmetric": 0.6, "clip-higher": 0.7, "bapo": 0.8},
                              "reuse-4": {"symmetric": 0.5, "clip-higher": 0.6, "bapo": 0.7}})
    v = statuses(good, ["reuse-2", "reuse-4"])
    assert v[1].status == "supported"                        # volatile, spiky, entropy lower at reuse-4
    assert v[5].status == "supported" and "final accuracy, reuse-2: BAPO" in v[5].direction
    assert "BAPO (ran as fixed [0.6, 1.2]) > clip-higher by +10.1 points" in v[5].direction   # ρ never below ρ0
    lines = claim_verdicts(good, ["reuse-2", "reuse-4"])
    assert len(lines) == 5 and [line.split(" ")[1] for line in lines] == ["1", "2", "3", "4", "5"]
    assert ": SUPPORTED — " in lines[4] and "regime balanced" in lines[4]


def test_claims_contradicted_by_a_significant_opposite_result_and_the_c_low_half():
    bad = synthetic_results({"on-policy": {r: 0.6 for r in RULES},
                             "reuse-2": {"symmetric": 0.8, "clip-higher": 0.7, "bapo": 0.6}})
    v = statuses(bad, ["reuse-2"])
    assert v[5].status == "contradicted" and v[5].n_against == 2
    # BAPO kept [0.6, 1.2] and did worse than symmetric: the c_low half of claim 3 is tested, and counts for
    t = [t for t in v[3].tests if t.a.startswith("BAPO")]
    assert len(t) == 1 and t[0].outcome() == "for" and "c_low lowered to 0.6" in v[3].detail
    assert v[3].status == "contradicted"                     # clip-higher significantly below symmetric


def test_noise_is_inconclusive_and_one_seed_is_not_testable():
    same = synthetic_results({"on-policy": {r: 0.6 for r in RULES}, "reuse-2": {r: 0.6 for r in RULES}})
    for key in same:                                          # shuffle the seeds' spread: no consistent gap
        if key[1] == "bapo":
            same[key] = [[{**rec, "seed": 2 - rec["seed"]} for rec in run] for run in same[key]]
    assert statuses(same, ["reuse-2"])[5].status == "inconclusive"
    one = synthetic_results({"on-policy": {r: 0.6 for r in RULES}, "reuse-2": {"symmetric": 0.6, "clip-higher": 0.7,
                                                                                 "bapo": 0.8}}, n_seeds=1)
    v = statuses(one, ["reuse-2"])
    assert v[5].status == "not testable: n = 1 < 2 seeds per comparison"


def test_runs_are_paired_by_their_seed_id_not_their_place_in_the_list():
    res = synthetic_results({"on-policy": {r: 0.6 for r in RULES},
                             "reuse-2": {"symmetric": 0.6, "clip-higher": 0.7, "bapo": 0.8}})
    base = statuses(res, ["reuse-2"])[5].tests
    shuffled = {key: runs[::-1] if key[1] == "bapo" else runs for key, runs in res.items()}   # seeds 2, 1, 0
    assert [(t.n, t.diff, t.p) for t in statuses(shuffled, ["reuse-2"])[5].tests] == [(t.n, t.diff, t.p) for t in base]
    # BAPO's runs renamed seeds 1, 2, 3 (0.800, 0.812, 0.830) against clip-higher's seeds 0, 1, 2 (0.700, 0.711,
    # 0.722): seeds 1 and 2 pair up, +8.9 and +9.0 points (by position it would be +10 to +10.8 points)
    res["reuse-2", "bapo"] = [[{**rec, "seed": rec["seed"] + 1} for rec in run] for run in res["reuse-2", "bapo"]]
    res["reuse-2", "bapo"][-1] = fake_run(0.83, [0.5] * 12, [1.0] * 12, [1.0] * 12, c_low=0.6, seed=3)
    t = statuses(res, ["reuse-2"])[5].tests[0]
    assert t.a.startswith("BAPO") and t.b == "clip-higher" and t.n == 2
    assert t.diff == pytest.approx(0.0895) and t.lo < t.diff < t.hi
    with pytest.raises(ValueError, match="distinct seeds"):
        claim_checks({**res, ("reuse-2", "bapo"): [res["reuse-2", "bapo"][0]] * 2}, ["reuse-2"])


def test_claim_4_is_not_testable_when_bapo_never_needed_the_search_and_claim_1_names_the_batch_size():
    res = synthetic_results({"on-policy": {"symmetric": 0.6}, "partial-8": {r: 0.6 for r in RULES}})
    res["partial-8", "bapo"] = [fake_run(0.6, [0.5] * 12, [1.0] * 12, [1.0] * 12, c_low=0.6, search=0, rho=0.5)] * 3
    res["partial-8", "symmetric"] = [fake_run(0.6 + 0.01 * k, [0.5] * 12, [1.0] * 12, [1.0] * 12, groups=3)
                                     for k in range(3)]
    v = statuses(res, ["partial-8"])
    assert v[4].status == "not testable: the search never had to move (ρ before it ≥ ρ0 in every update)"
    assert v[4].regime.startswith("regime balanced: ρ before the search < ρ0 in 0%")
    assert "trains on 3.0 groups per update against 16" in v[1].detail
    s = seed_stats(res["partial-8", "bapo"])
    assert s["searched"].tolist() == [0.0] * 3 and s["rho_before_min"][0] == 0.5
    # the old criterion ("ρ >= ρ0 after the search in > 90% of updates") held here by construction:
    assert s["rho_reached"].tolist() == [1.0] * 3 and np.isnan(s["reached_when_needed"]).all()
    # ρ below ρ0 and the search reaching it: claim 4 is testable, and says how often it reached ρ0 (not a test)
    # (96 updates; seed 1 misses the first: 1, 95/96, 1 of the needing updates reached)
    res["partial-8", "bapo"] = [fake_run(0.6, [0.5] * 96, [1.0] * 96, [1.0] * 96, search=2, rho=0.3, c_high=1.6,
                                         rho_after=[0.3 if k == 1 and t == 0 else 0.42 for t in range(96)])
                                for k in range(3)]
    v = statuses(res, ["partial-8"])
    assert not v[4].status.startswith("not testable") and "brought ρ to ρ0 in 100% of the updates" in v[4].detail
    assert v[4].tests[0].a == "BAPO" and v[4].regime.startswith("regime negatives-dominate")


def test_accuracy_vs_groups_compares_at_equal_samples():
    from toy_rl.arithmetic.views import accuracy_vs_groups
    def run(groups, acc_at):                        # 8 steps, accuracy logged at steps 0 and 4 and at the end
        recs = fake_run(acc_at[2], [0.5] * 8, [1.0] * 8, [1.0] * 8, groups=groups, acc0=acc_at[0])
        recs[4]["accuracy"] = acc_at[1]
        return recs
    res = {("on-policy", "symmetric"): [run(16, (0.5, 0.7, 0.9)), run(16, (0.5, 0.72, 0.92))],
           ("partial-8", "bapo"): [run(4, (0.5, 0.6, 0.7)), run(4, (0.5, 0.62, 0.66))]}
    fig, out = accuracy_vs_groups(res, ["on-policy", "partial-8"])
    assert isinstance(fig, Figure) and out["on-policy"]["groups"] == 32            # partial saw 8 × 4 groups
    assert out["partial-8"]["accuracy"] == pytest.approx(0.68)                     # its final accuracies
    assert out["on-policy"]["accuracy"] == pytest.approx(0.5 + 0.21 * 32 / 64)     # interpolated at 32 of 64
    assert math.isnan(out["on-policy"]["p"])
    assert out["partial-8"]["p"] == pytest.approx(welch_test([0.7, 0.66], [0.6, 0.61])[1])


def test_rule_tests_are_welch_on_the_per_seed_numbers():
    res = synthetic_results({"reuse-2": {"symmetric": 0.6, "clip-higher": 0.62, "bapo": 0.8}})
    t = rule_tests(res, ["reuse-2"])["reuse-2"]
    assert t["bapo"] == pytest.approx(0.812)
    sb = seed_stats(res["reuse-2", "bapo"])["final_accuracy"]
    sc = seed_stats(res["reuse-2", "clip-higher"])["final_accuracy"]
    assert t["p_bapo_vs_ch"] == pytest.approx(welch_test(sb, sc)[1]) and t["p_bapo_vs_ch"] < 0.01
    rows = stats_table(res, ("final_accuracy", "c_low"))
    assert rows["reuse-2    bapo"] == pytest.approx({"final_accuracy": 0.812, "c_low": 0.6})


def test_rule_and_scenario_bands_draw_the_library_curves(shown):
    res = synthetic_results({"on-policy": {r: 0.6 for r in RULES}, "reuse-2": {r: 0.7 for r in RULES}})
    fig, means = rule_bands(res, "reuse-2")
    assert isinstance(fig, Figure) and set(means) == set(RULES)
    assert means["bapo"]["entropy"] == pytest.approx(np.nanmean(curve(res["reuse-2", "bapo"], "entropy")[1]))
    fig, means = scenario_bands(res, "symmetric", ["on-policy", "reuse-2"])
    assert means["on-policy"]["grad_norm"] < means["reuse-2"]["grad_norm"]
    with pytest.raises(ValueError, match="no runs"):
        rule_bands(res, "reuse-8")
    cb = rules_callback(res)
    a, b = cb("on-policy"), cb("reuse-2")
    assert len(shown) == 2 and all(isinstance(f, Figure) for f in shown) and a != b


# --- real (tiny) runs --------------------------------------------------------------------------------

def test_load_or_sweep_runs_once_then_loads(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_or_sweep(tmp_path / "none", "add", (0, 1), seeds=2)
    quick = tmp_path / "quick"
    first, source = load_or_sweep(tmp_path / "none", "add", (0, 1), seeds=2, quick_out=quick,
                                    on_policy_rules=("symmetric",), **FAST)
    assert source.startswith("computed") and list(first) == [("on-policy", "symmetric"), ("reuse-1", "symmetric"),
                                                             ("reuse-1", "clip-higher"), ("reuse-1", "bapo")]
    assert not (quick / "arithmetic-add" / "on-policy" / "bapo").exists()     # only the rules asked for on-policy
    again, source = load_or_sweep(quick, "add", (0, 1), seeds=2, on_policy_rules=("symmetric",))
    assert source.startswith("loaded") and again == first
    with pytest.raises(FileNotFoundError):                                   # 3 seeds asked, 2 there
        load_or_sweep(quick, "add", (0, 1), seeds=3)
    assert scenario_names((0, 2), partial=8) == ["on-policy", "reuse-2", "partial-8"]


def test_on_policy_runs_coincide_and_unfinished_runs_are_left_out(tmp_path):
    res = sweep(grid("arithmetic", "add", RULES, (0,), seeds=range(2), out=tmp_path, **FAST))
    check = on_policy_check(res)
    assert check["ratio_dev"] < 1e-4 and check["clip_frac_max"] == 0.0
    assert check["entropy_gap"] == 0.0 and check["accuracy_gap"] == 0.0
    loaded = load(tmp_path / "arithmetic-add")
    cut = [recs[:-1] for recs in loaded["on-policy", "bapo"]]               # as if still running
    assert finished(cut) == [] and finished(loaded["on-policy", "bapo"]) == loaded["on-policy", "bapo"]


def _stored(seed=0):
    """A real stale batch with advantages and behaviour log-probs that make the bounds matter."""
    b = stale_batch("add", 1, seed=seed, warmstart=TINY, prompts=4, group_size=4)
    g = torch.Generator().manual_seed(seed)
    return b._replace(advantages=torch.randn(b.advantages.shape, generator=g),
                      old_logp=b.old_logp + 0.4 * torch.randn(b.old_logp.shape, generator=g) * b.mask)


def test_stale_batch_is_the_oldest_mini_batch_after_k_real_updates():
    fresh = stale_batch("add", 0, warmstart=TINY, prompts=4, group_size=4)
    assert isinstance(fresh, StoredBatch) and fresh.logp.shape == fresh.old_logp.shape == fresh.mask.shape
    assert fresh.staleness == 0 and fresh.mask.shape[0] == 16
    m = fresh.mask > 0
    assert (fresh.logp - fresh.old_logp)[m].abs().max() < 1e-4               # on-policy: r = 1
    stale = stale_batch(EvenLength(), 2, warmstart=TINY, prompts=4, group_size=4)
    m = stale.mask > 0
    assert stale.staleness == 2 and stale.task == "even-length" and stale.advantages.abs().max() > 0
    assert (stale.logp - stale.old_logp)[m].abs().max() > 1e-3                # two real updates moved the policy


def test_clip_view_is_policy_loss_and_moves_with_the_sliders(shown):
    stored = _stored()
    fig, base = clip_view(stored, 0.8, 1.2)
    assert isinstance(fig, Figure)
    _, st = policy_loss(stored.logp, stored.old_logp, stored.advantages, stored.mask, fixed_bounds(0.8, 1.2))
    for k in ("loss", "rho", "pos_mass", "neg_mass", "clip_frac_low", "clip_frac_high"):
        assert base[k] == pytest.approx(st[k])
    n = int(stored.mask.sum())
    assert base["tokens_clipped"] == round((base["clip_frac_low"] + base["clip_frac_high"]) * n)
    _, bapo = policy_loss(stored.logp, stored.old_logp, stored.advantages, stored.mask, BAPO())
    assert (base["bapo_c_low"], base["bapo_c_high"]) == pytest.approx((bapo["c_low"], bapo["c_high"]))
    _, narrow = clip_view(stored, 0.95, 1.05)
    _, wide = clip_view(stored, 0.5, 3.0)
    assert narrow["clip_frac_high"] > base["clip_frac_high"] > wide["clip_frac_high"]
    assert narrow["clip_frac_low"] > base["clip_frac_low"] > wide["clip_frac_low"]
    assert narrow["loss"] != base["loss"] != wide["loss"]
    cb = clip_callback(stored)
    a, b = cb(0.8, 1.2), cb(0.9, 1.1)
    assert len(shown) == 2 and a["tokens_clipped"] < b["tokens_clipped"]
    with pytest.raises(ValueError):
        clip_view(stored, 1.1, 1.2)


def test_entropy_check_view_counts_quadrants_against_the_tabular_signs():
    rng = np.random.default_rng(0)
    ex = rng.normal(size=50)

    def rep(dH):
        return {"exact": ex, "predicted": ex + 0.01, "correlation": 0.99, "sign_agreement": 0.98,
                "median_rel_error": 0.01, "quadrant_dH": dH, "quadrant_count": {q: 5 for q in QUADRANTS}}
    as_tabular = {q: 0.1 * s for q, s in TABULAR_SIGN.items()}
    flipped = {q: -v for q, v in as_tabular.items()}
    fig, rows = entropy_check_view({"symmetric": rep(as_tabular), "bapo": rep(flipped), "error_slope": 2.0})
    assert isinstance(fig, Figure)
    assert rows["symmetric"]["signs_as_tabular"] == 4 and rows["bapo"]["signs_as_tabular"] == 0
    assert rows["bapo"]["low-p/low-A"] == pytest.approx(0.1) and rows["symmetric"]["correlation"] == 0.99


def test_partial_demo_keeps_each_tokens_version(shown):
    demo = partial_demo("scratchpad", 8, 10, prompts=2, group_size=2, warmstart=TINY)
    assert demo["batches"] and len(demo["steps"]) == 10
    for step, batch in demo["batches"]:
        for a in answer_versions(batch, step):
            assert a["versions"] == sorted(a["versions"]) and max(a["versions"]) <= step
            assert a["ages"] == [step - v for v in a["versions"]] and len(a["text"]) == len(a["versions"])
            # budget 8: a version changes at most every 8 tokens
            assert len(set(a["versions"])) <= -(-len(a["versions"]) // 8)
    s = demo_summary(demo)
    assert s["updates"] == len(demo["batches"]) and s["staleness_max"] >= 1 and s["mixed_versions"] > 0
    fig, rows = version_map(demo, 3)
    assert isinstance(fig, Figure) and len(rows) == 3 and rows[-1]["step"] == demo["batches"][-1][0]
    one_go = demo_summary(partial_demo("scratchpad", 64, 3, prompts=2, group_size=2, warmstart=TINY))
    assert one_go["staleness_mean"] == 0.0 and one_go["mixed_versions"] == 0.0 and one_go["updates"] == 3
    cb = budget_callback("scratchpad", 7, answers=2, prompts=2, group_size=2, warmstart=TINY)
    assert cb(64)["mixed_versions"] == 0.0 and cb(8)["mixed_versions"] > 0 and len(shown) == 2


def test_partial_and_length_views_pool_the_rules():
    res = {("on-policy", "symmetric"): [fake_run(0.5, [0.5] * 6, [1.0] * 6, [1.0] * 6, len_c=40, len_w=42)] * 2,
           ("partial-8", "bapo"): [fake_run(0.5, [0.5] * 6, [1.0] * 6, [1.0] * 6, len_c=40, len_w=40, skip=(0, 1))] * 2}
    fig, rows = partial_curves(res, ["on-policy", "partial-8"])
    assert isinstance(fig, Figure) and rows["partial-8"]["update_share"] == pytest.approx(4 / 6)
    fig, rows = length_view(res, ["on-policy", "partial-8"])
    assert rows["on-policy"]["len_wrong"] - rows["on-policy"]["len_correct"] == 2 and rows["on-policy"]["longer_wrong"] == 1
    assert rows["partial-8"]["longer_wrong"] == 0
    st = seed_stats(res["on-policy", "symmetric"])
    assert rows["on-policy"]["p"] == paired_test(st["len_wrong"], st["len_correct"])["p"] == 0.5   # each seed: +2


def test_warmstart_view_reads_the_cached_summary():
    from toy_rl.arithmetic.warmstart import load_warmstart
    model = load_warmstart("add", TINY, progress=False)
    fig, summary = warmstart_view("add", TINY)
    assert isinstance(fig, Figure) and summary["heldout_acc_greedy"] == model.meta["heldout_acc_greedy"]
    assert summary["steps"] == model.meta["steps"]


def test_answers_table_scores_what_the_model_writes():
    from toy_rl.arithmetic.demos import answers_table
    from toy_rl.arithmetic.model.evaluate import complete
    from toy_rl.arithmetic.tasks import get_task
    from toy_rl.arithmetic.warmstart import load_warmstart
    task = get_task("add")
    model = load_warmstart(task, TINY, progress=False)
    problems = task.heldout(3)
    rows = answers_table(model, task, problems, samples=2)
    assert [r["greedy"] for r in rows] == complete(model, [p.prompt for p in problems], task.max_answer_chars + 1)
    assert all(len(r["sampled"]) == 2 and r["target"] == p.answer for r, p in zip(rows, problems))
    assert all(r["sampled_rewards"] == [task.reward(p, s) for s in r["sampled"]] for r, p in zip(rows, problems))
