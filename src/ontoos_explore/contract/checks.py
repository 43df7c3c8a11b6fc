"""Contract stage, cross-checks: a shape-valid `Contract` -> its parts named, names and references checked.

Relations, read sets, roles and always-filters must name what the contract
declares; any error is a `ContractError` at the place in the file.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..errors import ContractError
from ..names import fold, is_identifier
from ..types import LiteralTypeError, convert, python_kind
from .locate import _Locator
from .models import Column, Contract, Dataset, FilterRule


def _check_names(kind: str, names: Iterable[str], path: tuple, where: _Locator) -> None:
    seen: dict[str, str] = {}
    for name in names:
        if not is_identifier(name):
            raise ContractError(
                where.at(path + (name,), f"'{name}' is not a valid {kind} name"),
                hint="names match [A-Za-z_][A-Za-z0-9_]* and are at most 63 characters",
            )
        other = seen.setdefault(fold(name), name)
        if other != name:
            raise ContractError(
                where.at(path + (name,), f"{kind} '{name}' differs from '{other}' only by case"),
                hint="names are matched case-insensitively",
            )


def _bind_names(c: Contract, where: _Locator) -> None:
    """Give every named part its own name (the mapping key) and check the names."""
    _check_names("dataset", c.datasets, ("datasets",), where)
    _check_names("relation", c.relations, ("relations",), where)
    _check_names("read set", c.read_sets, ("read_sets",), where)
    _check_names("role", c.roles, ("roles",), where)
    for dname, d in c.datasets.items():
        object.__setattr__(d, "name", dname)
        _check_names("column", d.columns, ("datasets", dname, "columns"), where)
        for cname, col in d.columns.items():
            object.__setattr__(col, "name", cname)
        d._by_fold.update({fold(k): v for k, v in d.columns.items()})
    for rname, r in c.relations.items():
        object.__setattr__(r, "name", rname)
    for name, role in c.roles.items():
        object.__setattr__(role, "name", name)


def _check_references(c: Contract, where: _Locator) -> None:
    datasets = {fold(k): v for k, v in c.datasets.items()}

    def dataset_at(name: str, path: tuple) -> Dataset:
        d = datasets.get(fold(name)) if isinstance(name, str) else None
        if d is None:
            raise ContractError(
                where.at(path, f"'{name}' is not a dataset of this contract"),
                hint=f"datasets: {', '.join(sorted(c.datasets))}",
            )
        return d

    for rname, r in c.relations.items():
        src = dataset_at(r.from_, ("relations", rname, "from"))
        dst = dataset_at(r.to, ("relations", rname, "to"))
        for a, b in r.join.items():
            for ds, col, side in ((src, a, "from"), (dst, b, "to")):
                if ds.column(col) is None:
                    raise ContractError(
                        where.at(("relations", rname, "join", a), f"'{col}' is not a column of dataset '{ds.name}' ({side} side)"),
                        hint=f"columns of {ds.name}: {', '.join(ds.columns)}",
                    )
            ta, tb = src.column(a).type, dst.column(b).type
            if ta != tb and not {ta, tb} <= {"text", "enum"} and not {ta, tb} <= {"integer", "numeric"}:
                raise ContractError(
                    where.at(("relations", rname, "join", a), f"joins {ta} column '{a}' to {tb} column '{b}'"),
                )

    for sname, members in c.read_sets.items():
        for i, m in enumerate(members):
            dataset_at(m, ("read_sets", sname, i))

    read_sets = {fold(k) for k in c.read_sets}
    for rname, role in c.roles.items():
        for i, s in enumerate(role.read_sets):
            if fold(s) not in read_sets:
                raise ContractError(
                    where.at(("roles", rname, "read_sets", i), f"'{s}' is not a read set of this contract"),
                    hint=f"read sets: {', '.join(sorted(c.read_sets))}",
                )

    for dname, d in c.datasets.items():
        for i, rule in enumerate(d.always_filter):
            path = ("datasets", dname, "always_filter", i)
            col = d.column(rule.column)
            if col is None:
                raise ContractError(
                    where.at(path + ("column",), f"'{rule.column}' is not a column of dataset '{dname}'"),
                    hint=f"columns of {dname}: {', '.join(d.columns)}",
                )
            _check_filter_value(rule, col, path, where)


def _check_filter_value(rule: FilterRule, col: Column, path: tuple, where: _Locator) -> None:
    if rule.op in ("is null", "is not null"):
        if rule.value is not None:
            raise ContractError(where.at(path + ("value",), f"'{rule.op}' takes no value"))
        return
    values = rule.value if rule.op in ("in", "not in") else [rule.value]
    if not isinstance(values, list) or not values:
        raise ContractError(where.at(path + ("value",), f"'{rule.op}' needs a non-empty list of values"))
    for v in values:
        try:
            kind, lit = python_kind(v)
            convert(kind, lit, col.type, col.values)
        except (ValueError, LiteralTypeError) as e:
            raise ContractError(where.at(path + ("value",), f"{v!r} does not fit {col.type} column '{col.name}': {e}"))
