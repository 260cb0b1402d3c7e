"""Benchmark: BAPO's loss against the symmetric one on a (256 x 1024) batch.

Target (issue 2): BAPO's forward+backward costs at most 1.5x the symmetric
rule's, on CPU. Both are timed side by side in one run, interleaved, and the
ratio of medians is printed. Run: python bench/bench_clipping.py [--device cuda]
"""
from __future__ import annotations

import argparse
import platform
import statistics
import time

import torch

from toy_rl.clipping import BAPO, ClipHigher, Symmetric, policy_loss
from toy_rl.synthetic import stale_batch

TARGET = 1.5


def timed(fn, device) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--tokens", type=int, default=1024)
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="float32", choices=["float32", "float64", "bfloat16"])
    args = ap.parse_args()
    device, dtype = torch.device(args.device), getattr(torch, args.dtype)

    b = stale_batch(n_prompts=args.batch // 8, group_size=8, max_tokens=args.tokens, drift=0.3,
                    dtype=dtype, device=device)
    logp = b.logp.clone().requires_grad_()
    rules = {"symmetric": Symmetric(), "clip-higher": ClipHigher(), "bapo": BAPO(), "bapo-authors": BAPO.authors_code()}

    def step(rule):
        logp.grad = None
        loss, _ = policy_loss(logp, b.old_logp, b.advantages, b.mask, rule)
        loss.backward()

    times = {name: [] for name in rules}
    for _ in range(3):                                   # warm-up
        for rule in rules.values():
            step(rule)
    names = list(rules)
    for i in range(args.repeats):                        # interleaved, order rotated: same machine state for all
        for name in names[i % len(names):] + names[:i % len(names)]:
            times[name].append(timed(lambda: step(rules[name]), device))

    med = {name: statistics.median(t) * 1e3 for name, t in times.items()}
    print(f"policy_loss forward+backward, batch {args.batch} x {args.tokens} tokens, {args.dtype} on {device}"
          f" ({platform.processor() or platform.machine()}, {torch.get_num_threads()} threads, torch {torch.__version__})")
    for name, ms in med.items():
        print(f"  {name:<13} {ms:8.2f} ms   ratio to symmetric {ms / med['symmetric']:.2f}")
    ratio = med["bapo"] / med["symmetric"]
    ok = ratio <= TARGET
    print(f"BAPO / symmetric = {ratio:.2f} (target <= {TARGET}): {'met' if ok else 'NOT met'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
