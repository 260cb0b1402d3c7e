"""BAPO's search (Algorithm 1, :class:`toy_rl.clipping.BAPO`) re-run on the batches rung-3 runs logged: what it
would pick on each real LoRA update for any ρ0 and any ranges (notebook 06 §6b's search sliders).

    from toy_rl.lm.logged_search import logged_batches, search_batches, search_summary
    batches = logged_batches({"bapo k=4": "runs/smollm2-135m-add/reuse-4/bapo/seed0"})
    table = search_batches(batches, rho0=0.5, low_range=(0.6, 0.9), high_range=(1.2, 3.0))
    search_summary(table)      # how often ρ started below ρ0, the search moved, reached ρ0, ran to its end

A run's ``batches.pt`` (:func:`toy_rl.lm.run.train`, read here with ``weights_only=True``) keeps, per update, the
log-probs its loss saw, the behaviour log-probs, the advantages and the mask: all the search needs (the ratios
r = exp(logp − old_logp), the signs of A, the token weights of the run's aggregation). No model forward: the
updates are searched side by side, one vectorised call per batch shape. Measured on the 2-core CPU: the 120 logged
updates of runs/smollm2-135m-add/reuse-4 (three runs, 64 answers of up to 5 tokens) plus 8 of 64 x 128 tokens
(add-cot) in ~30 ms (~250 ms for the first call in a process); the figure takes most of a slider's redraw (~0.6 s).
What it shows is the bounds BAPO would choose *for that batch*; the run itself went on with the bounds its own
rule chose, so later batches are not what a run with these settings would have seen.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch

from ..clipping import BAPO, token_ratio, token_weights
from ..rl.logbook import check_stored_batches
from ..rl.run_folder import load_state

BATCHES = "batches.pt"


class LoggedBatch(NamedTuple):
    run: str          # a label for the run it came from
    step: int         # the update it fed
    batch: dict       # logp, old_logp, advantages, mask, c_low, c_high (the bounds the run's rule used), agg


def load_batches(out_dir) -> dict:
    """Every stored batch of one run: {step: batch}, read with ``weights_only=True`` and checked
    (:func:`toy_rl.rl.logbook.check_stored_batches`: a malformed file is one ValueError naming it and the update);
    {} without ``batches.pt``."""
    path = Path(out_dir) / BATCHES
    return check_stored_batches(load_state(path), path) if path.is_file() else {}


def logged_batches(runs) -> list[LoggedBatch]:
    """The stored batches of several runs, ``runs`` {label: run folder} (or a list of folders, labelled by their
    last three parts, e.g. "reuse-4/bapo/seed0"), in run then step order; runs without batches are left out."""
    if not isinstance(runs, dict):
        runs = {"/".join(Path(p).parts[-3:]): p for p in runs}
    out = []
    for label, folder in runs.items():
        stored = load_batches(folder)
        out += [LoggedBatch(label, int(step), stored[step]) for step in sorted(stored)]
    return out


def _tokens(lb: LoggedBatch):
    """(ratio, adv, weights) of one update, flattened to (tokens,)."""
    b = lb.batch
    mask = b["mask"].float()
    ratio = token_ratio(b["logp"].float(), b["old_logp"].float())
    adv = b["advantages"].float()
    adv = adv.reshape(mask.shape[0], -1).expand_as(mask) if adv.dim() < 2 or adv.shape[1] == 1 else adv
    w = token_weights(mask, b.get("agg", "token-mean"))
    return ratio.reshape(-1), adv.reshape(-1), w.reshape(-1)


def _search(rule: BAPO, batches: list[LoggedBatch]) -> dict:
    """{rho_path (updates, points), stop, c_low, c_high (updates,)}: one :meth:`BAPO.search` per shape of batch
    (updates of the same size side by side, as (updates, tokens); no padding, so a long-answer run does not slow a
    short one)."""
    flat = [_tokens(lb) for lb in batches]
    out = dict(rho_path=np.zeros((len(flat), rule.path_size())), stop=np.zeros(len(flat), dtype=np.int64),
               c_low=np.zeros(len(flat)), c_high=np.zeros(len(flat)))
    for n in sorted({f[0].numel() for f in flat}):
        idx = [i for i, f in enumerate(flat) if f[0].numel() == n]
        ratio, adv, w = (torch.stack([flat[i][k] for i in idx]) for k in range(3))
        s = rule.search(ratio, adv, (w > 0).float(), weights=w)
        for key in out:
            out[key][idx] = s[key].numpy()
    return out


def search_batches(batches: list[LoggedBatch], rho0: float = 0.4, low_range=(0.6, 0.9), high_range=(1.2, 3.0),
                   **bapo) -> dict:
    """Algorithm 1 on every logged batch with ``BAPO(rho0, low_range, high_range, **bapo)``, in one call of
    :meth:`BAPO.search` per batch shape (token weights: each batch's aggregation, as
    :func:`toy_rl.clipping.policy_loss` measures them; its bounds and ρ are policy_loss's, to the last bit).
    Returns numpy arrays, one entry per update: ``run``, ``step``, ``rho_before`` (ρ at the start bounds
    [a⁻, a⁺]), ``c_low``, ``c_high``, ``rho`` (at the bounds chosen), ``steps`` (search steps taken), ``moved``
    (steps > 0), ``reached`` (ρ ≥ ρ0), ``at_end`` (stopped at the path's last point without reaching ρ0),
    ``logged_c_low``, ``logged_c_high`` (what the run's own rule used); also ``path_low``, ``path_high``,
    ``rho_path`` (updates, points), ``rule`` and ``updates``."""
    rule = BAPO(rho0=rho0, low_range=tuple(low_range), high_range=tuple(high_range), **bapo)
    if not batches:
        raise ValueError("no logged batches to search (run with the keep_batches option on)")
    found = _search(rule, batches)
    rho_path, stop = found["rho_path"], found["stop"]
    path_low, path_high = (np.array(v) for v in zip(*rule.path()))
    rho = rho_path[np.arange(len(stop)), stop]
    reached = rho >= rule.rho0
    last = rho_path.shape[1] - 1
    return dict(run=np.array([b.run for b in batches]), step=np.array([b.step for b in batches]),
                rho_before=rho_path[:, 0], c_low=found["c_low"], c_high=found["c_high"], rho=rho,
                steps=stop, moved=stop > 0, reached=reached, at_end=(stop == last) & ~reached,
                logged_c_low=np.array([float(b.batch["c_low"]) for b in batches]),
                logged_c_high=np.array([float(b.batch["c_high"]) for b in batches]),
                path_low=path_low, path_high=path_high, rho_path=rho_path, rule=rule,
                updates=len(batches))


def search_summary(table: dict) -> dict:
    """The search over every update in a few numbers: ``updates``; ``below`` (share whose ρ at the start was below
    ρ0: the search had work), ``moved``, ``reached`` (share ending with ρ ≥ ρ0), ``reached_when_needed`` (of those
    below, the share that reached it), ``at_end`` (share that ran to the path's end without reaching ρ0); the
    medians of ρ before and after; the mean chosen ``c_low``, ``c_high``; ``rho0``."""
    rule = table["rule"]
    below = table["rho_before"] < rule.rho0
    share = lambda a: float(np.mean(a)) if a.size else math.nan
    return dict(updates=int(table["updates"]), rho0=rule.rho0, below=share(below), moved=share(table["moved"]),
                reached=share(table["reached"]), reached_when_needed=share(table["reached"][below]),
                at_end=share(table["at_end"]), rho_before_median=float(np.median(table["rho_before"])),
                rho_after_median=float(np.median(table["rho"])), c_low=float(np.mean(table["c_low"])),
                c_high=float(np.mean(table["c_high"])))


__all__ = ["BATCHES", "LoggedBatch", "load_batches", "logged_batches", "search_batches", "search_summary"]
