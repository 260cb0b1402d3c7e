"""Exercises of notebook 07 (practitioners' questions): one per question.

7.1 surrogate_grad_weight   what a token's gradient is when nothing is clipped (r ≡ 1)      trl#3120
7.2 minibatch_position      which epoch and mini-batch an update is, and how stale           verl#791
7.3 sign_aware_clip_fractions  the clip fractions that count lost gradients                  trl#3144
7.4 dual_clip_surrogate     the PPO surrogate with dual-clip's floor for A < 0                trl#6945
7.5 async_ages              how old the data and π_old are with a lagging generator           verl#4449
7.6 entropy_gradient        ∂H/∂z, what an entropy bonus adds to every update                 trl#3320
"""
from __future__ import annotations

import torch

from . import register
from .framework import Case, Exercise, Mistake, close, exact

NB = "07_practitioners_questions"
T = lambda rows: torch.tensor(rows, dtype=torch.float64)     # noqa: E731


def _gen(seed):
    return torch.Generator().manual_seed(seed)


def _stale(seed, shape, spread=0.4):
    g = _gen(seed)
    ratio = torch.exp(spread * torch.randn(shape, generator=g, dtype=torch.float64))
    adv = torch.randn(shape, generator=g, dtype=torch.float64)
    return ratio, adv


# ----------------------------------------------------------------------------- 7.1 the gradient a token keeps

def _weight_cases():
    cases = [
        Case("on-policy: r = 1 on every token", (T([1.0, 1.0, 1.0, 1.0]), T([1.5, -0.5, 0.0, -1.0]), 0.8, 1.2),
             note="one update per rollout: π_old is the policy itself, nothing is clipped and the weight is A"),
        Case("A > 0 above c_high", (T([1.5, 1.1]), T([1.0, 1.0]), 0.8, 1.2),
             note="a good token that has already gained enough: the clip takes over, no gradient"),
        Case("A > 0 below c_low", (T([0.5]), T([2.0]), 0.8, 1.2),
             note="the min keeps r·A here: a good token that became less likely keeps pushing"),
        Case("A < 0 below c_low", (T([0.5, 0.9]), T([-1.0, -1.0]), 0.8, 1.2)),
        Case("A < 0 above c_high", (T([3.0]), T([-1.0]), 0.8, 1.2),
             note="the pessimistic side: the min keeps r·A, however large r is (question 4)"),
        Case("exactly on a bound", (T([1.2, 0.8]), T([1.0, -1.0]), 0.8, 1.2),
             note="a token exactly at a bound keeps its gradient (torch.clamp passes it)"),
        Case("clip-higher bounds, a 2-D batch", (T([[1.25, 1.3], [0.7, 1.0]]), T([[1.0, 1.0], [-0.5, 0.0]]), 0.8, 1.28)),
    ]
    for i in range(5):
        ratio, adv = _stale(710 + i, (3, 7))
        c_high = (1.2, 1.28, 2.0)[i % 3]
        cases.append(Case(f"random stale batch #{i + 1} (c_high {c_high})", (ratio, adv, 0.8, c_high), random=True))
    return cases


def _cut(ratio, adv, c_low, c_high):
    return ((ratio > c_high) & (adv > 0)) | ((ratio < c_low) & (adv < 0))


def _w_no_r(ratio, adv, c_low, c_high):
    return torch.where(_cut(ratio, adv, c_low, c_high), torch.zeros_like(ratio), adv)


def _w_sign_blind(ratio, adv, c_low, c_high):
    out = (ratio < c_low) | (ratio > c_high)
    return torch.where(out, torch.zeros_like(ratio), ratio * adv)


def _w_value(ratio, adv, c_low, c_high):
    return torch.minimum(ratio * adv, ratio.clamp(c_low, c_high) * adv)


def _w_clip_slope(ratio, adv, c_low, c_high):
    return ratio.clamp(c_low, c_high) * adv


def _w_no_clip(ratio, adv, c_low, c_high):
    return ratio * adv


