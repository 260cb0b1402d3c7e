"""toy_rl.diagrams: each schematic is a small Figure with alt text, readable, checked inputs; BAPO's drawn search
lands where the library's does; each notebook embeds its diagram after a markdown cell carrying the alt text."""
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from toy_rl import diagrams
from toy_rl.clipping import BAPO

ROOT = Path(__file__).resolve().parents[1]
EMBEDDED = {"quadrants": "00_clipping", "bapo_search_path": "00_clipping", "reuse_timeline": "02_off_policy_bandit",
            "lag_timeline": "02_off_policy_bandit", "partial_rollout_timeline": "05_partial_rollout"}


def _texts(fig):
    """(text, font size, window extent) of every visible, non-empty text the figure draws, tick labels included."""
    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw(renderer)
    hidden = set()                         # tick labels of ticks outside the view: matplotlib does not draw them
    for ax in fig.get_axes():
        for axis in (ax.xaxis, ax.yaxis):
            lo, hi = sorted(axis.get_view_interval())
            for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                if not lo - 1e-9 <= tick.get_loc() <= hi + 1e-9:
                    hidden |= {id(tick.label1), id(tick.label2)}
    found = []
    for t in fig.findobj(lambda a: hasattr(a, "get_text") and hasattr(a, "get_fontsize")):
        if t.get_visible() and t.get_text().strip() and id(t) not in hidden:
            found.append((t.get_text(), t.get_fontsize(), t.get_window_extent(renderer)))
    return found, fig.bbox


SEARCH_SEEDS = (1, 3, 5)       # the example batch drawn with other seeds: the search stops elsewhere


@pytest.mark.parametrize("name", sorted(diagrams.ALT) + [f"bapo_search_path-{seed}" for seed in SEARCH_SEEDS])
def test_each_diagram_is_a_small_readable_figure_with_alt_text(name):
    name, _, seed = name.partition("-")
    fig = getattr(diagrams, name)(*(diagrams.example_batch(seed=int(seed)) if seed else ()))
    assert isinstance(fig, Figure) and fig.get_axes()
    assert tuple(fig.get_size_inches()) == pytest.approx(diagrams.SIZE)
    alt = diagrams.ALT[name]
    assert alt.endswith(".") and alt.count(". ") == 0 and 60 < len(alt) < 400      # one sentence
    texts, box = _texts(fig)
    for text, size, ext in texts:
        assert size >= 9, f"{text!r} at {size} pt"
        assert box.x0 - 1 <= ext.x0 and ext.x1 <= box.x1 + 1 and box.y0 - 1 <= ext.y0 and ext.y1 <= box.y1 + 1, \
            f"{text!r} runs off the figure"
    for i, (a, _, ea) in enumerate(texts):
        for b, _, eb in texts[i + 1:]:
            assert not ea.overlaps(eb), f"{a!r} overlaps {b!r}"


def test_alt_names_the_public_diagrams():
    assert set(diagrams.ALT) == {"reuse_timeline", "lag_timeline", "partial_rollout_timeline", "quadrants",
                                 "bapo_search_path"}


def test_diagrams_are_deterministic():
    def png(fig):
        canvas = FigureCanvasAgg(fig)
        canvas.draw()
        return np.asarray(canvas.buffer_rgba()).copy()
    assert np.array_equal(png(diagrams.bapo_search_path()), png(diagrams.bapo_search_path()))


@pytest.mark.parametrize("call, message", [
    (lambda: diagrams.reuse_timeline(-1), "staleness"),
    (lambda: diagrams.reuse_timeline(1.5), "staleness"),
    (lambda: diagrams.reuse_timeline(2, mode="ppo"), "mode"),
    (lambda: diagrams.lag_timeline(0), "lag"),
    (lambda: diagrams.partial_rollout_timeline(0), "budget"),
    (lambda: diagrams.partial_rollout_timeline(8, lengths=(40, 0)), "length"),
    (lambda: diagrams.quadrants(1.1, 1.2), "c_low"),
    (lambda: diagrams.bapo_search_path(np.ones(4), np.ones(5)), "same shape"),
    (lambda: diagrams.bapo_search_path(np.array([1.0, np.nan]), np.ones(2)), "NaN"),
    (lambda: diagrams.bapo_search_path(np.ones(2), np.array([1.0, np.inf])), "NaN"),
    (lambda: diagrams.bapo_search_path(np.array([1.0, -1.0]), np.ones(2)), "> 0"),
    (lambda: diagrams.bapo_search_path(np.ones(3)), "both"),
    (lambda: diagrams.bapo_search_path(np.ones(0), np.ones(0)), "empty"),
    (lambda: diagrams.bapo_search_path(rho0=1.5), "rho0"),
])
def test_bad_input_is_a_clear_value_error(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_defaults_are_bapos():
    rule = BAPO()
    assert (diagrams.RHO0, diagrams.LOW_RANGE, diagrams.HIGH_RANGE, diagrams.LOW_STEP, diagrams.HIGH_STEP) == \
        (rule.rho0, rule.low_range, rule.high_range, rule.low_step, rule.high_step)
    assert rule.order == "upper_first" and rule.count == "grad" and rule.balance == "share"
    flat = lambda pts: [x for pt in pts for x in pt]
    assert flat(diagrams._full_path()) == pytest.approx(flat(rule.path()))


@pytest.mark.parametrize("seed", range(6))
def test_the_drawn_search_ends_where_bapo_search_loop_does(seed):
    ratio, adv = diagrams.example_batch(seed=seed)
    path = diagrams.search_path(ratio, adv)
    r, a = torch.tensor(ratio), torch.tensor(adv)
    c_low, c_high, rho = BAPO().search_loop(r, a, torch.ones_like(r))
    assert path[-1] == pytest.approx((c_low, c_high, rho), abs=1e-9)
    assert len(path) - 1 == int(BAPO().search(r[None], a[None], torch.ones_like(r)[None])["stop"][0])


def test_the_example_batch_moves_both_bounds_and_reaches_the_target():
    c_low, c_high, rho = diagrams.search_path(*diagrams.example_batch())[-1]
    assert c_high == pytest.approx(3.0) and 0.6 < c_low < 0.9 and rho >= 0.4


def test_tensors_are_accepted_as_they_are():
    ratio, adv = diagrams.example_batch()
    as_tensors = diagrams.search_path(torch.tensor(ratio, dtype=torch.float32), torch.tensor(adv))
    assert as_tensors[-1][:2] == pytest.approx(diagrams.search_path(ratio, adv)[-1][:2])


@pytest.mark.parametrize("name", sorted(diagrams.ALT))
def test_each_notebook_draws_its_diagram_once_after_its_alt_text(name):
    nb = json.loads((ROOT / "notebooks" / f"{EMBEDDED[name]}.ipynb").read_text())
    cells = [("".join(c["source"]), c["cell_type"]) for c in nb["cells"]]
    at = [i for i, (src, kind) in enumerate(cells) if kind == "code" and f"import {name}" in src]
    assert len(at) == 1, f"{name} is drawn by {len(at)} cells"
    source, (before, kind) = cells[at[0]][0], cells[at[0] - 1]
    assert kind == "markdown" and diagrams.ALT[name] in " ".join(before.split())
    assert len(before.split()) <= 60
    assert not source.rstrip().endswith(";"), "the figure is the cell's value: a trailing ; would hide it"
