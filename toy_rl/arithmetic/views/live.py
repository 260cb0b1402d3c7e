"""Notebook 04 §13: a short run retrained with the sliders' rule (:mod:`toy_rl.arithmetic.live`), drawn beside the
logged three rules. :func:`live_view` draws one run; :func:`live_widget` is the sliders (c_low, c_high, ρ0, the
rule) with a Run button, so a drag does not queue a run per step of the slider.
"""
from __future__ import annotations


from ...plotting import colour_of, format_rows, label_panel
from ...stats import mean_ignoring_nan
from ...verdicts import RHO0
from ..live import LIVE_KINDS, Baseline, LiveResult, LiveRuns, matching_logged, max_gap
from ..measures import seed_stats
from .training import _grid, _panel

LIVE_PANELS = (("accuracy", "held-out accuracy (greedy)", 1), ("reward_mean", "sampled reward", 10),
               ("entropy", "entropy (nats / token)", 10), ("rho", "ρ: positive share of the loss", 10),
               ("bounds", "ratio bounds", 10), ("clip_frac", "clip fraction (low + high)", 10))
# The summary's columns: {column: toy_rl.arithmetic.measures.seed_stats key} (short names: the table fits a notebook).
LIVE_KEYS = {"accuracy": "final_accuracy", "reward": "mean_reward", "entropy": "final_entropy", "rho": "rho",
             "c_low": "c_low", "c_high": "c_high", "clip_low": "clip_frac_low", "clip_high": "clip_frac_high",
             "searched": "searched"}
LIVE_CLASS = "toy-rl-live-run"        # the widget's CSS class (tests/test_browser_widgets.py finds it by it)


def live_rows(result: LiveResult, baseline: Baseline, keys=LIVE_KEYS) -> dict:
    """{row: {column: number}}: each logged rule (mean over its seeds) and the live run ("your run"), over the
    same updates. Columns (``keys``, {column: seed_stats key}): accuracy after the last update, mean sampled
    reward, entropy over the last 10% of updates, means over updates of ρ, the bounds and the clip fractions,
    and the share of BAPO's updates whose search moved the bounds (nan for a fixed rule)."""
    rows = {}
    for rule, runs in baseline.runs.items():
        st = seed_stats(runs)
        rows[f"{rule} ({len(runs)} seeds)"] = {col: mean_ignoring_nan(st[k]) for col, k in keys.items()}
    st = seed_stats([result.records])
    rows["your run"] = {col: mean_ignoring_nan(st[k]) for col, k in keys.items()}
    return rows


def live_view(result: LiveResult, baseline: Baseline, panels=LIVE_PANELS):
    """The live run (black) over the logged three rules (mean and 95% band over their seeds), on the same updates
    and settings. Returns (figure, numbers): ``rows`` (:func:`live_rows`), ``label``, ``seconds`` (0: from the
    cache), ``final_accuracy``, and ``same_as``/``max_gap`` when the run equals a logged rule's seed 0."""
    fig, axes = _grid(len(panels), cols=3, height=3.0)
    rule = result.rule
    rho0 = getattr(rule, "rho0", RHO0)
    for ax, (metric, label, window) in zip(axes, panels):
        for i, (name, runs) in enumerate(baseline.runs.items()):
            _panel(ax, runs, metric, colour_of(name, i), name, window)
        _panel(ax, [result.records], metric, "black", f"your run: {result.label}", window)
        label_panel(ax, metric, label, "update", window, rho0 if metric == "rho" else None)
        if metric == "rho":
            ax.legend(fontsize=7)
    axes[0].legend(fontsize=7)
    seeds = min(len(v) for v in baseline.runs.values())
    where = "logged" if baseline.logged else "computed now"
    fig.suptitle(f"{baseline.scenario}, {baseline.updates} updates: your rule, {result.label} (seed 0), beside "
                 f"the three rules ({where}, 95% bands over {seeds} seeds)", fontsize=10)
    rows = live_rows(result, baseline)
    numbers = {"label": result.label, "seconds": round(result.seconds, 2), "rows": rows,
               "final_accuracy": rows["your run"]["accuracy"]}
    same = matching_logged(result, baseline)
    if same is not None:
        numbers.update(same_as=same, max_gap=max_gap(result.records, baseline.runs[same][0]))
    return fig, numbers


