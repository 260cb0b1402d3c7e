"""Benchmark: rung 3's update before and after four cuts that leave its numbers as they were.

1. ``HFPolicy.head_on_answers``: the LM head and the float32 log-softmax over the 49,152-word vocabulary run on the
   real answer tokens only, not on every padded position of the batch.
2. A rule with fixed bounds (symmetric, clip-higher, fixed [lo, hi]) trains its micro-batches without the no-grad
   scoring pass over the whole batch that BAPO needs for its search (:func:`toy_rl.rl.loop.needs_search_pass`).
3. A bf16 policy's on-policy mini-batch (the first of each rollout) takes its old log-probs from the update's own
   scoring pass instead of a second forward right after sampling (``BatchSource.update_scores_on_policy``).
4. BAPO on policy skips that pass too: every ratio is exactly 1 there, inside any bounds BAPO can pick.

"before" is the same code with all four off. Part 1 times one update (forward + backward + step: cuts 1 and 2) on
one batch of the ``search-hard-warm`` task (8 prompts x 8 answers, at most 96 new tokens, sampled once in bf16 by
SmolLM2-135M-Instruct with the smollm2-135m preset's LoRA, the adapters moved off zero so they matter; old log-probs
jittered so that some ratios clip), micro-batch 16, as the comparison runs train; each repeat runs before and after
in turn from the same adapters, for symmetric and BAPO. Then BAPO's update with ``hold_graphs`` off and on (its
search pass keeps each micro-batch's graph for the backward instead of a second forward), with the peak memory of
this process after each (the held graphs' cost). Part 2 (``--run``) trains the first ``--staleness`` + 1
updates of a run from the task's committed warm start, as ``toy-rl lora --task search-hard-warm --staleness 2
--dtype bfloat16 --micro-batch 16`` does (one rollout: sampling, scoring, updates), before and after. It prints the
machine, the seconds, before / after, and how far apart the two are: the log-probs and the step each made (the
weights after it minus before; part 2: the first rollout's metrics, which no update has touched yet, and every metric
of the updates), "identical" where they agree bit for bit.
Run: python bench/bench_update_cuts.py [--repeats 2 --dtype bfloat16 --run --staleness 2]
"""
from __future__ import annotations

import argparse
import random
import resource
import statistics
import tempfile
import time
from contextlib import contextmanager

import torch

from bench_bf16 import lm_bench_start

RULES = ("symmetric", "bapo")


def sampled_batch(policy, task, cfg):
    """One update's batch, sampled by ``policy``, with its old log-probs jittered (seeded)."""
    from toy_rl.rl.rollout import RolloutPool, make_batch
    pool = RolloutPool(cfg.group_size, cfg.max_new_tokens)
    pool.add(task.sample(cfg.prompts, random.Random(0)), policy.encode)
    answers = [a for g in pool.groups for a in g.answers]
    outs = policy.sample([a.prompt_ids for a in answers], cfg.max_new_tokens, cfg.temperature,
                         torch.Generator().manual_seed(0))
    for a, (toks, logp, _) in zip(answers, outs):
        a.tokens, a.logp, a.version, a.finished = toks, logp, [0] * len(toks), True
    batch = make_batch(pool.groups, task.reward, policy.decode, policy.pad_id, cfg.advantage)
    noise = torch.randn(batch.old_logp.shape, generator=torch.Generator().manual_seed(1))
    return batch._replace(old_logp=batch.old_logp + 0.2 * noise)


@contextmanager
def cuts_set(policy, on: bool):
    """The four cuts on or off (off: the code as it ran before them: every rule scored the whole batch first)."""
    from toy_rl.rl import loop
    from toy_rl.rl.sources import BatchSource
    needs = loop.needs_search_pass
    policy.head_on_answers = BatchSource.update_scores_on_policy = on
    loop.needs_search_pass = needs if on else (lambda rule, on_policy: True)
    try:
        yield
    finally:
        policy.head_on_answers = BatchSource.update_scores_on_policy = True
        loop.needs_search_pass = needs


