"""Practitioners' questions about clipping, each answered by a small experiment (notebook 07).

    from toy_rl.practice import Schedule, EntropyBonus, train
    run = train(BanditConfig(), "clip-higher", seeds=range(8), schedule=Schedule(minibatches=4))

Files, one concern each:

    schedule          epochs, mini-batches, a lagging generator, π_old recomputed: how stale each update is
    loop              the bandit trained under a Schedule, with an entropy bonus and dual-clip
    entropy_bonus     ∂H/∂z and a fixed or adaptive β
    on_policy         Q1 "clip ratio is always 0" (huggingface/trl#3120, #3757)
    minibatches       Q2 "clip_ratio_high does nothing with one epoch" (verl-project/verl#791, DAPO#11)
    clip_counts       Q3 what a sign-aware clip fraction counts (huggingface/trl#3144)
    negative_branch   Q4 the unbounded negative branch and dual-clip (huggingface/trl#6945, #3435)
    async_lag         Q5 "fully async is one step stale" (verl-project/verl#4449)
    entropy_collapse  Q6 clip-higher against an entropy bonus (huggingface/trl#3320)
    questions         the list of questions, threads, experiments and exercises
    views             the notebook's figures
"""
from .entropy_bonus import EntropyBonus, entropy_gradient
from .loop import train
from .questions import QUESTIONS, thread_url
from .schedule import Position, Schedule, position

__all__ = ["EntropyBonus", "entropy_gradient", "train", "QUESTIONS", "thread_url", "Position", "Schedule", "position"]
