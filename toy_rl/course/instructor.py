"""The instructor pack's rendered solutions: ``docs/instructor/solutions.md``, made by ``toy-rl course instructor``.

For every exercise of the notebooks (:mod:`toy_rl.exercises`), in notebook order: what it asks (the exercise's
title and the nudge its checker prints on a wrong answer), the mistakes its checker recognises with their hints,
the reference answer's code (read from :mod:`toy_rl.solutions` with :func:`inspect.getsource`, plus the module
constants it uses) and the checker's verdict when that reference is run through it (computed when the page is
written, never typed). ``tests/test_instructor.py`` checks that the committed page equals what this module writes
now, so a changed solution, check or exercise shows up as a stale page.

Nothing here trains or reads ``runs/``; the checks take about ten seconds (rung 3's LoRA layer check builds a small
peft model: it needs the llm extra).
"""
from __future__ import annotations

import ast
import contextlib
import importlib
import inspect
import io
import re
import textwrap
from pathlib import Path

from .logs import NOTEBOOKS, ROOT

INSTRUCTOR = ROOT / "docs" / "instructor"
SOLUTIONS_PAGE = INSTRUCTOR / "solutions.md"
COMMAND = "toy-rl course instructor"

# A library's version in a verdict ("peft 0.21.2's own LoRA layer") would make the page change with every upgrade.
_VERSIONS = re.compile(r"\b(peft|torch|transformers|numpy) \d+(?:\.\d+)+")


def _constants(fn) -> list[str]:
    """The source lines of the module-level assignments ``fn`` reads (e.g. ``TOL = 1e-9``), in file order."""
    module = inspect.getmodule(fn)
    source = inspect.getsource(module)
    used = set(fn.__code__.co_names)
    lines = source.splitlines()
    out = []
    for node in ast.parse(source).body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id in used for t in targets):
                out.append("\n".join(lines[node.lineno - 1:node.end_lineno]))
    return out


def _imports(fn) -> list[str]:
    """The solution module's import lines that ``fn`` needs (``import torch``)."""
    module = inspect.getmodule(fn)
    used = set(fn.__code__.co_names)
    out = []
    for node in ast.parse(inspect.getsource(module)).body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [(a.asname or a.name).split(".")[0] for a in node.names]
            if any(n in used for n in names):
                out.append(ast.unparse(node))
    return out


def reference_source(exercise) -> str:
    """The reference answer of ``exercise`` as code: the imports and constants it uses, then the function
    (a value exercise: the assignment that defines it)."""
    module_name, attr = exercise.solution.split(":")
    ref = exercise.reference()
    if callable(ref):
        head = _imports(ref) + _constants(ref)
        body = textwrap.dedent(inspect.getsource(ref)).rstrip()
        return "\n".join(head) + ("\n\n\n" if head else "") + body
    source = inspect.getsource(importlib.import_module(module_name))
    lines = source.splitlines()
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == attr for t in node.targets):
            return "\n".join(lines[node.lineno - 1:node.end_lineno])
    return f"{attr} = {ref!r}"


def verdict(exercise) -> tuple[bool, str]:
    """(passed, what the checker printed) when the reference answer is run through the exercise's check."""
    from ..exercises import run_check
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        ok = run_check(exercise, exercise.reference())
    return ok, _VERSIONS.sub(r"\1", buf.getvalue().rstrip())


def _task_heading(notebook: str, name: str) -> str | None:
    """The heading of the notebook's task cell for exercise ``name`` ("Exercise 1.1 · The prediction, in code"):
    the markdown cell tagged ``exercise-task`` before the ``check("name", ...)`` cell, or None."""
    import nbformat
    path = NOTEBOOKS / f"{notebook}.ipynb"
    if not path.is_file():
        return None
    heading = None
    for cell in nbformat.read(path, as_version=4).cells:
        tags = cell.get("metadata", {}).get("tags", [])
        if cell.cell_type == "markdown" and "exercise-task" in tags:
            first = cell.source.strip().splitlines()[0] if cell.source.strip() else ""
            heading = first.lstrip("#").strip() or None
        if cell.cell_type == "code" and f'check("{name}"' in cell.source:
            return heading
    return None


def solutions_markdown() -> str:
    """The whole page ``docs/instructor/solutions.md``: every exercise with its reference answer and verdict."""
    from ..exercises import exercises
    by_notebook: dict[str, list] = {}
    for ex in exercises():
        by_notebook.setdefault(ex.notebook, []).append(ex)
    lines = ["# Reference solutions, with the checker's verdict", "",
             f"Made by `{COMMAND}` from `toy_rl/exercises/` (what each exercise asks, the hints its checker gives) "
             "and `toy_rl/solutions/` (the reference answers); every verdict below is the checker's own output when "
             "the reference answer is run through it, computed when this page was written. "
             "`tests/test_instructor.py` fails when this page no longer matches what the command writes now. "
             "A notebook's check cells load these answers themselves when its parameters cell says `SOLUTIONS = True`. "
             "Notebook 00 has no exercise.", "",
             "Students: try the exercises first; the checker in the notebook never shows this code.", ""]
    index = []
    for notebook, exs in by_notebook.items():
        index.append(f"* notebook {notebook[:2]} (`notebooks/{notebook}.ipynb`): "
                     + ", ".join(f"[`{ex.name}`](#{ex.name.replace('_', '-').lower()})" for ex in exs))
    lines += index + [""]
    passed = total = 0
    for notebook, exs in by_notebook.items():
        lines += [f"## Notebook {notebook[:2]} · `{notebook}`", ""]
        for ex in exs:
            ok, said = verdict(ex)
            passed, total = passed + ok, total + 1
            heading = _task_heading(notebook, ex.name)
            lines += [f"### {ex.name}", ""]
            if heading:
                lines += [f"*In the notebook:* {heading}.", ""]
            lines += [f"**Task.** Write `{ex.name}`: {ex.title}.", ""]
            if ex.nudge:
                lines += [f"**The nudge the checker gives on a wrong answer.** {ex.nudge}", ""]
            if ex.mistakes:
                lines += ["**Mistakes the checker recognises** (and the hint each gets):", ""]
                lines += [f"* {m.hint}" for m in ex.mistakes] + [""]
            lines += [f"**Reference answer** (`{ex.solution.replace(':', '.')}`):", "", "```python",
                      reference_source(ex), "```", "",
                      f"**Verdict** (`check({ex.name!r}, solution({ex.name!r}))`):", "", "```text", said, "```", ""]
    lines += [f"{passed} of {total} reference answers pass their checks.", ""]
    return "\n".join(lines)


def write_solutions(out: Path | str = SOLUTIONS_PAGE) -> Path:
    """Write :func:`solutions_markdown` to ``out`` (default ``docs/instructor/solutions.md``)."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(solutions_markdown())
    return out
