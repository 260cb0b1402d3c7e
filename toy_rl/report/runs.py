"""The default comparison of each rung, run (or read back) through the runner, for the figures and the
reports. Nothing here trains or computes statistics itself:

* rung 1: :func:`toy_rl.bandit.comparison.compare` on the default preset (about a minute; always run now);
  figure 03 replays one run of the balanced bandit (:data:`RUNG1`);
* rung 2: :func:`toy_rl.arithmetic.comparison.compare` on the default preset under ``<runs>/compare`` (finished
  runs read back, the others run); figure 05 and the balanced control read
  :func:`toy_rl.arithmetic.sweep.load_or_sweep`'s logged runs under ``<runs>/arithmetic-<task>``, else run
  :func:`toy_rl.experiments.sweep` into the same folder, which resumes: a second call only reads;
* rung 3: :func:`toy_rl.experiments.sweep` of rung 3's grid under ``<runs>/smollm2-135m-add``, which reads back
  every finished run whose config matches and runs (or resumes) the others.

What this module adds is the bookkeeping a caption needs: which configuration the runs on disk were actually
made with (read from each run's ``config.json``), and whether that is the default full one.
"""
from __future__ import annotations

import contextlib
import json
import tempfile
from dataclasses import replace
from pathlib import Path

from ..arithmetic import DEFAULTS as RUNG2
from ..bandit import BanditConfig
from ..experiments import RULES, experiment_name, grid, read_dir
from ..experiments.logged import candidates
from ..experiments.layout import seed_of
from ..lm.load import llm_missing  # noqa: F401  (re-exported: the figures and reports skip rung 3 without it)
from ..experiments import sweep as run_sweep

# --- rung 1 ------------------------------------------------------------------------------------------

RUNG1 = dict(stalenesses=(0, 2, 4, 8), seeds=20, steps=BanditConfig().steps)
RUNG1_SMOKE = dict(stalenesses=(0, 2, 4), seeds=4, steps=100)


def bandit_note(cfg: BanditConfig, seeds: int) -> str:
    """The bandit's settings in a few words."""
    return (f"preset {cfg.preset}, K={cfg.n_tokens} tokens, S={cfg.n_contexts} contexts, G={cfg.group_size}, "
            f"{cfg.steps} updates, η={cfg.lr}, {cfg.pg} PG, staleness by {cfg.mode}; {seeds} seeds")


# rung 1's default comparison (toy_rl.bandit.comparison on its default preset): docs/findings.md, rung 1
BANDIT_COMPARE = dict(seeds=20, steps=None)             # steps None: the preset's 300 updates
BANDIT_COMPARE_SMOKE = dict(seeds=3, steps=40)


def bandit_comparison(seeds: int | None = None, steps: int | None = None, smoke: bool = False,
                      progress: bool = True) -> tuple[list, BanditConfig, str]:
    """Rung 1's default comparison (:func:`toy_rl.bandit.comparison.compare` on the default preset, every cell,
    the three rules and the controls; minutes, always run now): (rows, config, a note on what ran)."""
    from ..bandit.comparison import CELLS, cell_name, compare
    from ..bandit.presets import DEFAULT, get_preset
    c = BANDIT_COMPARE_SMOKE if smoke else BANDIT_COMPARE
    seeds, steps = seeds or c["seeds"], steps or c["steps"]
    cfg = get_preset(DEFAULT)
    cfg = replace(cfg, steps=steps or cfg.steps)
    rows = compare(cfg, seeds=range(seeds), progress=progress)
    cells = ", ".join(cell_name(dict(mode=m, staleness=k)) for m, k in CELLS)
    note = (f"preset {DEFAULT}: {cfg.preset} rewards, K={cfg.n_tokens} tokens, S={cfg.n_contexts} contexts, "
            f"G={cfg.group_size}, answers of {cfg.answer_len} tokens when right and {cfg.wrong_len} when wrong, "
            f"η={cfg.lr}, {cfg.pg} PG, {cfg.steps} updates; cells {cells}; {seeds} seeds")
    return rows, cfg, ("SMOKE (fewer seeds and updates; not a result): " if smoke else "") + note


