"""Strict JSON for whatever toy_rl writes or prints: NaN and inf as null ("not measured"), never as the bare
``NaN`` Python's json writes and other readers refuse. No torch import: the command line uses it at start-up."""
from __future__ import annotations

import json
import math
from pathlib import Path


def jsonable(x):
    """``x`` with NaN and inf as None, tuples as lists and paths as strings, so that it is strict JSON."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, Path):
        return str(x)
    if hasattr(x, "item") and getattr(x, "ndim", None) == 0:          # numpy / torch scalars
        return jsonable(x.item())
    return x


def dumps(x, **kw) -> str:
    """Strict JSON (``allow_nan=False``): NaN and inf become null first (see :func:`jsonable`)."""
    return json.dumps(jsonable(x), allow_nan=False, **kw)
