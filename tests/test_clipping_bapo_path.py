"""BAPO's path of candidate bounds: its size is capped (checked without building it), upper_first
keeps its exact numbers, lower_first accumulates floats as the authors' loop does; eps as theirs."""
import math
import time

import pytest
import torch

from toy_rl.clipping import BAPO, policy_loss
from toy_rl.clipping.bapo import MAX_PATH_POINTS

F64 = torch.float64


@pytest.mark.parametrize("kw, points", [
    (dict(high_step=1e-5), "180,016"),                  # hung (a quadratic path search)
    (dict(high_step=1e-9), "1,800,000,016"),            # exhausted memory
    (dict(order="lower_first", low_step=1e-6), "300,037"),
])
def test_too_long_a_path_is_refused_at_once(kw, points):
    t = time.perf_counter()
    with pytest.raises(ValueError, match=rf"search path would have {points} points .*at most 10,000 are allowed"):
        BAPO(**kw)
    assert time.perf_counter() - t < 0.5                # counted, not built


@pytest.mark.parametrize("rule", [
    BAPO(), BAPO(count="all"), BAPO(low_range=(0.7, 0.71)), BAPO(low_range=(0.8, 0.8), high_range=(1.0, 1.0)),
    BAPO(high_range=(1.2, 1.93), high_step=0.07, low_range=(0.61, 0.8), low_step=0.03),
    BAPO(high_step=1.8 / 9900, low_step=0.3 / 90),
    BAPO.authors_code(), BAPO(order="lower_first"), BAPO(order="lower_first", low_step=0.07, high_step=0.11),
    BAPO(order="lower_first", low_range=(0.8, 0.8), high_range=(1.0, 1.0)),
    BAPO(order="lower_first", high_step=1.8 / 9900, low_step=0.3 / 90),
], ids=repr)
def test_path_size_counts_the_path(rule):
    n = len(rule.path())
    if rule.order == "upper_first":
        assert rule.path_size() == n
    else:                                               # float accumulation may add one point
        assert rule.path_size() in (n - 1, n)
    assert n <= MAX_PATH_POINTS + 1


def test_a_path_near_the_cap_searches():
    rule = BAPO(high_step=1.8 / 9900, low_step=0.3 / 90)
    assert 9000 < rule.path_size() <= MAX_PATH_POINTS
    g = torch.Generator().manual_seed(0)
    r = torch.exp(torch.randn(3, 200, generator=g, dtype=F64) * 0.5)
    a = torch.randn(3, 200, generator=g, dtype=F64) - 0.5
    b = rule.bounds(r, a, torch.ones_like(r))
    assert torch.all((b.c_high >= 1.2) & (b.c_high <= 3.0))


# ---------------------------------------------------------------- numbers on the path

def test_upper_first_path_numbers_unchanged():
    # a⁺ + i·δ1 and a⁻ + j·δ2 rounded to 10 decimals: the default results stay as they were.
    p = BAPO().path()
    assert p[:3] == [(0.6, 1.2), (0.6, 1.25), (0.6, 1.3)]
    assert p[36] == (0.6, 3.0) and p[37] == (0.62, 3.0) and p[-1] == (0.9, 3.0)
    assert all(v == round(v, 10) for pt in p for v in pt)


def test_lower_first_path_keeps_the_authors_floats():
    # The authors' loop: cur = min(cur + step, max), floats accumulated, never rounded.
    rule = BAPO.authors_code()
    lo, hi, want = 0.6, 1.2, [(0.6, 1.2)]
    while lo < 0.8:
        lo = min(lo + 0.05, 0.8)
        want.append((lo, hi))
    while hi < 2.0:
        hi = min(hi + 0.05, 2.0)
        want.append((lo, hi))
    assert rule.path() == want
    assert (0.8, 1.5000000000000002) in rule.path() and (0.7000000000000001, 1.2) in rule.path()
    # and the search lands on those very floats
    r = torch.tensor([[1.52, 1.0]], dtype=F64)
    a = torch.tensor([[1.0, -1.5]], dtype=F64)          # pos/neg = min(1.52, c_high)/1.5: reached past 1.5
    b = BAPO.authors_code().bounds(r, a, torch.ones_like(r))
    assert float(b.c_high[0]) == 1.5500000000000003 and float(b.c_low[0]) == 0.8


# ---------------------------------------------------------------- eps, as the authors' pos/(neg + 1e-8)

def test_authors_code_has_eps():
    assert BAPO.authors_code().eps == 1e-8 and BAPO().eps == 0.0


def test_eps_in_the_balance():
    # On-policy, one positive and one negative of the same size: pos/neg = 1 exactly meets the authors'
    # target 1.0 at once; with their eps, pos/(neg + 1e-8) < 1 and the search runs to the end of the path.
    r = torch.ones(1, 2, dtype=F64)
    a = torch.tensor([[1.0, -1.0]], dtype=F64)
    m = torch.ones_like(r)
    no_eps = BAPO(**{**BAPO.authors_code().__dict__, "eps": 0.0})
    b0, b1 = no_eps.bounds(r, a, m), BAPO.authors_code().bounds(r, a, m)
    assert (float(b0.c_low[0]), float(b0.c_high[0]), float(b0.rho[0])) == (0.6, 1.2, 1.0)
    assert (float(b1.c_low[0]), float(b1.c_high[0])) == (0.8, 2.0)
    assert float(b1.rho[0]) == 1.0 / (1.0 + 1e-8)
    # share: pos/(pos + neg + eps); no negative mass still reads "nothing to balance"
    share = BAPO(eps=0.5).bounds(r, a, m)
    assert float(share.rho[0]) == pytest.approx(1.0 / 2.5)
    only_pos = BAPO.authors_code().bounds(r, torch.tensor([[1.0, 0.0]], dtype=F64), m)
    assert float(only_pos.rho[0]) == math.inf


@pytest.mark.parametrize("eps", [-1e-8, math.inf, math.nan, "1e-8"])
def test_bad_eps(eps):
    with pytest.raises(ValueError, match=r"^eps must be a finite number >= 0"):
        BAPO(eps=eps)


def test_eps_reaches_policy_loss_stats():
    logp = torch.zeros(1, 2, dtype=F64)
    _, s = policy_loss(logp, logp.clone(), torch.tensor([[1.0, -1.0]], dtype=F64), torch.ones_like(logp),
                       BAPO.authors_code())
    assert s["rho"] == 1.0 / (1.0 + 1e-8) and s["rho_reached"] == 0.0
