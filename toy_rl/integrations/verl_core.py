"""The verl plug-in's computation, in torch alone (no verl import): bounds searched over data-parallel
ranks, the clipped loss per token, verl's metrics.

:mod:`toy_rl.integrations.verl` registers the loss modes and hands verl's ``agg_loss`` in as
``agg_fn``; everything else is here, so it can be tested (and spawned into gloo processes) without
verl's heavy import.

**One update, many ranks.** verl calls the policy loss once per micro-batch on every data-parallel
rank, each rank holding its own share of the batch. BAPO's search (Algorithm 1) needs the positive
and negative masses of the whole batch (Eq. 8). Those masses are sums over tokens, so

1. each rank computes the masses at *every* candidate bound of the search path on its own tokens
   (:meth:`BAPO.candidate_masses`, one pass over the tokens);
2. one ``all_reduce(SUM)`` over the data-parallel group adds them up (the input checks and the token
   count travel in the same vector);
3. every rank then runs the same stop rule on the same totals (:meth:`BAPO.select`) and so picks the
   bounds of the concatenated batch — as the authors' code does (it all-reduces its masses over the
   data-parallel ranks; docs/paper_vs_code.md §3).

No host–device synchronisation happens before the loss is built; the metrics (and the input checks)
are read in one transfer at the end.

Exact ties (ρ landing exactly on ρ0) can fall either way with another split over ranks: the sum of per-rank
sums is not the sum of the concatenation, bit for bit.
"""
from __future__ import annotations

import sys
from typing import Callable

import torch
import torch.distributed as dist

from toy_rl.clipping.bapo import BAPO
from toy_rl.clipping.checks import VALUE_PROBLEMS, check_loss_inputs, value_flags
from toy_rl.clipping.loss import _rule_bounds, clamped_log_ratio, clipped_mask, token_surrogate, token_weights

