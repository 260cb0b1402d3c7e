"""Rung 2's RL step (and rungs 3-4's), top to bottom, in one file: open this one first.

    python -m toy_rl.arithmetic.step_by_step             # the arithmetic GPT from its warm start
    python -m toy_rl.arithmetic.step_by_step --rule clip-higher --staleness 0 --smoke   # tiny warm start, seconds

One GRPO update with a clipping rule on data that is ``staleness`` updates old (BAPO Algorithm 1, one pass of
its inner loop), written out in plain torch: sample, reward, advantage, go stale, score, ratio, bounds, clipped
surrogate, step. :func:`one_update` ends by giving the same batch to the library's update on a copy of the
policy and returns both losses: they agree (tests/test_step_by_step.py), so what you read here is what runs.
Rungs 2, 3 and 4 share this step; only the policy differs (a character-level GPT at rung 2, a LoRA-wrapped
pretrained LM at rungs 3-4, both behind the interface of :mod:`toy_rl.rl.policy`). Rung 1 has its own file:
:mod:`toy_rl.bandit.simulate`.

Where each piece lives in a real run (``toy-rl arithmetic --rule bapo --staleness 4``), from the flag to the loss:

    1. toy_rl/commands/arithmetic.py   the flags become a RunSpec (make_spec)
    2. toy_rl/experiments/spec.py      RunSpec: the rung, the task, the RLConfig (rule, staleness, lr, ...)
    3. toy_rl/experiments/runner.py    the run folder: resume, lock, logs
    4. toy_rl/arithmetic/run.py        warm start -> TinyPolicy (toy_rl/lm/run.py at rungs 3-4)
    5. toy_rl/rl/loop.py               train: source.next -> update -> metrics.jsonl, checkpoints
    6. toy_rl/clipping/loss.py         policy_loss: ratio, rule.bounds, clipped surrogate (BAPO Eq. 3)

and beside them: toy_rl/rl/sources.py (which rollout a step trains on: reuse, epochs, lag, partial),
toy_rl/rl/rollout.py (groups, answers, the Batch), toy_rl/advantages.py (GRPO), toy_rl/clipping/bapo.py
(BAPO's search, Algorithm 1 lines 5-9; ``BAPO.search_loop`` is it as a plain loop).
"""
from __future__ import annotations

import copy
import random

import torch

from ..advantages import group_advantages
from ..clipping import as_rule, make_rule
from ..rl.config import RLConfig
from ..rl.loop import make_optimizer, update
from ..rl.rollout import Answer, Group, make_batch
from .policy import TinyPolicy
from .tasks import get_task
from .warmstart import load_warmstart, smoke_config


def sample_groups(policy, task, prompts: int, group_size: int, max_new_tokens: int, rng, generator) -> list:
    """Step 1: G answers to each of ``prompts`` problems from the policy as it is now (π_old), keeping each
    token's log-prob: the old log-probs the ratio is measured against. (toy_rl/rl/rollout.py does this in
    pieces, so that partial rollout can stop and resume an answer.)"""
    groups = []
    for problem in task.sample(prompts, rng):
        ids = policy.encode(problem.prompt)
        outs = policy.sample([ids] * group_size, max_new_tokens, 1.0, generator)
        groups.append(Group(problem, [Answer(list(ids), list(t), list(lp), [0] * len(t), True)
                                      for t, lp, _ in outs]))
    return groups


def clipped_loss(policy, batch, rule):
    """Steps 4-7 on one batch: score, ratio, bounds, clipped surrogate. Returns (loss, c_low, c_high)."""
    # 4. Score the same tokens under the policy as it is *now* (it has moved since it sampled them).
    logp, _entropy = policy.score(batch.input_ids, batch.attention_mask, batch.start, 1.0)
    mask, adv = batch.response_mask, batch.advantages[:, None]            # one advantage per answer, every token
    # 5. The importance ratio per token, r = π_θ / π_old (BAPO Eq. 8's r), from log-probs.
    ratio = torch.exp(logp - batch.old_logp)
    # 6. The rule picks the bounds: fixed for symmetric [0.8, 1.2] and clip-higher [0.8, 1.28]; BAPO searches
    #    them on this very batch until the positive tokens' share ρ of the loss reaches ρ0 (Algorithm 1).
    bounds = rule.bounds(ratio.detach().reshape(1, -1), adv.expand_as(ratio).reshape(1, -1), mask.reshape(1, -1))
    c_low, c_high = float(bounds.c_low[0]), float(bounds.c_high[0])
    # 7. The clipped surrogate min(r·A, clip(r, c_low, c_high)·A) (BAPO Eq. 3), averaged over answer tokens;
    #    a loss to minimise is its negative. Clipped tokens take the constant branch: no gradient.
    surrogate = torch.minimum(ratio * adv, ratio.clamp(c_low, c_high) * adv)
    loss = -(surrogate * mask).sum() / mask.sum()
    return loss, c_low, c_high


