"""Benchmark: rung 3's update with each prompt's answers packed behind it (no padding) against the padded layout.

``HFPolicy.pack_answers`` (:mod:`toy_rl.lm.packing`): a micro-batch's answers are right-padded to the longest, and
on a warm-started ``search-hard-warm`` batch most answer columns are padding (wrong answers run to 96 tokens, right
ones stop near 20). Packed, each distinct prompt runs once with a KV cache and its answers follow it end to end,
each seeing the prompt and its own tokens only. One update (forward, backward, AdamW step) of one batch sampled
in bf16 by SmolLM2-135M-Instruct from the task's committed LoRA warm start (8 prompts x 8 answers, at most 96 new
tokens, old log-probs jittered so that some ratios clip), micro-batch 16, as the comparison runs train; each repeat
runs padded then packed from the same adapters, for symmetric and BAPO (its search pass a no-grad forward, as with
``hold_graphs`` off). It prints the machine, the answer positions each layout computes, the seconds, padded /
packed, and how far apart the two are: the log-probs and the step each made (weights after minus before).
Run: python bench/bench_packing.py [--repeats 2 --dtype bfloat16 --threads 1]
"""
from __future__ import annotations

import time

import torch

from bench_update_cuts import checked, paired_rows, sampled_batch, search_hard_policy, update_bench_parser


def one_update(policy, adapters, batch, cfg, packed: bool):
    """(seconds, weights after, log-probs) of one update from ``adapters``, answers packed or padded."""
    from toy_rl.rl import loop
    policy.set_weights(adapters)
    policy.pack_answers, policy.hold_graphs = packed, False
    opt = loop.make_optimizer(policy, cfg.lr)
    t0 = time.perf_counter()
    _, logp, _ = loop._update(policy, opt, batch, cfg.rule_obj, cfg)
    secs = time.perf_counter() - t0
    policy.pack_answers = True
    return secs, torch.cat([w.detach().flatten() for w in policy.trainable_parameters()]), logp


def positions(batch, micro: int) -> tuple[int, int]:
    """Answer positions the padded layout computes (each micro-batch to its longest answer) and the real ones."""
    m = batch.response_mask
    padded = sum(len(m[i:i + micro]) * int(m[i:i + micro].sum(1).max()) for i in range(0, len(m), micro))
    return padded, int(m.sum())


def main() -> int:
    args = checked(update_bench_parser(__doc__))
    from toy_rl.lm.run import warm_policy
    from toy_rl.rl.config import RLConfig
    loaded = search_hard_policy(args.dtype, args.threads)
    if loaded is None:
        return 0
    task, preset, settings, policy = loaded
    warm_policy(policy, task, preset.model)
    adapters = policy.get_weights()
    batch = sampled_batch(policy, task, RLConfig(rule="bapo", **settings))
    padded, real = positions(batch, 16)
    print(f"SmolLM2-135M-Instruct from the warm start, {args.dtype}, search-hard-warm: batch "
          f"{tuple(batch.input_ids.shape)}, prompt {batch.start} tokens, micro-batch 16: the padded layout computes "
          f"{padded} answer positions for {real} answer tokens; {args.repeats} repeats after 1 warm-up, medians")
    print("\n| rule | padded s | packed s | padded / packed | log-probs | weights after the step |\n"
          "|---|---|---|---|---|---|")
    paired_rows(one_update, policy, adapters, batch, settings, args.repeats)
    m = batch.response_mask.bool()
    if args.dtype != "float32":
        print(f"\n{args.dtype} rounds differently in each layout (the attention's shapes differ); each against "
              "float32's log-probs of the same batch (padded), per answer token:")
        policy.set_weights(adapters)
        logp = {packed: scored(policy, batch, packed)[m] for packed in (False, True)}
        reference = scored(policy.set_dtype("float32"), batch, False)[m]
        for packed, lp in logp.items():
            gap = (lp - reference).abs()
            print(f"  {'packed' if packed else 'padded'}: mean |difference| {gap.mean():.4f} nats, "
                  f"max {gap.max():.3f}")
        gap = (scored(policy, batch, True)[m] - reference).abs()
        print(f"  float32 packed against float32 padded: max |difference| {gap.max():.1e} nats")
    return 0


@torch.no_grad()
def scored(policy, batch, packed: bool) -> torch.Tensor:
    """The batch's log-probs under ``policy`` (no update), answers packed or padded, in micro-batches of 16."""
    policy.pack_answers = packed
    parts = [policy.score(batch.input_ids[i:i + 16], batch.attention_mask[i:i + 16], batch.start, entropy=False)[0]
             for i in range(0, len(batch.input_ids), 16)]
    policy.pack_answers = True
    return torch.cat(parts)


if __name__ == "__main__":
    raise SystemExit(main())
