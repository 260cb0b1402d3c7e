"""One runner for every rung: :func:`run` one spec, :func:`sweep` many, :func:`load` them back from disk.

    specs = grid("arithmetic", "add", rules=RULES, stalenesses=(0, 4), seeds=range(5))
    results = sweep(specs)                  # {(scenario, rule): [records of each seed]}
    print(format_table(summarize(results)))
    results = load("runs/arithmetic-add")   # the same dict, read from the run folders

Runs are resumable: a run whose folder already holds its finished log with the same config is read back
(not run again); an interrupted one continues from its last checkpoint (``resume=False`` starts over). So an
interrupted sweep is finished by calling it again. Every record returned carries the run's ``seed``. A finished
run that ``runs/`` lacks is read from its twin in the committed ``results/`` and announced in one line; what may
train is a choice (:mod:`toy_rl.experiments.logged`: TRAIN "missing", "all" or "never").
"""
from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

from ..rl.config import config_differences, rule_label
from ..rl.logbook import check_run, read_jsonl
from ..threads import cpu_threads
from ..timing import up_front
from .layout import run_dir, scenario_of, seed_of
from .logged import LOGGED_ONLY, announce, candidates, train_mode
from .plan import Plan
from .spec import RunSpec, backend


def finished(spec: RunSpec, folder=None) -> list[dict] | None:
    """The records of this run if its folder (default: :func:`read_dir`) holds it finished with the same config,
    field by field (a field added since the run was logged counts as its default), else None."""
    if folder is None:
        return _found(spec)[1]
    out = Path(folder)
    metrics, config = out / "metrics.jsonl", out / "config.json"
    if not (metrics.is_file() and config.is_file()):
        return None
    try:
        saved, records = json.loads(config.read_text()), read_jsonl(metrics)
    except (OSError, ValueError):
        return None
    be = backend(spec.rung)
    if hasattr(be, "saved_config"):                 # rung 1 writes its own config.json
        same = saved == json.loads(json.dumps(be.saved_config(spec)))
    else:                                           # the RL loop's: RLConfig.to_dict()
        same = isinstance(saved, dict) and not config_differences(saved, spec.rl)
    if same and hasattr(be, "same_run"):            # rung 3-4: also the compute dtype
        same = be.same_run(saved, spec)
    final = [r for r in records if r.get("final")]
    return records if same and final and final[-1]["step"] == spec.rl.steps else None


def _found(spec: RunSpec) -> tuple[Path | None, list[dict] | None]:
    """(the folder a finished run of ``spec`` is read from: its run folder, else the committed twin in results/
    (:mod:`toy_rl.experiments.logged`); its records), or (None, None)."""
    for folder in candidates(run_dir(spec)):
        records = finished(spec, folder)
        if records is not None:
            return folder, records
    return None, None


def read_dir(spec: RunSpec) -> Path:
    """The folder a finished run of ``spec`` is read from (``runs/...`` or its twin ``results/...``); its run
    folder if none holds it yet."""
    return _found(spec)[0] or run_dir(spec)


def read_back(specs) -> list[list[dict] | None]:
    """The records of each finished run (None for one still to train); prints one line per experiment read
    from the committed logs (:func:`toy_rl.experiments.logged.announce`)."""
    found = [_found(s) for s in specs]
    announce([folder for folder, _ in found])
    return [records for _, records in found]


def _with_seed(records: list[dict], seed) -> list[dict]:
    for r in records:
        r.setdefault("seed", seed)
    return records


def _why_not(spec: RunSpec) -> str:
    """Why a logged run folder is not read back, for the message that refuses to train it: its log is damaged
    (:func:`toy_rl.rl.logbook.check_run` names the file and line), or its config differs; "" with no log."""
    folder = run_dir(spec)
    if not (folder / "metrics.jsonl").is_file():
        return ""
    try:
        check_run(folder)
    except ValueError as err:
        return f" (its log is damaged: {err})"
    return " (a log is there, but of another config or unfinished)"


def _train(specs: list[RunSpec]) -> list[list[dict]]:
    """Train runs of one (scenario, rule) cell that differ only in their seed; a backend with ``train_seeds``
    (rung 1) runs them side by side. With TRAIN "never" (or ``TOY_RL_LOGGED_ONLY=1``, how the executed notebooks
    in docs/course are made and checked) nothing trains: FileNotFoundError naming the run."""
    if train_mode() == "never":
        why = (f"{LOGGED_ONLY} is set (the committed logs are read, nothing trains)" if os.environ.get(LOGGED_ONLY)
               else 'TRAIN is "never" (set it to "missing" to train what is missing)')
        where = candidates(run_dir(specs[0]))
        where = f"neither {where[0]} nor {where[1]}" if len(where) == 2 else f"{where[0]}"
        raise FileNotFoundError(f"{where} holds no finished run with this config{_why_not(specs[0])}, and {why}: "
                                f"{len(specs)} run(s) missing")
    be = backend(specs[0].rung)
    with cpu_threads(specs[0].threads):
        if hasattr(be, "train_seeds"):
            return be.train_seeds(specs, [run_dir(s) for s in specs])
        return [be.train(s, run_dir(s)) for s in specs]