def _w_inverted(ratio, adv, c_low, c_high):
    wrong_side = ((ratio < c_low) & (adv > 0)) | ((ratio > c_high) & (adv < 0))
    return torch.where(wrong_side, torch.zeros_like(ratio), ratio * adv)


def _weight_extra(fn):
    """On a synthetic stale batch: the weights equal −N·∂loss/∂log π of policy_loss, token for token."""
    from ..clipping import ClipHigher, policy_loss, token_ratio
    from ..synthetic import stale_batch
    b = stale_batch(n_prompts=4, max_tokens=16, drift=0.4, seed=7, dtype=torch.float64)
    logp = b.logp.clone().requires_grad_(True)
    rule = ClipHigher()
    loss, _ = policy_loss(logp, b.old_logp, b.advantages, b.mask, rule)
    (grad,) = torch.autograd.grad(loss, (logp,))
    m = b.mask > 0
    ratio = token_ratio(b.logp, b.old_logp)[m]
    adv = b.advantages[:, None].expand_as(b.mask)[m]
    mine = torch.as_tensor(fn(ratio, adv, rule.c_low, rule.c_high), dtype=torch.float64)
    ok = torch.allclose(mine, -grad[m] * m.sum(), rtol=1e-6, atol=1e-9)
    return ok, (f"on a stale batch of {int(m.sum())} tokens your weights are −N·∂loss/∂log π of "
                "toy_rl.clipping.policy_loss, token for token" if ok else
                "on a stale batch your weights differ from −N·∂loss/∂log π of toy_rl.clipping.policy_loss")


# ----------------------------------------------------------------------------- 7.2 epochs and mini-batches

def _position_cases():
    cases = [
        Case("on-policy: one epoch, one mini-batch", (5, 1, 1), note="every update gets a fresh rollout: age 0"),
        Case("one epoch, 4 mini-batches: the second step", (1, 1, 4),
             note="verl#791: one PPO epoch, but the second mini-batch is scored after one optimizer step"),
        Case("one epoch, 4 mini-batches: the last step", (3, 1, 4)),
        Case("one epoch, 4 mini-batches: the next rollout", (4, 1, 4), note="update 4 starts a new rollout"),
        Case("two epochs, one mini-batch (TRL num_iterations=2)", (1, 2, 1)),
        Case("two epochs of 4 mini-batches: second epoch, second step", (5, 2, 4),
             note="epochs outside, mini-batches inside: the second epoch starts after all 4 mini-batches"),
        Case("DAPO's recipe: 16 mini-batches, the last one", (15, 1, 16)),
        Case("DAPO's recipe: the next rollout", (16, 1, 16)),
    ]
    g = _gen(720)
    for i in range(6):
        t = int(torch.randint(0, 500, (1,), generator=g))
        e, n = int(torch.randint(1, 5, (1,), generator=g)), int(torch.randint(1, 17, (1,), generator=g))
        cases.append(Case(f"random update #{i + 1}", (t, e, n), random=True))
    return cases


def _pos_age_is_epoch(t, epochs, minibatches):
    i = t % (epochs * minibatches)
    return i // minibatches, i % minibatches, i // minibatches


def _pos_age_is_minibatch(t, epochs, minibatches):
    i = t % (epochs * minibatches)
    return i // minibatches, i % minibatches, i % minibatches


def _pos_swapped(t, epochs, minibatches):
    i = t % (epochs * minibatches)
    return i % epochs, i // epochs, i


def _pos_never_fresh(t, epochs, minibatches):
    i = t % (epochs * minibatches)
    return i // minibatches, i % minibatches, t


def _pos_one_based(t, epochs, minibatches):
    i = t % (epochs * minibatches)
    return i // minibatches, i % minibatches, i + 1


