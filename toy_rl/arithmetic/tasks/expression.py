"""A safe evaluator for countdown answers: integers, + - *, parentheses. No eval().

Grammar (usual precedence, left to right):

    expr   := term (('+' | '-') term)*
    term   := factor ('*' factor)*
    factor := NUMBER | '(' expr ')'

No unary minus, no division. Spaces may separate tokens (but '2 3' is not 23). ``evaluate`` returns the value
and the numbers the expression used, or raises ValueError for anything else.
"""
from __future__ import annotations

import re

MAX_CHARS = 64                     # longer input is rejected before parsing
_TOKEN = re.compile(r"\d+|[-+*()]|\S")  # numbers, operators, and any other visible character (an error)


def tokenize(text: str) -> list[str]:
    """'(3+5) * 8' -> ['(', '3', '+', '5', ')', '*', '8']. Spaces separate tokens ('2 3' is two numbers)."""
    if not text.strip() or len(text) > MAX_CHARS:
        raise ValueError(f"expression must have 1 .. {MAX_CHARS} characters")
    tokens = _TOKEN.findall(text)
    bad = [t for t in tokens if not (t.isdigit() or t in "-+*()")]
    if bad:
        raise ValueError(f"unexpected character {bad[0]!r} in {text!r}")
    return tokens


def evaluate(text: str) -> tuple[int, list[int]]:
    """'(3+5)*7' -> (56, [3, 5, 7]). ValueError if malformed."""
    tokens, pos, used = tokenize(text), 0, []

    def peek():
        return tokens[pos] if pos < len(tokens) else None

    def take():
        nonlocal pos
        pos += 1
        return tokens[pos - 1]

    def factor():
        tok = peek()
        if tok is None:
            raise ValueError("expression ends too early")
        if tok == "(":
            take()
            value = expr()
            if peek() != ")":
                raise ValueError("missing ')'")
            take()
            return value
        if tok.isdigit():
            used.append(int(take()))
            return used[-1]
        raise ValueError(f"unexpected {tok!r}")

    def term():
        value = factor()
        while peek() == "*":
            take()
            value *= factor()
        return value

    def expr():
        value = term()
        while peek() in ("+", "-"):
            op = take()
            value = value + term() if op == "+" else value - term()
        return value

    value = expr()
    if pos != len(tokens):
        raise ValueError(f"unexpected {tokens[pos]!r} after a complete expression")
    return value, used
