"""Run a notebook in full mode from the committed logs, and build or check the executed copies.

A notebook's full configuration reads the runs ``runs/`` lacks from their twins in ``results/`` and says so
(:mod:`toy_rl.experiments.logged`); :func:`execute_from_logs` runs it as it is, with
:data:`~toy_rl.experiments.logged.LOGGED_ONLY` set: ``results/`` alone is read (so a developer's own ``runs/``
cannot leak into the copies) and a run missing from it is an error naming it. A copy therefore shows what a
student sees on a fresh clone.
"""
from __future__ import annotations

import contextlib
import os
import platform
import time
from pathlib import Path

import nbformat

from ..experiments.logged import LOGGED_ONLY, TRAIN_ENV
from ..notebook_runner import run_notebook
from ..smoke import ENV as SMOKE_ENV
from .logs import COURSE, NOTEBOOKS, RESULTS, machine_line, size
from .outputs import clean, compare


@contextlib.contextmanager
def environment(**values):
    """Set environment variables (the kernel inherits them) for the duration of the block."""
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def execute_from_logs(path, timeout: int = 1800):
    """The notebook at ``path`` executed in full mode from the committed logs alone, its outputs cleaned
    (:func:`toy_rl.course.outputs.clean`). NotebookError if a cell fails (a missing run among them)."""
    with environment(**{LOGGED_ONLY: "1", SMOKE_ENV: "0", TRAIN_ENV: "never"}):
        return clean(run_notebook(Path(path), smoke=False, timeout=timeout))


def notebooks(names=None) -> list[Path]:
    """notebooks/*.ipynb, or those whose file name starts with one of ``names`` ("04", "04_arithmetic...")."""
    found = sorted(NOTEBOOKS.glob("*.ipynb"))
    if not names:
        return found
    chosen = [p for p in found if any(p.name.startswith(n) for n in names)]
    unknown = [n for n in names if not any(p.name.startswith(n) for p in found)]
    if unknown:
        raise ValueError(f"no notebook named {', '.join(unknown)}; one of {', '.join(p.stem for p in found)}")
    return chosen


def build(names=None, out=COURSE, results=RESULTS, on_done=None) -> list[dict]:
    """Execute the notebooks from the logs into ``out`` (one .ipynb each) and write ``out/README.md``, the index
    (each notebook's size and time, the machine, the logs' size). ``on_done(entry)`` after each notebook."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    entries = []
    for path in notebooks(names):
        t0 = time.perf_counter()
        nb = execute_from_logs(path)
        nbformat.write(nb, out / path.name)
        entries.append(dict(name=path.name, seconds=round(time.perf_counter() - t0, 1),
                            bytes=(out / path.name).stat().st_size))
        if on_done is not None:
            on_done(entries[-1])
    write_index(out, results)
    return entries


def check(names=None, committed=COURSE, on_done=None) -> dict[str, list[str]]:
    """Execute the notebooks from the logs again and compare each with its committed copy in ``committed``:
    ``{notebook name: [differences]}`` (an empty list: up to date). A missing copy is one difference."""
    found = {}
    for path in notebooks(names):
        copy = Path(committed) / path.name
        if not copy.is_file():
            found[path.name] = [f"{copy} is missing: run `toy-rl course build {path.stem[:2]}`"]
        else:
            found[path.name] = compare(nbformat.read(copy, as_version=4), execute_from_logs(path))
        if on_done is not None:
            on_done(path.name, found[path.name])
    return found


def machine() -> str:
    """One line: the machine and the versions the copies were executed with."""
    import torch
    return (f"{machine_line()}; Python {platform.python_version()}, "
            f"torch {torch.__version__}")


def write_index(out, results=RESULTS) -> Path:
    """``out/README.md``: the executed notebooks, their sizes, how they were made and on what machine."""
    out = Path(out)
    copies = sorted(out.glob("*.ipynb"))
    rows = "\n".join(f"| [{p.stem}]({p.name}) | {p.stat().st_size / 1e6:.2f} MB |" for p in copies)
    total = sum(p.stat().st_size for p in copies)
    text = f"""# The course, executed

Every notebook of `notebooks/`, executed top to bottom in its full configuration, outputs included, so it reads
without running (GitHub shows them as they are). The sliders are live only in a running notebook; here each
shows the figure drawn at its default position.

| notebook | size |
|---|---|
{rows}

Total {total / 1e6:.1f} MB (images re-encoded with a 256-colour palette). They were executed from the run logs
committed in `results/` ({size(results) / 1e6:.1f} MB of `metrics.jsonl` and `config.json` per run, plus rung 3's
stored batches; no checkpoints), as a fresh clone runs them: each notebook reads the runs `runs/` lacks
from `results/` and says so in one line, and none of the logged runs is trained again (rung 1's bandit runs
and the demos are computed in the notebooks, in seconds). The exception is marked: cells tagged `course-live` in notebooks 04 and 05 compute from rung 2's warm
start as the building machine trained it (the warm start's own accuracy and answers, a stale batch, a short run,
partial-rollout demos), so their numbers are this machine's: a warm start trained again, on another machine or an
empty cache, is another model.

Made by `toy-rl course build` on {machine()}, {time.strftime('%Y-%m-%d')}.
`toy-rl course check` (run by `tests/test_course.py`) executes them again and fails when an output no longer
matches what the current code computes from the logs (for a `course-live` cell: when it no longer shows the
same kinds of output). To add your own runs' logs: `toy-rl course collect`.

Teaching from these: the instructor pack, [`docs/instructor/`](../instructor/README.md) (solutions, discussion
questions, slide figures, offline HTML with `toy-rl course html NN`).
"""
    (out / "README.md").write_text(text)
    return out / "README.md"