def one_update(policy, task, rule="bapo", staleness: int = 2, prompts: int = 4, group_size: int = 8,
               max_new_tokens: int | None = None, lr: float = 1e-3, seed: int = 0, verbose: bool = True) -> dict:
    """Steps 1-8 once, then the library's :func:`toy_rl.rl.loop.update` on a copy of the policy as it stood
    before step 8: returns {"loss", "library_loss", "c_low", "c_high", "reward_mean"}."""
    rule = as_rule(rule)
    say = print if verbose else (lambda *a: None)
    max_new_tokens = max_new_tokens or task.max_answer_chars + 1
    generator = torch.Generator(device=policy.device).manual_seed(seed)

    # 1. Sample a group of answers per prompt.
    policy.eval()
    groups = sample_groups(policy, task, prompts, group_size, max_new_tokens, random.Random(seed), generator)
    # 2. Reward each answer; the GRPO advantage compares it with its own group: A = (R - mean) / std.
    rewards = torch.tensor([[task.reward(g.problem, policy.decode(a.tokens)) for a in g.answers] for g in groups])
    advantages = group_advantages(rewards)
    say(f"1-2. {prompts} prompts x {group_size} answers, mean reward {rewards.mean():.2f}; "
        f"advantages of group 0: {[round(a, 2) for a in advantages[0].tolist()]}")
    batch = make_batch(groups, task.reward, policy.decode, policy.pad_id)     # the same, padded into tensors
    assert torch.allclose(batch.advantages, advantages.reshape(-1))

    # 3. Go stale: the policy takes `staleness` other updates (here: symmetric ones on this same batch, as PPO
    #    epochs do) before the update we follow, so π_θ ≠ π_old and ratios leave 1.
    optimizer = make_optimizer(policy, lr)
    for _ in range(staleness):
        policy.train()
        optimizer.zero_grad(set_to_none=True)
        clipped_loss(policy, batch, make_rule("symmetric"))[0].backward()
        optimizer.step()

    # The library's step on a copy of exactly this state, for the check at the end.
    twin, twin_optimizer = copy.deepcopy(policy), None
    twin_optimizer = make_optimizer(twin, lr)
    twin_optimizer.load_state_dict(optimizer.state_dict())

    # 4-7. Score, ratio, bounds, clipped surrogate.
    policy.train()
    optimizer.zero_grad(set_to_none=True)
    loss, c_low, c_high = clipped_loss(policy, batch, rule)
    say(f"4-7. {rule.name}: bounds [{c_low:.3f}, {c_high:.3f}], loss {loss.item():+.5f}")
    # 8. Backward, clip the gradient norm, one optimizer step.
    loss.backward()
    torch.nn.utils.clip_grad_norm_(list(policy.trainable_parameters()), RLConfig().max_grad_norm)
    optimizer.step()
    policy.eval()

    cfg = RLConfig(rule=rule, staleness=staleness, prompts=prompts, group_size=group_size,
                   max_new_tokens=max_new_tokens, lr=lr)
    library = update(twin, twin_optimizer, batch, rule, cfg)
    say(f"   the library's update (toy_rl.rl.loop.update) on the same batch: loss {library['loss']:+.5f}")
    return {"loss": loss.item(), "library_loss": library["loss"], "c_low": c_low, "c_high": c_high,
            "reward_mean": float(rewards.mean())}


def main(argv=None) -> int:
    import argparse
    p = argparse.ArgumentParser(description="One RL update of rung 2's GPT, step by step.")
    p.add_argument("--rule", default="bapo", choices=("symmetric", "clip-higher", "bapo"))
    p.add_argument("--staleness", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--smoke", action="store_true", help="the tiny warm start (trained in seconds; few right answers)")
    args = p.parse_args(argv)
    task = get_task("add")
    policy = TinyPolicy(load_warmstart(task, smoke_config(task) if args.smoke else None))   # trained once, cached
    one_update(policy, task, args.rule, args.staleness, seed=args.seed)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
