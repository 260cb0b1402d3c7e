"""Benchmark: rung 2's default RL update (rollout + clipped update) and the pieces of notebook 04.

What is timed, each on CPU (torch on ``--threads`` threads, 1 by default: the fastest setting for this
211,520-parameter model on a small or busy CPU) and on CUDA when a GPU is present:

  * RL steps per second at the default settings (toy_rl.arithmetic.DEFAULTS: 16 prompts × 8 answers,
    lr 3e-4), through the public runner (``toy_rl.experiments.run``) with evaluation off: on-policy and reuse-4 on "add",
    on-policy and partial rollout (budget 8) on "scratchpad". The rate counts the loop's own per-step timer
    (rollout, reward, advantages, update, logging); the wall time adds loading the warm start;
  * one held-out evaluation (200 problems, greedy), as the runs do every 25 updates;
  * notebook 04's other pieces: the Entropy-Clip Rule check and the stored stale batch of its sliders.

From these it prints what the full rung-2 sweep and the notebooks' own fallback sweeps should take here.
Warm starts come from the cache (``toy-rl warmstart --task all`` trains them first if missing).
Run: python bench/bench_arithmetic.py [--steps 30] [--threads 1] [--device cpu cuda]
"""
from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time

import torch

from toy_rl.arithmetic import DEFAULTS, entropy_check
from toy_rl.experiments import make_spec, run
from toy_rl.threads import set_threads
from toy_rl.arithmetic.demos import stale_batch
from toy_rl.arithmetic.model.evaluate import evaluate
from toy_rl.arithmetic.tasks import get_task
from toy_rl.arithmetic.warmstart import load_warmstart

NB04_STEPS, NB05_STEPS = 60, 50      # QUICK_STEPS of notebooks 04 and 05 (their runs when runs/ lacks the sweep)
WORKLOADS = (("add", "on-policy", dict(staleness=0)), ("add", "reuse-4", dict(staleness=4)),
             ("scratchpad", "on-policy", dict(staleness=0)), ("scratchpad", "partial-8", dict(partial=8)))


def rl_rate(task: str, steps: int, device: str, **scenario) -> dict:
    """Steps per second of ``steps`` default RL updates (BAPO) from the cached warm start, evaluation off."""
    with tempfile.TemporaryDirectory() as out:
        t0 = time.perf_counter()
        recs = run(make_spec("arithmetic", task, rule="bapo", seed=0, out=out, device=device, progress=False,
                             steps=steps, eval_every=0, checkpoint_every=10 ** 6, threads=None, **scenario))
        wall = time.perf_counter() - t0
    step_s = sum(r.get("seconds", 0.0) for r in recs if not r.get("final"))
    updates = sum(1 for r in recs if "grad_norm" in r)
    return {"steps_per_s": steps / step_s, "updates": updates, "step_seconds": step_s, "wall": wall}


def eval_time(task: str, device: str) -> float:
    t = get_task(task)
    model = load_warmstart(t, device=device, progress=False)
    problems = t.heldout(DEFAULTS["eval_size"])
    t0 = time.perf_counter()
    evaluate(model, t, problems)
    return time.perf_counter() - t0


def run_time(rate: float, eval_s: float, steps: int) -> float:
    """Seconds for one run of ``steps`` updates with an evaluation every DEFAULTS["eval_every"] and at the end."""
    return steps / rate + (steps // DEFAULTS["eval_every"] + 2) * eval_s


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=30, help="RL updates timed per workload")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    ap.add_argument("--device", nargs="+", default=["cpu"] + (["cuda"] if torch.cuda.is_available() else []))
    args = ap.parse_args()
    set_threads(args.threads)
    for task in ("add", "scratchpad"):
        load_warmstart(task, progress=True)                       # trained once if not cached; not timed

    print(f"rung-2 benchmark on {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"torch {torch.__version__}, {args.threads} CPU thread(s); load average "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print(f"default RL update: {DEFAULTS['prompts']} prompts × {DEFAULTS['group_size']} answers, rule bapo, "
          f"{args.steps} updates timed per workload (evaluation off)\n")
    for device in args.device:
        rl_rate("add", 3, device)                                  # warm-up: imports, first kernels
        rates = {}
        for task, name, scenario in WORKLOADS:
            r = rl_rate(task, args.steps, device, **scenario)
            rates[task, name] = r["steps_per_s"]
            print(f"[{device}] {task:10} {name:9}: {r['steps_per_s']:6.2f} steps/s "
                  f"({r['updates']} updates in {args.steps} steps; wall {r['wall']:.1f} s incl. loading)")
        ev = {task: eval_time(task, device) for task in ("add", "scratchpad")}
        print(f"[{device}] held-out evaluation, {DEFAULTS['eval_size']} problems greedy: add {ev['add']:.2f} s, "
              f"scratchpad {ev['scratchpad']:.2f} s")
        t0 = time.perf_counter()
        entropy_check("add", device=device)
        t_check = time.perf_counter() - t0
        t0 = time.perf_counter()
        stale_batch("add", 8, device=device)
        t_stale = time.perf_counter() - t0
        print(f"[{device}] notebook 04: Entropy-Clip Rule check {t_check:.1f} s, stored stale batch (8 updates) "
              f"{t_stale:.1f} s")

        add = lambda k, steps: run_time(rates["add", "on-policy" if k == 0 else "reuse-4"], ev["add"], steps)
        sp = lambda name, steps: run_time(rates["scratchpad", name], ev["scratchpad"], steps)
        sweep_add = 3 * 3 * sum(add(k, DEFAULTS["steps"]) for k in (0, 2, 4, 8))
        sweep_sp = 3 * (sp("on-policy", DEFAULTS["steps"]) + 3 * sp("partial-8", DEFAULTS["steps"]))
        nb04 = 3 * 3 * sum(add(k, NB04_STEPS) for k in (0, 2, 4, 8))
        nb05 = 3 * (sp("on-policy", NB05_STEPS) + 4 * sp("partial-8", NB05_STEPS))     # + the small-batch control
        print(f"[{device}] estimates, 1 process: sweep on add (staleness 0 2 4 8 × 3 rules × 3 seeds × "
              f"{DEFAULTS['steps']} updates) {sweep_add / 60:.0f} min; scratchpad (on-policy symmetric + partial-8 × 3 "
              f"rules, 3 seeds) {sweep_sp / 60:.0f} min; notebook 04's own sweep ({NB04_STEPS} updates, "
              f"36 runs) {nb04 / 60:.0f} min; notebook 05's ({NB05_STEPS} steps, 15 runs) {nb05 / 60:.0f} min\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
