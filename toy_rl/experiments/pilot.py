"""The pilot gate (docs/protocol.md, section 2), shared by every rung: is BAPO's mechanism active here?

BAPO (arXiv 2510.18927, Alg. 1) only moves its bounds in an update whose positive share ρ, measured
at its starting bounds [a⁻, a⁺] = [0.6, 1.2], is below ρ0 = 0.4. Where that rarely happens, "BAPO" is
the fixed rule [0.6, 1.2] and must be labelled so. A pilot runs the symmetric rule and BAPO briefly
and names the regime:

    negatives-dominate   ρ before the search (BAPO's ``rho_before``) < ρ0 in a majority of the
                         updates where ρ is defined (an update whose groups are all right or all
                         wrong has no ρ)
    balanced             otherwise

:func:`pilot_summary` works on per-update arrays (the bandit's metrics); :func:`summarise_records`
on the RL loop's per-update records (rungs 2-4, and rung 1 read back through the runner). The
rung-specific pilots (:func:`toy_rl.bandit.pilot.pilot`, :func:`toy_rl.arithmetic.pilot.pilot`,
:func:`pilot` for rungs 3-4) run the two rules and call them; ``toy-rl pilot --rung R --json``
prints the result.
"""
from __future__ import annotations

import math

import numpy as np

from ..rl.diagnostics import RHO0, START   # BAPO's target ρ0 and start bounds [a⁻, a⁺] (§5.1)
from ..verdicts import regime_name, regime_of


QUANTILES = (0.1, 0.5, 0.9)


def _quantiles(values) -> dict:
    v = np.asarray(values, float).ravel()
    v = v[np.isfinite(v)]
    if v.size == 0:
        return {f"q{round(100 * q)}": math.nan for q in QUANTILES}
    return {f"q{round(100 * q)}": float(np.quantile(v, q)) for q in QUANTILES}


def finite_mean(values) -> float:
    """Mean of the finite values (NaN and ±inf left out: an update with no positive mass has λ = inf); NaN if none."""
    v = np.asarray(values, float).ravel()
    v = v[np.isfinite(v)]
    return float(v.mean()) if v.size else math.nan


def _halves(values) -> tuple:
    """Split (…, updates) along the last axis into its first and second half."""
    v = np.asarray(values, float)
    half = v.shape[-1] // 2
    return v[..., :half], v[..., half:]


def pilot_summary(rho_before, c_low, c_high, clip_frac_low, clip_frac_high, approx_kl, lambda_mass=None,
                  rho_start_grad=None, rho_start_all=None, rho0: float = RHO0, start=START) -> dict:
    """Summarise a BAPO pilot from plain per-update records (arrays (updates,) or (runs, updates)).

    Args:
        rho_before: ρ at the starting bounds as BAPO measured it (its own count reading); NaN where
            undefined (no advantage mass).
        c_low, c_high: the bounds BAPO used in each update.
        clip_frac_low, clip_frac_high, approx_kl: per update, as policy_loss reports them.
        lambda_mass, rho_start_grad, rho_start_all: optional (as :func:`toy_rl.rl.diagnostics.balance_at_start` logs them).
        rho0: BAPO's target.  start: its starting bounds (a⁻, a⁺).

    Positions with NaN bounds are no update (a seed that made fewer updates than another, padded by
    :func:`records_array`, as under partial rollout): every share and ``updates`` count real updates only.

    Returns a dict: ``regime``; ``rho_below_target_frac`` (share of updates with a defined ρ whose
    ρ before the search is below ρ0) and ``rho_defined_frac``; ``rho_before`` quantiles of BAPO's own
    reading and, when given, ``rho_start`` {"grad": …, "all": …} quantiles at the start bounds;
    ``lambda`` (mean and quantiles); ``search_moved_frac`` (share of updates whose bounds left the
    start, Algorithm 1's search moved them) with ``_early`` / ``_late`` halves; ``c_low_mean``, ``c_high_mean`` and their quantiles, and
    ``c_low_mean_defined`` / ``c_high_mean_defined`` over the updates with a defined ρ only (an update with
    no advantage mass keeps the start bounds, which then clip nothing);
    mean ``clip_frac_low``, ``clip_frac_high``, ``approx_kl``; ``updates``.
    """
    rho = np.asarray(rho_before, float)
    lo, hi = np.asarray(c_low, float), np.asarray(c_high, float)
    if not (rho.shape == lo.shape == hi.shape) or rho.size == 0:
        raise ValueError(f"rho_before, c_low and c_high must be non-empty and share one shape; got "
                         f"{rho.shape}, {lo.shape}, {hi.shape}")
    update = np.isfinite(lo) & np.isfinite(hi)      # NaN bounds: a seed with fewer updates, padded (partial rollout)
    moved = np.where(update, (np.abs(lo - start[0]) > 1e-6) | (np.abs(hi - start[1]) > 1e-6), np.nan)  # float32 logs
    defined = np.isfinite(rho)
    below = float((rho[defined] < rho0).mean()) if defined.any() else math.nan
    early, late = _halves(moved)
    out = dict(
        regime=regime_name(below),
        rho0=rho0,
        rho_below_target_frac=below,
        rho_defined_frac=float(defined[update].mean()) if update.any() else math.nan,
        rho_before=_quantiles(rho),
        search_moved_frac=finite_mean(moved),
        search_moved_frac_early=finite_mean(early),
        search_moved_frac_late=finite_mean(late),
        c_low_mean=finite_mean(lo), c_high_mean=finite_mean(hi),
        c_low_mean_defined=finite_mean(lo[defined]), c_high_mean_defined=finite_mean(hi[defined]),
        c_low_q=_quantiles(lo), c_high_q=_quantiles(hi),
        clip_frac_low=finite_mean(clip_frac_low), clip_frac_high=finite_mean(clip_frac_high), approx_kl=finite_mean(approx_kl),
        updates=int(update.sum()),
    )
    if lambda_mass is not None:
        out["lambda"] = dict(mean=finite_mean(lambda_mass), **_quantiles(lambda_mass))
    if rho_start_grad is not None and rho_start_all is not None:
        out["rho_start"] = dict(grad=_quantiles(rho_start_grad), all=_quantiles(rho_start_all))
    return out


