"""Benchmark: would bfloat16 speed up rung 2? float32 against bf16, side by side in one run, on rung 2's own work.

Rung 2's GPT (toy_rl.arithmetic.model.gpt, 211,520 parameters) runs about 170 small ops a forward, so its step
may be bound by per-op overhead rather than by matmul FLOPs, where bf16 cannot help. This measures it, for the
three pieces of an RL update at the default batch (16 prompts x 8 answers = 128 rows):

  1. score: the old log-probs, one forward without autograd (``token_logprobs``);
  2. update: forward + backward of the log-probs (float32: as rung 2 trains; bf16: ``torch.autocast`` with
     float32 master weights, the way a bf16 path would train);
  3. sample: ``sample`` of ``--new`` tokens after 16 prompts shared by 8 answers each (bf16: a bf16 copy of
     the weights).

Each pair is timed interleaved (fp32, bf16, fp32, bf16, ...) and reported as the ratio of medians, for short
answers (``add``-like: an 8-token prompt and 4 answer tokens) and long ones (``scratchpad``-like: 40 answer
tokens). Random weights and tokens: time does not depend on what the model has learned.
Run: python bench/bench_arithmetic_bf16.py [--repeats 9]
"""
from __future__ import annotations

import argparse
import copy
import os
import platform
import statistics
import time

import torch

from toy_rl.arithmetic.model.gpt import GPT
from toy_rl.arithmetic.model.sampling import sample
from toy_rl.arithmetic.model.scoring import token_logprobs
from toy_rl.arithmetic.model.tokenizer import VOCAB_SIZE
from toy_rl.threads import set_threads

PROMPTS, GROUP, PROMPT_LEN = 16, 8, 8


def batch(length: int, seed: int = 0):
    """128 rows of ``length`` random tokens (16 prompts of PROMPT_LEN tokens, each shared by 8 rows)."""
    g = torch.Generator().manual_seed(seed)
    prompts = torch.randint(4, VOCAB_SIZE, (PROMPTS, PROMPT_LEN), generator=g).repeat_interleave(GROUP, 0)
    answers = torch.randint(4, VOCAB_SIZE, (PROMPTS * GROUP, length - PROMPT_LEN), generator=g)
    ids = torch.cat([prompts, answers], 1)
    return ids, torch.ones_like(ids)


def score(model, ids, mask, bf16: bool):
    with torch.no_grad(), torch.autocast("cpu", torch.bfloat16, enabled=bf16):
        token_logprobs(model, ids, mask, PROMPT_LEN)


def update(model, ids, mask, bf16: bool):
    model.zero_grad(set_to_none=True)
    with torch.autocast("cpu", torch.bfloat16, enabled=bf16):
        logp = token_logprobs(model, ids, mask, PROMPT_LEN)
    logp.float().mean().backward()


def draw(model, ids, mask, new: int):
    sample(model, ids[:, :PROMPT_LEN], mask[:, :PROMPT_LEN], new, generator=torch.Generator().manual_seed(0),
           eos_id=-1)


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def pair(fp32, bf16, repeats: int) -> tuple[float, float]:
    """Median seconds of each, interleaved after one warm-up call each."""
    fp32(), bf16()
    a, b = [], []
    for _ in range(repeats):
        a.append(timed(fp32))
        b.append(timed(bf16))
    return statistics.median(a), statistics.median(b)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (rung 2 trains on 1)")
    ap.add_argument("--new", type=int, default=4, help="new tokens sampled per answer")
    args = ap.parse_args()
    set_threads(args.threads)
    torch.manual_seed(0)
    model = GPT()
    half = copy.deepcopy(model).to(torch.bfloat16).eval()
    print(f"rung-2 bf16 benchmark on {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"torch {torch.__version__}, {args.threads} thread(s), load average "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}; GPT {model.num_params():,} parameters, "
          f"{PROMPTS} prompts x {GROUP} answers, {args.repeats} repeats, ratio = float32 median / bf16 median")
    print(f"{'piece':36} {'float32 ms':>11} {'bf16 ms':>9} {'fp32/bf16':>10}")
    for name, length in (("add-like", 12), ("scratchpad-like", 48)):
        ids, mask = batch(length)
        rows = {
            "score (no autograd)": pair(lambda: score(model, ids, mask, False), lambda: score(model, ids, mask, True),
                                        args.repeats),
            "update (fwd + bwd)": pair(lambda: update(model, ids, mask, False), lambda: update(model, ids, mask, True),
                                       args.repeats),
        }
        if name == "add-like":
            rows[f"sample {args.new} tokens"] = pair(lambda: draw(model, ids, mask, args.new),
                                                     lambda: draw(half, ids, mask, args.new), args.repeats)
        for piece, (a, b) in rows.items():
            print(f"{name + ' ' + piece:36} {a * 1e3:11.1f} {b * 1e3:9.1f} {a / b:9.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
