"""Self-checking exercises for the notebooks.

In a notebook::

    def group_advantages(rewards, kind="grpo"):
        ...                                   # the student's answer

    from toy_rl.exercises import check
    check("group_advantages", group_advantages)   # prints ✓ right / ✗ wrong + a hint; returns True/False

``check`` runs the answer on fixed cases (each isolating one idea) and seeded
random ones, against a reference solution in :mod:`toy_rl.solutions`. On the
first failing case it prints the case, its inputs, expected vs got, and a hint
(specific when the answer matches a known mistake, else a nudge toward the
formula). It never prints the solution's code and never raises because of the
answer: an unfilled stub (``raise NotImplementedError``, or ``...``) reports
"not attempted yet", so "run all" works on a fresh notebook.

Instructors: ``solution(name)`` returns the reference function (the notebooks
load it when their parameter ``SOLUTIONS = True``). ``list_exercises()`` lists
every exercise with its notebook.

Adding exercises (e.g. for a new notebook 07): put a module named ``nbXX_<topic>.py``
in this package that calls :func:`register` with :class:`Exercise` objects, and
the reference answers in ``toy_rl/solutions/nbXX.py``. Modules named ``nb*`` are
found automatically (no list to edit); ``tests/test_exercises.py`` then checks
every registered exercise against its solution, its known mistakes and a stub.
"""
from __future__ import annotations

import importlib
import pkgutil

from .framework import RIGHT, TODO, WRONG, Case, Exercise, Mistake, close, exact, run_check

_REGISTRY: dict[str, Exercise] = {}
_LOADED = False


def register(*exercises: Exercise) -> None:
    """Add exercises to the registry (a name registered twice is an error: names are what notebooks call)."""
    for ex in exercises:
        if ex.name in _REGISTRY and _REGISTRY[ex.name] is not ex:
            raise ValueError(f"an exercise named {ex.name!r} is already registered ({_REGISTRY[ex.name].notebook})")
        _REGISTRY[ex.name] = ex


def unregister(name: str) -> None:
    """Remove an exercise (for tests that register throwaway ones)."""
    _REGISTRY.pop(name, None)


def _load() -> None:
    """Import every ``nb*`` module of this package once; each registers its exercises."""
    global _LOADED
    if _LOADED:
        return
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("nb"):
            importlib.import_module(f"{__name__}.{info.name}")
    _LOADED = True


def get(name: str) -> Exercise:
    """The exercise called ``name``; ValueError listing the known names if there is none."""
    _load()
    if name not in _REGISTRY:
        raise ValueError(f"no exercise named {name!r}; known: {', '.join(sorted(_REGISTRY))}")
    return _REGISTRY[name]


def exercises(notebook: str | None = None) -> list[Exercise]:
    """Every registered exercise, or those of one notebook: "02", "02_off_policy_bandit" or its .ipynb name."""
    _load()
    out = list(_REGISTRY.values())
    if notebook is not None:
        stem = notebook.removesuffix(".ipynb")
        out = [ex for ex in out if ex.notebook.startswith(stem)]
    return sorted(out, key=lambda ex: ex.notebook)


def list_exercises(notebook: str | None = None) -> None:
    """Print the exercises, one line each: notebook, name, title."""
    for ex in exercises(notebook):
        print(f"{ex.notebook:24s} {ex.name:26s} {ex.title}")


def check(name: str, answer) -> bool:
    """Check an answer (a function, or a value for value exercises); print ✓ right / ✗ wrong / not attempted.

    Returns True only when every case is right. End the notebook line with ``;`` to hide the echo.
    """
    return run_check(get(name), answer)


def solution(name: str):
    """The reference solution of exercise ``name`` (instructors; the notebooks' ``SOLUTIONS = True``)."""
    return get(name).reference()


__all__ = ["check", "solution", "exercises", "list_exercises", "get", "register", "unregister",
           "Exercise", "Case", "Mistake", "close", "exact", "RIGHT", "WRONG", "TODO"]
