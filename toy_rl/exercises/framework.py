"""The checking machinery behind :func:`toy_rl.exercises.check`.

An :class:`Exercise` names a reference solution (``"module:function"``, imported
only when a check runs), a list of :class:`Case` inputs (fixed ones that each
isolate one idea, then seeded random ones), a general nudge toward the formula,
and a few :class:`Mistake` s: plausible wrong answers, each with the hint that
fits it. When a case fails, the checker runs every mistake on that case; if the
student's output matches one, its hint is printed, otherwise the nudge.

The checker prints what failed (the case, its inputs, expected vs got) and never
the solution's code. It returns True (every case right) or False (wrong, or not
attempted yet), and never raises because of the student's answer: a stub that
raises ``NotImplementedError`` (or returns None) reports "not attempted yet", any
other exception reports which case raised it. So "run all" works on a notebook
whose exercises are still empty.
"""
from __future__ import annotations

import copy
import importlib
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import torch

RIGHT, WRONG, TODO = "✓ right", "✗ wrong", "… not attempted yet"


@dataclass(frozen=True)
class Case:
    """One input to an exercise. ``args`` are passed positionally; ``note`` is printed when this case fails
    (say what is special about it: "a token exactly on a bound keeps its gradient")."""
    label: str
    args: tuple
    random: bool = False
    note: str = ""


@dataclass(frozen=True)
class Mistake:
    """A plausible wrong answer (same signature as the solution) and the hint for whoever made it."""
    fn: Callable
    hint: str


def _verdict(ok, expected, got):
    """(True, "") if every entry matched, else which entries differ, with both arrays."""
    if ok.all():
        return True, ""
    if expected.ndim == 0:
        return False, f"expected {fmt(expected)}, got {fmt(got)}"
    bad = [tuple(int(i) for i in ix) for ix in np.argwhere(~ok)]
    where = ", ".join(str(ix[0] if len(ix) == 1 else ix) for ix in bad[:6]) + (" ..." if len(bad) > 6 else "")
    return False, (f"{len(bad)} of {expected.size} entries differ (at {where})\n      expected {fmt(expected)}\n"
                   f"      got      {fmt(got)}")


def close(rtol: float = 1e-6, atol: float = 1e-9):
    """Compare numbers (scalars, arrays, tensors, tuples of them) up to rtol/atol; NaN equals NaN."""
    def compare(expected, got):
        e, g = as_array(expected), as_array(got)
        if g.dtype == object or not (np.issubdtype(g.dtype, np.number) or g.dtype == bool):
            return False, f"could not read your answer as numbers (got {type(got).__name__})"
        if e.shape != g.shape:
            if e.size == 1 and g.size == 1:
                g = g.reshape(e.shape)
            else:
                return False, f"expected shape {e.shape}, got shape {g.shape}"
        g = g.astype(np.float64)
        ok = np.isclose(g, e, rtol=rtol, atol=atol, equal_nan=True)
        return _verdict(ok, e, g)
    return compare


def exact(as_bool: bool = False):
    """Compare integers or booleans exactly (``as_bool``: 0/1 and True/False are the same answer)."""
    def compare(expected, got):
        e, g = as_array(expected), as_array(got)
        if g.dtype == object:
            return False, f"could not read your answer as numbers (got {type(got).__name__})"
        if e.shape != g.shape:
            return False, f"expected shape {e.shape}, got shape {g.shape}"
        if as_bool:
            if not np.isin(g.astype(np.float64), (0.0, 1.0)).all():
                return False, f"expected True/False values, got {fmt(g)}"
            e, g = e.astype(bool), g.astype(bool)
        ok = e == g
        return _verdict(ok, e, g)
    return compare


@dataclass(frozen=True)
class Exercise:
    """One exercise.

    Args:
        name: what ``check(name, ...)`` is called with (also the stub's function name).
        notebook: the notebook it belongs to, e.g. "01_entropy_clip_rule".
        title: one line, for the course guide and :func:`list_exercises`.
        solution: "module:attribute" of the reference solution (a function, or a value when ``value``).
        cases: a function returning the cases (fixed first, then seeded random ones); unused when ``value``.
        nudge: printed when a case fails and no known mistake explains it: point at the formula, not the code.
        mistakes: plausible wrong answers with their hints.
        compare: ``compare(expected, got) -> (ok, detail)``; :func:`close` by default.
        extra: optional further checks run after every case passed, ``extra(fn) -> (ok, message)``
            (e.g. "your step, looped, lands where BAPO() lands").
        value: True if the student hands a value (``check(name, 0.667)``) instead of a function.
    """
    name: str
    notebook: str
    title: str
    solution: str
    cases: Callable[[], list] = lambda: []
    nudge: str = ""
    mistakes: tuple = ()
    compare: Callable = field(default_factory=close)
    extra: Callable | None = None
    value: bool = False

    def reference(self):
        module, attr = self.solution.split(":")
        return getattr(importlib.import_module(module), attr)


# --------------------------------------------------------------------------------------- formatting

def as_array(x) -> np.ndarray:
    """Numbers in any of the shapes a student may return them, as a numpy array."""
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().numpy()
    if isinstance(x, (tuple, list)):
        try:
            return np.array([as_array(v) for v in x])
        except (ValueError, TypeError):
            return np.array(x, dtype=object)
    try:
        return np.asarray(x)
    except (ValueError, TypeError):
        return np.array(x, dtype=object)


