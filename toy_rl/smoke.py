"""Smoke mode without editing a notebook: ``TOY_RL_SMOKE=1`` in the environment switches every notebook to the
small configuration its parameters cell describes (``SMOKE = True``), e.g. for a headless check::

    TOY_RL_SMOKE=1 jupyter nbconvert --to notebook --execute --ExecutePreprocessor.timeout=600 \\
        --output-dir /tmp/executed notebooks/02_off_policy_bandit.ipynb

Each notebook's setup cell calls :func:`smoke_requested` right after its parameters cell.
"""
from __future__ import annotations

import os

ENV = "TOY_RL_SMOKE"
ON, OFF = ("1", "true", "yes", "on"), ("", "0", "false", "no", "off")


def smoke_requested(smoke: bool = False) -> bool:
    """``smoke`` (the parameters cell's SMOKE), or True when ``TOY_RL_SMOKE`` is set to 1 (true, yes, on).
    Any other value is a ValueError that names the variable, rather than a silent full run."""
    value = os.environ.get(ENV, "").strip().lower()
    if value in OFF:
        return bool(smoke)
    if value in ON:
        return True
    raise ValueError(f"{ENV} must be 1 (smoke mode) or 0; got {os.environ[ENV]!r}")
