"""`toy-rl bandit`: the three clipping rules on a tabular softmax bandit under staleness."""
from __future__ import annotations

import time
from pathlib import Path

from ..bandit.config import BanditConfig
from ..bandit.rewards import PRESETS
from ..bandit.experiments import STALENESSES, CurveWriter, format_table, summary_table, sweep
from ..report.runs import RUNG1_SMOKE
from .common import (CommonFlags, check_out, dumps, int_at_least, nonnegative_int, positive_float, positive_int,
                     print_json, show_progress)

NAME = "bandit"
HELP = "train a softmax bandit with symmetric / clip-higher / BAPO clipping under staleness; 95% bands over seeds"

OPTION_OF = {"n_tokens": "--tokens", "n_contexts": "--contexts", "group_size": "--group-size", "steps": "--steps",
             "lr": "--lr", "mode": "--mode", "preset": "--preset", "pg": "--pg", "advantage": "--advantage",
             "task_seed": "--task-seed", "staleness": "--staleness"}


def add_arguments(p):
    d = BanditConfig()
    common = CommonFlags(p)
    common.sized("--staleness", list(STALENESSES), list(RUNG1_SMOKE["stalenesses"]),
                 "one or more staleness levels, 0 = on-policy", type=nonnegative_int, group=p, nargs="+", metavar="K")
    p.add_argument("--mode", default=d.mode, help="reuse: one batch for staleness+1 updates; lag: behaviour policy "
                                                  "staleness updates old (default %(default)s)")
    p.add_argument("--preset", default=d.preset, help=f"{', '.join(PRESETS)} (default %(default)s)")
    p.add_argument("--pg", default=d.pg, help="vanilla or natural policy gradient (default %(default)s)")
    p.add_argument("--advantage", default=d.advantage, help="grpo or drgrpo (default %(default)s)")
    p.add_argument("--lr", type=positive_float, default=d.lr,
                   help="step size η (default %(default)s; natural PG wants ~0.03)")
    p.add_argument("--tokens", type=int_at_least(2), default=d.n_tokens,
                   help="K, tokens per context (default %(default)s)")
    p.add_argument("--contexts", type=positive_int, default=d.n_contexts,
                   help="S, contexts per seed (default %(default)s)")
    p.add_argument("--task-seed", type=nonnegative_int, default=d.task_seed, help="which instance of the preset")
    p.add_argument("--compare", nargs="?", const="long-failures", default=None, metavar="PRESET",
                   help="instead of a sweep: the default comparison on a named setting (toy_rl.bandit.presets; default "
                        "long-failures, negatives dominate; balanced is the control): the three rules and the "
                        "controls, reuse and lag at staleness 2 and 4, paired by seed, Holm-adjusted")
    common.rule()
    common.seeds(20, RUNG1_SMOKE["seeds"], "how many seeds, run side by side; 95%% bands need 2 or more")
    common.first_seed()
    common.steps(d.steps, RUNG1_SMOKE["steps"], "optimizer updates")
    common.group_size(d.group_size, help="G, samples per context")
    common.alias("--group", "--group-size")
    common.out(None, "curves file (JSON lines; default runs/bandit/<preset>-<mode>-<pg>.jsonl); the summary goes "
                     "beside it as .summary.json", kind="file")
    common.json("the summary (settings and rows)")
    common.no_progress()
    common.smoke()


def compare(args) -> int:
    """``--compare``: toy_rl.bandit.comparison.compare on a named setting, printed as its table (or JSON)."""
    from ..bandit.comparison import compare, comparison_verdicts, format_rows
    from ..bandit.presets import get_preset
    get_preset(args.compare)                              # an unknown name is one line, before any work
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    t0 = time.perf_counter()
    rows = compare(args.compare, seeds=seeds, steps=args.steps if args.smoke else None, progress=show_progress(args))
    seconds = time.perf_counter() - t0
    if args.json:
        print_json(dict(preset=args.compare, seeds=list(seeds), seconds=seconds, rows=rows,
                        verdicts=comparison_verdicts(rows)))
        return 0
    print(f"Bandit comparison on the {args.compare!r} setting, seeds {seeds.start}-{seeds.stop - 1}, {seconds:.0f} s")
    print(format_rows(rows))
    print("\n± is half the 95% t-interval over seeds; Δ: BAPO minus the row's rule, paired by seed, p Holm-adjusted "
          "over the table; regime: the pilot gate on BAPO's updates (docs/protocol.md)\n")
    for line in comparison_verdicts(rows):
        print(line, "\n")
    return 0


def run(args) -> int:
    if args.compare is not None:
        return compare(args)
    try:
        config = BanditConfig(n_tokens=args.tokens, n_contexts=args.contexts, group_size=args.group_size,
                              preset=args.preset, steps=args.steps, lr=args.lr, staleness=args.staleness[0],
                              mode=args.mode, pg=args.pg, advantage=args.advantage, task_seed=args.task_seed)
    except ValueError as err:
        field = str(err).split()[0]
        raise ValueError(f"{OPTION_OF.get(field, field)}: {err}") from None
    out = check_out(args.out or Path("runs/bandit") / f"{config.preset}-{config.mode}-{config.pg}.jsonl", "file")
    rules = args.rule
    seeds = range(args.first_seed, args.first_seed + args.seeds)

    t0 = time.perf_counter()
    results = sweep(config, args.staleness, rules, seeds, progress=show_progress(args),
                    on_result=CurveWriter(out, config))
    seconds = time.perf_counter() - t0
    rows = summary_table(results)
    summary = dict(config={k: v for k, v in config.to_dict().items() if k != "staleness"},
                   rules=rules, staleness=args.staleness, seeds=args.seeds, first_seed=args.first_seed,
                   smoke=args.smoke, seconds=seconds, curves=str(out), rows=rows)
    summary_path = out.with_suffix(".summary.json")
    summary_path.write_text(dumps(summary, indent=1))
    if args.json:
        print_json(summary)
        return 0
    c = config
    print(f"Bandit: preset {c.preset}, K={c.n_tokens} tokens, S={c.n_contexts} contexts, G={c.group_size} samples, "
          f"{c.steps} updates, η={c.lr}, {c.pg} PG, {c.advantage} advantages, staleness by {c.mode}; "
          f"{args.seeds} seeds, {seconds:.1f} s\n")
    print(format_table(rows))
    print("\nfinal_entropy / final_reward: exact entropy and expected reward after the last update; mean_reward:")
    print("expected reward averaged over all updates (learning speed); entropy_at_half: entropy when the reward first")
    print("got halfway to its best. ± is half the 95% t-interval over seeds (n/a with one seed); p_*: Welch t-test")
    print("against symmetric at the same staleness. rho: positive share of the loss over gradient-carrying tokens")
    print("(BAPO target 0.4); clip_frac_low / high: share of samples clipped (A<0, r<c_low / A>0, r>c_high);")
    print("grad_norm_max: largest logit-gradient norm; all means over updates.")
    print(f"\nCurves: {out}\nSummary: {summary_path}")
    return 0