def fmt(x) -> str:
    """A short, readable rendering of numbers (first 12 entries of a long array)."""
    a = as_array(x)
    if a.dtype == object:
        return repr(x)[:200]
    if a.ndim == 0:
        v = a.item()
        return f"{v + 0.0:.6g}" if isinstance(v, float) else str(v)     # + 0.0: no "-0"
    flat = a.reshape(-1)
    if flat.size > 12:
        head = np.array2string(flat[:12], precision=4, separator=", ", suppress_small=True, max_line_width=10_000)
        return f"{head[:-1]}, ...] (shape {a.shape})"
    return np.array2string(a, precision=4, separator=", ", suppress_small=True).replace("\n", "")


def fmt_input(x) -> str:
    if isinstance(x, str):
        return repr(x)
    if isinstance(x, float):
        s = f"{x:.6g}"
        return s if any(ch in s for ch in ".einf") else s + ".0"
    if isinstance(x, (bool, int)):
        return str(x)
    return fmt(x)


# --------------------------------------------------------------------------------------- checking

def _call(fn, args):
    return fn(*copy.deepcopy(args))       # the student's function may change its inputs in place


def _not_attempted(name: str, why: str) -> bool:
    print(f"{TODO}: {name} — {why}")
    return False


def run_check(ex: Exercise, answer: Any) -> bool:
    """Check ``answer`` against ``ex``; print the verdict; return True iff right."""
    reference = ex.reference()
    if ex.value:
        if answer is None or answer is Ellipsis:
            return _not_attempted(ex.name, "replace the ... with your answer")
        ok, detail = ex.compare(reference, answer)
        if ok:
            print(f"{RIGHT}: {ex.name}")
            return True
        print(f"{WRONG}: {ex.name} — {detail}")
        _hint(ex, None, answer, reference)
        return False

    if answer is None or answer is Ellipsis:
        return _not_attempted(ex.name, "define the function first")
    if not callable(answer):
        print(f"{WRONG}: {ex.name} — expected a function, got {type(answer).__name__}")
        return False
    cases = ex.cases()
    for case in cases:
        try:
            got = _call(answer, case.args)
        except NotImplementedError:
            return _not_attempted(ex.name, "fill in the TODO (the stub still raises NotImplementedError)")
        except Exception as err:                                            # noqa: BLE001 — report, never crash
            print(f"{WRONG}: {ex.name} — case '{case.label}' raised {type(err).__name__}: {err}")
            _show_inputs(ex, case)
            print(f"   where: {_where(err)}")
            if isinstance(err, TypeError) and "argument" in str(err):
                print("   hint: keep the stub's signature (the checker passes the arguments in that order)")
            return False
        if got is None:
            return _not_attempted(ex.name, "your function returns None: fill in the TODO and `return` the result")
        expected = _call(reference, case.args)
        ok, detail = ex.compare(expected, got)
        if not ok:
            print(f"{WRONG}: {ex.name} — case '{case.label}'{' (random)' if case.random else ''}: {detail}")
            _show_inputs(ex, case)
            if case.note:
                print(f"   note: {case.note}")
            _hint(ex, case, got, expected, answer, cases)
            return False
    if ex.extra is not None:
        try:
            ok, message = ex.extra(answer)
        except Exception as err:                                            # noqa: BLE001
            ok, message = False, f"raised {type(err).__name__}: {err}"
        if not ok:
            print(f"{WRONG}: {ex.name} — every single case was right, but {message}")
            return False
    n_fixed = sum(not c.random for c in cases)
    print(f"{RIGHT}: {ex.name} — all {len(cases)} cases ({n_fixed} fixed, {len(cases) - n_fixed} random)")
    if ex.extra is not None and message:
        print(f"   {message}")
    return True


def _show_inputs(ex: Exercise, case: Case) -> None:
    names = _arg_names(ex)
    parts = [f"{n} = {fmt_input(v)}" for n, v in zip(names, case.args)]
    print("   inputs: " + ", ".join(parts))


def _arg_names(ex: Exercise) -> list:
    import inspect
    try:
        return list(inspect.signature(ex.reference()).parameters)
    except (TypeError, ValueError):
        return [f"arg{i}" for i in range(16)]


def _where(err: Exception) -> str:
    frames = traceback.extract_tb(err.__traceback__)
    last = frames[-1] if frames else None
    return f"line {last.lineno}: {last.line}" if last and last.line else "(no line)"


def _hint(ex: Exercise, case: Case | None, got, expected, answer=None, cases=()) -> None:
    """The hint of the known mistake that explains ``got``, else the nudge.

    A mistake explains the failing case if it reproduces ``got`` there (and is itself wrong there). When several
    do, the one that agrees with the answer on the most cases wins (so a student who made exactly that mistake
    gets its hint, not a look-alike's)."""
    def output(fn, c):
        return fn if ex.value else _call(fn, c.args)

    def agrees(a, b):
        try:
            return bool(ex.compare(a, b)[0])
        except Exception:                                                   # noqa: BLE001
            return False

    candidates = []
    for m in ex.mistakes:
        try:
            wrong = output(m.fn, case)
        except Exception:                                                   # noqa: BLE001
            continue
        if agrees(wrong, got) and not agrees(expected, wrong):
            candidates.append(m)
    if len(candidates) > 1 and answer is not None:
        def score(m):
            n = 0
            for c in cases:
                try:
                    n += agrees(output(m.fn, c), _call(answer, c.args))
                except Exception:                                           # noqa: BLE001
                    pass
            return n
        candidates.sort(key=score, reverse=True)                            # stable: ties keep the listed order
    if candidates:
        print(f"   hint: {candidates[0].hint}")
    elif ex.nudge:
        print(f"   hint: {ex.nudge}")
