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


def as_rule(rule):
    """The rule object for ``rule``: a name (:func:`make_rule`) or a rule object itself (anything with ``.name``
    and ``.bounds()``). The one place a rule's name becomes a rule: callers that take either pass it through here."""
    if isinstance(rule, str):
        return make_rule(rule)                # unknown name -> ValueError naming the choices
    if isinstance(getattr(rule, "name", None), str) and callable(getattr(rule, "bounds", None)):
        return rule
    raise ValueError(f"rule must be a clipping rule: one of {sorted(RULES)} or an object with .name and .bounds() "
                     f"(e.g. BAPO(rho0=0.5)); got {rule!r}")


__all__ = ["Symmetric", "ClipHigher", "BAPO", "FixedBounds", "Bounds", "ClippingRule", "policy_loss", "policy_loss_runs",
           "token_ratio", "token_weights", "aggregate", "clipped_mask", "make_rule", "as_rule", "RULES",
           "RULE_CLASSES"]
