"""The pilot gate on rungs 3-4 (docs/protocol.md, section 2): a short symmetric + BAPO LoRA run, then the regime.

    from toy_rl.lm.pilot import pilot
    p = pilot(task="add", staleness=2, steps=8, seeds=(0,))
    p["regime"], p["lambda"], p["search_moved_frac"]

Both rules run through the one runner (:mod:`toy_rl.experiments`, the same folders, resumable) and
:func:`toy_rl.experiments.pilot.summarise_records` names the regime from BAPO's per-update records.
"""
from __future__ import annotations

import time

from ..clipping import BAPO, Symmetric
from ..experiments import grid, sweep
from ..experiments.pilot import summarise_records
from ..rl.config import rule_label

PILOT_STEPS = 8
PILOT_STALENESS = 2


def pilot(task="add", staleness: int = PILOT_STALENESS, steps: int = PILOT_STEPS, seeds=(0,), mode: str = "reuse",
          out="runs/pilot", smoke: bool = False, progress: bool = False, **settings) -> dict:
    """Run symmetric and BAPO for ``steps`` updates at ``staleness`` on rung 3 (SmolLM2-135M with LoRA by
    default; ``settings`` as :func:`toy_rl.experiments.make_spec` takes them, e.g. ``preset``, ``model``,
    ``max_new_tokens``, ``temperature``) and summarise BAPO's records. Returns the summary plus
    ``seconds``, ``steps``, ``seeds``, ``staleness``, ``mode`` and ``task``."""
    t0 = time.perf_counter()
    bapo, sym = BAPO(), Symmetric()
    specs = grid("lm", task, rules=(sym, bapo), stalenesses=(staleness,), seeds=seeds, mode=mode, steps=steps,
                 out=out, smoke=smoke, progress=progress, **settings)
    results = sweep(specs)
    by_rule = {rule: runs for (_, rule), runs in results.items()}
    out_summary = summarise_records(by_rule[rule_label(bapo)], by_rule[rule_label(sym)], bapo.rho0,
                                    (bapo.low_range[0], bapo.high_range[0]))
    out_summary.update(seconds=time.perf_counter() - t0, steps=specs[0].rl.steps, seeds=list(seeds),
                       staleness=staleness, mode=mode, task=str(task))
    return out_summary
