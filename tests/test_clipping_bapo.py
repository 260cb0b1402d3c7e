"""BAPO's bound search (arXiv 2510.18927, Algorithm 1) against the plain loop.

The library lays out the whole path of candidate bounds and measures ρ at every
point at once (BAPO.search). BAPO.search_loop runs the loop the slow way, as the
paper and the authors' code (recipe/bapo/policy_loss.py) do; both are checked
here against ρ from reference masked sums written in this file.
"""
import math

import pytest
import torch

from toy_rl.clipping import BAPO, ClipHigher, Symmetric, policy_loss, policy_loss_runs
from toy_rl.clipping.balance import masses, neg_mass_at, pos_mass_at

F64 = torch.float64


def ref_masses(r, a, m, lo, hi, count):
    """(pos, neg) by masked sums. "grad": tokens that keep their gradient (r ≤ c_high for A > 0,
    r ≥ c_low for A < 0), weighed |A|·r. "all": every token, weighed |A|·min(r, c_high) / |A|·max(r, c_low)."""
    p, n = (a > 0) & (m > 0), (a < 0) & (m > 0)
    if count == "all":
        return float((a * torch.clamp(r, max=hi))[p].sum()), float((-a * torch.clamp(r, min=lo))[n].sum())
    return float((a * r)[p & (r <= hi)].sum()), float((-a * r)[n & (r >= lo)].sum())


def ref_rho(r, a, m, lo, hi, count, balance, eps=0.0):
    pos, neg = ref_masses(r, a, m, lo, hi, count)
    if balance == "share":
        return pos / (pos + neg + eps) if pos + neg > 0 else 1.0
    return pos / (neg + eps) if neg > 0 else math.inf


def random_batch(g, n=64):
    """Tokens with varied staleness (spread of log r) and advantage balance."""
    sigma = [0.05, 0.2, 0.5, 1.0][int(torch.randint(4, (1,), generator=g))]
    shift = float(torch.rand(1, generator=g, dtype=F64)) * 0.6 - 0.3
    mu = float(torch.rand(1, generator=g, dtype=F64)) * 1.6 - 1.0
    r = torch.exp(torch.randn(n, generator=g, dtype=F64) * sigma + shift)
    a = torch.randn(n, generator=g, dtype=F64) + mu
    if float(torch.rand(1, generator=g)) < 0.3:                # per-sequence style ±1 advantages
        a = torch.sign(a)
    m = (torch.rand(n, generator=g) > float(torch.rand(1, generator=g)) * 0.5).to(F64)
    m[0] = 1
    return r, a, m


PAPER_ORDER = [
    BAPO(rho0=0.45, low_range=(0.8, 0.9), high_range=(1.2, 2.0)),          # Llama run (App. A)
    BAPO(high_range=(1.2, 1.93), high_step=0.07, low_range=(0.61, 0.8), low_step=0.03),   # steps that do not divide
    BAPO(count="all", balance="pos_neg", rho0=1.0, low_range=(0.6, 0.8), high_range=(1.2, 2.0),
         low_step=0.05, high_step=0.05),
]
AUTHORS_ORDER = [
    BAPO.authors_code(),
    BAPO(order="lower_first", count="all", balance="pos_neg", rho0=0.5, low_range=(0.8, 0.95),
         high_range=(1.2, 2.0), low_step=0.05, high_step=0.1),                # the authors' example script
    BAPO(order="lower_first", high_range=(1.2, 1.93), high_step=0.07, low_range=(0.61, 0.8), low_step=0.03),
]
# every option: count grad/all × balance share/pos_neg × both orders, paper ranges
OPTIONS = [BAPO(count=c, balance=b, order=o, rho0=0.4 if b == "share" else 0.667)
           for o in ("upper_first", "lower_first") for c in ("grad", "all") for b in ("share", "pos_neg")]
VARIANTS = OPTIONS + [BAPO(rho0=0.5), BAPO(eps=0.05)] + PAPER_ORDER + AUTHORS_ORDER


def _rid(rule):
    default = BAPO()
    return "BAPO(" + ",".join(f"{k}={getattr(rule, k)}" for k in ("rho0", "low_range", "high_range", "low_step",
                                                                  "high_step", "order", "count", "balance", "eps")
                              if getattr(rule, k) != getattr(default, k)) + ")"


