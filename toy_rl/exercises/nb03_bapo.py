"""Exercises of notebook 03 (BAPO's balance): the gradient-carrying ρ, and one step of Algorithm 1."""
from __future__ import annotations

import torch

from . import register
from .framework import Case, Exercise, Mistake, close

NB = "03_bapo_balance"
T = lambda *v: torch.tensor(v, dtype=torch.float64)     # noqa: E731


# ----------------------------------------------------------------------------- ρ over gradient-carrying tokens

def _rho_cases():
    adv = T(1.5, -0.5, -0.5, -0.5)              # a GRPO group of 4 with one right answer
    cases = [
        Case("on-policy, one group", (T(1.0, 1.0, 1.0, 1.0), adv, 0.8, 1.2),
             note="on-policy GRPO advantages sum to 0 per group, so the masses are equal: ρ = 0.5"),
        Case("the positive token rose past c_high", (T(1.5, 1.0, 1.0, 1.0), adv, 0.8, 1.2),
             note="a clipped positive carries no gradient: it adds nothing to pos"),
        Case("a negative token fell below c_low", (T(1.0, 0.5, 1.0, 1.0), adv, 0.8, 1.2),
             note="a clipped negative carries no gradient: it leaves neg (this is how raising c_low 'filters' it)"),
        Case("tokens exactly on the bounds", (T(1.2, 0.8, 1.0, 1.0), adv, 0.8, 1.2),
             note="a token exactly on a bound keeps its gradient, so it counts"),
        Case("inside the bounds, ratios weigh", (T(1.1, 0.9, 1.05, 0.95), adv, 0.8, 1.2),
             note="each token weighs |A|·r, its share of the surrogate r·A"),
        Case("nothing carries gradient", (T(2.0, 0.5), T(1.0, -1.0), 0.8, 1.2),
             note="no mass at all: there is nothing to balance, return 1.0 (BAPO's search then stays put)"),
    ]
    g = torch.Generator().manual_seed(301)
    for i in range(6):
        n = int(torch.randint(6, 60, (1,), generator=g))
        ratio = torch.exp(0.35 * torch.randn(n, generator=g, dtype=torch.float64))
        adv = torch.randn(n, generator=g, dtype=torch.float64)
        adv[torch.rand(n, generator=g) < 0.1] = 0.0
        c_low = round(0.6 + 0.3 * float(torch.rand(1, generator=g)), 2)
        c_high = round(1.2 + 1.0 * float(torch.rand(1, generator=g)), 2)
        cases.append(Case(f"random tokens #{i + 1} ({n} tokens)", (ratio, adv, c_low, c_high), random=True))
    return cases


def _share(pos, neg):
    total = float(pos + neg)
    return float(pos) / total if total > 0 else 1.0


def _all_tokens_clipped_values(ratio, adv, c_low, c_high):
    pos = (adv.clamp(min=0) * torch.minimum(ratio, torch.tensor(c_high, dtype=ratio.dtype))).sum()
    neg = ((-adv).clamp(min=0) * torch.maximum(ratio, torch.tensor(c_low, dtype=ratio.dtype))).sum()
    return _share(pos, neg)


def _no_ratio_weight(ratio, adv, c_low, c_high):
    pos = adv[(adv > 0) & (ratio <= c_high)].sum()
    neg = (-adv)[(adv < 0) & (ratio >= c_low)].sum()
    return _share(pos, neg)


def _pos_over_neg(ratio, adv, c_low, c_high):
    pos = (adv * ratio)[(adv > 0) & (ratio <= c_high)].sum()
    neg = (-adv * ratio)[(adv < 0) & (ratio >= c_low)].sum()
    return float(pos / neg) if neg > 0 else float("inf")


def _no_clipping(ratio, adv, c_low, c_high):
    pos = (adv * ratio)[adv > 0].sum()
    neg = (-adv * ratio)[adv < 0].sum()
    return _share(pos, neg)


def _token_count(ratio, adv, c_low, c_high):
    pos = ((adv > 0) & (ratio <= c_high)).sum()
    neg = ((adv < 0) & (ratio >= c_low)).sum()
    return _share(pos, neg)


