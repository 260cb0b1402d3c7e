"""Where and when something was computed, in one line each (for captions and report headers)."""
from __future__ import annotations

import datetime as _dt
import os
import platform

import torch


def describe_machine() -> str:
    """CPU cores, OS, Python and torch versions, torch threads, GPU if any, and the load average
    (a shared machine makes every time measured on it pessimistic; the load says how shared)."""
    parts = [f"{os.cpu_count()} CPU cores ({platform.machine()})", platform.system(),
             f"Python {platform.python_version()}", f"torch {torch.__version__} on {torch.get_num_threads()} thread(s)"]
    if torch.cuda.is_available():
        parts.append(f"GPU {torch.cuda.get_device_name(0)}")
    else:
        parts.append("no GPU")
    if hasattr(os, "getloadavg"):
        parts.append("load average " + "/".join(f"{x:.1f}" for x in os.getloadavg()))
    return ", ".join(parts)


def utc_now() -> str:
    """The current time, e.g. '2026-11-30 08:15 UTC'."""
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
