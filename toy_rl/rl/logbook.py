"""Metrics as JSON lines, written as they come, that survive an interrupted run.

On resume from a checkpoint taken after update ``step``, the log must hold updates 0..step, once each,
in order: lines logged for later updates are dropped (the run died after logging them but before its
next checkpoint; they will be logged again, identically, since the run restarts from the same state),
and a torn last line (a write cut short) is dropped with a warning. Anything else (a gap, a duplicate, a
damaged line in the middle, no log at all) is a ValueError naming the file: resuming would report a
run with missing or doubled updates.
"""
from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

from .run_folder import load_state, write_text


def _clean(value):
    """JSON has no NaN/inf: write them as null. Floats keep 7 significant digits (float32 precision)."""
    if isinstance(value, float):
        return float(f"{value:.7g}") if math.isfinite(value) else None
    return value


class Logbook:
    def __init__(self, path: Path, resume_after: int | None = None):
        """A fresh log at ``path``, or with ``resume_after`` the log of updates 0..resume_after kept
        (checked by :func:`lines_to_resume`, rewritten atomically) and later ones dropped."""
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if resume_after is None:
            write_text(self.path, "")
        else:
            kept = lines_to_resume(self.path, resume_after + 1)
            write_text(self.path, "".join(line + "\n" for line in kept))

    def write(self, record: dict) -> None:
        with self.path.open("a") as f:
            f.write(json.dumps({k: _clean(v) for k, v in record.items()}) + "\n")
            f.flush()

    def read(self) -> list[dict]:
        return read_jsonl(self.path)


def _no_constant(name: str):
    raise ValueError(f"{name} is not a finite number (strict JSON has no NaN or Infinity)")


def _parse(path: Path, lines: list[str], repair_last: bool, strict: bool = False) -> list[tuple[str, dict]]:
    """(line, record) pairs; a torn last line is dropped (with a warning) if ``repair_last``; with ``strict``
    a NaN or Infinity (which Python's json reads, and no strict JSON has) is damage too."""
    out = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            record = json.loads(line, parse_constant=_no_constant) if strict else json.loads(line)
            if not isinstance(record, dict):
                raise ValueError("not a JSON object")
        except ValueError as e:
            if repair_last and i == len(lines) - 1:
                warnings.warn(f"{path}: dropped a torn last line (a write cut short): {line[:60]!r}", stacklevel=3)
                break
            raise ValueError(f"{path}, line {i + 1} is damaged ({e}); the log cannot be trusted: "
                             "delete the run folder, or start the run over (resume=False)") from None
        out.append((line, record))
    return out


def lines_to_resume(path, start: int) -> list[str]:
    """The lines of ``path`` to keep when resuming at update ``start`` (a checkpoint after ``start`` updates).

    They must be updates 0..start-1, once each and in order; lines for updates >= start (and the ``final``
    record) may follow and are dropped, as is a torn last line. ValueError naming the file otherwise.
    Reads only; writes nothing.
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path} is missing but the checkpoint beside it is after update {start}: the metrics "
                         "of those updates are lost; start the run over (resume=False)")
    records = _parse(path, path.read_text().split("\n"), repair_last=True)
    kept, steps = [], []
    for n, (line, r) in enumerate(records):
        step = r.get("step")
        if not isinstance(step, int):
            raise ValueError(f"{path}: record {n + 1} has no integer 'step' ({line[:60]!r})")
        if step >= start:                      # logged after the checkpoint: to be logged again
            continue
        if r.get("final") or len(kept) != n:
            what = "a final record" if r.get("final") else f"update {step} after a later update"
            raise ValueError(f"{path}: {what} before the checkpoint's update {start}; the log does not match "
                             "the checkpoint: start the run over (resume=False)")
        kept.append(line)
        steps.append(step)
    if steps != list(range(start)):
        seen = set(steps)
        dup = sorted({s for s in steps if steps.count(s) > 1})
        gap = [s for s in range(start) if s not in seen]
        problem = (f"updates {dup[:5]} logged twice" if dup else f"updates {gap[:5]}{'...' if len(gap) > 5 else ''} "
                   "missing" if gap else f"updates out of order: {steps[:10]}")
        raise ValueError(f"{path}: {problem}, but the checkpoint is after update {start}; resuming would report a "
                         "run with gaps: start the run over (resume=False)")
    return kept


def read_jsonl(path) -> list[dict]:
    """Every record of a JSON-lines file. ValueError naming the file and line if one is damaged."""
    path = Path(path)
    return [r for _, r in _parse(path, path.read_text().splitlines(), repair_last=False)]


def check_finished_log(path, steps: int) -> list[dict]:
    """The records of a finished run's log, checked as a gate before they are kept (``toy-rl course collect``):
    strict JSON lines (finite numbers only), updates 0..steps-1 once each and in order, then one ``final``
    record for update ``steps``, last. ValueError naming the file (and the line) otherwise. Reads only."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path} is missing")
    records = _parse(path, path.read_text().split("\n"), repair_last=False, strict=True)
    for n, (line, r) in enumerate(records):
        step, last = r.get("step"), n == len(records) - 1
        if not isinstance(step, int) or isinstance(step, bool):
            raise ValueError(f"{path}, record {n + 1}: no integer 'step' ({line[:60]!r})")
        if r.get("final") and not last:
            raise ValueError(f"{path}, record {n + 1}: a final record before the end of the log")
        want = steps if last else n
        if step != want or (last and not r.get("final")):
            what = ("no final record (the run did not finish)" if last and not r.get("final") and step == n else
                    f"update {step} where update {want} belongs (a gap, a repeat or a reordering)")
            raise ValueError(f"{path}, record {n + 1}: {what}")
    if len(records) != steps + 1:
        raise ValueError(f"{path}: {len(records) - 1} updates logged before the final record, but the run has "
                         f"{steps}" if records else f"{path} is empty")
    return [r for _, r in records]