def _zero_when_empty(ratio, adv, c_low, c_high):
    pos = (adv * ratio)[(adv > 0) & (ratio <= c_high)].sum()
    neg = (-adv * ratio)[(adv < 0) & (ratio >= c_low)].sum()
    total = float(pos + neg)
    return float(pos) / total if total > 0 else 0.0


# ----------------------------------------------------------------------------- one step of Algorithm 1

def _step_cases():
    cases = [
        Case("target already met", (0.45, 0.6, 1.2), note="the loop runs only while ρ < ρ0"),
        Case("exactly at the target", (0.4, 0.6, 1.2), note="ρ = ρ0 meets the target: while ρ < ρ0 stops"),
        Case("below target, room above", (0.3, 0.6, 1.2), note="Algorithm 1 raises c_high first"),
        Case("c_high one step below its maximum", (0.3, 0.6, 2.95), note="2.95 + 0.05 ≤ 3.0: the step fits"),
        Case("c_high at its maximum", (0.3, 0.6, 3.0), note="no room above: now c_low rises, by δ2"),
        Case("c_high with less than a step left", (0.3, 0.6, 2.98),
             note="2.98 + 0.05 > 3.0: c_high stays, c_low rises"),
        Case("c_low one step below its maximum", (0.1, 0.88, 3.0), note="0.88 + 0.02 ≤ 0.9: one last step"),
        Case("both bounds at their maxima", (0.1, 0.9, 3.0), note="the search is over: the bounds stay"),
        Case("c_low cannot rise, c_high could", (0.1, 0.89, 1.5),
             note="Algorithm 1's guard is `while ρ < ρ0 and c_low + δ2 ≤ b⁻`: it stops here even though c_high could rise"),
        Case("other settings (a target of 0.45, ranges up to 0.8 and 2.0)", (0.3, 0.6, 2.0, 0.45, 0.8, 2.0, 0.05, 0.1),
             note="use the arguments, not the paper's numbers"),
        Case("other settings, room above", (0.3, 0.6, 1.5, 0.45, 0.8, 2.0, 0.05, 0.1)),
    ]
    g = torch.Generator().manual_seed(302)
    made = 0
    while made < 8:
        u = lambda: float(torch.rand(1, generator=g))      # noqa: E731
        rho0 = round(0.3 + 0.3 * u(), 2)
        low_step, high_step = (0.02, 0.05) if made % 2 == 0 else (0.05, 0.1)
        low_max, high_max = round(0.8 + 0.1 * u(), 2), round(2.0 + u(), 2)
        c_low = round(0.6 + int(u() * 16) * low_step, 10)
        c_high = round(1.2 + int(u() * 40) * high_step, 10)
        if c_low > low_max or c_high > high_max:
            continue
        rho = round(rho0 + (0.2 * u() - 0.15), 3)
        args = (rho, c_low, c_high, rho0, low_max, high_max, low_step, high_step)
        if _float_sensitive(*args):
            continue                    # keep random cases free of 0.1 + 0.2 > 0.3 ties (the fixed ones are exact)
        made += 1
        cases.append(Case(f"random search state #{made}", args, random=True))
    return cases


def _float_sensitive(rho, c_low, c_high, rho0, low_max, high_max, low_step, high_step):
    return abs(c_low + low_step - low_max) < 1e-6 or abs(c_high + high_step - high_max) < 1e-6


def _lower_first(rho, c_low, c_high, rho0=0.4, low_max=0.9, high_max=3.0, low_step=0.02, high_step=0.05):
    if not rho < rho0:
        return c_low, c_high
    if c_low + low_step <= low_max + 1e-9:
        return c_low + low_step, c_high
    if c_high + high_step <= high_max + 1e-9:
        return c_low, c_high + high_step
    return c_low, c_high


def _ignores_rho(rho, c_low, c_high, rho0=0.4, low_max=0.9, high_max=3.0, low_step=0.02, high_step=0.05):
    if c_low + low_step > low_max + 1e-9:
        return c_low, c_high
    if c_high + high_step <= high_max + 1e-9:
        return c_low, c_high + high_step
    return c_low + low_step, c_high


