"""Any toy_rl clipping rule inside TRL's GRPO trainer (TRL 1.16): :class:`ClippingGRPOTrainer`.

    from toy_rl.clipping import BAPO
    from toy_rl.integrations.trl import ClippingGRPOTrainer
    trainer = ClippingGRPOTrainer(model=..., reward_funcs=..., args=GRPOConfig(num_iterations=2, ...),
                                  train_dataset=..., rule=BAPO())

It overrides only ``_compute_loss``, as TRL's own experimental trainers do: the same forward pass,
advantages, KL term and gradient-accumulation scaling as ``GRPOTrainer``, but the clip bounds come from
``rule`` (BAPO's Algorithm 1 searches them on every micro-batch; under ``torch.distributed`` the masses
of Eq. 8 are summed over the ranks first, :func:`toy_rl.integrations.verl_core.global_bounds`, so every
rank clips with the bounds of the whole batch). TRL's ``epsilon`` / ``epsilon_high`` are ignored:
the rule decides.

**Aggregation** follows ``args.loss_type``: ``"grpo"`` (mean over each completion, then over
completions: BAPO weighs a token by 1/len(its completion), toy_rl's ``seq-mean-token-mean``),
``"bnpo"``, ``"dr_grpo"`` and ``"dapo"`` (token sums, each with TRL's own normaliser: BAPO weighs every
token alike). ``cispo``, ``sapo``, ``vespo`` and ``luspo`` have no clip bounds to choose and are refused,
as are the settings this trainer does not reproduce (sequence-level importance sampling, the
off-policy mask, the entropy mask, the entropy bonus, MoE auxiliary loss). TRL's ``delta``
(two-sided GRPO) is dual-clip here: it caps the loss of A < 0 tokens at delta·|A|, which is TRL's own
loss whenever delta > c_high (TRL also caps A > 0 tokens at delta when delta is below the upper bound).
A micro-batch whose completions are all masked on every process is a ValueError (no token to train on).

**On-policy means no clipping.** With ``num_iterations=1`` and ``steps_per_generation <=
gradient_accumulation_steps`` TRL does not compute ``old_per_token_logps``: every token's ratio is
r = 1 exactly, no bound ever binds, every rule gives the same update and BAPO's search has nothing to
balance (its ρ is the on-policy positive share, whatever the bounds). The trainer warns once. Set
``num_iterations > 1`` (PPO epochs over each generation batch) or ``steps_per_generation >
gradient_accumulation_steps`` to train on stale data.

**Logged** (TRL's ``_metrics``, next to TRL's usual ones): ``clip_ratio/low_mean``,
``clip_ratio/high_mean``, ``clip_ratio/region_mean`` in TRL's sign-aware sense (the share of tokens
with r < c_low and A < 0, with r > c_high and A > 0, either), ``clipping/c_low``, ``clipping/c_high``,
``clipping/rho`` (the positive share of the loss at those bounds, Eq. 8), and for BAPO
``clipping/rho_reached`` (1 when ρ ≥ ρ0). ``entropy`` and ``kl`` as TRL logs them.
"""
from __future__ import annotations

import warnings

import torch
from trl import GRPOTrainer

from toy_rl.clipping import as_rule
from toy_rl.clipping.loss import clamped_log_ratio, clipped_mask

from .verl_core import compute_policy_loss

# TRL's loss_type -> the verl aggregation whose token weights BAPO's masses use (verl_core.MASS_WEIGHTS)
MASS_MODES = {"grpo": "seq-mean-token-mean", "bnpo": "token-mean", "dr_grpo": "token-mean", "dapo": "token-mean"}

ON_POLICY_WARNING = (
    "old_per_token_logps is None: TRL trains on-policy here (num_iterations=1 and steps_per_generation <= "
    "gradient_accumulation_steps), so every ratio is r = 1, no clip bound binds and every clipping rule gives "
    "the same update (BAPO's search has nothing to balance). Set num_iterations > 1 to train on stale data.")

# forward-pass inputs GRPOTrainer passes through to _get_per_token_logps_and_entropies when present
_MODEL_INPUTS = ("pixel_values", "image_grid_thw", "num_images", "pixel_attention_mask", "spatial_shapes",
                 "num_tiles", "image_sizes", "token_type_ids", "mm_token_type_ids", "image_position_ids")


def unsupported_settings(trainer) -> list[str]:
    """The GRPOConfig settings :class:`ClippingGRPOTrainer` does not reproduce, as ``name=value`` strings."""
    problems = []
    if trainer.loss_type not in MASS_MODES:
        problems.append(f"loss_type={trainer.loss_type!r} (choose from {sorted(MASS_MODES)})")
    checks = [("importance_sampling_level", trainer.importance_sampling_level != "token"),
              ("off_policy_mask_threshold", trainer.off_policy_mask_threshold is not None),
              ("top_entropy_quantile", trainer.top_entropy_quantile < 1.0),
              ("entropy_coef", trainer._entropy_bonus_enabled)]
    for name, bad in checks:
        if bad:
            problems.append(f"{name}={getattr(trainer.args, name, getattr(trainer, name, None))!r}")
    if trainer.aux_loss_enabled:
        problems.append("router_aux_loss_coef (MoE auxiliary loss)")
    return problems


