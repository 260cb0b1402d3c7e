"""Named rung-2 settings for comparing clipping rules: a task, a warm start, the RL settings.

A preset is chosen for the *mechanism* it puts BAPO in (``docs/protocol.md``
§1-2), never for which rule wins:

* λ, the advantage-weighted tokens of wrong answers over those of right ones.
  On-policy the positive share of a token-mean loss is ρ = 1 / (1 + λ), so
  BAPO's search (Algorithm 1) only starts when λ > 1.5 (ρ < ρ0 = 0.4) or when
  drift clips away positive mass.
* drift: how far the policy has moved from the one that sampled the batch
  (the staleness kind, the learning rate), read off the clip fractions and KL.
* accuracy: low enough that most groups hold a few right answers among wrong ones.

Presets:

``balanced``       today's rung-2 setting on "add" (run.py's defaults, the budget of the
                   longest answer + 1, staleness 2 by disjoint mini-batches): answers of
                   2-5 tokens, failures no longer than successes, λ ≈ 1, ρ ≈ 0.5. BAPO
                   never leaves its start there: it is the fixed rule [0.6, 1.2]. The control.
``long-failures``  the default comparison setting, on "search" (tasks/search.py): right
                   answers stop at the hit (~13 tokens), wrong ones keep trying, many until
                   the budget of 40 tokens (3x a right answer) runs out; a short warm start
                   (600 steps) so sampled accuracy starts near 20 %; temperature 1.0; drift
                   from a lagged behaviour policy (``mode="lag"``, 8 updates behind) at
                   lr 5e-4, where the symmetric rule clips 5-10 % of tokens.
``long-failures-t0.6``  the same at the paper's temperature 0.6 (§5.1).
``long-failures-partial``  long-failures with partial rollout instead of the lag: each step writes at most 8 more
                   tokens of every unfinished answer (``partial=8``, staleness 0) and trains on the groups that
                   finished, so a failure that runs to the 40-token budget spans 5 steps (its first tokens 4 steps
                   old when trained on) and a right answer 2. Its comparison runs only the three rules
                   (``rules``; plus the fixed rule at BAPO's mean bounds that the comparison adds): notebook 05,
                   section 9.

Why lag 8 at lr 5e-4 (pilots of 30 updates, seed 0; the symmetric rule's clip fraction / KL per
update / greedy held-out accuracy after the 30 updates, 0.264 before them): disjoint mini-batches (``reuse``)
2 at lr 3e-4: 0.5 % / 0.002 / 0.27; reuse 2 at 1e-3: 2.2 % / 0.018 / 0.22; reuse 4 at 1e-3:
2.9 % / 0.036 / 0.20; reuse 2 at 3e-3: accuracy 0 (wrecked); lag 4 at 5e-4: 3.2 % / 0.019 /
0.25; lag 8 at 5e-4: 6.7 % / 0.050 / 0.25; lag 8 at 1e-3: 7.9 % / 0.15 / 0.12. Only a long
lag reaches 5 % clipping without a step size that wrecks the warm start.

Pilot gate (``toy_rl.arithmetic.pilot.pilot(name)``: 30 updates, seed 0, symmetric + BAPO):

    preset               λ q50 (q10-q90)  ρ before q50  BAPO moved  c_high mean  sym. clip  regime
    balanced             1.00 (0.99-1.02)   0.50          0 %        1.20        1.2 %     balanced
    long-failures        1.79 (1.43-2.13)   0.35         93 %        2.70        6.7 %     negatives-dominate
    long-failures-t0.6   1.84 (1.53-2.19)   0.33         93 %        2.83        8.1 %     negatives-dominate
    long-failures-partial 1.79 (0.75-2.73)  0.36         55 %        2.19        1.7 %     negatives-dominate

"long-failures-partial" (30 steps made 20 updates, 23 s for both runs): partial rollout trains on the few groups
that finished (about 3 per update), so λ scatters far more from update to update and ρ before the search is
below ρ0 in only 55 % of them; its tokens are younger than lag 8's, and the symmetric rule clips 1.7 % of them.
Its comparison (``toy-rl arithmetic --compare long-failures-partial --seeds 10 --workers 2``: 4 rules x 10 seeds x 120
steps, 1,062 BAPO updates, 2,071 s of runs): negatives-dominate, λ median 1.83, ρ before the search below ρ0 in 67 %
of updates and bounds moved in 67 %, mean bounds [0.79, 2.38]; mean token age 2.4 steps, oldest 4; the symmetric
rule clips 1.1 % / 0.2 % (KL 0.0075). Accuracy averaged over training: BAPO 0.212, symmetric 0.198, clip-higher
0.209, BAPO's mean bounds fixed 0.198; claims 5 and 6 inconclusive (smallest p_holm 0.11).

In "long-failures" BAPO reached ρ0 in only 23 % of updates; in 77 % its search ran to the end of
its path, [0.9, 3.0], and it acted as that fixed rule (drift clips too few tokens for the bounds to
rebalance ρ). λ stays below 2 because some failures stop early on a wrongly added "hit". With 10
numbers instead of 8 and 800 warm-start steps λ reaches 2.0-2.25, but sampled accuracy is then 30-37 %.

Each preset is designed for ≥ 10 seeds (only the rollout seed changes) and
evaluates on the task's whole held-out pool of 1,000 problems.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from ..rl.config import RLConfig
from .tasks import TASKS, Task, get_task
from .tasks.search import SearchTask
from .warmstart import WarmstartConfig, default_config, smoke_config

HELDOUT = 1000          # the whole held-out pool of a task (tasks/base.py, HELDOUT_POOL)
PARTIAL_BUDGET = 8      # long-failures-partial: tokens per answer per step (a 40-token failure spans 5 steps)
THREE_RULES = ("symmetric", "clip-higher", "bapo")


@dataclass(frozen=True)
class Preset:
    """One named setting. ``rl`` holds :class:`toy_rl.rl.loop.RLConfig` fields (all but rule and seed)."""
    name: str
    task: str
    task_params: dict = field(default_factory=dict)
    warmstart: WarmstartConfig = field(default_factory=WarmstartConfig)
    rl: dict = field(default_factory=dict)
    why: str = ""
    rules: tuple | None = None      # labels of the comparison's rules (control_rules); None: all of them

    def make_task(self) -> Task:
        """The task with this preset's settings. "search" is built here until the task registry lists it."""
        if self.task == SearchTask.name and self.task not in TASKS:
            return SearchTask(**self.task_params)
        return get_task(self.task, **self.task_params)

    def rl_config(self, rule: str = "bapo", seed: int = 0, **overrides) -> RLConfig:
        """The run's RLConfig: this preset's settings, then ``overrides`` (e.g. steps), then rule and seed."""
        return RLConfig(**{**self.rl, **overrides, "rule": rule, "seed": seed})


