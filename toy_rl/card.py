"""One verdict card instead of a wall of tests: a small table a notebook displays, one row per claim.

    from toy_rl.card import verdict_card
    display(verdict_card(comparison_checks(result), figure="the figure above"))

Each row: the claim, its verdict (:func:`toy_rl.verdicts.judge`), the one test that decides it, the regime BAPO
ran in, and where to look. Every paired test behind the card stays one click away (a collapsible block), wrapped
to readable lines. In a notebook the card is HTML; printed, it is short plain text.
"""
from __future__ import annotations

import html
import textwrap

WIDTH = 110          # the longest line the card writes


def deciding_test(v):
    """The test that decides verdict ``v``: the largest difference against a contradicted claim; for a supported
    one the smallest difference for it (its margin); for a partly supported one the largest for it; otherwise the
    test closest to significance. None when nothing was tested."""
    tested = [t for t in v.tests if t.tested]
    if not tested:
        return None
    against = [t for t in tested if t.outcome() == "against"]
    ahead = [t for t in tested if t.outcome() == "for"]
    word = v.status.split(":")[0]
    if word == "contradicted" and against:
        return max(against, key=lambda t: abs(t.diff))
    if word == "supported" and ahead:
        return min(ahead, key=lambda t: abs(t.diff))
    if ahead:
        return max(ahead, key=lambda t: abs(t.diff))
    return min(tested, key=lambda t: t.p_holm)


def _number(t) -> str:
    """'BAPO − clip-higher: +6.4 points (p_holm < 0.001), epoch reuse 2'."""
    if t is None:
        return "no test"
    from .verdicts import _p
    where = t.what.split(", ", 1)[1] if ", " in t.what else t.what
    return f"{t.a} − {t.b}: {t.diff * t.scale:+.3g}{t.unit} (p_holm {_p(t.p_holm)}), {where}"


def _regime(v) -> str:
    """The regime part of a verdict, short: 'negatives-dominate (ρ < ρ0 in 92%; bounds moved in 47%)'."""
    text = v.regime or ""
    if not text:
        return "—"
    name = text.split(":")[0].removeprefix("regime ").strip()
    moved = text.split("left [0.6, 1.2] in ")[-1] if "left [0.6, 1.2] in " in text else ""
    below = text.split("< ρ0 in ")[-1].split(" ")[0] if "< ρ0 in " in text else ""
    parts = [f"ρ < ρ0 in {below}" if below else "", f"bounds moved in {moved}" if moved else ""]
    parts = [p for p in parts if p]
    return name + (f" ({'; '.join(parts)})" if parts else "")


class VerdictCard:
    """What :func:`verdict_card` returns: HTML in a notebook, short plain text when printed."""

    def __init__(self, verdicts, figure: str = "", title: str = ""):
        self.verdicts, self.figure, self.title = list(verdicts), figure, title

    def rows(self) -> list[tuple[str, str, str, str]]:
        """(claim, verdict, the deciding number, regime) per claim."""
        out = []
        for v in self.verdicts:
            word, _, why = v.status.partition(":")
            verdict = word.upper() + (f": {why.strip()}" if why else "")
            if v.tests and not v.status.startswith("not testable"):
                verdict += f" ({v.n_for} for, {v.n_against} against, of {len(v.tests)})"
            out.append((f"{v.claim}: {v.text}", verdict, _number(deciding_test(v)), _regime(v)))
        return out

    def detail_lines(self) -> list[str]:
        """Every paired test and note behind the card, wrapped to :data:`WIDTH` characters."""
        lines = []
        for v in self.verdicts:
            lines.append(f"claim {v.claim} — {v.status}")
            for t in v.tests:
                lines += textwrap.wrap(t.line(), WIDTH, initial_indent="  ", subsequent_indent="    ")
            for note in (v.regime, v.detail):
                if note:
                    lines += textwrap.wrap(note, WIDTH, initial_indent="  ", subsequent_indent="    ")
        return lines

    def __str__(self) -> str:
        head = [self.title] if self.title else []
        body = []
        for claim, verdict, number, regime in self.rows():
            body += textwrap.wrap(f"claim {claim} → {verdict}", WIDTH, subsequent_indent="    ")
            body += textwrap.wrap(f"decided by {number}; regime {regime}", WIDTH, initial_indent="    ",
                                  subsequent_indent="    ")
        tail = [f"look at: {self.figure}"] if self.figure else []
        return "\n".join(head + body + tail)

    __repr__ = __str__

    def _repr_html_(self) -> str:
        e = html.escape
        head = "".join(f"<th style='text-align:left'>{h}</th>" for h in ("claim", "verdict", "decided by", "regime"))
        body = "".join("<tr>" + "".join(f"<td style='text-align:left'>{e(c)}</td>" for c in row) + "</tr>"
                       for row in self.rows())
        title = f"<p><b>{e(self.title)}</b></p>" if self.title else ""
        look = f"<p>Look at: {e(self.figure)}</p>" if self.figure else ""
        n = sum(len(v.tests) for v in self.verdicts)
        detail = (f"<details><summary>every paired test behind the card ({n})</summary><pre>"
                  + e("\n".join(self.detail_lines())) + "</pre></details>")
        return f"{title}<table><tr>{head}</tr>{body}</table>{look}{detail}"


def verdict_card(verdicts, figure: str = "", title: str = "") -> VerdictCard:
    """A card for judged claims (:class:`toy_rl.verdicts.Verdict`): display it in a notebook, or print it."""
    verdicts = list(verdicts)
    if not verdicts:
        raise ValueError("verdict_card needs at least one verdict (toy_rl.verdicts.judge)")
    if any(not hasattr(v, "tests") or not hasattr(v, "status") for v in verdicts):
        raise ValueError("verdict_card takes Verdicts (the *_checks functions), not printed verdict lines")
    return VerdictCard(verdicts, figure, title)


__all__ = ["VerdictCard", "deciding_test", "verdict_card"]
