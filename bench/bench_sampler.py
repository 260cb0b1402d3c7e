"""Benchmark: toy_rl's rollout samplers against transformers' ``model.generate``, on CPU, same model, same prompts.

Three samplers write the same number of tokens after the same prompts with the same
function (the cached rung-2 warm start for "add": 4 layers, d_model 64, 4 heads,
vocab 51, context 128):

* generate   ``GPT2LMHeadModel.generate`` on the GPT-2 twin of our model (weights
             copied, see bench_vs_trl.py): do_sample, temperature 1, top_k 0, top_p 1,
             KV cache, left-padded prompts with their attention mask;
* HFPolicy   ``toy_rl.lm.policy.HFPolicy.sample`` on that same GPT-2 (runs each distinct
             prompt once, then one token per step for all rows; records log-probs);
* our GPT    ``toy_rl.arithmetic.model.sampling.sample`` (what TinyPolicy.sample calls) on our own
             GPT (runs each distinct prompt once too, then copies its KV cache to the
             rows that share it; records log-probs).

No stop token on any side (generate: eos_token_id None; ours: a stop id that never
occurs), so every row writes exactly N tokens and tokens/s = rows x N / seconds.
Batch 128 = 16 prompts x 8 samples each (an RL batch: GRPO groups) and, second,
128 different prompts. N = 4 (the rung-2 answer length) and 32. The samplers are
called in rotating order, repeated, after warm-up calls; medians.

Run: python bench/bench_sampler.py [--repeats 15] [--threads 1]
"""
from __future__ import annotations

import argparse
import random
import statistics
import time

import torch

from bench_vs_trl import char_tokenizer, gpt2_twin, machine, quiet, warm_model
from toy_rl.arithmetic.model import tokenizer as chars
from toy_rl.arithmetic.model.sampling import sample as gpt_sample
from toy_rl.arithmetic.tasks import get_task

NEVER = -1          # a stop id no sampler can draw: fixed-length answers


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=15, help="timed calls per sampler and case (default %(default)s)")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--group", type=int, default=8, help="samples per prompt in the grouped layout")
    ap.add_argument("--new", type=int, nargs="+", default=[4, 32], help="new tokens per row (default 4 32)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads, every sampler (default %(default)s)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    quiet()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)

    from transformers import GenerationConfig

    from toy_rl.lm.policy import HFPolicy

    gpt = warm_model()
    hf = gpt2_twin(gpt)
    hf.generation_config.eos_token_id = None   # else generate falls back to the model's EOS and stops early
    policy = HFPolicy(hf, char_tokenizer(), stop_ids=[NEVER])
    task = get_task("add")
    rng = random.Random(args.seed)
    prompts = [[chars.BOS_ID] + chars.encode(p.prompt) for p in task.sample(args.batch, rng)]
    layouts = {f"{args.batch // args.group} prompts x {args.group}": [p for p in prompts[:args.batch // args.group]
                                                                       for _ in range(args.group)],
               f"{args.batch} different prompts": prompts}
    generator = torch.Generator().manual_seed(args.seed)

    def samplers(rows, n):
        ids, mask = chars.left_pad(rows)
        config = GenerationConfig(do_sample=True, temperature=1.0, top_k=0, top_p=1.0, max_new_tokens=n,
                                  eos_token_id=None, pad_token_id=chars.PAD_ID, bos_token_id=chars.BOS_ID)

        def generate():
            out = hf.generate(input_ids=ids, attention_mask=mask, generation_config=config)
            assert out.shape[1] == ids.shape[1] + n
            return out

        def hf_policy():
            out = policy.sample(rows, n, 1.0, generator)
            assert all(len(t) == n for t, _, _ in out)
            return out

        def our_gpt():
            s = gpt_sample(gpt, ids, mask, n, 1.0, eos_id=NEVER, generator=generator)
            assert s.tokens.shape[1] == n
            return s.tokens.tolist(), s.logp.tolist()      # what TinyPolicy.sample hands back, as lists

        return {"generate": generate, "HFPolicy": hf_policy, "our GPT": our_gpt}

    print(f"toy_rl samplers vs transformers generate, CPU ({machine()})")
    print(f"model: {gpt.config.n_layer} layers, d_model {gpt.config.d_model}, {gpt.config.n_head} heads, vocab "
          f"{gpt.config.vocab_size}, context {gpt.config.block_size} (rung-2 warm start; GPT-2 twin for generate and "
          f"HFPolicy), float32; temperature 1, top_k 0, top_p 1, no stop token; {args.repeats} timed calls each "
          f"after {args.warmup} warm-up calls, rotating order; medians")
    print(f"  {'prompts':<22} {'new':>4} {'sampler':<9} {'ms/call':>8} {'tokens/s':>9} {'vs generate':>11}")
    ratios = {}
    with torch.no_grad():
        for layout, rows in layouts.items():
            for n in args.new:
                fns = samplers(rows, n)
                names = list(fns)
                for name in names:
                    for _ in range(args.warmup):
                        fns[name]()
                times = {name: [] for name in names}
                for i in range(args.repeats):
                    for name in names[i % len(names):] + names[:i % len(names)]:
                        t0 = time.perf_counter()
                        fns[name]()
                        times[name].append(time.perf_counter() - t0)
                med = {name: statistics.median(t) for name, t in times.items()}
                for name in names:
                    ratio = med["generate"] / med[name]
                    ratios[(layout, n, name)] = ratio
                    print(f"  {layout:<22} {n:>4} {name:<9} {med[name] * 1e3:8.1f} {len(rows) * n / med[name]:9.0f} "
                          f"{ratio:10.2f}x")
    print("vs generate = generate's time / this sampler's time (> 1: faster than generate). Ours also record each "
          "token's log-prob; generate here does not.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