# today's run_one defaults (toy_rl/arithmetic/run.py, DEFAULTS), with its budget of max_answer_chars + 1
_TODAY = dict(steps=200, prompts=16, group_size=8, lr=3e-4, eval_every=25, checkpoint_every=50, temperature=1.0)

_SEARCH = SearchTask()
_SEARCH_WARMSTART = default_config(_SEARCH)
# 120 updates, evaluated every 20: ~70 s a run on one thread, so the comparison (9 rules x 10 seeds) fits about
# an hour on a 2-core CPU (docs/protocol.md §6)
_SEARCH_RL = dict(steps=120, prompts=16, group_size=8, lr=5e-4, staleness=8, mode="lag", max_new_tokens=40,
                  temperature=1.0, eval_every=20, eval_size=HELDOUT, checkpoint_every=40)

PRESETS: dict[str, Preset] = {p.name: p for p in (
    Preset("balanced", "add", {}, default_config("add"),
           {**_TODAY, "staleness": 2, "mode": "reuse", "max_new_tokens": get_task("add").max_answer_chars + 1,
            "eval_size": HELDOUT},
           why="today's setting: short answers of equal length, λ ≈ 1, so ρ ≈ 0.5 and BAPO stays at [0.6, 1.2]"),
    Preset("long-failures", "search", {}, _SEARCH_WARMSTART, _SEARCH_RL,
           why="wrong answers keep trying until the 40-token budget, right ones stop at the hit: λ ≈ 2"),
    Preset("long-failures-t0.6", "search", {}, _SEARCH_WARMSTART, {**_SEARCH_RL, "temperature": 0.6},
           why="long-failures at the paper's sampling temperature 0.6"),
    Preset("long-failures-partial", "search", {}, _SEARCH_WARMSTART,
           {**_SEARCH_RL, "staleness": 0, "mode": "reuse", "partial": PARTIAL_BUDGET},
           why=f"long-failures with partial rollout ({PARTIAL_BUDGET} tokens per answer per step) instead of lag 8",
           rules=THREE_RULES),
)}
DEFAULT = "long-failures"


