"""The rung-1 notebooks' figures and slider callbacks: they only draw. Each function builds its own
``matplotlib.figure.Figure`` and returns it with the numbers it drew (see :mod:`toy_rl.plotting`).

    entropy_rule   notebook 01: one update token by token, the Entropy-Clip Rule on random instances, quadrants
    training       notebook 02: staleness against updates and samples, the rules side by side, the sliders
    comparison     notebook 02: the default comparison (three rules and the controls), paired differences
    balance        notebook 03: the readings of ρ on the same batches, ρ against the bounds, the bounds ablation

What they draw is computed in the library: :mod:`toy_rl.bandit.measures` (numbers read off runs),
:mod:`toy_rl.bandit.replay` (a run's batches rebuilt), :mod:`toy_rl.bandit.demos` (the sliders' instances and
short runs), :mod:`toy_rl.bandit.verdicts` (the paper's claims).
"""
from .balance import ablation_figure, readings_figure, rho_bound_figure
from .comparison import comparison_view, grid_view
from .entropy_rule import (QUADRANT_COLOURS, QUADRANT_LABELS, entropy_rule_scatter, error_vs_eta, explain_callback,
                           explain_view, quadrant_bars)
from .training import (ALL_RULE_METRICS, RULE_METRICS, RULE_PANELS, STALENESS_COLOURS, STALENESS_PANELS,
                       entropy_vs_reward, quick_callback, quick_compare, rule_bands, staleness_curves)

__all__ = ["ablation_figure", "comparison_view", "grid_view", "readings_figure", "rho_bound_figure", "QUADRANT_COLOURS", "QUADRANT_LABELS",
           "entropy_rule_scatter", "error_vs_eta", "explain_callback", "explain_view", "quadrant_bars",
           "ALL_RULE_METRICS", "RULE_METRICS", "RULE_PANELS", "STALENESS_COLOURS", "STALENESS_PANELS",
           "entropy_vs_reward", "quick_callback", "quick_compare", "rule_bands", "staleness_curves"]
