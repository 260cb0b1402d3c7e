"""The practitioners' questions notebook 07 answers: what each asks, the public threads it comes from, the
experiment that answers it and the exercise that checks it. The notebook's map and summary read this list."""
from __future__ import annotations

from typing import NamedTuple


class Question(NamedTuple):
    key: str
    asks: str
    threads: tuple
    experiment: str
    exercise: str


QUESTIONS = (
    Question("clip-ratio-zero", "why is the clip ratio always 0?",
             ("huggingface/trl#3120", "huggingface/trl#3757"),
             "toy_rl.bandit.questions.on_policy.clip_ratio_experiment", "surrogate_grad_weight"),
    Question("one-epoch", "does clip_ratio_high do anything with one PPO epoch?",
             ("verl-project/verl#791", "BytedTsinghua-SIA/DAPO#11"),
             "toy_rl.bandit.questions.minibatches.minibatch_experiment", "minibatch_position"),
    Question("sign-aware", "what does a clip fraction count?",
             ("huggingface/trl#3144", "huggingface/trl#3032"),
             "toy_rl.bandit.questions.clip_counts.clip_count_table", "sign_aware_clip_fractions"),
    Question("dual-clip", "is the negative branch unbounded on stale data, and what does dual-clip do?",
             ("huggingface/trl#6945", "huggingface/trl#3435"),
             "toy_rl.bandit.questions.negative_branch.negative_branch_table", "dual_clip_surrogate"),
    Question("one-step-off", "is fully async at staleness 0 on-policy, or one step stale?",
             ("verl-project/verl#4449",),
             "toy_rl.bandit.questions.async_lag.one_step_off_experiment", "async_ages"),
    Question("entropy", "entropy collapses: clip-higher or an entropy bonus?",
             ("huggingface/trl#3320",),
             "toy_rl.bandit.questions.entropy_collapse.entropy_experiment", "entropy_gradient"),
)


def thread_url(thread: str) -> str:
    """"owner/repo#123" -> its GitHub address (issues and pull requests share the numbering)."""
    repo, number = thread.split("#")
    return f"https://github.com/{repo}/issues/{number}"
