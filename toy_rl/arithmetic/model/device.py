"""Pick where the model runs: ``resolve_device("auto")`` is CUDA when available, else CPU."""
from __future__ import annotations

import torch


def resolve_device(device: str | torch.device | None = "auto") -> torch.device:
    """"auto" (or None) -> cuda if torch sees a GPU, else cpu; anything else is passed to torch.device."""
    if device is None or device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        return torch.device(device)
    except RuntimeError as err:
        raise ValueError(f"unknown device {device!r}: use 'auto', 'cpu' or 'cuda'") from err
