"""Notebook 07's experiments (toy_rl.bandit.questions), on small settings: the facts each answer rests on hold
exactly, the summary lines follow the numbers, and every figure draws."""
from dataclasses import replace

import pytest
import torch

from toy_rl.bandit import BanditConfig, Schedule
from toy_rl.bandit.questions import QUESTIONS, thread_url, views
from toy_rl.bandit.questions.async_lag import is_on_policy, looks_on_policy, one_step_off_experiment
from toy_rl.bandit.questions.clip_counts import clip_count_table, clip_counts
from toy_rl.bandit.questions.entropy_collapse import VARIANTS, best_variant, entropy_experiment
from toy_rl.bandit.questions.minibatches import minibatch_experiment
from toy_rl.bandit.questions.negative_branch import bandit_dual_clip, negative_branch_table, two_sided_gap
from toy_rl.bandit.questions.on_policy import clip_ratio_experiment, gradient_at_ratio_one
from toy_rl.bandit.questions.summary import answers

SMALL = BanditConfig(steps=40)
SEEDS = range(3)


@pytest.fixture(scope="module")
def results():
    return dict(
        q1=clip_ratio_experiment(SMALL, SEEDS, epochs=(1, 2)),
        q2=minibatch_experiment(SMALL, SEEDS, minibatches=(1, 4)),
        q3=clip_count_table((0.3, 1.0), n_prompts=4, max_tokens=32),
        q4=negative_branch_table((0.3, 1.5), n_prompts=4, max_tokens=32),
        q5=one_step_off_experiment(SMALL, SEEDS),
        q6=entropy_experiment(replace(SMALL, preset="trap"), SEEDS,
                              schedules=(Schedule(), Schedule(epochs=2)),
                              variants={k: VARIANTS[k] for k in ("symmetric", "clip-higher", "symmetric + β 0.1")}),
    )


def test_one_update_per_rollout_clips_nothing_and_is_the_plain_gradient(results):
    rows = results["q1"]["rows"]
    assert rows["epochs 1"]["max_r_minus_1_fresh"] == 0 and rows["epochs 1"]["updates_clipping"] == 0
    assert rows["epochs 1"]["rule_gap"] == 0 and rows["epochs 2"]["clip_frac_fresh"] == 0
    assert rows["epochs 2"]["clip_frac_reused"] > 0
    g = gradient_at_ratio_one(SMALL)
    assert g["max_abs_ratio_gap"] == 0 and g["max_abs_gap"] < 1e-12 and g["grad_norm"] > 0


def test_minibatches_make_clip_higher_matter(results):
    rows, profiles = results["q2"]["rows"], results["q2"]["profiles"]
    assert rows["1 mini-batch"]["rule_gap"] == 0 and rows["1 mini-batch"]["updates_clipping_high"] == 0
    assert rows["4 mini-batches"]["high_first"] == 0 and rows["4 mini-batches"]["rule_gap"] > 0
    assert profiles[4][0] == 0 and profiles[4][1:].max() > 0


def test_the_sign_aware_count_is_the_zero_gradient_count(results):
    for row in results["q3"].values():
        assert row["sign_aware"] == row["zero_gradient"] == pytest.approx(row["policy_loss_frac"], abs=1e-7)
        parts = row["sign_aware"] + row["min_picks_rA"] + row["outside_with_A_zero"]
        assert row["out_of_bounds"] == pytest.approx(parts)


def test_clip_counts_by_hand():
    r = torch.tensor([0.5, 0.5, 1.5, 1.5, 1.0, 3.0])
    a = torch.tensor([1.0, -1.0, 1.0, -1.0, 1.0, 0.0])
    c = clip_counts(r, a, torch.ones(6), 0.8, 1.2)
    assert c["sign_aware_low"] == c["sign_aware_high"] == 1 / 6 and c["min_picks_rA"] == 2 / 6
    assert c["out_of_bounds"] == 5 / 6 and c["outside_with_A_zero"] == 1 / 6


def test_dual_clip_bounds_the_negative_branch_and_is_trls_delta(results):
    rows = results["q4"]
    assert all(r["two_sided_gap"] == 0 for r in rows.values())
    last = rows["drift 1.5"]
    assert last["max_w_neg"] > 10 * last["max_w_neg_dual"] and last["neg_above_c"] > 0
    g = torch.Generator().manual_seed(0)
    ratio, adv = torch.exp(2 * torch.randn(500, generator=g)), torch.randn(500, generator=g)
    assert two_sided_gap(ratio, adv, 0.8, 1.28, 3.0) == 0


def test_bandit_dual_clip_reports_how_often_it_acts():
    out = bandit_dual_clip(replace(SMALL, preset="trap"), SEEDS, Schedule(minibatches=4, lag=1))
    assert 0 <= out["dual_clip_frac"] <= out["updates_with_cap"] + 1e-12 and out["ratio_max"] >= 1


def test_recomputed_old_looks_on_policy_but_is_not(results):
    rows = results["q5"]["rows"]
    assert looks_on_policy(rows["on-policy"]) and is_on_policy(rows["on-policy"])
    assert not looks_on_policy(rows["lag 1"]) and not is_on_policy(rows["lag 1"])
    assert looks_on_policy(rows["lag 1 (π_old recomputed)"]) and not is_on_policy(rows["lag 1 (π_old recomputed)"])


def test_clip_rules_coincide_on_policy_and_the_bonus_does_not(results):
    rows = results["q6"]["rows"]
    assert rows["on-policy · clip-higher"]["d_final_entropy"] == 0
    assert rows["on-policy · symmetric + β 0.1"]["d_final_entropy"] != 0
    name, value = best_variant(rows, "epochs 2")
    assert name in ("symmetric", "clip-higher", "symmetric + β 0.1") and 0 <= value <= 1


def test_the_summary_has_one_line_per_question(results):
    r = results
    lines = answers(r["q1"], r["q2"], r["q3"], r["q4"], r["q5"], r["q6"], schedule_label="epochs 2")
    assert [line.split()[0] for line in lines] == ["1", "2", "3", "4", "5", "6"]
    assert "the same run" in lines[0] and "looks on-policy yes, is no" in lines[4]


def test_every_figure_draws(results):
    r = results
    for fig in (views.clip_ratio_figure(r["q1"]), views.minibatch_figure(r["q2"]), views.clip_counts_figure(r["q3"]),
                views.negative_branch_figure(r["q4"]), views.one_step_off_figure(r["q5"]),
                views.entropy_figure(r["q6"], "epochs 2")):
        assert fig.axes and all(ax.has_data() for ax in fig.axes)


def test_questions_name_their_threads_experiments_and_exercises():
    import importlib
    from toy_rl.exercises import get
    assert len(QUESTIONS) == 6
    for q in QUESTIONS:
        module, fn = q.experiment.rsplit(".", 1)
        assert callable(getattr(importlib.import_module(module), fn))
        assert get(q.exercise).notebook == "07_practitioners_questions"
        assert all(thread_url(t).startswith("https://github.com/") for t in q.threads)
