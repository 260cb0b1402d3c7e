"""``jupyter nbconvert --execute`` without the widget stall: nbconvert's executor with the runner's short polls.

nbclient waits for a cell's reply in one long poll, and after a cell that shows a widget that poll sometimes
misses the reply and sits out the whole cell timeout (jupyter/nbclient#312: measured here, notebook 00 went from
11 s to minutes). :class:`SlicedExecutePreprocessor` is nbconvert's ``ExecutePreprocessor`` reading the replies
in one-second slices, as :mod:`toy_rl.notebook_runner` does. ``scripts/setup.sh`` runs

    .venv/bin/python -m toy_rl.nbconvert_client

which writes ``.venv/etc/jupyter/jupyter_nbconvert_config.json``: the venv's nbconvert then uses it in place of
``ExecutePreprocessor`` (the ``--execute`` flag and every ``ExecutePreprocessor.*`` option apply to it as before).
Only this venv's jupyter reads that file.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from nbconvert.exporters import Exporter
from nbconvert.preprocessors import ExecutePreprocessor

from .notebook_runner import SlicedChannels

STOCK = "nbconvert.preprocessors.ExecutePreprocessor"
OURS = "toy_rl.nbconvert_client.SlicedExecutePreprocessor"


class SlicedExecutePreprocessor(SlicedChannels, ExecutePreprocessor):
    """nbconvert's ExecutePreprocessor with the kernel's replies read in short polls."""


def preprocessors() -> list:
    """nbconvert's default preprocessors with :class:`SlicedExecutePreprocessor` in place of the stock executor."""
    stock = list(Exporter.class_traits()["default_preprocessors"].default())
    if STOCK not in stock:
        raise RuntimeError(f"this nbconvert has no {STOCK} among its default preprocessors: {stock}")
    return [OURS if name == STOCK else name for name in stock]


def write_config(prefix=sys.prefix) -> Path:
    """Write ``<prefix>/etc/jupyter/jupyter_nbconvert_config.json`` (keeping any other settings it holds)."""
    path = Path(prefix) / "etc" / "jupyter" / "jupyter_nbconvert_config.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    config = json.loads(path.read_text()) if path.is_file() else {}
    config.setdefault("Exporter", {})["default_preprocessors"] = preprocessors()
    path.write_text(json.dumps(config, indent=1) + "\n")
    return path


if __name__ == "__main__":
    print(f"nbconvert --execute reads replies in short polls: {write_config()}")
