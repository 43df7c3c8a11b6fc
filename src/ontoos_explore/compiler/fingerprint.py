"""Compile stage, identity: BoundExploration -> normalized text and fingerprint.

The normalized text is the exploration as the contract names it (canonical
case, typed literals), the same whichever form it was asked in. Its shape
(every literal replaced by `?`, the limit left out) hashes to the
fingerprint: the same question with other values has the same fingerprint;
another shape (other fields, filters, relations, order, or another number of
`in` values) has another.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from decimal import Decimal

from ..policy.bound import (
    BAnd,
    BBetween,
    BCompare,
    BIn,
    BIsNull,
    BLike,
    BNot,
    BOr,
    BoundExploration,
    BPredicate,
    Col,
    Param,
)


def literal(p: Param) -> str:
    return literal_value(p.value)


def literal_value(v) -> str:
    """A value as the normalized text writes it."""
    if type(v) is int:  # the common case first (an IN list of ids); bool is not int here
        return str(v)
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, Decimal)):
        return format(v, "f") if isinstance(v, Decimal) else str(v)
    if isinstance(v, (dt.date, dt.datetime)):
        v = v.isoformat()
    return "'" + str(v).replace("\\", "\\\\").replace("'", "''") + "'"


def slot(_: Param) -> str:
    return "?"


def predicate(p: BPredicate, lit=literal) -> str:
    if isinstance(p, BAnd):
        return " and ".join(_operand(x, lit) for x in p.items)
    if isinstance(p, BOr):
        return " or ".join(_operand(x, lit) for x in p.items)
    if isinstance(p, BNot):
        return "not " + _operand(p.item, lit)
    ref = p.col.ref
    if isinstance(p, BCompare):
        return f"{ref} {p.op} {lit(p.value)}"
    if isinstance(p, BIn):
        return f"{ref} {'not in' if p.negated else 'in'} ({', '.join(lit(v) for v in p.values)})"
    if isinstance(p, BBetween):
        return f"{ref} between {lit(p.low)} and {lit(p.high)}"
    if isinstance(p, BIsNull):
        return f"{ref} is {'not null' if p.negated else 'null'}"
    if isinstance(p, BLike):
        return f"{ref} {'not ' if p.negated else ''}{'ilike' if p.case_insensitive else 'like'} {lit(p.pattern)}"
    raise TypeError(type(p).__name__)  # pragma: no cover


def _operand(p: BPredicate, lit) -> str:
    text = predicate(p, lit)
    return f"({text})" if isinstance(p, (BAnd, BOr)) else text


def render(plan: BoundExploration, lit=literal, with_limit: bool = True) -> str:
    parts = [f"explore {plan.root.dataset}"]
    if plan.joins:
        parts.append("via " + ", ".join(j.relation for j in plan.joins))
    fields = []
    for f in plan.fields:
        text = f.expr.ref if isinstance(f.expr, Col) else f.expr.text
        fields.append(f"{text} as {f.alias}" if f.alias else text)
    parts.append("fields " + ", ".join(fields))
    if plan.where is not None:
        parts.append("where " + predicate(plan.where, lit))
    if plan.group_by:
        parts.append("group by " + ", ".join(c.ref for c in plan.group_by))
    if plan.order_by:
        keys = []
        for k in plan.order_by:
            text = k.alias or (k.expr.ref if isinstance(k.expr, Col) else k.expr.text)
            keys.append(f"{text} desc" if k.descending else text)
        parts.append("order by " + ", ".join(keys))
    if with_limit and plan.limit_written:
        parts.append(f"limit {plan.limit}")
    return " ".join(parts)


def normalized(plan: BoundExploration) -> str:
    """The exploration in canonical text form, literals included (for the audit)."""
    return render(plan)


def shape(plan: BoundExploration) -> str:
    """The exploration with its literal values removed."""
    return render(plan, lit=slot, with_limit=False)


def fingerprint(plan: BoundExploration, shape_text: str | None = None) -> str:
    return of_shape(shape_text if shape_text is not None else shape(plan))


def of_shape(shape_text: str) -> str:
    """The one fingerprint scheme: a shape's text (literals as `?`, no limit), hashed. A refused
    exploration has no plan; the audit hashes its parsed shape (`grammar.render.to_text`) the same way."""
    return hashlib.sha256(shape_text.encode()).hexdigest()[:16]
