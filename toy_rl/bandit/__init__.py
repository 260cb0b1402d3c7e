"""Rung 1: a tabular softmax bandit where the Entropy-Clip Rule can be checked exactly.

    from toy_rl.bandit import BanditConfig, simulate, sweep, summary_table, confidence_band, verify
    run = simulate(BanditConfig(staleness=4), rule="bapo", seeds=range(20))
    run.curve("entropy")                                 # (seeds, steps)
    results = sweep(BanditConfig())                      # {(staleness, rule): BanditRun}
    report = verify(instances=10_000)                    # the Entropy-Clip Rule, checked
    claim_verdicts(results)                              # the paper's claims 1-5, one verdict line each

Files: policy (softmax, exact entropy), rewards (presets), advantages (GRPO, Dr. GRPO),
rng (per-seed random streams), update (the step through the shared clipped loss),
quadrants (ΔH split by App. B.4's quadrants), simulate (the loop), schedule (epochs,
mini-batches, lag: how a rollout is consumed), entropy_bonus (β·H), entropy_rule
(the check), experiments (sweeps, bands, tests), verdicts (the paper's claims, judged
from a sweep), views (notebook plots), questions (notebook 07's practitioners' questions).
"""
from ..advantages import group_advantages
from .config import BanditConfig
from .entropy_bonus import EntropyBonus, entropy_gradient
from .entropy_rule import explain_update, random_instances, verify
from .experiments import (bounds_ablation, confidence_band, format_table, per_seed_summary, summary_table, sweep,
                          welch_test)
from .policy import entropy, expected_reward, log_probs, probs, sample_tokens
from .quadrants import LOWERS_ENTROPY, QUADRANTS
from .rewards import PRESETS, Task, draw_rewards, make_task
from .schedule import Position, Schedule, position
from .simulate import BanditRun, simulate
from .comparison import compare, format_rows, step_size_sweep, tuned_comparison
from .pilot import pilot, pilot_summary
from .policy import best_found, best_prob
from .presets import DEFAULT as DEFAULT_PRESET, PRESETS as CONFIG_PRESETS, get_preset, long_answers
from .verdicts import claim_checks, claim_verdicts, negative_dominance, rule_tests

__all__ = ["BanditConfig", "BanditRun", "simulate", "Schedule", "Position", "position", "EntropyBonus", "entropy_gradient", "make_task", "draw_rewards", "Task", "PRESETS",
           "entropy", "expected_reward", "log_probs", "probs", "sample_tokens",
           "group_advantages", "QUADRANTS", "LOWERS_ENTROPY",
           "sweep", "summary_table", "format_table", "confidence_band", "welch_test", "per_seed_summary",
           "bounds_ablation", "verify", "explain_update", "random_instances",
           "claim_checks", "claim_verdicts", "negative_dominance", "rule_tests",
           "CONFIG_PRESETS", "DEFAULT_PRESET", "get_preset", "long_answers", "pilot", "pilot_summary",
           "compare", "tuned_comparison", "step_size_sweep", "format_rows", "best_prob", "best_found"]
