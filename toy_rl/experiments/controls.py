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
