"""clipped_mask: the one definition of "this token lost its gradient to clipping" (BAPO Eq. 3),
checked against autograd, the clip fractions and the "grad" masses."""
import pytest
import torch

from toy_rl.clipping import BAPO, ClipHigher, Symmetric, clipped_mask, policy_loss
from toy_rl.clipping.balance import mass_sums, neg_mass_at, pos_mass_at

F64 = torch.float64


def test_hand_case():
    r = torch.tensor([0.5, 0.5, 0.8, 1.0, 1.2, 1.5, 1.5, 0.5], dtype=F64)
    a = torch.tensor([-1.0, 1.0, -1.0, 1.0, 1.0, 1.0, -1.0, 0.0], dtype=F64)
    # low side: r < 0.8 with A < 0; high side: r > 1.2 with A > 0; a bound itself and A = 0 keep theirs
    assert clipped_mask(r, a, 0.8, 1.2).tolist() == [True, False, False, False, False, True, False, False]
    assert clipped_mask(r, a, 0.8, None).tolist() == [True] + [False] * 7
    assert clipped_mask(r, a, None, 1.2).tolist() == [False] * 5 + [True, False, False]


def test_tensor_bounds_broadcast_per_run():
    r = torch.tensor([[[0.7, 1.3]], [[0.7, 1.3]]], dtype=F64)           # (runs, batch, tokens)
    a = torch.tensor([[[-1.0, 1.0]], [[-1.0, 1.0]]], dtype=F64)
    lo = torch.tensor([0.8, 0.6], dtype=F64)[:, None, None]
    hi = torch.tensor([1.2, 1.4], dtype=F64)[:, None, None]
    assert clipped_mask(r, a, lo, hi).tolist() == [[[True, True]], [[False, False]]]


@pytest.mark.parametrize("rule", [Symmetric(), ClipHigher(), BAPO(), BAPO.authors_code()], ids=repr)
def test_is_where_policy_loss_sends_no_gradient(rule):
    g = torch.Generator().manual_seed(0)
    old = -torch.rand(6, 10, generator=g, dtype=F64) * 3
    logp = (old + torch.randn(6, 10, generator=g, dtype=F64) * 0.5).requires_grad_(True)
    adv = torch.randn(6, 10, generator=g, dtype=F64)
    mask = torch.ones_like(old)
    loss, s = policy_loss(logp, old, adv, mask, rule)
    loss.backward()
    r = torch.exp(logp.detach() - old)
    clipped = clipped_mask(r, adv, s["c_low"], s["c_high"])
    assert clipped.any() and (~clipped).any()
    assert torch.all(logp.grad[clipped] == 0) and torch.all(logp.grad[~clipped] != 0)
    assert s["clip_frac_low"] == pytest.approx(float(clipped_mask(r, adv, s["c_low"], None).double().mean()))
    assert s["clip_frac_high"] == pytest.approx(float(clipped_mask(r, adv, None, s["c_high"]).double().mean()))


def test_grad_masses_are_sums_over_unclipped_tokens():
    # count="grad": the binned sweeps and the plain sums agree with Σ|A|·r over ~clipped_mask, at every candidate.
    g = torch.Generator().manual_seed(1)
    r = torch.exp(torch.randn(1, 500, generator=g, dtype=F64) * 0.5)
    a = torch.randn(1, 500, generator=g, dtype=F64)
    m = (torch.rand(1, 500, generator=g) > 0.2).to(F64)
    lows, highs = [0.6 + 0.02 * i for i in range(16)], [1.2 + 0.05 * i for i in range(37)]
    pos = pos_mass_at(r, a, m, torch.tensor(highs, dtype=F64), "grad")[0]
    neg = neg_mass_at(r, a, m, torch.tensor(lows, dtype=F64), "grad")[0]
    for j, hi in enumerate(highs):
        keep = ~clipped_mask(r, a, None, hi) & (a > 0) & (m > 0)
        assert float(pos[j]) == pytest.approx(float((a * r)[keep].sum()), rel=1e-12)
        assert float(mass_sums(r, a, m, 0.6, hi, "grad")[0]) == pytest.approx(float(pos[j]), rel=1e-12)
    for j, lo in enumerate(lows):
        keep = ~clipped_mask(r, a, lo, None) & (a < 0) & (m > 0)
        assert float(neg[j]) == pytest.approx(float((-a * r)[keep].sum()), rel=1e-12)
        assert float(mass_sums(r, a, m, lo, 3.0, "grad")[1]) == pytest.approx(float(neg[j]), rel=1e-12)


def test_plain_all_masses_match_the_sweeps():
    g = torch.Generator().manual_seed(2)
    r = torch.exp(torch.randn(1, 300, generator=g, dtype=F64) * 0.5)
    a = torch.randn(1, 300, generator=g, dtype=F64)
    m = torch.ones_like(r)
    pos = pos_mass_at(r, a, m, torch.tensor([1.2, 2.0], dtype=F64), "all")[0]
    neg = neg_mass_at(r, a, m, torch.tensor([0.6, 0.9], dtype=F64), "all")[0]
    assert float(mass_sums(r, a, m, 0.6, 2.0, "all")[0]) == pytest.approx(float(pos[1]), rel=1e-12)
    assert float(mass_sums(r, a, m, 0.9, 1.2, "all")[1]) == pytest.approx(float(neg[1]), rel=1e-12)
