"""Practitioners' questions about clipping, each answered by a small experiment on rung 1's bandit (notebook 07).

    from toy_rl.bandit import BanditConfig, Schedule, simulate
    run = simulate(BanditConfig(), "clip-higher", seeds=range(8), schedule=Schedule(minibatches=4))

The bandit's one loop (:func:`toy_rl.bandit.simulate`) trains under a :class:`~toy_rl.bandit.schedule.Schedule`
(epochs, mini-batches, a lagging generator, π_old recomputed), with an entropy bonus
(:mod:`toy_rl.bandit.entropy_bonus`) and dual-clip. Files here, one concern each:

    on_policy         Q1 "clip ratio is always 0" (huggingface/trl#3120, #3757)
    minibatches       Q2 "clip_ratio_high does nothing with one epoch" (verl-project/verl#791, DAPO#11)
    clip_counts       Q3 what a sign-aware clip fraction counts (huggingface/trl#3144)
    negative_branch   Q4 the unbounded negative branch and dual-clip (huggingface/trl#6945, #3435)
    async_lag         Q5 "fully async is one step stale" (verl-project/verl#4449)
    entropy_collapse  Q6 clip-higher against an entropy bonus (huggingface/trl#3320)
    catalogue         the list of questions, threads, experiments and exercises
    summary           one answer line per question, from the runs
    views             the notebook's figures
"""
from .catalogue import QUESTIONS, thread_url

__all__ = ["QUESTIONS", "thread_url"]
