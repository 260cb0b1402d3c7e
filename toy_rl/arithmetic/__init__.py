"""Rung 2: a small transformer trained from scratch on arithmetic, then RL with the three rules.

    tasks/      the problems (add, countdown, scratchpad), generated in code, with fixed held-out sets
    model/      the 211,520-parameter GPT (the default ModelConfig), its character tokenizer, KV-cache sampler and scorer
    warmstart   the cached supervised starting model
    policy      TinyPolicy: the GPT behind the RL loop's policy interface (toy_rl.rl.policy)
    run         rung 2's backend for the one runner (toy_rl.experiments: make_spec, grid, sweep, load, summarize)
    views       the notebooks' plots (04, 05)
"""
from .run import DEFAULTS, OPTIONS, RULES, SMOKE, entropy_check

__all__ = ["DEFAULTS", "OPTIONS", "RULES", "SMOKE", "entropy_check"]