def bandit_comparison_plan(seeds: int | None = None, steps: int | None = None, smoke: bool = False):
    """What :func:`bandit_comparison` will compute, for the estimate printed first (:mod:`toy_rl.timing`)."""
    from ..bandit.comparison import CELLS
    from ..bandit.presets import DEFAULT, get_preset
    from ..bandit.backend import comparison_seconds
    from ..experiments.plan import Plan
    c = BANDIT_COMPARE_SMOKE if smoke else BANDIT_COMPARE
    seeds, steps = seeds or c["seeds"], steps or c["steps"] or get_preset(DEFAULT).steps
    return Plan(extra=[(f"rung 1's comparison ({seeds} seeds x {steps} updates)",
                        comparison_seconds(seeds, steps, len(CELLS)))])


# --- rung 2 ------------------------------------------------------------------------------------------

RUNG2_SEEDS = 5        # the logged sweeps of figure 05 and of the balanced control (docs/findings.md, rung 2)
RUNG2_SMOKE_SEEDS = 2  # smoke: rung 2's SMOKE settings (toy_rl.arithmetic.run), the tiny warm start
RL_NOTE_KEYS = ("steps", "prompts", "group_size", "lr", "eval_size")


@contextlib.contextmanager
def runs_root(runs, smoke: bool):
    """Where the runs go: ``runs`` if given, else ``runs/`` for full runs and, for smoke runs, a temporary
    folder removed afterwards (smoke runs never land among the logged ones)."""
    if runs is not None or not smoke:
        yield Path(runs or "runs")
        return
    with tempfile.TemporaryDirectory(prefix="toy_rl_smoke_") as tmp:
        yield Path(tmp)


COMPARE_SEEDS = 10      # rung 2's default comparison (toy_rl.arithmetic.comparison): docs/findings.md, rung 2
COMPARE_SMOKE_SEEDS = 2


def arithmetic_comparison(runs, seeds: int | None = None, steps: int | None = None, smoke: bool = False,
                          progress: bool = True) -> tuple[dict, str, str]:
    """Rung 2's default comparison (:func:`toy_rl.arithmetic.comparison.compare` on the default preset) under
    ``<runs>/compare``: finished runs are read back, missing ones run (about an hour on a free 2-core CPU for the
    full one). Smoke: the preset shrunk by :func:`~toy_rl.arithmetic.presets.smoke_preset`. Returns (result,
    source line, config note)."""
    from ..arithmetic.comparison import compare, is_complete
    from ..arithmetic.presets import DEFAULT, get_preset, smoke_preset
    preset = smoke_preset(DEFAULT) if smoke else get_preset(DEFAULT)
    seeds = seeds or (COMPARE_SMOKE_SEEDS if smoke else COMPARE_SEEDS)
    out = Path(runs) / "compare"
    done = steps is None and is_complete(preset, range(seeds), out)
    result = compare(preset, range(seeds), steps=steps, out=out, progress=progress)
    rl = preset.rl
    note = (f"preset {preset.name}: task {preset.task}, {rl.get('mode')} {rl.get('staleness')}, lr {rl.get('lr')}, "
            f"{rl.get('prompts')} prompts × {rl.get('group_size')} answers, budget {rl.get('max_new_tokens')} tokens, "
            f"temperature {rl.get('temperature')}, {result['steps']} updates, {seeds} seeds, held-out "
            f"{rl.get('eval_size')} problems")
    if smoke:
        note = "SMOKE (tiny warm start, a few updates; not a result): " + note
    source = (f"loaded from {out / preset.name} (every run finished; toy_rl.arithmetic.comparison.compare)" if done
              else f"toy_rl.arithmetic.comparison.compare under {out / preset.name} (finished runs read back, the "
                   "others run now)")
    return result, source, note


