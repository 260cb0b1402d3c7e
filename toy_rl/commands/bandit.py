"""`toy-rl bandit`: the three clipping rules on a tabular softmax bandit under staleness."""
from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

from ..bandit.config import BanditConfig
from ..bandit.presets import get_preset
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
    common.train()
    common.sized("--staleness", list(STALENESSES), list(RUNG1_SMOKE["stalenesses"]),
                 "one or more staleness levels, 0 = on-policy", type=nonnegative_int, group=p, nargs="+", metavar="K")
    # default None: a flag given can be told from one left out (--compare applies only the given ones to its preset)
    p.add_argument("--mode", help=f"reuse: one batch for staleness+1 updates; lag: behaviour policy staleness "
                                  f"updates old (default {d.mode}; --compare: both)")
    p.add_argument("--preset", help=f"{', '.join(PRESETS)} (default {d.preset})")
    p.add_argument("--pg", help=f"vanilla or natural policy gradient (default {d.pg})")
    p.add_argument("--advantage", help=f"grpo or drgrpo (default {d.advantage})")
    p.add_argument("--lr", type=positive_float, help=f"step size η (default {d.lr}; natural PG wants ~0.03)")
    p.add_argument("--tokens", type=int_at_least(2), help=f"K, tokens per context (default {d.n_tokens})")
    p.add_argument("--contexts", type=positive_int, help=f"S, contexts per seed (default {d.n_contexts})")
    p.add_argument("--task-seed", type=nonnegative_int, help=f"which instance of the preset (default {d.task_seed})")
    p.add_argument("--compare", nargs="?", const="long-failures", default=None, metavar="PRESET",
                   help="instead of a sweep: the default comparison on a named setting (toy_rl.bandit.presets; default "
                        "long-failures, negatives dominate; balanced is the control): the three rules and the "
                        "controls, reuse and lag at staleness 2 and 4, paired by seed, Holm-adjusted. --lr, --tokens, "
                        "--contexts, --group-size, --task-seed, --pg, --advantage and --steps change the setting; "
                        "--mode and --staleness pick the cells")
    p.add_argument("--grid", nargs="?", type=Path, const=Path("runs/bandit-grid"), default=None, metavar="DIR",
                   help="with --compare: the robustness grid, the comparison at η x 0.5, 1, 2 on task instances 0, 1, "
                        "2 (toy_rl.bandit.grid): a verdict per grid cell and one across the grid; each cell is "
                        "written as it finishes under DIR (default runs/bandit-grid) and read back when rerun")
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


SETTING_FLAGS = ("tokens", "contexts", "group_size", "steps", "lr", "pg", "advantage", "task_seed")
NOT_IN_COMPARE = {"--preset": "name the setting as --compare PRESET",
                  "--out": "it writes no file (use --json; --grid DIR names the grid's folder)",
                  "--rule": "it runs the three rules and every control"}


def given(args) -> dict:
    """{BanditConfig field: value} for the setting flags given on the command line (left-out ones are None, or
    not in ``args._given`` for the sized flags)."""
    field = {flag.lstrip("-").replace("-", "_"): name for name, flag in OPTION_OF.items()}
    out = {}
    for dest in (*SETTING_FLAGS, "mode", "preset"):
        value = getattr(args, dest, None)
        sized = dest in getattr(args, "_full", {})
        if value is not None and (not sized or dest in args._given):
            out[field[dest]] = value
    return out


def config_of(args, base: BanditConfig) -> BanditConfig:
    """``base`` with the given setting flags applied; a bad value is ValueError naming its flag."""
    try:
        return replace(base, **given(args))
    except ValueError as err:
        name = str(err).split()[0]
        raise ValueError(f"{OPTION_OF.get(name, name)}: {err}") from None


def steps_of(args) -> int | None:
    """--steps when given (or under --smoke), else None: the preset's own number of updates."""
    return args.steps if args.smoke or "steps" in args._given else None


