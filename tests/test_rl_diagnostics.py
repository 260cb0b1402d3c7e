"""λ and ρ at BAPO's start bounds, measured for every rule's updates."""
import pytest
import torch

from test_rl_loop import TASK, _cfg, _policy
from toy_rl.clipping import Symmetric
from toy_rl.rl.diagnostics import balance_at_start
from toy_rl.rl.loop import make_optimizer, update
from toy_rl.rl.sources import BatchSource

# four answers: A = +1 (2 tokens), -0.5 (3 tokens), -0.5 (1 token), 0 (4 tokens)
ADV = torch.tensor([1.0, -0.5, -0.5, 0.0])
MASK = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 0], [1, 0, 0, 0], [1, 1, 1, 1]], dtype=torch.float32)


def test_on_policy_by_hand():
    d = balance_at_start(torch.ones(4, 4), ADV, MASK)
    assert d["lambda_tokens"] == 4 / 2                     # 3 + 1 negative tokens per 2 positive ones
    assert d["lambda_mass"] == pytest.approx((0.5 * 3 + 0.5 * 1) / (1 * 2))
    # r = 1 lies inside [0.6, 1.2]: both readings give pos / (pos + neg) = 1 / (1 + λ_A)
    assert d["rho_start_grad"] == d["rho_start_all"] == pytest.approx(1 / (1 + d["lambda_mass"]))
    assert d["rho_start_grad"] != pytest.approx(1 / (1 + d["lambda_tokens"]))   # |A| differs: not the token count


def test_equal_advantages_give_rho_from_the_token_count():
    adv = torch.tensor([1.0, -1.0, -1.0, 1.0])
    d = balance_at_start(torch.ones(4, 4), adv, MASK)
    assert d["rho_start_grad"] == pytest.approx(1 / (1 + d["lambda_tokens"]))


def test_off_policy_the_two_readings_differ():
    ratio = torch.ones(4, 4)
    ratio[0, 0] = 1.5                                      # positive token above c_high = 1.2
    ratio[1, 0] = 0.5                                      # negative token below c_low = 0.6
    d = balance_at_start(ratio, ADV, MASK)
    pos_grad, neg_grad = 1.0 * 1, 0.5 * (1 + 1 + 1)        # tokens outside the bounds carry no gradient
    pos_all, neg_all = 1.0 * (1.2 + 1), 0.5 * (0.6 + 1 + 1 + 1)   # every token, clipped values
    assert d["rho_start_grad"] == pytest.approx(pos_grad / (pos_grad + neg_grad))
    assert d["rho_start_all"] == pytest.approx(pos_all / (pos_all + neg_all))
    assert balance_at_start(ratio, ADV, MASK, start=(0.4, 2.0))["rho_start_grad"] == pytest.approx(
        (1.5 + 1) / (1.5 + 1 + 0.5 * (0.5 + 3)))


def test_no_signal_is_safe():
    only_neg = balance_at_start(torch.ones(4, 4), -ADV.abs() - 0.1, MASK)
    assert only_neg["lambda_tokens"] == only_neg["lambda_mass"] == float("inf") and only_neg["rho_start_grad"] == 0
    none = balance_at_start(torch.ones(4, 4), torch.zeros(4), MASK)
    assert none["lambda_tokens"] is None and none["lambda_mass"] is None and none["rho_start_all"] == 1


def test_every_rule_reports_it_without_touching_randomness():
    policy = _policy()
    batch = BatchSource(policy, TASK, 3, 4, TASK.max_answer_chars + 1, seed=0).next(0)
    batch = batch._replace(advantages=torch.randn(batch.advantages.shape, generator=torch.Generator().manual_seed(0)))
    rng = torch.get_rng_state()
    stats = update(policy, make_optimizer(policy, 1e-3), batch, Symmetric(), _cfg(rule="symmetric"))
    assert torch.equal(rng, torch.get_rng_state())
    # on-policy first use: the ratio is 1 up to rounding, so ρ = 1 / (1 + λ_A) under both readings
    assert stats["rho_start_grad"] == pytest.approx(1 / (1 + stats["lambda_mass"]), rel=1e-5)
    assert stats["rho_start_all"] == pytest.approx(stats["rho_start_grad"], rel=1e-5)
    m = batch.response_mask
    neg, pos = (m * (batch.advantages < 0)[:, None]).sum(), (m * (batch.advantages > 0)[:, None]).sum()
    assert stats["lambda_tokens"] == pytest.approx(float(neg / pos))
