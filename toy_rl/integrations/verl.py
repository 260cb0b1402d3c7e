"""BAPO as a verl policy loss (verl 0.9.1): loss modes ``bapo`` and ``bapo_authors``.

Importing this module registers both modes with verl's ``register_policy_loss``; verl imports it by
itself through the ``verl.plugins`` entry point in toy_rl's pyproject.toml (or with
``VERL_USE_EXTERNAL_MODULES=toy_rl.integrations.verl``). Then::

    actor_rollout_ref.actor.policy_loss.loss_mode=bapo

``bapo``
    BAPO's Algorithm 1 (arXiv 2510.18927) with the paper's §5.1 defaults, ``BAPO()``: share target
    ρ0 = 0.4, c_low in [0.6, 0.9] by 0.02, c_high in [1.2, 3.0] by 0.05, upper bound first, masses
    over the tokens that still carry gradient (toy_rl's reading of Eq. 8, docs/paper_vs_code.md). No
    dual-clip unless ``bapo_dual_clip`` is set (Eq. 3 has none). Settings, read from the actor's
    ``policy_loss`` config when present (None or absent: BAPO()'s default)::

        bapo_rho0        ρ0                  bapo_order      "upper_first" | "lower_first"
        bapo_low_range   [a⁻, b⁻]            bapo_count      "grad" | "all"
        bapo_high_range  [a⁺, b⁺]            bapo_balance    "share" | "pos_neg"
        bapo_low_step    δ2                  bapo_eps        ε in the balance's denominator
        bapo_high_step   δ1                  bapo_dual_clip  c > 1, or None (off)

    verl turns the actor config into dataclasses, which refuse unknown keys: point the policy-loss
    node at :class:`BAPOPolicyLossConfig` (verl's ``PolicyLossConfig`` plus these fields), e.g.
    ``actor_rollout_ref.actor.policy_loss._target_=toy_rl.integrations.verl.BAPOPolicyLossConfig
    +actor_rollout_ref.actor.policy_loss.bapo_rho0=0.5``. If IS weights are passed
    (``rollout_is_weights``), the masses weigh tokens by them, as the loss does.

``bapo_authors``
    ``BAPO.authors_code()``, the authors' shipped recipe (pos/neg target 1.0, c_low 0.6 → 0.8 and
    c_high 1.2 → 2.0 by 0.05, lower bound first, every token at its clipped value, pos/(neg + 1e-8)),
    with dual-clip c = the actor's ``clip_ratio_c`` (verl's default, and the authors', 3.0). Reads no
    ``bapo_*`` key. Their masses ignore IS weights (the loss is still multiplied by them). For their
    full setting also set ``actor.loss_agg_mode=token-mean`` (verl's default).

Both modes: the loss is aggregated by verl's own ``agg_loss`` with the actor's ``global_batch_info``
(verl's normalisation and data-parallel scaling, every one of verl's five ``loss_agg_mode``), the
per-token loss is multiplied by ``rollout_is_weights`` as verl's vanilla loss does, and under
``torch.distributed`` every rank picks the bounds of the whole data-parallel batch
(:mod:`toy_rl.integrations.verl_core`). Metrics: verl's ``actor/pg_clipfrac``, ``actor/ppo_kl``,
``actor/pg_clipfrac_lower``, plus ``bapo/c_low``, ``bapo/c_high``, ``bapo/rho``, ``bapo/rho_reached``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import torch
from verl.trainer.ppo.core_algos import agg_loss, register_policy_loss
from verl.workers.config import PolicyLossConfig

from toy_rl.clipping import BAPO

from .verl_core import (VERL_AGGREGATIONS, compute_policy_loss, data_parallel_group,  # noqa: F401  (re-exported)
                        set_data_parallel_group)

# key under actor.policy_loss -> BAPO's argument
BAPO_KEYS = {"bapo_rho0": "rho0", "bapo_low_range": "low_range", "bapo_high_range": "high_range",
             "bapo_low_step": "low_step", "bapo_high_step": "high_step", "bapo_order": "order",
             "bapo_count": "count", "bapo_balance": "balance", "bapo_eps": "eps"}
DUAL_CLIP_KEY = "bapo_dual_clip"


@dataclass
class BAPOPolicyLossConfig(PolicyLossConfig):
    """verl's ``PolicyLossConfig`` with the ``bapo_*`` settings of loss mode ``bapo`` (None: BAPO()'s default)."""
    bapo_rho0: Optional[float] = None
    bapo_low_range: Optional[list[float]] = None
    bapo_high_range: Optional[list[float]] = None
    bapo_low_step: Optional[float] = None
    bapo_high_step: Optional[float] = None
    bapo_order: Optional[str] = None
    bapo_count: Optional[str] = None
    bapo_balance: Optional[str] = None
    bapo_eps: Optional[float] = None
    bapo_dual_clip: Optional[float] = None


def _get(node, key: str, default=None):
    """``node[key]`` for verl's dataclass configs, OmegaConf nodes and dicts; ``default`` when absent or None."""
    if node is None:
        return default
    try:
        value = node.get(key, default) if hasattr(node, "get") else getattr(node, key, default)
    except Exception:                                     # e.g. a struct DictConfig without the key
        value = getattr(node, key, default)
    return default if value is None else value