def arithmetic_comparison_plan(runs, seeds: int | None = None, steps: int | None = None, smoke: bool = False):
    """What :func:`arithmetic_comparison` will train (runs missing under ``<runs>/compare``, the warm start)."""
    from ..arithmetic.comparison import missing_specs
    from ..arithmetic.presets import DEFAULT, get_preset, smoke_preset
    from ..experiments.plan import Plan
    preset = smoke_preset(DEFAULT) if smoke else get_preset(DEFAULT)
    seeds = seeds or (COMPARE_SMOKE_SEEDS if smoke else COMPARE_SEEDS)
    return Plan(specs=missing_specs(preset, range(seeds), Path(runs) / "compare", steps=steps),
                warmstarts=[(preset.make_task(), preset.warmstart)])


def _arithmetic_args(runs, seeds, steps, smoke):
    seeds = seeds or (RUNG2_SMOKE_SEEDS if smoke else RUNG2_SEEDS)
    overrides = {"smoke": True} if smoke else {}
    if steps and (smoke or steps != RUNG2["steps"]):
        overrides["steps"] = steps
    root = Path(runs) / f"steps{steps}" if "steps" in overrides and not smoke else Path(runs)
    return seeds, overrides, root


def arithmetic_runs_plan(runs, task: str = "add", stalenesses=(0, 2, 4, 8), partial: int | None = None,
                         seeds: int | None = None, steps: int | None = None, smoke: bool = False,
                         on_policy_rules=None):
    """What :func:`arithmetic_runs` with the same arguments will train (nothing when the runs are logged)."""
    from ..arithmetic.sweep import missing_specs
    from ..experiments.plan import Plan
    seeds, overrides, root = _arithmetic_args(runs, seeds, steps, smoke)
    return Plan(specs=missing_specs(root, task, stalenesses, partial, seeds=seeds, quick_out=root,
                                    on_policy_rules=on_policy_rules, **overrides))


def arithmetic_runs(runs, task: str = "add", stalenesses=(0, 2, 4, 8), partial: int | None = None,
                    seeds: int | None = None, steps: int | None = None, smoke: bool = False, progress: bool = True,
                    on_policy_rules=None) -> tuple[dict, str, str]:
    """Rung 2's runs of ``task`` through the runner: (results {(scenario, rule): [records per seed]},
    source line, config note). Full: ``<runs>/arithmetic-<task>`` (``<runs>/steps<N>/arithmetic-<task>`` for
    another number of updates, so runs of another length are never mixed in); smoke: the tiny warm start and
    rung 2's SMOKE settings in ``<runs>/arithmetic-<task>-smoke``. Uses the first ``seeds`` finished seeds."""
    from ..arithmetic.sweep import load_or_sweep
    seeds, overrides, root = _arithmetic_args(runs, seeds, steps, smoke)
    results, source = load_or_sweep(root, task, stalenesses, partial, seeds=seeds, quick_out=root,
                                      progress=progress, on_policy_rules=on_policy_rules, **overrides)
    results = {key: runs_[:seeds] for key, runs_ in results.items()}
    expected = {**RUNG2, **{k: v for k, v in overrides.items() if k != "smoke"}}
    where = root / experiment_name("arithmetic", task, smoke=smoke)
    return results, source, arithmetic_note(where, list(results), seeds, expected, smoke)


def _distinct(configs: list[dict], key: str) -> str:
    values = sorted({json.dumps(c.get(key)) for c in configs})
    return "/".join(values)


def config_note(configs: list[dict], seeds: int, expected: dict, smoke: str | None = None) -> str:
    """The settings runs were made with (their ``config.json`` contents), in a few words; says so when they are
    not ``expected`` (the default full configuration), or starts with ``smoke`` for a smoke run."""
    if not configs:
        return "settings unknown (no config.json found)"
    note = (f"{_distinct(configs, 'steps')} updates, {_distinct(configs, 'prompts')} prompts × "
            f"{_distinct(configs, 'group_size')} answers, lr {_distinct(configs, 'lr')}, held-out set of "
            f"{_distinct(configs, 'eval_size')} problems; {seeds} seed(s) per rule")
    if smoke:
        return f"SMOKE ({smoke}; not a result): " + note
    off = {k: _distinct(configs, k) for k in RL_NOTE_KEYS if _distinct(configs, k) != json.dumps(expected[k])}
    if off:
        return note + " — NOT the default full configuration (" + ", ".join(
            f"{k} {v} vs {expected[k]}" for k, v in off.items()) + ")"
    return note + " (the default full configuration)"


