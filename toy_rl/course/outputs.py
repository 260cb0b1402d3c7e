"""Executed notebooks made small and comparable: :func:`clean` what is kept, :func:`compare` two copies.

Kept: every cell's printed text (stdout), results and figures. Dropped: stderr (progress bars, warnings),
widget outputs (sliders and progress bars need a running kernel; their plain-text stand-ins say nothing a
reader can use) and per-cell timing metadata. Figures are re-encoded as 256-colour palette PNGs (about 3x
smaller). The comparison masks what changes from one execution to the next without the results changing:
durations ("0.8 s", "12 min") and memory addresses. Figures must have the same size and differ by at most
:data:`IMAGE_TOLERANCE` (RMS, 0-255 scale).

Cells tagged :data:`LIVE` compute from what the building machine trains, not from the committed logs (rung 2's
warm start, a short run from it): trained again on another machine, or on an empty cache, they give other
numbers. The comparison checks that such a cell still shows the same kinds of output (and no error), not
their values.
"""
from __future__ import annotations

import base64
import io
import re

import nbformat
import numpy as np
from PIL import Image

WIDGET = "application/vnd.jupyter.widget-view+json"
TEXTS = ("text/plain", "text/html", "text/markdown")
IMAGE_TOLERANCE = 2.0
LIVE = "course-live"

_DURATION = re.compile(r"\d+(?:[.,]\d+)*\s?(?:ms|s|sec|seconds|min|minutes|h)\b")
_ADDRESS = re.compile(r"0x[0-9a-fA-F]{6,}")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def palette_png(data: str) -> str:
    """A base64 PNG re-encoded with a 256-colour palette (matplotlib's figures lose nothing visible)."""
    image = Image.open(io.BytesIO(base64.b64decode(data))).convert("RGB").quantize(colors=256)
    buf = io.BytesIO()
    image.save(buf, format="PNG", optimize=True)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def clean(nb):
    """``nb`` (executed) with stderr, widget views and timings dropped and its figures palette-encoded."""
    nb = nbformat.from_dict(nb)
    nb.metadata.pop("widgets", None)
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
        if cell.cell_type != "code":
            continue
        kept = []
        for out in cell.outputs:
            if out.output_type == "stream" and out.name == "stderr":
                continue
            if "data" in out:
                if WIDGET in out.data:
                    continue
                if "image/png" in out.data:
                    out.data["image/png"] = palette_png(out.data["image/png"])
            kept.append(out)
        cell.outputs = kept
    return nb


def normalise(text: str) -> str:
    """Text with the parts that vary between identical executions masked (durations, addresses, colours)."""
    text = _ANSI.sub("", text)
    text = _DURATION.sub("<duration>", text)
    text = _ADDRESS.sub("<address>", text)
    return "\n".join(line.rstrip() for line in text.strip().splitlines())


def _items(cell) -> list[tuple[str, str]]:
    """(kind, content) of every output of a code cell, in order: texts normalised, images as base64. Consecutive
    prints are one item: an execution may deliver them as one stream or several."""
    raw = []
    for out in cell.outputs:
        if out.output_type == "stream":
            if raw and raw[-1][0] == "stdout":
                raw[-1] = ("stdout", raw[-1][1] + out.text)
            else:
                raw.append(("stdout", out.text))
        elif out.output_type == "error":
            raw.append(("error", f"{out.ename}: {out.evalue}"))
        else:
            for kind in TEXTS:
                if kind in out.data and not ("image/png" in out.data and kind == "text/plain"):
                    raw.append((kind, out.data[kind]))       # a figure's "<Figure size ...>" is the image
            if "image/png" in out.data:
                raw.append(("image/png", out.data["image/png"]))
    return [(kind, content if kind == "image/png" else normalise(content)) for kind, content in raw]


def image_rms(a: str, b: str) -> float:
    """RMS difference of two base64 PNGs on the 0-255 scale (inf if their sizes differ)."""
    x, y = (np.asarray(Image.open(io.BytesIO(base64.b64decode(d))).convert("RGB"), dtype=float) for d in (a, b))
    return float(np.sqrt(((x - y) ** 2).mean())) if x.shape == y.shape else float("inf")


NUMBER = re.compile(r"-?\d+\.\d+|-?\d+")


