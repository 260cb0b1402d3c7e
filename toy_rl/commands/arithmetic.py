"""`toy-rl arithmetic`: rung 2, RL on the small arithmetic transformer under staleness and partial rollout."""
from __future__ import annotations

import time
from pathlib import Path

from ..arithmetic import DEFAULTS, entropy_check
from ..arithmetic.run import SMOKE
from ..arithmetic.tasks import TASKS
from ..experiments import experiment_name, format_table, grid, summarize, sweep
from ..report.runs import RUNG2_SMOKE_SEEDS
from ..threads import set_threads
from .common import CommonFlags, nonnegative_int, positive_float, positive_int, print_json, show_progress

NAME = "arithmetic"
HELP = "RL on a small transformer (arithmetic tasks) with symmetric / clip-higher / BAPO under staleness"
RESUMES = True


def add_arguments(p):
    p.add_argument("--task", default=None, help=f"one of {', '.join(TASKS)} (default add)")
    p.add_argument("--staleness", type=nonnegative_int, nargs="+", default=None, metavar="K",
                   help="K values (0 = on-policy); default 0, or none when --partial is given alone")
    p.add_argument("--mode", default=None, choices=("reuse", "epochs", "lag"),
                   help="reuse: one rollout split into K+1 disjoint mini-batches, one per update; epochs: one batch used for K+1 updates (PPO epochs); lag: sampled by the policy K updates behind (default reuse)")
    p.add_argument("--partial", type=positive_int, default=None, metavar="BUDGET",
                   help="run partial rollout with this many tokens per answer per step (besides --staleness "
                        "when that is given too)")
    p.add_argument("--compare", nargs="?", const="long-failures", default=None, metavar="PRESET",
                   help="instead of a sweep: the default comparison on a named setting (toy_rl.arithmetic.presets; "
                        "default long-failures, negatives dominate; balanced is the control): the three rules and the "
                        "controls on the preset's staleness and its number of updates (or --steps), paired by seed, "
                        "Holm-adjusted; use --seeds 10 (or more) for a result, runs under <out>/compare/")
    p.add_argument("--grid", action="store_true",
                   help="with --compare: the comparison at the preset's step size x 0.5, 1 and 2 "
                        "(toy_rl.arithmetic.step_grid: the three rules and BAPO's mean bounds at each, every control at "
                        "the preset's own), a verdict per step size and one across them; logged runs are read back")
    p.add_argument("--workers", type=positive_int, default=1, metavar="N",
                   help="with --compare: runs at once, each in its own process on --threads threads (default 1; "
                        "2 on a free 2-core machine)")
    common = CommonFlags(p)
    common.train()
    common.sized("--prompts", DEFAULTS["prompts"], SMOKE["prompts"], "prompts per update", group=p, metavar="N")
    p.add_argument("--lr", type=positive_float, default=None,
                   help=f"step size (default {DEFAULTS['lr']}; with --compare: the preset's, and a given one runs the "
                        "comparison as its own preset, <preset>-lr<value>, in its own folder)")
    p.add_argument("--entropy-check", action="store_true",
                   help="instead of training: check ΔH ≈ −Cov(log π, Δz) for one update of the warm-started model")
    common.rule()
    common.seeds(3, RUNG2_SMOKE_SEEDS)
    common.first_seed()
    common.steps(DEFAULTS["steps"], SMOKE["steps"])
    common.group_size(DEFAULTS["group_size"], SMOKE["group_size"])
    common.threads()
    common.device()
    common.out(Path("runs"), "root of the run folders: <out>/arithmetic-<task>[-smoke]/<scenario>/<rule>/seed<k>, "
                             "each resumed if interrupted")
    common.json("the summary rows")
    common.no_progress()
    common.smoke(f"the notebooks' tiny warm start and {SMOKE['steps']} updates on small batches, in seconds "
                 "(a check, not a result)")


