"""Notebook 06's figures and slider callbacks (rung 3: LoRA RL on SmolLM2-135M): they only draw. Each function
builds its own ``matplotlib.figure.Figure`` and returns it with the numbers it drew (see :mod:`toy_rl.plotting`).

    runs    one run, the rules side by side at one staleness, one rule across stalenesses
    batch   a stored batch re-clipped at the slider's bounds
    logged_search  BAPO's search re-run on every logged batch for the sliders' ρ0 and ranges
                   (:mod:`toy_rl.lm.logged_search`)

The inputs are run summaries (:func:`toy_rl.experiments.run_summaries`) and stored batches; what the views draw
is computed in :mod:`toy_rl.lm.measures`, and the paper's claims are judged in :mod:`toy_rl.lm.verdicts`.
"""
from .batch import bounds_callback, bounds_view
from .logged_search import search_callback, search_view
from .runs import PANELS, STALENESS_STYLES, rules_callback, rules_view, run_figure, staleness_view

__all__ = ["bounds_callback", "bounds_view", "PANELS", "STALENESS_STYLES", "rules_callback", "rules_view",
           "run_figure", "search_callback", "search_view", "staleness_view"]