def get_preset(name: str = DEFAULT) -> Preset:
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; choose from {', '.join(PRESETS)}")
    return PRESETS[name]


def as_preset(preset: Preset | str) -> Preset:
    """The :class:`Preset` a name stands for (:func:`get_preset`: an unknown name is a ValueError naming the
    choices); a Preset passes as it is. The one door where a preset's name becomes the object: only the functions a
    notebook or a command calls with a name (``comparison.compare``, ``comparison.load_comparison``,
    ``pilot.pilot``, ``step_grid.run_step_grid``, :func:`smoke_preset`) pass through it; every function below them
    takes a Preset."""
    return get_preset(preset) if isinstance(preset, str) else preset


def with_lr(preset: Preset, lr: float) -> Preset:
    """The preset at step size ``lr``, named ``<name>-lr<lr>`` so its runs never mix with the preset's own (the
    preset itself if ``lr`` is its own)."""
    if not (isinstance(lr, (int, float)) and lr > 0):
        raise ValueError(f"the step size must be a positive number; got {lr!r}")
    if lr == preset.rl_config().lr:
        return preset
    return dataclasses.replace(preset, name=f"{preset.name}-lr{lr:g}", rl={**preset.rl, "lr": lr})


def at_step(preset: Preset, factor: float) -> Preset:
    """The preset at ``factor`` × its step size: a cell of the step-size grid (docs/protocol.md §7a)."""
    if not (isinstance(factor, (int, float)) and factor > 0):
        raise ValueError(f"the step factor must be a positive number; got {factor!r}")
    return with_lr(preset, preset.rl_config().lr * factor)


SMOKE_RL = dict(prompts=4, group_size=4, eval_size=32, steps=4, eval_every=2, checkpoint_every=2)


def smoke_preset(preset: Preset | str = DEFAULT) -> Preset:
    """The preset shrunk to a check that runs in seconds (not a result): the tiny warm start of
    :func:`~toy_rl.arithmetic.warmstart.smoke_config` with a context that fits the preset's prompts and budget,
    small batches, 4 updates (with partial rollout, enough steps for an answer of the whole budget to finish
    twice: 10 at 40 tokens and 8 per step); named ``<name>-smoke`` so its run folders never mix with the real ones.
    ``preset``: a name or a Preset (:func:`as_preset`)."""
    preset = as_preset(preset)
    task = preset.make_task()
    longest = max(len(p.prompt) for p in task.heldout(SMOKE_RL["eval_size"])) + 1
    block = longest + max(preset.rl.get("max_new_tokens", 0), task.max_answer_chars + 1)     # answer + EOS
    warm = smoke_config(task)
    warm = dataclasses.replace(warm, model=dataclasses.replace(warm.model, block_size=max(warm.model.block_size, block)))
    rl = {**preset.rl, **SMOKE_RL}
    if preset.rl.get("partial"):                # partial rollout: room for a group to finish (twice its longest)
        rl["steps"] = max(rl["steps"], 2 * -(-rl.get("max_new_tokens", 16) // preset.rl["partial"]))
    return dataclasses.replace(preset, name=f"{preset.name}-smoke", warmstart=warm, rl=rl)


def check_preset(preset: Preset) -> None:
    """ValueError if the preset cannot run: a bad RL field, a prompt plus budget over the model's context,
    or fewer held-out problems than the task has."""
    task = preset.make_task()
    fields = {f.name for f in dataclasses.fields(RLConfig)} - {"rule", "seed"}
    unknown = set(preset.rl) - fields
    if unknown:
        raise ValueError(f"preset {preset.name!r}: rl has unknown fields {sorted(unknown)}")
    cfg = preset.rl_config()
    longest = max(len(p.prompt) for p in task.heldout(cfg.eval_size)) + 1          # + BOS
    if longest + cfg.max_new_tokens > preset.warmstart.model.block_size:
        raise ValueError(f"preset {preset.name!r}: prompt of {longest} tokens + max_new_tokens={cfg.max_new_tokens} "
                         f"exceeds block_size={preset.warmstart.model.block_size}")
