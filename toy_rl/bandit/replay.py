"""The batches a bandit run trained on, rebuilt, so that every reading of BAPO's ρ and every search can be
measured on the *same* batches (notebook 03).

    run = simulate(config, "symmetric", seeds, keep_logits=True)
    batches = replay_batches(run)                       # (updates·seeds, S·G) ratios and advantages
    readings = rho_readings(batches, 0.8, 1.2)          # ρ counted five ways, per batch
    landing = search_landing(batches, {"paper": BAPO(), "code": BAPO.authors_code()})

The readings (see :mod:`toy_rl.clipping.balance` and ``docs/paper_vs_code.md``): "grad"/"all" tokens counted,
as a share pos/(pos+neg) or as pos/neg, and Eq. 8 read literally, pos/|pos − neg|.

Multi-token answers (the negatives-dominate presets of :mod:`toy_rl.bandit.presets`, e.g. "long-failures") replay
too: every answer token becomes a column, with the mask marking the answer's own tokens (``Replayed.mask``), as the
clipped loss sees them (:func:`toy_rl.bandit.answers.answer_tokens`).
"""
from __future__ import annotations

import math
import warnings
from typing import NamedTuple

import numpy as np
import torch

from ..clipping.balance import balance_of, masses, neg_mass_at, pos_mass_at
from ..clipping.loss import LOG_RATIO_CLAMP
from ..threads import single_thread
from ..verdicts import Regime, regime_of
from .answers import answer_tokens
from .policy import log_probs
from .rewards import make_task
from .simulate import BanditRun, sample_batch

READINGS = ("grad share", "all share", "grad pos/neg", "all pos/neg", "Eq. 8 literal")
PAPER_TARGET_SHARE = 0.4      # ρ0 of the paper, as a share; the same target as pos/neg is 0.4/0.6


class Replayed(NamedTuple):
    """The batches a run trained on, one row per (update, seed): (steps·seeds, S·G·T) tensors, T tokens per answer
    (T = 1 for one-token answers; else the longest answer, position 0 the decision token)."""
    ratio: torch.Tensor     # r = π_θ/π_b of each token at the moment of its update (1 on padding)
    adv: torch.Tensor       # its answer's advantage (0 on padding)
    mask: torch.Tensor      # 1 on the answer's own tokens, 0 on padding (all ones for one-token answers)
    update: torch.Tensor    # (steps·seeds,) which update the row belongs to (0-based)


def replay_batches(run: BanditRun) -> Replayed:
    """Rebuild the batches of a run made with ``keep_logits=True``.

    Sampling is a pure function of (seed, rollout index) and the behaviour logits (see
    :mod:`toy_rl.bandit.rng`), so the batch of update t is
    ``sample_batch(task, behaviour_history[t], seeds, rollout, G, advantage)`` with rollout t // E in
    reuse mode and t in lag mode; its ratio uses the logits before update t.

    With multi-token answers (``config.max_len > 1``) the continuation logits are replayed the same way
    (``run.cont_behaviour_history`` samples the continuation, ``run.cont_history`` scores it) and each row holds
    every answer token, as the clipped loss sees them (BAPO Eq. 3 and Eq. 8 over the tokens of a batch; the
    token-mean weights are the mask): the ratios, the answer's advantage on each of its tokens and the mask.
    """
    if run.logits_history is None or run.behaviour_history is None:
        raise ValueError("replay_batches needs a run made with simulate(..., keep_logits=True)")
    c = run.config
    multi = c.max_len > 1
    if multi and (run.cont_history is None or run.cont_behaviour_history is None):
        raise ValueError("replay_batches needs the continuation logits of a multi-token run: simulate it with "
                         "keep_logits=True")
    E = c.updates_per_batch
    ratios, advs, masks = [], [], []
    with single_thread():
        task = make_task(c.preset, c.n_tokens, c.n_contexts, c.task_seed, c.torch_dtype)
        for t in range(c.steps):
            rollout = t // E if c.mode == "reuse" else t
            b = sample_batch(task, run.behaviour_history[t], run.seeds, rollout, c.group_size, c.advantage,
                             run.cont_behaviour_history[t] if multi else None, c.answer_len, c.length_ratio)
            logp = log_probs(run.logits_history[t]).gather(-1, b.tokens)
            logp, old, adv, mask = answer_tokens(logp, run.cont_history[t] if multi else None, b)
            keep = mask > 0                                                  # (seeds, S·G, T)
            ratio = torch.exp(torch.clamp(logp - old, -LOG_RATIO_CLAMP, LOG_RATIO_CLAMP))
            ratios.append(torch.where(keep, ratio, torch.ones_like(ratio)))
            advs.append(torch.where(keep, adv.reshape(*mask.shape[:2], 1).expand_as(mask), torch.zeros_like(mask)))
            masks.append(mask)
    n = len(run.seeds)
    flat = lambda parts: torch.stack(parts).reshape(c.steps * n, -1)
    update = torch.arange(c.steps).repeat_interleave(n)
    return Replayed(flat(ratios), flat(advs), flat(masks), update)