def _update_records(runs: list[list[dict]]) -> list[list[dict]]:
    """Each seed's records of updates that trained on a batch (evaluations-only and final records left out)."""
    return [[r for r in recs if not r.get("final") and r.get("c_low") is not None] for recs in runs]


def records_array(runs: list[list[dict]], key: str) -> np.ndarray:
    """(seeds, updates) array of one per-update metric; NaN where a record lacks it (or holds None) and
    where a seed logged fewer updates."""
    updates = _update_records(runs)
    table = np.full((len(updates), max((len(u) for u in updates), default=0)), np.nan)
    for i, recs in enumerate(updates):
        for j, r in enumerate(recs):
            v = r.get(key)
            table[i, j] = np.nan if v is None else float(v)
    return table


def records_regime(bapo_runs: list[list[dict]]):
    """BAPO's :class:`~toy_rl.verdicts.Regime` from its runs' records (ρ before the search, the bounds it used)."""
    return regime_of(*(records_array(bapo_runs, key) for key in ("rho_before", "c_low", "c_high")))


def summarise_records(bapo_runs: list[list[dict]], symmetric_runs: list[list[dict]] | None = None,
                      rho0: float = RHO0, start=START) -> dict:
    """:func:`pilot_summary` of a BAPO run's records (one list per seed, as the RL loop logs them), plus
    ``symmetric``: λ, ρ at the start bounds, clip fractions and KL of a symmetric run on the same seeds."""
    arr = lambda runs, key: records_array(runs, key)
    out = pilot_summary(arr(bapo_runs, "rho_before"), arr(bapo_runs, "c_low"), arr(bapo_runs, "c_high"),
                        arr(bapo_runs, "clip_frac_low"), arr(bapo_runs, "clip_frac_high"), arr(bapo_runs, "approx_kl"),
                        arr(bapo_runs, "lambda_mass"), arr(bapo_runs, "rho_start_grad"),
                        arr(bapo_runs, "rho_start_all"), rho0, start)
    if symmetric_runs:
        s = pilot_summary(arr(symmetric_runs, "rho_start_grad"), arr(symmetric_runs, "c_low"),
                          arr(symmetric_runs, "c_high"), arr(symmetric_runs, "clip_frac_low"),
                          arr(symmetric_runs, "clip_frac_high"), arr(symmetric_runs, "approx_kl"),
                          arr(symmetric_runs, "lambda_mass"), arr(symmetric_runs, "rho_start_grad"),
                          arr(symmetric_runs, "rho_start_all"), rho0, start)
        out["symmetric"] = {k: s[k] for k in ("lambda", "rho_start", "clip_frac_low", "clip_frac_high", "approx_kl")}
    return out