class ClippingGRPOTrainer(GRPOTrainer):
    """``GRPOTrainer`` whose clip bounds come from a toy_rl rule (BAPO Eq. 3 with the rule's c_low, c_high).

    Args:
        *args, **kwargs: as ``trl.GRPOTrainer``.
        rule: a rule object (``Symmetric()``, ``ClipHigher()``, ``BAPO()``, ``FixedBounds(...)``, any
            :class:`toy_rl.clipping.ClippingRule`) or its name ("symmetric", "clip-higher", "bapo").

    Raises ValueError when ``args`` asks for something this trainer does not reproduce (see the module
    docstring), naming the settings.
    """

    def __init__(self, *args, rule, **kwargs):
        super().__init__(*args, **kwargs)
        self.rule = as_rule(rule)                   # a name or a rule; anything else is a ValueError
        problems = unsupported_settings(self)
        if problems:
            raise ValueError("ClippingGRPOTrainer does not support " + ", ".join(problems))
        self.dual_clip = self.args.delta
        self._warned_on_policy = False

    # ----------------------------------------------------------------- TRL's normalisers, per loss_type
    def _aggregate(self, values: torch.Tensor, mask: torch.Tensor, inputs) -> torch.Tensor:
        """``values`` (B, T) reduced to the scalar TRL 1.16's ``_compute_loss`` makes of its per-token loss."""
        train = self.model.training
        accum = self.current_gradient_accumulation_steps if train else 1.0
        total = (values * mask).sum()
        if self.loss_type == "grpo":
            return ((values * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).mean() / accum
        if self.loss_type == "bnpo":
            return total / mask.sum().clamp(min=1.0) / accum
        if self.loss_type == "dr_grpo":
            return total / (values.size(0) * self.max_completion_length) / accum
        normalizer = inputs["num_items_in_batch"].clamp(min=1.0) / self.accelerator.num_processes   # "dapo"
        if train:
            normalizer = normalizer * self.current_gradient_accumulation_steps / self.args.steps_per_generation
        return total / normalizer

    def _global_mean(self, x: torch.Tensor, mask: torch.Tensor) -> float:
        """TRL's ``global_masked_mean``: Σ x·mask / Σ mask over every process."""
        totals = self.accelerator.reduce(torch.stack([(x * mask).sum(), mask.sum().float()]), reduction="sum")
        return (totals[0] / totals[1].clamp(min=1.0)).item()

    def _compute_loss(self, model, inputs):
        prompt_ids, prompt_mask = inputs["prompt_ids"], inputs["prompt_mask"]
        completion_ids, completion_mask = inputs["completion_ids"], inputs["completion_mask"]
        input_ids = torch.cat([prompt_ids, completion_ids], dim=1)
        attention_mask = torch.cat([prompt_mask, completion_mask], dim=1)
        mask = completion_mask if "tool_mask" not in inputs else completion_mask * inputs["tool_mask"]
        logp, entropies, _ = self._get_per_token_logps_and_entropies(
            model, input_ids, attention_mask, completion_ids.size(1), compute_entropy=True,
            **{k: inputs.get(k) for k in _MODEL_INPUTS})

        old = inputs.get("old_per_token_logps")
        if old is None:
            if not self._warned_on_policy:
                warnings.warn(ON_POLICY_WARNING, stacklevel=2)
                self._warned_on_policy = True
            old = logp.detach()
        advantages = inputs["advantages"]
        advantages = advantages.unsqueeze(1) if advantages.dim() == 1 else advantages
        is_weights = inputs["importance_sampling_ratio"] if self.use_vllm and self.vllm_importance_sampling_correction \
            else None
        if is_weights is not None:
            is_weights = is_weights.expand_as(logp)

        loss, metrics = compute_policy_loss(
            old, logp, advantages.expand_as(logp), mask, MASS_MODES[self.loss_type], rule=self.rule,
            agg_fn=lambda values, m, _mode: self._aggregate(values, m.to(values.dtype), inputs),
            dual_clip=self.dual_clip, rollout_is_weights=is_weights)

        mode = "train" if self.model.training else "eval"
        m = mask.to(logp.dtype)
        if self.beta != 0.0:
            ref = inputs["ref_per_token_logps"]
            kl = torch.exp(ref - logp) - (ref - logp) - 1
            if self.args.use_bias_correction_kl:
                kl = kl * torch.exp(logp - old)
            loss = loss + self.beta * self._aggregate(kl, m, inputs)       # TRL adds β·KL before aggregating
            self._metrics[mode]["kl"].append(self._global_mean(kl.detach(), m))
        self._log_clipping(mode, logp.detach(), old, advantages, m, entropies, metrics)
        return loss

    def _log_clipping(self, mode, logp, old, advantages, m, entropies, metrics) -> None:
        """TRL's sign-aware clip ratios at the rule's bounds, the bounds and ρ, and the entropy."""
        ratio = torch.exp(clamped_log_ratio(logp, old))
        lo, hi = metrics["bapo/c_low"], metrics["bapo/c_high"]
        low = clipped_mask(ratio, advantages, lo, None).to(m.dtype)
        high = clipped_mask(ratio, advantages, None, hi).to(m.dtype)
        log = self._metrics[mode]
        log["entropy"].append(self._global_mean(entropies.detach(), m))
        log["clip_ratio/low_mean"].append(self._global_mean(low, m))
        log["clip_ratio/high_mean"].append(self._global_mean(high, m))
        log["clip_ratio/region_mean"].append(self._global_mean(torch.maximum(low, high), m))
        log["clipping/c_low"].append(lo)
        log["clipping/c_high"].append(hi)
        log["clipping/rho"].append(metrics["bapo/rho"])
        if "bapo/rho_reached" in metrics:
            log["clipping/rho_reached"].append(metrics["bapo/rho_reached"])
