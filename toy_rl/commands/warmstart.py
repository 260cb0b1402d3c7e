"""`toy-rl warmstart`: train (or find cached) the supervised warm start the rung-2 notebooks begin from."""
from __future__ import annotations

NAME = "warmstart"
HELP = "train a small transformer on an arithmetic task to moderate accuracy (cached; the start point for RL)"


def add_arguments(p):
    p.add_argument("--task", default="add", help="add, countdown, scratchpad, or all (default %(default)s)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-steps", type=int, default=None, help="training steps at most (default: the task's)")
    p.add_argument("--target-accuracy", type=float, default=None,
                   help="stop once sampled validation accuracy reaches this (default: the task's)")
    p.add_argument("--device", default="auto", help="auto (CUDA if available), cpu or cuda")
    p.add_argument("--cache-dir", default=None, help="default $TOY_RL_CACHE or ~/.cache/toy_rl")
    p.add_argument("--threads", type=int, default=None,
                   help="CPU threads for torch (default: torch's choice; 1 is steadier on a busy machine)")
    p.add_argument("--force", action="store_true", help="retrain even if a cached checkpoint exists")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def run(args) -> int:
    from dataclasses import replace

    from ..arithmetic.model import read_meta
    from ..arithmetic.tasks import TASKS, get_task
    from ..arithmetic.warmstart import cache_path, default_config, ensure_warmstart

    if args.threads is not None:
        if args.threads < 1:
            raise ValueError(f"--threads must be >= 1; got {args.threads}")
        import torch
        torch.set_num_threads(args.threads)
    names = list(TASKS) if args.task == "all" else [args.task]
    for name in names:
        task = get_task(name)                                  # ValueError lists the task names
        config = replace(default_config(name), seed=args.seed)
        if args.max_steps is not None:
            if args.max_steps < 1:
                raise ValueError(f"--max-steps must be >= 1; got {args.max_steps}")
            config = replace(config, max_steps=args.max_steps)
        if args.target_accuracy is not None:
            config = replace(config, target_accuracy=args.target_accuracy)
        cached = cache_path(task, config, args.cache_dir).exists() and not args.force
        path = ensure_warmstart(task, config, root=args.cache_dir, force=args.force, device=args.device,
                                progress=not args.no_progress)
        meta = read_meta(path)
        print(f"{name}: held-out accuracy {meta['heldout_acc_greedy']:.1%} greedy, "
              f"{meta['heldout_acc_sampled']:.1%} sampled (temperature 1) on {meta['heldout_problems']} problems; "
              f"{meta['steps']} steps, {meta['seconds']:.0f} s to train, {meta['params']:,} parameters")
        print(f"  {'found in cache' if cached else 'saved'}: {path}")
    return 0
