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


# --- what a default comparison can claim (the same two claims at rungs 1 and 2) ---------------------------

NAMES = {"symmetric": "symmetric", "clip-higher": "clip-higher", MEAN_BOUNDS: "fixed at BAPO's mean bounds",
         "fixed[0.6,1.2]": "fixed [0.6, 1.2]", "fixed[0.8,2.0]": "fixed [0.8, 2.0]"}
CLAIM5 = "under staleness BAPO > clip-higher ≥ symmetric (Fig. 11)"
CLAIM6 = "adaptive bounds beat the same bounds held fixed (control)"
CLAIM5_PAIRS = (("bapo", "clip-higher", ">"), ("bapo", "symmetric", ">"), ("clip-higher", "symmetric", ">="))
CLAIM6_PAIRS = (("bapo", MEAN_BOUNDS, ">"), ("bapo", "fixed[0.6,1.2]", ">"), ("bapo", "fixed[0.8,2.0]", ">"))


def control_claims(cells: dict, endpoints, regime=None, detail: str = "", scale: float = 1.0,
                   unit: str = "") -> list:
    """Claims 5 and 6 of a default comparison, before judgement (:func:`toy_rl.verdicts.judge` Holm-adjusts them
    together): every pair of :data:`CLAIM5_PAIRS` / :data:`CLAIM6_PAIRS`, on every endpoint and in every cell,
    a t-test paired by seed id.

    claim 5 (Fig. 11): BAPO > clip-higher and BAPO > symmetric, clip-higher ≥ symmetric;
    claim 6 (the protocol's control, not the paper's): BAPO's *adaptive* bounds beat fixed ones — BAPO > the
        fixed rule at its realised mean bounds, > its start [0.6, 1.2], > fixed [0.8, 2.0].

    Args:
        cells: {cell name ("" when there is one cell): {label: {seed: {endpoint: value}}}}.
        endpoints: the endpoint names tested, declared before the runs.
        regime: BAPO's :class:`~toy_rl.verdicts.Regime` in these runs; in a balanced one BAPO is named as the
            fixed rule it ran as.
    """
    from ..verdicts import Claim, paired
    names = {**NAMES, "bapo": regime.bapo() if regime is not None else "BAPO"}      # paired() reads None as NaN

    def tests(pairs):
        out = []
        for cell, scores in cells.items():
            for endpoint in endpoints:
                for a, b, expect in pairs:
                    if a not in scores or b not in scores:
                        continue
                    seeds = sorted(set(scores[a]) & set(scores[b]))
                    what = endpoint.replace("_", " ") + (f", {cell}" if cell else "")
                    out.append(paired(what, names[a], [scores[a][s][endpoint] for s in seeds], names[b],
                                      [scores[b][s][endpoint] for s in seeds], expect, scale=scale, unit=unit))
        return out

    def claim(number, text, pairs):
        found = tests(pairs)
        return Claim(number, text, found, detail, regime, None if found else "the rules were not run")
    return [claim(5, CLAIM5, CLAIM5_PAIRS), claim(6, CLAIM6, CLAIM6_PAIRS)]
