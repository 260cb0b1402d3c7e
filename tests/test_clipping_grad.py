"""Gradients of the clipped loss: gradcheck in float64, zero gradient exactly in the
clipped regions, and the on-policy case (r ≡ 1) where every rule coincides.

d r / d logp = r, so an unclipped token's gradient of the token-mean loss is
−A·r/n; a clipped token (r > c_high with A > 0, r < c_low with A < 0, or
r > c with A < 0 under dual-clip) gets exactly 0.
"""
import pytest
import torch
from torch.autograd import gradcheck

from toy_rl.clipping import BAPO, ClipHigher, Symmetric, policy_loss

F64 = torch.float64


def _rid(rule):
    """Short test id: a BAPO shows only its non-default settings."""
    if not isinstance(rule, BAPO):
        return repr(rule)
    keys = ("rho0", "low_range", "high_range", "low_step", "high_step", "order", "count", "balance")
    return "BAPO(" + ",".join(f"{k}={getattr(rule, k)}" for k in keys if getattr(rule, k) != getattr(BAPO(), k)) + ")"

RULES = [Symmetric(), ClipHigher(), BAPO(), BAPO(count="all"), BAPO(order="lower_first"),
         BAPO(balance="pos_neg", rho0=0.667), BAPO.authors_code()]

# Ratios kept ≥ 0.01 away from every bound any rule here can pick:
# c_low ∈ {0.6, 0.62, …, 0.9} ∪ {0.65, …, 0.8}, c_high ∈ {1.2, 1.25, …, 3.0} ∪ {1.28}, dual-clip 3.0.
SAFE_RATIOS = [0.31, 0.55, 0.63, 0.69, 0.77, 0.83, 0.95, 1.0, 1.07, 1.13, 1.33, 1.52, 1.77, 2.12, 2.58, 3.41, 6.0]


def _inputs(seed, B=3, T=5):
    g = torch.Generator().manual_seed(seed)
    idx = torch.randint(len(SAFE_RATIOS), (B, T), generator=g)
    r = torch.tensor(SAFE_RATIOS, dtype=F64)[idx]
    old = -torch.rand(B, T, generator=g, dtype=F64) * 4 - 0.1
    logp = old + torch.log(r)
    adv = torch.randn(B, T, generator=g, dtype=F64)
    mask = (torch.rand(B, T, generator=g) > 0.2).to(F64)
    mask[:, 0] = 1
    return logp, old, adv, mask


def _bounds_stable(rule, logp, old, adv, mask):
    """True when a 1e-6 nudge of logp cannot move BAPO's stopping point (ρ away from ρ0 on the path)."""
    if not isinstance(rule, BAPO):
        return True
    ratio = torch.exp(logp - old)
    s = rule.search(ratio.reshape(1, -1), adv.reshape(1, -1), mask.reshape(1, -1))
    rho = s["rho_path"][0]
    return bool(((rho - rule.rho0).abs() > 1e-4).all())


