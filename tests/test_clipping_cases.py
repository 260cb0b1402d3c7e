"""Hand-computed small cases for the clipping core (toy_rl.clipping).

Every expected number below is worked out by hand in the comments (or, for
random inputs, by a plain per-token Python loop in this file), never by calling
the library's own helpers. Tokens are given as their ratio r and advantage A:
logp = old_logp + log r.

Surrogate per token (to maximise): min(r·A, clip(r, c_low, c_high)·A); loss = −mean.
"Grad" masses (the default reading of ρ): pos = Σ_{A>0, r ≤ c_high} A·r,
neg = Σ_{A<0, r ≥ c_low} |A|·r. "All" masses: pos = Σ_{A>0} A·min(r, c_high),
neg = Σ_{A<0} |A|·max(r, c_low).
"""

import pytest
import torch

from toy_rl.clipping import BAPO, ClipHigher, Symmetric, make_rule, policy_loss

F64 = torch.float64

# The base table, 2 sequences × 4 tokens (row-major).
#   token    r     A      region under [0.8, 1.2]
#   1       1.5   +1      r > c_high, A > 0: clipped high
#   2       1.5   −1      kept (A < 0 above 1)
#   3       0.5   +2      kept (A > 0 below 1)
#   4       0.5   −2      r < c_low, A < 0: clipped low
#   5       1.0   +0.5    kept
#   6       1.1   −0.5    kept
#   7       1.24  +1      clipped high under 1.2, kept under 1.28
#   8       0.85  −1      kept under 0.8, clipped under c_low ≥ 0.86
R = [[1.5, 1.5, 0.5, 0.5], [1.0, 1.1, 1.24, 0.85]]
A = [[1.0, -1.0, 2.0, -2.0], [0.5, -0.5, 1.0, -1.0]]

# A batch on which the default BAPO search runs deep into the lower phase.
#   (5.0, +1)   clipped high for every c_high ≤ 3: never in the grad positive mass
#   (0.71, −1)  leaves the grad negative mass once c_low > 0.71
#   (1.0, −1), (1.0, +0.7)
R2 = [[5.0, 0.71, 1.0, 1.0]]
A2 = [[1.0, -1.0, -1.0, 0.7]]

# A batch for the authors' code (pos/neg target 1.0, all tokens, clipped values).
R3 = [[1.6, 0.5, 1.0, 1.0]]
A3 = [[1.0, -1.0, -0.9, 0.22]]


def _run(r, a, rule, mask=None, dtype=F64, old_shift=0.0, **kw):
    """policy_loss on tokens given as ratios; returns (loss float, stats, logp.grad)."""
    r = torch.tensor(r, dtype=F64)
    old = torch.full_like(r, -1.3) + old_shift
    logp = (old + torch.log(r)).to(dtype).requires_grad_(True)
    adv = torch.tensor(a, dtype=dtype)
    m = torch.ones_like(r) if mask is None else torch.tensor(mask, dtype=F64)
    loss, stats = policy_loss(logp, old.to(dtype), adv, m.to(dtype), rule, **kw)
    loss.backward()
    return loss.item(), stats, logp.grad


def _check(stats, rel=1e-9, **expected):
    for k, v in expected.items():
        assert stats[k] == pytest.approx(v, rel=rel, abs=rel), k


# ---------------------------------------------------------------- fixed rules

def test_symmetric_hand_case():
    # [0.8, 1.2]; surrogates: 1.2, −1.5, 1.0 (=min(1.0, 1.6)), −1.6 (=min(−1.0, −1.6)),
    # 0.5, −0.55, 1.2, −0.85 → sum −0.6 → loss 0.6/8.
    loss, s, _ = _run(R, A, Symmetric())
    assert loss == pytest.approx(0.075, rel=1e-12)
    # clipped high: tokens 1, 7; clipped low: token 4.
    # grad masses: pos = 2·0.5 + 0.5·1.0 = 1.5; neg = 1.5 + 0.55 + 0.85 = 2.9.
    _check(s, c_low=0.8, c_high=1.2, clip_frac_high=2 / 8, clip_frac_low=1 / 8,
           pos_mass=1.5, neg_mass=2.9, rho=1.5 / 4.4, pos_neg_ratio=1.5 / 2.9, clip_frac=3 / 8)


