"""No long surprise: before a command trains for more than ~30 s, it says so in one line, with an estimate.

On a fresh clone the long waits are the rung-2 warm starts (cached under ``~/.cache/toy_rl/warmstart`` once
trained) and the runs a figure, report or notebook reads from ``runs/`` when they are there and trains when
they are not. Every place that trains them asks this module first::

    with eta.up_front(eta.Plan(specs=todo)):     # prints e.g. "training 36 rung-2 runs not found under
        ...                                      #   runs/arithmetic-add (200 updates each): about 4 min on
                                                 #   2 CPU cores", then keeps the inner steps quiet

The line goes to stderr (``--json`` output stays clean), only when the estimate is above :data:`THRESHOLD`
seconds, and once: a command that announced its whole plan (``toy-rl figures``) silences the announcements
of the steps inside it.

The estimates are measured rates, not guesses: seconds per update of one run (``RL_RATES``) and per
warm-start step (``WARMSTART_RATES``), each with the command that measured it, on this project's shared 2-core
x86_64 CPU with 1 torch thread per run (the default everywhere). A rate is scaled linearly to another batch
shape (and a warm start to another model size); runs at once (``workers``) divide the total. A busy machine is
slower: at a load average of 5-6 on the 2 cores, wall times were 1.6-2x these.
"""
from __future__ import annotations

import contextlib
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

THRESHOLD = 30.0          # seconds: shorter work is not announced
WHERE = "on 2 CPU cores"


@dataclass(frozen=True)
class Rate:
    seconds: float        # per update (RL) or per training step (warm start), evaluation included
    batch: int            # answers per update (prompts × group size) or sequences per step it was measured at
    measured: str         # the command that measured it, and when


# Seconds per RL update of one run, keyed by (rung, task, partial rollout?), at the batch it was measured at
# (answers per update); 1 torch thread, held-out evaluation at the default schedule included. "Logged": the sum of
# the per-update "seconds" in the runs' metrics.jsonl (wall time); "CPU": time.process_time() around
# toy_rl.experiments.run of the same spec the command makes, on a machine at load ~6 (so wall was 1.6x that).
RL_RATES = {
    ("arithmetic", "add", False): Rate(
        0.038, 128, "toy-rl arithmetic --task add --rule all --staleness 0 2 4 8 --seeds 1: 12 runs x 200 updates, "
                    "97 CPU-s (188 s wall at load 5.5), 2026-12-01"),
    ("arithmetic", "countdown", False): Rate(
        0.11, 128, "toy-rl arithmetic --task countdown --rule symmetric --steps 100 --seeds 1: 11.1 CPU-s (17 s wall "
                   "at load 6.3), 2026-12-01"),
    ("arithmetic", "scratchpad", False): Rate(
        0.46, 128, "toy-rl arithmetic --task scratchpad --rule symmetric --steps 50 --seeds 1: 23.2 CPU-s (40 s wall "
                   "at load 6.2), 2026-12-01"),
    ("arithmetic", "scratchpad", True): Rate(
        0.086, 128, "logged: toy-rl figures --only 05 ran 15 runs of toy-rl arithmetic --task scratchpad --partial 8, "
                    "200 updates each, 258 s (runs/arithmetic-scratchpad, 2026-12-01, load 1.4); CPU at load 6: 0.10"),
    ("arithmetic", "search", False): Rate(
        0.52, 128, "logged: toy-rl arithmetic --compare long-failures --seeds 10 --workers 2, 90 runs x 120 updates, "
                   "6,000 s of runs in 52 min, two at a time (runs/compare, 2026-12-01); one run alone, 40 updates: "
                   "0.65 CPU-s per update at load 6"),
    ("arithmetic", "search", True): Rate(
        0.43, 128, "logged: toy-rl arithmetic --compare long-failures-partial --seeds 10 --workers 2, 40 runs x 120 "
                   "steps of partial rollout (8 tokens per answer per step), 2,071 s of runs, two at a time at load "
                   "4-6 (runs/compare/long-failures-partial, 2026-12-02); 0.17 CPU-s per step; one run alone at load "
                   "2-3: 0.20 s per step"),
    ("lm", "add", False): Rate(
        8.2, 64, "logged: toy-rl figures --only 06 ran 3 runs of toy-rl lora --rule all --staleness 4, 40 updates "
                 "each, 986 s (runs/smollm2-135m-add, 2026-12-01, load 1.0)"),
    ("lm", "search-warm", False): Rate(
        122.0, 64, "logged: toy-rl pilot --rung 3 --task search-warm, 2 runs x 8 updates of up to 96 tokens, 1,947 s "
                   "of runs, held-out evaluations included (runs/pilot/smollm2-135m-search-warm, 2026-12-02, load ~4)"),
    ("lm", "search-hard-warm", False): Rate(
        175.5, 64, "logged: toy-rl lora --task search-hard-warm --controls --rule symmetric clip-higher bapo "
                   "--staleness 2 --seeds 2 --steps 8, 3 runs x 8 updates of up to 96 tokens, 4,212 s of runs, two "
                   "at a time (runs/smollm2-135m-search-hard-warm, 2026-12-03, load ~2)"),
    ("lm", "add-cot", False): Rate(
        143.0, 64, "logged: toy-rl pilot --rung 3 --task add-cot, 2 runs x 8 updates of up to 128 tokens, 2,297 s "
                   "(runs/pilot/smollm2-135m-add-cot, 2026-11-30)"),
}