def _position_extra(fn):
    """The bandit's loop records the same epoch, mini-batch and ratio age for every update."""
    from ..bandit import BanditConfig, Schedule, simulate
    run = simulate(BanditConfig(steps=24), "symmetric", [0], schedule=Schedule(epochs=2, minibatches=4))
    m = run.metrics
    got = [tuple(int(v) for v in fn(t, 2, 4)) for t in range(24)]
    want = [(int(m["epoch"][0, t]), int(m["minibatch"][0, t]), int(m["ratio_age"][0, t])) for t in range(24)]
    ok = got == want
    return ok, ("24 updates of a bandit run with 2 epochs of 4 mini-batches: toy_rl.bandit.simulate records the same"
                if ok else "on a bandit run with 2 epochs of 4 mini-batches, toy_rl.bandit.simulate records other numbers")


# ----------------------------------------------------------------------------- 7.3 sign-aware clip fractions

def _fraction_cases():
    ones = lambda n: torch.ones(n, dtype=torch.float64)   # noqa: E731
    cases = [
        Case("every ratio inside the bounds", (T([0.9, 1.0, 1.1]), T([1.0, -1.0, 1.0]), ones(3), 0.8, 1.2)),
        Case("a bad token below c_low", (T([0.5, 1.0]), T([-1.0, 1.0]), ones(2), 0.8, 1.2)),
        Case("a good token below c_low", (T([0.5, 1.0]), T([1.0, 1.0]), ones(2), 0.8, 1.2),
             note="outside the bounds, but the min keeps r·A: it still has its gradient, not clipped"),
        Case("a bad token above c_high", (T([2.0, 1.0, 1.3]), T([-1.0, 1.0, 1.0]), ones(3), 0.8, 1.2),
             note="A < 0 above c_high keeps its gradient; the good token at 1.3 is clipped"),
        Case("padding", (T([1.0, 1.5, 0.5]), T([1.0, 1.0, -1.0]), T([1.0, 0.0, 0.0]), 0.8, 1.2),
             note="masked-out positions are not tokens: count over the mask only"),
        Case("exactly on a bound", (T([0.8, 1.2, 1.28]), T([-1.0, 1.0, 1.0]), ones(3), 0.8, 1.28),
             note="a token exactly at a bound keeps its gradient"),
        Case("a 2-D batch with padding", (T([[1.4, 0.6, 1.0], [0.7, 1.5, 9.0]]), T([[1.0, -1.0, 0.0], [1.0, -1.0, 1.0]]),
                                          T([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]]), 0.8, 1.2)),
    ]
    for i in range(5):
        ratio, adv = _stale(730 + i, (4, 9), spread=0.3 + 0.1 * i)
        mask = (torch.arange(9)[None] < torch.tensor([[9], [5], [7], [2]])).to(torch.float64)
        c_high = (1.2, 1.28)[i % 2]
        cases.append(Case(f"random padded batch #{i + 1} (c_high {c_high})", (ratio, adv, mask, 0.8, c_high), random=True))
    return cases


def _frac(cond, mask):
    m = mask > 0
    return int((cond & m).sum()) / int(m.sum())


def _f_sign_blind(ratio, adv, mask, c_low, c_high):
    return _frac(ratio < c_low, mask), _frac(ratio > c_high, mask)


def _f_trl_before_fix(ratio, adv, mask, c_low, c_high):
    return _frac((ratio < c_low) & (adv > 0), mask), _frac((ratio > c_high) & (adv < 0), mask)


def _f_no_mask(ratio, adv, mask, c_low, c_high):
    return (int(((ratio < c_low) & (adv < 0)).sum()) / ratio.numel(),
            int(((ratio > c_high) & (adv > 0)).sum()) / ratio.numel())


def _f_per_sign(ratio, adv, mask, c_low, c_high):
    m = mask > 0
    neg, pos = (adv < 0) & m, (adv > 0) & m
    low = int(((ratio < c_low) & neg).sum()) / max(int(neg.sum()), 1)
    high = int(((ratio > c_high) & pos).sum()) / max(int(pos.sum()), 1)
    return low, high


def _f_inclusive(ratio, adv, mask, c_low, c_high):
    return _frac((ratio <= c_low) & (adv < 0), mask), _frac((ratio >= c_high) & (adv > 0), mask)


