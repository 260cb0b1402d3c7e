"""`toy-rl warmstart`: train (or find cached) the supervised warm start the rung-2 notebooks begin from."""
from __future__ import annotations

from .common import CommonFlags, check_out, print_json, probability, show_progress

NAME = "warmstart"
HELP = "train a small transformer on an arithmetic task to moderate accuracy (cached; the start point for RL)"


def add_arguments(p):
    p.add_argument("--task", default="add", help="add, countdown, scratchpad, or all (default %(default)s)")
    p.add_argument("--target-accuracy", type=probability, default=None,
                   help="stop once sampled validation accuracy reaches this (default: the task's)")
    p.add_argument("--force", action="store_true", help="retrain even if a cached checkpoint exists")
    common = CommonFlags(p)
    common.seed("the random seed of the initialisation and the training batches")
    common.steps(None, help="training steps at most; stops earlier at --target-accuracy (default: the task's; "
                            "--max-steps is the old name)")
    common.alias("--max-steps", "--steps")
    common.out(None, "the cache folder (default $TOY_RL_CACHE, else ~/.cache/toy_rl; --cache-dir is the old name)")
    common.alias("--cache-dir", "--out")
    common.threads()
    common.device()
    common.json("one entry per task")
    common.no_progress()
    common.smoke("the notebooks' tiny warm start (1 layer, d_model 32, 30 steps): seconds, a check, not a result")


def run(args) -> int:
    from dataclasses import replace

    import torch

    from .. import timing
    from ..arithmetic.model import read_meta
    from ..arithmetic.tasks import TASKS, get_task
    from ..arithmetic.warmstart import (cache_dir, cache_path, default_config, ensure_warmstart, estimated_seconds,
                                        smoke_config)

    names = list(TASKS) if args.task == "all" else [args.task]
    tasks = [get_task(name) for name in names]                  # ValueError lists the task names
    check_out(cache_dir(args.out), "dir", "--out")               # the default cache folder, too
    torch.set_num_threads(args.threads)
    configs = []
    for name in names:
        config = replace(smoke_config(name) if args.smoke else default_config(name), seed=args.seed)
        if args.steps is not None:
            config = replace(config, max_steps=args.steps)
        if args.target_accuracy is not None:
            config = replace(config, target_accuracy=args.target_accuracy)
        configs.append(config)
    todo = [(t, c) for t, c in zip(tasks, configs) if args.force or not cache_path(t, c, args.out).exists()]
    if todo and timing.on_cpu(args.device):                   # one line first when training takes long
        what = ", ".join(t.name for t, _ in todo)
        timing.announce(f"training the rung-2 warm start{'s' if len(todo) > 1 else ''} for {what} "
                        f"({'--force' if args.force else 'not cached'} in {cache_dir(args.out)})",
                        sum(estimated_seconds(t, c) for t, c in todo),
                        up_to=any(c.target_accuracy <= 1 for _, c in todo))
    entries = []
    for name, task, config in zip(names, tasks, configs):
        cached = cache_path(task, config, args.out).exists() and not args.force
        with timing.quiet():
            path = ensure_warmstart(task, config, root=args.out, force=args.force, device=args.device,
                                    progress=show_progress(args))
        meta = read_meta(path)
        entries.append(dict(task=name, path=str(path), cached=cached, **{k: meta.get(k) for k in (
            "heldout_acc_greedy", "heldout_acc_sampled", "heldout_problems", "steps", "seconds", "params")}))
        if not args.json:
            print(f"{name}: held-out accuracy {meta['heldout_acc_greedy']:.1%} greedy, "
                  f"{meta['heldout_acc_sampled']:.1%} sampled (temperature 1) on {meta['heldout_problems']} "
                  f"problems; {meta['steps']} steps, {meta['seconds']:.0f} s to train, {meta['params']:,} parameters")
            print(f"  {'found in cache' if cached else 'saved'}: {path}")
    if args.json:
        print_json(entries)
    return 0
