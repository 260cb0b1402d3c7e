"""Rung 2: a small transformer trained from scratch on arithmetic, then RL with the three rules.

    tasks/      the problems (add, countdown, scratchpad), generated in code, with fixed held-out sets
    model/      the 212k-parameter GPT, its character tokenizer, KV-cache sampler and scorer
    warmstart   the cached supervised starting model
    policy      TinyPolicy: the GPT behind the RL loop's policy interface (toy_rl.rl.policy)
    run         runs and comparisons through the shared loop (toy_rl.rl.loop.train)
    views       the notebooks' plots (04, 05)
"""
from .run import (DEFAULTS, RULES, SUMMARY_KEYS, compare, curve, entropy_check, format_summary, load_results,
                  run_one, scenario_name, set_cpu_threads, summary)

__all__ = ["DEFAULTS", "RULES", "SUMMARY_KEYS", "compare", "curve", "entropy_check", "format_summary", "load_results",
           "run_one", "scenario_name", "set_cpu_threads", "summary"]