def _fraction_extra(fn):
    """Against policy_loss's clip_frac_low / clip_frac_high on synthetic stale batches, both fixed rules."""
    from ..clipping import ClipHigher, Symmetric, policy_loss, token_ratio
    from ..synthetic import stale_batch
    for seed, drift in ((1, 0.2), (2, 0.5), (3, 1.0)):
        b = stale_batch(n_prompts=6, max_tokens=32, drift=drift, seed=seed, dtype=torch.float64)
        ratio = token_ratio(b.logp, b.old_logp)
        adv = b.advantages[:, None].expand_as(ratio)
        for rule in (Symmetric(), ClipHigher()):
            s = policy_loss(b.logp, b.old_logp, b.advantages, b.mask, rule)[1]
            low, high = (float(v) for v in fn(ratio, adv, b.mask, rule.c_low, rule.c_high))
            if abs(low - s["clip_frac_low"]) > 1e-6 or abs(high - s["clip_frac_high"]) > 1e-6:
                return False, f"on a stale batch (drift {drift}, {rule!r}) your fractions differ from policy_loss's"
    return True, "on 6 stale batches your fractions are policy_loss's clip_frac_low and clip_frac_high"


# ----------------------------------------------------------------------------- 7.4 dual-clip

def _dual_cases():
    cases = [
        Case("A < 0 far beyond c", (T([5.0, 10.0]), T([-1.0, -0.5]), 0.8, 1.2, 3.0),
             note="the negative branch r·A is capped at c·A: its loss −c·A stops growing"),
        Case("A < 0 between c_high and c", (T([2.0]), T([-1.0]), 0.8, 1.2, 3.0), note="below c the cap does not bind"),
        Case("A > 0 beyond c", (T([5.0]), T([1.0]), 0.8, 1.2, 3.0),
             note="dual-clip only touches A < 0: a good token above c_high is clipped at c_high·A as before"),
        Case("A < 0 below c_low", (T([0.5]), T([-2.0]), 0.8, 1.2, 3.0)),
        Case("on-policy", (T([1.0, 1.0]), T([1.0, -1.0]), 0.8, 1.2, 3.0)),
        Case("A = 0 and exactly at c", (T([4.0, 3.0]), T([0.0, -1.0]), 0.8, 1.2, 3.0)),
        Case("clip-higher bounds, c = 10, a 2-D batch", (T([[12.0, 1.3], [0.5, 20.0]]), T([[-1.0, 1.0], [1.0, 2.0]]),
                                                          0.8, 1.28, 10.0)),
    ]
    for i in range(5):
        ratio, adv = _stale(740 + i, (3, 8), spread=1.0)
        c = (3.0, 2.0, 10.0)[i % 3]
        cases.append(Case(f"random stale batch #{i + 1} (c = {c:g})", (ratio, adv, 0.8, 1.28, c), random=True))
    return cases


def _ppo(ratio, adv, c_low, c_high):
    return torch.minimum(ratio * adv, ratio.clamp(c_low, c_high) * adv)


def _d_both_signs(ratio, adv, c_low, c_high, c):
    return torch.maximum(_ppo(ratio, adv, c_low, c_high), c * adv)


def _d_min(ratio, adv, c_low, c_high, c):
    s = _ppo(ratio, adv, c_low, c_high)
    return torch.where(adv < 0, torch.minimum(s, c * adv), s)


def _d_abs(ratio, adv, c_low, c_high, c):
    s = _ppo(ratio, adv, c_low, c_high)
    return torch.where(adv < 0, torch.maximum(s, c * adv.abs()), s)


def _d_replaces_ppo(ratio, adv, c_low, c_high, c):
    return torch.where(adv < 0, torch.maximum(ratio * adv, c * adv), ratio * adv)


def _d_no_cap(ratio, adv, c_low, c_high, c):
    return _ppo(ratio, adv, c_low, c_high)


