"""The run logs behind the executed notebooks: which folders of ``runs/`` the full notebooks read, and copying
them into the committed ``results/`` (metrics and configs only: no checkpoint, nothing that runs code on load).

A run folder is ``<experiment>/<scenario>/<rule>/seed<k>/`` (:func:`toy_rl.experiments.run_dir`); the
runner counts it finished when ``metrics.jsonl`` ends with the final update and ``config.json`` matches the
spec, so these two files are all a notebook needs to load it. Rung 3's runs also keep ``batches.pt`` (the
stored batches notebook 06 re-runs BAPO's search on): tensors only, read with ``torch.load(weights_only=True)``.
Rung 1's robustness grid keeps one ``rows.json`` per grid cell (``bandit-grid/<preset>/eta<f>-task<k>/``): the
per-seed endpoints its verdicts are recomputed from (:mod:`toy_rl.bandit.grid`).
"""
from __future__ import annotations

import datetime
import json
import os
import platform
import shutil
from pathlib import Path

from ..experiments.logged import ABOUT, RESULTS, ROOT, WARM_STARTS   # results/: the logs the notebooks show
from ..rl.logbook import check_run, updates_so_far

NOTEBOOKS = ROOT / "notebooks"
COURSE = ROOT / "docs" / "course"    # committed: the executed notebooks

KEPT = ("metrics.jsonl", "config.json", "batches.pt", "rows.json")

# The experiments (folders under runs/) the notebooks read in full mode and docs/findings.md quotes, with the
# commands that make them.
LOGGED = {
    "arithmetic-notebook/arithmetic-add": "notebook 04 with TRAIN = \"all\" (its own sweep: 3 seeds x 60 updates)",
    "compare/long-failures": "toy-rl arithmetic --compare long-failures --seeds 10 --workers 2",
    "compare/long-failures-partial": "toy-rl arithmetic --compare long-failures-partial --seeds 10 --workers 2",
    "arithmetic-scratchpad": ("toy-rl arithmetic --task scratchpad --rule all --partial 8 --seeds 5, then "
                              "--rule symmetric --staleness 0 --seeds 5"),
    "small-batch": ("toy-rl arithmetic --task scratchpad --rule symmetric --staleness 0 --seeds 5 --prompts 3 "
                    "--out runs/small-batch"),
    "smollm2-135m-add": "notebook 06 with TRAIN = \"all\" (its LoRA runs, 40 updates each)",
    "bandit-grid/long-failures": "toy-rl bandit --compare long-failures --grid --seeds 20",
    "compare/long-failures-lr0.00025": ("toy-rl arithmetic --compare long-failures --lr 0.00025 --rule symmetric "
                                        "clip-higher bapo --seeds 10 --workers 2"),
    "pilot/smollm2-135m-search-hard-warm": ("toy-rl pilot --rung 3 --task search-hard-warm --dtype bfloat16 "
                                            "(symmetric and BAPO, staleness 2, 8 updates, seed 0)"),
    "compare/long-failures-lr0.001": ("toy-rl arithmetic --compare long-failures --lr 0.001 --rule symmetric "
                                      "clip-higher bapo --seeds 10 --workers 2"),
    "smollm2-135m-search-hard-warm": ("toy-rl lora --task search-hard-warm --controls --rule symmetric clip-higher "
                                      "bapo --staleness 2 --seeds 5 --dtype bfloat16 --micro-batch 16 --workers 2 "
                                      "(trained across sessions; collected with --finished as runs finish)"),
    "rung3-compare/smollm2-135m-search-hard-warm": (
        "toy-rl lora --task search-hard-warm --controls --rule symmetric clip-higher bapo --staleness 2 --seeds 5 "
        "--dtype bfloat16 --micro-batch 16 --workers 2 --out runs/rung3-compare (from the warm start committed in "
        "results/warm-starts/; trained seed by seed across sessions, collected with --finished as runs finish)"),
}