def _state(spec: RunSpec) -> tuple[str, list[dict] | None, Path | None]:
    """(status, the records of a finished run or None, the folder they were read from or None)."""
    folder, done = _found(spec) if spec.resume else (None, None)
    if done is not None:
        return "finished", done, folder
    return ("resumed" if spec.resume and (run_dir(spec) / "checkpoint.pt").is_file() else "new"), None, None


def status(spec: RunSpec) -> str:
    """"finished" (its log is read back), "resumed" (continues from its checkpoint) or "new"."""
    return _state(spec)[0]


def run(spec: RunSpec) -> list[dict]:
    """One run (or its finished log, read back); returns its metric records, the last one with ``final``."""
    done = _state(spec)[1]
    return _with_seed(done if done is not None else _train([spec])[0], spec.rl.seed)


def cell_of(spec: RunSpec) -> tuple[str, str]:
    """(scenario, rule label): the key of a run in a sweep's results."""
    return scenario_of(spec), rule_label(spec.rl.rule)


def sweep(specs, on_run=None, announce_logged: bool = True) -> dict:
    """Run every spec (finished ones are read back); returns {(scenario, rule): [records of each seed]} in the
    order of ``specs``. Rung 1 runs the seeds of a (scenario, rule) cell side by side (specs equal but for the
    seed). ``on_run(spec, records, status)`` is called after each run (status: "finished", "resumed", "new").
    First a line per experiment read from the committed logs in results/ (``announce_logged=False``: not, for a
    caller that said so already)."""
    specs = list(specs)
    if not specs:
        raise ValueError("sweep needs at least one spec (see toy_rl.experiments.grid)")
    for s in specs:
        if not isinstance(s, RunSpec):
            raise ValueError(f"sweep takes RunSpecs (toy_rl.experiments.make_spec / grid); got {type(s).__name__}")
    groups = [(group, [_state(s) for s in group]) for group in _cells(specs)]
    todo = [s for group, states in groups for s, (_, done, _) in zip(group, states) if done is None]
    if announce_logged:
        announce([folder for _, states in groups for _, _, folder in states])
    results: dict = {}
    with up_front(Plan(specs=todo)):                 # one line first if the runs still to train take long
        for group, states in groups:
            pending = [s for s, (_, done, _) in zip(group, states) if done is None]
            trained = iter(_train(pending)) if pending else iter(())
            for s, (st, done, _) in zip(group, states):
                records = _with_seed(done if done is not None else next(trained), s.rl.seed)
                results.setdefault(cell_of(s), []).append(records)
                if on_run is not None:
                    on_run(s, records, st)
    return results


def _cells(specs: list[RunSpec]) -> list[list[RunSpec]]:
    """Rung 1: the specs grouped by everything but the seed (first-seen order); other rungs: one spec each."""
    groups: list[tuple[RunSpec, list]] = []
    for s in specs:
        if not hasattr(backend(s.rung), "train_seeds"):
            groups.append((None, [s]))
            continue
        key = dataclasses.replace(s, rl=dataclasses.replace(s.rl, seed=0))
        match = next((g for k, g in groups if k is not None and k == key), None)
        if match is None:
            groups.append((key, [s]))
        else:
            match.append(s)
    return [g for _, g in groups]


def load(root) -> dict:
    """Read logged runs back: {(scenario, rule): [records of each seed]} from ``<root>/<scenario>/<rule>/seed<k>/``
    (``root`` is one experiment's folder, e.g. ``runs/arithmetic-add``), seeds in numeric order; unfinished runs
    included (their last record has no ``final``)."""
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"no runs in {root} (not a folder)")
    found = [p for p in root.glob("*/*/seed*/metrics.jsonl") if seed_of(p.parent) is not None]
    found.sort(key=lambda p: (p.parts[-4], p.parts[-3], seed_of(p.parent)))
    results: dict = {}
    for path in found:
        results.setdefault((path.parts[-4], path.parts[-3]), []).append(
            _with_seed(read_jsonl(path), seed_of(path.parent)))
    return results
