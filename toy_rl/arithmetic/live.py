"""Rung 2's live runs: a short RL run from the cached warm start, retrained when a slider moves (notebook 04 §13).

    from toy_rl.arithmetic.live import LiveRuns, live_baseline, live_rule, short_run
    base = live_baseline(["runs", "runs/arithmetic-notebook"], "add", staleness=4)   # the logged three rules
    records = short_run(live_rule("bapo", 0.6, 1.3, rho0=0.5), config=base.config)   # ~1 s on one CPU thread
    live = LiveRuns(base)                  # what the sliders call: the same, cached by rule
    result = live.run("fixed", 0.7, 1.5)

:func:`short_run` is the loop itself (:func:`toy_rl.rl.loop.train`, in a temporary folder) for ``updates`` updates
from the warm start, with the settings of the logged runs it is drawn beside (their ``config.json``: batch, lr,
staleness, evaluation), so only the rule differs; seed 0 is the logged runs' seed 0. The loop is deterministic, so
at the bounds of a logged rule (BAPO from [0.6, 1.2] at ρ0 = 0.4, or fixed [0.8, 1.2] / [0.8, 1.28]) the short run
retraces that rule's logged seed-0 run update for update (``tests/test_arithmetic_live.py`` checks it).

Measured on this project's 2-core CPU, one torch thread (:func:`bench`: ``python -m toy_rl.arithmetic.live 25``),
from the 211k-parameter warm start at reuse-4 with the logged runs' 16 prompts × 8 answers and their evaluations
(200 held-out problems before the first update and after the last): 25 updates take ~1 s warm (2.2 s for the first
run in a fresh process), 50 updates ~2 s, at a load average of 2.5; while two other training jobs shared the cores,
50 updates took 5.5-9 s. So :data:`LIVE_UPDATES` = 25: a slider's redraw (run, figure and its PNG) stays within
~5 s on a busy machine.

:func:`live_baseline` finds the logged three rules (finished runs with at least ``updates`` updates) or, without
them (a fresh clone, smoke mode), trains a short baseline of its own with :func:`short_run`.
"""
from __future__ import annotations

import json
import math
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from ..clipping import BAPO, RULE_CLASSES, RULES, FixedBounds
from ..experiments import experiment_name, load, scenario_name
from ..experiments.logged import candidates
from ..rl.config import RLConfig, rule_label
from ..rl.loop import train
from ..threads import cpu_threads
from .policy import TinyPolicy
from .run import DEFAULTS, rl_defaults
from .tasks import get_task
from .warmstart import TASK_DEFAULTS, cache_path, default_config, load_warmstart, smoke_config

# 25 updates: ~1 s at 16 prompts x 8 answers on one thread (module docstring), and the logged runs' eval_every, so
# the live run's last accuracy is measured where the logged runs measured one too.
LIVE_UPDATES = 25
LIVE_KINDS = ("bapo", "fixed")
# BAPO's caps when the sliders set its start (paper §5.1: c_low may rise to 0.9, c_high to 3.0).
BAPO_LOW_MAX, BAPO_HIGH_MAX = BAPO().low_range[1], BAPO().high_range[1]
# Smoke: the tiny warm start's settings (as notebook 04's smoke sweep), a few updates.
SMOKE_LIVE = dict(updates=6, prompts=4, group_size=4, eval_every=3, eval_size=16)
# The settings a run's config.json holds that the short run may not change (the rest: rule, seed, steps, checkpoints).
NOT_COMPARED = ("rule", "seed", "steps", "checkpoint_every")
# How long training a missing warm start takes (toy_rl.arithmetic.warmstart.TASK_DEFAULTS's measurements).
WARMSTART_TIME = {"add": "~30 s on an idle core, ~6 min measured on a busy 2-core machine",
                  "countdown": "~90 s on an idle core", "scratchpad": "~75 s on an idle core",
                  "search": "~130 s measured on a busy 2-core machine"}


