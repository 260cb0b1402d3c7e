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


# --- multi-token answers (toy_rl/bandit/answers.py) -------------------------------------------------------

def test_one_token_runs_are_unchanged():
    """Values recorded on the code before multi-token answers existed (same seeds, same configs); to 1e-12, not
    bit for bit: the last bits change with the numpy/torch build (summation order)."""
    run = simulate(replace(SMALL, staleness=2), BAPO(), seeds=[0, 5])
    m = run.metrics
    assert m["expected_reward"][:, -1].tolist() == pytest.approx([0.6084525020095266, 0.4622341298839816], rel=1e-12)
    assert m["entropy"][:, -1].tolist() == pytest.approx([1.1615687126783822, 1.487062357932114], rel=1e-12)
    assert m["c_high"].sum(1).tolist() == [50.25000000000001, 49.900000000000006]
    assert m["clip_frac_high"].sum(1).tolist() == [0.6666666666666666, 0.3333333333333333]
    assert run.final_logits.sum((1, 2)).tolist() == pytest.approx([-9.800214249599154, -9.800214249599156], rel=1e-12)
    lag = simulate(replace(SMALL, staleness=3, mode="lag", preset="bernoulli"), "clip-higher", seeds=[0, 5]).metrics
    assert lag["expected_reward"][:, -1].tolist() == pytest.approx([0.2322590733003524, 0.21896824588633218], rel=1e-12)
    assert lag["entropy"][:, -1].tolist() == pytest.approx([1.8224542096442902, 1.8030581479950327], rel=1e-12)
    assert lag["clip_frac_high"].sum(1).tolist() == [0.25, 0.16666666666666666]


@pytest.mark.parametrize("answer_len, length_ratio, lam", [(2, 2.0, 2.0), (2, 1.5, 1.5), (1, 4.0, 4.0), (3, 1.0, 1.0)])
def test_on_policy_lambda_is_the_length_ratio_and_rho_is_one_over_one_plus_lambda(answer_len, length_ratio, lam):
    cfg = replace(SMALL, answer_len=answer_len, length_ratio=length_ratio, staleness=0)
    m = simulate(cfg, BAPO(), seeds=range(3)).metrics
    mixed = np.isfinite(m["lambda_mass"])
    assert mixed.mean() > 0.3                                                  # enough updates with a mixed group
    np.testing.assert_allclose(m["lambda_mass"][mixed], lam, rtol=1e-12)
    for key in ("rho_start_grad", "rho_start_all", "rho_before"):
        np.testing.assert_allclose(m[key][mixed], 1 / (1 + lam), rtol=1e-12)
    assert np.isnan(m["rho_start_grad"][~mixed]).all()


def test_lambda_is_token_weighted_not_a_count_of_answers():
    """Bernoulli rewards: many more wrong answers than right ones early, yet λ is the length ratio (|A|-weighted)."""
    m = simulate(replace(SMALL, preset="bernoulli", answer_len=2, length_ratio=2.0), "symmetric", seeds=range(3)).metrics
    mixed = np.isfinite(m["lambda_mass"])
    np.testing.assert_allclose(m["lambda_mass"][mixed], 2.0, rtol=1e-12)
    counts = m["neg_adv_frac"][mixed] / m["pos_adv_frac"][mixed]               # tokens of A<0 / tokens of A>0
    assert np.abs(counts - 2.0).mean() > 0.5 and np.ptp(counts) > 2             # the raw count is not λ


def test_multi_token_on_policy_rules_coincide_and_seeds_are_exact():
    cfg = replace(SMALL, answer_len=2, length_ratio=2.0, lr=1.5)
    runs = [simulate(cfg, rule, seeds=range(3)) for rule in ("symmetric", "clip-higher", "bapo")]
    for run in runs:
        assert (run.metrics["ratio_min"] == 1).all() and (run.metrics["ratio_max"] == 1).all()
        assert torch.equal(run.final_logits, runs[0].final_logits)
        assert np.array_equal(run.metrics["continuation_entropy"], runs[0].metrics["continuation_entropy"])
    assert (runs[0].metrics["n_tokens"] > 3 * 2 * 6).all()                     # more tokens than answers
    assert np.ptp(runs[0].metrics["continuation_entropy"]) > 0                 # the continuation is trained
    stale = replace(cfg, staleness=2)
    together = simulate(stale, BAPO(), seeds=[0, 5, 9])
    alone = simulate(stale, BAPO(), seeds=[5])
    for name in ("entropy", "c_high", "rho_start_all", "lambda_mass", "continuation_entropy"):
        np.testing.assert_allclose(together.metrics[name][1], alone.metrics[name][0], rtol=1e-12, atol=1e-14)


def test_staleness_drift_moves_rho_at_the_start_bounds_and_the_readings_differ():
    cfg = replace(SMALL, answer_len=2, length_ratio=2.0, lr=1.5, staleness=3, steps=60)
    m = simulate(cfg, "symmetric", seeds=range(4)).metrics
    both = np.isfinite(m["rho_start_grad"]) & np.isfinite(m["rho_start_all"])
    assert (np.abs(m["rho_start_grad"][both] - 1 / 3) > 1e-6).mean() > 0.2
    assert (np.abs(m["rho_start_grad"][both] - m["rho_start_all"][both]) > 1e-9).any()