def _dual_extra(fn):
    """Against toy_rl.clipping.loss.token_surrogate(..., dual_clip=c) on a very stale synthetic batch."""
    from ..clipping.loss import token_surrogate
    from ..synthetic import stale_batch
    b = stale_batch(n_prompts=6, max_tokens=32, drift=1.2, seed=4, dtype=torch.float64)
    ratio = (b.logp - b.old_logp).exp()
    adv = b.advantages[:, None].expand_as(ratio)
    mine = torch.as_tensor(fn(ratio, adv, 0.8, 1.2, 3.0), dtype=torch.float64)
    ok = torch.allclose(mine, token_surrogate(ratio, adv, 0.8, 1.2, 3.0), rtol=1e-6, atol=1e-9)
    hits = int(((adv < 0) & (ratio > 3.0)).sum())
    return ok, (f"on a stale batch where {hits} negative tokens have r > 3, your surrogate is toy_rl's dual-clip"
                if ok else "on a stale batch your surrogate differs from toy_rl.clipping.loss.token_surrogate(dual_clip=3)")


# ----------------------------------------------------------------------------- 7.5 asynchronous ages

def _async_cases():
    cases = [
        Case("synchronous, one update per rollout", (7, 1, 0, False)),
        Case("one-step-off, π_old from the generator", (7, 1, 1, False),
             note="the generator sampled rollout 7 with the weights of update 6: one update old"),
        Case("one-step-off, π_old recomputed", (7, 1, 1, True),
             note="r = 1 (the trainer recomputed π_old), but the samples are still one update old"),
        Case("one-step-off: the very first update", (0, 1, 1, False),
             note="before any update the generator and the trainer hold the same initial weights"),
        Case("lag 1, 4 updates per rollout: still on the first rollout", (2, 4, 1, False),
             note="while rollout < lag the generator used the initial weights (version 0)"),
        Case("lag 1, 4 updates per rollout, third step of rollout 1", (6, 4, 1, False)),
        Case("lag 1, 4 updates per rollout, recomputed", (6, 4, 1, True),
             note="recomputed at the start of the rollout's updates: the later mini-batches still drift"),
        Case("lag 2, 4 updates per rollout, recomputed", (13, 4, 2, True)),
    ]
    g = _gen(750)
    for i in range(6):
        t, U = int(torch.randint(0, 400, (1,), generator=g)), int(torch.randint(1, 9, (1,), generator=g))
        lag = int(torch.randint(0, 4, (1,), generator=g))
        cases.append(Case(f"random update #{i + 1}", (t, U, lag, bool(i % 2)), random=True))
    return cases


def _a_no_warmup(t, U, lag, recompute_old):
    j, i = divmod(t, U)
    data = i + lag * U
    return data, (i if recompute_old else data)


def _a_lag_in_updates(t, U, lag, recompute_old):
    j, i = divmod(t, U)
    data = i + lag if j >= lag else t
    return data, (i if recompute_old else data)


def _a_recompute_zero(t, U, lag, recompute_old):
    j, i = divmod(t, U)
    data = t - max(0, (j - lag) * U)
    return data, (0 if recompute_old else data)


def _a_recompute_resets_data(t, U, lag, recompute_old):
    j, i = divmod(t, U)
    data = i if recompute_old else t - max(0, (j - lag) * U)
    return data, (i if recompute_old else data)


def _a_ignores_recompute(t, U, lag, recompute_old):
    j, i = divmod(t, U)
    data = t - max(0, (j - lag) * U)
    return data, data


def _async_extra(fn):
    """The bandit's loop records the same data and ratio ages."""
    from ..bandit import BanditConfig, Schedule, simulate
    for recompute in (False, True):
        schedule = Schedule(minibatches=2, lag=2, recompute_old=recompute)
        run = simulate(BanditConfig(steps=20), "symmetric", [0], schedule=schedule)
        m = run.metrics
        got = [tuple(int(v) for v in fn(t, 2, 2, recompute)) for t in range(20)]
        want = [(int(m["staleness"][0, t]), int(m["ratio_age"][0, t])) for t in range(20)]
        if got != want:
            return False, f"on a bandit run (2 mini-batches, lag 2, recompute_old={recompute}) toy_rl.bandit.simulate records other ages"
    return True, "20 updates of two bandit runs (2 mini-batches, lag 2): toy_rl.bandit.simulate records the same ages"