def updates_so_far(folder) -> int | None:
    """How many updates a run still training has logged: its ``metrics.jsonl`` (missing: 0) is a clean start of a
    log (strict JSON lines, updates 0..n-1 once each and in order, no final record; a torn last line, being
    written, is dropped). None for a finished log or a damaged one. Reads only."""
    path = Path(folder) / "metrics.jsonl"
    if not path.is_file():
        return 0
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            records = _parse(path, path.read_text().split("\n"), repair_last=True, strict=True)
    except ValueError:
        return None
    if any(r.get("final") or r.get("step") != n for n, (_, r) in enumerate(records)):
        return None
    return len(records)


def check_run(folder) -> None:
    """The gate in front of ``results/`` (``toy-rl course collect``): a run folder is kept only if its
    ``config.json`` is a strict-JSON object with an integer ``steps``, its ``metrics.jsonl`` is that run's whole
    log (:func:`check_finished_log`) and its ``batches.pt``, where there is one, loads as tensors
    (``torch.load(weights_only=True)``); a folder holding a comparison's table instead (``rows.json``, rung 1's
    grid cells) only if :func:`check_table` passes. ValueError naming the file (and line) otherwise. Reads only."""
    folder = Path(folder)
    if (folder / TABLE).is_file() and not (folder / "metrics.jsonl").is_file():
        check_table(folder / TABLE)
        return
    config = folder / "config.json"
    try:
        saved = json.loads(config.read_text(), parse_constant=_no_constant)
    except FileNotFoundError:
        raise ValueError(f"{config} is missing") from None
    except ValueError as err:
        raise ValueError(f"{config} is not JSON ({err})") from None
    steps = saved.get("steps") if isinstance(saved, dict) else None
    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 0:
        raise ValueError(f"{config}: 'steps' must be a whole number of updates; got {steps!r}")
    check_finished_log(folder / "metrics.jsonl", steps)
    if (folder / "batches.pt").is_file():
        try:
            stored = load_state(folder / "batches.pt")
        except ValueError as err:
            raise ValueError(f"{folder / 'batches.pt'} does not load as tensors ({err})") from None
        check_stored_batches(stored, folder / "batches.pt")


TABLE = "rows.json"


def check_table(path) -> dict:
    """A comparison's saved table (rung 1's grid cells, :mod:`toy_rl.bandit.grid`): strict JSON (no NaN), an object
    with ``settings`` and ``rows``; every row names its ``rule`` and holds ``per_seed`` endpoint values (finite
    numbers, one per seed of ``seed_ids``): the numbers the verdicts are recomputed from. ValueError naming the
    file and the row otherwise."""
    path = Path(path)
    try:
        saved = json.loads(path.read_text(), parse_constant=_no_constant)
    except ValueError as err:
        raise ValueError(f"{path} is not strict JSON ({err})") from None
    if not (isinstance(saved, dict) and isinstance(saved.get("settings"), dict) and isinstance(saved.get("rows"), list)):
        raise ValueError(f"{path} is not a comparison's table (an object with 'settings' and 'rows')")
    for i, row in enumerate(saved["rows"]):
        seeds = row.get("seed_ids") if isinstance(row, dict) else None
        per = row.get("per_seed") if isinstance(row, dict) else None
        if not (isinstance(row, dict) and isinstance(row.get("rule"), str) and isinstance(seeds, list)
                and isinstance(per, dict)):
            raise ValueError(f"{path}, row {i + 1}: no rule, seed_ids and per_seed")
        for name, values in per.items():
            if not (isinstance(values, list) and len(values) == len(seeds)
                    and all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
                            for v in values)):
                raise ValueError(f"{path}, row {i + 1} ({row['rule']}): per_seed {name!r} must hold one finite "
                                 f"number per seed ({len(seeds)})")
    return saved


BATCH_TENSORS = ("logp", "old_logp", "advantages", "mask")


def check_stored_batches(stored, path) -> dict:
    """``stored`` ({update: batch}, what a run's ``batches.pt`` holds: per update the loss inputs
    :data:`BATCH_TENSORS`), checked as the loss checks them: ValueError naming ``path`` and the update for a
    missing tensor, mismatched shapes, NaN or inf log-probs or advantages, or a mask without a token."""
    import torch
    if not isinstance(stored, dict):
        raise ValueError(f"{path} does not hold stored batches ({{update: batch}}); got a {type(stored).__name__}")
    for step, batch in stored.items():
        where = f"{path}, update {step!r}"
        if not isinstance(step, int) or not isinstance(batch, dict):
            raise ValueError(f"{where}: not an update number with its batch (a dict)")
        missing = [k for k in BATCH_TENSORS if not isinstance(batch.get(k), torch.Tensor)]
        if missing:
            raise ValueError(f"{where}: no tensor {', '.join(missing)}")
        logp, old, adv, mask = (batch[k] for k in BATCH_TENSORS)
        if old.shape != logp.shape or mask.shape != logp.shape or adv.shape[0] != logp.shape[0]:
            raise ValueError(f"{where}: shapes do not match (logp {tuple(logp.shape)}, old_logp {tuple(old.shape)}, "
                             f"advantages {tuple(adv.shape)}, mask {tuple(mask.shape)})")
        if not all(torch.isfinite(t.float()).all() for t in (logp, old, adv)):
            raise ValueError(f"{where}: NaN or inf in logp, old_logp or advantages")
        if not mask.any():
            raise ValueError(f"{where}: the mask is all zero (no token)")
    return stored