def _steps_at_target(rho, c_low, c_high, rho0=0.4, low_max=0.9, high_max=3.0, low_step=0.02, high_step=0.05):
    if not (rho <= rho0 and c_low + low_step <= low_max + 1e-9):
        return c_low, c_high
    if c_high + high_step <= high_max + 1e-9:
        return c_low, c_high + high_step
    return c_low + low_step, c_high


def _both_bounds(rho, c_low, c_high, rho0=0.4, low_max=0.9, high_max=3.0, low_step=0.02, high_step=0.05):
    if not (rho < rho0 and c_low + low_step <= low_max + 1e-9):
        return c_low, c_high
    return c_low + low_step, min(c_high + high_step, high_max)


def _no_low_guard(rho, c_low, c_high, rho0=0.4, low_max=0.9, high_max=3.0, low_step=0.02, high_step=0.05):
    if not rho < rho0:
        return c_low, c_high
    if c_high + high_step <= high_max + 1e-9:
        return c_low, c_high + high_step
    if c_low + low_step <= low_max + 1e-9:
        return c_low + low_step, c_high
    return c_low, c_high


def _capped_high(rho, c_low, c_high, rho0=0.4, low_max=0.9, high_max=3.0, low_step=0.02, high_step=0.05):
    if not (rho < rho0 and c_low + low_step <= low_max + 1e-9):
        return c_low, c_high
    if c_high < high_max - 1e-9:
        return c_low, min(c_high + high_step, high_max)
    return c_low + low_step, c_high


def _strict_fit(rho, c_low, c_high, rho0=0.4, low_max=0.9, high_max=3.0, low_step=0.02, high_step=0.05):
    if not (rho < rho0 and c_low + low_step < low_max - 1e-9):
        return c_low, c_high
    if c_high + high_step < high_max - 1e-9:
        return c_low, c_high + high_step
    return c_low + low_step, c_high


def _paper_defaults_only(rho, c_low, c_high, *_):
    if not (rho < 0.4 and c_low + 0.02 <= 0.9 + 1e-9):
        return c_low, c_high
    if c_high + 0.05 <= 3.0 + 1e-9:
        return c_low, c_high + 0.05
    return c_low + 0.02, c_high


def _search_like_bapo(fn):
    """After every case passed: loop the student's step as Algorithm 1 on stale batches, ρ measured by the
    library at each visited pair of bounds, and compare where it stops with BAPO()'s own search."""
    from ..advantages import group_advantages
    from ..clipping import BAPO
    from ..clipping.balance import balance_of, masses

    rule = BAPO()
    g = torch.Generator().manual_seed(303)
    landed = []
    for i in range(6):
        if i < 4:       # GRPO groups whose positive tokens were pushed up: c_high has to open
            rewards = (torch.rand(8, 8, generator=g, dtype=torch.float64) < 0.25 + 0.1 * i).to(torch.float64)
            adv = group_advantages(rewards).reshape(-1)
            ratio = torch.exp(0.15 * (i + 1) * torch.sign(adv) + 0.25 * torch.randn(64, generator=g, dtype=torch.float64))
        else:           # negatives dominate: the search runs on into c_low
            adv = torch.randn(64, generator=g, dtype=torch.float64) - 0.3 * (i - 3)
            ratio = torch.exp(0.4 * torch.randn(64, generator=g, dtype=torch.float64))
        r, a, m = ratio[None], adv[None], torch.ones_like(ratio)[None]
        c_low, c_high = rule.low_range[0], rule.high_range[0]
        for _ in range(500):
            pos, neg = masses(r, a, m, c_low, c_high, rule.count)
            rho = float(balance_of(pos, neg, rule.balance)[0])
            nxt = fn(rho, c_low, c_high, rule.rho0, rule.low_range[1], rule.high_range[1], rule.low_step, rule.high_step)
            nxt = tuple(round(float(v), 10) for v in nxt)     # as BAPO.path() does: no drift from adding steps
            if abs(nxt[0] - c_low) < 1e-12 and abs(nxt[1] - c_high) < 1e-12:
                break
            c_low, c_high = nxt
        b = rule.bounds(r, a, m)
        want = (float(b.c_low[0]), float(b.c_high[0]))
        if abs(want[0] - c_low) > 1e-6 or abs(want[1] - c_high) > 1e-6:
            return False, (f"looped as Algorithm 1 on stale batch #{i + 1}, your steps stop at "
                           f"[{c_low:.4f}, {c_high:.4f}] while BAPO() lands on [{want[0]:.4f}, {want[1]:.4f}] "
                           "(each pass gets ρ measured at the bounds your previous pass returned)")
        landed.append(f"[{c_low:.2f}, {c_high:.2f}]")
    return True, "looped as Algorithm 1 on 6 stale batches, your steps land where BAPO() does: " + ", ".join(landed)