def one_update(policy, adapters, batch, cfg, cuts: bool, hold: bool = False):
    """(seconds, weights after, log-probs, stats) of one update from ``adapters``, with the cuts on or off and
    ``hold_graphs`` as ``hold``."""
    from toy_rl.rl import loop
    policy.set_weights(adapters)
    policy.hold_graphs = hold
    with cuts_set(policy, cuts):
        opt = loop.make_optimizer(policy, cfg.lr)
        t0 = time.perf_counter()
        stats, logp, _ = loop._update(policy, opt, batch, cfg.rule_obj, cfg)
        secs = time.perf_counter() - t0
    return secs, torch.cat([w.detach().flatten() for w in policy.trainable_parameters()]), logp, stats


def adapters_flat(adapters: dict) -> torch.Tensor:
    return torch.cat([w.flatten() for w in adapters.values()])


def difference(a: torch.Tensor, b: torch.Tensor) -> str:
    """"identical" (bit for bit), else the largest difference relative to the largest value."""
    if torch.equal(a, b):
        return "identical"
    return f"{float((a - b).abs().max() / a.abs().max().clamp_min(1e-30)):.1e} relative"


def run_start(policy, adapters, task, cfg, cuts: bool):
    """(seconds, records without their times, weights after) of a run's first ``cfg.steps`` updates from
    ``adapters``, trained in a temporary folder with the cuts on or off."""
    from toy_rl.rl.loop import train
    policy.set_weights(adapters)
    policy.hold_graphs = False
    with cuts_set(policy, cuts), tempfile.TemporaryDirectory() as folder:
        t0 = time.perf_counter()
        records = train(cfg, policy, task, folder, resume=False, progress=False, heldout=[])
        secs = time.perf_counter() - t0
    return secs, [{k: v for k, v in r.items() if k != "seconds"} for r in records], policy.get_weights()