def compare_cells(args) -> list:
    """The (mode, staleness) cells: the default four, or those --mode and --staleness pick."""
    from ..bandit.comparison import CELLS
    modes = [args.mode] if args.mode is not None else list(dict.fromkeys(m for m, _ in CELLS))
    ks = args.staleness if "staleness" in args._given else list(dict.fromkeys(k for _, k in CELLS))
    if 0 in ks:
        raise ValueError("--staleness: --compare compares stale updates; 0 (on-policy) makes every rule the same run")
    return [(m, k) for m in modes for k in ks]


def compare(args) -> int:
    """``--compare``: toy_rl.bandit.comparison.compare on a named setting, printed as its table (or JSON). The
    setting flags given change the preset (and are printed and returned with it); flags that cannot apply are
    refused by name."""
    from ..bandit.comparison import compare, comparison_verdicts, format_rows
    refused = {"--preset": args.preset is not None, "--out": args.out is not None, "--rule": not args._all_rules}
    for flag, why in NOT_IN_COMPARE.items():
        if refused[flag]:
            raise ValueError(f"{flag} does not apply to --compare: {why}")
    if args.grid is not None:
        return grid(args)
    config = config_of(args, get_preset(args.compare))    # an unknown name or a bad value: one line, before any work
    cells = compare_cells(args)
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    t0 = time.perf_counter()
    steps = steps_of(args)
    rows = compare(config, seeds=seeds, cells=cells, steps=steps, progress=show_progress(args))
    seconds = time.perf_counter() - t0
    setting = {k: v for k, v in replace(config, steps=steps or config.steps).to_dict().items() if k != "staleness"}
    if args.json:
        print_json(dict(preset=args.compare, config=setting, cells=cells, seeds=list(seeds), seconds=seconds,
                        rows=rows, verdicts=comparison_verdicts(rows)))
        return 0
    changed = ", ".join(f"{OPTION_OF[k]} {v}" for k, v in given(args).items() if k in setting)
    print(f"Bandit comparison on the {args.compare!r} setting" + (f" with {changed}" if changed else "")
          + f" (η = {config.lr:g}, {setting['steps']} updates), seeds {seeds.start}-{seeds.stop - 1}, {seconds:.0f} s")
    print(format_rows(rows))
    print("\n± is half the 95% t-interval over seeds; BAPO − rule: on the mean reward (the primary endpoint), paired "
          "by seed, with the p_holm of the verdicts' family (n/a: a control no claim tests)\n")
    for line in comparison_verdicts(rows):
        print(line, "\n")
    return 0


def grid(args) -> int:
    """``--compare --grid``: :func:`toy_rl.bandit.grid.run_grid`, printed as the verdicts per grid cell (or JSON)."""
    from ..bandit.grid import format_grid, grid_verdicts, run_grid
    varied = [flag for flag, name in (("--lr", "lr"), ("--task-seed", "task_seed")) if name in given(args)]
    if varied:
        raise ValueError(f"{varied[0]} does not apply to --grid: the grid varies the step size and the task instance")
    out = check_out(args.grid, "dir", "--grid")
    config_of(args, get_preset(args.compare))            # a bad value: one line, before any work
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    steps = steps_of(args)
    t0 = time.perf_counter()
    cells = run_grid(args.compare, seeds, out=out, steps=steps, cells=compare_cells(args), progress=show_progress(args))
    if args.json:
        verdicts = {claim: dict(v, cells={f"eta{f:g}-task{t}": s for (f, t), s in v["cells"].items()},
                                primary={f"eta{f:g}-task{t}": d for (f, t), d in v["primary"].items()})
                    for claim, v in grid_verdicts(cells).items()}
        print_json(dict(preset=args.compare, seeds=list(seeds), out=out, verdicts=verdicts))
        return 0
    print(f"Rung-1 robustness grid on {args.compare!r}, seeds {seeds.start}-{seeds.stop - 1}, "
          f"{time.perf_counter() - t0:.0f} s; cells under {out / args.compare}\n")
    print(format_grid(cells))
    return 0


def run(args) -> int:
    if args.compare is not None:
        return compare(args)
    if args.grid is not None:
        raise ValueError("--grid goes with --compare (the grid repeats the default comparison)")
    config = config_of(args, BanditConfig(staleness=args.staleness[0], steps=args.steps, group_size=args.group_size))
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