def test_symmetric_eps_sets_both_bounds():
    # eps = 0.3 → [0.7, 1.3]: token 7 (1.24) now kept, token 1 clipped at 1.3,
    # token 4 (0.5 < 0.7) clipped at 0.7·(−2) = −1.4.
    # surrogates: 1.3, −1.5, 1.0, −1.4, 0.5, −0.55, 1.24, −0.85 → sum −0.26.
    loss, s, _ = _run(R, A, Symmetric(eps=0.3))
    assert loss == pytest.approx(0.26 / 8, rel=1e-12)
    _check(s, c_low=0.7, c_high=1.3, clip_frac_high=1 / 8, clip_frac_low=1 / 8)


def test_clip_higher_hand_case():
    # [0.8, 1.28]: token 1 → 1.28, token 7 kept at 1.24; the rest as symmetric.
    # sum = −0.6 + 0.08 + 0.04 = −0.48 → loss 0.06.
    loss, s, _ = _run(R, A, ClipHigher())
    assert loss == pytest.approx(0.06, rel=1e-12)
    # pos = 1.0 + 0.5 + 1.24 = 2.74; neg = 2.9.
    _check(s, c_low=0.8, c_high=1.28, clip_frac_high=1 / 8, clip_frac_low=1 / 8,
           pos_mass=2.74, neg_mass=2.9, rho=2.74 / 5.64)


def test_clip_higher_custom_eps():
    # [0.9, 1.4]: surrogates 1.4, −1.5, 1.0, −1.8 (clip 0.9·−2), 0.5, −0.55, 1.24,
    # −0.9 (token 8: 0.85 < 0.9 → min(−0.85, −0.9)) → sum −0.61.
    loss, s, _ = _run(R, A, ClipHigher(eps_low=0.1, eps_high=0.4))
    assert loss == pytest.approx(0.61 / 8, rel=1e-12)
    _check(s, c_low=0.9, c_high=1.4, clip_frac_high=1 / 8, clip_frac_low=2 / 8)


def test_make_rule_defaults():
    assert make_rule("symmetric") == Symmetric()
    assert make_rule("clip-higher") == ClipHigher()
    assert make_rule("bapo") == BAPO()


# ---------------------------------------------------------------- BAPO variants

def test_bapo_default_one_upper_step():
    # Start (0.6, 1.2): pos = 1.0 + 0.5 = 1.5 (token 7 at 1.24 > 1.2 clipped),
    # neg = 1.5 + 0.55 + 0.85 = 2.9 (token 4 at 0.5 < 0.6 clipped) → ρ = 1.5/4.4 < 0.4.
    # c_high = 1.25: token 7 joins → pos 2.74 → ρ = 2.74/5.64 = 0.486 ≥ 0.4: stop.
    # Loss at [0.6, 1.25]: 1.25, −1.5, 1.0, −1.2, 0.5, −0.55, 1.24, −0.85 → sum −0.11.
    loss, s, _ = _run(R, A, BAPO())
    assert loss == pytest.approx(0.11 / 8, rel=1e-9)
    _check(s, c_low=0.6, c_high=1.25, pos_mass=2.74, neg_mass=2.9, rho=2.74 / 5.64,
           rho_before=1.5 / 4.4, search_steps=1, rho_reached=1, rho_target=0.4,
           clip_frac_high=1 / 8, clip_frac_low=1 / 8)


def test_bapo_default_search_reaches_lower_phase():
    # Upper phase: the only positive above 1 has r = 5 > 3, so pos stays 0.7 (36 steps to 3.0).
    # neg = 0.71 + 1.0 = 1.71 → ρ = 0.7/2.41 < 0.4. Lower phase: c_low 0.62 … 0.70 keep
    # r = 0.71; at 0.72 it drops out: neg = 1.0 → ρ = 0.7/1.7 = 0.41 ≥ 0.4. 36 + 6 = 42 steps.
    # Loss at [0.72, 3.0]: 3.0 − 0.72 − 1.0 + 0.7 = 1.98 → loss −1.98/4.
    loss, s, _ = _run(R2, A2, BAPO())
    assert loss == pytest.approx(-0.495, rel=1e-9)
    _check(s, c_low=0.72, c_high=3.0, pos_mass=0.7, neg_mass=1.0, rho=0.7 / 1.7,
           rho_before=0.7 / 2.41, search_steps=42, clip_frac_high=0.25, clip_frac_low=0.25)


