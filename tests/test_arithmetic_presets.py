"""Rung-2 presets and the pilot gate: valid configs, λ and ρ by hand, the regime in both directions, a tiny pilot."""
import dataclasses

import numpy as np
import pytest
import torch

from toy_rl.arithmetic.pilot import pilot, summarise
from toy_rl.arithmetic.presets import DEFAULT, PRESETS, check_preset, get_preset, smoke_preset
from toy_rl.arithmetic.run import DEFAULTS
from toy_rl.arithmetic.tasks import get_task
from toy_rl.arithmetic.warmstart import default_config, smoke_config
from toy_rl.clipping import BAPO, policy_loss
from toy_rl.rl.config import RLConfig
from toy_rl.rl.diagnostics import balance_at_start
from toy_rl.rl.rollout import Answer, Group, make_batch


@pytest.fixture(scope="module", autouse=True)
def _one_thread(one_thread):
    """Every test here on one torch thread (tests/conftest.py)."""


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_preset_is_valid(name):
    preset = get_preset(name)
    check_preset(preset)
    cfg = preset.rl_config("symmetric", seed=7, steps=3)
    assert isinstance(cfg, RLConfig) and (cfg.rule, cfg.seed, cfg.steps) == ("symmetric", 7, 3)
    assert cfg.eval_size >= 1000 and cfg.temperature in (0.6, 1.0) and (cfg.staleness > 0 or cfg.partial)
    task = preset.make_task()
    assert len(task.heldout(cfg.eval_size)) == cfg.eval_size


def test_balanced_is_todays_setting_and_long_failures_give_room_to_ramble():
    balanced = get_preset("balanced")
    assert balanced.warmstart == default_config("add")
    assert {k: balanced.rl[k] for k in DEFAULTS if k != "eval_size"} == {k: v for k, v in DEFAULTS.items()
                                                                          if k != "eval_size"}
    assert balanced.rl["max_new_tokens"] == get_task("add").max_answer_chars + 1
    long = get_preset(DEFAULT)
    task = long.make_task()
    right = np.mean([len(task.supervised_target(p)) + 1 for p in task.sample(300, rng=0)])    # + EOS
    assert 2.0 <= long.rl["max_new_tokens"] / right <= 3.5
    assert {get_preset(n).rl["temperature"] for n in PRESETS if n.startswith("long-failures")} == {0.6, 1.0}