def update_bench_parser(doc: str) -> argparse.ArgumentParser:
    """The options every update bench takes: --repeats, --dtype, --threads."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=2, help="timed updates per rule and path (default 2)")
    ap.add_argument("--dtype", default="bfloat16", help="float32 or bfloat16 (default, as the comparison runs)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (default 1, as the runs use)")
    return ap


def checked(ap: argparse.ArgumentParser) -> argparse.Namespace:
    args = ap.parse_args()
    if min(args.repeats, args.threads) < 1:
        ap.error("--repeats and --threads must be at least 1")
    return args


def search_hard_policy(dtype: str, threads: int):
    """(task, preset, settings, policy): SmolLM2-135M-Instruct with the smollm2-135m preset's LoRA on
    ``search-hard-warm``, at most 96 new tokens and micro-batch 16, as the comparison runs train, after printing the
    machine; None (printed) when the llm extras are missing."""
    from toy_rl.experiments.tasks import make_task
    from toy_rl.lm.presets import get_preset
    from toy_rl.lm.run import make_policy, rl_defaults
    if not lm_bench_start(threads):
        return None
    task, preset = make_task("lm", "search-hard-warm"), get_preset("smollm2-135m")
    settings = {**rl_defaults(task, "smollm2-135m"), "max_new_tokens": 96, "micro_batch": 16}
    policy = make_policy(preset.model, task, seed=0, dtype=dtype, device="cpu", rank=preset.lora_rank,
                         alpha=preset.lora_alpha, share_prompts=preset.share_prompts, micro_batch=16)
    return task, preset, settings, policy


def paired_rows(update, policy, adapters, batch, settings, repeats: int) -> None:
    """For each rule of RULES, ``update(policy, adapters, batch, cfg, on)`` off then on, ``repeats`` times after one
    warm-up: a table row of medians, off / on, and how far apart the log-probs and the steps are."""
    from toy_rl.rl.config import RLConfig
    m, flat = batch.response_mask.bool(), adapters_flat(adapters)
    for rule in RULES:
        cfg = RLConfig(rule=rule, **settings)
        times = {True: [], False: []}
        for r in range(repeats + 1):
            out = {on: update(policy, adapters, batch, cfg, on) for on in (False, True)}
            if r:
                for on in out:
                    times[on].append(out[on][0])
        (_, w0, lp0, *_), (_, w1, lp1, *_) = out[False], out[True]
        before, after = statistics.median(times[False]), statistics.median(times[True])
        print(f"| {rule} | {before:.2f} | {after:.2f} | {before / after:.2f}x | {difference(lp0[m], lp1[m])} | "
              f"{difference(w0 - flat, w1 - flat)} |")


def main() -> int:
    ap = update_bench_parser(__doc__)
    ap.add_argument("--run", action="store_true", help="also part 2: a run's first updates from the warm start")
    ap.add_argument("--staleness", type=int, default=2, help="part 2's staleness (reuse; default 2, as the "
                                                              "comparison): it trains staleness + 1 updates")
    args = checked(ap)
    from toy_rl.rl.config import RLConfig
    loaded = search_hard_policy(args.dtype, args.threads)
    if loaded is None:
        return 0
    task, preset, settings, policy = loaded
    gen = torch.Generator().manual_seed(5)
    adapters = {k: v + 0.01 * torch.randn(v.shape, generator=gen) for k, v in policy.get_weights().items()}
    policy.set_weights(adapters)
    batch = sampled_batch(policy, task, RLConfig(rule="bapo", **settings))
    print(f"SmolLM2-135M-Instruct, {args.dtype}, search-hard-warm: batch {tuple(batch.input_ids.shape)} with "
          f"{int(batch.response_mask.sum())} answer tokens (prompt {batch.start}), micro-batch 16; "
          f"{args.repeats} repeats after 1 warm-up, medians")
    print("\n| rule | before s | after s | before / after | log-probs | weights after the step |\n"
          "|---|---|---|---|---|---|")
    m = batch.response_mask.bool()
    paired_rows(one_update, policy, adapters, batch, settings, args.repeats)
    cfg, peak, times, last = RLConfig(rule="bapo", **settings), {}, {True: [], False: []}, {}
    for hold in (False, True):                  # the process's peak memory only grows: the held graphs last
        for r in range(args.repeats + 1):
            last[hold] = one_update(policy, adapters, batch, cfg, True, hold)
            times[hold] += [last[hold][0]] if r else []
        peak[hold] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20   # KiB on Linux
    (_, w0, lp0, _), (_, w1, lp1, _) = last[False], last[True]
    two, held = statistics.median(times[False]), statistics.median(times[True])
    print(f"\nBAPO's update with the four cuts, its search pass a second forward (hold_graphs off) or the graphs "
          "held for the backward (on):\n\n| hold_graphs | seconds | peak memory of this process GiB | log-probs | "
          f"weights after the step |\n|---|---|---|---|---|\n| off | {two:.2f} | {peak[False]:.2f} | | |\n"
          f"| on | {held:.2f} ({two / held:.2f}x) | {peak[True]:.2f} | {difference(lp0[m], lp1[m])} | "
          f"{difference(w0 - adapters_flat(adapters), w1 - adapters_flat(adapters))} |")
    if args.run:
        from toy_rl.lm.run import warm_policy
        warm_policy(policy, task, preset.model)
        warm = policy.get_weights()
        print(f"\nA run's first {args.staleness + 1} updates from the committed warm start (reuse-{args.staleness}: "
              f"one rollout of {8 * (args.staleness + 1)} prompts x 8 answers), before and after, once each:")
        print("\n| rule | before s | after s | before / after | first rollout | metrics of the updates |\n"
              "|---|---|---|---|---|---|")
        sampled = ("reward_mean", "n_tokens", "len_correct", "len_wrong", "logp_gap")
        for rule in RULES:
            cfg = RLConfig(rule=rule, **{**settings, "staleness": args.staleness, "steps": args.staleness + 1,
                                         "eval_every": 0, "checkpoint_every": args.staleness + 1})
            (t0, rec0, _), (t1, rec1, _) = (run_start(policy, warm, task, cfg, cuts) for cuts in (False, True))
            first = all(r0.get(k) == r1.get(k) for r0, r1 in zip(rec0, rec1) for k in sampled)
            worst = max((abs(r0[k] - r1[k]) / max(abs(r0[k]), 1e-12), k) for r0, r1 in zip(rec0, rec1) for k in r0
                        if isinstance(r0[k], float) and k not in sampled)
            metrics = "identical" if rec0 == rec1 else f"up to {worst[0]:.1e} relative ({worst[1]})"
            print(f"| {rule} | {t0:.1f} | {t1:.1f} | {t0 / t1:.2f}x | {'the same' if first else 'DIFFERENT'} | "
                  f"{metrics} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