def _no_mass(batches: Replayed) -> torch.Tensor:
    """Rows with no advantage at all (every group all right or all wrong): nothing to balance."""
    return (batches.adv != 0).sum(1) == 0


def rho_readings(batches: Replayed, c_low: float, c_high: float) -> dict:
    """Every reading of ρ on the same batches at one fixed pair of bounds: {reading: (rows,) array}.

    "grad"/"all": which tokens count (see :mod:`toy_rl.clipping.balance`); "share" pos/(pos+neg),
    "pos/neg" pos/neg; "Eq. 8 literal": pos/|pos − neg| (the printed signed denominator, with the
    all-token masses). Rows with no advantage mass at all are NaN.
    """
    empty = _no_mass(batches)
    nan = lambda t: torch.where(empty, torch.nan, t).numpy()
    out = {}
    with single_thread():
        for count in ("grad", "all"):
            pos, neg = masses(batches.ratio, batches.adv, batches.mask, c_low, c_high, count)
            out[f"{count} share"] = nan(balance_of(pos, neg, "share"))
            out[f"{count} pos/neg"] = nan(balance_of(pos, neg, "pos_neg"))
        diff = (pos - neg).abs()                                      # the "all" masses
        out["Eq. 8 literal"] = nan(torch.where(diff > 0, pos / diff.clamp(min=1e-300),
                                               torch.full_like(pos, math.inf)))
    return out


def readings_table(readings: dict, target_share: float = PAPER_TARGET_SHARE) -> dict:
    """Summaries of :func:`rho_readings` over batches: median, the share of batches below the paper's
    target (ρ0 = 0.4 as a share, 0.667 as pos/neg, 0.4 read literally for Eq. 8), and how many batches
    count (those with advantage mass). {reading: dict(median, below_target, target, batches)}."""
    out = {}
    for name, v in readings.items():
        v = np.asarray(v, dtype=float)
        v = v[~np.isnan(v)]
        target = target_share / (1 - target_share) if "pos/neg" in name else target_share
        out[name] = dict(median=float(np.median(v)), below_target=float(np.mean(v < target)),
                         target=round(target, 3), batches=int(v.size))
    return out


def per_update_median(batches: Replayed, readings: dict) -> dict:
    """Each reading's median over the seeds' batches of every update: {reading: (updates,) array}
    (NaN for an update whose batches all lack advantage mass)."""
    upd = batches.update.numpy()
    T = int(upd.max()) + 1
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for name, v in readings.items():
            v = np.asarray(v, dtype=float)
            out[name] = np.array([np.nanmedian(v[upd == t]) for t in range(T)])
    return out


def rho_against_bound(batches: Replayed, which: str, values, other: float, count: str) -> np.ndarray:
    """ρ (share) on every batch as one bound moves: ``which`` "c_low" or "c_high" takes each of
    ``values`` (ascending) while the other bound stays at ``other``. Returns (rows, len(values)),
    NaN for rows with no advantage mass."""
    like = dict(dtype=batches.ratio.dtype)
    vals = torch.tensor(sorted(values), **like)
    with single_thread():
        if which == "c_low":
            neg = neg_mass_at(batches.ratio, batches.adv, batches.mask, vals, count)
            pos = pos_mass_at(batches.ratio, batches.adv, batches.mask, torch.tensor([other], **like),
                              count).expand_as(neg)
        elif which == "c_high":
            pos = pos_mass_at(batches.ratio, batches.adv, batches.mask, vals, count)
            neg = neg_mass_at(batches.ratio, batches.adv, batches.mask, torch.tensor([other], **like),
                              count).expand_as(pos)
        else:
            raise ValueError(f"which must be 'c_low' or 'c_high'; got {which!r}")
        rho = balance_of(pos, neg, "share")
    return torch.where(_no_mass(batches)[:, None], torch.nan, rho).numpy()