def bapo_settings(config) -> tuple[BAPO, float | None]:
    """Mode ``bapo``'s rule and dual-clip from the actor config (``config.policy_loss.bapo_*``)."""
    pl = _get(config, "policy_loss")
    kwargs: dict[str, Any] = {}
    for key, arg in BAPO_KEYS.items():
        value = _get(pl, key)
        if value is not None:
            kwargs[arg] = tuple(float(v) for v in value) if arg.endswith("_range") else value
    dual = _get(pl, DUAL_CLIP_KEY)
    return BAPO(**kwargs), (None if dual is None else float(dual))


def authors_settings(config) -> tuple[BAPO, float]:
    """Mode ``bapo_authors``'s rule and dual-clip: ``BAPO.authors_code()``, c = ``config.clip_ratio_c`` (3.0)."""
    return BAPO.authors_code(), float(_get(config, "clip_ratio_c", 3.0))


def verl_agg_fn(config):
    """verl's ``agg_loss`` with the actor's ``global_batch_info`` (dp_size, batch_num_tokens,
    global_batch_size, loss_scale_factor; empty outside a verl worker), as its vanilla loss calls it."""
    info = dict(_get(config, "global_batch_info", {}) or {})
    return lambda loss_mat, loss_mask, mode: agg_loss(loss_mat=loss_mat, loss_mask=loss_mask, loss_agg_mode=mode, **info)


def compute_policy_loss_rule(old_log_prob: torch.Tensor, log_prob: torch.Tensor, advantages: torch.Tensor,
                             response_mask: torch.Tensor, loss_agg_mode: str = "token-mean", config=None,
                             rollout_is_weights: torch.Tensor | None = None, *, rule,
                             dual_clip: float | None = None, is_weights_in_masses: bool = True):
    """Any toy_rl clipping rule as a verl policy loss: verl's signature plus ``rule`` and ``dual_clip``.

    ``rule=Symmetric(eps)`` with ``dual_clip=config.clip_ratio_c`` is verl's ``vanilla`` loss;
    ``ClipHigher(low, high)`` is vanilla with ``clip_ratio_low/high``. Bind them with
    ``functools.partial`` and ``register_policy_loss`` to make a mode of your own.
    See :func:`toy_rl.integrations.verl_core.compute_policy_loss`.
    """
    return compute_policy_loss(old_log_prob, log_prob, advantages, response_mask, loss_agg_mode, rule=rule,
                               agg_fn=verl_agg_fn(config), dual_clip=dual_clip, rollout_is_weights=rollout_is_weights,
                               is_weights_in_masses=is_weights_in_masses)


@register_policy_loss("bapo")  # type: ignore[arg-type]
def compute_policy_loss_bapo(old_log_prob: torch.Tensor, log_prob: torch.Tensor, advantages: torch.Tensor,
                             response_mask: torch.Tensor, loss_agg_mode: str = "token-mean", config=None,
                             rollout_is_weights: torch.Tensor | None = None):
    """verl loss mode ``bapo``: Algorithm 1's adaptive bounds, searched once per call over the whole
    data-parallel micro-batch, in the clipped surrogate of Eq. 3. Settings: module docstring."""
    rule, dual_clip = bapo_settings(config)
    return compute_policy_loss_rule(old_log_prob, log_prob, advantages, response_mask, loss_agg_mode, config,
                                    rollout_is_weights, rule=rule, dual_clip=dual_clip)


@register_policy_loss("bapo_authors")  # type: ignore[arg-type]
def compute_policy_loss_bapo_authors(old_log_prob: torch.Tensor, log_prob: torch.Tensor, advantages: torch.Tensor,
                                     response_mask: torch.Tensor, loss_agg_mode: str = "token-mean", config=None,
                                     rollout_is_weights: torch.Tensor | None = None):
    """verl loss mode ``bapo_authors``: the authors' recipe (``BAPO.authors_code()``, dual-clip ``clip_ratio_c``)."""
    rule, dual_clip = authors_settings(config)
    return compute_policy_loss_rule(old_log_prob, log_prob, advantages, response_mask, loss_agg_mode, config,
                                    rollout_is_weights, rule=rule, dual_clip=dual_clip, is_weights_in_masses=False)


__all__ = ["BAPOPolicyLossConfig", "compute_policy_loss_bapo", "compute_policy_loss_bapo_authors",
           "compute_policy_loss_rule", "bapo_settings", "authors_settings", "verl_agg_fn",
           "set_data_parallel_group", "data_parallel_group", "BAPO_KEYS", "VERL_AGGREGATIONS"]