@pytest.mark.parametrize("agg", ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm"])
@pytest.mark.parametrize("rule", RULES, ids=_rid)
def test_gradcheck(rule, agg):
    checked = 0
    for seed in range(20):
        logp, old, adv, mask = _inputs(seed)
        if not _bounds_stable(rule, logp, old, adv, mask):
            continue
        logp.requires_grad_(True)
        f = lambda lp: policy_loss(lp, old, adv, mask, rule, agg=agg)[0]
        assert gradcheck(f, (logp,), eps=1e-6, atol=1e-7, rtol=1e-5)
        checked += 1
        if checked == 2:
            break
    assert checked == 2


@pytest.mark.parametrize("rule", [Symmetric(), BAPO()], ids=_rid)
def test_gradcheck_dual_clip(rule):
    logp, old, adv, mask = _inputs(5)
    logp.requires_grad_(True)
    f = lambda lp: policy_loss(lp, old, adv, mask, rule, dual_clip=3.0)[0]
    assert gradcheck(f, (logp,), eps=1e-6, atol=1e-7, rtol=1e-5)


def _expected_grad(r, a, m, lo, hi, dual_clip=None):
    """Plain loop: −A·r/n where the token keeps its gradient, 0 where it is clipped."""
    n = sum(map(sum, m))
    out, clipped = [], []
    for rr, aa, mm in zip(r, a, m):
        row, crow = [], []
        for ri, ai, mi in zip(rr, aa, mm):
            c = (ai > 0 and ri > hi) or (ai < 0 and ri < lo) or (dual_clip is not None and ai < 0 and ri > dual_clip)
            row.append(0.0 if (c or not mi) else -ai * ri * mi / n)
            crow.append(bool(c and mi))
        out.append(row)
        clipped.append(crow)
    return torch.tensor(out, dtype=F64), torch.tensor(clipped)


@pytest.mark.parametrize("dual_clip", [None, 3.0])
@pytest.mark.parametrize("rule", RULES, ids=_rid)
def test_clipped_tokens_get_zero_gradient(rule, dual_clip):
    n_clipped = n_kept = 0
    for seed in range(6):
        logp, old, adv, mask = _inputs(100 + seed, B=4, T=8)
        logp.requires_grad_(True)
        loss, s = policy_loss(logp, old, adv, mask, rule, dual_clip=dual_clip)
        loss.backward()
        r = torch.exp(logp.detach() - old).tolist()
        expected, clipped = _expected_grad(r, adv.tolist(), mask.tolist(), s["c_low"], s["c_high"], dual_clip)
        assert torch.all(logp.grad[clipped] == 0)
        torch.testing.assert_close(logp.grad, expected, rtol=1e-12, atol=1e-15)
        kept = (mask > 0) & ~clipped & (adv != 0)
        assert torch.all(logp.grad[kept] != 0)
        n_clipped += int(clipped.sum())
        n_kept += int(kept.sum())
    assert n_clipped > 0 and n_kept > 0          # both regions were exercised


def test_seq_mean_gradient_weights():
    # seq-mean-token-mean: token t of sequence s weighs 1/(S·n_s), S = non-empty sequences.
    r = torch.tensor([[1.1, 0.9, 1.0], [1.05, 1.0, 1.0], [1.0, 1.0, 1.0]], dtype=F64)
    a = torch.tensor([[1.0, -1.0, 0.5], [2.0, -2.0, 0.0], [1.0, 1.0, 1.0]], dtype=F64)
    m = torch.tensor([[1, 1, 1], [1, 1, 0], [0, 0, 0]], dtype=F64)
    logp = torch.log(r).requires_grad_(True)
    loss, _ = policy_loss(logp, torch.zeros_like(r), a, m, Symmetric(), agg="seq-mean-token-mean")
    loss.backward()
    expected = torch.tensor([[-1.1 / 6, 0.9 / 6, -0.5 / 6],
                             [-2.1 / 4, 2.0 / 4, 0.0],
                             [0.0, 0.0, 0.0]], dtype=F64)
    torch.testing.assert_close(logp.grad, expected, rtol=1e-12, atol=1e-15)


def test_log_ratio_clamp_stops_gradient():
    # |logp − old_logp| > 20 is clamped (as verl and the authors' code): no gradient there.
    logp = torch.tensor([[25.0, -25.0, 0.1]], dtype=F64, requires_grad=True)
    adv = torch.tensor([[-1.0, 1.0, 1.0]], dtype=F64)
    loss, s = policy_loss(logp, torch.zeros_like(logp), adv, torch.ones_like(logp), Symmetric(), dual_clip=None)
    loss.backward()
    import math
    assert s["ratio_max"] == pytest.approx(math.exp(20.0), rel=1e-12)
    assert s["ratio_min"] == pytest.approx(math.exp(-20.0), rel=1e-12)
    assert logp.grad[0, 0] == 0 and logp.grad[0, 1] == 0
    assert logp.grad[0, 2] == pytest.approx(-math.exp(0.1) / 3, rel=1e-12)


# ---------------------------------------------------------------- on-policy: r ≡ 1

ON_POLICY_RULES = RULES + [
    BAPO(high_range=(1.0, 3.0)),                  # ranges that touch 1: bounds exactly at r = 1
    BAPO(low_range=(0.6, 1.0), rho0=0.9),
    BAPO(low_range=(0.9, 1.0), high_range=(1.0, 1.5), order="lower_first", count="all"),
]


@pytest.mark.parametrize("agg", ["token-mean", "seq-mean-token-mean"])
@pytest.mark.parametrize("dtype", [torch.float32, F64])
def test_on_policy_every_rule_coincides(agg, dtype):
    g = torch.Generator().manual_seed(0)
    B, T = 4, 6
    old = (-torch.rand(B, T, generator=g, dtype=F64) * 5).to(dtype)
    adv = torch.randn(B, T, generator=g, dtype=F64).to(dtype)
    mask = (torch.rand(B, T, generator=g) > 0.3).to(dtype)
    mask[:, 0] = 1
    mask[3] = 0
    # hand values: loss = −mean(A), gradient −A·(weight of the token)
    a, m = adv.tolist(), mask.tolist()
    if agg == "token-mean":
        n = sum(map(sum, m))
        w = [[mi / n for mi in row] for row in m]
    else:
        seqs = [row for row in m if sum(row)]
        w = [[mi / (sum(row) * len(seqs)) if sum(row) else 0.0 for mi in row] for row in m]
    exp_loss = -sum(ai * wi for ra, rw in zip(a, w) for ai, wi in zip(ra, rw))
    exp_grad = torch.tensor([[-ai * wi for ai, wi in zip(ra, rw)] for ra, rw in zip(a, w)], dtype=dtype)
    # the masses weigh tokens as the aggregation does: 1 each (token-mean), 1/len(sequence) (seq-mean)
    tw = [[mi / (max(sum(row), 1.0) if agg != "token-mean" else 1.0) for mi in row] for row in m]
    pos = sum(ai * wi for ra, rw in zip(a, tw) for ai, wi in zip(ra, rw) if ai > 0)
    neg = sum(-ai * wi for ra, rw in zip(a, tw) for ai, wi in zip(ra, rw) if ai < 0)
    tol = dict(rel=1e-5) if dtype == torch.float32 else dict(rel=1e-12)
    for rule in ON_POLICY_RULES:
        logp = old.clone().requires_grad_(True)
        loss, s = policy_loss(logp, old, adv, mask, rule, agg=agg, dual_clip=3.0)
        loss.backward()
        assert loss.item() == pytest.approx(exp_loss, **tol), rule
        torch.testing.assert_close(logp.grad, exp_grad, rtol=1e-5 if dtype == torch.float32 else 1e-12, atol=1e-7)
        for k in ("clip_frac", "clip_frac_low", "clip_frac_high", "dual_clip_frac", "approx_kl"):
            assert s[k] == 0, (rule, k)
        assert s["ratio_min"] == s["ratio_max"] == 1.0
        # every token carries gradient on-policy, so both readings of the masses are the (weighted) sums
        assert s["pos_mass"] == pytest.approx(pos, **tol), rule
        assert s["neg_mass"] == pytest.approx(neg, **tol), rule
