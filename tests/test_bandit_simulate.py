"""The bandit loop: on-policy the rules coincide, staleness spreads the ratio, lag uses old logits, seeds are exact."""
from dataclasses import replace

import numpy as np
import pytest
import torch

from toy_rl.bandit import BanditConfig, simulate
from toy_rl.bandit.quadrants import QUADRANTS
from toy_rl.clipping import BAPO

SMALL = BanditConfig(n_tokens=8, n_contexts=2, group_size=6, steps=40)


@pytest.mark.parametrize("mode", ["reuse", "lag"])
def test_on_policy_all_rules_give_identical_trajectories(mode):
    cfg = BanditConfig(n_tokens=8, n_contexts=2, group_size=6, steps=40, staleness=0, mode=mode)
    runs = [simulate(cfg, rule, seeds=range(4)) for rule in ("symmetric", "clip-higher", "bapo")]
    for run in runs:
        assert (run.metrics["clip_frac_low"] == 0).all() and (run.metrics["clip_frac_high"] == 0).all()
        assert (run.metrics["ratio_std"] == 0).all()
        assert (run.metrics["ratio_min"] == 1).all() and (run.metrics["ratio_max"] == 1).all()
        assert torch.equal(run.final_logits, runs[0].final_logits)
        for name in ("entropy", "expected_reward", "grad_norm"):
            assert np.array_equal(run.metrics[name], runs[0].metrics[name])
    assert runs[0].metrics["expected_reward"][:, -1].mean() > runs[0].initial["expected_reward"].mean()


def test_staleness_spreads_the_ratio():
    spread = {k: simulate(BanditConfig(n_tokens=8, n_contexts=2, steps=60, staleness=k), "symmetric",
                          seeds=range(4)).metrics["ratio_std"].mean() for k in (0, 2, 8)}
    assert spread[0] == 0 < spread[2] < spread[8]


def test_reuse_mode_ages_the_batch():
    run = simulate(BanditConfig(n_tokens=8, n_contexts=2, steps=12, staleness=3), "symmetric", seeds=[0])
    assert run.metrics["staleness"][0].tolist() == [0, 1, 2, 3] * 3
    assert (run.metrics["ratio_std"][0, ::4] == 0).all()                    # the first update of a batch is on-policy


def test_lag_mode_samples_from_k_step_old_logits():
    k = 3
    run = simulate(BanditConfig(n_tokens=8, n_contexts=2, steps=15, staleness=k, mode="lag", preset="graded"), "bapo",
                   seeds=range(3), keep_logits=True)
    z, behaviour = run.logits_history, run.behaviour_history                 # (steps + 1, ...), (steps, ...)
    for t in range(15):
        assert torch.equal(behaviour[t], z[max(t - k, 0)]), t
    assert run.metrics["staleness"][0].tolist() == [0, 1, 2] + [3] * 12
    assert (run.metrics["ratio_std"][:, 1:] > 0).all()                     # graded: every group moves the policy
    assert (run.metrics["ratio_std"][:, 0] == 0).all()


def test_seed_vectorised_run_equals_single_seed_runs():
    for rule in ("symmetric", BAPO()):
        together = simulate(replace(SMALL, staleness=2), rule, seeds=[0, 5, 9])
        alone = simulate(replace(SMALL, staleness=2), rule, seeds=[5])
        for name in ("entropy", "expected_reward", "c_high", "c_low", "rho", "clip_frac_low"):
            np.testing.assert_allclose(together.metrics[name][1], alone.metrics[name][0], rtol=1e-12, atol=1e-14)
        torch.testing.assert_close(together.final_logits[1], alone.final_logits[0], rtol=1e-12, atol=1e-12)
    again = simulate(SMALL, "bapo", seeds=[0, 5, 9])
    assert np.array_equal(again.metrics["entropy"], simulate(SMALL, "bapo", seeds=[0, 5, 9]).metrics["entropy"])


def test_quadrants_add_up_to_the_first_order_change_and_track_the_exact_one():
    for pg, lr in (("vanilla", 0.5), ("natural", 0.02)):
        run = simulate(BanditConfig(n_tokens=8, n_contexts=2, steps=40, staleness=2, pg=pg, lr=lr), "clip-higher",
                       seeds=range(3))
        m = run.metrics
        total = sum(m[f"dH_{q}"] for q in QUADRANTS)
        np.testing.assert_allclose(total, m["entropy_change_first_order"], atol=1e-14)
        scale = np.abs(m["entropy_change"]).max()
        assert np.abs(m["entropy_change"] - m["entropy_change_first_order"]).max() < 0.2 * scale


def test_first_order_error_shrinks_with_the_step():
    errs = []
    for lr in (0.02, 0.2):
        cfg = BanditConfig(n_tokens=8, n_contexts=2, steps=1, lr=lr, preset="graded")
        m = simulate(cfg, "symmetric", seeds=range(20)).metrics
        errs.append(np.abs(m["entropy_change"] - m["entropy_change_first_order"]).mean())
    assert 50 < errs[1] / errs[0] < 200                                      # ×10 step, ~×100 error


def test_bad_rule_and_seeds():
    with pytest.raises(ValueError, match="rule"):
        simulate(SMALL, "ppo")
    with pytest.raises(ValueError, match="seeds"):
        simulate(SMALL, "bapo", seeds=[])
    with pytest.raises(ValueError, match="seeds"):
        simulate(SMALL, "bapo", seeds=[-1])