def live_summary(numbers: dict) -> str:
    """The text printed under the figure: what ran, how long it took, the table (:func:`live_rows`: accuracy after
    the last update, mean reward, final entropy, means of ρ, bounds and clip fractions, BAPO's searched share)."""
    took = "from the cache" if numbers["seconds"] == 0 else f"trained in {numbers['seconds']:.1f} s"
    lines = [f"your run: {numbers['label']}, {took}; held-out accuracy after the last update "
             f"{numbers['final_accuracy']:.3f}"]
    if "same_as" in numbers:
        lines.append(f"these are {numbers['same_as']}'s bounds: the same run as its logged seed 0 "
                     f"(largest difference, update by update: {numbers['max_gap']:.1e})")
    lines.append(format_rows(numbers["rows"], tuple(LIVE_KEYS)))
    return "\n".join(lines)


def live_widget(live: LiveRuns, kind: str = "bapo", c_low: float = 0.6, c_high: float = 1.2, rho0: float = 0.4,
                run_now: bool = True):
    """The sliders: rule (BAPO searching from [c_low, c_high], or fixed [c_low, c_high]), c_low, c_high, ρ0 and a
    Run button; each press trains :meth:`LiveRuns.run` (a few seconds; a rule run before comes from the cache) and
    redraws :func:`live_view` with :func:`live_summary` under it. ``run_now``: draw the starting rule at once
    (from the cache if it already ran). Returns the ipywidgets box (CSS class :data:`LIVE_CLASS`)."""
    import ipywidgets as w
    from IPython.display import display

    style = {"description_width": "60px"}
    rule = w.Dropdown(options=[("BAPO from [c_low, c_high]", "bapo"), ("fixed [c_low, c_high]", "fixed")],
                      value=kind, description="rule", style=style, layout=w.Layout(width="330px"))
    sliders = dict(
        c_low=w.FloatSlider(value=c_low, min=0.3, max=0.99, step=0.01, description="c_low", continuous_update=False,
                            style=style),
        c_high=w.FloatSlider(value=c_high, min=1.01, max=3.0, step=0.01, description="c_high",
                             continuous_update=False, style=style),
        rho0=w.FloatSlider(value=rho0, min=0.1, max=0.9, step=0.05, description="ρ0", continuous_update=False,
                           style=style, disabled=kind != "bapo"))
    button = w.Button(description="Run", button_style="primary", icon="play")
    status = w.Label(value="")
    out = w.Output()

    def on_rule(change):
        sliders["rho0"].disabled = change["new"] != "bapo"

    def draw(_=None):
        button.disabled, button.description = True, "Running…"
        status.value, done = "", []
        try:
            with out:                            # an error shows here, as its traceback (the Output widget's own)
                out.clear_output(wait=True)
                result = live.run(rule.value, sliders["c_low"].value, sliders["c_high"].value, sliders["rho0"].value)
                fig, numbers = live_view(result, live.baseline)
                display(fig)
                print(live_summary(numbers))
                done.append(result)
        finally:
            button.disabled, button.description = False, "Run"
        status.value = (f"{done[0].label}: {'from the cache' if done[0].cached else f'{done[0].seconds:.1f} s'}"
                        if done else "failed: see the output")

    rule.observe(on_rule, names="value")
    button.on_click(draw)
    controls = w.HBox([w.VBox([rule, sliders["rho0"]]), w.VBox([sliders["c_low"], sliders["c_high"]]),
                       w.VBox([button, status])])
    box = w.VBox([controls, out])
    box.add_class(LIVE_CLASS)
    if run_now:
        draw()
    return box


__all__ = ["LIVE_CLASS", "LIVE_KEYS", "LIVE_KINDS", "LIVE_PANELS", "live_rows", "live_summary", "live_view",
           "live_widget"]
