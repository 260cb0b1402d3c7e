"""Benchmark: rung 3's RL step with the prompts' shared few-shot prefix run once, against once per prompt.

``HFPolicy.share_prefix`` (:mod:`toy_rl.lm.prefill`): every prompt of a rung-3 task starts with the same worked
examples (33 of the 40 tokens of ``add``). With it on, the sampler's prefill and the update's scoring run those
tokens once and copy their keys and values to each prompt; off, each distinct prompt runs whole. Two copies of our
loop (``bench_vs_trl.OurLoop``: sampling, rewards, one update) on SmolLM2-135M-Instruct with the same LoRA adapters
(seed 0), the workload of ``bench_lora_vs_trl.py`` by default (8 prompts x 8 answers of ``add``, at most 8 new
tokens, clip-higher), one with the prefix once and one without, step by step in turn on the same prompts; medians
after the warm-up steps. It prints the machine, both sides' steps split as ``bench_lora_vs_trl.py`` splits them, and
per prompt / once. The same seed draws the same answers on both sides in float32 (its mean answer and reward agree).
Run: python bench/bench_prefix.py [--steps 3 --warmup 1 --dtype auto --task add --max-new 8]
"""
from __future__ import annotations

import argparse

from bench_bf16 import lm_bench_start
from bench_vs_trl import OurLoop


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=3, help="measured RL steps per side (default %(default)s)")
    ap.add_argument("--warmup", type=int, default=1, help="untimed RL steps per side first (default %(default)s)")
    ap.add_argument("--dtype", default="auto", help="float32, bfloat16 or auto (default: bf16 where this CPU has "
                                                     "bf16 units)")
    ap.add_argument("--task", default="add", help="a rung-3 task (default add)")
    ap.add_argument("--max-new", type=int, default=8, help="new tokens at most (default %(default)s)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (default %(default)s)")
    args = ap.parse_args()
    if min(args.steps, args.max_new, args.threads) < 1 or args.warmup < 0:
        ap.error("--steps, --max-new and --threads must be at least 1, --warmup at least 0")
    from toy_rl.experiments.tasks import make_task
    from toy_rl.lm.run import make_policy
    if not lm_bench_start(args.threads):
        return 0
    task = make_task("lm", args.task)
    loops = {}
    for once in (False, True):
        policy = make_policy("smollm2-135m", task, 0, device="cpu", dtype=args.dtype, rank=16, alpha=32)
        policy.share_prefix = once
        loops[once] = OurLoop("prefix once" if once else "per prompt", policy, task, 8, 8, args.max_new, 3e-4)
    print(f"SmolLM2-135M-Instruct, {loops[True].policy.dtype}, task {args.task}: 8 prompts x 8 answers, <= "
          f"{args.max_new} new tokens, clip-higher, one update per batch; {args.steps} steps per side after "
          f"{args.warmup} warm-up, interleaved, medians")
    for _ in range(args.warmup + args.steps):
        for loop in loops.values():
            loop.step()
    per_prompt, once = (loops[k].side.report(args.warmup) for k in (False, True))
    print(f"per prompt / once: {once / per_prompt:.2f}x completions/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
