"""Parse stage, the other two forms: JSON form and CLI flags -> `Exploration`.

Both reuse the grammar for their pieces (a field, a predicate, an order key,
a reference), so every form accepts exactly the same language and builds the
same IR as the text form.

    >>> from_json({"dataset": "workloads", "fields": ["name"]}).dataset.value
    'workloads'
"""

from __future__ import annotations

import json
import re
from decimal import Decimal
from typing import Any

from ..errors import Codes, ExploreError, InputError
from ..ir import (
    Between,
    Compare,
    Exploration,
    InList,
    IsNull,
    Like,
    Lit,
    Name,
    OrderItem,
    Predicate,
    and_all,
    make,
)
from ..names import close_matches, is_identifier
from ..types import python_kind
from .limits import (
    MAX_LIST,
    MAX_TEXT,
    NUMBER_HINT,
    CheckedJSON,
    check_json,
    check_shape,
    check_text,
    read_json_integer,
    read_json_number,
)
from .parser import parse, parse_text

JSON_KEYS = ("dataset", "fields", "filter", "relations", "group_by", "order_by", "limit", "query")
FILTER_KEYS = ("field", "op", "value")
MAX_ITEMS = MAX_LIST  # any list in a request; the role's budgets are far lower

# op -> (builder, value shape); one row per operator of the JSON filter objects.
_SCALAR, _LIST, _PAIR, _NONE = "a single value", "a non-empty list of values", "a list of two values", "no value"
FILTER_OPS: dict[str, tuple[str, Any]] = {
    "=": (_SCALAR, lambda r, v: Compare(ref=r, op="=", value=v)),
    "!=": (_SCALAR, lambda r, v: Compare(ref=r, op="!=", value=v)),
    "<>": (_SCALAR, lambda r, v: Compare(ref=r, op="!=", value=v)),
    "<": (_SCALAR, lambda r, v: Compare(ref=r, op="<", value=v)),
    "<=": (_SCALAR, lambda r, v: Compare(ref=r, op="<=", value=v)),
    ">": (_SCALAR, lambda r, v: Compare(ref=r, op=">", value=v)),
    ">=": (_SCALAR, lambda r, v: Compare(ref=r, op=">=", value=v)),
    "in": (_LIST, lambda r, v: InList(ref=r, values=v)),
    "not in": (_LIST, lambda r, v: InList(ref=r, values=v, negated=True)),
    "between": (_PAIR, lambda r, v: Between(ref=r, low=v[0], high=v[1])),
    "is null": (_NONE, lambda r, v: IsNull(ref=r)),
    "is not null": (_NONE, lambda r, v: IsNull(ref=r, negated=True)),
    "like": (_SCALAR, lambda r, v: Like(ref=r, pattern=v)),
    "not like": (_SCALAR, lambda r, v: Like(ref=r, pattern=v, negated=True)),
    "ilike": (_SCALAR, lambda r, v: Like(ref=r, pattern=v, case_insensitive=True)),
    "not ilike": (_SCALAR, lambda r, v: Like(ref=r, pattern=v, negated=True, case_insensitive=True)),
}


def _bad(message: str, hint: str | None = None, retry_with: dict | None = None) -> InputError:
    return InputError(Codes.INVALID_REQUEST, message, hint=hint, retry_with=retry_with)


# ---------------------------------------------------------------- JSON form