def _check_against_loop(rule, n_batches=40, seed=0):
    """The vectorised search against Algorithm 1 as a plain loop (BAPO.search_loop), batch by batch,
    and both against reference masked sums: every point before the stop falls short of ρ0."""
    g = torch.Generator().manual_seed(seed)
    batches = [random_batch(g) for _ in range(n_batches)]
    r, a, m = (torch.stack(x) for x in zip(*batches))
    b = rule.bounds(r, a, m)                                  # all batches as independent runs
    s = rule.search(r, a, m)
    path = rule.path()
    stops = []
    for i, (ri, ai, mi) in enumerate(batches):
        lo, hi, rho_loop = rule.search_loop(ri, ai, mi)
        assert float(b.c_low[i]) == pytest.approx(lo, abs=1e-9), i
        assert float(b.c_high[i]) == pytest.approx(hi, abs=1e-9), i
        assert float(b.rho[i]) == pytest.approx(rho_loop, rel=1e-9)
        assert float(s["c_low"][i]) == float(b.c_low[i]) and float(s["c_high"][i]) == float(b.c_high[i])
        stop = int(s["stop"][i])
        assert path[stop] == pytest.approx((lo, hi), abs=1e-9)
        rho = lambda lo, hi: ref_rho(ri, ai, mi, lo, hi, rule.count, rule.balance, rule.eps)
        assert all(rho(*p) < rule.rho0 for p in path[:stop])
        assert stop == len(path) - 1 or rho(*path[stop]) >= rule.rho0
        assert float(b.rho[i]) == pytest.approx(rho(lo, hi), rel=1e-9)
        assert float(b.extra["rho_before"][i]) == pytest.approx(rho(*path[0]), rel=1e-9)
        pos, neg = ref_masses(ri, ai, mi, lo, hi, rule.count)
        assert float(b.pos[i]) == pytest.approx(pos, rel=1e-9, abs=1e-12)
        assert float(b.neg[i]) == pytest.approx(neg, rel=1e-9, abs=1e-12)
        stops.append(stop)
    return stops


@pytest.mark.parametrize("rule", VARIANTS, ids=_rid)
def test_search_matches_the_plain_loop(rule):
    stops = _check_against_loop(rule, seed=0 if rule.order == "upper_first" else 1)
    assert len(set(stops)) > 1                     # the batches stop at different places


def test_default_search_covers_every_phase():
    # The random batches reach every kind of stop: at once, in the upper phase, in the lower phase, capped.
    steps = _check_against_loop(BAPO(), n_batches=80, seed=2)
    n_hi = 36                                      # (3.0 − 1.2)/0.05
    assert 0 in steps
    assert any(0 < k <= n_hi for k in steps)
    assert any(n_hi < k < n_hi + 15 for k in steps)
    assert n_hi + 15 in steps


def test_loop_never_runs_when_lower_range_is_too_short():
    # c_low + δ2 ≤ b⁻ fails at once: Algorithm 1 does not move either bound.
    rule = BAPO(low_range=(0.7, 0.71))
    assert rule.path() == [(0.7, 1.2)]
    _check_against_loop(rule, n_batches=10)


def test_search_loop_takes_one_run():
    g = torch.Generator().manual_seed(3)
    r, a, m = random_batch(g)
    assert BAPO().search_loop(r, a, m) == BAPO().search_loop(r[None], a[None], m[None])
    with pytest.raises(ValueError, match=r"search_loop runs one update"):
        BAPO().search_loop(torch.stack([r, r]), torch.stack([a, a]), torch.stack([m, m]))


def test_path_endpoints():
    assert BAPO().path()[0] == (0.6, 1.2)
    assert BAPO().path()[-1] == (0.9, 3.0)
    assert len(BAPO().path()) == 1 + 36 + 15
    p = BAPO.authors_code().path()
    assert p[:2] == [(0.6, 1.2), (0.65, 1.2)] and p[4] == (0.8, 1.2) and p[-1] == (0.8, 2.0)


@pytest.mark.parametrize("rule", VARIANTS, ids=_rid)
def test_bounds_in_range_and_target_reached_unless_capped(rule):
    g = torch.Generator().manual_seed(5)
    r, a, m = (torch.stack(x) for x in zip(*[random_batch(g) for _ in range(60)]))
    b = rule.bounds(r, a, m)
    (a_lo, b_lo), (a_hi, b_hi) = rule.low_range, rule.high_range
    end = rule.path()[-1]
    assert torch.all((b.c_low >= a_lo - 1e-12) & (b.c_low <= b_lo + 1e-12))
    assert torch.all((b.c_high >= a_hi - 1e-12) & (b.c_high <= b_hi + 1e-12))
    reached = b.rho >= rule.rho0
    assert torch.equal(reached.to(F64), b.extra["rho_reached"])
    for i in torch.nonzero(~reached).flatten().tolist():
        assert (float(b.c_low[i]), float(b.c_high[i])) == pytest.approx(end, abs=1e-12)


