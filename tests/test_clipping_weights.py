"""ρ is the positive share of the loss actually optimised: the masses weigh tokens as the
aggregation does (token-mean: equally; seq-mean-token-mean: 1/len(sequence))."""
import pytest
import torch

from toy_rl.clipping import BAPO, ClipHigher, Symmetric, policy_loss, policy_loss_runs
from toy_rl.clipping.loss import token_weights

F64 = torch.float64

# A short right answer (2 tokens, A = +1) and a long wrong one (8 tokens, A = −1).
R = [[1.1, 0.9] + [0.0] * 6, [1.0] * 6 + [0.5, 1.05]]
A = [[1.0] * 8, [-1.0] * 8]
M = [[1, 1] + [0] * 6, [1] * 8]


def _loss(rule, agg):
    r = torch.tensor(R, dtype=F64).clamp(min=1e-3)
    logp = torch.log(r).requires_grad_(True)
    return policy_loss(logp, torch.zeros_like(r), torch.tensor(A, dtype=F64), torch.tensor(M, dtype=F64), rule, agg=agg)


def test_token_weights():
    m = torch.tensor(M, dtype=F64)
    assert token_weights(m, "token-mean") is m and token_weights(m, "seq-mean-token-sum-norm") is m
    w = token_weights(m, "seq-mean-token-mean")
    assert w[0].tolist() == [0.5, 0.5] + [0.0] * 6 and w[1].tolist() == [0.125] * 8
    assert token_weights(torch.zeros(1, 3), "seq-mean-token-mean").tolist() == [[0.0] * 3]   # empty sequence


def test_long_wrong_answer_weighs_per_sequence_under_seq_mean():
    # count="grad", share, bounds [0.8, 1.2]: the r = 0.5 negative is clipped (no gradient).
    # token-mean: pos = 1.1 + 0.9 = 2,       neg = 6 + 1.05 = 7.05       -> ρ = 2 / 9.05
    # seq-mean:   pos = (1.1 + 0.9)/2 = 1,  neg = (6 + 1.05)/8 = 0.88125 -> ρ = 1 / 1.88125
    _, tok = _loss(Symmetric(), "token-mean")
    _, seq = _loss(Symmetric(), "seq-mean-token-mean")
    assert (tok["pos_mass"], tok["neg_mass"]) == pytest.approx((2.0, 7.05), rel=1e-12)
    assert tok["rho"] == pytest.approx(2 / 9.05, rel=1e-12)
    assert (seq["pos_mass"], seq["neg_mass"]) == pytest.approx((1.0, 0.88125), rel=1e-12)
    assert seq["rho"] == pytest.approx(1 / 1.88125, rel=1e-12)
    _, norm = _loss(Symmetric(), "seq-mean-token-sum-norm")          # equal token weights, like token-mean
    assert norm["rho"] == tok["rho"]


def test_bapo_steers_the_share_of_the_loss_optimised():
    # token-mean ρ(0.6, 1.2) = 2/(2 + 7.05) < 0.4: the search opens c_high (nothing above 1.2 to take in),
    # then raises c_low until the negatives it filters out leave ρ ≥ 0.4; under seq-mean ρ = 0.53 from the start.
    _, tok = _loss(BAPO(), "token-mean")
    _, seq = _loss(BAPO(), "seq-mean-token-mean")
    assert tok["rho_before"] == pytest.approx(2 / 9.05) and tok["search_steps"] > 0
    assert seq["rho_before"] == pytest.approx(1 / 1.88125) and seq["search_steps"] == 0
    assert (seq["c_low"], seq["c_high"]) == (0.6, 1.2)


@pytest.mark.parametrize("rule", [BAPO(), BAPO(count="all"), BAPO.authors_code(), BAPO(order="lower_first")],
                         ids=repr)
def test_search_loop_with_weights_agrees(rule):
    g = torch.Generator().manual_seed(0)
    B, T = 6, 10
    lengths = torch.randint(1, T + 1, (B, 1), generator=g)
    m = (torch.arange(T)[None] < lengths).to(F64)
    w = token_weights(m, "seq-mean-token-mean")
    checked = 0
    for _ in range(15):
        r = torch.exp(torch.randn(B, T, generator=g, dtype=F64) * 0.5)
        a = (torch.randn(B, 1, generator=g, dtype=F64) - 0.3).expand(B, T)
        b = rule.bounds(r.reshape(1, -1), a.reshape(1, -1), m.reshape(1, -1), weights=w.reshape(1, -1))
        lo, hi, rho = rule.search_loop(r.reshape(-1), a.reshape(-1), m.reshape(-1), weights=w.reshape(-1))
        assert (float(b.c_low[0]), float(b.c_high[0])) == pytest.approx((lo, hi), abs=1e-9)
        assert float(b.rho[0]) == pytest.approx(rho, rel=1e-9)
        checked += 1
    assert checked == 15


def test_runs_get_their_weights():
    # policy_loss_runs: each run's weights come from its own mask.
    r = torch.tensor(R, dtype=F64).clamp(min=1e-3)
    logp = torch.log(r)[None].expand(2, -1, -1).clone()
    m = torch.tensor(M, dtype=F64)[None].repeat(2, 1, 1)
    m[1, 1, 2:] = 0                                       # run 1: the wrong answer is 2 tokens long
    _, s = policy_loss_runs(logp, torch.zeros_like(logp), torch.tensor(A, dtype=F64)[None].expand(2, -1, -1), m,
                            ClipHigher(), agg="seq-mean-token-mean")
    assert s["rho"].tolist() == pytest.approx([1 / 1.88125, 1 / 2.0])


def test_rule_without_weights_argument_gets_the_mask():
    # A rule written against the old interface, bounds(ratio, adv, mask), still works under seq-mean.
    seen = {}

    class Old:
        name = "old"

        def bounds(self, ratio, adv, mask):
            seen["mask"] = mask.clone()
            return Symmetric().bounds(ratio, adv, mask)

    _, s = _loss(Old(), "seq-mean-token-mean")
    assert set(seen["mask"].unique().tolist()) <= {0.0, 1.0}
    assert s["rho"] == pytest.approx(2 / 9.05)            # the token-count reading, as before
