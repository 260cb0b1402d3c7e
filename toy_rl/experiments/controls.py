"""The rules of every rung's default comparison: the three rules and the controls of ``docs/protocol.md`` §3.

    symmetric [0.8, 1.2], clip-higher [0.8, 1.28], BAPO (§5.1 defaults),
    fixed [0.6, 1.2]        BAPO's starting point: is the search doing anything?
    BAPO a⁻ = 0.8           does the low start of c_low matter more than the adaptivity?
    fixed [0.8, 2.0]        a wide upper bound alone
    BAPO authors' code      ``BAPO.authors_code()`` (paper_vs_code.md, section 4)
    BAPO ρ0 = 0.5           sensitivity to the target (ρ0 = 0.4 is BAPO's default)
    fixed at BAPO's mean    adaptive bounds vs the same bounds held fixed: BAPO's realised mean
                            (c_low, c_high), known only once BAPO has run (label :data:`MEAN_BOUNDS`)
"""
from __future__ import annotations

from ..clipping import BAPO, ClipHigher, FixedBounds, Symmetric
from .compare import with_family_p  # noqa: F401  (a table's p_holm: on the comparisons' shared floor; importable here)

MEAN_BOUNDS = "fixed@bapo-mean"


def control_rules() -> dict:
    """{label: rule} of the default comparison; the fixed rule at BAPO's mean bounds is added once BAPO has run."""
    return {
        "symmetric": Symmetric(),
        "clip-higher": ClipHigher(),
        "bapo": BAPO(),
        "fixed[0.6,1.2]": FixedBounds(lo=0.6, hi=1.2),
        "bapo a-=0.8": BAPO(low_range=(0.8, 0.9)),
        "fixed[0.8,2.0]": FixedBounds(lo=0.8, hi=2.0),
        "bapo-authors": BAPO.authors_code(),
        "bapo rho0=0.5": BAPO(rho0=0.5),
    }


def mean_bounds_rule(c_low: float, c_high: float) -> FixedBounds:
    """The fixed rule at BAPO's realised mean bounds, widened to contain 1 (a ratio of 1 is never clipped)."""
    return FixedBounds(lo=min(round(c_low, 4), 1.0), hi=max(round(c_high, 4), 1.0))


# --- what a default comparison can claim (the same two claims at rungs 1 and 2) ---------------------------

NAMES = {"symmetric": "symmetric", "clip-higher": "clip-higher", MEAN_BOUNDS: "fixed at BAPO's mean bounds",
         "fixed[0.6,1.2]": "fixed [0.6, 1.2]", "fixed[0.8,2.0]": "fixed [0.8, 2.0]"}
CLAIM5 = "under staleness BAPO > clip-higher ≥ symmetric (Fig. 11)"
CLAIM6 = "adaptive bounds beat the same bounds held fixed (control)"
CLAIM5_PAIRS = (("bapo", "clip-higher", ">"), ("bapo", "symmetric", ">"), ("clip-higher", "symmetric", ">="))
CLAIM6_PAIRS = (("bapo", MEAN_BOUNDS, ">"), ("bapo", "fixed[0.6,1.2]", ">"), ("bapo", "fixed[0.8,2.0]", ">"))


MIN_EFFECT = 0.01     # the smallest difference worth reporting: 1 point of accuracy or of expected reward
VARY_SD = 0.1         # claim 6 is testable only where BAPO's c_high varies more than this over stale updates


def control_claims(cells: dict, endpoints, regime=None, detail: str = "", scale: float = 1.0,
                   unit: str = "", min_effect: float = MIN_EFFECT, c_high_sd: dict | None = None) -> list:
    """Claims 5 and 6 of a default comparison, before judgement (:func:`toy_rl.verdicts.judge` Holm-adjusts them
    together: the rung's one family): every pair of :data:`CLAIM5_PAIRS` / :data:`CLAIM6_PAIRS`, on every
    endpoint and in every cell, a t-test paired by seed id.

    claim 5 (Fig. 11): BAPO > clip-higher and BAPO > symmetric, clip-higher ≥ symmetric;
    claim 6 (the protocol's control, not the paper's): BAPO's *adaptive* bounds beat fixed ones — BAPO > the
        fixed rule at its realised mean bounds, > its start [0.6, 1.2], > fixed [0.8, 2.0]. Tested only in the
        cells where BAPO's bounds actually vary (``c_high_sd[cell]`` > :data:`VARY_SD`): where they sit at their
        caps, BAPO *is* a fixed rule and "adaptive vs held fixed" is a tie by construction, "not testable here".

    Args:
        cells: {cell name ("" when there is one cell): {label: {seed: {endpoint: value}}}}.
        endpoints: the endpoint names tested, declared before the runs (one primary endpoint per rung).
        regime: BAPO's :class:`~toy_rl.verdicts.Regime` in these runs; in a balanced one BAPO is named as the
            fixed rule it ran as.
        min_effect: the smallest difference worth reporting, in the endpoint's units (below it a significant
            result counts neither for nor against).
        c_high_sd: {cell: SD of BAPO's c_high over its stale updates}; None: not measured (claim 6 tested
            everywhere).
    Each test's ``key`` is (cell, endpoint, a label, b label): :func:`with_family_p` finds its p_holm by it.
    """
    from ..verdicts import Claim, paired
    names = {**NAMES, "bapo": regime.bapo() if regime is not None else "BAPO"}      # paired() reads None as NaN

    def tests(pairs, in_cells):
        out = []
        for cell in in_cells:
            scores = cells[cell]
            for endpoint in endpoints:
                for a, b, expect in pairs:
                    if a not in scores or b not in scores:
                        continue
                    seeds = sorted(set(scores[a]) & set(scores[b]))
                    what = endpoint.replace("_", " ") + (f", {cell}" if cell else "")
                    out.append(paired(what, names[a], [scores[a][s][endpoint] for s in seeds], names[b],
                                      [scores[b][s][endpoint] for s in seeds], expect, scale=scale, unit=unit,
                                      min_effect=min_effect, key=(cell, endpoint, a, b)))
        return out

    varying = [c for c in cells if c_high_sd is None or (c_high_sd.get(c) or 0.0) > VARY_SD]
    fixed = [c for c in cells if c not in varying]
    at_caps = ""
    if fixed:
        sds = ", ".join(f"{c or 'the cell'} {c_high_sd[c]:.2f}" for c in fixed)
        at_caps = (f"claim 6 not testable where BAPO's bounds barely vary (SD of c_high over stale updates ≤ "
                   f"{VARY_SD}: {sds}); there BAPO is a fixed rule")
    found5, found6 = tests(CLAIM5_PAIRS, list(cells)), tests(CLAIM6_PAIRS, varying)
    claim5 = Claim(5, CLAIM5, found5, detail, regime, None if found5 else "the rules were not run")
    untestable6 = None if found6 else ("BAPO's bounds barely varied in any cell" if fixed and not varying
                                       else "the rules were not run")
    claim6 = Claim(6, CLAIM6, found6, "; ".join(x for x in (at_caps, detail) if x), regime, untestable6)
    return [claim5, claim6]


def c_high_spread(c_high, active) -> float:
    """SD of BAPO's c_high over the updates where a bound could clip (``active``: stale, with advantage mass),
    over seeds and updates together; NaN without such an update. Claim 6's test of adaptivity needs it > VARY_SD."""
    import numpy as np
    values = np.asarray(c_high, dtype=float)[np.asarray(active, dtype=bool)]
    return float(values.std(ddof=1)) if values.size > 1 else float("nan")