def same_to_last_digit(a: str, b: str) -> bool:
    """Whether two texts are the same but for numbers printed one unit apart in their last digit (``0.144`` and
    ``0.143``): what float summation in another order, on another CPU's vector units, moves across a rounding
    boundary. The words, the layout and each number's printed precision must match."""
    if NUMBER.sub("#", a) != NUMBER.sub("#", b):
        return False
    for x, y in zip(NUMBER.findall(a), NUMBER.findall(b)):
        decimals = len(x.partition(".")[2])
        if decimals != len(y.partition(".")[2]) or abs(float(x) - float(y)) > 1.5 * 10 ** -decimals:
            return False
    return True


def _first_difference(a: str, b: str) -> str:
    la, lb = a.splitlines(), b.splitlines()
    for i, (x, y) in enumerate(zip(la, lb)):
        if x != y:
            return f"line {i + 1}: committed {x[:160]!r}, now {y[:160]!r}"
    return f"committed {len(la)} lines, now {len(lb)}"


def compare(committed, fresh, tolerance: float = IMAGE_TOLERANCE) -> list[str]:
    """Differences between a committed executed notebook and a fresh execution (both cleaned), one line each:
    a cell whose source changed, an output that is missing, extra or different (text: beyond one unit in a
    number's last printed digit, :func:`same_to_last_digit`), a figure that moved (for a :data:`LIVE` cell: its
    kinds of output only)."""
    a = [c for c in committed.cells if c.cell_type == "code"]
    b = [c for c in fresh.cells if c.cell_type == "code"]
    if len(a) != len(b):
        return [f"{len(a)} code cells committed, {len(b)} now: the notebook changed since its copy was built"]
    found = []
    for i, (x, y) in enumerate(zip(a, b)):
        where = f"code cell {i + 1}"
        if x.source != y.source:
            found.append(f"{where}: its source changed since the copy was built")
            continue
        ia, ib = _items(x), _items(y)
        if [k for k, _ in ia] != [k for k, _ in ib]:
            found.append(f"{where}: outputs {[k for k, _ in ia]} committed, {[k for k, _ in ib]} now")
            continue
        if LIVE in x.metadata.get("tags", []) + y.metadata.get("tags", []):
            continue
        for (kind, u), (_, v) in zip(ia, ib):
            if kind == "image/png":
                rms = image_rms(u, v)
                if rms > tolerance:
                    found.append(f"{where}: a figure differs (RMS {rms:.2f} > {tolerance} on 0-255)")
            elif u != v and not (isinstance(u, str) and isinstance(v, str) and same_to_last_digit(u, v)):
                found.append(f"{where}: {kind} differs, {_first_difference(u, v)}")
    return found


# --- numbers the text states that no output shows ------------------------------------------------------------

_NUMBER = re.compile(r"(?<![\w.§])(\d+\.\d{2,}|\d+(?:\.\d+)?(?=\s?%))")     # 0.328, 12.5 %, 67%: not "3.1" or 2026
_SKIP = re.compile(r"\$[^$]*\$|`[^`]*`|\[[^\]]*\]\([^)]*\)|arXiv[^\s]*|\d{4}\.\d{4,5}")   # math, code, links, arXiv


def unbacked_numbers(nb) -> list[str]:
    """Numbers a markdown cell of the executed notebook ``nb`` states (decimals with two or more places, and
    percentages) that none of its outputs shows, as "markdown cell N: 0.452": where the text may contradict the
    outputs beside it (e.g. "stops at 50 %" next to a printed 0.328). Math, code spans, links and arXiv ids are
    skipped; a number is found if it appears in any output, in any form ("0.452" or "45.2 %" for 0.452)."""
    shown = " ".join(content for c in nb.cells if c.cell_type == "code" for kind, content in _items(c)
                     if kind != "image/png")
    found = []
    for i, cell in enumerate(c for c in nb.cells if c.cell_type == "markdown"):
        for number in _NUMBER.findall(_SKIP.sub(" ", cell.source)):
            value = float(number)
            forms = {number}
            if number.startswith("0."):                       # a share may print as a percentage ...
                forms |= {f"{100 * value:.{d}f}{sp}%" for d in (0, 1) for sp in ("", " ")}
            else:                                             # ... and a percentage as a share
                forms |= {f"{value / 100:.{d}f}" for d in (2, 3)}
            if not any(form in shown for form in forms):
                found.append(f"markdown cell {i + 1}: {number}")
    return found
