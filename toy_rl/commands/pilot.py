"""`toy-rl pilot`: is BAPO's mechanism active in this setting? A short symmetric + BAPO run names the regime.

The gate of docs/protocol.md, section 2: "negatives-dominate" when ρ before BAPO's search is below ρ0 in a
majority of updates (its bounds then move), else "balanced" (BAPO is in effect the fixed rule [0.6, 1.2]).
Every comparison of rules states the regime it ran in.
"""
from __future__ import annotations

import json

from .common import DTYPES, CommonFlags, nonnegative_int, print_json, show_progress

NAME = "pilot"
HELP = ("a short symmetric + BAPO pilot that names the regime (negatives-dominate or balanced) before any comparison: "
        "λ, ρ before the search, how often BAPO's bounds moved, clip fractions, KL")
RESUMES = True

SHOWN = ("regime", "rho_below_target_frac", "search_moved_frac", "search_moved_frac_early", "search_moved_frac_late",
         "c_low_mean", "c_high_mean", "clip_frac_low", "clip_frac_high", "approx_kl", "updates", "seconds")


def add_arguments(p):
    p.add_argument("--rung", type=int, choices=(1, 2, 3), default=1, help="1 bandit, 2 arithmetic transformer, "
                   "3 LoRA on SmolLM2-135M (default %(default)s)")
    p.add_argument("--preset", default=None,
                   help="rung 1: a bandit preset (default long-failures; balanced is the control); rung 2: an "
                        "arithmetic preset (default long-failures; balanced is the control)")
    p.add_argument("--task", default="add", help="rung 3: the task (default %(default)s)")
    p.add_argument("--staleness", type=nonnegative_int, default=None, metavar="K",
                   help="staleness of the pilot (default: the preset's; rungs 1 and 3: 2)")
    p.add_argument("--mode", default=None, choices=("reuse", "epochs", "lag"),
                   help="kind of staleness (default: the preset's; rung 1's reuse is epoch reuse, it has no epochs)")
    p.add_argument("--dtype", default=None, type=str.lower, choices=DTYPES, metavar="DTYPE",
                   help="rung 3: the compute dtype, auto (bfloat16 where the CPU or GPU has fast bf16), float32 or "
                        "bfloat16 (default float32)")
    common = CommonFlags(p)
    common.train()
    common.seeds(None, help="pilot seeds (default: rung 1 8, rungs 2-3 1)")
    common.first_seed()
    common.steps(None, help="updates per pilot run (default: rung 1 150, rung 2 30, rung 3 8)")
    common.threads()
    common.out("runs/pilot", "root of the pilot's run folders (rungs 2-3; resumed if interrupted; rung 1 writes "
                             "nothing)")
    common.json("the pilot's summary")
    common.no_progress()
    common.smoke("a few updates only (a check that it runs, not a verdict)")


def _pilot(args) -> dict:
    n = args.seeds
    seeds = None if n is None else list(range(args.first_seed, args.first_seed + n))
    steps = args.steps
    if args.rung == 1:
        from dataclasses import replace

        from ..bandit.pilot import pilot
        from ..bandit.presets import DEFAULT, get_preset
        config = get_preset(args.preset or DEFAULT)
        if args.mode:
            config = replace(config, mode=args.mode)
        kw = {k: v for k, v in dict(seeds=seeds, staleness=args.staleness,
                                    steps=20 if args.smoke and steps is None else steps).items() if v is not None}
        return {"rung": 1, "preset": args.preset or DEFAULT, **pilot(config, **kw)}
    if args.rung == 2:
        from ..arithmetic.pilot import DEFAULT_PRESET, pilot
        over = {k: v for k, v in dict(staleness=args.staleness, mode=args.mode).items() if v is not None}
        kw = {k: v for k, v in dict(seeds=seeds, steps=4 if args.smoke and steps is None else steps).items()
              if v is not None}
        from ..arithmetic.presets import get_preset, smoke_preset
        preset = get_preset(args.preset or DEFAULT_PRESET)
        out = pilot(smoke_preset(preset) if args.smoke else preset, out=str(args.out), progress=show_progress(args),
                    **kw, **over)
        out.pop("records", None)
        return {"rung": 2, "preset": args.preset or DEFAULT_PRESET, **out}
    from ..lm.pilot import pilot
    kw = {k: v for k, v in dict(seeds=seeds, steps=steps, staleness=args.staleness, mode=args.mode,
                                dtype=args.dtype).items() if v is not None}
    return {"rung": 3, **pilot(args.task, out=args.out, smoke=args.smoke, progress=show_progress(args), **kw)}


def run(args) -> int:
    from ..threads import cpu_threads
    with cpu_threads(args.threads):
        result = _pilot(args)
    if args.json:
        print_json(result)
        return 0
    print(f"pilot, rung {result['rung']}" + (f", preset {result['preset']}" if result.get("preset") else "")
          + f": regime {result['regime']}")
    for key in SHOWN[1:]:
        if key in result:
            v = result[key]
            print(f"  {key:<26}{v:.3f}" if isinstance(v, float) else f"  {key:<26}{v}")
    for key in ("lambda", "rho_before", "rho_start"):
        if key in result:
            print(f"  {key:<26}{json.dumps(result[key])}")
    return 0
