"""Will negatives dominate? A quick look at a task before any RL: who is right, and how long each answer is.

    python -m toy_rl.lm.length_probe --task add-cot --prompts 16 --budgets 48 64 96 128

Samples ``group`` answers to each of ``prompts`` problems from the model every run of the task starts from (the
untouched model, or the task's LoRA warm start), at the task's RL temperature, and reads them as a GRPO batch
on-policy (every ratio 1). For each answer budget b (a prefix of b tokens is exactly what a run with
``max_new_tokens = b`` would have sampled) it reports the accuracy, the mean length of right and wrong answers,
λ_A (:func:`toy_rl.rl.diagnostics.balance_at_start`'s ``lambda_mass``: the |A|-weighted token count of
wrong answers over right ones) and ρ = 1 / (1 + λ_A), the positive share at BAPO's start bounds (Eq. 8). ρ below
ρ0 = 0.4 (λ_A above 1.5) is the negatives-dominate regime in which BAPO's search moves (docs/protocol.md §1).

It is a sample of ``prompts`` GRPO groups: only groups with both right and wrong answers carry advantages, so
read λ with the count of mixed groups. The pilot (``toy-rl pilot --rung 3``) measures the same in training.
"""
from __future__ import annotations

import argparse
import json
import random
import time

import torch

from ..advantages import group_advantages
from ..experiments.tasks import make_task, task_label
from ..rl.diagnostics import balance_at_start
from ..threads import cpu_threads
from .load import SMOLLM2
from .run import make_policy, rl_defaults, warm_policy

SEED = 123          # the problems' draw, apart from the held-out set and every run's training draws


def budget_row(rewards: torch.Tensor, lengths: torch.Tensor, budget: int) -> dict:
    """One budget's numbers from (prompts, group) rewards and lengths of answers cut at ``budget`` tokens."""
    right = rewards > 0
    adv = group_advantages(rewards)
    cols = torch.arange(int(lengths.max().clamp(min=1)))
    mask = (cols[None] < lengths.reshape(-1, 1)).float()
    bal = balance_at_start(torch.ones_like(mask), adv.reshape(-1), mask)
    mean = lambda x: float(x.float().mean()) if x.numel() else None
    return dict(budget=budget, accuracy=mean(right), len_right=mean(lengths[right]), len_wrong=mean(lengths[~right]),
                lambda_mass=bal["lambda_mass"], rho=bal["rho_start_all"],
                mixed_groups=int((right.any(1) & (~right).any(1)).sum()), groups=rewards.shape[0])


def probe(task="add-cot", prompts: int = 16, group: int = 8, budgets=(64, 128), temperature: float | None = None,
          model=None, seed: int = 0) -> dict:
    """Sample ``prompts`` × ``group`` answers of up to ``max(budgets)`` tokens and read them at every budget."""
    if prompts < 1 or group < 2:
        raise ValueError(f"need prompts >= 1 and group >= 2 (GRPO advantages); got {prompts}, {group}")
    budgets = sorted(set(int(b) for b in budgets))
    if not budgets or budgets[0] < 1:
        raise ValueError(f"budgets must be positive token counts; got {budgets}")
    task = make_task("lm", task)
    temperature = rl_defaults(task).get("temperature", 1.0) if temperature is None else temperature
    model = SMOLLM2 if model is None else model
    policy = warm_policy(make_policy(model, task, seed), task, model)
    rng = random.Random(SEED)
    problems = [task.generate(rng) for _ in range(prompts)]
    t0 = time.perf_counter()
    out = policy.sample([policy.encode(p.prompt) for p in problems for _ in range(group)], budgets[-1], temperature,
                        torch.Generator().manual_seed(seed))
    seconds = time.perf_counter() - t0
    rows = []
    for b in budgets:
        cut = [toks[:b] for toks, _, _ in out]
        rewards = torch.tensor([task.reward(problems[i // group], policy.decode(t)) for i, t in enumerate(cut)])
        lengths = torch.tensor([len(t) for t in cut])
        rows.append(budget_row(rewards.reshape(prompts, group), lengths.reshape(prompts, group), b))
    return dict(task=task_label("lm", task), prompts=prompts, group=group, temperature=temperature,
                sample_seconds=round(seconds, 1), rows=rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m toy_rl.lm.length_probe", description=__doc__.split("\n")[0])
    ap.add_argument("--task", default="add-cot")
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--group", type=int, default=8)
    ap.add_argument("--budgets", type=int, nargs="+", default=[64, 128])
    ap.add_argument("--temperature", type=float, default=None, help="default: the task's RL temperature")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    with cpu_threads(1):
        result = probe(a.task, a.prompts, a.group, a.budgets, a.temperature)
    if a.json:
        print(json.dumps(result))
        return 0
    print(f"{result['task']}: {a.prompts} problems x {a.group} answers at temperature {result['temperature']} "
          f"(sampled in {result['sample_seconds']} s)")
    for r in result["rows"]:
        f = lambda x, d=1: "-" if x is None else f"{x:.{d}f}"
        print(f"  budget {r['budget']:4d}: accuracy {f(r['accuracy'], 3)}, right {f(r['len_right'])} tokens, wrong "
              f"{f(r['len_wrong'])}, lambda {f(r['lambda_mass'], 2)}, rho {f(r['rho'], 3)} "
              f"({r['mixed_groups']}/{r['groups']} mixed groups)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
