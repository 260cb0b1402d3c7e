"""Where a finished run is read from: your own ``runs/`` first, then the committed logs in ``results/``.

``results/`` mirrors ``runs/`` (``runs/compare/long-failures/...`` has the twin ``results/compare/long-failures/...``)
and holds the logs of every run the notebooks show in full, so a fresh clone opens on them instead of training
for an hour. What may train is a choice, one word in a notebook's parameters cell or ``--train`` on a command:

    set_train("missing")   # the default: read runs/, then results/; train only what neither holds
    set_train("all")       # ignore results/: train every run here (your own finished runs in runs/ are still
                           # read back; delete a folder of runs/ to train it again)
    set_train("never")     # read runs/, then results/; a run missing from both is an error, nothing trains

Runs you train always go to ``runs/``; nothing here writes to ``results/`` (``toy-rl course collect`` is the only
way in). ``TOY_RL_LOGGED_ONLY=1`` (how the reading copies in docs/course are executed) reads ``results/`` alone,
so a developer's own ``runs/`` cannot leak into them, and trains nothing.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUNS = ROOT / "runs"            # where every command and notebook writes (the default ``out``)
RESULTS = ROOT / "results"      # committed: the logs of the runs the notebooks show
ABOUT = RESULTS / "about.json"  # {experiment: {"made": date, "machine": ..., "command": ...}}
WARM_STARTS = "warm-starts"     # results/warm-starts/: committed LoRA warm starts (toy_rl.lm.warmstart)

TRAIN_ENV = "TOY_RL_TRAIN"
MODES = ("missing", "all", "never")
LOGGED_ONLY = "TOY_RL_LOGGED_ONLY"   # set to 1: read results/ only and train nothing (the reading copies)


def logged_only() -> bool:
    return os.environ.get(LOGGED_ONLY, "").strip() not in ("", "0")


def train_mode() -> str:
    """"missing", "all" or "never", from ``TOY_RL_TRAIN`` (default "missing"; "never" under TOY_RL_LOGGED_ONLY)."""
    if logged_only():
        return "never"
    return _checked(os.environ.get(TRAIN_ENV, "").strip() or "missing")


def _checked(mode) -> str:
    if mode not in MODES:
        raise ValueError(f"TRAIN must be one of {', '.join(map(repr, MODES))}; got {mode!r}")
    return mode


def set_train(mode: str) -> str:
    """Choose what may train from here on (module docstring); the notebooks call it from their ``TRAIN``
    parameter, the commands from ``--train``. Sets ``TOY_RL_TRAIN``, so worker processes follow it."""
    os.environ[TRAIN_ENV] = _checked(mode)
    return mode


def twin(folder) -> Path | None:
    """The committed twin ``results/X`` of a folder ``runs/X`` (relative to the working directory if ``folder``
    is), or None: ``folder`` is not under runs/, or TRAIN is "all"."""
    if train_mode() == "all":
        return None
    folder = Path(folder)
    try:
        rel = folder.resolve().relative_to(RUNS)
    except ValueError:
        return None
    found = RESULTS / rel
    return Path(os.path.relpath(found)) if not folder.is_absolute() else found


def candidates(folder) -> list[Path]:
    """The folders a finished run of ``folder`` may be read from, in order: ``folder`` then its twin; the twin
    alone under TOY_RL_LOGGED_ONLY (``folder`` itself when it has none)."""
    other = twin(folder)
    if other is None:
        return [Path(folder)]
    return [other] if logged_only() else [Path(folder), other]


def is_committed(folder) -> bool:
    """Whether ``folder`` lies in results/."""
    return Path(folder).resolve().is_relative_to(RESULTS)


def about(folder) -> tuple[str, dict]:
    """(the experiment a committed folder belongs to, e.g. "compare/long-failures", its record in
    ``results/about.json``: made, machine, command; {} if none)."""
    rel = Path(folder).resolve().relative_to(RESULTS).as_posix()
    known = json.loads(ABOUT.read_text()) if ABOUT.is_file() else {}
    name = max((k for k in known if rel == k or rel.startswith(k + "/")), key=len, default=rel.split("/")[0])
    return name, known.get(name, {})


def announce(folders, noun: str = "finished run") -> list[str]:
    """Print (and return) one line per experiment for the folders read from results/: how many runs (``noun``),
    where, when and on what machine they were made, the command that makes them again."""
    groups: dict[str, list[Path]] = {}
    for f in folders:
        if f is not None and is_committed(f):
            groups.setdefault(about(f)[0], []).append(Path(f))
    lines = []
    for name, fs in groups.items():
        info = about(fs[0])[1]
        where = os.path.relpath(RESULTS / name)
        made = f"made {info['made']} on {info['machine']} by: {info['command']}" if info else "no record of their making"
        lines.append(f"{len(fs)} {noun}{'s' * (len(fs) != 1)} read from the committed logs in {where} ({made}); "
                     'to train them here instead: TRAIN = "all" (--train all on a command)')
        print(lines[-1])
    return lines


def check_one_warm_start(folder) -> str | None:
    """The warm-start fingerprint every run under ``folder`` records in its config.json (None if none records
    one); ValueError if they record different ones: their runs did not start from the same model, so runs paired
    by seed would compare starting points as well as rules."""
    found = {}
    for config in sorted(Path(folder).rglob("config.json")):
        try:
            value = json.loads(config.read_text()).get("warm_start")
        except (OSError, ValueError):
            continue
        if value is not None:
            found.setdefault(value, config.parent)
    if len(found) > 1:
        raise ValueError(f"the runs under {folder} started from {len(found)} different LoRA warm starts: "
                         + ", ".join(f"{fp} ({where})" for fp, where in found.items()))
    return next(iter(found), None)