def compare(args) -> int:
    """``--compare``: toy_rl.arithmetic.comparison.compare on a preset, printed as its table (or JSON)."""
    from ..arithmetic.comparison import compare, comparison_checks, format_rows, gate_line, preset_rules
    from ..arithmetic.presets import get_preset, smoke_preset, with_lr
    from ..card import verdict_card
    from ..verdicts import verdict_line
    refused = {"--task": args.task is not None, "--mode": args.mode is not None, "--partial": args.partial is not None,
               "--staleness": args.staleness is not None, "--prompts": "prompts" in args._given,
               "--group-size": "group_size" in args._given, "--entropy-check": args.entropy_check}
    for flag, given in refused.items():
        if given:
            raise ValueError(f"{flag} does not apply to --compare: the preset fixes it (toy_rl.arithmetic.presets)")
    preset = get_preset(args.compare)                     # an unknown name is one line, before any work
    if args.smoke:
        preset = smoke_preset(preset)
    if args.lr is not None:                               # its own preset: runs at another step size never mix
        preset = with_lr(preset, args.lr)
    rules = None
    if not args._all_rules:                               # the named rules (and BAPO's mean bounds, if BAPO is one)
        rules = {label: rule for label, rule in preset_rules(preset).items() if label in args.rule}
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    t0 = time.perf_counter()
    steps = args.steps if "steps" in args._given else None         # default: the preset's number of updates
    settings = dict(steps=steps, out=args.out / "compare", workers=args.workers, device=args.device,
                    progress=show_progress(args) and args.workers == 1)
    if args.grid:
        return _grid(args, preset, seeds, settings, t0)
    result = compare(preset, seeds=seeds, rules=rules, **settings)
    checks = comparison_checks(result)
    result["verdicts"] = [verdict_line(v) for v in checks]
    result.pop("runs")
    result["seconds"] = time.perf_counter() - t0
    if args.json:
        print_json(result)
        return 0
    print(f"Rung-2 comparison on the {preset.name!r} preset ({result['scenario']}, {result['steps']} "
          f"{'steps' if preset.rl.get('partial') else 'updates'}), seeds {seeds.start}-{seeds.stop - 1}, "
          f"{result['seconds']:.0f} s")
    print(gate_line(result))
    print(format_rows(result["rows"]))
    need = result["seeds_for_3_points"]
    print("\n± is half the 95% t-interval over seeds; BAPO − rule: on the primary endpoint (auc: greedy held-out "
          "accuracy averaged over training), paired by seed, with the p_holm of the verdicts' family (n/a: a control "
          "no claim tests); clip: share of tokens clipped below/above."
          + (f" Seeds a paired test needs to see 3 points of auc at this scatter (80% power): {need}." if need else ""))
    print(f"Runs: {args.out / 'compare' / preset.name}/<scenario>/<rule>/seed<k>/metrics.jsonl\n")
    print(verdict_card(checks, title="The verdicts (every paired test: --json)"))
    return 0


def _grid(args, preset, seeds, settings, t0) -> int:
    """``--compare --grid``: the comparison at three step sizes (toy_rl.arithmetic.step_grid)."""
    from ..arithmetic.step_grid import format_step_grid, run_step_grid, step_grid_verdicts
    if args.lr is not None or not args._all_rules:
        raise ValueError("--grid fixes the step sizes and the rules; drop --lr and --rule")
    grid = run_step_grid(preset, seeds, **settings)
    if args.json:
        print_json(dict(cells={f"{f:g}": {k: v for k, v in r.items() if k != "runs"} for f, r in grid.items()},
                        verdicts=step_grid_verdicts(grid), seconds=time.perf_counter() - t0))
        return 0
    print(f"Rung-2 comparison on {preset.name!r} at {len(grid)} step sizes, seeds {seeds.start}-{seeds.stop - 1}, "
          f"{time.perf_counter() - t0:.0f} s")
    print(format_step_grid(grid))
    return 0


def run(args) -> int:
    if args.compare is not None:
        return compare(args)
    if args.grid:
        raise ValueError("--grid applies to --compare only (the comparison at three step sizes)")
    from ..arithmetic.tasks import get_task
    args.task, args.mode = args.task or "add", args.mode or "reuse"
    args.lr = DEFAULTS["lr"] if args.lr is None else args.lr
    get_task(args.task)                              # an unknown task fails before any work
    if args.staleness is None:                       # --partial alone runs only the partial-rollout scenario
        args.staleness = [] if args.partial is not None else [0]
    if args.entropy_check:
        set_threads(args.threads)
        return _entropy_check(args, args.rule)
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    results = sweep(grid("arithmetic", args.task, args.rule, args.staleness, seeds, args.mode, args.partial,
                         out=args.out, smoke=args.smoke, progress=show_progress(args), steps=args.steps, lr=args.lr,
                         device=args.device, prompts=args.prompts, group_size=args.group_size, threads=args.threads))
    rows = summarize(results)
    if args.json:
        print_json(rows)
        return 0
    print(format_table(rows))
    print("\nfinal_accuracy: greedy accuracy on the fixed held-out set after the last update (± half the 95% "
          "t-interval over seeds); auc: accuracy averaged over training; diff/p vs symmetric: paired t-test by seed "
          "in the same scenario; other columns: means over updates.")
    folder = args.out / experiment_name("arithmetic", args.task, smoke=args.smoke)
    print(f"Metrics (one JSON line per update): {folder}/<scenario>/<rule>/seed<k>/metrics.jsonl")
    return 0


def _entropy_check(args, rules) -> int:
    report = entropy_check(args.task, rules, device=args.device, seed=args.first_seed)
    keys = ("positions", "correlation", "sign_agreement", "median_rel_error", "quadrant_dH", "quadrant_clipped")
    rows = {r: {k: report[r][k] for k in keys} for r in rules}
    if args.json:
        print_json({"rules": rows, "error_slope": report["error_slope"]})
        return 0
    for r, row in rows.items():
        print(f"{r:<12} positions {row['positions']}, correlation {row['correlation']:.4f}, "
              f"sign agreement {row['sign_agreement']:.4f}, median relative error {row['median_rel_error']:.4f}")
        for q, dh in row["quadrant_dH"].items():
            print(f"    {q:<14} ΔH {dh:+.4f}   clipped {row['quadrant_clipped'][q]:.2f}")
    print(f"error slope against η (log-log, {rules[-1]}): {report['error_slope']:.2f} (≈ 2: first order)")
    return 0
