"""Policy stage, the rules: each binds or checks one part of the exploration.

`RULES` is the order they run in; each takes the `Binding` and fills or
checks one part of it. Adding a rule is one function and one row.
"""

from __future__ import annotations

from ..contract import FilterRule, Relation
from ..errors import BindError, BudgetError, Codes
from ..grammar.render import to_json_form
from ..ir import (
    AggregateField,
    And,
    Between,
    ColumnField,
    Compare,
    InList,
    IsNull,
    Like,
    Not,
    Or,
    Predicate,
    Ref,
)
from ..names import close_matches, fold, quote_list
from ..types import NUMERIC_TYPES, ORDERED_TYPES, a, convert, python_kind
from .bound import (
    Agg,
    BAnd,
    BBetween,
    BCompare,
    BIn,
    BIsNull,
    BLike,
    BNot,
    BOr,
    BPredicate,
    Col,
    Join,
    OrderKey,
    OutputField,
    Param,
    Source,
)
from .plans import always_filters
from .scope import Binding

# ---------------------------------------------------------------- datasets and relations


def bind_dataset(b: Binding) -> None:
    b.root = b.add_source(b.resolve_dataset(b.e.dataset), None)


def require_declared_relation(b: Binding) -> None:
    """Follow each `via` relation: declared, both ends in scope, starting where we are."""
    for name in b.e.relations:
        rel, start = b.resolve_relation(name)
        target = b.contract.dataset(rel.to)
        src = b.add_source(target, rel.name)
        start_ds = b.datasets[start.alias]
        on = tuple(
            (Col(start, start_ds.column(a).name, start_ds.column(a).type), Col(src, target.column(c).name, target.column(c).type))
            for a, c in rel.join.items()
        )
        b.joins.append(Join(source=src, relation=rel.name, on=on))
        if rel.note:
            b.notes.append(f"{rel.name}: {rel.note}")


# ---------------------------------------------------------------- fields


def bind_aggregate(b: Binding, f: AggregateField) -> Agg:
    col = b.resolve_column(f.ref) if f.ref is not None else None
    if col is not None:
        if f.func in ("sum", "avg") and col.type not in NUMERIC_TYPES:
            raise BindError(
                Codes.AGGREGATE_TYPE,
                f"{f.func}({col.ref}): {col.ref} is {a(col.type)} column",
                hint=f"{f.func} applies to integer and numeric columns; count, min and max apply to others",
                position=f.pos,
            )
        if f.func in ("min", "max") and col.type not in ORDERED_TYPES:
            raise BindError(
                Codes.AGGREGATE_TYPE,
                f"{f.func}({col.ref}): {col.ref} is {a(col.type)} column",
                hint=f"{f.func} does not apply to {col.type} columns; group by it and count() instead",
                position=f.pos,
            )
    return Agg(f.func, col, f.distinct)


def deny_unreadable_columns(b: Binding) -> None:
    """Bind the fields; every column must be readable (the same answer as unknown)."""
    if not b.e.fields:
        raise BindError(Codes.NO_FIELDS, "no fields asked for", hint="list at least one field; ontoos_catalog shows the columns")
    out: list[OutputField] = []
    seen: dict[str, str] = {}
    for f in b.e.fields:
        if isinstance(f, ColumnField):
            expr = b.resolve_column(f.ref)
            name = f.alias or expr.ref
        else:
            expr = bind_aggregate(b, f)
            name = f.alias or expr.text
        key = fold(name)
        if key in seen:
            raise BindError(
                Codes.DUPLICATE_OUTPUT,
                f"two fields are named '{name}'",
                position=f.ref.pos if isinstance(f, ColumnField) else f.pos,
                hint=f"give one of them another name with 'as', e.g. {name.split('(')[0].replace('.', '_')}_2",
            )
        seen[key] = name
        out.append(OutputField(expr=expr, name=name, alias=f.alias))
    b.fields = tuple(out)
    b.aggregated = any(isinstance(f.expr, Agg) for f in out)


# ---------------------------------------------------------------- filter


def _require_ordered(col: Col, op: str, ref: Ref) -> None:
    if col.type not in ORDERED_TYPES:
        raise BindError(
            Codes.OPERATOR_TYPE,
            f"'{op}' does not apply to {col.type} column '{col.ref}'",
            hint="use = or != (or 'is true' as '= true')",
            position=ref.pos,
        )