register(
    Exercise(
        name="grad_rho", notebook=NB,
        title="ρ over the tokens that still carry gradient: the positive share pos/(pos + neg), BAPO()'s default",
        solution="toy_rl.solutions.nb03:grad_rho",
        cases=_rho_cases,
        nudge="pos = Σ A·r over tokens with A > 0 and r ≤ c_high; neg = Σ |A|·r over tokens with A < 0 and "
              "r ≥ c_low; ρ = pos / (pos + neg), or 1.0 when pos + neg = 0.",
        mistakes=(
            Mistake(_all_tokens_clipped_values, "that is Eq. 8's reading (every token with its clipped value, "
                                                "count=\"all\"). Here a clipped token adds nothing at all: count only "
                                                "tokens that still carry gradient."),
            Mistake(_no_ratio_weight, "each token weighs |A|·r, its share of the surrogate r·A, not |A| alone."),
            Mistake(_pos_over_neg, "ρ here is a share, pos / (pos + neg), between 0 and 1 (pos/neg is the authors' "
                                   "code's reading, whose target 1.0 means a share of 0.5)."),
            Mistake(_no_clipping, "tokens outside the bounds lose their gradient and drop out: a positive with "
                                  "r > c_high, a negative with r < c_low."),
            Mistake(_token_count, "ρ is a share of the loss mass (Σ |A|·r), not of the number of tokens."),
            Mistake(_zero_when_empty, "with no mass at all there is nothing to balance: return 1.0, so that "
                                      "BAPO's search does not move the bounds for it."),
        ),
        compare=close(rtol=1e-6, atol=1e-9),
    ),
    Exercise(
        name="bapo_step", notebook=NB,
        title="one pass of BAPO's Algorithm 1 loop: given ρ at the current bounds, the next (c_low, c_high)",
        solution="toy_rl.solutions.nb03:bapo_step",
        cases=_step_cases,
        nudge="Algorithm 1: while ρ < ρ0 and c_low + δ2 ≤ b⁻: if c_high + δ1 ≤ b⁺ then c_high += δ1, else "
              "c_low += δ2. One pass moves one bound; if the loop condition fails, the bounds stay.",
        mistakes=(
            Mistake(_lower_first, "Algorithm 1 raises c_high first (δ1 at a time, up to b⁺) and only then c_low "
                                  "(the authors' code goes the other way)."),
            Mistake(_ignores_rho, "stop when the target is met: the loop runs only while ρ < ρ0."),
            Mistake(_steps_at_target, "`while ρ < ρ0`: at ρ = ρ0 the target is met and the bounds stay."),
            Mistake(_both_bounds, "one pass moves one bound: c_high while it has room, otherwise c_low."),
            Mistake(_no_low_guard, "the loop's guard is `ρ < ρ0 and c_low + δ2 ≤ b⁻`: once c_low cannot rise, the "
                                   "search stops, even if c_high could still rise."),
            Mistake(_capped_high, "Algorithm 1 raises c_high only if a whole step fits (c_high + δ1 ≤ b⁺); otherwise "
                                  "c_low rises. (Capping c_high at b⁺ is what the authors' code does.)"),
            Mistake(_strict_fit, "a step that lands exactly on the maximum fits: the tests are ≤, not <."),
            Mistake(_paper_defaults_only, "use the arguments (rho0, low_max, high_max, low_step, high_step), not the "
                                          "paper's numbers: the same loop runs with the authors' ranges and steps."),
        ),
        compare=close(rtol=0, atol=1e-9),
        extra=_search_like_bapo,
    ),
)
