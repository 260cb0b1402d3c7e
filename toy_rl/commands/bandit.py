"""`toy-rl bandit`: the three clipping rules on a tabular softmax bandit under staleness."""
from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path

from ..bandit.config import BanditConfig
from ..bandit.experiments import RULES, STALENESSES, CurveWriter, format_table, summary_table, sweep
from . import expand_rules

NAME = "bandit"
HELP = "train a softmax bandit with symmetric / clip-higher / BAPO clipping under staleness; 95%% bands over seeds"

OPTION_OF = {"n_tokens": "--tokens", "n_contexts": "--contexts", "group_size": "--group", "steps": "--steps",
             "lr": "--lr", "mode": "--mode", "preset": "--preset", "pg": "--pg", "advantage": "--advantage",
             "task_seed": "--task-seed", "staleness": "--staleness"}


def add_arguments(p):
    d = BanditConfig()
    p.add_argument("--rule", nargs="+", default=["all"],
                   help=f"one or more of {', '.join(RULES)}, or all (default)")
    p.add_argument("--staleness", nargs="+", type=int, default=list(STALENESSES),
                   help="one or more staleness levels, 0 = on-policy (default %(default)s)")
    p.add_argument("--steps", type=int, default=d.steps, help="optimizer updates (default %(default)s)")
    p.add_argument("--seeds", type=int, default=20, help="how many seeds, run side by side (default %(default)s)")
    p.add_argument("--first-seed", type=int, default=0, help="seeds are first-seed, first-seed + 1, ...")
    p.add_argument("--mode", default=d.mode, help="reuse: one batch for staleness+1 updates; lag: behaviour policy "
                                                  "staleness updates old (default %(default)s)")
    p.add_argument("--preset", default=d.preset,
                   help="rare-correct, bernoulli, one-correct or graded (default %(default)s)")
    p.add_argument("--pg", default=d.pg, help="vanilla or natural policy gradient (default %(default)s)")
    p.add_argument("--advantage", default=d.advantage, help="grpo or drgrpo (default %(default)s)")
    p.add_argument("--lr", type=float, default=d.lr, help="step size η (default %(default)s; natural PG wants ~0.03)")
    p.add_argument("--tokens", type=int, default=d.n_tokens, help="K, tokens per context (default %(default)s)")
    p.add_argument("--contexts", type=int, default=d.n_contexts, help="S, contexts per seed (default %(default)s)")
    p.add_argument("--group", type=int, default=d.group_size, help="G, samples per context (default %(default)s)")
    p.add_argument("--task-seed", type=int, default=d.task_seed, help="which instance of the preset")
    p.add_argument("--out", type=Path, default=None,
                   help="curves file (JSON lines; default runs/bandit/<preset>-<mode>-<pg>.jsonl); "
                        "the summary goes beside it as .summary.json")
    p.add_argument("--json", action="store_true", help="print the summary rows as one JSON object")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def _clean(x):
    """NaN/inf -> None so the output is strict JSON."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _clean(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_clean(v) for v in x]
    return x


def run(args) -> int:
    rules = expand_rules(args.rule)
    if args.seeds < 1:
        raise ValueError(f"--seeds must be >= 1; got {args.seeds}")
    if args.first_seed < 0:
        raise ValueError(f"--first-seed must be >= 0; got {args.first_seed}")
    for k in args.staleness:
        if k < 0:
            raise ValueError(f"--staleness must be >= 0 (0 = on-policy); got {k}")
    try:
        config = BanditConfig(n_tokens=args.tokens, n_contexts=args.contexts, group_size=args.group,
                              preset=args.preset, steps=args.steps, lr=args.lr, staleness=args.staleness[0],
                              mode=args.mode, pg=args.pg, advantage=args.advantage, task_seed=args.task_seed)
    except ValueError as err:
        field = str(err).split()[0]
        raise ValueError(f"{OPTION_OF.get(field, field)}: {err}") from None
    out = args.out or Path("runs/bandit") / f"{config.preset}-{config.mode}-{config.pg}.jsonl"
    progress = not args.json and not args.no_progress and sys.stderr.isatty()
    seeds = range(args.first_seed, args.first_seed + args.seeds)

    t0 = time.perf_counter()
    results = sweep(config, args.staleness, rules, seeds, progress=progress, on_result=CurveWriter(out, config))
    seconds = time.perf_counter() - t0
    rows = summary_table(results)
    summary = _clean(dict(config={k: v for k, v in config.to_dict().items() if k != "staleness"},
                          rules=rules, staleness=args.staleness, seeds=args.seeds, first_seed=args.first_seed,
                          seconds=seconds, curves=str(out), rows=rows))
    summary_path = out.with_suffix(".summary.json")
    summary_path.write_text(json.dumps(summary, indent=1))
    if args.json:
        print(json.dumps(summary))
        return 0
    c = config
    print(f"Bandit: preset {c.preset}, K={c.n_tokens} tokens, S={c.n_contexts} contexts, G={c.group_size} samples, "
          f"{c.steps} updates, η={c.lr}, {c.pg} PG, {c.advantage} advantages, staleness by {c.mode}; "
          f"{args.seeds} seeds, {seconds:.1f} s\n")
    print(format_table(rows))
    print("\nfinal H / final R: exact entropy and expected reward after the last update; mean R: expected reward")
    print("averaged over all updates (learning speed); H@half: entropy when the reward first got halfway to its best.")
    print("± is the 95% t-interval over seeds; p: Welch t-test against symmetric at the same staleness.")
    print("rho: positive share of the loss over gradient-carrying tokens (BAPO target 0.4); clip lo/hi: share of")
    print("samples clipped (A<0, r<c_low / A>0, r>c_high); |g|max: largest logit-gradient norm;")
    print("all means over updates.")
    print(f"\nCurves: {out}\nSummary: {summary_path}")
    return 0
