"""The rung-2 notebooks' figures and slider callbacks (04 arithmetic transformer, 05 partial rollout): they only
draw. Each function builds its own ``matplotlib.figure.Figure`` and returns it with the numbers it drew (see
:mod:`toy_rl.plotting`).

    training   the rules side by side, one rule across scenarios, partial rollout's staleness, answer lengths,
               accuracy at equal samples, the warm start, the Entropy-Clip Rule on the transformer
    comparison the default comparison: accuracy bands, BAPO's bounds, BAPO − rule with paired intervals
    batches    a stored stale batch through the clipping core at any bounds; answers coloured by token version
    live       a short run retrained with the sliders' rule, beside the logged three rules (sliders + Run button)

What they draw is computed in the library: :mod:`toy_rl.arithmetic.sweep` (load the runs, or run a smaller
sweep), :mod:`toy_rl.arithmetic.measures` (one number per seed and the tables), :mod:`toy_rl.arithmetic.demos`
(the sliders' live batches), :mod:`toy_rl.arithmetic.live` (the live runs), :mod:`toy_rl.arithmetic.verdicts`
(the paper's claims).
"""
from .batches import budget_callback, clip_callback, clip_view, version_map
from .comparison import comparison_view
from .live import live_summary, live_view, live_widget
from .training import (CLIP_PANELS, KEY_PANELS, PARTIAL_PANELS, RULE_PANELS, SCENARIO_PANELS, accuracy_vs_groups, entropy_check_view,
                       length_view, partial_curves, rule_bands, rules_callback, scenario_bands, warmstart_view)

__all__ = ["budget_callback", "clip_callback", "clip_view", "version_map", "comparison_view", "live_summary",
           "live_view", "live_widget", "CLIP_PANELS", "KEY_PANELS", "PARTIAL_PANELS", "RULE_PANELS",
           "SCENARIO_PANELS", "accuracy_vs_groups", "entropy_check_view", "length_view", "partial_curves",
           "rule_bands", "rules_callback", "scenario_bands", "warmstart_view"]
