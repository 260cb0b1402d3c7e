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

:func:`toy_rl.experiments.pilot.pilot_summary` (shared by every rung) summarises; :func:`pilot`
runs the bandit and calls it.

    from toy_rl.bandit.pilot import pilot
    from toy_rl.bandit.presets import PRESETS
    pilot(PRESETS["long-failures"])["regime"]        # 'negatives-dominate'
"""
from __future__ import annotations

import time
from dataclasses import replace

from ..clipping import BAPO, Symmetric
from ..experiments.pilot import pilot_summary
from .config import BanditConfig
from .simulate import START_BOUNDS, check_seeds, simulate

PILOT_SEEDS = range(8)
PILOT_STEPS = 150
PILOT_STALENESS = 2       # on-policy r ≡ 1 and the gate would only restate 1/(1 + λ): pilot off-policy


def run_summary(run, rho0: float = 0.4, start=START_BOUNDS) -> dict:
    """:func:`pilot_summary` of a :class:`~toy_rl.bandit.simulate.BanditRun` (all seeds, all updates)."""
    m = run.metrics
    return pilot_summary(m["rho_before"], m["c_low"], m["c_high"], m["clip_frac_low"], m["clip_frac_high"],
                         m["approx_kl"], m["lambda_mass"], m["rho_start_grad"], m["rho_start_all"], rho0, start)


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
