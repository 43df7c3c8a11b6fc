"""Parse stage, input limits: what any input must satisfy before it is trusted.

These hold for every role (the role's budgets are policy's job): the size of
the text, characters PostgreSQL text cannot hold, and the nesting depth of
predicates, checked iteratively so that a 10,000-deep `not` is a clean
refusal and never a RecursionError further down. `check_json` holds the same
for a whole JSON request (the JSON form, any tool's arguments) before any of
it is read or echoed: its depth, size, and every key and string in it.
"""

from __future__ import annotations

from ..errors import BudgetError, Codes, InputError, Position
from ..ir import And, Exploration, Not, Or, Predicate

MAX_TEXT = 65_536
MAX_DEPTH = 32
MAX_JSON_DEPTH = 16  # the JSON form nests 4 levels (body, filter list, filter object, value list)
MAX_JSON_CHARS = MAX_TEXT * 4  # the characters of every key and string in one request
MAX_JSON_VALUES = 20_000  # values (objects, lists, scalars) in one request


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


def _place(path: str, key: object) -> str:
    """Where a dict entry is, for a message: `filter[0].value`; a key that is no plain name is not echoed."""
    if isinstance(key, str) and key.isascii() and key.isidentifier() and len(key) <= 40:
        return f"{path}.{key}" if path else key
    return f"{path}[?]" if path else "[?]"


class CheckedJSON(dict):
    """A JSON object `check_json` has passed already (a surface checked the whole request): readers
    that would check it again (`forms.from_json`) take it as it is, so each request is checked once."""

    __slots__ = ()


def check_json(value: object, what: str = "the request") -> None:
    """Refuse a JSON value no surface should read further: nested deeper than MAX_JSON_DEPTH,
    more than MAX_JSON_VALUES values or MAX_JSON_CHARS characters, or a key or string with a
    NUL or an unpaired surrogate (PostgreSQL text cannot hold either; UTF-8 cannot carry the
    second). Iterative; the message names the place (filter[0].value), never the bad text."""
    stack: list[tuple[object, str, int]] = [(value, "", 0)]
    values = chars = 0
    while stack:
        v, path, depth = stack.pop()
        values += 1
        if depth > MAX_JSON_DEPTH:
            raise InputError(Codes.INVALID_REQUEST, f"{what} nests more than {MAX_JSON_DEPTH} levels deep",
                             hint="an exploration is a flat JSON object; filter values are scalars or lists of them")
        if values > MAX_JSON_VALUES:
            raise BudgetError(Codes.INPUT_TOO_LARGE, f"{what} holds more than {MAX_JSON_VALUES} values",
                              hint="lists hold at most 1000 entries; split the question")
        if isinstance(v, str):
            chars += len(v)
            _check_string(v, path or what)
        elif isinstance(v, dict):
            for k, item in v.items():
                if isinstance(k, str):
                    chars += len(k)
                    _check_string(k, f"a key of {path or what}")
                stack.append((item, _place(path, k), depth + 1))
        elif isinstance(v, (list, tuple)):
            stack.extend((item, f"{path}[{i}]", depth + 1) for i, item in enumerate(v))
        if chars > MAX_JSON_CHARS:
            raise BudgetError(Codes.INPUT_TOO_LARGE, f"{what} holds more than {MAX_JSON_CHARS} characters",
                              hint=f"the largest accepted request is {MAX_JSON_CHARS} characters; split the question")


def _check_string(text: str, where: str) -> None:
    bad = _bad_char(text)
    if bad is not None:
        raise InputError(Codes.SYNTAX_ERROR,  # the same refusal as check_text's, for the same character
                         f"{where} contains a character that cannot be used (U+{ord(text[bad]):04X})",
                         hint="remove NUL bytes and unpaired surrogates (a lone \\ud800-\\udfff escape)")


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