def bind_predicate(b: Binding, p: Predicate) -> BPredicate:
    if isinstance(p, And):
        return BAnd(tuple(bind_predicate(b, x) for x in p.items))
    if isinstance(p, Or):
        return BOr(tuple(bind_predicate(b, x) for x in p.items))
    if isinstance(p, Not):
        return BNot(bind_predicate(b, p.item))
    col = b.resolve_column(p.ref)
    if isinstance(p, Compare):
        if p.op not in ("=", "!="):
            _require_ordered(col, p.op, p.ref)
        return BCompare(col, p.op, b.param(p.value, col))
    if isinstance(p, InList):
        return BIn(col, tuple(b.param(v, col) for v in p.values), p.negated)
    if isinstance(p, Between):
        _require_ordered(col, "between", p.ref)
        return BBetween(col, b.param(p.low, col), b.param(p.high, col))
    if isinstance(p, IsNull):
        return BIsNull(col, p.negated)
    if isinstance(p, Like):
        op = "ilike" if p.case_insensitive else "like"
        if col.type != "text":
            raise BindError(
                Codes.OPERATOR_TYPE,
                f"'{op}' applies to text columns; '{col.ref}' is {col.type}",
                hint="use 'in' with the values of an enum column" if col.type == "enum" else "use =, <, > or between",
                position=p.ref.pos,
            )
        if p.pattern.kind != "string":
            raise BindError(
                Codes.TYPE_MISMATCH,
                f"the pattern of '{op}' must be a quoted string",
                hint=f"e.g. {col.ref} {op} 'api-%'",
                position=p.pattern.pos,
            )
        return BLike(col, b.param(p.pattern, col), p.negated, p.case_insensitive)
    raise TypeError(f"not a predicate: {type(p).__name__}")  # pragma: no cover


def bind_filter(b: Binding) -> None:
    b.where = bind_predicate(b, b.e.where) if b.e.where is not None else None


# ---------------------------------------------------------------- grouping and order


def bind_group_by(b: Binding) -> None:
    b.group_by = tuple(b.resolve_column(r) for r in b.e.group_by)
    if b.group_by:
        b.aggregated = True


def require_grouped_fields(b: Binding) -> None:
    """With any aggregate or group by, every plain field must be grouped."""
    if not b.aggregated:
        return
    grouped = set(b.group_by)
    missing = [
        (f, out) for f, out in zip(b.e.fields, b.fields) if isinstance(out.expr, Col) and out.expr not in grouped
    ]
    if missing:
        names = ", ".join(out.expr.ref for _, out in missing)
        fixed = b.e.model_copy(update={"group_by": (*b.e.group_by, *(f.ref for f, _ in missing))})
        raise BindError(
            Codes.UNGROUPED_FIELD,
            f"{names} must be in group by, because the exploration aggregates",
            hint=f"add to group by: {names} (or drop the aggregate)",
            position=missing[0][0].ref.pos,
            retry_with=to_json_form(fixed),
        )


def _order_column(b: Binding, key: Ref, also: str, aliases: list[str]):
    """An order key that is a column; one that is neither a column nor an alias, but close to one alias
    and no column, is offered that alias (retry_with), as a misspelt column is offered the column."""
    try:
        return b.resolve_column(key, also=also)
    except BindError as e:
        close = close_matches(key.column, aliases, n=1) if key.relation is None else []
        if e.retry_with is None and close:
            e.hint = f"did you mean the alias '{close[0]}'? " + (e.hint or "")
            e.retry_with = b.retry(key, Ref(column=close[0]))
        raise


def bind_order_by(b: Binding) -> None:
    aliases = {fold(f.alias): f for f in b.fields if f.alias}
    also = f"; or an alias: {quote_list(f.alias for f in b.fields if f.alias)}" if aliases else ""
    grouped = set(b.group_by)
    keys: list[OrderKey] = []
    for item in b.e.order_by:
        key = item.key
        alias = None
        if isinstance(key, Ref) and key.relation is None and fold(key.column) in aliases:
            target = aliases[fold(key.column)]
            expr, alias = target.expr, target.alias
        elif isinstance(key, Ref):
            expr = _order_column(b, key, also, [f.alias for f in b.fields if f.alias])
        else:
            expr = bind_aggregate(b, key)
        if isinstance(expr, Col) and b.aggregated and expr not in grouped:
            raise BindError(
                Codes.ORDER_NOT_GROUPED,
                f"cannot order by '{expr.ref}': the exploration aggregates and it is not in group by",
                hint="order by a grouped column, an aggregate, or an alias of a field",
                position=key.pos if isinstance(key, Ref) else None,
            )
        if isinstance(expr, Agg) and not b.aggregated:
            raise BindError(
                Codes.ORDER_NOT_GROUPED,
                f"cannot order by {expr.text}: the exploration does not aggregate",
                hint="add the aggregate to fields with the columns to group by, or order by a column",
            )
        keys.append(OrderKey(expr, item.descending, alias))
    b.order_by = tuple(keys)


# ---------------------------------------------------------------- budgets that need names


def require_filter_on_heavy(b: Binding) -> None:
    if b.e.where is not None:
        return
    for alias, ds in b.datasets.items():
        if ds.heavy:
            cols = quote_list(c.name for c in ds.readable_columns())
            raise BudgetError(
                Codes.HEAVY_WITHOUT_FILTER,
                f"{ds.name} is a heavy dataset and cannot be explored without a filter",
                hint=f"add a where clause, e.g. on one of: {cols}",
            )