def test_bapo_capped_at_end_of_path():
    # Only a clipped positive and a kept negative: ρ stays 0 along the whole path,
    # so the loop ends at (b⁻, b⁺) = (0.9, 3.0) after 36 + 15 steps, target not reached.
    _, s, _ = _run([[5.0, 1.0]], [[1.0, -1.0]], BAPO())
    _check(s, c_low=0.9, c_high=3.0, rho=0.0, rho_reached=0, search_steps=51, pos_mass=0.0, neg_mass=1.0)


def test_bapo_count_all():
    # All tokens with clipped values at (0.6, 1.2):
    # pos = 1.2 + 2·0.5 + 0.5·1.0 + 1.2 = 3.9; neg = 1.5 + 2·0.6 + 0.55 + 0.85 = 4.1
    # → ρ = 3.9/8 = 0.4875 ≥ 0.4 at the start: no step.
    # Loss at [0.6, 1.2]: 1.2, −1.5, 1.0, −1.2, 0.5, −0.55, 1.2, −0.85 → sum −0.2.
    loss, s, _ = _run(R, A, BAPO(count="all"))
    assert loss == pytest.approx(0.2 / 8, rel=1e-9)
    _check(s, c_low=0.6, c_high=1.2, pos_mass=3.9, neg_mass=4.1, rho=0.4875, search_steps=0,
           clip_frac_high=2 / 8, clip_frac_low=1 / 8)
    # Batch 2 under "all": pos = min(5, 1.2) + 0.7 = 1.9; neg = max(0.71, 0.6) + 1 = 1.71 → ρ = 0.526.
    # Loss at [0.6, 1.2]: 1.2 − 0.71 − 1.0 + 0.7 = 0.19.
    loss, s, _ = _run(R2, A2, BAPO(count="all"))
    assert loss == pytest.approx(-0.19 / 4, rel=1e-9)
    _check(s, c_low=0.6, c_high=1.2, pos_mass=1.9, neg_mass=1.71, rho=1.9 / 3.61,
           clip_frac_high=0.25, clip_frac_low=0.0)


def test_bapo_lower_first():
    # Lower bound first (grad, share): c_low 0.62, …, 0.86: at 0.86 token 8 (r = 0.85) leaves
    # neg: 2.9 → 2.05, ρ = 1.5/3.55 = 0.4225 ≥ 0.4 → (0.86, 1.2) after 13 steps.
    # Loss at [0.86, 1.2]: 1.2, −1.5, 1.0, −1.72, 0.5, −0.55, 1.2, −0.86 → sum −0.73.
    loss, s, _ = _run(R, A, BAPO(order="lower_first"))
    assert loss == pytest.approx(0.73 / 8, rel=1e-9)
    _check(s, c_low=0.86, c_high=1.2, pos_mass=1.5, neg_mass=2.05, rho=1.5 / 3.55, search_steps=13,
           clip_frac_high=2 / 8, clip_frac_low=2 / 8)
    # Batch 2: c_low to 0.72 reaches ρ = 0.7/1.7 with c_high still 1.2 (6 steps).
    # Loss: 1.2 − 0.72 − 1.0 + 0.7 = 0.18.
    loss, s, _ = _run(R2, A2, BAPO(order="lower_first"))
    assert loss == pytest.approx(-0.18 / 4, rel=1e-9)
    _check(s, c_low=0.72, c_high=1.2, rho=0.7 / 1.7, search_steps=6)


def test_bapo_balance_pos_neg():
    # ρ = pos/neg: start 1.5/2.9 = 0.517 < 0.6; c_high 1.25 → 2.74/2.9 = 0.945 ≥ 0.6.
    loss, s, _ = _run(R, A, BAPO(balance="pos_neg", rho0=0.6))
    assert loss == pytest.approx(0.11 / 8, rel=1e-9)
    _check(s, c_low=0.6, c_high=1.25, rho=2.74 / 2.9, rho_before=1.5 / 2.9, pos_neg_ratio=2.74 / 2.9,
           pos_mass=2.74, neg_mass=2.9, clip_frac_high=1 / 8, clip_frac_low=1 / 8)