def live_rule(kind: str, c_low: float, c_high: float, rho0: float = 0.4):
    """The rule the sliders describe. ``kind`` "fixed": clip at [c_low, c_high] (the named rule when they are
    symmetric's [0.8, 1.2] or clip-higher's [0.8, 1.28]); "bapo": Algorithm 1 searching from [c_low, c_high]
    (a⁻, a⁺) until positives carry ``rho0`` of the loss, c_low rising to at most 0.9 and c_high to 3.0 (the
    paper's caps; a start above a cap stays put). BAPO from [0.6, 1.2] at ρ0 = 0.4 is ``BAPO()`` itself.
    Slider values are rounded to 4 decimals first (a slider sends 1.2800000000000002)."""
    c_low, c_high, rho0 = (round(float(v), 4) for v in (c_low, c_high, rho0))
    if kind == "fixed":
        for name, cls in RULE_CLASSES.items():
            rule = cls()
            if name != "bapo" and (rule.c_low, rule.c_high) == (c_low, c_high):
                return rule
        return FixedBounds(lo=c_low, hi=c_high)
    if kind == "bapo":
        rule = BAPO(rho0=rho0, low_range=(c_low, max(c_low, BAPO_LOW_MAX)),
                    high_range=(c_high, max(c_high, BAPO_HIGH_MAX)))
        return BAPO() if rule == BAPO() else rule
    raise ValueError(f"kind must be one of {LIVE_KINDS}; got {kind!r}")


def describe_rule(rule) -> str:
    """'bapo (ρ0 0.4, from [0.6, 1.2])', 'fixed [0.70, 1.50]', 'symmetric [0.80, 1.20]': for titles and legends."""
    if isinstance(rule, BAPO):
        return f"bapo (ρ0 {rule.rho0:g}, from [{rule.low_range[0]:g}, {rule.high_range[0]:g}])"
    name = rule_label(rule)
    name = "fixed" if name.startswith(("fixed", "clip-higher-", "symmetric-")) else name
    return f"{name} [{rule.c_low:.2f}, {rule.c_high:.2f}]"


def live_config(rule, updates: int = LIVE_UPDATES, seed: int = 0, task="add", config: dict | None = None,
                **settings) -> RLConfig:
    """The short run's :class:`~toy_rl.rl.config.RLConfig`: ``config`` (a logged run's config.json, as a dict)
    or rung 2's defaults (:data:`toy_rl.arithmetic.run.DEFAULTS`, the task's answer budget), then ``settings``
    (staleness, prompts, ...), with this ``rule``, ``updates`` steps and ``seed``; one checkpoint, at the end."""
    if config is None:
        config = {**{k: DEFAULTS[k] for k in ("prompts", "group_size", "lr", "eval_every", "eval_size")},
                  **rl_defaults(get_task(task))}
    base = {k: v for k, v in config.items() if k not in NOT_COMPARED}
    return RLConfig(**{**base, **settings, "rule": rule, "steps": updates, "seed": seed, "checkpoint_every": updates})


def short_run(rule, warmstart=None, updates: int = LIVE_UPDATES, seed: int = 0, task="add", config: dict | None = None,
              device="cpu", threads: int | None = 1, **settings) -> list[dict]:
    """A short RL run from the cached warm start: ``updates`` updates of ``rule`` (a name or rule object, e.g.
    :func:`live_rule`'s) through the shared loop, in a temporary folder that is removed afterwards.

    ``warmstart``: the :class:`~toy_rl.arithmetic.warmstart.WarmstartConfig` (None: the task's own; trained and
    cached first if missing, see :func:`warmstart_line`). ``config`` / ``settings``: see :func:`live_config` (pass
    the logged runs' config to draw it beside them). Returns the loop's records (the last one ``final``, with the
    held-out accuracy after the last update), each with its ``seed``. Torch runs on ``threads`` threads meanwhile.
    """
    t = get_task(task)
    cfg = live_config(rule, updates, seed, t, config, **settings)
    with cpu_threads(threads):
        policy = TinyPolicy(load_warmstart(t, warmstart, device=device, progress=False))
        with tempfile.TemporaryDirectory(prefix="toy_rl_live_") as folder:
            records = train(cfg, policy, t, folder, resume=False, progress=False)
    for r in records:
        r["seed"] = seed
    return records


