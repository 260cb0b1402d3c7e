"""Rung 1's robustness grid: the default comparison at every step size x task instance of a grid declared before
running, a verdict per grid cell, and one verdict across the grid (docs/protocol.md §7a).

    from toy_rl.bandit.grid import run_grid, grid_verdicts, format_grid
    grid = run_grid("long-failures", seeds=range(20))          # 9 comparisons, ~8 min on one thread
    print(format_grid(grid))

Why: a wider trust region is also a bigger step, so a verdict that holds at one step size may flip at another
(measured: at half the preset's η claim 5 was contradicted on every task instance, at twice the η claim 6 turned
partly supported). A claim is **supported** only if it is supported in every grid cell; **contradicted** only
if contradicted in every one; **not robust** when some cells support it and others contradict it; otherwise
the count of cells says how far it holds. The grid: η × {0.5, 1, 2} of the preset's η, and task instances
(``task_seed``) 0, 1, 2; the run seeds are the same in every cell.

Each grid cell is :func:`toy_rl.bandit.comparison.compare` (all (mode, staleness) cells, every rule and
control, paired by seed, Holm across the cell's claims) and its rows are written as ``rows.json`` into
``<out>/<preset>/eta<factor>-task<k>/`` (a finished cell is read back, not rerun); ``toy-rl course collect``
copies them into ``results/``, from which the verdicts are recomputed.
"""
from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

from ..experiments import logged
from ..experiments.controls import control_rules
from ..rl.run_folder import write_text
from ..strict_json import dumps, jsonable
from ..timing import announce, quiet
from ..verdicts import across
from .backend import comparison_seconds
from .comparison import CELLS, PRIMARY, comparison_checks, compare
from .presets import DEFAULT, get_preset

STEP_FACTORS = (0.5, 1.0, 2.0)
TASK_SEEDS = (0, 1, 2)
ROWS = "rows.json"


def cell_folder(out, preset: str, factor: float, task_seed: int) -> Path:
    return Path(out) / preset / f"eta{factor:g}-task{task_seed}"


def run_grid(preset: str = DEFAULT, seeds=range(20), factors=STEP_FACTORS, task_seeds=TASK_SEEDS,
             out="runs/bandit-grid", steps: int | None = None, cells=CELLS, progress: bool = False) -> dict:
    """Every (η factor, task instance) cell of the grid: {(factor, task_seed): rows}. Finished cells (their
    ``rows.json`` with the same settings) are read back; the others are computed and written at once, so an
    interrupted grid continues where it stopped."""
    base = get_preset(preset)
    seeds = [int(s) for s in seeds]
    if not factors or any(not (isinstance(f, (int, float)) and f > 0) for f in factors):
        raise ValueError(f"factors must be positive multiples of the preset's step size; got {factors!r}")
    plan = {}
    for factor in factors:
        for task_seed in task_seeds:
            config = replace(base, lr=base.lr * factor, task_seed=task_seed, steps=steps or base.steps)
            settings = jsonable(dict(preset=preset, factor=factor, task_seed=task_seed, seeds=seeds,
                                     cells=[list(c) for c in cells], config=config.to_dict()))
            plan[factor, task_seed] = config, settings
    found = {key: _read_back(cell_folder(out, preset, *key), settings) for key, (_, settings) in plan.items()}
    logged.announce([folder for folder, _ in found.values()], noun="grid cell")   # a line if results/ has some
    saved = {key: cell for key, (_, cell) in found.items()}
    todo = [key for key in plan if saved[key] is None]
    if todo and logged.train_mode() == "never":
        raise FileNotFoundError(f"{len(todo)} grid cell(s) of {Path(out) / preset} are neither in runs/ nor in the "
                                'committed logs, and TRAIN is "never" (set it to "missing" to compute them)')
    config = plan[next(iter(plan))][0]
    announce(f"the rung-1 robustness grid ({len(todo)} of {len(plan)} grid cells to compute)",
             len(todo) * comparison_seconds(len(seeds), config.steps, len(cells), len(control_rules()) + 1))
    grid = {}
    with quiet():
        for key, (config, settings) in plan.items():
            if key in todo:
                if progress:
                    print(f"grid cell η × {key[0]:g}, task {key[1]}", flush=True)
                rows = compare(config, seeds, cells)
                folder = cell_folder(out, preset, *key)
                write_text(folder / ROWS, dumps(dict(settings=settings, rows=rows)))
                saved[key] = read_cell(folder)          # as it is read back later: NaN as None, tuples as lists
            grid[key] = saved[key]["rows"]
    return grid


def _read_back(folder, settings) -> tuple[Path | None, dict | None]:
    """(where a finished cell with these settings is read from: ``folder`` or its committed twin in results/
    (:mod:`toy_rl.experiments.logged`); the cell), or (None, None)."""
    for where in logged.candidates(folder):
        cell = read_cell(where)
        if cell and cell["settings"] == settings:
            return where, cell
    return None, None


def read_cell(folder) -> dict | None:
    """The saved ``{"settings", "rows"}`` of one grid cell, or None if it has none."""
    path = Path(folder) / ROWS
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text())
    except ValueError as err:
        raise ValueError(f"{path} is damaged ({err}); delete it to compute the cell again") from None


def load_grid(root, preset: str = DEFAULT) -> dict:
    """A grid read back from ``root`` (``runs/bandit-grid`` or ``results/bandit-grid``): {(factor, task_seed): rows}."""
    found = {}
    for path in sorted((Path(root) / preset).glob(f"eta*-task*/{ROWS}")):
        cell = read_cell(path.parent)
        found[cell["settings"]["factor"], cell["settings"]["task_seed"]] = cell["rows"]
    if not found:
        raise FileNotFoundError(f"no grid cells under {Path(root) / preset} (toy-rl bandit --compare {preset} --grid)")
    return found


def grid_verdicts(grid: dict) -> dict:
    """{claim: {"across": one verdict (:func:`across`), "cells": {(factor, task_seed): status}, "primary":
    {(factor, task_seed): BAPO − clip-higher on the primary endpoint, mean over the (mode, staleness) cells}}}."""
    out = {}
    for key, rows in grid.items():
        for v in comparison_checks(rows):
            entry = out.setdefault(v.claim, dict(text=v.text, cells={}, primary={}))
            entry["cells"][key] = v.status
            diffs = [t.diff for t in v.tests if t.key and t.key[2:] == ("bapo", "clip-higher")]
            entry["primary"][key] = sum(diffs) / len(diffs) if diffs else math.nan
    for entry in out.values():
        entry["across"] = across(list(entry["cells"].values()))
    return out


def format_grid(grid: dict) -> str:
    """The verdict of each claim in each grid cell, one line per step size, and the verdict across the grid."""
    verdicts = grid_verdicts(grid)
    factors = sorted({f for f, _ in grid})
    tasks = sorted({t for _, t in grid})
    lines = []
    for claim, v in verdicts.items():
        word, colon, rest = v["across"].partition(":")
        lines.append(f"claim {claim} ({v['text']}): {word.upper()}{colon}{rest}")
        for f in factors:
            cells = ", ".join(f"task {t}: {v['cells'][f, t].split(':')[0]}" for t in tasks if (f, t) in v["cells"])
            lines.append(f"  η × {f:g}: {cells}")
    lines.append(f"(primary endpoint: {PRIMARY.replace('_', ' ')}; each grid cell: every (mode, staleness) cell, "
                 "paired by seed, Holm across its claims, differences under 1 point counting neither way)")
    return "\n".join(lines)