def test_bapo_authors_code_with_dual_clip():
    # authors_code(): lower first in steps of 0.05 to 0.8, then upper to 2.0; all tokens; pos/neg ≥ 1.
    # pos(c_high) = min(1.6, c_high) + 0.22; neg(c_low) = max(0.5, c_low) + 0.9.
    # start: 1.42/1.5 = 0.947 < 1; c_low → 0.8 (4 steps) only raises neg to 1.7;
    # c_high 1.25 … 1.45 → pos ≤ 1.67 < 1.7; c_high 1.5 → 1.72/1.7 ≥ 1 (6 steps). Total 10.
    # Loss at [0.8, 1.5] with dual-clip 3: 1.5, −0.8 (max(−0.8, −3)), −0.9, 0.22 → 0.02.
    # ρ = pos/(neg + 1e-8), the authors' eps.
    loss, s, _ = _run(R3, A3, BAPO.authors_code(), dual_clip=3.0)
    assert loss == pytest.approx(-0.02 / 4, rel=1e-9)
    _check(s, c_low=0.8, c_high=1.5, pos_mass=1.72, neg_mass=1.7, rho=1.72 / (1.7 + 1e-8), rho_before=1.42 / (1.5 + 1e-8),
           search_steps=10, clip_frac_high=0.25, clip_frac_low=0.25, dual_clip_frac=0.0)


def test_bapo_authors_settings_in_paper_order():
    # Same settings, upper bound first: c_high 1.25 → 1.47/1.5 < 1; 1.3 → 1.52/1.5 ≥ 1: (0.6, 1.3).
    rule = BAPO(rho0=1.0, low_range=(0.6, 0.8), high_range=(1.2, 2.0), low_step=0.05, high_step=0.05,
                count="all", balance="pos_neg", order="upper_first")
    loss, s, _ = _run(R3, A3, rule)
    # Loss at [0.6, 1.3]: 1.3 − 0.6 − 0.9 + 0.22 = 0.02.
    assert loss == pytest.approx(-0.02 / 4, rel=1e-9)
    _check(s, c_low=0.6, c_high=1.3, rho=1.52 / 1.5, search_steps=2, pos_mass=1.52, neg_mass=1.5,
           clip_frac_high=0.25, clip_frac_low=0.25)


def test_float32_matches_hand_values():
    loss, s, _ = _run(R, A, BAPO(), dtype=torch.float32)
    assert loss == pytest.approx(0.11 / 8, rel=1e-4)
    _check(s, rel=1e-5, c_low=0.6, c_high=1.25, pos_mass=2.74, neg_mass=2.9, rho=2.74 / 5.64)


def test_only_the_log_ratio_matters():
    a = _run(R, A, BAPO())
    b = _run(R, A, BAPO(), old_shift=-7.5)
    assert a[0] == pytest.approx(b[0], rel=1e-12)
    assert a[1]["c_high"] == b[1]["c_high"]
    torch.testing.assert_close(a[2], b[2])


# ---------------------------------------------------------------- aggregation and masks

MASK = [[1, 1, 1, 1], [1, 1, 1, 0]]   # token 8 left out


def test_token_mean_with_mask():
    # Symmetric surrogates without token 8: seq 1 sums to −0.9, seq 2 to 0.5 − 0.55 + 1.2 = 1.15.
    loss, s, _ = _run(R, A, Symmetric(), mask=MASK)
    assert loss == pytest.approx(-(0.25 / 7), rel=1e-12)
    # token 8 is gone from the masses and from the denominators of the clip fractions.
    _check(s, neg_mass=2.05, rho=1.5 / 3.55, clip_frac_high=2 / 7, clip_frac_low=1 / 7, n_tokens=7)


def test_seq_mean_token_mean_with_mask():
    # (−0.9/4 + 1.15/3) / 2
    loss, _, _ = _run(R, A, Symmetric(), mask=MASK, agg="seq-mean-token-mean")
    assert loss == pytest.approx(-(-0.9 / 4 + 1.15 / 3) / 2, rel=1e-12)


def test_seq_mean_token_sum_norm_with_mask():
    # token sum over batch × max length: 0.25 / (2·4)
    loss, _, _ = _run(R, A, Symmetric(), mask=MASK, agg="seq-mean-token-sum-norm")
    assert loss == pytest.approx(-0.25 / 8, rel=1e-12)