def truncate(records: list[dict], updates: int) -> list[dict]:
    """A longer run's records cut to its first ``updates`` updates, ending like a run of that length: the
    held-out accuracy measured before update ``updates`` (after ``updates`` updates) becomes the ``final``
    record; none if it was not measured there. A run of exactly ``updates`` updates comes back unchanged."""
    kept = [r for r in records if not r.get("final") and r["step"] < updates]
    at = [r for r in records if r["step"] == updates and r.get("accuracy") is not None]
    if at:
        kept.append({"step": updates, "rule": at[0].get("rule"), "staleness": at[0].get("staleness"), "final": True,
                     "accuracy": at[0]["accuracy"], **({"seed": at[0]["seed"]} if "seed" in at[0] else {})})
    return kept


@dataclass
class Baseline:
    """The three rules a live run is drawn beside: ``runs`` {rule: [records of each seed]}, cut to ``updates``
    updates; ``config`` the settings every one of them ran with (a config.json as a dict: the live run uses it);
    ``scenario`` ("reuse-4"); ``source`` a line saying where they came from; ``logged`` True if read from disk;
    ``task`` (a name or Task) and ``warmstart`` (its WarmstartConfig, None: the task's own) the live runs use."""
    runs: dict
    config: dict
    scenario: str
    updates: int
    source: str
    logged: bool
    task: object = "add"
    warmstart: object = None
    seconds: float = 0.0


def _read_config(run_folder: Path) -> dict | None:
    try:
        saved = json.loads((run_folder / "config.json").read_text())
    except (OSError, ValueError):
        return None
    return saved if isinstance(saved, dict) else None


def _same_settings(a: dict, b: dict) -> bool:
    keys = (set(a) | set(b)) - set(NOT_COMPARED)
    return all(a.get(k) == b.get(k) for k in keys)


def find_logged(roots, task="add", staleness: int = 4, updates: int = LIVE_UPDATES, mode: str = "reuse",
                rules=tuple(RULES)) -> Baseline | None:
    """The logged runs of the three rules at this staleness, from the first of ``roots`` (folders holding
    ``arithmetic-<task>/``, e.g. ``runs`` and ``runs/arithmetic-notebook``) where every rule has at least one
    finished seed of at least ``updates`` updates, all with the same settings but the rule; None if no root has
    them. Their records are cut to ``updates`` updates (:func:`truncate`)."""
    t = get_task(task)
    scenario = scenario_name(staleness, mode)
    for where in [w for root in roots for w in candidates(Path(root) / experiment_name("arithmetic", t.name))]:
        if not (where / scenario).is_dir():
            continue
        loaded = load(where)
        runs, config, ok = {}, None, True
        for rule in rules:
            keep = []
            for recs in loaded.get((scenario, rule), []):
                folder = where / scenario / rule / f"seed{recs[0].get('seed', 0)}" if recs else None
                saved = _read_config(folder) if folder is not None else None
                finals = [r for r in recs if r.get("final")]
                if saved is None or not finals or saved.get("steps", 0) < updates:
                    continue
                if config is None:
                    config = saved
                if _same_settings(saved, config):
                    keep.append(truncate(recs, updates))
            if not keep:
                ok = False
                break
            runs[rule] = keep
        if ok and config is not None:
            n = sorted({len(v) for v in runs.values()})
            return Baseline(runs, {k: v for k, v in config.items() if k not in NOT_COMPARED}, scenario, updates,
                            f"the three rules logged in {where / scenario} ({'/'.join(map(str, n))} seeds each, "
                            f"their first {updates} of {config['steps']} updates)", True, t)
    return None


def live_baseline(roots=(), task="add", staleness: int = 4, updates: int = LIVE_UPDATES, seeds: int = 2,
                  warmstart=None, mode: str = "reuse", **settings) -> Baseline:
    """The logged three rules (:func:`find_logged` over ``roots``, if they ran with ``settings``, e.g. smoke's
    smaller batches) or, if none are logged, a short baseline trained now: each rule for ``seeds`` seeds of
    :func:`short_run` with ``settings``. Either way the live run then uses :attr:`Baseline.config`. ``warmstart``
    is not in a run's config.json: pass the one the logged runs started from (None: the task's own)."""
    t = get_task(task)
    found = find_logged(roots, t, staleness, updates, mode)
    if found is not None and all(found.config.get(k) == v for k, v in settings.items()):
        found.warmstart = warmstart
        return found
    t0 = time.perf_counter()
    settings = {"staleness": staleness, "mode": mode, **settings}
    config = live_config("symmetric", updates, 0, t, None, **settings).to_dict()
    runs = {rule: [short_run(rule, warmstart, updates, seed, t, config) for seed in range(seeds)] for rule in RULES}
    seconds = time.perf_counter() - t0
    scenario = scenario_name(staleness, mode)
    return Baseline(runs, {k: v for k, v in config.items() if k not in NOT_COMPARED}, scenario, updates,
                    f"no logged runs of {scenario} found: a short baseline trained now ({len(RULES)} rules × {seeds} "
                    f"seeds × {updates} updates, {seconds:.0f} s)", False, t, warmstart, seconds)


