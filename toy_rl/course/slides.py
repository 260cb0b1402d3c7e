"""Slides-ready figures for the instructor pack: ``toy-rl course slides [NN ...] [--out DIR]``.

Each notebook's key figure (the one ``toy-rl figures`` draws, :data:`toy_rl.report.figures.FIGURES`) and the
schematic diagrams the notebooks show (:mod:`toy_rl.diagrams`), redrawn by the same code as a 16:9 PNG
(13.33 x 7.5 inches, a PowerPoint/Keynote widescreen slide, at 1600 x 900 pixels) whose smallest text is
:data:`MIN_FONT` points, so it stays readable when projected. The long runs are read from the committed logs in
``results/`` alone (``TOY_RL_LOGGED_ONLY=1``, as the reading copies are executed): nothing trains, and a
developer's own ``runs/`` cannot leak in. Rung 1's figures (00-03, 07) are computed in seconds, rung 1's default
comparison (02) in about a minute.

Beside the PNGs, ``README.md``: every slide with its alt text (the figure's caption, or the diagram's
:data:`toy_rl.diagrams.ALT`), the notebook it belongs to, and the machine and command that made it.
"""
from __future__ import annotations

import io
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from matplotlib.figure import Figure
from matplotlib.text import Text
from PIL import Image

from .logs import ROOT

SLIDES = ROOT / "docs" / "instructor" / "slides"
SIZE = (40 / 3, 7.5)        # inches: a 16:9 widescreen slide (13.33 x 7.5)
DPI = 120                   # 1600 x 900 pixels
MIN_FONT = 14.0             # points: the smallest text on a slide


@dataclass(frozen=True)
class Slide:
    name: str               # the PNG's stem
    notebook: str           # "02_off_policy_bandit"
    title: str
    draw: Callable[[], tuple[Figure, str]]      # -> (figure, alt text)


def _key_figure(name: str) -> Callable[[], tuple[Figure, str]]:
    """The key figure ``name`` of :mod:`toy_rl.report.figures`, drawn from the committed logs."""
    def draw():
        from ..experiments.logged import LOGGED_ONLY, RUNS, TRAIN_ENV
        from ..report.figures import FIGURES
        from ..threads import single_thread
        from .execute import environment
        with environment(**{LOGGED_ONLY: "1", TRAIN_ENV: "never"}), single_thread():
            fig, parts = FIGURES[name].build(False, RUNS, False, None)
        return fig, parts["what"] + "."
    return draw


def _diagram(name: str, **kwargs) -> Callable[[], tuple[Figure, str]]:
    def draw():
        from .. import diagrams
        return getattr(diagrams, name)(**kwargs), diagrams.ALT[name]
    return draw


def _slides() -> list[Slide]:
    from ..report.figures import FIGURES
    key = [Slide(f"{spec.name}", spec.notebook, spec.title, _key_figure(spec.name)) for spec in FIGURES.values()]
    extra = [
        Slide("00-diagram-quadrants", "00_clipping", "The four quadrants of the clipped surrogate",
              _diagram("quadrants")),
        Slide("00-diagram-bapo-search", "00_clipping", "BAPO's search in the plane of the two bounds",
              _diagram("bapo_search_path")),
        Slide("02-diagram-reuse", "02_off_policy_bandit", "Staleness by reuse (two PPO epochs)",
              _diagram("reuse_timeline", staleness=2, mode="epochs")),
        Slide("02-diagram-lag", "02_off_policy_bandit", "Staleness by lag", _diagram("lag_timeline", lag=2)),
        Slide("05-diagram-partial", "05_partial_rollout", "Partial rollout: one answer, several policy versions",
              _diagram("partial_rollout_timeline", budget=8)),
    ]
    return sorted(key + extra, key=lambda s: (s.notebook, s.name != next(
        k.name for k in key if k.notebook == s.notebook), s.name))


def select(names=None) -> list[Slide]:
    """The slides of the notebooks named by number or name ("04", "04_arithmetic_transformer"); all by default."""
    slides = _slides()
    if not names:
        return slides
    chosen = [s for s in slides if any(s.notebook.startswith(n) or s.name == n for n in names)]
    unknown = [n for n in names if not any(s.notebook.startswith(n) or s.name == n for s in slides)]
    if unknown:
        raise ValueError(f"no slide for {', '.join(unknown)}; notebooks 00-07 or one of "
                         f"{', '.join(s.name for s in slides)}")
    return chosen


def for_slides(fig: Figure, size=SIZE, min_font: float = MIN_FONT) -> Figure:
    """Re-lay ``fig`` as a 16:9 slide: ``size`` inches, every text at least ``min_font`` points (titles, labels,
    ticks, legends, annotations), the layout recomputed. Returns the same figure."""
    fig.set_size_inches(*size)
    for text in fig.findobj(Text):
        if text.get_text() and text.get_fontsize() < min_font:
            text.set_fontsize(min_font)
    for ax in fig.axes:                       # tick labels not drawn yet take their size from the tick params
        ax.tick_params(labelsize=max(min_font, _tick_size(ax)))
    if fig.get_layout_engine() is None:
        fig.set_layout_engine("constrained")
    _wrap_titles(fig)
    _untangle_ticks(fig)
    return fig


