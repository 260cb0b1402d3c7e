"""Input checks for :func:`toy_rl.clipping.policy_loss`: clear errors, never a silent wrong answer."""
from __future__ import annotations

import torch

AGGREGATIONS = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm")


def _need_tensor(name: str, x) -> None:
    if not isinstance(x, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor; got {type(x).__name__}")


def check_loss_inputs(logp, old_logp, advantages, mask, agg, dual_clip, runs: bool = False,
                      check_values: bool = True) -> torch.Tensor:
    """Validate shapes, dtypes and values; return advantages broadcast to logp's shape.

    ``runs=False``: tensors are (batch, tokens). ``runs=True``: (runs, batch, tokens),
    independent updates side by side (e.g. one per seed).

    All value checks (NaN/inf, mask 0/1 and not all zero) are gathered into one
    tensor and read with a single host–device transfer. ``check_values=False`` leaves them
    out (the caller reads :func:`value_flags` itself, e.g. together with other numbers).
    """
    for name, x in (("logp", logp), ("old_logp", old_logp), ("advantages", advantages), ("mask", mask)):
        _need_tensor(name, x)
    # The surrogate's gradient is A·∇r with r = π_θ/π_behaviour: only logp is differentiated. A
    # grad-requiring old_logp (e.g. policy_loss(h, h, ...)) makes r ≡ 1 in autograd's eyes and the
    # gradient silently wrong (exactly 0 for old_logp = logp); grad-requiring advantages leak into it.
    if old_logp.requires_grad:
        raise ValueError("old_logp requires grad; pass old_logp.detach() — the behaviour policy's log-probs are "
                         "constants (the ratio r = π_θ/π_behaviour is differentiated through logp only)")
    if advantages.requires_grad:
        raise ValueError("advantages require grad; pass advantages.detach() — advantages are constants of the "
                         "update (the surrogate's gradient is A·∇r)")
    layout = "(runs, batch, tokens)" if runs else "(batch, tokens)"
    if logp.dim() != (3 if runs else 2):
        hint = "" if runs else " (for several independent runs at once use policy_loss_runs)"
        raise ValueError(f"logp must be shaped {layout}; got shape {tuple(logp.shape)}{hint}")
    shape = logp.shape
    for name, x in (("old_logp", old_logp), ("mask", mask)):
        if x.shape != shape:
            raise ValueError(f"{name} has shape {tuple(x.shape)} but logp has {tuple(shape)}")
    for name, x in (("logp", logp), ("old_logp", old_logp), ("advantages", advantages)):
        if not x.is_floating_point():
            raise ValueError(f"{name} must be a floating-point tensor; got {x.dtype}")
    per_seq = shape[:-1]
    if advantages.shape in (per_seq, per_seq + (1,)):
        advantages = advantages.reshape(per_seq + (1,)).expand(shape)
    elif advantages.shape != shape:
        raise ValueError(f"advantages must be shaped {layout} = {tuple(shape)}, or one per sequence "
                         f"{tuple(per_seq)}; got {tuple(advantages.shape)}")
    devices = {x.device for x in (logp, old_logp, advantages, mask)}
    if len(devices) > 1:
        raise ValueError(f"logp, old_logp, advantages and mask must be on one device; got {sorted(map(str, devices))}")
    if agg not in AGGREGATIONS:
        raise ValueError(f"agg must be one of {AGGREGATIONS}; got {agg!r}")
    if dual_clip is not None and not (isinstance(dual_clip, (int, float)) and dual_clip > 1):
        raise ValueError(f"dual_clip must be None or a number > 1 (verl uses 3.0); got {dual_clip!r}")

    if check_values:
        raise_bad_values(value_flags(logp, old_logp, advantages, mask, runs).tolist(), runs)
    return advantages


VALUE_PROBLEMS = ("logp contains NaN or inf", "old_logp contains NaN or inf", "advantages contain NaN or inf",
                  "mask must hold only 0 and 1 (or booleans)", "mask is all zero")


def value_flags(logp, old_logp, advantages, mask, runs: bool = False) -> torch.Tensor:
    """One bool per entry of :data:`VALUE_PROBLEMS`, still on the device: True where the inputs have
    that problem ("mask is all zero": in at least one run, with ``runs``). Reading them is the
    single host–device transfer of the checks (:func:`raise_bad_values`)."""
    with torch.no_grad():
        m = mask.to(torch.float32)
        return torch.stack([
            ~torch.isfinite(logp).all(), ~torch.isfinite(old_logp).all(), ~torch.isfinite(advantages).all(),
            ~((m == 0) | (m == 1)).all(), (m.reshape(m.shape[0], -1).sum(1) == 0).any() if runs else m.sum() == 0,
        ])


def raise_bad_values(flags, runs: bool = False) -> None:
    """Raise ValueError for the first problem flagged (a sequence of bools, as :func:`value_flags` read on the host)."""
    for flag, msg in zip(flags, VALUE_PROBLEMS):
        if flag:
            if msg == VALUE_PROBLEMS[-1]:
                msg += (" in at least one run" if runs else "") + ": no token to train on"
            raise ValueError(msg)


def check_search_inputs(ratio, adv, mask, weights=None) -> None:
    """What :func:`check_loss_inputs` refuses, for a rule's bounds search on (runs, tokens) inputs (a replay, a
    stored batch): ValueError for NaN or inf ratios, advantages or weights, negative weights, a mask not 0/1, or
    a run whose mask is all zero (its ρ would read as "target reached" on no token at all)."""
    for name, x in (("ratio", ratio), ("advantages", adv), ("mask", mask)):
        _need_tensor(name, x)
    if ratio.shape != mask.shape or adv.shape != mask.shape:
        raise ValueError(f"ratio, advantages and mask must have one shape; got {tuple(ratio.shape)}, "
                         f"{tuple(adv.shape)}, {tuple(mask.shape)}")
    with torch.no_grad():
        m = mask.to(torch.float32)
        rows = m.reshape(m.shape[0], -1) if m.dim() > 1 else m.reshape(1, -1)
        no = torch.tensor(False)
        flags = torch.stack([~torch.isfinite(ratio).all(), ~torch.isfinite(adv).all(),
                             ~torch.isfinite(weights).all() if weights is not None else no,
                             (weights < 0).any() if weights is not None else no,
                             ~((m == 0) | (m == 1)).all(), (rows.sum(1) == 0).any()]).tolist()
    problems = ("ratio contains NaN or inf", "advantages contain NaN or inf", "weights contain NaN or inf",
                "weights must be >= 0 (a token's share of the loss)", "mask must hold only 0 and 1 (or booleans)",
                "mask is all zero in at least one run: no token to search on")
    for flag, msg in zip(flags, problems):
        if flag:
            raise ValueError(msg)