def warmstart_line(task="add", warmstart=None) -> str:
    """One line: where the warm start is cached, or that it is not and will be trained first, and how long that
    takes (the live runs start from it)."""
    t = get_task(task)
    path = cache_path(t, warmstart)
    if path.is_file():
        return f"warm start cached ({path}): each live run starts from it"
    config = warmstart or default_config(t)
    if config == smoke_config(t):
        how = f"{config.max_steps} supervised steps of a 1-layer model: a few seconds"
    elif config == default_config(t) and t.name in WARMSTART_TIME:
        how = f"up to {TASK_DEFAULTS[t.name]['max_steps']} supervised steps: {WARMSTART_TIME[t.name]}"
    else:
        how = f"up to {config.max_steps} supervised steps"
    return f"warm start not cached: the first live run trains it ({how}), then caches it in {path}"


@dataclass
class LiveResult:
    """One live run: the rule, its label, the records, the wall seconds it took (0 if it came from the cache)."""
    kind: str
    rule: object
    label: str
    records: list
    seconds: float
    cached: bool = False


@dataclass
class LiveRuns:
    """What the sliders call: :meth:`run` trains a :func:`short_run` with the baseline's settings (or returns the
    same rule's run from the cache: moving a slider back is instant)."""
    baseline: Baseline
    seed: int = 0
    device: str = "cpu"
    cache: dict = field(default_factory=dict)

    def run(self, kind: str, c_low: float, c_high: float, rho0: float = 0.4) -> LiveResult:
        rule = live_rule(kind, c_low, c_high, rho0)
        label = rule_label(rule)
        if label in self.cache:
            hit = self.cache[label]
            return LiveResult(kind, rule, describe_rule(rule), hit.records, 0.0, True)
        t0 = time.perf_counter()
        b = self.baseline
        records = short_run(rule, b.warmstart, b.updates, self.seed, b.task, b.config, device=self.device)
        result = LiveResult(kind, rule, describe_rule(rule), records, time.perf_counter() - t0)
        self.cache[label] = result
        return result


def matching_logged(result: LiveResult, baseline: Baseline) -> str | None:
    """The logged rule this live run equals (same rule, same seed, same settings), if any: then the two runs
    must be the same run (the loop is deterministic)."""
    name = rule_label(result.rule)
    return name if name in baseline.runs else None


def max_gap(a: list[dict], b: list[dict], keys=("reward_mean", "entropy", "c_low", "c_high")) -> float:
    """The largest |difference| of ``keys`` between two runs' records, update by update (inf if their lengths
    differ)."""
    ua, ub = [r for r in a if not r.get("final")], [r for r in b if not r.get("final")]
    if len(ua) != len(ub):
        return math.inf
    gaps = [abs(x[k] - y[k]) for x, y in zip(ua, ub) for k in keys if x.get(k) is not None and y.get(k) is not None]
    return max(gaps, default=0.0)


def bench(updates: int = LIVE_UPDATES, repeats: int = 3, **settings) -> list[float]:
    """Wall seconds of ``repeats`` short runs (symmetric, the task's default warm start, reuse-4): what a slider
    move costs. ``python -m toy_rl.arithmetic.live`` prints them."""
    out = []
    for i in range(repeats):
        t0 = time.perf_counter()
        short_run("symmetric", updates=updates, seed=i, **{"staleness": 4, **settings})
        out.append(time.perf_counter() - t0)
    return out


if __name__ == "__main__":                         # python -m toy_rl.arithmetic.live [updates]
    import sys
    n = int(sys.argv[1]) if len(sys.argv) > 1 else LIVE_UPDATES
    torch.set_num_threads(1)
    times = bench(n)
    print(f"{n} updates (16 prompts x 8 answers, reuse-4, one thread): " + ", ".join(f"{s:.2f} s" for s in times))