def loads_strict(text: str | bytes) -> Any:
    """json.loads that refuses NaN/Infinity and duplicate keys (a surface's first step). Numbers are
    read as int and exact Decimal (cheap to make, whatever the exponent: `check_json` refuses one no
    column holds, at its place); one Python's readers refuse (an integer past MAX_INTEGER_DIGITS, an
    exponent past Decimal's) is read again by `limits.read_json_integer`/`read_json_number` as an
    `Unholdable`, refused the same way."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            raise _unreadable("the request is not UTF-8", "send UTF-8 encoded JSON") from None
    if len(text) > MAX_TEXT * 4:
        from ..errors import BudgetError

        raise BudgetError(Codes.JSON_TOO_LARGE, f"the request is {len(text)} characters long",
                          hint=f"the largest accepted request is {MAX_TEXT * 4} characters")

    def no_constant(name: str) -> Any:
        raise ValueError(f"{name} is not a number JSON allows")

    def no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, v in pairs:
            if k in out:
                raise ValueError(f"duplicate key {k!r}")
            out[k] = v
        return out

    try:
        try:
            return json.loads(text, parse_constant=no_constant, object_pairs_hook=no_duplicates, parse_float=Decimal)
        except (ValueError, ArithmeticError) as e:
            if isinstance(e, json.JSONDecodeError):
                raise
            # a number int() or Decimal() refused (or a duplicate key, NaN: refused again, the same way)
            return json.loads(text, parse_constant=no_constant, object_pairs_hook=no_duplicates,
                              parse_float=read_json_number, parse_int=read_json_integer)
    except RecursionError:
        raise _unreadable("the JSON nests too deeply", "an exploration is a flat JSON object") from None
    except ValueError as e:
        msg = e.msg if isinstance(e, json.JSONDecodeError) else str(e)
        where = f" at line {e.lineno}, column {e.colno}" if isinstance(e, json.JSONDecodeError) else ""
        raise _unreadable(f"the request is not valid JSON: {msg}{where}", 'send a JSON object such as {"dataset": "...", "fields": ["..."]}') from None


def _unreadable(message: str, hint: str) -> InputError:
    return InputError(Codes.JSON_UNREADABLE, message, hint=hint)


def _string_list(body: dict, key: str, required: bool = False) -> list[str]:
    value = body.get(key)
    if value is None:
        if required:
            raise _bad(f"'{key}' is required", f'give {key} as a list of strings, e.g. "{key}": ["name"]')
        return []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
        raise _bad(f"'{key}' must be a list of strings", f'e.g. "{key}": ["name"]')
    if len(value) > MAX_ITEMS:
        raise _bad(f"'{key}' has {len(value)} entries", f"at most {MAX_ITEMS} are read")
    return value


def _comma_lists(body: dict) -> None:
    """Refuse list entries written as one comma-separated string ("name,namespace": a list was meant),
    every list key at once, with the lists as they were meant (retry_with, when that reads)."""
    split: dict[str, list[str]] = {}
    for key in ENTRY:
        value = body.get(key)
        entries = [value] if isinstance(value, str) else value if isinstance(value, list) else []
        if not all(isinstance(x, str) for x in entries) or len(entries) > MAX_ITEMS:
            continue  # refused as it is, by _string_list
        parts = [part for entry in entries for part in (split_top_level(entry) or [entry])]
        if len(parts) > len(entries) and len(parts) <= MAX_ITEMS:
            split[key] = parts
    if split:
        key, parts = next(iter(split.items()))
        fixed = {**body, **split}
        raise _bad(f"'{key}' has commas inside one entry: each entry is one {ENTRY[key]}",
                   f'give a list, one per entry: "{key}": {_shown_list(parts)}',
                   retry_with=fixed if _reads(fixed) else None)


ENTRY = {"fields": "field", "group_by": "column", "order_by": "order key", "relations": "relation"}


def _shown_list(items: list[str]) -> str:
    """The first entries, each cut short: a hint never echoes a long input."""
    import json

    shown = json.dumps([x if len(x) <= 40 else x[:40] + "..." for x in items[:4]])
    return shown[:-1] + ", ...]" if len(items) > 4 else shown


def _reads(body: dict) -> bool:
    """Whether a corrected body reads as an exploration (a retry offered must at least parse)."""
    try:
        from_json(body)
    except ExploreError:
        return False
    return True


def _name(value: Any, where: str) -> Name:
    if not isinstance(value, str) or not is_identifier(value):
        raise InputError(
            Codes.INVALID_NAME,
            f"{where} must be a name",
            hint="names match [A-Za-z_][A-Za-z0-9_]* (at most 63 characters); see ontoos_catalog for the names",
        )
    return Name(value=value)


def _literal(value: Any, where: str) -> Lit:
    """A literal typed by `python_kind`, built without validation (which would try a Decimal as an int)."""
    try:
        kind, v = python_kind(value)
    except ValueError:
        if isinstance(value, float):  # inf: what a JSON reader makes of a number past a double's range
            raise _bad(f"{where} is not a finite number", NUMBER_HINT) from None
        raise _bad(f"{where} must be a string, number or boolean", "literals are JSON strings, numbers, true or false") from None
    return make(Lit, kind=kind, value=v)


def _filter_object(obj: Any, i: int) -> Predicate:
    where = f"filter[{i}]"
    if not isinstance(obj, dict):
        raise _bad(f"{where} must be an object or the filter a predicate string",
                   'e.g. "filter": [{"field": "namespace", "op": "=", "value": "prod"}]')
    unknown = [k for k in obj if k not in FILTER_KEYS]
    if unknown:
        raise _bad(f"{where} has an unknown key '{str(unknown[0])[:40]}'", f"filter objects have the keys: {', '.join(FILTER_KEYS)}")
    field, op = obj.get("field"), obj.get("op", "=")
    if not isinstance(field, str):
        raise _bad(f"{where}.field must be a column name", 'e.g. {"field": "namespace", "op": "=", "value": "prod"}')
    ref = parse(field, start="ref", what=f"{where}.field")
    if not isinstance(op, str) or " ".join(op.lower().split()) not in FILTER_OPS:
        raise _bad(f"{where}.op is not an operator", f"operators: {', '.join(FILTER_OPS)}")
    shape, build = FILTER_OPS[" ".join(op.lower().split())]
    value = obj.get("value")
    if shape == _NONE:
        if value is not None:
            raise _bad(f"{where}: '{op}' takes no value", "leave out 'value'")
        return build(ref, None)
    if shape == _SCALAR:
        if isinstance(value, (list, dict)) or value is None:
            hint = ("use 'in' for a list of values" if isinstance(value, list)
                    else 'to match missing values use "op": "is null"' if value is None
                    else 'e.g. "value": "prod"')
            raise _bad(f"{where}: '{op}' takes {shape}", hint)
        return build(ref, _literal(value, f"{where}.value"))
    if not isinstance(value, list) or not value or (shape == _PAIR and len(value) != 2):
        raise _bad(f"{where}: '{op}' takes {shape}", 'e.g. "value": [1, 10]' if shape == _PAIR else 'e.g. "value": ["a", "b"]')
    if len(value) > MAX_ITEMS:
        raise _bad(f"{where}.value has {len(value)} entries", f"at most {MAX_ITEMS} are read")
    return build(ref, tuple(_literal(v, f"{where}.value[{j}]") for j, v in enumerate(value)))


def _order_entry(text: str, i: int) -> OrderItem:
    stripped = text.strip()
    descending = stripped.startswith("-")
    item = parse(stripped[1:] if descending else stripped, start="order_item", what=f"order_by[{i}]")
    if descending:
        if re.search(r"\s(asc|desc)\s*$", stripped, re.IGNORECASE):
            raise _bad(f"order_by[{i}] has both a leading '-' and a direction", "write '-name' or 'name desc'")
        item = item.model_copy(update={"descending": True})
    return item


def from_json(body: Any) -> Exploration:
    """The JSON form (a dict, as from MCP or a parsed REST body) -> Exploration."""
    if not isinstance(body, dict):
        raise _bad("the exploration must be a JSON object", 'e.g. {"dataset": "workloads", "fields": ["name"]}')
    if not isinstance(body, CheckedJSON):
        check_json(body, "the exploration")
    unknown = [k for k in body if k not in JSON_KEYS]
    if unknown:
        key = str(unknown[0])
        close = close_matches(key, JSON_KEYS, n=1)
        retry = None
        if close and close[0] not in body:
            retry = {(close[0] if k == key else k): v for k, v in body.items()}
        raise _bad(
            f"unknown key '{key[:40]}'",
            (f"did you mean '{close[0]}'? " if close else "") + f"keys: {', '.join(JSON_KEYS)}",
            retry_with=retry,
        )
    if "query" in body:
        others = [k for k in body if k != "query"]
        if others:
            raise _bad(f"'query' cannot be combined with '{others[0]}'", "put the whole exploration in the text of 'query'")
        return parse_text(body["query"])

    if "dataset" not in body:
        raise _bad("'dataset' is required", "name the dataset to explore; ontoos_catalog lists them")
    _comma_lists(body)
    dataset = _name(body["dataset"], "dataset")
    relations = tuple(_name(r, f"relations[{i}]") for i, r in enumerate(_string_list(body, "relations")))
    fields = tuple(parse(f, start="field", what=f"fields[{i}]") for i, f in enumerate(_string_list(body, "fields", True)))
    group_by = tuple(parse(g, start="ref", what=f"group_by[{i}]") for i, g in enumerate(_string_list(body, "group_by")))
    order_by = tuple(_order_entry(o, i) for i, o in enumerate(_string_list(body, "order_by")))

    where: Predicate | None = None
    raw_filter = body.get("filter")
    if isinstance(raw_filter, str):
        where = parse(raw_filter, start="predicate", what="filter") if raw_filter.strip() else None
    elif isinstance(raw_filter, list):
        if len(raw_filter) > MAX_ITEMS:
            raise _bad(f"'filter' has {len(raw_filter)} entries", f"at most {MAX_ITEMS} are read")
        where = and_all([_filter_object(o, i) for i, o in enumerate(raw_filter)])
    elif isinstance(raw_filter, dict):
        where = _filter_object(raw_filter, 0)
    elif raw_filter is not None:
        raise _bad("'filter' must be a predicate string or a list of {field, op, value} objects",
                   'e.g. "filter": "namespace = \'prod\'"')

    limit = body.get("limit")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)):
        raise _bad("'limit' must be an integer", 'e.g. "limit": 20')

    exploration = Exploration(dataset=dataset, relations=relations, fields=fields, where=where,
                              group_by=group_by, order_by=order_by, limit=limit)
    check_shape(exploration)
    return exploration


# ---------------------------------------------------------------- CLI flags

# `k op v`: the head is matched, the rest is the value with its whitespace stripped (str.strip strips
# what \s matches). Linear: each part of the head is followed by something it cannot hold. (A lazy
# `(.*?)\s*` under fullmatch was quadratic: 1.6 s for a value of 15,500 spaces before its last letter.)
_FLAG_HEAD = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)?)\s*(!=|<>|<=|>=|=|<|>)")


def split_top_level(text: str) -> list[str]:
    """Split a flag value (or a JSON list's entry an agent wrote as "a,b") on commas outside parentheses
    and quotes."""
    parts, depth, quote, start = [], 0, None, 0
    for i, ch in enumerate(text):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def _flag_filter(text: str, i: int) -> Predicate:
    """`k=v` takes the rest of the flag as the literal; a full predicate is read as one."""
    check_text(text, f"--filter #{i + 1}")  # the k=v literal must hold what the text form may
    try:
        return parse(text, start="predicate", what=f"--filter #{i + 1}")
    except InputError as err:
        m = _FLAG_HEAD.match(text)
        if m is None:
            raise err
        ref = parse(m.group(1), start="ref", what=f"--filter #{i + 1}")
        value = text[m.end():].strip()
        return Compare(ref=ref, op="!=" if m.group(2) == "<>" else m.group(2), value=Lit(kind="string", value=value))


def from_flags(
    dataset: str,
    fields: list[str],
    filters: list[str] = (),
    relations: list[str] = (),
    group_by: list[str] = (),
    order_by: list[str] = (),
    limit: int | None = None,
) -> Exploration:
    """The CLI flag form -> Exploration. List flags repeat and split on top-level commas."""

    def flat(values) -> list[str]:
        return [p for v in values for p in split_top_level(v)]

    body: dict[str, Any] = {"dataset": dataset, "fields": flat(fields)}
    if relations:
        body["relations"] = flat(relations)
    if group_by:
        body["group_by"] = flat(group_by)
    if order_by:
        body["order_by"] = flat(order_by)
    if limit is not None:
        body["limit"] = limit
    exploration = from_json(body)
    if filters:
        where = and_all([_flag_filter(f, i) for i, f in enumerate(filters)])
        exploration = exploration.model_copy(update={"where": where})
        check_shape(exploration)
    return exploration