VERL_AGGREGATIONS = ("token-mean", "token-sum", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm")

# verl's aggregation modes -> toy_rl's aggregation whose token weights they share (BAPO measures its
# masses with them, :func:`toy_rl.clipping.loss.token_weights`): every verl mode weighs each token the
# same except seq-mean-token-mean, where a token weighs 1/len(its sequence).
MASS_WEIGHTS = {mode: ("seq-mean-token-mean" if mode == "seq-mean-token-mean" else "token-mean")
                for mode in VERL_AGGREGATIONS}

_AUTO = object()
_group = _AUTO


def set_data_parallel_group(group=_AUTO) -> None:
    """Sum BAPO's masses over ``group`` (a ``torch.distributed`` process group, or None for the default
    WORLD group); call without an argument to go back to the automatic choice
    (:func:`data_parallel_group`)."""
    global _group
    _group = group


def data_parallel_group():
    """The group BAPO's masses are summed over, or None when there is nothing to sum over.

    Not distributed (``torch.distributed`` not initialised): None. Set with
    :func:`set_data_parallel_group`: that group. Otherwise Megatron's data-parallel group when
    Megatron's parallel state is initialised (the group verl's Megatron engine counts its global tokens
    over; with pipeline parallelism only the last stage computes the loss, so WORLD would hang), else
    WORLD (verl's FSDP engine: its data-parallel group is WORLD without Ulysses; with Ulysses sequence
    parallelism each sequence-parallel rank holds the same gathered micro-batch, so every shard's masses
    are counted sp times, which leaves the search's choice unchanged: ρ is a ratio of masses).
    """
    if not (dist.is_available() and dist.is_initialized()):
        return None
    if _group is not _AUTO:
        return _group
    mpu = sys.modules.get("megatron.core.parallel_state")
    if mpu is not None and getattr(mpu, "model_parallel_is_initialized", lambda: False)():
        return mpu.get_data_parallel_group()
    return dist.group.WORLD


def _world(group) -> int:
    return 1 if group is None else dist.get_world_size(group)


def global_bounds(rule, ratio: torch.Tensor, adv: torch.Tensor, mask: torch.Tensor, weights: torch.Tensor,
                  group=None, extra: torch.Tensor | None = None):
    """The rule's bounds for one update whose tokens are spread over the ranks of ``group``.

    ``ratio``, ``adv``, ``mask``, ``weights``: (1, tokens), this rank's tokens (BAPO's masses weigh
    each by ``weights``). ``group``: a process group (None: this process holds the whole batch).
    ``extra``: a 1-D float tensor summed over the group in the same ``all_reduce`` (checks, counts).

    BAPO: its masses at every candidate bound (:meth:`BAPO.candidate_masses`), summed over the
    group, then :meth:`BAPO.select` — every rank gets the bounds of the concatenated batch. Any other
    rule (fixed bounds): ``rule.bounds`` on this rank's tokens (its bounds do not depend on them; its
    ρ is this rank's). Returns ``(Bounds, extra summed)``.
    """
    if isinstance(rule, BAPO):
        pos_at, neg_at = rule.candidate_masses(ratio, adv, mask, weights)
        if group is not None:
            parts = [pos_at.reshape(-1), neg_at.reshape(-1)] + ([] if extra is None else [extra.to(pos_at.dtype)])
            flat = torch.cat(parts)
            dist.all_reduce(flat, op=dist.ReduceOp.SUM, group=group)
            h, l = pos_at.numel(), neg_at.numel()
            pos_at, neg_at = flat[:h].view_as(pos_at), flat[h:h + l].view_as(neg_at)
            extra = None if extra is None else flat[h + l:]
        return rule.bounds_from_search(rule.select(pos_at, neg_at)), extra
    if group is not None and extra is not None:
        extra = extra.clone()
        dist.all_reduce(extra, op=dist.ReduceOp.SUM, group=group)
    return _rule_bounds(rule, ratio, adv, mask, weights), extra


def _masked_mean(values: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    """verl's ``masked_mean``: Σ values·m / (Σ m + 1e-8)."""
    return (values * m).sum() / (m.sum() + 1e-8)


def compute_policy_loss(old_log_prob: torch.Tensor, log_prob: torch.Tensor, advantages: torch.Tensor,
                        response_mask: torch.Tensor, loss_agg_mode: str, *, rule, agg_fn: Callable,
                        dual_clip: float | None = None, rollout_is_weights: torch.Tensor | None = None,
                        is_weights_in_masses: bool = True, group=_AUTO):
    """The clipped policy loss with ``rule``'s bounds, in verl's conventions (what the loss modes call).

    Args:
        old_log_prob, log_prob, advantages, response_mask: (batch, tokens), as verl passes them
            (the mask may be bool). ``log_prob`` carries the gradient.
        loss_agg_mode: one of verl's modes (:data:`VERL_AGGREGATIONS`), handed to ``agg_fn``.
        rule: ``BAPO(...)``, ``Symmetric()``, ``ClipHigher()``, ... (:mod:`toy_rl.clipping`).
        agg_fn: ``agg_fn(loss_mat, loss_mask, loss_agg_mode) -> scalar``: verl's ``agg_loss`` with
            the actor's ``global_batch_info`` (so verl's data-parallel scaling is verl's own).
        dual_clip: c > 1 caps the loss of A < 0 tokens at c·|A| (verl's ``clip_ratio_c``); None: off.
        rollout_is_weights: (batch, tokens) or None: the per-token loss is multiplied by them, as verl's
            vanilla loss does; with ``is_weights_in_masses`` BAPO's masses weigh tokens by them too
            (ρ stays the positive share of the loss optimised).
        group: the process group the masses are summed over (default: :func:`data_parallel_group`).

    Per token, with r = exp(clamp(log_prob − old_log_prob, ±20)): surrogate min(r·A, clip(r, c_low,
    c_high)·A) (BAPO Eq. 3), dual-clipped to max(·, c·A) for A < 0; loss_mat = −surrogate (× IS
    weights), aggregated by ``agg_fn``.

    Returns ``(pg_loss, metrics)``: metrics are floats read in one host transfer: verl's
    ``actor/pg_clipfrac`` (tokens whose clip binds, either side), ``actor/ppo_kl`` (mean of
    old − new log-prob), ``actor/pg_clipfrac_lower`` (tokens whose dual-clip binds), and
    ``bapo/c_low``, ``bapo/c_high``, ``bapo/rho`` (the bounds used and the balance there, of the
    whole data-parallel batch for BAPO), ``bapo/rho_reached`` (1 if ρ ≥ ρ0; BAPO only).

    Raises ValueError, as :func:`toy_rl.clipping.policy_loss` does, for NaN/inf inputs or a mask that
    is all zero (over every rank: one rank may hold an empty micro-batch) — on every rank alike, since
    the checks are summed in the same ``all_reduce``.
    """
    if loss_agg_mode not in VERL_AGGREGATIONS:
        raise ValueError(f"loss_agg_mode must be one of verl's {VERL_AGGREGATIONS}; got {loss_agg_mode!r}")
    agg = MASS_WEIGHTS[loss_agg_mode]
    adv = check_loss_inputs(log_prob, old_log_prob, advantages, response_mask, agg, dual_clip, check_values=False)
    if rollout_is_weights is not None:
        if not isinstance(rollout_is_weights, torch.Tensor) or rollout_is_weights.shape != log_prob.shape:
            shape = getattr(rollout_is_weights, "shape", type(rollout_is_weights).__name__)
            raise ValueError(f"rollout_is_weights must be a tensor shaped like log_prob {tuple(log_prob.shape)}; "
                             f"got {shape}")
    group = data_parallel_group() if group is _AUTO else group
    world = _world(group)

    dtype = torch.promote_types(log_prob.dtype, torch.float32)
    log_ratio = clamped_log_ratio(log_prob.to(dtype), old_log_prob.to(dtype))
    ratio = torch.exp(log_ratio)
    adv = adv.to(dtype)
    m = response_mask.to(dtype)

    with torch.no_grad():
        flags = value_flags(log_prob, old_log_prob, advantages, response_mask)[:4].to(dtype)
        is_bad = (~torch.isfinite(rollout_is_weights).all()).to(dtype)[None] if rollout_is_weights is not None \
            else torch.zeros(1, dtype=dtype, device=m.device)
        extra = torch.cat([flags, is_bad, m.sum()[None]])
        w = token_weights(m, agg)
        if rollout_is_weights is not None and is_weights_in_masses:
            w = w * torch.nan_to_num(rollout_is_weights.detach().to(dtype))
        b, extra = global_bounds(rule, ratio.detach().reshape(1, -1), adv.reshape(1, -1), m.reshape(1, -1),
                                 w.reshape(1, -1), group, extra)

    lo, hi = b.c_low[0], b.c_high[0]
    surrogate = token_surrogate(ratio, adv, lo, hi)
    if dual_clip is not None:
        dual_binds = (adv < 0) & (surrogate < dual_clip * adv)        # verl: clip_pg_losses1 > pg_losses3
        surrogate = torch.where(dual_binds, dual_clip * adv, surrogate)
    else:
        dual_binds = torch.zeros_like(m, dtype=torch.bool)
    loss_mat = -surrogate
    if rollout_is_weights is not None:
        loss_mat = loss_mat * rollout_is_weights
    pg_loss = agg_fn(loss_mat, response_mask, loss_agg_mode)

    with torch.no_grad():
        r = ratio.detach()
        values = torch.stack([
            _masked_mean(clipped_mask(r, adv, lo, hi).to(dtype), m),
            _masked_mean(-log_ratio.detach(), m),
            _masked_mean(dual_binds.to(dtype), m),
            b.c_low[0], b.c_high[0], b.rho[0],
            b.extra["rho_reached"][0] if "rho_reached" in b.extra else torch.full_like(b.rho[0], float("nan")),
            *extra.to(dtype),
        ]).to(torch.float64).tolist()                                  # the one host transfer
    metrics, bad, n_tokens = values[:7], values[7:12], values[12]
    where = f" (on at least one of the {world} data-parallel ranks)" if world > 1 else ""
    for flag, msg in zip(bad, VALUE_PROBLEMS[:4] + ("rollout_is_weights contain NaN or inf",)):
        if flag > 0:
            raise ValueError(msg + where)
    if n_tokens == 0:
        raise ValueError(VALUE_PROBLEMS[-1] + (f" on all {world} data-parallel ranks" if world > 1 else "")
                         + ": no token to train on")
    names = ("actor/pg_clipfrac", "actor/ppo_kl", "actor/pg_clipfrac_lower", "bapo/c_low", "bapo/c_high", "bapo/rho",
             "bapo/rho_reached")
    out = dict(zip(names, metrics))
    if not isinstance(rule, BAPO):
        del out["bapo/rho_reached"]
    return pg_loss, out


def toy_rl_equivalent(loss_agg_mode: str, mask: torch.Tensor, loss_scale_factor: float | None = None):
    """How verl 0.9.1's ``agg_loss`` (one process, empty ``global_batch_info``) relates to
    :func:`toy_rl.clipping.policy_loss`: verl's loss = ``factor`` × toy_rl's loss with ``agg=our_agg``.

    Returns ``(our_agg, factor)``. With B rows of T tokens, n of them not all masked, N tokens:

    ====================== =========================== =========================================
    verl mode              toy_rl agg                  factor
    ====================== =========================== =========================================
    token-mean             token-mean                  1
    token-sum              token-mean                  N
    seq-mean-token-mean    seq-mean-token-mean         1 (both leave all-masked rows out; verl
                                                       divides each row by its length + 1e-8)
    seq-mean-token-sum     seq-mean-token-sum-norm     B·T / n
    seq-mean-token-sum-norm seq-mean-token-sum-norm    B·T / (n·L), L = loss_scale_factor or T
    ====================== =========================== =========================================

    (toy_rl's seq-mean-token-sum-norm divides the token sum by B·T; verl's by n·L: equal when no row is
    all masked and L = T.) The gradient scales by the same factor.
    """
    if loss_agg_mode not in VERL_AGGREGATIONS:
        raise ValueError(f"loss_agg_mode must be one of verl's {VERL_AGGREGATIONS}; got {loss_agg_mode!r}")
    B, T = mask.shape
    n_tok = float(mask.sum())
    n_seq = float((mask.sum(-1) > 0).sum())
    if loss_agg_mode == "token-mean":
        return "token-mean", 1.0
    if loss_agg_mode == "token-sum":
        return "token-mean", n_tok
    if loss_agg_mode == "seq-mean-token-mean":
        return "seq-mean-token-mean", 1.0
    if loss_agg_mode == "seq-mean-token-sum":
        return "seq-mean-token-sum-norm", B * T / n_seq
    return "seq-mean-token-sum-norm", B * T / (n_seq * (T if loss_scale_factor is None else loss_scale_factor))