# The same, for runs in bf16 (dtype "bfloat16", or "auto" on a CPU with fast bf16) where measured apart.
BF16_RL_RATES = {
    ("lm", "search-hard-warm"): Rate(
        121.7, 64, "logged: toy-rl lora --task search-hard-warm --controls --rule symmetric clip-higher bapo "
                   "--staleness 2 --seeds 5 --dtype bfloat16 --micro-batch 16 --workers 2, BAPO's seeds 0 and 1, "
                   "7,178 s of runs for their first 59 updates, two at a time beside notebook builds and CI "
                   "(runs/smollm2-135m-search-hard-warm, 2026-12-05, AMD EPYC with AVX512-BF16, load ~3-4)"),
}

# Seconds per warm-start step of each task's default config (64 sequences, the default 211,520-parameter GPT, the
# validation sample every eval_every steps included) and of the held-out evaluation at the end (500 problems), as
# ensure_warmstart logs them (the "seconds" of <cache>/warmstart/<task>-<hash>.jsonl) when it trains on a fresh
# cache, what `TOY_RL_CACHE=$(mktemp -d) toy-rl warmstart --task <task>` does; 1 thread, 2026-12-01.
WARMSTART_RATES = {
    "add": Rate(0.0425, 64, "toy-rl warmstart --task add on a fresh cache: 2000 steps in 85 s (its target not "
                            "reached), load 1.3-2.1"),
    "countdown": Rate(0.0754, 64, "toy-rl warmstart --task countdown on a fresh cache: 2000 steps in 151 s, load 2.1"),
    "scratchpad": Rate(0.101, 64, "logged by toy-rl figures --only 05 on a fresh cache: 800 steps in 81 s (stopped at "
                                  "its target), load ~1.4"),
    "search": Rate(0.078, 64, "logged by toy-rl arithmetic --compare long-failures on a fresh cache (the preset's warm "
                              "start): 600 steps in 47 s"),
}
WARMSTART_HELDOUT = {"add": 1.3, "countdown": 0.9, "scratchpad": 2.5, "search": 3.2}   # seconds, 500 problems
# Rung 1: the default bandit comparison (9 rules x 4 cells, 20 seeds x 300 updates), scaled by seeds x updates.
BANDIT_COMPARE = Rate(49.6, 20 * 300, "toy-rl figures --only 02: 49.6 s (docs/figures/captions.json, 2026-12-01, "
                                      "load ~3)")

_quiet = 0


def bandit_seconds(seeds: int, steps: int, cells: int = 4, rules: int = 9) -> float:
    """Rung 1's comparison: the measured time scaled by seeds x updates x cells x rules."""
    return BANDIT_COMPARE.seconds * seeds * steps / BANDIT_COMPARE.batch * cells / 4 * rules / 9


def duration(seconds: float) -> str:
    """'about 40 s', 'about 6 min', 'about 1 h 10 min'."""
    if seconds < 90:
        return f"about {max(10, round(seconds / 10) * 10):.0f} s"
    minutes = round(seconds / 60)
    if minutes < 60:
        return f"about {minutes} min"
    return f"about {minutes // 60} h" + (f" {minutes % 60} min" if minutes % 60 else "")


def say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


@contextlib.contextmanager
def quiet():
    """Inside: no announcements (the caller has announced the whole plan already)."""
    global _quiet
    _quiet += 1
    try:
        yield
    finally:
        _quiet -= 1


