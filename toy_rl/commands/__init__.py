"""Subcommands of `toy-rl`, one module each (see toy_rl/cli.py); shared argument helpers below."""
from __future__ import annotations


def expand_rules(names) -> list[str]:
    """``--rule`` values in order, ``all`` expanded to the three rules, duplicates dropped;
    ValueError naming the choices for an unknown rule."""
    from ..clipping import RULES
    out = []
    for name in names:
        for rule in (RULES if name == "all" else [name]):
            if rule not in RULES:
                raise ValueError(f"--rule: unknown rule {rule!r}; choose from {', '.join(RULES)} or all")
            if rule not in out:
                out.append(rule)
    return out
