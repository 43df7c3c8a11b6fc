"""Contract stage, cross-checks: a shape-valid `Contract` -> its parts named, names and references checked.

Relations, read sets, roles and always-filters must name what the contract
declares; `exists_with` must name to-one relations from its dataset to a
parent that hides rows (an always-filter, or parents of its own), without
cycles; any error is a `ContractError` at the place in the file.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..errors import ContractError
from ..names import fold, is_identifier
from ..types import LiteralTypeError, convert, python_kind
from .locate import _Locator
from .models import TO_ONE, Column, Contract, Dataset, FilterRule


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

    _check_exists_with(c, where)
    _check_sources(c, where)
    _check_keys(c, where)


def _check_keys(c: Contract, where: _Locator) -> None:
    """A dataset's `key`: readable columns of its own (callers order by them), each listed once."""
    for dname, d in c.datasets.items():
        seen: set[str] = set()
        for i, name in enumerate(d.key):
            path = ("datasets", dname, "key", i)
            col = d.column(name)
            if col is None:
                raise ContractError(where.at(path, f"'{name}' is not a column of dataset '{dname}'"),
                                    hint=f"columns of {dname}: {', '.join(d.columns)}")
            if not col.readable:
                raise ContractError(where.at(path, f"key column '{name}' of '{dname}' is hidden or secret"),
                                    hint="a key is ordered by in every answer: choose readable columns")
            if fold(name) in seen:
                raise ContractError(where.at(path, f"key column '{name}' is listed twice"))
            seen.add(fold(name))


def _check_sources(c: Contract, where: _Locator) -> None:
    """A dataset's `sources` need the contract's `evidence` (the publish log they are read from), and
    each is a non-empty name, listed once."""
    for dname, d in c.datasets.items():
        seen: set[str] = set()
        for i, source in enumerate(d.sources):
            path = ("datasets", dname, "sources", i)
            if c.evidence is None:
                raise ContractError(where.at(path, f"dataset '{dname}' names sources but the contract has no evidence"),
                                    hint="declare evidence: {publish_log: schema.table} at the top level")
            if not source.strip() or len(source) > 200:
                raise ContractError(where.at(path, "a source is a non-empty name of at most 200 characters"))
            if source in seen:
                raise ContractError(where.at(path, f"source '{source}' is listed twice"))
            seen.add(source)


def _check_exists_with(c: Contract, where: _Locator) -> None:
    """Each `exists_with` entry: a relation of the contract, starting at this dataset, to-one (joining its
    parent never repeats a row), to a parent that hides rows (an always-filter, or an `exists_with` of
    its own), listed once; and no chain of them comes back to where it started."""
    relations = {fold(k): v for k, v in c.relations.items()}
    datasets = {fold(k): v for k, v in c.datasets.items()}
    parents: dict[str, list[str]] = {}
    for dname, d in c.datasets.items():
        seen: set[str] = set()
        for i, name in enumerate(d.exists_with):
            path = ("datasets", dname, "exists_with", i)
            own = sorted(r.name for r in c.relations.values() if fold(r.from_) == fold(dname) and r.cardinality in TO_ONE)
            rel = relations.get(fold(name))
            if rel is None:
                raise ContractError(
                    where.at(path, f"'{name}' is not a relation of this contract"),
                    hint=f"to-one relations from {dname}: {', '.join(own)}" if own else f"declare a many_to_one relation from {dname} to its parent",
                )
            if fold(rel.name) in seen:
                raise ContractError(where.at(path, f"relation '{rel.name}' is listed twice"))
            seen.add(fold(rel.name))
            if fold(rel.from_) != fold(dname):
                raise ContractError(
                    where.at(path, f"relation '{rel.name}' starts at {rel.from_}, not at {dname}"),
                    hint=f"to-one relations from {dname}: {', '.join(own)}" if own else f"declare a many_to_one relation from {dname} to its parent",
                )
            if rel.cardinality not in TO_ONE:
                raise ContractError(
                    where.at(path, f"relation '{rel.name}' is {rel.cardinality}: joining {rel.to} could repeat {dname} rows"),
                    hint="exists_with follows many_to_one or one_to_one relations (each row has at most one parent)",
                )
            parent = datasets[fold(rel.to)]
            if not parent.always_filter and not parent.exists_with:
                raise ContractError(
                    where.at(path, f"relation '{rel.name}' leads to {parent.name}, which hides no rows "
                                   "(it has no always_filter and no exists_with)"),
                    hint=f"give {parent.name} an always_filter, or drop '{rel.name}' from exists_with",
                )
            parents.setdefault(fold(dname), []).append(fold(parent.name))
    _check_no_cycle(c, parents, where)


def _check_no_cycle(c: Contract, parents: dict[str, list[str]], where: _Locator) -> None:
    """Depth-first over dataset -> parents, iteratively; a dataset met again on the current path is a cycle."""
    names = {fold(k): k for k in c.datasets}
    done: set[str] = set()
    for start in names:
        if start in done:
            continue
        path: list[str] = []
        stack: list[tuple[str, int]] = [(start, 0)]
        while stack:
            node, i = stack.pop()
            if i == 0:
                path.append(node)
            nxt = parents.get(node, [])
            if i < len(nxt):
                stack.append((node, i + 1))
                child = nxt[i]
                if child in path:
                    cycle = path[path.index(child):] + [child]
                    first = names[cycle[0]]
                    raise ContractError(
                        where.at(("datasets", first, "exists_with"),
                                 "exists_with makes a cycle: " + " -> ".join(names[n] for n in cycle)),
                        hint="each chain of exists_with must end at parents that hide rows with an always_filter",
                    )
                if child not in done:
                    stack.append((child, 0))
            else:
                path.pop()
                done.add(node)


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
