"""Parse stage, the way back: `Exploration` -> text form and JSON form.

Used for `retry_with` (an error's corrected exploration, in JSON form) and by
anything that must show an exploration to a person. Rendering then parsing
gives the same IR (tests/grammar/test_render.py holds that property).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from pydantic import BaseModel

from ..ir import (
    AggregateField,
    And,
    Between,
    ColumnField,
    Compare,
    Exploration,
    InList,
    IsNull,
    Like,
    Lit,
    Not,
    Or,
    OrderItem,
    Predicate,
    Ref,
)


def literal(lit: Lit) -> str:
    v = lit.value
    if lit.kind == "string":
        return "'" + str(v).replace("\\", "\\\\").replace("'", "''") + "'"
    if lit.kind == "boolean":
        return "true" if v else "false"
    if isinstance(v, Decimal):
        return format(v, "f")
    return str(v)


def ref(r: Ref) -> str:
    return f"{r.relation}.{r.column}" if r.relation else r.column


def field_expr(f: ColumnField | AggregateField) -> str:
    if isinstance(f, ColumnField):
        return ref(f.ref)
    inner = ("distinct " if f.distinct else "") + (ref(f.ref) if f.ref else "")
    return f"{f.func}({inner})"


def field(f: ColumnField | AggregateField) -> str:
    text = field_expr(f)
    return f"{text} as {f.alias}" if f.alias else text


def order_item(o: OrderItem) -> str:
    key = ref(o.key) if isinstance(o.key, Ref) else field_expr(o.key)
    return f"{key} desc" if o.descending else key


def predicate(p: Predicate, lit=literal) -> str:
    """Text of a predicate; `lit` renders literals (pass `lambda _: "?"` for a shape)."""
    if isinstance(p, And):
        return " and ".join(_grouped(x, lit, inside=And) for x in p.items)
    if isinstance(p, Or):
        return " or ".join(_grouped(x, lit, inside=Or) for x in p.items)
    if isinstance(p, Not):
        return "not " + _grouped(p.item, lit, inside=Not)
    if isinstance(p, Compare):
        return f"{ref(p.ref)} {p.op} {lit(p.value)}"
    if isinstance(p, InList):
        values = ", ".join(lit(v) for v in p.values)
        return f"{ref(p.ref)} {'not in' if p.negated else 'in'} ({values})"
    if isinstance(p, Between):
        return f"{ref(p.ref)} between {lit(p.low)} and {lit(p.high)}"
    if isinstance(p, IsNull):
        return f"{ref(p.ref)} is {'not null' if p.negated else 'null'}"
    if isinstance(p, Like):
        op = ("not " if p.negated else "") + ("ilike" if p.case_insensitive else "like")
        return f"{ref(p.ref)} {op} {lit(p.pattern)}"
    raise TypeError(f"not a predicate: {type(p).__name__}")  # pragma: no cover


def _grouped(p: Predicate, lit, inside) -> str:
    text = predicate(p, lit)
    needs = isinstance(p, (And, Or)) and not (inside is And and isinstance(p, And))
    return f"({text})" if needs else text


def to_text(e: Exploration, literal=literal, with_limit: bool = True) -> str:
    """The text form; `literal` renders values (`lambda _: "?"` for the shape)."""
    parts = [f"explore {e.dataset.value}"]
    if e.relations:
        parts.append("via " + ", ".join(r.value for r in e.relations))
    parts.append("fields " + ", ".join(field(f) for f in e.fields))
    if e.where is not None:
        parts.append("where " + predicate(e.where, literal))
    if e.group_by:
        parts.append("group by " + ", ".join(ref(r) for r in e.group_by))
    if e.order_by:
        parts.append("order by " + ", ".join(order_item(o) for o in e.order_by))
    if with_limit and e.limit is not None:
        parts.append(f"limit {e.limit}")
    return " ".join(parts)


def to_json_form(e: Exploration) -> dict[str, Any]:
    """The JSON form (the MCP tool's input, the REST body); keys with nothing to say are left out."""
    out: dict[str, Any] = {"dataset": e.dataset.value, "fields": [field(f) for f in e.fields]}
    if e.where is not None:
        out["filter"] = predicate(e.where)
    if e.relations:
        out["relations"] = [r.value for r in e.relations]
    if e.group_by:
        out["group_by"] = [ref(r) for r in e.group_by]
    if e.order_by:
        out["order_by"] = [("-" if o.descending else "") + order_item(o.model_copy(update={"descending": False})) for o in e.order_by]
    if e.limit is not None:
        out["limit"] = e.limit
    return out


def replace(node: Any, target: Any, new: Any) -> Any:
    """A copy of the IR `node` with the object `target` (by identity) replaced by `new`."""
    if node is target:
        return new
    if isinstance(node, tuple):
        items = tuple(replace(x, target, new) for x in node)
        return items if any(a is not b for a, b in zip(items, node)) else node
    if isinstance(node, BaseModel):
        changes = {}
        for name in type(node).model_fields:
            value = getattr(node, name)
            updated = replace(value, target, new)
            if updated is not value:
                changes[name] = updated
        return node.model_copy(update=changes) if changes else node
    return node