def test_policy_loss_runs_equals_separate_calls():
    g = torch.Generator().manual_seed(9)
    R, B, T = 3, 4, 7
    old = -torch.rand(R, B, T, generator=g, dtype=F64) * 3
    logp0 = old + torch.randn(R, B, T, generator=g, dtype=F64) * torch.tensor([0.1, 0.5, 1.0], dtype=F64)[:, None, None]
    adv = torch.randn(R, B, generator=g, dtype=F64) + torch.tensor([1.0, -0.2, -1.5], dtype=F64)[:, None]
    mask = (torch.rand(R, B, T, generator=g) > 0.3).to(F64)
    mask[:, :, 0] = 1
    for rule in (BAPO(), BAPO.authors_code(), Symmetric()):
        for agg in ("token-mean", "seq-mean-token-mean"):
            logp = logp0.clone().requires_grad_(True)
            loss, stats = policy_loss_runs(logp, old, adv, mask, rule, agg=agg, dual_clip=3.0)
            assert loss.shape == (R,)
            loss.sum().backward()
            bounds_seen = set()
            for k in range(R):
                lk = logp0[k].clone().requires_grad_(True)
                lone, s = policy_loss(lk, old[k], adv[k], mask[k], rule, agg=agg, dual_clip=3.0)
                lone.backward()
                assert float(loss[k].detach()) == pytest.approx(lone.item(), rel=1e-12)
                for key in ("c_low", "c_high", "rho", "pos_mass", "neg_mass", "clip_frac_low", "clip_frac_high"):
                    assert float(stats[key][k]) == pytest.approx(s[key], rel=1e-12, abs=1e-15), key
                torch.testing.assert_close(logp.grad[k], lk.grad, rtol=1e-12, atol=1e-15)
                bounds_seen.add((s["c_low"], s["c_high"]))
            if isinstance(rule, BAPO) and rule.order == "upper_first":
                assert len(bounds_seen) > 1           # the runs really got their own bounds


# ---------------------------------------------------------------- the variants (docs/paper_vs_code.md, the three readings of ρ)

def _tokens(n=10_000, seed=0):
    g = torch.Generator().manual_seed(seed)
    r = torch.exp(torch.randn(n, generator=g, dtype=F64) * 0.4)
    a = torch.randn(n, generator=g, dtype=F64) - 0.25
    return r[None], a[None], torch.ones(1, n, dtype=F64)


def _lib_neg(r, a, m, lows, count):
    return neg_mass_at(r, a, m, torch.tensor(lows, dtype=F64), count)[0].tolist()


def _lib_pos(r, a, m, highs, count):
    return pos_mass_at(r, a, m, torch.tensor(highs, dtype=F64), count)[0].tolist()


LOWS = [0.6 + 0.02 * i for i in range(16)]
HIGHS = [1.2 + 0.05 * i for i in range(37)]


def test_count_all_raising_c_low_only_lowers_rho():
    r, a, m = _tokens()
    negs = _lib_neg(r, a, m, LOWS, "all")
    for lo, neg in list(zip(LOWS, negs))[::5]:
        assert neg == pytest.approx(ref_masses(r[0], a[0], m[0], lo, 1.2, "all")[1], rel=1e-10)
    assert all(n2 >= n1 for n1, n2 in zip(negs, negs[1:]))       # neg mass non-decreasing in c_low
    pos = _lib_pos(r, a, m, [1.2], "all")[0]
    ratios = [pos / n for n in negs]
    # docs/paper_vs_code.md: pos/neg falls as c_low goes 0.6 → 0.9 (0.4396 → 0.4185 on their draw)
    assert ratios[-1] < ratios[0]
    # the fixed pair of bounds gives the same masses as the candidate sweep
    assert masses(r, a, m, 0.9, 1.2, "all")[1].item() == pytest.approx(negs[-1], rel=1e-12)


def test_raising_c_high_raises_rho_under_both_counts():
    r, a, m = _tokens()
    for count in ("all", "grad"):
        pos = _lib_pos(r, a, m, HIGHS, count)
        for hi, p in list(zip(HIGHS, pos))[::12]:
            assert p == pytest.approx(ref_masses(r[0], a[0], m[0], 0.6, hi, count)[0], rel=1e-10)
        assert all(p2 >= p1 for p1, p2 in zip(pos, pos[1:]))
        assert pos[-1] > pos[0]        # docs/paper_vs_code.md: pos/neg rises as c_high goes 1.2 → 3.0


def test_count_grad_raising_c_low_raises_rho():
    r, a, m = _tokens()
    negs = _lib_neg(r, a, m, LOWS, "grad")
    for lo, neg in list(zip(LOWS, negs))[::5]:
        assert neg == pytest.approx(ref_masses(r[0], a[0], m[0], lo, 1.2, "grad")[1], rel=1e-10)
    assert all(n2 <= n1 for n1, n2 in zip(negs, negs[1:]))       # low-probability negatives filtered out
    assert negs[-1] < negs[0]
    rule = BAPO()
    rho = rule.search(r, a, m)["rho_path"][0]
    # the lower phase of the default path (last 15 points) raises ρ under "grad" …
    assert torch.all(rho[-15:].diff() >= 0) and rho[-1] > rho[-16]
    # … and lowers it under "all"
    rho_all = BAPO(count="all").search(r, a, m)["rho_path"][0]
    assert torch.all(rho_all[-15:].diff() <= 0) and rho_all[-1] < rho_all[-16]