def announce(what: str, seconds: float | None, up_to: bool = False) -> bool:
    """Print "<what>: about <time> on 2 CPU cores" to stderr if ``seconds`` is above :data:`THRESHOLD` (and no
    caller keeps this quiet); ``up_to``: the work may stop earlier. True if it printed."""
    if _quiet or seconds is None or seconds <= THRESHOLD:
        return False
    say(f"{what}: {'up to ' if up_to else ''}{duration(seconds)} {WHERE}")
    return True


# --- the pieces -----------------------------------------------------------------------------------------------

def _task_name(rung: str, task) -> str:
    from .experiments.tasks import task_label
    return task_label(rung, task)


def on_cpu(device) -> bool:
    if str(device).startswith("cuda"):
        return False
    if device == "auto":
        import torch
        return not torch.cuda.is_available()
    return True


def rl_rate(rung: str, task: str, partial: bool, max_new_tokens: int | None = None) -> Rate | None:
    """The measured rate for runs of this kind; an unmeasured rung-2 task takes the slowest rung-2 rate, an
    unmeasured rung-3 task the two measured ones interpolated by answer budget (5 and 128 tokens)."""
    rate = RL_RATES.get((rung, task, partial)) or RL_RATES.get((rung, task, False))
    if rate is not None or rung == "bandit":
        return rate
    if rung == "arithmetic":
        return max((r for (g, _, _), r in RL_RATES.items() if g == rung), key=lambda r: r.seconds / r.batch)
    short, long = RL_RATES[("lm", "add", False)], RL_RATES[("lm", "add-cot", False)]
    t = min(1.0, max(0.0, ((max_new_tokens or 128) - 5) / (128 - 5)))
    return Rate(short.seconds + t * (long.seconds - short.seconds), short.batch, "interpolated by answer budget")


def _steps_left(spec) -> int:
    """Updates still to run (a resumed run continues after its last logged update)."""
    from .experiments.layout import run_dir
    metrics = run_dir(spec) / "metrics.jsonl"
    done = 0
    if metrics.is_file():
        try:
            lines = metrics.read_text().strip().splitlines()
            done = int(json.loads(lines[-1]).get("step", 0)) if lines else 0
        except (OSError, ValueError):
            done = 0
    return max(0, spec.rl.steps - done)


def run_seconds(spec) -> float | None:
    """Estimated seconds to train (or finish) one run; None where no rate applies (a GPU, a model other than
    SmolLM2-135M on rungs 3-4, rung 1's bandit, which runs in seconds)."""
    if spec.rung == "bandit" or not on_cpu(spec.device):
        return None
    if spec.rung == "lm":
        from .lm.load import SMOLLM2
        if spec.model != SMOLLM2:                 # another model (a tests' tiny one, a 7B): no measured rate
            return None
    task = _task_name(spec.rung, spec.task)
    rate = rl_rate(spec.rung, task, spec.rl.partial is not None, spec.rl.max_new_tokens)
    if spec.rung == "lm" and (spec.rung, task) in BF16_RL_RATES:
        from .lm.run import spec_dtype
        if spec_dtype(spec) == "bfloat16":
            rate = BF16_RL_RATES[spec.rung, task]
    if rate is None:
        return None
    answers = spec.rl.prompts * spec.rl.group_size
    return _steps_left(spec) * rate.seconds * answers / rate.batch


def warmstart_seconds(task, config=None) -> float:
    """Estimated seconds to train a warm start (all ``max_steps``: early stopping only makes it shorter)."""
    from .arithmetic.model import GPT, ModelConfig
    from .arithmetic.tasks import Task, get_task
    from .arithmetic.warmstart import default_config
    task = task if isinstance(task, Task) else get_task(task)
    config = config or default_config(task)
    rate = WARMSTART_RATES.get(task.name) or max(WARMSTART_RATES.values(), key=lambda r: r.seconds)
    size = GPT(config.model).num_params() / GPT(ModelConfig()).num_params()
    scale = size * config.batch_size / rate.batch
    heldout = WARMSTART_HELDOUT.get(task.name, max(WARMSTART_HELDOUT.values())) * size
    return config.max_steps * rate.seconds * scale + heldout * config.heldout_problems / 500


def announce_warmstart(task, config=None, root=None) -> bool:
    """The line :func:`toy_rl.arithmetic.warmstart.ensure_warmstart` prints before it trains a warm start that is
    not cached, e.g. "training the rung-2 warm start for task add (not cached in ~/.cache/toy_rl/warmstart): up to
    about 2 min on 2 CPU cores"."""
    from .arithmetic.tasks import get_task
    from .arithmetic.warmstart import cache_dir, default_config
    task = get_task(task)
    config = config or default_config(task)
    return announce(f"training the rung-2 warm start for task {task.name} (not cached in {cache_dir(root)})",
                    warmstart_seconds(task, config), up_to=config.target_accuracy <= 1)


