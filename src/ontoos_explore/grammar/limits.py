"""Parse stage, input limits: what any input must satisfy before it is trusted.

These hold for every role (the role's budgets are policy's job): the size of
the text, characters PostgreSQL text cannot hold, and the nesting depth of
predicates, checked iteratively so that a 10,000-deep `not` is a clean
refusal and never a RecursionError further down. `check_json` holds the same
for a whole JSON request (the JSON form, any tool's arguments) before any of
it is read or echoed: its depth, size, and every key and string in it.

Numbers are held to what a column can hold (`types.py`: integer columns are
64-bit, numeric is PostgreSQL's numeric: at most NUMERIC_WHOLE_DIGITS digits
before the point and NUMERIC_SCALE after it), and an integer to
MAX_INTEGER_DIGITS digits, the most Python turns into an int and back without
refusing (its conversion grows quadratically past it). A number past
these is no column's value: it is refused where it is read, in microseconds,
before anything converts or formats it (`Decimal('1e7000000')` is cheap to
hold; as an int, or its digits written out, it takes seconds): `check_json`
refuses it at its place (`loads_strict` reads it as a Decimal, or, when
Python's readers refuse it, as an `Unholdable` marker), the parser refuses
its token.

`check_lists` holds every parenthesized list of a text to MAX_LIST entries
before it is parsed (one linear scan, strings skipped as the lexer reads
them), as the JSON form holds its lists before reading them.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

from ..errors import BudgetError, Codes, ExploreError, InputError, Position
from ..ir import And, Exploration, Not, Or, Predicate
from ..types import (
    INTEGER_BOUND,
    MAX_INTEGER_DIGITS,
    NUMERIC_SCALE,
    NUMERIC_WHOLE_DIGITS,
    decimal_unfit,
    integer_unfit,
    value_unfit,
)

MAX_TEXT = 65_536
MAX_DEPTH = 32
MAX_LIST = 1000  # entries of any list in a request (JSON lists, the text form's 'in' lists); budgets are lower
MAX_JSON_DEPTH = 16  # the JSON form nests 4 levels (body, filter list, filter object, value list)
MAX_JSON_CHARS = MAX_TEXT * 4  # the characters of every key and string in one request
MAX_JSON_VALUES = 20_000  # values (objects, lists, scalars) in one request
NUMBER_HINT = (f"integer columns hold 64-bit integers and numeric ones at most {NUMERIC_WHOLE_DIGITS} digits before "
               f"the point and {NUMERIC_SCALE} after it; an integer is read up to {MAX_INTEGER_DIGITS} digits")


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


# Where a value of a JSON request is: None for the whole, else (where its container is, its key or
# its `Index`). Kept as links, written out only for a refusal's message.
Place = tuple | None


class Index(int):
    """A list position in a `Place` (a dict's key may be an int: a caller need not be JSON)."""

    __slots__ = ()


def _path(place: Place) -> str:
    """A place as a message names it: `filter[0].value`; "" for the whole."""
    steps = []
    while place is not None:
        place, key = place
        steps.append(key)
    path = ""
    for key in reversed(steps):
        path = f"{path}[{int(key)}]" if type(key) is Index else _place(path, key)
    return path


def _place(path: str, key: object) -> str:
    """A dict entry's place after `path`; a key that is no plain name is not echoed."""
    if isinstance(key, str) and key.isascii() and key.isidentifier() and len(key) <= 40:
        return f"{path}.{key}" if path else key
    return f"{path}[?]" if path else "[?]"


class CheckedJSON(dict):
    """A JSON object `check_json` has passed already (a surface checked the whole request): readers
    that would check it again (`forms.from_json`) take it as it is, so each request is checked once."""

    __slots__ = ()


def check_json(value: object, what: str = "the request") -> None:
    """Refuse a JSON value no surface should read further: nested deeper than MAX_JSON_DEPTH,
    more than MAX_JSON_VALUES values or MAX_JSON_CHARS characters, a key or string with a
    NUL or an unpaired surrogate (PostgreSQL text cannot hold either; UTF-8 cannot carry the
    second), or a number no column can hold (an `Unholdable` from `loads_strict`, an int past
    MAX_INTEGER_DIGITS, a Decimal past numeric's digits: TYPE_MISMATCH; a float from another
    JSON reader always fits, or is inf, which the readers of each key refuse). Iterative; the
    message names the place (filter[0].value), never the bad text."""
    stack: list[tuple[object, Place, int]] = [(value, None, 0)]
    values = chars = 0
    while stack:
        v, place, depth = stack.pop()
        values += 1
        if depth > MAX_JSON_DEPTH:
            raise _too_deep(what)
        if values > MAX_JSON_VALUES:
            raise _too_many(what)
        if isinstance(v, str):
            chars += len(v)
            if ("\x00" in v or not v.isascii()) and _bad_char(v) is not None:
                _check_string(v, _path(place) or what)
        elif isinstance(v, dict):
            for k, item in v.items():
                if isinstance(k, str):
                    chars += len(k)
                    if ("\x00" in k or not k.isascii()) and _bad_char(k) is not None:
                        _check_string(k, f"a key of {_path(place) or what}")
                stack.append((item, (place, k), depth + 1))
        elif isinstance(v, (list, tuple)):
            if v and depth >= MAX_JSON_DEPTH:
                raise _too_deep(what)
            if values + len(v) > MAX_JSON_VALUES:
                raise _too_many(what)
            more_chars, scalars = _check_items(v, place, depth, stack)
            chars += more_chars
            values += scalars
        elif isinstance(v, (int, Decimal, Unholdable)) and not isinstance(v, bool):
            detail = number_unfit(v)
            if detail is not None:
                raise unholdable(_path(place) or what, detail)
        if chars > MAX_JSON_CHARS:
            raise BudgetError(Codes.INPUT_TOO_LARGE, f"{what} holds more than {MAX_JSON_CHARS} characters",
                              hint=f"the largest accepted request is {MAX_JSON_CHARS} characters; split the question")


def _too_deep(what: str) -> InputError:
    return InputError(Codes.INVALID_REQUEST, f"{what} nests more than {MAX_JSON_DEPTH} levels deep",
                      hint="an exploration is a flat JSON object; filter values are scalars or lists of them")


def _too_many(what: str) -> BudgetError:
    return BudgetError(Codes.INPUT_TOO_LARGE, f"{what} holds more than {MAX_JSON_VALUES} values",
                       hint="lists hold at most 1000 entries; split the question")


def _check_items(items: list | tuple, place: Place, depth: int, stack: list) -> tuple[int, int]:
    """A list's plain scalars (str, int, Decimal, float, bool, None) checked in place, the name of a place made
    only for a refusal (a 20,000-value request is checked in milliseconds); anything else onto `stack`.
    -> (characters, scalars checked)."""
    chars = scalars = 0
    for i, item in enumerate(items):
        kind = type(item)
        if kind is str:
            chars += len(item)
            if ("\x00" in item or not item.isascii()) and _bad_char(item) is not None:
                _check_string(item, _path((place, Index(i))))
        elif kind is int:
            if not -INTEGER_BOUND < item < INTEGER_BOUND:
                raise unholdable(_path((place, Index(i))), value_unfit(item))
        elif kind is Decimal:
            if item.is_finite() and (detail := decimal_unfit(item)) is not None:
                raise unholdable(_path((place, Index(i))), detail)
        elif kind is not float and kind is not bool and item is not None:
            stack.append((item, (place, Index(i)), depth + 1))
            continue
        scalars += 1
    return chars, scalars


def _check_string(text: str, where: str) -> None:
    bad = _bad_char(text)
    if bad is not None:
        raise InputError(Codes.SYNTAX_ERROR,  # the same refusal as check_text's, for the same character
                         f"{where} contains a character that cannot be used (U+{ord(text[bad]):04X})",
                         hint="remove NUL bytes and unpaired surrogates (a lone \\ud800-\\udfff escape)")


# ---------------------------------------------------------------- numbers


class Unholdable:
    """A JSON number no column can hold, as `forms.loads_strict` reads it: a marker saying why (never
    the number's text), for `check_json` to refuse at its place."""

    __slots__ = ("detail",)

    def __init__(self, detail: str) -> None:
        self.detail = detail

    def __repr__(self) -> str:
        return f"<a number no column can hold: {self.detail}>"

    __str__ = __repr__


def number_unfit(v: object) -> str | None:
    """Why a number (an int, a Decimal, an `Unholdable`) fits no column, or None. Never converts it."""
    if isinstance(v, Unholdable):
        return v.detail
    return value_unfit(v)


def read_json_number(text: str) -> Decimal | Unholdable:
    """`json.loads`' parse_float: a JSON number with a point or an exponent -> its exact Decimal, or an
    `Unholdable` when no column holds it. The exponent is looked at before the Decimal is made."""
    exponent = text.lower().partition("e")[2].lstrip("+-").lstrip("0")
    if len(exponent) > 9:  # past a billion: Decimal itself refuses some, and no column holds any
        return Unholdable(f"an exponent of {len(exponent)} digits")
    try:
        d = Decimal(text)
    except InvalidOperation:  # pragma: no cover - JSON's grammar admits only numbers Decimal reads
        return Unholdable("not a number")
    detail = decimal_unfit(d)
    return d if detail is None else Unholdable(detail)


def read_json_integer(text: str) -> int | Unholdable:
    """`json.loads`' parse_int: a JSON integer -> int, or an `Unholdable` past MAX_INTEGER_DIGITS digits
    (int() would refuse it with a ValueError, and a shorter limit than Python's is not ours to lift)."""
    detail = integer_unfit(len(text) - text.startswith("-"))
    return int(text) if detail is None else Unholdable(detail)


def unholdable(where: str, detail: str, position: Position | None = None) -> ExploreError:
    """The refusal of a number no column can hold: TYPE_MISMATCH (a literal that fits no column's type,
    as a 40-digit integer does not fit a 64-bit column), naming the place and why, never the number."""
    return ExploreError(Codes.TYPE_MISMATCH, f"{where} is a number no column can hold ({detail})",
                        hint=NUMBER_HINT, position=position)


# ---------------------------------------------------------------- lists in a text

# The lexer's STRING (explore.lark), possessive: a string the lexer would read is read the same, and an
# unterminated one runs to the end (the lexer refuses it) instead of being tried again from each later quote.
_LIST_EVENTS = re.compile(r"""[()]|'(?:[^'\\]|''|\\.)*+'?|"(?:[^"\\]|""|\\.)*+"?""", re.S)


def check_lists(text: str, what: str) -> None:
    """Refuse a text with a parenthesized list of more than MAX_LIST entries (in the language, only an
    'in' list has commas inside parentheses) before it is parsed: the parser's cost grows with the
    entries, the budgets' refusal comes after it. Linear: one scan for parentheses and strings, the
    commas between them counted by str.count."""
    if text.count(",") < MAX_LIST:  # the common case: no list can be that long
        return
    frames: list[list[int]] = []  # per open parenthesis: [its offset, commas so far]
    last = 0
    for m in _LIST_EVENTS.finditer(text):
        start = m.start()
        if frames:
            frames[-1][1] += text.count(",", last, start)
        last = m.end()
        token = m.group()
        if token == "(":
            frames.append([start, 0])
        elif token == ")" and frames:
            _check_frame(text, frames.pop(), what)
    if frames:
        frames[-1][1] += text.count(",", last)
        for frame in frames:
            _check_frame(text, frame, what)


def _check_frame(text: str, frame: list[int], what: str) -> None:
    offset, commas = frame
    if commas + 1 > MAX_LIST:
        line = text.count("\n", 0, offset) + 1
        column = offset - (text.rfind("\n", 0, offset) + 1) + 1
        raise InputError(Codes.INVALID_REQUEST, f"an 'in' list in {what} has {commas + 1} entries",
                         hint=f"at most {MAX_LIST} are read", position=Position(line, column))


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