def clamp_row_budget(b: Binding) -> None:
    caps = [(b.role.max_rows, f"role {b.role.name}")]
    caps += [(ds.max_rows, f"dataset {ds.name}") for ds in b.datasets.values() if ds.max_rows]
    cap, who = min(caps, key=lambda c: c[0])
    b.row_cap = cap
    asked = b.e.limit
    if asked is None:
        b.limit = cap
        return
    if asked < 1:
        raise BindError(
            Codes.INVALID_LIMIT,
            f"limit {asked} is below 1",
            hint=f"use a limit from 1 to {cap}, or leave it out for {cap}",
            position=b.e.limit_pos,
        )
    if asked <= cap:
        b.limit = asked
        return
    if not b.role.clamp_limit:
        raise BudgetError(
            Codes.LIMIT_OVER_BUDGET,
            f"limit {asked} is above the row budget",
            hint=f"the largest allowed limit is {cap} ({who})",
            position=b.e.limit_pos,
            retry_with=to_json_form(b.e.model_copy(update={"limit": cap})),
        )
    b.limit = cap
    b.notes.append(f"limit {asked} lowered to {cap}, the row budget of {who}")


# ---------------------------------------------------------------- parents, always-filters and notes


def _meets_parent(b: Binding, src: Source, rel: Relation) -> bool:
    """A caller's join already meets the parent row `rel` leads to from `src`: one followed from `src` to
    the parent's dataset on (at least) the relation's column pairs, or the one that reached `src` from
    a source of the parent's dataset on (at least) those pairs reversed. The parent of a to-one relation
    is unique, so that source's row is it, and it is filtered (and given parents) as a source itself."""
    ds, parent = b.dataset_of(src), b.contract.dataset(rel.to)
    pairs = {(ds.column(x).name, parent.column(y).name) for x, y in rel.join.items()}
    for j in b.joins:
        on = {(x.name, y.name) for x, y in j.on}
        if j.start == src and fold(j.source.dataset) == fold(rel.to) and pairs <= on:
            return True
        if j.source == src and fold(j.start.dataset) == fold(rel.to) and pairs <= {(y, x) for x, y in on}:
            return True
    return False


def _join_parents_of(b: Binding, src: Source) -> None:
    ds = b.dataset_of(src)
    for rel in b.contract.parents_of(ds.name):
        if src.alias in b.datasets and _meets_parent(b, src, rel):
            continue
        parent = b.contract.dataset(rel.to)
        to = b.add_parent(parent, rel.name)
        on = tuple(
            (Col(src, ds.column(x).name, ds.column(x).type), Col(to, parent.column(y).name, parent.column(y).type))
            for x, y in rel.join.items()
        )
        b.implied.append(Join(source=to, relation=rel.name, on=on))
        _join_parents_of(b, to)  # the chain, depth first; the contract's checks exclude cycles


def join_parents(b: Binding) -> None:
    """Every source the caller reads brings in its parents (`exists_with`), along the whole chain: an inner
    join on the relation's declared columns to a source of the contract's own (`p0, p1, ...`, which
    nothing the caller writes can name; no budget counts it), whose always-filters the next rule ANDs
    in. A caller's join that already meets that parent row is reused instead (`_meets_parent`)."""
    for src in b.sources():
        _join_parents_of(b, src)


def _always(col: Col, rule: FilterRule) -> BPredicate:
    def p(v) -> Param:
        kind, value = python_kind(v)
        return Param(convert(kind, value, col.type), col.type)

    if rule.op in ("is null", "is not null"):
        return BIsNull(col, rule.op == "is not null")
    if rule.op in ("in", "not in"):
        return BIn(col, tuple(p(v) for v in rule.value), rule.op == "not in")
    return BCompare(col, rule.op, p(rule.value))


def apply_always_filters(b: Binding) -> None:
    """AND in every dataset's always_filter, the caller's sources' then the implied parents' (hidden
    columns allowed; callers never see them)."""
    out: list[BPredicate] = []
    for src in (*b.sources(), *(j.source for j in b.implied)):
        for c, rule in always_filters(b.dataset_of(src)):
            out.append(_always(Col(src, c.name, c.type), rule))
    b.always = tuple(out)


def note_fan_out(b: Binding) -> None:
    """Aggregating across a relation that repeats rows deserves a warning."""
    if not b.aggregated:
        return
    for j in b.joins:
        rel = b.contract.relation(j.relation)
        if rel.fans_out:
            b.notes.append(
                f"{rel.name} is {rel.cardinality.replace('_', '-')}: each {rel.from_} row repeats once per "
                f"matching {rel.to} row, so aggregates over {rel.from_} columns count it more than once"
            )


RULES = (
    bind_dataset,
    require_declared_relation,
    deny_unreadable_columns,
    bind_filter,
    bind_group_by,
    require_grouped_fields,
    bind_order_by,
    require_filter_on_heavy,
    clamp_row_budget,
    join_parents,
    apply_always_filters,
    note_fan_out,
)
