"""Drift, the comparison: the contract + what the database catalog has -> `Drift` (findings, and what is degraded).

    drift = compare(contract, catalog, prefix="ontoos_q_", query_roles=True)
    drift.findings        # every difference, each with its place in the contract
    drift.dataset("workloads"), drift.column("workloads", "replicas")   # None, or why it is unavailable

What is compared, for every dataset: its table or view exists; each column
exists with a type the contract's type can be read from (`ACCEPTS`); the
join columns of its relations and the columns of its always-filters exist;
the publish log exists with its columns; and each query role can read
exactly the columns `ontoos grants` would give it, no fewer and no more.

What a finding makes unavailable (degraded), so answers refuse it clearly
instead of failing in the database:

- a dataset whose table is missing, one of whose always-filter columns is
  missing or mistyped (its rows could not be hidden), and every dataset that
  exists with a degraded parent (its rows exist only through the parent's);
- a column that is missing or mistyped;
- a relation one of whose join columns is missing or mistyped.

Grants and the publish log are reported, never degraded: a grant that is
missing fails the read in PostgreSQL (the third wall), and a publish log
that is missing leaves the evidence unknown.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

from ..contract import PUBLISH_LOG_COLUMNS, Contract
from ..names import fold
from .catalog import Catalog

# What each contract type can be read from: PostgreSQL type categories (pg_type.typcategory), and for
# some the exact types. S string, N numeric, B boolean, D date/time, E enum, U user-defined.
ACCEPTS: dict[str, tuple[frozenset[str], frozenset[str]]] = {  # contract type -> (categories, or these types)
    "text": (frozenset("S"), frozenset()),
    "enum": (frozenset("SE"), frozenset()),
    "integer": (frozenset(), frozenset({"smallint", "integer", "bigint"})),
    "numeric": (frozenset("N"), frozenset()),
    "boolean": (frozenset("B"), frozenset()),
    "date": (frozenset(), frozenset({"date"})),
    "timestamp": (frozenset(), frozenset({"timestamp without time zone", "timestamp with time zone"})),
}
# Why a dataset is unavailable when the rows it may show cannot be decided: one reason for every cause (an
# always-filter column, or a parent it exists with, perhaps outside the caller's read sets), so the
# reason says nothing of how its rows are hidden.
ROWS_UNDECIDED = "which of its rows may be shown cannot be decided"
LOG_TYPES = {"source": "text", "batch_id": "text", "collected_at": "timestamp", "published_at": "timestamp",
             "as_of": "timestamp"}


@dataclass(frozen=True, slots=True)
class Finding:
    """One difference between the contract and the database."""

    kind: str  # missing_table, missing_column, type_mismatch, publish_log, missing_role, grant_missing, grant_extra
    place: tuple[str, ...]  # where in the contract, e.g. ("datasets", "workloads", "columns", "replicas")
    message: str
    where: str = ""  # file:line of `place`, when the contract was loaded from a file

    def to_json(self) -> dict[str, str]:
        return {"kind": self.kind, "place": ".".join(self.place), "where": self.where, "message": self.message}


@dataclass(frozen=True)
class Drift:
    """The comparison's outcome. Keys are folded contract names; values say why each is unavailable."""

    findings: tuple[Finding, ...] = ()
    datasets: dict[str, str] = field(default_factory=dict)
    columns: dict[tuple[str, str], str] = field(default_factory=dict)
    relations: dict[str, str] = field(default_factory=dict)
    checked_at: dt.datetime | None = None  # None: not compared (the database could not be reached)
    error: str | None = None  # why it could not be compared

    @property
    def drifted(self) -> bool:
        return bool(self.findings)

    def dataset(self, name: str) -> str | None:
        return self.datasets.get(fold(name))

    def column(self, dataset: str, column: str) -> str | None:
        return self.columns.get((fold(dataset), fold(column)))

    def relation(self, name: str) -> str | None:
        return self.relations.get(fold(name))

    def summary(self) -> str:
        """One line: what the comparison found."""
        if self.checked_at is None:
            return f"drift: not checked ({self.error or 'the database could not be reached'})"
        if not self.findings:
            return "drift: none (the database has every table, column, type and grant the contract names)"
        parts = [f"{len(self.datasets)} dataset(s)", f"{len(self.columns)} column(s)",
                 f"{len(self.relations)} relation(s) degraded"]
        kinds: dict[str, int] = {}
        for f in self.findings:
            kinds[f.kind] = kinds.get(f.kind, 0) + 1
        found = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
        return f"drift: {len(self.findings)} finding(s) ({found}); " + ", ".join(parts) + "; ontoos doctor lists them"

    def counts(self) -> dict[str, int]:
        """What may be shown to anyone (/readyz): how much, never which."""
        return {"findings": len(self.findings), "degraded_datasets": len(self.datasets),
                "degraded_columns": len(self.columns), "degraded_relations": len(self.relations)}


def _reads_as(kind: str, found: tuple[str, str]) -> bool:
    type_name, category = found
    categories, types = ACCEPTS[kind]
    return category in categories or type_name in types