def _wrap_titles(fig: Figure) -> None:
    """Break an axes title or x label wider than its axes into lines (at 14 pt, three panels' titles collide)."""
    width = fig.get_size_inches()[0]
    for ax in fig.axes:
        inches = ax.get_position().width * width
        for title in (ax.title, ax._left_title, ax._right_title, ax.xaxis.label):
            text = title.get_text()
            chars = max(12, int(inches * 72 / (0.55 * title.get_fontsize())))
            if text and any(len(line) > chars for line in text.split("\n")):
                title.set_text("\n".join(textwrap.fill(line, chars, break_long_words=False)
                                          for line in text.split("\n")))


def _drawn(fig: Figure):
    """Draw ``fig`` on an Agg canvas (a bare Figure has none) and return its renderer."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    canvas = fig.canvas if isinstance(fig.canvas, FigureCanvasAgg) else FigureCanvasAgg(fig)
    canvas.draw()
    return canvas.get_renderer()


def _untangle_ticks(fig: Figure) -> None:
    """Tilt the x tick labels of an axes where two of them overlap once drawn (symlog axes at 14 pt)."""
    renderer = _drawn(fig)
    for ax in fig.axes:
        boxes = sorted((t.get_window_extent(renderer) for t in ax.get_xticklabels() if t.get_text() and t.get_visible()),
                       key=lambda b: b.x0)
        if any(a.x1 > b.x0 for a, b in zip(boxes, boxes[1:])):
            for t in ax.get_xticklabels():
                t.set_rotation(35)
                t.set_horizontalalignment("right")
                t.set_rotation_mode("anchor")


def _tick_size(ax) -> float:
    ticks = ax.xaxis.get_major_ticks()[:1] + ax.yaxis.get_major_ticks()[:1]
    return max((t.label1.get_fontsize() for t in ticks), default=MIN_FONT)


def smallest_font(fig: Figure) -> float:
    """The smallest size (points) of any visible, non-empty text in ``fig`` once drawn."""
    _drawn(fig)
    sizes = [t.get_fontsize() for t in fig.findobj(Text) if t.get_text() and t.get_visible()]
    return min(sizes) if sizes else float("inf")


def slide_png(fig: Figure, dpi: int = DPI) -> bytes:
    """The slide as a palette PNG (256 colours: line plots and diagrams lose nothing visible)."""
    raw = io.BytesIO()
    fig.savefig(raw, format="png", dpi=dpi, facecolor="white")
    raw.seek(0)
    out = io.BytesIO()
    Image.open(raw).convert("RGB").quantize(colors=256).save(out, format="PNG", optimize=True)
    return out.getvalue()


def render_slides(names=None, out: Path | str = SLIDES) -> list[dict]:
    """Draw the selected slides into ``out`` (``<name>.png``) and rewrite ``out/README.md`` with every PNG there
    (alt text, notebook, size, how it was made). Returns one entry per slide drawn."""
    from ..report.machine import describe_machine, utc_now
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    entries = []
    for slide in select(names):
        t0 = time.perf_counter()
        fig, alt = slide.draw()
        png = slide_png(for_slides(fig))
        (out / f"{slide.name}.png").write_bytes(png)
        entries.append(dict(name=slide.name, notebook=slide.notebook, title=slide.title, file=f"{slide.name}.png",
                            alt=alt, bytes=len(png), seconds=round(time.perf_counter() - t0, 1),
                            made=f"{utc_now()} on {describe_machine()}",
                            command=f"toy-rl course slides {slide.notebook[:2]}"))
        _write_index(out, entries)          # after each slide: a failure later keeps what was drawn
    return entries


def _write_index(out: Path, entries: list[dict]) -> Path:
    """``out/README.md``: merge ``entries`` with what the index already lists (by file), in notebook order."""
    import json
    path = out / "slides.json"
    kept = json.loads(path.read_text()) if path.is_file() else {}
    kept.update({e["name"]: e for e in entries})
    order = {s.name: i for i, s in enumerate(_slides())}
    kept = {k: kept[k] for k in sorted(kept, key=lambda k: order.get(k, len(order))) if (out / kept[k]["file"]).is_file()}
    path.write_text(json.dumps(kept, indent=1, ensure_ascii=False) + "\n")
    total = sum(e["bytes"] for e in kept.values())
    lines = ["# Slides: each notebook's key figure and diagrams, 16:9", "",
             f"Made by `toy-rl course slides` (all) or `toy-rl course slides NN` (one notebook's): the figures of "
             f"`toy-rl figures` and `toy_rl.diagrams`, redrawn by the same code at 13.33 x 7.5 inches ({DPI} dpi: "
             f"1600 x 900 pixels) with no text under {MIN_FONT:g} pt. The long runs are read from the committed logs "
             "in `results/` (nothing trains). Each image's alt text follows it: paste it into the slide's alt-text "
             f"field. {len(kept)} PNGs, {total / 1e6:.2f} MB; `slides.json` holds the same entries.", ""]
    notebook = None
    for e in kept.values():
        if e["notebook"] != notebook:
            notebook = e["notebook"]
            lines += [f"## Notebook {notebook[:2]} · `notebooks/{notebook}.ipynb`", ""]
        lines += [f"### {e['title']} (`{e['file']}`)", "", f"![{e['title']}]({e['file']})", "",
                  f"**Alt text.** {e['alt']}", "",
                  f"*Made {e['made']} by `{e['command']}` in {e['seconds']:.0f} s, {e['bytes'] // 1000} KB.*", ""]
    (out / "README.md").write_text("\n".join(lines))
    return out / "README.md"
