"""One way to judge the paper's claims, for every rung: paired tests by seed, Holm across a rung's claims, the
direction named, results against a claim counted, and the regime BAPO ran in.

Each rung has a module with the same two functions (:mod:`toy_rl.bandit.verdicts`,
:mod:`toy_rl.arithmetic.verdicts`, :mod:`toy_rl.lm.verdicts`)::

    checks = claim_checks(results, ...)      # list[Verdict], claims 1-5
    lines = claim_verdicts(results, ...)     # [verdict_line(v) for v in checks]: what notebooks and reports print

How a verdict is reached, the same on every rung:

* every part of a claim is a :class:`PairedTest`: one quantity of ``a`` against ``b``, **paired by seed**
  (:func:`toy_rl.stats.paired_test`: the same seed gives both sides the same start, so the per-seed difference
  removes that noise), or against a fixed value (a one-sample test, e.g. "share of updates > 0.5");
* the p-values of **all** tests of a rung's claims form one family, adjusted by Holm's method
  (:func:`toy_rl.stats.holm`): a test counts only at p_holm < :data:`ALPHA`;
* a significant result in the claim's direction counts **for** it, one in the opposite direction **against** --
  but only if the difference is at least the smallest effect worth reporting (``min_effect``, declared with the
  endpoint before the runs, e.g. 1 point of accuracy): a significant difference below it is "negligible" and
  counts neither way (a difference of 0.0002 in expected reward is not a finding, however many seeds agree);
* status: "contradicted" if anything counts against; "supported" if every strict part counts for; "partly
  supported" if some strict part counts for and none against; "inconclusive" otherwise (nothing significant,
  or only a not-worse part); "not testable: why" if no test could be made (fewer than :data:`MIN_PAIRS` seeds,
  or the claim's precondition never arose). A "not worse" part (``>=``) can block a claim (against) but never
  carries it: it is not needed for "supported" when underpowered, and a significant one alone does not make a
  claim "partly supported" (for claim 5, clip-higher ≥ symmetric says nothing about BAPO).
* a verdict about BAPO carries its **regime** (:func:`regime_of`): whether ρ before the search was below ρ0 in
  most updates ("negatives-dominate") or not ("balanced"), and how often the search moved the bounds. In a
  balanced regime BAPO is named "BAPO (ran as fixed [0.6, 1.2])": its search rarely had anything to do
  (unless its bounds are known to have moved in at least 5% of the updates: then the share is named instead).
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field, replace

import numpy as np

from .rl.diagnostics import RHO0, START
from .stats import holm, paired_test

ALPHA = 0.05
MIN_PAIRS = 2                   # a paired t-test needs two seeds on each side
BAPO_START = START              # BAPO()'s starting bounds [a⁻, a⁺] (Algorithm 1); RHO0: its target ρ0 (§5.1)
REACHED_SHARE = 0.9             # a search that brings ρ to ρ0 in more than 90% of the updates that need it
RAN_AS_FIXED = 0.05             # a balanced-regime BAPO whose bounds left the start in fewer updates ran as fixed
STRICT, NOT_WORSE = (">", "<"), (">=", "<=")


@dataclass
class PairedTest:
    """One part of a claim: ``what`` of ``a`` against ``b`` (a per-seed quantity, paired by seed, or a fixed
    value), expected ``expect`` ("<", ">", or "<=" / ">=" for a not-worse part). ``scale``/``unit`` only change
    how the difference is printed (e.g. 100, " points" for accuracies)."""
    what: str
    a: str
    b: str
    expect: str
    n: int = 0
    diff: float = math.nan
    lo: float = math.nan
    hi: float = math.nan
    p: float = math.nan
    p_holm: float = math.nan
    scale: float = 1.0
    unit: str = ""
    min_effect: float = 0.0
    key: tuple | None = None        # (cell, endpoint, a label, b label): how a table finds this test's p_holm

    @property
    def strict(self) -> bool:
        return self.expect in STRICT

    @property
    def tested(self) -> bool:
        return math.isfinite(self.p_holm)

    def outcome(self, alpha: float = ALPHA) -> str:
        """"for", "against", "negligible" (significant, but smaller than ``min_effect``), "inconclusive", or
        "untested" (no p-value: fewer than two pairs)."""
        if not self.tested:
            return "untested"
        if self.p_holm < alpha and abs(self.diff) < self.min_effect:
            return "negligible"
        sign = 1 if self.expect in (">", ">=") else -1
        if self.p_holm < alpha and self.diff * sign > 0:
            return "for"
        if self.p_holm < alpha and self.diff * sign < 0:
            return "against"
        return "inconclusive"

    def line(self) -> str:
        """'mean reward, staleness 2: BAPO > clip-higher by +0.021 [+0.004, +0.038], p_holm = 0.03 (n = 20)'."""
        if self.n < MIN_PAIRS or not math.isfinite(self.diff):
            return f"{self.what}: {self.a} vs {self.b} not testable (n = {self.n} < {MIN_PAIRS} seeds)"
        rel = ">" if self.diff > 0 else "<" if self.diff < 0 else "="
        s = self.scale
        size = self.min_effect * s
        unit = self.unit[:-1] if size == 1 and self.unit.endswith("s") else self.unit       # "1 point"
        small = (f", below the smallest effect worth reporting ({size:g}{unit})" if self.outcome() == "negligible"
                 else "")
        return (f"{self.what}: {self.a} {rel} {self.b} by {_num(self.diff * s)}{self.unit} "
                f"[{_num(self.lo * s)}, {_num(self.hi * s)}], p_holm {_p(self.p_holm)} (n = {self.n}){small}")


def _num(x: float) -> str:
    return f"{x:+.3g}" if math.isfinite(x) else "n/a"


def _p(p: float) -> str:
    """'= 0.03', '< 0.001' or '= n/a': how a p-value follows its name."""
    return "= n/a" if not math.isfinite(p) else "< 0.001" if p < 0.001 else f"= {p:.2g}"


def paired(what: str, a: str, a_values, b: str, b_values, expect: str, scale: float = 1.0,
           unit: str = "", min_effect: float = 0.0, key: tuple | None = None) -> PairedTest:
    """A :class:`PairedTest` of per-seed values ``a_values`` against ``b_values`` (the same seeds, in the same order)
    or against one number (``b_values`` a scalar: a one-sample test). Seeds with a NaN on either side drop out.
    ``min_effect``: the smallest difference worth reporting (below it a significant result is "negligible")."""
    if expect not in STRICT + NOT_WORSE:
        raise ValueError(f"expect must be one of {STRICT + NOT_WORSE}; got {expect!r}")
    a_values = np.asarray(a_values, dtype=float).ravel()
    b_values = np.asarray(b_values, dtype=float)
    b_values = np.full_like(a_values, float(b_values)) if b_values.ndim == 0 else b_values.ravel()
    with warnings.catch_warnings():              # nearly equal pairs: scipy warns of precision loss, p stays right
        warnings.simplefilter("ignore", RuntimeWarning)
        r = paired_test(a_values, b_values)
    return PairedTest(what, a, b, expect, r["n"], r["diff"], r["diff_lo"], r["diff_hi"], r["p"], scale=scale, unit=unit,
                      min_effect=min_effect, key=key)


@dataclass(frozen=True)
class Regime:
    """Where BAPO ran: ``name`` "negatives-dominate" (ρ before the search below ρ0 in most updates: the search
    had work to do), "balanced" (it did not) or "unknown" (no ρ recorded); ``below`` that share of updates,
    ``moved`` the share whose bounds left ``start``, over ``updates`` updates."""
    name: str
    below: float
    moved: float
    updates: int
    start: tuple = BAPO_START

    def bapo(self, name: str = "BAPO") -> str:
        """How to name BAPO in a verdict: plain in a negatives-dominate regime; in a balanced one "BAPO (ran as
        fixed [0.6, 1.2])", unless its bounds are known to have left the start in at least :data:`RAN_AS_FIXED`
        of the updates: then "BAPO (balanced regime, searched in 10% of updates)", since those few searches
        can matter (notebook 03: BAPO() beats the fixed bounds it starts from)."""
        if self.name != "balanced":
            return name
        if not self.ran_as_fixed:
            return f"{name} (balanced regime, searched in {self.moved:.0%} of updates)"
        lo, hi = self.start
        return f"{name} (ran as fixed [{lo:g}, {hi:g}])"

    @property
    def ran_as_fixed(self) -> bool:
        """Balanced, and its bounds not known to have left the start in :data:`RAN_AS_FIXED` of the updates."""
        return self.name == "balanced" and not (math.isfinite(self.moved) and self.moved >= RAN_AS_FIXED)

    def describe(self) -> str:
        if self.name == "unknown":
            return "regime unknown (no ρ before the search recorded)"
        lo, hi = self.start
        moved = f"; its bounds left [{lo:g}, {hi:g}] in {self.moved:.0%}" if math.isfinite(self.moved) else ""
        return (f"regime {self.name}: ρ before the search < ρ0 in {self.below:.0%} of BAPO's {self.updates} "
                f"updates{moved}")


def regime_name(below: float) -> str:
    """"negatives-dominate" when ρ before the search is below ρ0 in a majority (> 50%) of updates, else
    "balanced" (docs/protocol.md §2)."""
    return "negatives-dominate" if below > 0.5 else "balanced"


def regime_of(rho_before, c_low=None, c_high=None, rho0: float = RHO0, start=BAPO_START) -> Regime:
    """The regime of BAPO's updates from their ρ before the search (any shape; NaN = no advantage mass, left out)
    and, if given, the bounds it used (to count how often they left ``start``).

    "negatives-dominate" when ρ_before < ``rho0`` in a majority (> 50%) of the updates, else "balanced".
    """
    rb = np.asarray(rho_before, dtype=float).ravel()
    rb = rb[~np.isnan(rb)]
    moved = math.nan
    if c_low is not None and c_high is not None:
        lo, hi = np.asarray(c_low, dtype=float).ravel(), np.asarray(c_high, dtype=float).ravel()
        if lo.shape != hi.shape:
            raise ValueError(f"c_low and c_high need one value per update; got shapes {lo.shape} and {hi.shape}")
        ok = np.isfinite(lo) & np.isfinite(hi)
        if ok.any():
            moved = float(np.mean((lo[ok] > start[0] + 1e-9) | (hi[ok] > start[1] + 1e-9)))
    if rb.size == 0:
        return Regime("unknown", math.nan, moved, 0, tuple(start))
    below = float(np.mean(rb < rho0))
    return Regime(regime_name(below), below, moved, int(rb.size), tuple(start))


def reached_when_needed(rho_before, rho_after, rho0: float = RHO0) -> np.ndarray:
    """Per seed (rows), the share of updates that needed the search (ρ before it < ``rho0``) in which ρ after it
    reached ``rho0``; NaN for a seed with no such update. ``rho_before``, ``rho_after``: (seeds, updates).

    Claim 4's "ρ near ρ0" judged where the search had work to do: an update whose ρ starts at or above ρ0
    reaches it without searching and says nothing about the search."""
    before = np.atleast_2d(np.asarray(rho_before, dtype=float))
    after = np.atleast_2d(np.asarray(rho_after, dtype=float))
    if before.shape != after.shape:
        raise ValueError(f"rho_before and rho_after need the same shape; got {before.shape} and {after.shape}")
    needed = before < rho0
    hit = needed & (after >= rho0 - 1e-9)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(needed.sum(1) > 0, hit.sum(1) / needed.sum(1), np.nan)


def reached_text(share: float) -> str:
    """Claim 4's "ρ near ρ0", said but not tested: BAPO's search range (c_high up to 3.0) makes reaching ρ0 when it
    had to near-certain, so a test of it would be met by construction (issue: verdicts never met by construction)."""
    return (f"the search brought ρ to ρ0 in {share:.0%} of the updates that needed it (reported, not tested: its "
            "range makes that near-certain)")


@dataclass
class Claim:
    """A claim before judgement: its tests and what to say beside them; ``untestable`` (a reason) when its
    precondition never arose."""
    claim: int | str
    text: str
    tests: list = field(default_factory=list)
    detail: str = ""
    regime: Regime | None = None
    untestable: str | None = None
    paired_by: str = "seed"


@dataclass
class Verdict:
    """A judged claim: ``status`` (see the module docstring), ``direction`` (each test's observed direction
    and size), the tests themselves, how many count for and against, the ``detail`` beside them and the
    ``regime`` BAPO ran in (empty when the claim is not about BAPO)."""
    claim: int | str
    text: str
    status: str
    direction: str
    tests: list
    n_for: int
    n_against: int
    detail: str = ""
    regime: str = ""
    paired_by: str = "seed"


def judge(claims: list[Claim], alpha: float = ALPHA) -> list[Verdict]:
    """Holm's correction across every test of ``claims`` (one family: a rung's claims), then each claim's
    status. The tests are copied, with ``p_holm`` filled in."""
    flat = [t for c in claims if not c.untestable for t in c.tests]
    adjusted = holm([t.p for t in flat])
    done = {id(t): replace(t, p_holm=p) for t, p in zip(flat, adjusted)}
    out = []
    for c in claims:
        tests = [done.get(id(t), t) for t in c.tests]
        outcomes = [t.outcome(alpha) for t in tests]
        n_for, n_against = outcomes.count("for"), outcomes.count("against")
        if c.untestable:
            status = f"not testable: {c.untestable}"
        elif not any(t.tested for t in tests):
            n = min((t.n for t in tests), default=0)
            status = f"not testable: n = {n} < {MIN_PAIRS} seeds per comparison" if tests else "not testable"
        elif n_against:
            status = "contradicted"
        elif any(t.strict for t in tests) and all(o == "for" for t, o in zip(tests, outcomes) if t.strict):
            status = "supported"
        elif any(o == "for" for t, o in zip(tests, outcomes) if t.strict):
            status = "partly supported"
        else:
            status = "inconclusive"
        direction = "; ".join(t.line() for t in tests) if not c.untestable else ""
        out.append(Verdict(c.claim, c.text, status, direction, tests, n_for, n_against, c.detail,
                           c.regime.describe() if c.regime is not None else "", c.paired_by))
    return out


def family_p_holm(verdicts: list[Verdict]) -> dict:
    """{test key: p_holm} of every keyed test in ``verdicts`` (one rung's Holm family), so that a table prints
    the same p_holm as the verdicts (:func:`toy_rl.experiments.compare.with_family_p`)."""
    return {t.key: t.p_holm for v in verdicts for t in v.tests if t.key is not None}


def across(statuses: list[str]) -> str:
    """One verdict from the verdicts of a robustness grid's cells (docs/protocol.md §7a): **supported** only if
    every cell supports it, **contradicted** only if every cell contradicts it, **not robust** when some cells are
    for it and others against it; otherwise the count of cells says how far it holds."""
    n = len(statuses)
    words = [s.split(":")[0] for s in statuses]
    ahead = sum(w in ("supported", "partly supported") for w in words)
    against = words.count("contradicted")
    if len(set(words)) == 1:
        return words[0]
    if ahead and against:
        return f"not robust: for it in {ahead} of {n} grid cells, contradicted in {against}"
    if against:
        return f"contradicted in {against} of {n} grid cells, inconclusive in the rest"
    if ahead:
        return f"partly supported: in {ahead} of {n} grid cells, inconclusive in the rest"
    return "inconclusive"


def one_grid_cell(verdicts: list[Verdict], cell: str) -> list[Verdict]:
    """The verdicts of a comparison run in one cell of its robustness grid only (docs/protocol.md §7a: a claim is
    supported only if every cell of the grid declared before running supports it). One cell can neither support nor
    contradict a claim across the grid, so "supported" reads "partly supported: in the one grid cell run (cell)"
    and "contradicted" reads "contradicted: in the one grid cell run (cell)", as :func:`across` counts cells; every
    other verdict is unchanged. ``cell``: which cell ran and which did not, in words."""
    out = []
    for v in verdicts:
        if v.status in ("supported", "contradicted"):
            word = "partly supported" if v.status == "supported" else "contradicted"
            v = replace(v, status=f"{word}: in the one grid cell run ({cell})")
        out.append(v)
    return out


def verdict_line(v: Verdict) -> str:
    """'claim n (text): STATUS — k for, j against, of m paired tests (Holm across the rung's claims):
    direction. regime. detail' — one line per claim, as notebooks and reports print them."""
    word, colon, why = v.status.partition(":")
    head = f"claim {v.claim} ({v.text}): {word.upper()}{colon}{why}"
    parts = []
    if v.tests and not v.status.startswith("not testable"):
        parts.append(f"{v.n_for} for, {v.n_against} against, of {len(v.tests)} tests paired by {v.paired_by} "
                     f"(Holm across the rung's claims, α = {ALPHA}): {v.direction}")
    elif v.direction:
        parts.append(v.direction)
    parts += [x for x in (v.regime, v.detail) if x]
    return head + (" — " + ". ".join(parts) if parts else "")
