"""Save a model together with its config; load it back, refusing a checkpoint of another size.

A checkpoint is one ``torch.save`` file holding a dict:
``{"config": ModelConfig as a dict, "state_dict": ..., "meta": {...}}``
where ``meta`` is free-form plain values (the warm start stores its task, step and accuracy); the file
is written atomically and read with ``weights_only=True`` (:mod:`toy_rl.rl.run_folder`).
"""
from __future__ import annotations

from dataclasses import asdict, fields
from pathlib import Path

from ...rl.run_folder import load_state, save_state
from .device import resolve_device
from .gpt import GPT, ModelConfig


def save_checkpoint(model: GPT, path, meta: dict | None = None) -> Path:
    """Write ``model`` (weights + config + meta) to ``path`` atomically (a temp file, then rename);
    ``meta`` must hold plain values only (ValueError otherwise), as :func:`read_checkpoint` loads with
    ``weights_only=True``."""
    state = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    return save_state(path, {"config": asdict(model.config), "state_dict": state, "meta": meta or {}})


def read_checkpoint(path) -> dict:
    """The raw checkpoint dict, on the CPU. ValueError if the file is missing or not a checkpoint."""
    path = Path(path)
    if not path.exists():
        raise ValueError(f"no checkpoint at {path}")
    ckpt = load_state(path)             # weights_only; a damaged file is a ValueError naming it
    if not isinstance(ckpt, dict) or "config" not in ckpt or "state_dict" not in ckpt:
        raise ValueError(f"{path} is not a toy_rl checkpoint (expected keys 'config' and 'state_dict')")
    return ckpt


def read_meta(path) -> dict:
    """The free-form ``meta`` dict saved with a checkpoint (e.g. the warm start's accuracy)."""
    return read_checkpoint(path).get("meta", {})


def checkpoint_config(path) -> ModelConfig:
    known = {f.name for f in fields(ModelConfig)}
    return ModelConfig(**{k: v for k, v in read_checkpoint(path)["config"].items() if k in known})


def load_into(model: GPT, path) -> dict:
    """Load weights from ``path`` into an existing ``model``; returns the checkpoint's meta.

    ValueError if the checkpoint was made for a model of another shape, e.g.
    "checkpoint is for n_layer=2, d_model=64, ...; this model has n_layer=4, d_model=128, ...".
    """
    ckpt = read_checkpoint(path)
    saved = checkpoint_config(path)
    shape = ("vocab_size", "block_size", "n_layer", "n_head", "d_model")
    if any(getattr(saved, k) != getattr(model.config, k) for k in shape):
        def desc(c):
            return ", ".join(f"{k}={getattr(c, k)}" for k in shape)
        raise ValueError(f"checkpoint is for {desc(saved)}; this model has {desc(model.config)} ({path})")
    model.load_state_dict(ckpt["state_dict"])
    return ckpt.get("meta", {})


def load_checkpoint(path, device="auto") -> GPT:
    """Build the model the checkpoint describes, load its weights, move it to ``device`` (eval mode)."""
    model = GPT(checkpoint_config(path))
    model.meta = load_into(model, path)
    return model.to(resolve_device(device)).eval()
