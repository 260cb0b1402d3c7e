"""Small PNGs from matplotlib Figures: rendered at a modest dpi, then palette-quantized (256 colours),
which keeps line plots with shaded bands well under 100 KB without visible loss."""
from __future__ import annotations

import base64
import io

from matplotlib.figure import Figure
from PIL import Image

MAX_BYTES = 80_000
DPIS = (80, 70, 60)


def png_bytes(fig: Figure, max_bytes: int = MAX_BYTES, dpis=DPIS) -> bytes:
    """The figure as PNG bytes: the first dpi of ``dpis`` whose quantized image fits ``max_bytes``
    (the last one if none does)."""
    data = b""
    for dpi in dpis:
        raw = io.BytesIO()
        fig.savefig(raw, format="png", dpi=dpi, facecolor="white")
        raw.seek(0)
        out = io.BytesIO()
        Image.open(raw).convert("RGB").quantize(colors=256).save(out, format="PNG", optimize=True)
        data = out.getvalue()
        if len(data) <= max_bytes:
            break
    return data


def data_uri(png: bytes) -> str:
    """``data:image/png;base64,...`` for an <img> that needs no file beside the page."""
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")