def seed_order(folder: Path) -> int:
    seed = seed_of(folder)
    return -1 if seed is None else seed


def arithmetic_note(root: Path, keys, seeds: int, expected: dict, smoke: bool) -> str:
    """:func:`config_note` of the first ``seeds`` run folders of each (scenario, rule) in ``keys``, under ``root``
    or, where it holds none, its committed twin in results/ (the runs read back from there)."""
    configs = []
    for base in candidates(root):
        configs = [json.loads((d / "config.json").read_text()) for scenario, rule in keys
                   for d in sorted((base / scenario / rule).glob("seed*"), key=seed_order)[:seeds]
                   if (d / "config.json").is_file()]
        if configs:
            break
    return config_note(configs, seeds, expected, "tiny warm start, a few updates" if smoke else None)


# --- rung 3 ------------------------------------------------------------------------------------------

RUNG3 = dict(stalenesses=(2, 4), seeds=1)         # notebook 06's defaults (STALENESSES, SEEDS); 40 updates each
RUNG3_SMOKE = dict(stalenesses=(1,), seeds=1)      # as notebook 06 in smoke mode: two updates per run


def lora_specs(runs, stalenesses=RUNG3["stalenesses"], seeds: int = RUNG3["seeds"], steps: int | None = None,
               smoke: bool = False, progress: bool = True, on_policy: bool = False, model=None, **settings) -> list:
    """The specs of :func:`lora_runs` (finished or not)."""
    kw = dict(seeds=range(seeds), model=model, out=Path(runs), smoke=smoke, progress=progress, **settings)
    if steps:
        kw["steps"] = steps
    specs = grid("lm", "add", RULES, stalenesses, **kw)
    if on_policy:
        specs += grid("lm", "add", ("clip-higher",), (0,), **kw)
    return specs


def lora_plan(runs, stalenesses=RUNG3["stalenesses"], seeds: int = RUNG3["seeds"], steps: int | None = None,
              smoke: bool = False, on_policy: bool = False, model=None):
    """What :func:`lora_runs` will train (its runs not finished under ``runs``); nothing without the llm extra."""
    from ..experiments.plan import Plan
    from ..experiments import status
    if model is None and llm_missing():
        return Plan()
    specs = lora_specs(runs, stalenesses, seeds, steps, smoke, False, on_policy, model)
    return Plan(specs=[s for s in specs if status(s) != "finished"])


def lora_runs(runs, stalenesses=RUNG3["stalenesses"], seeds: int = RUNG3["seeds"], steps: int | None = None,
              smoke: bool = False, progress: bool = True, on_policy: bool = False, model=None,
              **settings) -> tuple[dict, str]:
    """Rung 3's runs through :func:`toy_rl.experiments.sweep` under ``<runs>/<model>-add``: the three rules at each
    staleness, plus (``on_policy``) notebook 06's on-policy clip-higher run. Returns (results {(scenario, rule):
    [records per seed]}, config note). ``model``: default SmolLM2-135M-Instruct; the tests pass a tiny random one.
    ``settings``: more of :func:`toy_rl.experiments.make_spec`'s."""
    from ..lm.run import DEFAULTS as RUNG3_RL
    specs = lora_specs(runs, stalenesses, seeds, steps, smoke, progress, on_policy, model, **settings)
    results = run_sweep(specs)
    configs = [json.loads((read_dir(s) / "config.json").read_text()) for s in specs     # runs/ or results/
               if (read_dir(s) / "config.json").is_file()]
    expected = dict(RUNG3_RL, steps=steps or RUNG3_RL["steps"])
    note = config_note(configs, seeds, expected, "two updates on small batches" if smoke else None)
    return results, note