def test_seq_mean_leaves_out_empty_sequences():
    # A third, fully masked sequence (with wild values) must not count as a zero-mean sequence.
    r = R + [[50.0, 0.01, 3.0, 1.0]]
    a = A + [[9.0, -9.0, 9.0, -9.0]]
    mask = MASK + [[0, 0, 0, 0]]
    loss, s, g = _run(r, a, Symmetric(), mask=mask, agg="seq-mean-token-mean")
    assert loss == pytest.approx(-(-0.9 / 4 + 1.15 / 3) / 2, rel=1e-12)
    assert torch.all(g[2] == 0)
    # token-mean and the stats ignore it too
    loss, s2, _ = _run(r, a, Symmetric(), mask=mask)
    assert loss == pytest.approx(-(0.25 / 7), rel=1e-12)
    _check(s2, neg_mass=2.05, pos_mass=1.5, n_tokens=7, clip_frac_high=2 / 7)


def test_masked_tokens_change_nothing():
    mask = torch.tensor(MASK, dtype=F64)
    base = _run(R, A, BAPO(), mask=MASK)
    r2 = [row[:] for row in R]
    a2 = [row[:] for row in A]
    r2[1][3], a2[1][3] = 40.0, -30.0          # masked token made extreme
    other = _run(r2, a2, BAPO(), mask=MASK)
    assert base[0] == pytest.approx(other[0], rel=1e-12)
    for k in ("c_low", "c_high", "rho", "pos_mass", "neg_mass", "clip_frac_low", "clip_frac_high", "ratio_max"):
        assert base[1][k] == pytest.approx(other[1][k], rel=1e-12), k
    torch.testing.assert_close(base[2] * mask, other[2] * mask)
    assert other[2][1, 3] == 0


def _ref_loss(r, a, m, lo, hi, agg, dual_clip=None):
    """Plain-Python reference: per-token surrogate, then the aggregation."""
    rows = []
    for rr, aa, mm in zip(r, a, m):
        vals = []
        for ri, ai, mi in zip(rr, aa, mm):
            s = min(ri * ai, min(max(ri, lo), hi) * ai)
            if dual_clip is not None and ai < 0:
                s = max(s, dual_clip * ai)
            vals.append((s, mi))
        rows.append(vals)
    if agg == "token-mean":
        return -sum(s * mi for row in rows for s, mi in row) / sum(mi for row in rows for _, mi in row)
    if agg == "seq-mean-token-mean":
        means = [sum(s * mi for s, mi in row) / sum(mi for _, mi in row) for row in rows if sum(mi for _, mi in row)]
        return -sum(means) / len(means)
    return -sum(s * mi for row in rows for s, mi in row) / (len(rows) * len(rows[0]))



def _rid(rule):
    """Short test id: a BAPO shows only its non-default settings."""
    if not isinstance(rule, BAPO):
        return repr(rule)
    keys = ("rho0", "low_range", "high_range", "low_step", "high_step", "order", "count", "balance")
    return "BAPO(" + ",".join(f"{k}={getattr(rule, k)}" for k in keys if getattr(rule, k) != getattr(BAPO(), k)) + ")"

RULES = [Symmetric(), ClipHigher(), BAPO(), BAPO.authors_code(), BAPO(count="all"), BAPO(order="lower_first"),
         BAPO(balance="pos_neg", rho0=0.667)]