# ----------------------------------------------------------------------------- 7.6 the entropy's gradient

def _entropy_cases():
    cases = [
        Case("uniform logits", (T([0.0, 0.0, 0.0, 0.0]),), note="the uniform softmax has the largest entropy: gradient 0"),
        Case("two tokens", (T([1.0, 0.0]),)),
        Case("one likely token", (T([3.0, 0.0, 0.0, 0.0, 0.0]),),
             note="the bonus takes probability from the likely token and gives it to the others"),
        Case("a constant added to every logit", (T([13.0, 10.0, 10.0, 10.0, 10.0]),)),
        Case("very large logits", (T([1000.0, 0.0, -1000.0]),),
             note="log(softmax(z)) underflows to −inf here; log_softmax does not"),
        Case("a batch of contexts (S, K)", (T([[0.5, -1.0, 2.0], [0.0, 0.1, -0.1]]),), note="one softmax per row"),
    ]
    g = _gen(760)
    for i in range(6):
        shape = ((16,), (3, 8), (2, 4, 32))[i % 3]
        cases.append(Case(f"random logits #{i + 1} {shape}", (2.0 * torch.randn(shape, generator=g, dtype=torch.float64),),
                          random=True))
    return cases


def _e_parts(logits):
    logp = torch.log_softmax(logits, -1)
    p = logp.exp()
    return logp, p, -(p * logp).sum(-1, keepdim=True)


def _e_no_h(logits):
    logp, p, H = _e_parts(logits)
    return -p * logp


def _e_no_p(logits):
    logp, p, H = _e_parts(logits)
    return -(logp + H)


def _e_sign(logits):
    logp, p, H = _e_parts(logits)
    return p * (logp + H)


def _e_plain_mean(logits):
    logp, p, H = _e_parts(logits)
    return -p * (logp - logp.mean(-1, keepdim=True))


def _e_naive_log(logits):
    p = torch.softmax(logits, -1)
    logp = torch.log(p)
    return -p * (logp - (p * logp).sum(-1, keepdim=True))


def _entropy_extra(fn):
    """Against autograd of the bandit's exact entropy, on random logits shaped like the bandit's (seeds, S, K)."""
    from ..bandit.policy import entropy
    z = (2.0 * torch.randn(4, 4, 32, generator=_gen(761), dtype=torch.float64)).requires_grad_(True)
    (grad,) = torch.autograd.grad(entropy(z).sum(), (z,))
    mine = torch.as_tensor(fn(z.detach()), dtype=torch.float64)
    ok = torch.allclose(mine, grad, rtol=1e-6, atol=1e-9)
    return ok, ("your gradient is autograd's on 16 random softmaxes of 32 tokens (and sums to 0 over the tokens: "
                "a bonus moves probability, it cannot add any)" if ok else
                "on 16 random softmaxes your gradient differs from autograd's ∂H/∂z")


