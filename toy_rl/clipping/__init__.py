"""The clipping core shared by every rung: three rules and one loss.

    from toy_rl.clipping import Symmetric, ClipHigher, BAPO, policy_loss
    loss, stats = policy_loss(logp, old_logp, advantages, mask, BAPO())

A rule is anything with a ``name`` and ``bounds(ratio, adv, mask)`` (:class:`ClippingRule`);
:func:`clipped_mask` says which tokens lost their gradient to the clip.
"""
from .bapo import BAPO
from .loss import aggregate, clipped_mask, policy_loss, policy_loss_runs, token_ratio, token_weights
from .rules import Bounds, ClipHigher, ClippingRule, FixedBounds, Symmetric

RULE_CLASSES = {"symmetric": Symmetric, "clip-higher": ClipHigher, "bapo": BAPO}    # {name: class}
RULES = tuple(RULE_CLASSES)     # the three rules' names, in this order: the one list every rung sweeps


def make_rule(name: str):
    """A rule with its defaults from its name: "symmetric", "clip-higher" or "bapo"."""
    if name not in RULE_CLASSES:
        raise ValueError(f"unknown rule {name!r}; choose from {sorted(RULES)}")
    return RULE_CLASSES[name]()


__all__ = ["Symmetric", "ClipHigher", "BAPO", "FixedBounds", "Bounds", "ClippingRule", "policy_loss", "policy_loss_runs",
           "token_ratio", "token_weights", "aggregate", "clipped_mask", "make_rule", "RULES",
           "RULE_CLASSES"]
