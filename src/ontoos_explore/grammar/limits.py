"""Parse stage, input limits: what any input must satisfy before it is trusted.

These hold for every role (the role's budgets are policy's job): the size of
the text, characters PostgreSQL text cannot hold, and the nesting depth of
predicates, checked iteratively so that a 10,000-deep `not` is a clean
refusal and never a RecursionError further down.
"""

from __future__ import annotations

from ..errors import BudgetError, Codes, InputError, Position
from ..ir import And, Exploration, Not, Or, Predicate

MAX_TEXT = 65_536
MAX_DEPTH = 32


def check_text(text: object, what: str) -> None:
    if not isinstance(text, str):
        raise InputError(Codes.INVALID_REQUEST, f"{what} must be a string", hint="send the text form as a string")
    if len(text) > MAX_TEXT:
        raise BudgetError(
            Codes.INPUT_TOO_LARGE,
            f"{what} is {len(text)} characters long",
            hint=f"the largest accepted input is {MAX_TEXT} characters; split the question",
        )
    bad = _bad_char(text)
    if bad is not None:
        line = text.count("\n", 0, bad) + 1
        column = bad - (text.rfind("\n", 0, bad) + 1) + 1
        raise InputError(
            Codes.SYNTAX_ERROR,
            f"{what} contains a character that cannot be used (U+{ord(text[bad]):04X})",
            hint="remove NUL bytes and unpaired surrogates",
            position=Position(line, column),
        )


def _bad_char(text: str) -> int | None:
    if "\x00" in text:
        return text.index("\x00")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        return e.start
    return None


def predicate_depth(pred: Predicate | None) -> int:
    """Levels of and/or/not (a lone comparison is 0), computed without recursion."""
    deepest = 0
    stack = [(pred, 0)] if pred is not None else []
    while stack:
        p, above = stack.pop()
        if isinstance(p, (And, Or, Not)):
            level = above + 1
            deepest = max(deepest, level)
            stack.extend((x, level) for x in (p.items if isinstance(p, (And, Or)) else (p.item,)))
    return deepest


def check_depth(pred: Predicate | None) -> None:
    depth = predicate_depth(pred)
    if depth > MAX_DEPTH:
        raise BudgetError(
            Codes.TOO_DEEP,
            f"the filter nests {depth} levels deep",
            hint=f"at most {MAX_DEPTH} levels of and/or/not are accepted; simplify the filter",
        )


def check_shape(exploration: Exploration) -> None:
    check_depth(exploration.where)