register(
    Exercise(
        name="surrogate_grad_weight", notebook=NB,
        title="a token's gradient weight ∂/∂log π of min(r·A, clip(r)·A): r·A, or 0 where clipped (A at r ≡ 1)",
        solution="toy_rl.solutions.nb07:surrogate_grad_weight",
        cases=_weight_cases,
        nudge="per token: ∂r/∂log π = r, so the unclipped term r·A has slope r·A; the clipped term is a constant "
              "(slope 0). The min takes the clipped term only for A > 0 with r > c_high and for A < 0 with r < c_low.",
        mistakes=(
            Mistake(_w_no_r, "the weight of an unclipped token is r·A, not A: ∂(r·A)/∂log π = r·A because ∂r/∂log π = r. "
                             "The two agree only where r = 1."),
            Mistake(_w_sign_blind, "out of bounds is not clipped: on the pessimistic side (A > 0 with r < c_low, "
                                   "A < 0 with r > c_high) the min keeps r·A and the token keeps its gradient."),
            Mistake(_w_value, "that is the surrogate's value; asked is its slope in log π (what the token pushes with)."),
            Mistake(_w_clip_slope, "clip(r)·A is constant where the clip binds (r is replaced by a number): its "
                                   "slope there is 0, and inside the bounds it is r·A."),
            Mistake(_w_no_clip, "r·A is right where the token keeps its gradient; where the clip takes over (A > 0 "
                                "above c_high, A < 0 below c_low) the weight is 0."),
            Mistake(_w_inverted, "the flat side is the other one: A > 0 loses its gradient above c_high, A < 0 below c_low."),
        ),
        compare=close(rtol=1e-6, atol=1e-9),
        extra=_weight_extra,
    ),
    Exercise(
        name="minibatch_position", notebook=NB,
        title="which epoch and mini-batch update t is, and how many updates old its data is (epochs outside)",
        solution="toy_rl.solutions.nb07:minibatch_position",
        cases=_position_cases,
        nudge="one rollout serves epochs × minibatches updates, in order: epoch 0's mini-batches 0, 1, ..., then "
              "epoch 1's. The i-th of them (i = t mod that product) trains on data sampled i updates ago.",
        mistakes=(
            Mistake(_pos_age_is_epoch, "mini-batches make the data stale too, not only epochs: after one optimizer "
                                       "step the second mini-batch is scored by a policy that moved (verl#791)."),
            Mistake(_pos_age_is_minibatch, "the age counts every update since the rollout was sampled, earlier "
                                           "epochs included: the second epoch's first mini-batch is `minibatches` "
                                           "updates old."),
            Mistake(_pos_swapped, "epochs are the outer loop and mini-batches the inner one (as verl and TRL loop): "
                                  "the epoch is i // minibatches, the mini-batch i % minibatches."),
            Mistake(_pos_never_fresh, "each rollout starts fresh: count the updates since *its* sampling (t mod "
                                      "the updates per rollout), not since the start of training."),
            Mistake(_pos_one_based, "count from 0: the first update on a fresh rollout is 0 updates old (r = 1 there)."),
        ),
        compare=exact(),
        extra=_position_extra,
    ),
    Exercise(
        name="sign_aware_clip_fractions", notebook=NB,
        title="the clip fractions that count lost gradients: (A < 0, r < c_low) and (A > 0, r > c_high) over the mask",
        solution="toy_rl.solutions.nb07:sign_aware_clip_fractions",
        cases=_fraction_cases,
        nudge="low: masked tokens with A < 0 and r strictly below c_low; high: masked tokens with A > 0 and r "
              "strictly above c_high; both divided by the number of masked tokens. Return (low, high).",
        mistakes=(
            Mistake(_f_sign_blind, "out of bounds is not clipped: a good token below c_low or a bad one above "
                                   "c_high keeps its gradient (the min picks r·A). Count the sign of A too."),
            Mistake(_f_trl_before_fix, "those are the tokens the min leaves unclipped (r·A < clip(r)·A), the count "
                                       "huggingface/trl#3144 asked about; the clipped ones are A < 0 below c_low "
                                       "and A > 0 above c_high."),
            Mistake(_f_no_mask, "count over the mask only: padding positions are not tokens, neither in the count "
                                "nor in the denominator."),
            Mistake(_f_per_sign, "divide both by all masked tokens (so low + high is the share of the batch that lost "
                                 "its gradient), not by the tokens of that sign."),
            Mistake(_f_inclusive, "a token exactly on a bound keeps its gradient: use strict < and >."),
        ),
        compare=close(rtol=1e-6, atol=1e-9),          # a share computed in float32 is right too
        extra=_fraction_extra,
    ),
    Exercise(
        name="dual_clip_surrogate", notebook=NB,
        title="the per-token surrogate with dual-clip: min(r·A, clip(r)·A), and for A < 0 at least c·A",
        solution="toy_rl.solutions.nb07:dual_clip_surrogate",
        cases=_dual_cases,
        nudge="first PPO's surrogate min(r·A, clip(r, c_low, c_high)·A) for every token; then, for A < 0 only, "
              "the larger of it and c·A (a floor: beyond r = c the value stays c·A).",
        mistakes=(
            Mistake(_d_both_signs, "dual-clip caps the negative branch only: for A > 0, c·A is above the surrogate "
                                   "and would replace it. Apply the max where A < 0."),
            Mistake(_d_min, "the cap is a floor on the (negative) surrogate: max(surrogate, c·A), so that −loss "
                            "cannot go below c·A; a min would always pick c·A."),
            Mistake(_d_abs, "with A < 0 the floor is c·A, a negative number (c times the advantage itself, not its size)."),
            Mistake(_d_replaces_ppo, "dual-clip adds a floor to PPO's clipped surrogate, it does not replace it: keep "
                                     "min(r·A, clip(r)·A) for every token first."),
            Mistake(_d_no_cap, "that is PPO's surrogate alone: for A < 0 with r > c it must stop at c·A."),
        ),
        compare=close(rtol=1e-6, atol=1e-9),
        extra=_dual_extra,
    ),
    Exercise(
        name="async_ages", notebook=NB,
        title="with a generator `lag` rollouts behind: how old update t's samples are, and how old its π_old is",
        solution="toy_rl.solutions.nb07:async_ages",
        cases=_async_cases,
        nudge="rollout j = t // U was generated with the weights of version max(0, (j − lag)·U); the trainer is at "
              "version t. π_old is that generator's policy, or (recompute_old) the trainer's at version j·U. "
              "Return (t − sampling version, t − π_old's version).",
        mistakes=(
            Mistake(_a_no_warmup, "the first `lag` rollouts are generated by the initial weights (there is no older "
                                  "policy): the age there is t itself, not i + lag·U."),
            Mistake(_a_lag_in_updates, "`lag` counts rollouts, and a rollout serves U updates: the generator is "
                                       "lag·U updates behind, not lag."),
            Mistake(_a_recompute_zero, "π_old is recomputed once, when the rollout's updates begin: the later "
                                       "mini-batches are scored by a policy i updates ahead of it."),
            Mistake(_a_recompute_resets_data, "recomputing π_old changes the denominator of r, not who sampled: the "
                                              "data is as old as before."),
            Mistake(_a_ignores_recompute, "with recompute_old the denominator is the trainer's policy when the "
                                          "rollout's updates begin, so the ratio age is i, whatever the lag."),
        ),
        compare=exact(),
        extra=_async_extra,
    ),
    Exercise(
        name="entropy_gradient", notebook=NB,
        title="∂H/∂z of a softmax's entropy: −π·(log π + H), what an entropy bonus adds to every update",
        solution="toy_rl.solutions.nb07:entropy_gradient",
        cases=_entropy_cases,
        nudge="with π = softmax(z), ∂π_b/∂z_a = π_b(δ_ab − π_a); differentiate H = −Σ_b π_b log π_b and collect "
              "terms: −π_a(log π_a + H). Work along the last axis, with log_softmax.",
        mistakes=(
            Mistake(_e_no_h, "−π·log π is H's summand, not its gradient: the softmax couples the tokens, which adds "
                             "−π·H (so that the gradient sums to 0)."),
            Mistake(_e_no_p, "every term carries a factor π_a (from ∂π/∂z): ∂H/∂z_a = −π_a(log π_a + H)."),
            Mistake(_e_sign, "that is the gradient of −H; a bonus that raises the entropy follows +∂H/∂z."),
            Mistake(_e_plain_mean, "the term subtracted from log π_a is −H = Σ π log π, the π-weighted mean of log π, "
                                   "not the plain mean over tokens."),
            Mistake(_e_naive_log, "log(softmax(z)) underflows to −inf for very unlikely tokens (0 × −inf = nan): "
                                  "use torch.log_softmax."),
        ),
        compare=close(rtol=1e-6, atol=1e-9),
        extra=_entropy_extra,
    ),
)
