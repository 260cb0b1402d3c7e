"""Benchmark: the bandit's default sweep and the Entropy-Clip Rule check.

Targets (rung 1 issue), on a 2-core laptop-class CPU:
  * the full sweep, staleness {0, 2, 4, 8} × {symmetric, clip-higher, BAPO} × 20 seeds
    at the default BanditConfig: at most 60 s;
  * the Entropy-Clip Rule verification on 10,000 random instances: at most 5 s.
Each is run once (plus a small warm-up); timings and whether each target was met are printed.
Run: python bench/bench_bandit.py
"""
from __future__ import annotations

import argparse
import os
import platform
import time

import torch

from toy_rl.bandit import BanditConfig
from toy_rl.bandit.entropy_rule import verify
from toy_rl.bandit.experiments import RULES, STALENESSES, sweep

SWEEP_TARGET_S = 60.0
VERIFY_TARGET_S = 5.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--instances", type=int, default=10_000)
    args = ap.parse_args()

    config = BanditConfig()
    sweep(BanditConfig(steps=5), stalenesses=(0, 2), seeds=range(2))          # warm-up: imports, first calls
    verify(instances=100)

    t0 = time.perf_counter()
    sweep(config, STALENESSES, RULES, range(args.seeds))
    t_sweep = time.perf_counter() - t0
    t0 = time.perf_counter()
    report = verify(instances=args.instances)
    t_verify = time.perf_counter() - t0

    print(f"bandit benchmark on {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"torch {torch.__version__} (the bandit runs on 1 thread)")
    print(f"  sweep {len(STALENESSES)} staleness x {len(RULES)} rules x {args.seeds} seeds, {config.steps} updates, "
          f"K={config.n_tokens} S={config.n_contexts} G={config.group_size}: {t_sweep:6.2f} s "
          f"(target <= {SWEEP_TARGET_S:.0f} s: {'met' if t_sweep <= SWEEP_TARGET_S else 'NOT met'})")
    print(f"  Entropy-Clip Rule check, {args.instances} instances: {t_verify:6.2f} s "
          f"(target <= {VERIFY_TARGET_S:.0f} s: {'met' if t_verify <= VERIFY_TARGET_S else 'NOT met'}); "
          f"slope {report['error_slope']:.3f}, sign agreement {report['sign_agreement']:.4f}")
    return 0 if (t_sweep <= SWEEP_TARGET_S and t_verify <= VERIFY_TARGET_S) else 1


if __name__ == "__main__":
    raise SystemExit(main())