BOUND_GRIDS = {"c_low": np.round(np.arange(0.6, 0.9001, 0.02), 4), "c_high": np.round(np.arange(1.2, 3.0001, 0.05), 4)}


def rho_bound_curves(batches: Replayed, lows=None, highs=None, fixed_low: float = 0.6, fixed_high: float = 1.2,
                     rho0: float = 0.4) -> dict:
    """ρ against c_low (c_high at ``fixed_high``) and against c_high (c_low at ``fixed_low``), counting
    gradient-carrying tokens ("grad") and all tokens ("all"), as the mean over two subsets of batches: those
    where the gradient-carrying ρ starts below ``rho0`` at [fixed_low, fixed_high] (the ones BAPO()'s search
    acts on: "ρ below target") and every batch with advantage mass ("all batches").

    Returns {"grid": {"c_low": values, "c_high": values}, "batches": {subset: count},
    (which, count, subset): mean ρ curve} (a subset with no batch is left out)."""
    grid = {"c_low": BOUND_GRIDS["c_low"] if lows is None else np.asarray(lows),
            "c_high": BOUND_GRIDS["c_high"] if highs is None else np.asarray(highs)}
    start = rho_against_bound(batches, "c_low", [fixed_low], fixed_high, "grad")[:, 0]
    subsets = {"ρ below target": start < rho0, "all batches": np.isfinite(start)}
    out = {"grid": grid, "batches": {name: int(sel.sum()) for name, sel in subsets.items()}}
    for which, other in (("c_low", fixed_high), ("c_high", fixed_low)):
        for count in ("grad", "all"):
            rho = rho_against_bound(batches, which, grid[which], other, count)
            for subset, sel in subsets.items():
                if sel.any():
                    with np.errstate(invalid="ignore"):
                        out[which, count, subset] = np.nanmean(rho[sel], 0)
    return out


def search_landing(batches: Replayed, rules: dict) -> dict:
    """Where each BAPO variant's search lands on the same batches (rows with advantage mass only).

    Returns {name: dict(c_low, c_high (mean), rho_before, rho_after (mean share, pos/neg converted),
    reached (fraction of batches), moved (fraction where the search took a step), low_moved (fraction where
    c_low left a⁻), steps (mean), batches)}.
    """
    keep = (batches.adv != 0).any(1)
    r, a, m = batches.ratio[keep], batches.adv[keep], batches.mask[keep]
    out = {}
    with single_thread():
        for name, rule in rules.items():
            s = rule.search(r, a, m)
            rho_path = s["rho_path"]
            before = rho_path[:, 0]
            after = rho_path.gather(1, s["stop"][:, None])[:, 0]
            as_share = (lambda t: t / (1 + t)) if rule.balance == "pos_neg" else (lambda t: t)
            out[name] = dict(c_low=float(s["c_low"].mean()), c_high=float(s["c_high"].mean()),
                             rho_before=float(torch.nan_to_num(as_share(before), nan=1.0).mean()),
                             rho_after=float(torch.nan_to_num(as_share(after), nan=1.0).mean()),
                             reached=float((after >= rule.rho0).double().mean()),
                             moved=float((s["stop"] > 0).double().mean()),
                             low_moved=float((s["c_low"] > rule.low_range[0] + 1e-9).double().mean()),
                             steps=float(s["stop"].double().mean()), batches=int(keep.sum()))
    return out


def replay_regime(batches: Replayed, rule) -> Regime:
    """The regime (:func:`toy_rl.verdicts.regime_of`) a BAPO variant's search would run in on these batches: its
    ρ at the start [a⁻, a⁺] (Algorithm 1, line 1; its own reading of Eq. 8) against its ρ0, the test of the
    while loop, and how often the loop moved the bounds. As for a run's own updates, a row with no advantage mass
    has no ρ (left out of ``below``) and keeps the start bounds (counted in ``moved``'s denominator): on the
    batches of a run made with ``rule`` this is the regime of the run itself."""
    with single_thread():
        s = rule.search(batches.ratio, batches.adv, batches.mask)
    before = torch.where(_no_mass(batches), torch.nan, s["rho_path"][:, 0])
    return regime_of(before.numpy(), s["c_low"].numpy(), s["c_high"].numpy(), rule.rho0,
                     (rule.low_range[0], rule.high_range[0]))
