"""The pilot gate (docs/protocol.md, section 2): is BAPO's mechanism active here, before any comparison?

BAPO (arXiv 2510.18927, Alg. 1) only moves its bounds in an update whose
positive share ρ, measured at its starting bounds [a⁻, a⁺] = [0.6, 1.2], is
below ρ0 = 0.4. Where that rarely happens, "BAPO" is the fixed rule [0.6, 1.2]
and must be labelled so. A pilot runs the symmetric rule and BAPO briefly and
names the regime:

    negatives-dominate   ρ before the search (BAPO's ``rho_before``, its own ``count``
                         reading) < ρ0 in a majority of the updates where ρ is defined
                         (an update whose groups are all right or all wrong has no ρ)
    balanced             otherwise

:func:`pilot_summary` is a pure function of per-update records, so rungs 2–3 can
reuse it with their own logs; :func:`pilot` runs the bandit and calls it.

    from toy_rl.bandit.pilot import pilot
    from toy_rl.bandit.presets import PRESETS
    pilot(PRESETS["long-failures"])["regime"]        # 'negatives-dominate'
"""
from __future__ import annotations

import math
import time
from dataclasses import replace

import numpy as np

from ..clipping import BAPO, Symmetric
from .config import BanditConfig
from .simulate import START_BOUNDS, check_seeds, simulate

QUANTILES = (0.1, 0.5, 0.9)
PILOT_SEEDS = range(8)
PILOT_STEPS = 150
PILOT_STALENESS = 2       # on-policy r ≡ 1 and the gate would only restate 1/(1 + λ): pilot off-policy


def _quantiles(values) -> dict:
    v = np.asarray(values, float).ravel()
    v = v[np.isfinite(v)]
    if v.size == 0:
        return {f"q{round(100 * q)}": math.nan for q in QUANTILES}
    return {f"q{round(100 * q)}": float(np.quantile(v, q)) for q in QUANTILES}


def _mean(values) -> float:
    v = np.asarray(values, float).ravel()
    v = v[np.isfinite(v)]
    return float(v.mean()) if v.size else math.nan


def _halves(values) -> tuple:
    """Split (…, updates) along the last axis into its first and second half."""
    v = np.asarray(values, float)
    half = v.shape[-1] // 2
    return v[..., :half], v[..., half:]


def pilot_summary(rho_before, c_low, c_high, clip_frac_low, clip_frac_high, approx_kl, lambda_tokens=None,
                  rho_start_grad=None, rho_start_all=None, rho0: float = 0.4, start=START_BOUNDS) -> dict:
    """Summarise a BAPO pilot from plain per-update records (arrays (updates,) or (runs, updates)).

    Args:
        rho_before: ρ at the starting bounds as BAPO measured it (its own count reading); NaN where
            undefined (no advantage mass).
        c_low, c_high: the bounds BAPO used in each update.
        clip_frac_low, clip_frac_high, approx_kl: per update, as policy_loss reports them.
        lambda_tokens, rho_start_grad, rho_start_all: optional (see ``simulate.length_balance``).
        rho0: BAPO's target.  start: its starting bounds (a⁻, a⁺).

    Returns a dict: ``regime``; ``rho_below_target_frac`` (share of updates with a defined ρ whose
    ρ before the search is below ρ0) and ``rho_defined_frac``; ``rho_before`` quantiles of BAPO's own
    reading and, when given, ``rho_start`` {"grad": …, "all": …} quantiles at the start bounds;
    ``lambda`` (mean and quantiles); ``search_moved_frac`` (share of updates whose bounds left the
    start) with ``_early`` / ``_late`` halves; ``c_low_mean``, ``c_high_mean`` and their quantiles, and
    ``c_low_mean_defined`` / ``c_high_mean_defined`` over the updates with a defined ρ only (an update with
    no advantage mass keeps the start bounds, which then clip nothing);
    mean ``clip_frac_low``, ``clip_frac_high``, ``approx_kl``; ``updates``.
    """
    rho = np.asarray(rho_before, float)
    lo, hi = np.asarray(c_low, float), np.asarray(c_high, float)
    if not (rho.shape == lo.shape == hi.shape) or rho.size == 0:
        raise ValueError(f"rho_before, c_low and c_high must be non-empty and share one shape; got "
                         f"{rho.shape}, {lo.shape}, {hi.shape}")
    moved = ((np.abs(lo - start[0]) > 1e-9) | (np.abs(hi - start[1]) > 1e-9)).astype(float)
    defined = np.isfinite(rho)
    below = float((rho[defined] < rho0).mean()) if defined.any() else math.nan
    early, late = _halves(moved)
    out = dict(
        regime="negatives-dominate" if below > 0.5 else "balanced",
        rho0=rho0,
        rho_below_target_frac=below,
        rho_defined_frac=float(defined.mean()),
        rho_before=_quantiles(rho),
        search_moved_frac=float(moved.mean()),
        search_moved_frac_early=_mean(early),
        search_moved_frac_late=_mean(late),
        c_low_mean=_mean(lo), c_high_mean=_mean(hi),
        c_low_mean_defined=_mean(lo[defined]), c_high_mean_defined=_mean(hi[defined]),
        c_low_q=_quantiles(lo), c_high_q=_quantiles(hi),
        clip_frac_low=_mean(clip_frac_low), clip_frac_high=_mean(clip_frac_high), approx_kl=_mean(approx_kl),
        updates=int(rho.size),
    )
    if lambda_tokens is not None:
        out["lambda"] = dict(mean=_mean(lambda_tokens), **_quantiles(lambda_tokens))
    if rho_start_grad is not None and rho_start_all is not None:
        out["rho_start"] = dict(grad=_quantiles(rho_start_grad), all=_quantiles(rho_start_all))
    return out