# --- a plan ---------------------------------------------------------------------------------------------------

@dataclass
class Plan:
    """What a command is about to train: ``specs`` (runs not finished yet), ``warmstarts`` ((task, config) pairs,
    trained first when not cached), ``extra`` ((what, seconds) of other work, e.g. rung 1's comparison);
    ``workers``: runs at once."""
    specs: list = field(default_factory=list)
    warmstarts: list = field(default_factory=list)
    extra: list = field(default_factory=list)
    workers: int = 1

    def __add__(self, other: "Plan") -> "Plan":
        return Plan(self.specs + other.specs, self.warmstarts + other.warmstarts, self.extra + other.extra,
                    max(self.workers, other.workers))

    def _warm(self) -> list:
        """The warm starts not cached yet (once each), with their estimates."""
        from .arithmetic.warmstart import cache_path
        from .arithmetic.run import warmstart_of
        pairs = list(self.warmstarts) + [(s.task, warmstart_of(s)) for s in self.specs if s.rung == "arithmetic"]
        out, seen = [], set()
        for task, config in pairs:
            path = cache_path(task, config)
            if path not in seen and not path.exists():
                seen.add(path)
                out.append((task, config, warmstart_seconds(task, config)))
        return out

    def _lm_warm(self) -> list:
        """Rung 3's LoRA warm starts the runs will train first (not cached yet), as (task label, seconds)."""
        from .experiments.tasks import make_task, task_label
        from .lm.run import spec_warm_start_label
        from .lm.warmstart import estimated_seconds, is_cached
        out = {}
        for s in self.specs:
            if s.rung != "lm" or run_seconds(s) is None:
                continue
            task = make_task("lm", s.task)
            steps = getattr(task, "warm_start", 0)
            label = task_label("lm", task)
            if steps and label not in out and not is_cached(task, steps, spec_warm_start_label(s)):
                out[label] = estimated_seconds(steps)
        return list(out.items())

    def seconds(self) -> float:
        runs = [run_seconds(s) for s in self.specs]
        total = sum(r for r in runs if r) / max(1, min(self.workers, len(self.specs) or 1))
        return (total + sum(w for _, _, w in self._warm()) + sum(s for _, s in self.extra)
                + sum(w for _, w in self._lm_warm()))

    def describe(self) -> str:
        from .arithmetic.tasks import get_task
        parts = []
        groups: dict = {}
        for s in self.specs:
            if run_seconds(s):
                groups.setdefault(s.rung, []).append(s)
        for rung, specs in groups.items():
            steps = sorted({s.rl.steps for s in specs})
            where = _common_folder(specs)
            kind = "rung-2" if rung == "arithmetic" else "LoRA"
            each = f"{steps[0]}" if len(steps) == 1 else f"{steps[0]}-{steps[-1]}"
            parts.append(f"{len(specs)} {kind} run{'s' if len(specs) > 1 else ''} not found under {where} "
                         f"({each} updates each" + (f", {self.workers} at once" if self.workers > 1 else "") + ")")
        warm = self._warm()
        if warm:
            names = ", ".join(sorted({get_task(t).name for t, _, _ in warm}))
            parts.append(f"the rung-2 warm start{'s' if len(warm) > 1 else ''} for {names} (not cached)")
        lm_warm = self._lm_warm()
        if lm_warm:
            parts.append(f"the rung-3 LoRA warm start for {', '.join(t for t, _ in lm_warm)} (not cached)")
        parts += [what for what, s in self.extra if s]
        if not parts:
            return ""
        return "training " + (parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1])


def _common_folder(specs) -> str:
    from .experiments.layout import run_dir
    folders = {str(run_dir(s).parents[2]) for s in specs}
    return folders.pop() if len(folders) == 1 else os.path.commonpath(sorted(folders)) or "."


@contextlib.contextmanager
def up_front(plan: Plan):
    """Announce ``plan`` if it is long (one line, before anything runs) and keep the steps inside quiet; only
    the outermost plan speaks."""
    if not _quiet and (plan.specs or plan.warmstarts or plan.extra):
        what = plan.describe()
        if what:
            announce(what, plan.seconds())
    with quiet():
        yield
