"""The README's first command sets up everything the notebooks need, and every notebook opens on the committed logs in
minutes (issues 13 and 31: "Every notebook works after the first README command"; "Step through every notebook on a
fresh clone in minutes").

A clean copy of the repository (its tracked files, as a fresh clone has them), the setup part of the first command
alone -- ``bash scripts/setup.sh``, no argument, into a fresh ``.venv`` -- and then every ``notebooks/*.ipynb`` in its
**full** configuration, as a student runs it (default parameters, ``TRAIN = "missing"``, no environment switch), with
the fresh venv's own runner, as the course guide shows it::

    .venv/bin/python -m toy_rl.notebook_runner --full --save <tmp> notebooks/<name>.ipynb

with an empty ``TOY_RL_CACHE`` (no warm start, no converted SmolLM2 copy) and no ``runs/``. Every notebook must run,
read its runs from ``results/`` and say so, train none of them (``runs/`` gets no finished run), and show what its
reading copy in ``docs/course/`` shows (:func:`toy_rl.course.outputs.compare`; the ``course-live`` cells, which
compute from a warm start trained here, only by the kinds of output). Each notebook's wall time is printed: the course
guide's time column quotes it. (``jupyter nbconvert --execute`` runs them too, but its client can sit out the whole
cell timeout after a widget cell, jupyter/nbclient#312; the runner reads the kernel's replies in short polls.)

Slow on purpose, and part of the normal ``pytest`` run, so CI checks it on every push: one test, every notebook.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _tracked_files() -> list[str]:
    """The files a fresh clone holds: git's tracked files (those that exist in the working tree)."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: no way to tell which files a fresh clone would hold")
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    return [name for name in listed.decode().split("\0") if name and (ROOT / name).is_file()]


def _clean_copy(dest: Path) -> Path:
    for name in _tracked_files():
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, target)
    return dest


def _env(tmp: Path, copy: Path) -> dict:
    """The environment of a fresh shell: this one without any virtual env or Python path, with an empty toy_rl
    cache and jupyter data folder (no kernelspec or cached model from elsewhere can step in)."""
    env = {k: v for k, v in os.environ.items()          # (MPLBACKEND=Agg made nbconvert wait out the timeout after
           if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "CONDA_PREFIX", "TOY_RL_SMOKE", "JUPYTER_PATH",
                        "MPLBACKEND")}                       # each widget cell: a fresh shell does not set it)
    venv_bin = str(Path(sys.base_prefix) / "bin")
    path = [p for p in env.get("PATH", "").split(os.pathsep) if p and not p.startswith(str(ROOT / ".venv"))]
    env.update(PATH=os.pathsep.join([str(copy / ".venv" / "bin"), *path, venv_bin]),
               TOY_RL_CACHE=str(tmp / "cache"), JUPYTER_DATA_DIR=str(tmp / "jupyter-data"),
               JUPYTER_PREFER_ENV_PATH="1")
    return env


def test_first_readme_command_sets_up_every_notebook(tmp_path):
    copy = _clean_copy(tmp_path / "clone")
    env = _env(tmp_path, copy)
    t0 = time.perf_counter()
    setup = subprocess.run(["bash", "scripts/setup.sh"], cwd=copy, env=env, capture_output=True, text=True,
                           timeout=1800)
    assert setup.returncode == 0, f"bash scripts/setup.sh failed:\n{setup.stdout}\n{setup.stderr}"
    setup_s = time.perf_counter() - t0
    python = copy / ".venv" / "bin" / "python"
    where = subprocess.run([str(python), "-c", "import toy_rl; print(toy_rl.__file__)"], env=env, cwd=tmp_path,
                           capture_output=True, text=True, check=True).stdout.strip()
    assert Path(where).resolve().is_relative_to(copy.resolve()), where      # the copy's own editable install

    notebooks = sorted((copy / "notebooks").glob("*.ipynb"))
    assert len(notebooks) >= 7
    out = tmp_path / "executed"
    failed, times = [], {}
    for nb in notebooks:
        t1 = time.perf_counter()
        run = subprocess.run([str(python), "-m", "toy_rl.notebook_runner", "--full", "--save", str(out), str(nb)],
                             cwd=copy, env=env, capture_output=True, text=True, timeout=1800)
        times[nb.name] = round(time.perf_counter() - t1)
        if run.returncode != 0 or not (out / nb.name).is_file():
            failed.append(f"{nb.name} (exit {run.returncode}):\n{run.stderr[-3000:]}")
    print(f"setup.sh {setup_s:.0f} s; notebooks in full mode, seconds: {times}")
    assert not failed, "\n\n".join(failed)
    assert not list((copy / "runs").rglob("metrics.jsonl")), "a notebook trained a run that results/ holds"

    import nbformat
    from toy_rl.course.outputs import clean, compare
    stale = {}
    for nb in notebooks:
        executed = clean(nbformat.read(out / nb.name, as_version=4))
        outputs = " ".join(str(o) for c in executed.cells if c.cell_type == "code" for o in c.get("outputs", []))
        assert "needs a real language model" not in outputs          # 06 did not stop at its setup cell
        if 'TRAIN = "missing"' in nbformat.read(nb, as_version=4).cells[1].source:
            assert "read from the committed logs in ../results/" in outputs, f"{nb.name} does not say what it read"
        differences = compare(nbformat.read(ROOT / "docs" / "course" / nb.name, as_version=4), executed)
        if differences:
            stale[nb.name] = differences[:10]
    assert not stale, "a fresh clone's notebooks differ from their reading copies:\n" + "\n".join(
        f"{name}:\n  " + "\n  ".join(d) for name, d in stale.items())