def run_summary(run, rho0: float = 0.4, start=START_BOUNDS) -> dict:
    """:func:`pilot_summary` of a :class:`~toy_rl.bandit.simulate.BanditRun` (all seeds, all updates)."""
    m = run.metrics
    return pilot_summary(m["rho_before"], m["c_low"], m["c_high"], m["clip_frac_low"], m["clip_frac_high"],
                         m["approx_kl"], m["lambda_tokens"], m["rho_start_grad"], m["rho_start_all"], rho0, start)


def pilot(config: BanditConfig, seeds=PILOT_SEEDS, steps: int | None = PILOT_STEPS,
          staleness: int | None = PILOT_STALENESS, rule: BAPO | None = None) -> dict:
    """Run a short symmetric + BAPO pilot on ``config`` and name the regime (docs/protocol.md, section 2).

    Args:
        config: the configuration to gate, e.g. ``presets.PRESETS["long-failures"]``.
        seeds: pilot seeds (8 by default).
        steps: updates (default 150); None keeps ``config.steps``.
        staleness: default 2, the smallest staleness of the comparison (on-policy r ≡ 1 and ρ is just
            1/(1 + λ)); None keeps ``config.staleness``. The staleness kind is ``config.mode``.
        rule: the BAPO variant to gate (default ``BAPO()``, the paper's §5.1 settings).

    Returns BAPO's :func:`pilot_summary` plus ``symmetric`` (λ, ρ at the start bounds, clip fractions
    and KL of the symmetric run on the same seeds), ``config`` (what ran) and ``seconds``.
    """
    rule = rule or BAPO()
    if not isinstance(rule, BAPO):
        raise ValueError(f"rule must be a BAPO instance (the pilot gates BAPO's search); got {rule!r}")
    seeds = check_seeds(seeds)
    config = replace(config, **({} if steps is None else dict(steps=steps)),
                     **({} if staleness is None else dict(staleness=staleness)))
    t0 = time.perf_counter()
    bapo = simulate(config, rule, seeds)
    sym = simulate(config, Symmetric(), seeds)
    out = run_summary(bapo, rule.rho0, (rule.low_range[0], rule.high_range[0]))
    s = run_summary(sym)
    out["symmetric"] = {key: s[key] for key in ("lambda", "rho_start", "clip_frac_low", "clip_frac_high", "approx_kl")}
    out["config"] = config.to_dict()
    out["seeds"] = len(seeds)
    out["seconds"] = time.perf_counter() - t0
    return out
