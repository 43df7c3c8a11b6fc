"""Guard stage, reading the parse tree: pglast JSON nodes -> names, locations, constants."""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal
from typing import Any

MAX_NAME_BYTES = 63  # PostgreSQL truncates identifiers to NAMEDATALEN - 1 bytes


def _ident(name: str) -> str:
    raw = name.encode("utf-8")
    return raw[:MAX_NAME_BYTES].decode("utf-8", errors="ignore") if len(raw) > MAX_NAME_BYTES else name


def _strings(items: Iterable[Any]) -> list[str | None]:
    """Names out of a list of String nodes (None for anything else, e.g. A_Star)."""
    out: list[str | None] = []
    for item in items or ():
        body = item.get("String") if isinstance(item, dict) else None
        out.append(body.get("sval", "") if isinstance(body, dict) else None)
    return out


def _node(value: Any) -> tuple[str, dict] | None:
    """(kind, body) if `value` is a parse-tree node: a one-key dict of a dict."""
    if isinstance(value, dict) and len(value) == 1:
        kind, body = next(iter(value.items()))
        if isinstance(body, dict) and kind[:1].isupper():
            return kind, body
    return None


def _location(body: Any) -> int | None:
    """The node's own location, else the first one found inside it (RangeFunction has none)."""
    stack = [body]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            loc = value.get("location")
            if isinstance(loc, int) and loc >= 0:
                return loc
            stack.extend(reversed(list(value.values())))
        elif isinstance(value, list):
            stack.extend(reversed(value))
    return None


def _const_int(body: dict) -> int | None:
    if body.get("isnull"):
        return None
    ival = body.get("ival")
    if isinstance(ival, dict):
        return int(ival.get("ival", 0))  # the JSON output leaves out zero
    return None


NO_VALUE = object()  # what `_const_value` returns for a constant it does not read (NULL, bit strings)


def _const_value(body: dict) -> Any:
    """The value of an A_Const: int, Decimal (numbers with a point or exponent), str or bool; else NO_VALUE.
    (The JSON output leaves out zero, false and the empty string: `{"ival": {}}`, `{"boolval": {}}`.)"""
    if body.get("isnull"):
        return NO_VALUE
    for key, read in (("ival", int), ("fval", Decimal), ("sval", str), ("boolval", bool)):
        if key in body:
            inner = body[key] if isinstance(body[key], dict) else {}
            default = {"ival": 0, "fval": "0", "sval": "", "boolval": False}[key]
            try:
                return read(inner.get(key, default))
            except (ArithmeticError, ValueError, TypeError):  # pragma: no cover - the parser wrote it
                return NO_VALUE
    return NO_VALUE