def compare(contract: Contract, catalog: Catalog, *, prefix: str, query_roles: bool,
            expected_grants: dict[str, dict[tuple[str, str], frozenset[str]]] | None = None) -> Drift:
    """The contract against `catalog`; `expected_grants` (database role -> (schema, table) -> columns,
    `engine.grants.expected`) is compared when `query_roles` is on."""
    findings: list[Finding] = []
    datasets: dict[str, str] = {}
    columns: dict[tuple[str, str], str] = {}
    relations: dict[str, str] = {}

    def find(kind: str, place: tuple[str, ...], message: str) -> None:
        findings.append(Finding(kind, place, message, contract.where(place)))

    for ds in contract.datasets.values():
        table = catalog.table(ds.schema_name, ds.table_name)
        if table is None:
            find("missing_table", ("datasets", ds.name, "relation"), f"{ds.relation} does not exist")
            datasets[fold(ds.name)] = "its table does not exist in the database"
            continue
        for col in ds.columns.values():
            found = table.get(col.name)
            place = ("datasets", ds.name, "columns", col.name)
            if found is None:
                find("missing_column", place, f"{ds.relation}.{col.name} does not exist")
                columns[(fold(ds.name), fold(col.name))] = "the column does not exist in the database"
            elif not _reads_as(col.type, found):
                find("type_mismatch", place, f"{ds.relation}.{col.name} is {found[0]}, not {col.type}")
                # the caller is told what the contract says, never the database's type name (it may be
                # schema-qualified: a domain's)
                columns[(fold(ds.name), fold(col.name))] = f"its type in the database no longer reads as {col.type}"
    for ds in contract.datasets.values():
        if any((fold(ds.name), fold(rule.column)) in columns for rule in ds.always_filter):
            datasets.setdefault(fold(ds.name), ROWS_UNDECIDED)
    for rel in contract.relations.values():
        if any((fold(rel.from_), fold(a)) in columns or (fold(rel.to), fold(b)) in columns for a, b in rel.join.items()):
            relations[fold(rel.name)] = "a column it joins on is unavailable"
    _degrade_children(contract, datasets, relations)
    for rel in contract.relations.values():  # after the fixed point: a child degraded by its parent too
        if fold(rel.from_) in datasets or fold(rel.to) in datasets:
            relations.setdefault(fold(rel.name), "a dataset it joins is unavailable")
    _compare_log(contract, catalog, find)
    if query_roles and expected_grants is not None:
        _compare_grants(contract, catalog, prefix, expected_grants, find)
    return Drift(tuple(findings), datasets, columns, relations, checked_at=dt.datetime.now(dt.timezone.utc))


def _degrade_children(contract: Contract, datasets: dict[str, str], relations: dict[str, str]) -> None:
    """A dataset whose rows exist only with a parent's is unavailable when that parent, or the relation to
    it, is; to a fixed point, so a grandchild follows."""
    changed = True
    while changed:
        changed = False
        for ds in contract.datasets.values():
            if fold(ds.name) in datasets:
                continue
            for rel in contract.parents_of(ds.name):
                if fold(rel.to) in datasets or fold(rel.name) in relations:
                    datasets[fold(ds.name)] = ROWS_UNDECIDED
                    changed = True
                    break


def _compare_log(contract: Contract, catalog: Catalog, find) -> None:
    log = contract.evidence
    if log is None:
        return
    table = catalog.table(log.schema_name, log.table_name)
    if table is None:
        find("publish_log", ("evidence", "publish_log"),
             f"{log.publish_log} does not exist: answers say their freshness is unknown")
        return
    for name in PUBLISH_LOG_COLUMNS:
        found = table.get(name)
        if found is None or not _reads_as(LOG_TYPES[name], found):
            what = "does not exist" if found is None else f"is {found[0]}, not {LOG_TYPES[name]}"
            find("publish_log", ("evidence", "publish_log"),
                 f"{log.publish_log}.{name} {what}: answers say their freshness is unknown")


def _compare_grants(contract: Contract, catalog: Catalog, prefix: str,
                    expected: dict[str, dict[tuple[str, str], frozenset[str]]], find) -> None:
    for role in contract.roles.values():
        db_role = f"{prefix}{role.name}"
        place = ("roles", role.name)
        if db_role not in catalog.roles:
            find("missing_role", place, f"the database has no role {db_role}: run ontoos grants --apply")
            continue
        if catalog.members is not None and db_role not in catalog.members:
            find("grant_missing", place, f"the login user cannot SET ROLE {db_role}: run ontoos grants --apply")
        if catalog.usage is not None:
            unusable = sorted({s for s, _ in expected.get(db_role, {})} - catalog.usage.get(db_role, frozenset()))
            if unusable:
                find("grant_missing", place, f"{db_role} has no USAGE on schema {', '.join(unusable)}: "
                                             "run ontoos grants --apply")
        want = expected.get(db_role, {})
        have = catalog.grants.get(db_role, {})
        for key in sorted(set(want) | set(have)):
            if catalog.table(*key) is None:
                continue  # a missing table is its own finding
            present = frozenset(c for c in want.get(key, frozenset()) if catalog.table(*key).get(c) is not None)
            missing = sorted(present - have.get(key, frozenset()))
            extra = sorted(have.get(key, frozenset()) - want.get(key, frozenset()))
            table = ".".join(key)
            if missing:
                find("grant_missing", place, f"{db_role} cannot read {table} ({', '.join(missing)}): "
                                             "run ontoos grants --apply")
            if extra:
                find("grant_extra", place, f"{db_role} can read {table} ({', '.join(extra)}), which the contract "
                                           "does not give it: run ontoos grants --apply")
