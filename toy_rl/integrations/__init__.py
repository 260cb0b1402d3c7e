"""Plug-ins that run toy_rl's clipping rules inside other trainers.

``toy_rl.integrations.verl``: BAPO as verl policy-loss modes ``bapo`` and ``bapo_authors`` (needs verl;
docs/scaling_out.md). ``toy_rl.integrations.verl_core``: its computation, torch only.
Nothing is imported here, so ``import toy_rl.integrations`` never needs verl.
"""