# Experiments whose stored batches (batches.pt) stay out of results/: no notebook re-reads them, and results/ has
# a size budget (tests/test_course.py).
NO_BATCHES = {"pilot/smollm2-135m-search-hard-warm", "smollm2-135m-search-hard-warm",
              "rung3-compare/smollm2-135m-search-hard-warm"}


def run_folders(root) -> list[Path]:
    """Every run folder (one holding metrics.jsonl, or a comparison's rows.json) under ``root``, sorted."""
    return sorted({p.parent for name in ("metrics.jsonl", "rows.json") for p in Path(root).rglob(name)})


def in_progress(root) -> list[Path]:
    """Run folders under ``root`` that have started (a config.json) but hold no metrics.jsonl yet."""
    return sorted(p.parent for p in Path(root).rglob("config.json") if not (p.parent / "metrics.jsonl").exists())


def collect(src="runs", dest=RESULTS, experiments=LOGGED, only=None, finished=False,
            skipped: list | None = None) -> list[Path]:
    """Copy :data:`KEPT` of every run folder under ``src/<experiment>`` to the same place under ``dest``, replacing
    what ``dest`` held (folders of experiments no longer listed are removed); returns the folders written. A
    listed experiment missing from ``src`` is a FileNotFoundError naming its command, and a damaged run (one that
    fails :func:`check_run`) a ValueError naming its file and line, both before anything changes. ``only``: the
    names of some experiments: just those are replaced, the rest of ``dest`` is left as it is. ``finished``: an
    experiment still training is collected as far as it got: a run whose log is a clean start without its final
    record (:func:`~toy_rl.rl.logbook.updates_so_far`) is left out and appended to ``skipped`` as (folder,
    updates logged); a damaged one is still refused. With ``finished`` the runs already in ``dest`` that ``src``
    does not hold finished are kept (a comparison lands a few runs a session, perhaps from another machine)."""
    src, dest = Path(src), Path(dest)
    unknown = sorted(set(only or ()) - set(experiments))
    if unknown:
        raise ValueError(f"unknown experiment(s) {unknown}; the notebooks read {', '.join(experiments)}")
    chosen = {name: how for name, how in experiments.items() if only is None or name in only}
    for name, how in chosen.items():
        if not (src / name).is_dir():
            raise FileNotFoundError(f"{src / name} does not exist: make it first ({how})")
    left_out = set()
    for name in chosen:
        for folder in run_folders(src / name) + (in_progress(src / name) if finished else []):
            so_far = updates_so_far(folder) if finished else None
            if so_far is not None:
                left_out.add(folder)
                if skipped is not None:
                    skipped.append((folder, so_far))
                continue
            check_run(folder)
    if only is None:
        tops = {name.split("/")[0] for name in experiments} | {WARM_STARTS}
        for old in [p for p in dest.glob("*") if p.is_dir()]:     # a fresh copy: no run left from an older list
            if old.name not in tops or (not finished and any((dest / name) == old for name in experiments)):
                shutil.rmtree(old)
    for name in chosen:
        if finished:     # trained across sessions (a fresh machine's runs/ lacks the runs landed before): merge
            for folder in [f for f in run_folders(src / name) if f not in left_out]:
                shutil.rmtree(dest / folder.relative_to(src), ignore_errors=True)
        else:
            shutil.rmtree(dest / name, ignore_errors=True)
    written = []
    for name in chosen:
        for folder in [f for f in run_folders(src / name) if f not in left_out]:
            target = dest / folder.relative_to(src)
            target.mkdir(parents=True, exist_ok=True)
            for f in KEPT:
                if (folder / f).is_file() and not (f == "batches.pt" and name in NO_BATCHES):
                    shutil.copyfile(folder / f, target / f)
            written.append(target)
    record_making(chosen, dest, listed=experiments)
    write_index(dest, experiments)
    return written


def machine_line() -> str:
    """"x86_64 CPU, 2 cores, Linux": the machine a run was made on, as the notebooks announce it."""
    return f"{platform.machine()} CPU, {os.cpu_count()} cores, {platform.system()}"


