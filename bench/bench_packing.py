"""Benchmark: rung 3's update in two layouts, side by side: answers packed or padded; the prompts' prefix once or not.

``HFPolicy.pack_answers`` (:mod:`toy_rl.lm.packing`): a micro-batch's answers are right-padded to the longest, and
on a warm-started ``search-hard-warm`` batch most answer columns are padding (wrong answers run to 96 tokens, right
ones stop near 20). Packed, each distinct prompt runs once with a KV cache and its answers follow it end to end,
each seeing the prompt and its own tokens only. One update (forward, backward, AdamW step) of one batch sampled
in bf16 by SmolLM2-135M-Instruct from the task's committed LoRA warm start (8 prompts x 8 answers, at most 96 new
tokens, old log-probs jittered so that some ratios clip), micro-batch 16, as the comparison runs train; each repeat
runs padded then packed from the same adapters, for symmetric and BAPO (its search pass a no-grad forward, as with
``hold_graphs`` off). It prints the machine, the answer positions each layout computes, the seconds, padded /
packed, and how far apart the two are: the log-probs and the step each made (weights after minus before).

``--layout prefix`` compares ``HFPolicy.share_prefix`` (:mod:`toy_rl.lm.prefill`) off and on instead, answers packed:
the 115 tokens of few-shot examples every ``search-hard-warm`` prompt begins with run once per micro-batch rather
than once per distinct prompt (a micro-batch of 16 holds 2), and the sampler's prefill runs them once (timed too).
Run: python bench/bench_packing.py [--repeats 2 --dtype bfloat16 --threads 1 --layout answers|prefix]
"""
from __future__ import annotations

import statistics
import time

import torch

from bench_update_cuts import checked, paired_rows, sampled_batch, search_hard_policy, update_bench_parser


SWITCHES = {"answers": "pack_answers", "prefix": "share_prefix"}       # --layout: the HFPolicy switch it turns
LABELS = {"answers": ("padded", "packed"), "prefix": ("prefix per prompt", "prefix once")}


def updater(switch: str):
    def one_update(policy, adapters, batch, cfg, on: bool):
        """(seconds, weights after, log-probs) of one update from ``adapters``, ``switch`` on or off."""
        from toy_rl.rl import loop
        policy.set_weights(adapters)
        policy.hold_graphs = False
        setattr(policy, switch, on)
        opt = loop.make_optimizer(policy, cfg.lr)
        t0 = time.perf_counter()
        _, logp, _ = loop._update(policy, opt, batch, cfg.rule_obj, cfg)
        secs = time.perf_counter() - t0
        setattr(policy, switch, True)
        return secs, torch.cat([w.detach().flatten() for w in policy.trainable_parameters()]), logp
    return one_update


def sampling_seconds(policy, task, settings, repeats: int) -> dict:
    """{share_prefix: median seconds} of sampling one batch, off and on in turn (after one warm-up)."""
    from toy_rl.rl.config import RLConfig
    times = {False: [], True: []}
    for r in range(repeats + 1):
        for on in times:
            policy.share_prefix = on
            t0 = time.perf_counter()
            sampled_batch(policy, task, RLConfig(rule="bapo", **settings))
            if r:
                times[on].append(time.perf_counter() - t0)
    policy.share_prefix = True
    return {on: statistics.median(v) for on, v in times.items()}


def positions(batch, micro: int) -> tuple[int, int]:
    """Answer positions the padded layout computes (each micro-batch to its longest answer) and the real ones."""
    m = batch.response_mask
    padded = sum(len(m[i:i + micro]) * int(m[i:i + micro].sum(1).max()) for i in range(0, len(m), micro))
    return padded, int(m.sum())


def main() -> int:
    ap = update_bench_parser(__doc__)
    ap.add_argument("--layout", choices=sorted(SWITCHES), default="answers",
                    help="answers: padded against packed (default); prefix: the prompts' prefix per prompt or once")
    args = checked(ap)
    off, on = LABELS[args.layout]
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
    print(f"\n| rule | {off} s | {on} s | {off} / {on} | log-probs | weights after the step |\n"
          "|---|---|---|---|---|---|")
    paired_rows(updater(SWITCHES[args.layout]), policy, adapters, batch, settings, args.repeats)
    m = batch.response_mask.bool()
    if args.layout == "prefix":
        secs = sampling_seconds(policy, task, settings, args.repeats)
        print(f"| sampling the batch | {secs[False]:.2f} | {secs[True]:.2f} | {secs[False] / secs[True]:.2f}x | | |")
    elif args.dtype != "float32":
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
