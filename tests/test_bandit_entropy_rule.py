"""The Entropy-Clip Rule check: first-order identity, O(η²) error, quadrants (BAPO Eq. 6–7, App. B)."""
import pytest
import torch

from toy_rl.bandit.entropy_rule import (ETA_REF, ETAS, clipped_gradient, cov, explain_update, predictions,
                                        random_instances, verify)
from toy_rl.bandit.quadrants import LOWERS_ENTROPY, QUADRANTS


@pytest.fixture(scope="module")
def report():
    return verify(instances=3000, seed=1)


def test_error_is_second_order_and_signs_agree(report):
    assert 1.8 <= report["error_slope"] <= 2.2
    assert report["sign_agreement"] > 0.99
    assert report["median_rel_error"] < 0.05
    for form in ("first_order_vanilla", "first_order_natural", "paper_natural", "paper_vanilla"):
        assert 1.8 <= report["forms"][form]["error_slope"] <= 2.2, form
        assert report["forms"][form]["sign_agreement"] > 0.98, form
    # the printed (natural) form does not predict a vanilla step's sign as well: the dropped π matters
    forms = report["forms"]
    assert forms["paper_form_on_vanilla_step"]["sign_agreement"] < forms["paper_vanilla"]["sign_agreement"]


def test_quadrants_sum_and_have_the_paper_signs(report):
    assert report["quadrant_sum_error"] < 1e-12
    for rule, row in report["quadrants"].items():
        for q in QUADRANTS:
            sign = -1 if LOWERS_ENTROPY[q] else 1
            assert sign * row[q]["dH_natural"] > 0, (rule, q)
            assert 0 <= row[q]["clip_frac"] <= 1
    assert report["quadrants"]["symmetric"]["c_high"] == pytest.approx(1.2)


def test_paper_form_equals_first_order_when_advantages_are_centred_on_the_current_policy():
    inst = random_instances(500, 8, seed=2)
    cg = clipped_gradient(inst)
    p = predictions(inst, cg, ETAS)
    torch.testing.assert_close(p["paper_natural"], p["first_order_natural"], rtol=1e-9, atol=1e-10)
    torch.testing.assert_close(p["paper_vanilla"], p["first_order_vanilla"], rtol=1e-9, atol=1e-10)
    # the gradient is π·(A·X + C) with C the clipped tokens' π·A mass
    pi = torch.softmax(inst.logits, -1)
    X = (~cg.clipped).double()
    C = (pi * inst.advantages * cg.clipped).sum(-1, keepdim=True)
    torch.testing.assert_close(cg.grad, pi * (inst.advantages * X + C), rtol=1e-9, atol=1e-12)


def test_behaviour_baseline_breaks_the_literal_vanilla_form():
    r = verify(instances=1000, baseline="behaviour")
    assert 1.8 <= r["error_slope"] <= 2.2                                     # the identity still holds
    assert r["forms"]["paper_vanilla"]["error_slope"] < 1.5                  # C ≠ −E_π[A·X]: an O(η) error


def test_on_policy_nothing_is_clipped():
    inst = random_instances(300, 8, seed=3)
    inst = inst._replace(behaviour_logits=inst.logits.clone())
    cg = clipped_gradient(inst)
    assert not cg.clipped.any()
    assert torch.allclose(cg.ratio, torch.ones_like(cg.ratio))


def test_cov_by_hand():
    log_pi = torch.log(torch.tensor([[0.5, 0.25, 0.25]], dtype=torch.float64))
    v = torch.tensor([[1.0, 0.0, 2.0]], dtype=torch.float64)
    L = log_pi[0]
    m = 0.5 * L[0] + 0.25 * L[1] + 0.25 * L[2]
    expected = 0.5 * (L[0] - m) * (1 - 1) + 0.25 * (L[1] - m) * (0 - 1) + 0.25 * (L[2] - m) * (2 - 1)
    assert cov(log_pi, v).item() == pytest.approx(expected.item(), abs=1e-15)


def test_bad_input():
    with pytest.raises(ValueError, match="instances"):
        verify(instances=0)
    with pytest.raises(ValueError, match="n_tokens"):
        verify(instances=10, n_tokens=1)
    with pytest.raises(ValueError, match="etas"):
        verify(instances=10, etas=(0.0, ETA_REF))
    with pytest.raises(ValueError, match="baseline"):
        verify(instances=10, baseline="old")


def test_explain_update_one_softmax():
    from toy_rl.clipping import ClipHigher
    z = [2.0, 1.0, 0.0, -1.0, -3.0]
    zb = [2.0, 1.2, -0.3, -1.0, -2.5]
    adv = [0.5, -1.0, 1.0, -0.5, 2.0]
    out = explain_update(z, zb, adv, ClipHigher(0.2, 0.2), eta=1e-3)
    assert out["c_low"] == pytest.approx(0.8) and out["c_high"] == pytest.approx(1.2)
    r = out["ratio"]
    assert out["clipped"].tolist() == [bool((a > 0 and x > 1.2) or (a < 0 and x < 0.8)) for a, x in zip(adv, r)]
    assert out["dH_share"].sum() == pytest.approx(out["first_order"], abs=1e-15)
    assert out["paper"] == pytest.approx(out["first_order"], rel=1e-9)
    assert out["exact"] == pytest.approx(out["first_order"], rel=1e-2)
    assert sum(out["quadrant_dH"].values()) == pytest.approx(out["first_order"], abs=1e-15)
    with pytest.raises(ValueError, match="K"):
        explain_update([1.0], [1.0], [1.0])