def test_long_failures_partial_is_long_failures_with_partial_rollout_instead_of_lag():
    base, partial = get_preset(DEFAULT), get_preset("long-failures-partial")
    assert (partial.task, partial.task_params, partial.warmstart) == (base.task, base.task_params, base.warmstart)
    differ = {k for k in set(base.rl) | set(partial.rl) if base.rl.get(k) != partial.rl.get(k)}
    assert differ == {"staleness", "mode", "partial"}
    cfg = partial.rl_config("bapo", seed=3)
    assert (cfg.staleness, cfg.partial, cfg.max_new_tokens) == (0, 8, 40)
    assert -(-cfg.max_new_tokens // cfg.partial) == 5          # a failure that runs to the budget spans 5 steps
    assert partial.rules == ("symmetric", "clip-higher", "bapo") and base.rules is None
    smoke = smoke_preset(partial)                              # room for a 40-token answer to finish (5 steps)
    assert smoke.rl["steps"] == 10 and smoke.rl["partial"] == 8 and smoke_preset(base).rl["steps"] == 4
    check_preset(smoke)


def test_preset_errors_are_one_line_value_errors():
    with pytest.raises(ValueError, match="unknown preset 'nope'"):
        get_preset("nope")
    base = get_preset("balanced")
    with pytest.raises(ValueError, match="unknown fields"):
        check_preset(dataclasses.replace(base, rl={**base.rl, "colour": 1}))
    with pytest.raises(ValueError, match="block_size"):
        check_preset(dataclasses.replace(base, rl={**base.rl, "max_new_tokens": 200}))


def _batch(groups_lengths, groups_rewards):
    """A finished batch with answers of the given lengths (tokens) and 0/1 rewards ('1' right, '0' wrong)."""
    groups = []
    for lengths, rewards in zip(groups_lengths, groups_rewards):
        answers = [Answer([1, 5], tokens=[3 + r] * n, logp=[-1.0] * n, version=[0] * n, finished=True)
                   for n, r in zip(lengths, rewards)]
        groups.append(Group(None, answers))
    reward = lambda problem, text: float(text.startswith("1"))
    decode = lambda ids: "".join(str(i - 3) for i in ids)
    return make_batch(groups, reward, decode, pad_id=0)


def test_lambda_by_hand_and_on_policy_rho():
    # group 1: right answers of 2 and 4 tokens, wrong of 10 and 6; group 2: all wrong (A = 0, no weight)
    batch = _batch([[2, 4, 10, 6], [3, 3, 3, 3]], [[1, 1, 0, 0], [0, 0, 0, 0]])
    a = float(batch.advantages[0])                    # +a for the right, -a for the wrong answers of group 1
    assert a > 0 and torch.allclose(batch.advantages[:4], torch.tensor([a, a, -a, -a]))
    ones = torch.ones_like(batch.old_logp)
    record = balance_at_start(ones, batch.advantages, batch.response_mask)      # what the loop logs
    assert record["lambda_mass"] == pytest.approx((10 + 6) / (2 + 4))          # the |A|-weighted token ratio
    assert record["lambda_tokens"] == pytest.approx((10 + 6) / (2 + 4))         # (equal |A| here)
    # on-policy (r = 1) BAPO's ρ before the search is 1 / (1 + λ), under both counts
    _, stats = policy_loss(batch.old_logp, batch.old_logp, batch.advantages, batch.response_mask, BAPO())
    assert stats["rho_before"] == pytest.approx(1 / (1 + record["lambda_mass"]))
    assert record["rho_start_grad"] == pytest.approx(stats["rho_before"]) == pytest.approx(record["rho_start_all"])
    # three right answers of 2 tokens against one wrong of 12: λ is 12/2 (not the token count 12/6)
    skew = _batch([[2, 2, 2, 12]], [[1, 1, 1, 0]])
    rec = balance_at_start(torch.ones_like(skew.old_logp), skew.advantages, skew.response_mask)
    assert rec["lambda_mass"] == pytest.approx(6.0) and rec["lambda_tokens"] == pytest.approx(2.0)


def _records(rho_before, moved_to=(0.6, 1.2), steps=20):
    """Synthetic per-update BAPO records: ρ before the search, and the bounds it chose."""
    out = [{"step": 0, "accuracy": 0.2}]
    for s in range(steps):
        rb = rho_before[s % len(rho_before)]
        moves = rb < 0.4
        lo, hi = moved_to if moves else (0.6, 1.2)
        out.append({"step": s, "loss": 0.0, "rho_before": rb, "search_steps": 40.0 if moves else 0.0,
                    "rho_reached": float(not (moves and moved_to == (0.9, 3.0))),
                    "c_low": lo, "c_high": hi, "reward_mean": 0.2, "lambda_mass": 1 / rb - 1,
                    "clip_frac_low": 0.01, "clip_frac_high": 0.0, "approx_kl": 0.001, "seconds": 0.5})
    return out + [{"step": steps, "final": True, "accuracy": 0.3}]


def test_summary_names_the_regime_in_both_directions():
    low = _records([0.3, 0.35, 0.45], moved_to=(0.9, 3.0))           # 2 of 3 updates below ρ0
    g = summarise({"bapo": [low]})
    assert g["regime"] == "negatives-dominate"
    assert g["search_moved_frac"] == pytest.approx(14 / 20) and g["rho_below_target_frac"] == pytest.approx(14 / 20)
    assert g["c_high_q"]["q50"] == 3.0 and g["c_high_mean"] == pytest.approx((14 * 3.0 + 6 * 1.2) / 20)
    assert g["bounds_at_end_frac"] == pytest.approx(14 / 20)           # moved all the way: fixed [0.9, 3.0]
    assert g["rho_reached_frac"] == pytest.approx(6 / 20)
    high = summarise({"bapo": [_records([0.5, 0.45, 0.35])]})          # 1 of 3 below
    assert high["regime"] == "balanced" and high["bounds_at_end_frac"] == 0.0
    late = summarise({"bapo": [_records([0.5] * 10 + [0.3] * 10, moved_to=(0.6, 2.0))]})
    assert (late["search_moved_frac_early"], late["search_moved_frac_late"]) == (0.0, 1.0)
    assert late["bounds_at_end_frac"] == 0.0 and late["regime"] == "balanced"   # 10 of 20: not a majority


def test_summarise_reports_every_rule_and_the_gate_rule_on_top():
    runs = {"symmetric": [_records([0.5])], "bapo": [_records([0.3], moved_to=(0.9, 3.0)), _records([0.3])]}
    s = summarise(runs)
    assert s["regime"] == "negatives-dominate" and set(s["by_rule"]) == {"symmetric", "bapo"}
    assert s["lambda"]["q50"] == pytest.approx(1 / 0.3 - 1) and s["accuracy_start"] == 0.2
    assert s["accuracy_end"] == 0.3 and s["by_rule"]["bapo"]["reward_end"] == pytest.approx(0.2)
    assert s["by_rule"]["symmetric"]["lambda_mass"] == pytest.approx(1.0)
    assert s["bounds_at_end_frac"] == pytest.approx(0.5)              # one seed at [0.9, 3.0], one at the start
    with pytest.raises(ValueError, match="gate_rule"):
        summarise({"symmetric": runs["symmetric"]})


def test_tiny_pilot_returns_every_key(tmp_path, monkeypatch):
    monkeypatch.setenv("TOY_RL_CACHE", str(tmp_path / "cache"))
    base = get_preset(DEFAULT)
    smoke = smoke_config("add")
    tiny = dataclasses.replace(base, name="tiny", task_params={"n_numbers": 4, "max_wrong": 1},
                               warmstart=dataclasses.replace(smoke, max_steps=5, model=dataclasses.replace(
                                   smoke.model, block_size=64)),
                               rl={**base.rl, "prompts": 2, "group_size": 2, "eval_size": 4, "max_new_tokens": 8})
    check_preset(tiny)
    p = pilot(tiny, steps=3, seeds=(0, 1), out=tmp_path / "runs")
    for key in ("regime", "lambda", "rho_before", "rho_start", "rho_below_target_frac", "search_moved_frac",
                "search_moved_frac_early", "search_moved_frac_late", "c_low_mean", "c_high_mean", "c_high_q",
                "rho_reached_frac", "bounds_at_end_frac", "clip_frac_low", "clip_frac_high", "approx_kl",
                "symmetric", "accuracy_start", "accuracy_end", "seconds", "warmstart_seconds", "warmstart_cached",
                "by_rule", "records"):
        assert key in p, key
    assert set(p["rho_before"]) == {"q10", "q50", "q90"} and set(p["rho_start"]) == {"grad", "all"}
    assert p["regime"] in ("balanced", "negatives-dominate") and not p["warmstart_cached"]
    assert set(p["records"]) == {"symmetric", "bapo"} and len(p["records"]["bapo"]) == 2
    updates = [r for r in p["records"]["bapo"][0] if "loss" in r]
    assert len(updates) == 3 and all("rho_start_all" in r and "lambda_mass" in r for r in updates)
    assert (tmp_path / "runs" / "tiny" / "lag-8" / "bapo" / "seed1" / "metrics.jsonl").exists()
    again = pilot(tiny, steps=3, seeds=(0, 1), out=tmp_path / "runs")          # finished runs are read back
    assert again["warmstart_cached"] and again["records"]["bapo"][1][-1] == p["records"]["bapo"][1][-1]


def test_default_preset_pilot_lands_in_its_regime(tmp_path):
    """The real pilot on the default preset (its cached warm start is trained on first use, ~2.5 min on two
    cores): negatives dominate, BAPO's bounds move in most updates, with a wide upper bound."""
    from toy_rl.arithmetic.pilot import DEFAULT_PRESET, pilot
    p = pilot(DEFAULT_PRESET, steps=20, seeds=(0,), out=tmp_path)
    assert p["regime"] == "negatives-dominate"
    assert p["search_moved_frac"] >= 0.5 and p["c_high_mean"] >= 1.5