@pytest.mark.parametrize("agg", ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm"])
@pytest.mark.parametrize("dual_clip", [None, 2.0])
@pytest.mark.parametrize("rule", RULES, ids=_rid)
def test_loss_matches_plain_loop_on_random_batches(rule, agg, dual_clip):
    g = torch.Generator().manual_seed(11)
    for _ in range(4):
        B, T = 5, 7
        r = torch.exp(torch.randn(B, T, generator=g, dtype=F64) * 0.5).tolist()
        a = (torch.randn(B, T, generator=g, dtype=F64) - 0.3).tolist()
        m = (torch.rand(B, T, generator=g) > 0.3).to(F64)
        m[1] = 0                                 # one empty sequence
        m[0, 0] = 1
        m = m.tolist()
        loss, s, _ = _run(r, a, rule, mask=m, agg=agg, dual_clip=dual_clip)
        expected = _ref_loss(r, a, m, s["c_low"], s["c_high"], agg, dual_clip)
        assert loss == pytest.approx(expected, rel=1e-10, abs=1e-12)
        # sign-aware clip fractions by counting
        n = sum(map(sum, m))
        low = sum(mi for rr, aa, mm in zip(r, a, m) for ri, ai, mi in zip(rr, aa, mm) if ri < s["c_low"] and ai < 0)
        high = sum(mi for rr, aa, mm in zip(r, a, m) for ri, ai, mi in zip(rr, aa, mm) if ri > s["c_high"] and ai > 0)
        assert s["clip_frac_low"] == pytest.approx(low / n)
        assert s["clip_frac_high"] == pytest.approx(high / n)
        if dual_clip is not None:
            dual = sum(mi for rr, aa, mm in zip(r, a, m) for ri, ai, mi in zip(rr, aa, mm) if ri > dual_clip and ai < 0)
            assert s["dual_clip_frac"] == pytest.approx(dual / n)


# ---------------------------------------------------------------- per-sequence advantages

@pytest.mark.parametrize("rule", RULES, ids=_rid)
@pytest.mark.parametrize("agg", ["token-mean", "seq-mean-token-mean"])
def test_per_sequence_advantages_broadcast(rule, agg):
    g = torch.Generator().manual_seed(3)
    B, T = 4, 6
    old = -torch.rand(B, T, generator=g, dtype=F64) * 3
    logp0 = old + torch.randn(B, T, generator=g, dtype=F64) * 0.4
    adv_seq = torch.tensor([1.3, -0.7, 0.2, -1.1], dtype=F64)
    mask = (torch.rand(B, T, generator=g) > 0.25).to(F64)
    mask[:, 0] = 1
    results = []
    for adv in (adv_seq, adv_seq[:, None], adv_seq[:, None].expand(B, T).clone()):
        logp = logp0.clone().requires_grad_(True)
        loss, s = policy_loss(logp, old, adv, mask, rule, agg=agg)
        loss.backward()
        results.append((loss.item(), s, logp.grad))
    for loss, s, grad in results[:2]:
        assert loss == results[2][0]
        assert s == results[2][1]
        torch.testing.assert_close(grad, results[2][2], rtol=0, atol=0)
    # and it is not trivially zero
    assert results[2][0] != 0 and results[2][2].abs().sum() > 0


# ---------------------------------------------------------------- dual clip

def test_dual_clip_hand_case():
    # Symmetric [0.8, 1.2], c = 3, token-mean over 4:
    #   (5, −1): min(−5, −1.2) = −5 → max(−5, −3) = −3   (dual-clipped, no gradient)
    #   (2, −1): −2 (above −3: kept, gradient of r·A)
    #   (5, +1): min(5, 1.2) = 1.2 (dual-clip is for A < 0 only; clipped high)
    #   (0.5, −1): min(−0.5, −0.8) = −0.8 (clipped low)
    # sum −4.6 → loss 1.15; without dual-clip sum −6.6 → loss 1.65.
    r, a = [[5.0, 2.0, 5.0, 0.5]], [[-1.0, -1.0, 1.0, -1.0]]
    loss, s, g = _run(r, a, Symmetric(), dual_clip=3.0)
    assert loss == pytest.approx(1.15, rel=1e-12)
    _check(s, dual_clip_frac=0.25, clip_frac_low=0.25, clip_frac_high=0.25)
    # d loss / d logp = −(1/4)·A·r for the one token that keeps its gradient: −(1/4)(−1)(2) = 0.5
    torch.testing.assert_close(g, torch.tensor([[0.0, 0.5, 0.0, 0.0]], dtype=F64))
    loss, s, g = _run(r, a, Symmetric())
    assert loss == pytest.approx(1.65, rel=1e-12)
    assert s["dual_clip_frac"] == 0
    torch.testing.assert_close(g, torch.tensor([[1.25, 0.5, 0.0, 0.0]], dtype=F64))


def test_dual_clip_below_c_high():
    # BAPO may raise c_high above the dual-clip constant: for A < 0 the cap c·A still wins for r > c.
    # ClipHigher [0.8, 3.0], c = 2: (2.5, −1): min(−2.5, −2.5) = −2.5 → max(−2.5, −2) = −2.
    loss, s, g = _run([[2.5, 1.5]], [[-1.0, -1.0]], ClipHigher(eps_high=2.0), dual_clip=2.0)
    assert loss == pytest.approx((2.0 + 1.5) / 2, rel=1e-12)
    assert s["dual_clip_frac"] == 0.5
    torch.testing.assert_close(g, torch.tensor([[0.0, 0.75]], dtype=F64))