def record_making(experiments: dict, dest=RESULTS, listed=LOGGED) -> Path:
    """Note in ``dest/about.json`` when, on what machine and by what command each of ``experiments``
    ({name: command}) was made: today, here (entries of experiments no longer ``listed`` are dropped). The
    notebooks print it when they read these logs (:func:`toy_rl.experiments.logged.announce`)."""
    path = Path(dest) / ABOUT.name
    known = json.loads(path.read_text()) if path.is_file() else {}
    known = {name: v for name, v in known.items() if name in listed}
    today = datetime.date.today().isoformat()
    known.update({name: {"made": today, "machine": machine_line(), "command": how} for name, how in experiments.items()})
    path.write_text(json.dumps(dict(sorted(known.items())), indent=1) + "\n")
    return path


def write_index(dest=RESULTS, experiments=LOGGED) -> Path:
    """``dest/README.md``: what each experiment folder holds, the command that makes it, its size."""
    dest = Path(dest)
    about = json.loads((dest / ABOUT.name).read_text()) if (dest / ABOUT.name).is_file() else {}
    made = {name: f"{a['made']}, {a['machine']}" for name, a in about.items()}
    rows = "\n".join(f"| `{name}` | {len(run_folders(dest / name))} | {size(dest / name) / 1e6:.1f} MB | "
                     f"{made.get(name, '?')} | `{how}` |" for name, how in experiments.items() if (dest / name).is_dir())
    text = f"""# Run logs behind the executed notebooks

The logs of the runs that the notebooks read in their full configuration, copied from `runs/` by
`toy-rl course collect`: per run `config.json` (its settings) and `metrics.jsonl` (one JSON line per update);
rung 3's runs also keep `batches.pt` (stored batches: tensors only, read with `torch.load(weights_only=True)`);
rung 1's robustness grid keeps one `rows.json` per grid cell (`bandit-grid/<preset>/eta<f>-task<k>/`: the per-seed
endpoints of every rule, from which its verdicts are recomputed).
No checkpoints, nothing that runs code when loaded. `toy-rl course build` executes every notebook from these
into `docs/course/`; the runner counts a run finished from these two files alone, so nothing is retrained.
A notebook opened on a fresh clone reads a run here when `runs/` lacks it, and says so in one line (from
`about.json`: when, on what machine and by what command each experiment was made); `TRAIN = "all"` trains them.

| experiment | runs | size | made (date, machine) | made by |
|---|---|---|---|---|
{rows}

Total {size(dest) / 1e6:.1f} MB. Layout: `<experiment>/<scenario>/<rule>/seed<k>/`, as under `runs/`; rung 1's grid:
`bandit-grid/<preset>/eta<factor>-task<k>/rows.json`.
{_warm_start_note(dest)}"""
    (dest / "README.md").write_text(text)
    return dest / "README.md"


def _warm_start_note(dest: Path) -> str:
    """The index's paragraph on ``warm-starts/`` ("" while there is none)."""
    folders = sorted(p.parent for p in (dest / WARM_STARTS).glob("*/adapters.pt"))
    if not folders:
        return ""
    mb = sum(f.stat().st_size for d in folders for f in d.iterdir()) / 1e6
    return f"""
`{WARM_STARTS}/<key>/` ({len(folders)} folder{'s' * (len(folders) != 1)}, {mb:.1f} MB, not in the total above): the
LoRA warm starts rung 3's runs start from, committed by `toy-rl course collect --warm-starts` because one retrained
on another CPU differs (bf16 rounds differently with and without AMX). `adapters.pt` holds tensors only (read with
`weights_only=True`); `meta.json` its settings, losses and `fingerprint`, a hash of the adapters that each run records
in its config.json and that is checked whenever they are read.
"""


def size(folder) -> int:
    """Bytes of every run log under ``folder``: every file but its README.md and the committed warm starts."""
    folder = Path(folder)
    return sum(p.stat().st_size for p in folder.rglob("*")
               if p.is_file() and p.name != "README.md" and not p.is_relative_to(folder / WARM_STARTS))
