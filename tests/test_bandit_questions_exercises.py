"""Notebook 07's exercises: each reference solution agrees with the library code it mirrors (toy_rl.bandit,
toy_rl.bandit.questions, toy_rl.clipping), and plausible wrong answers outside the mistake lists get the general
nudge. (The checkers' generic properties — solution right, every listed mistake caught with its hint, stubs not
attempted, the code never shown, the notebook's cells wired — are tested for every exercise in
tests/test_exercises.py.)"""
import pytest
import torch

from toy_rl import exercises as exr
from toy_rl.clipping import ClipHigher, Symmetric, policy_loss, token_ratio
from toy_rl.clipping.loss import token_surrogate
from toy_rl.exercises import check, solution
from toy_rl.bandit import Schedule, entropy_gradient, position
from toy_rl.bandit.questions.clip_counts import clip_counts
from toy_rl.bandit.questions.negative_branch import gradient_weights, two_sided_surrogate
from toy_rl.synthetic import stale_batch

NAMES = ("surrogate_grad_weight", "minibatch_position", "sign_aware_clip_fractions", "dual_clip_surrogate",
         "async_ages", "entropy_gradient")


def test_six_exercises_in_notebook_07():
    assert {ex.name for ex in exr.exercises("07")} == set(NAMES)


def _batch(seed, drift):
    b = stale_batch(n_prompts=6, max_tokens=32, drift=drift, seed=seed, dtype=torch.float64)
    ratio = token_ratio(b.logp, b.old_logp)
    return b, ratio, b.advantages[:, None].expand_as(ratio)


@pytest.mark.parametrize("seed, drift", [(0, 0.2), (1, 0.6), (2, 1.5)])
def test_weights_and_dual_clip_are_the_library_surrogate(seed, drift):
    _, ratio, adv = _batch(seed, drift)
    for lo, hi in ((0.8, 1.2), (0.8, 1.28)):
        weights, dual = solution("surrogate_grad_weight"), solution("dual_clip_surrogate")
        assert torch.allclose(weights(ratio, adv, lo, hi), gradient_weights(ratio, adv, lo, hi))
        assert torch.allclose(dual(ratio, adv, lo, hi, 3.0), token_surrogate(ratio, adv, lo, hi, 3.0))
        assert torch.allclose(two_sided_surrogate(ratio, adv, lo, hi, 3.0), token_surrogate(ratio, adv, lo, hi, 3.0))


@pytest.mark.parametrize("seed, drift", [(3, 0.3), (4, 1.0)])
def test_clip_fractions_are_policy_losss(seed, drift):
    b, ratio, adv = _batch(seed, drift)
    for rule in (Symmetric(), ClipHigher()):
        low, high = solution("sign_aware_clip_fractions")(ratio, adv, b.mask, rule.c_low, rule.c_high)
        stats = policy_loss(b.logp, b.old_logp, b.advantages, b.mask, rule)[1]
        counts = clip_counts(ratio, adv, b.mask, rule.c_low, rule.c_high)
        assert low == pytest.approx(stats["clip_frac_low"]) == pytest.approx(counts["sign_aware_low"])
        assert high == pytest.approx(stats["clip_frac_high"]) == pytest.approx(counts["sign_aware_high"])


@pytest.mark.parametrize("epochs, minibatches, lag", [(1, 1, 0), (1, 4, 0), (3, 2, 0), (1, 1, 1), (2, 4, 2)])
def test_positions_and_ages_are_the_schedules(epochs, minibatches, lag):
    for recompute in (False, True):
        s = Schedule(epochs=epochs, minibatches=minibatches, lag=lag, recompute_old=recompute)
        for t in range(60):
            p = position(t, s)
            if lag == 0 and not recompute:
                assert solution("minibatch_position")(t, epochs, minibatches) == (p.epoch, p.minibatch, p.ratio_age)
            assert solution("async_ages")(t, s.updates_per_rollout, lag, recompute) == (p.data_age, p.ratio_age)


def test_entropy_gradient_is_the_librarys():
    z = 3 * torch.randn(5, 7, 32, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    assert torch.allclose(solution("entropy_gradient")(z), entropy_gradient(z), atol=1e-14)


HANDWRITTEN = {
    "surrogate_grad_weight": lambda ratio, adv, lo, hi: torch.ones_like(ratio),
    "minibatch_position": lambda t, e, n: (0, 0, 0),
    "sign_aware_clip_fractions": lambda ratio, adv, mask, lo, hi: (0.5, 0.5),
    "dual_clip_surrogate": lambda ratio, adv, lo, hi, c: ratio.clamp(max=c),
    "async_ages": lambda t, U, lag, recompute: (t, 0),
    "entropy_gradient": lambda z: torch.softmax(z, -1),
}


@pytest.mark.parametrize("name", NAMES)
def test_other_wrong_answers_get_the_nudge(capsys, name):
    assert check(name, HANDWRITTEN[name]) is False
    out = capsys.readouterr().out
    assert out.startswith("✗ wrong") and f"hint: {exr.get(name).nudge}" in out


def test_trls_delta_form_of_dual_clip_is_accepted(capsys):
    """min(min(r, c)·A, clip(r)·A) is the same function as dual-clip (c > c_high): the checker accepts it."""
    assert check("dual_clip_surrogate", lambda r, a, lo, hi, c: two_sided_surrogate(r, a, lo, hi, c)) is True
    assert capsys.readouterr().out.startswith("✓ right")


def test_a_float32_share_is_accepted(capsys):
    def in_float32(ratio, adv, mask, lo, hi):
        m = (mask > 0).float()
        low = (((ratio < lo) & (adv < 0)).float() * m).sum() / m.sum()
        return low, (((ratio > hi) & (adv > 0)).float() * m).sum() / m.sum()
    assert check("sign_aware_clip_fractions", in_float32) is True, capsys.readouterr().out
