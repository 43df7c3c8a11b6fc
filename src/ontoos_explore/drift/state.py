"""Drift, the state a service holds: the last comparison -> refusals of what it made unavailable, and `_notice`.

    lake = LakeState(contract, min_cli_version="0.1.0")
    lake.update(await check(conn, contract, settings))
    lake.refusal(compiled)       # None, or the DEGRADED refusal naming what the query touches
    lake.notice                  # {"min_cli_version", "schema_drift", "contract_hash"}

A refusal names only what the caller already reached by name: a dataset or
relation it asked for, or a column it named. A query that would touch an
unavailable column it never named (a join or always-filter column) is
refused naming its own dataset; what is outside the caller's read sets is
refused earlier, by the binder, exactly as a name that does not exist.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..errors import Codes, ExploreError
from ..names import fold
from .compare import Drift

NOT_CHECKED = Drift(error="not checked yet")


class LakeState:
    """The service's view of the lake: the latest `Drift`, replaced whole (never changed in place)."""

    def __init__(self, contract, min_cli_version: str | None = None, drift: Drift = NOT_CHECKED) -> None:
        from .. import __version__

        self.contract = contract
        self.min_cli_version = min_cli_version or __version__
        self.update(drift)

    def update(self, drift: Drift) -> None:
        self.drift = drift
        self._physical = self._index(drift)
        # the notice of a caller not known (a surface's refusal): whether anything drifted, as /readyz says
        self.notice = {"min_cli_version": self.min_cli_version, "schema_drift": drift.drifted,
                       "contract_hash": self.contract.hash}
        self._by_role: dict[str, dict] = {}

    def notice_for(self, role_name: str | None) -> dict:
        """A role's `_notice`: `schema_drift` says whether anything it may read drifted (a dataset of its
        read sets, a column it may read, a relation between two of them), never what lies outside them."""
        name = getattr(role_name, "name", role_name)  # a Role, or its name
        role = self.contract.role(name) if isinstance(name, str) else None
        if role is None:
            return self.notice
        found = self._by_role.get(role.name)
        if found is None:
            found = self._by_role[role.name] = {**self.notice, "schema_drift": self._drifted_for(role)}
        return found

    def _drifted_for(self, role) -> bool:
        drift, scope = self.drift, self.contract.scope(role)
        if any(name in scope for name in drift.datasets):
            return True
        for ds_name, col_name in drift.columns:
            ds = self.contract.dataset(ds_name)
            col = ds.column(col_name) if ds is not None and ds_name in scope else None
            if col is not None and col.readable:
                return True
        return any((rel := self.contract.relation(name)) is not None and fold(rel.from_) in scope
                   and fold(rel.to) in scope for name in drift.relations)

    def _index(self, drift: Drift) -> frozenset[tuple[str, str, str]]:
        """(schema, table, column) of every unavailable column, to match a query's `touches`."""
        out = set()
        for ds_name, col_name in drift.columns:
            ds = self.contract.dataset(ds_name)
            col = ds.column(col_name) if ds is not None else None
            if col is not None:
                out.add((ds.schema_name, ds.table_name, col.name))
        return frozenset(out)

    def refusal(self, compiled) -> ExploreError | None:
        """The DEGRADED refusal of a compiled query (an exploration or a named query), or None."""
        drift = self.drift
        if not drift.findings:
            return None
        return self.unavailable(compiled.datasets, compiled.relations, compiled.reads, compiled.touches)

    def named_refusal(self, entry) -> str | None:
        """Why a named query is unavailable (the message of the refusal running it would get), or None."""
        if not self.drift.findings:
            return None
        e = self.unavailable(entry.datasets, (), entry.reads, entry.touches)
        return None if e is None else e.message

    def unavailable(self, datasets: Iterable[str], relations: Iterable[str] = (),
                    reads: Iterable[tuple[str, str]] = (), touches: Iterable[tuple[str, str, str]] = ()) -> ExploreError | None:
        drift = self.drift
        datasets = tuple(datasets)
        for name in datasets:
            why = drift.dataset(name)
            if why is not None:
                return degraded(f"dataset '{name}' is unavailable: {why}", "explore another dataset meanwhile; "
                                "the catalog marks it status: degraded until the lake and the contract agree again")
        for name in relations:
            why = drift.relation(name)
            if why is not None:
                return degraded(f"relation '{name}' is unavailable: {why}", "explore without following it; the "
                                "catalog marks it status: degraded")
        for ds, col in sorted(reads):
            why = drift.column(ds, col)
            if why is not None:
                return degraded(f"column '{col}' of {ds} is unavailable: {why}", f"leave it out: the other columns "
                                f"of {ds} still answer (the catalog marks it status: degraded)")
        if datasets and self._physical.intersection(touches):
            return degraded(f"dataset '{datasets[0]}' is unavailable: a column it is read with is unavailable",
                            "explore another dataset meanwhile")
        return None


def degraded(message: str, hint: str) -> ExploreError:
    return ExploreError(Codes.DEGRADED, message, hint=hint + " (operators: ontoos doctor lists what moved)",
                        reason="DRIFT")