def test_count_all_lower_phase_never_reaches_the_target():
    # Under "all" raising c_low cannot help: the search stops in the upper phase or runs to the end.
    rule = BAPO(count="all")
    g = torch.Generator().manual_seed(4)
    r, a, m = (torch.stack(x) for x in zip(*[random_batch(g) for _ in range(80)]))
    b = rule.bounds(r, a, m)
    in_lower = (b.c_low > 0.6 + 1e-9) & (b.c_low < 0.9 - 1e-9)
    assert not in_lower.any()
    capped = b.c_low > 0.9 - 1e-9
    assert capped.any() and (~capped).any()
    assert torch.all(b.extra["rho_reached"][capped] == 0)


def test_upper_first_and_lower_first_pick_different_bounds():
    # Same batch, same ρ definition (grad, share, ρ0 = 0.4); only the order differs.
    # ρ(0.6, 1.2) = 1.5/4.4 < 0.4. Upper first: c_high 1.25 takes in the positive at r = 1.24.
    # Lower first: c_low 0.86 drops the negative at r = 0.85 before c_high ever moves.
    r = torch.tensor([[1.5, 1.5, 0.5, 0.5, 1.0, 1.1, 1.24, 0.85]], dtype=F64)
    a = torch.tensor([[1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 1.0, -1.0]], dtype=F64)
    m = torch.ones_like(r)
    up = BAPO(order="upper_first").bounds(r, a, m)
    low = BAPO(order="lower_first").bounds(r, a, m)
    assert (float(up.c_low[0]), float(up.c_high[0])) == pytest.approx((0.6, 1.25))
    assert (float(low.c_low[0]), float(low.c_high[0])) == pytest.approx((0.86, 1.2))


def test_fixed_rules_report_rho_without_steering():
    # ρ is reported for the fixed rules the same way as BAPO's default (grad, share), at their own bounds.
    r, a, m = _tokens(2000, seed=3)
    for rule in (Symmetric(), ClipHigher()):
        loss, s = policy_loss(torch.log(r), torch.zeros_like(r), a, m, rule)
        pos, neg = ref_masses(r[0], a[0], m[0], rule.c_low, rule.c_high, "grad")
        assert s["pos_mass"] == pytest.approx(pos, rel=1e-10)
        assert s["neg_mass"] == pytest.approx(neg, rel=1e-10)
        assert s["rho"] == pytest.approx(pos / (pos + neg), rel=1e-10)
        assert s["rho_before"] == s["rho"] and s["search_steps"] == 0


def test_masses_are_exactly_zero_when_every_token_is_clipped():
    # Every negative below the lowest c_low (0.6) and every positive above the highest c_high (3.0):
    # no token carries gradient, so both "grad" masses are exactly 0 (not ±1e-16 of rounding),
    # ρ reads "nothing to balance" and the search stops at once.
    g = torch.Generator().manual_seed(0)
    for _ in range(200):
        n = int(torch.randint(2, 9, (1,), generator=g))
        r_neg = torch.rand(1, n, generator=g, dtype=F64) * 0.59
        r_pos = 3.01 + torch.rand(1, n, generator=g, dtype=F64) * 5
        a = torch.rand(1, 2 * n, generator=g, dtype=F64) * 5
        a[:, :n] *= -1
        r = torch.cat([r_neg, r_pos], 1)
        m = torch.ones_like(r)
        lows, highs = torch.tensor(LOWS, dtype=F64), torch.tensor(HIGHS, dtype=F64)
        assert torch.all(neg_mass_at(r, a, m, lows, "grad") == 0)
        assert torch.all(pos_mass_at(r, a, m, highs, "grad") == 0)
        # no token beyond a bound: "all" adds exactly nothing to "grad" (no h·(±1e-16) residue)
        r_in = 0.6 + torch.rand(1, 2 * n, generator=g, dtype=F64) * 0.6
        three, half = torch.tensor([3.0], dtype=F64), torch.tensor([0.5], dtype=F64)
        assert torch.equal(pos_mass_at(r_in, a, m, three, "all"), pos_mass_at(r_in, a, m, three, "grad"))
        assert torch.equal(neg_mass_at(r_in, a, m, half, "all"), neg_mass_at(r_in, a, m, half, "grad"))
        b = BAPO().bounds(r, a, m)
        assert float(b.rho) == 1.0 and int(b.extra["search_steps"]) == 0
        b = BAPO(balance="pos_neg", rho0=0.667).bounds(r, a, m)
        assert float(b.rho) == math.inf
