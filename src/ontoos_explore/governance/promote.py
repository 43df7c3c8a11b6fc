"""Governance, promotion: a recurring fingerprint -> a pending named query in the registry.

The explorations recorded under the fingerprint are compiled again (as the
role that ran them); the newest gives the SQL, every one gives observed
parameter values. Each literal the caller wrote becomes a named, typed
parameter (named after its column, with the observed range as examples);
the contract's always-filter values stay bound as constants. The entry must
pass the guard before it is written, with status `pending` until a reviewer
approves it. The registry file is read and written only through its
`store.RegistryStore`.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import psycopg

from ..compiler import CompiledQuery, json_value
from ..contract import Contract
from ..errors import Codes, ExploreError, InputError
from ..names import fold, is_identifier
from ..pipeline import compile_exploration
from .registry import NamedQuery, verify
from .store import RegistryFileError, RegistryStore

log = logging.getLogger("ontoos_explore.registry")


def load_uses(conn: psycopg.Connection, fingerprint: str) -> list[tuple[str, str]]:
    """(exploration text, role) of the successful uses, newest first."""
    return conn.execute(
        "SELECT exploration, role FROM ontoos_audit.events WHERE fingerprint = %s AND outcome = 'ok' "
        "AND exploration IS NOT NULL ORDER BY at DESC LIMIT 500", [fingerprint]).fetchall()


def _param_names(q: CompiledQuery) -> list[str | None]:
    names: list[str | None] = []
    seen: dict[str, int] = {}
    for slot in q.slots:
        if not slot.caller:
            names.append(None)
            continue
        base = slot.column.replace(".", "_")
        seen[base] = seen.get(base, 0) + 1
        names.append(base if seen[base] == 1 else f"{base}_{seen[base]}")
    return names


def _examples(values: list[Any]) -> tuple[Any, ...]:
    """The observed range, compared as the typed values (numbers by value, not as text)."""
    present = [v for v in values if v is not None]
    if not present:
        return ()
    try:
        low, high = min(present), max(present)
    except TypeError:
        return (json_value(present[0]),)
    return (json_value(low),) if low == high else (json_value(low), json_value(high))


def build_entry(uses: list[tuple[str, str]], contract: Contract, ident: str, title: str,
                description: str = "", fingerprint: str = "") -> NamedQuery:
    compiled = []
    for text, role in uses:
        try:
            q = compile_exploration(text, contract, role)
        except ExploreError:
            continue  # the contract may have changed since; those uses no longer count
        if q.fingerprint == fingerprint or not fingerprint:
            compiled.append(q)
    if not compiled:
        raise InputError(Codes.UNKNOWN_QUERY, f"no successful exploration with fingerprint {fingerprint} compiles today",
                         hint="ontoos audit lists the recurring fingerprints and the candidates")
    newest = compiled[0]
    names = _param_names(newest)
    contract_col = {}
    for q in compiled:
        for i, (slot, name) in enumerate(zip(q.slots, names)):
            if name is not None:
                contract_col.setdefault(name, []).append(q.params[i])
    parameters, bind = [], []
    datasets = {fold(d) for d in newest.datasets}
    for i, (slot, name) in enumerate(zip(newest.slots, names)):
        if name is None:
            bind.append({"value": json_value(newest.params[i]), "type": slot.type})
            continue
        rel, _, col = slot.column.rpartition(".")
        values = _enum_values(contract, newest, rel, col)
        parameters.append({"name": name, "type": slot.type, "description": f"value compared with {slot.column}",
                           "examples": list(_examples(contract_col[name])), **({"values": list(values)} if values else {})})
        bind.append(name)
    read_sets = sorted(s for s, members in contract.read_sets.items() if datasets & {fold(m) for m in members})
    entry = NamedQuery.model_validate({
        "id": ident, "title": title,
        "description": description or f"Promoted from: {newest.shape}",
        "status": "pending", "read_sets": read_sets, "parameters": parameters, "sql": newest.sql, "bind": bind,
        "columns": list(newest.columns), "max_rows": newest.limit, "timeout_ms": newest.plan.timeout_ms,
        "notes": [n for n in newest.notes if not n.startswith("limit ")], "origin_fingerprint": fingerprint or None,
    })
    return verify(entry, contract)  # the guard must accept it before it is written


def _enum_values(contract: Contract, q: CompiledQuery, relation: str, column: str) -> tuple[str, ...] | None:
    dataset = q.datasets[0] if not relation else q.datasets[list(q.relations).index(relation) + 1]
    col = contract.dataset(dataset).column(column)
    return col.values if col is not None else None


def _store(registry: RegistryStore | Path | str | None) -> RegistryStore:
    return registry if isinstance(registry, RegistryStore) else RegistryStore(registry)


def write_entry(registry: RegistryStore | Path, entry: NamedQuery) -> None:
    """Add the entry to the registry file (refused if its id is there already)."""
    _store(registry).add(entry.model_dump(mode="json", exclude_none=True))


def promote(conn: psycopg.Connection, contract: Contract, registry: RegistryStore | Path, fingerprint: str, ident: str,
            title: str, description: str = "") -> NamedQuery:
    if not is_identifier(ident):
        raise InputError(Codes.INVALID_NAME, "the id must be an identifier", hint="e.g. workloads_by_namespace")
    entry = build_entry(load_uses(conn, fingerprint), contract, ident, title, description, fingerprint)
    write_entry(registry, entry)
    return entry


def set_status(registry: RegistryStore | Path, ident: str, status: str) -> None:
    _store(registry).set_status(ident, status)


def promoted_fingerprints(registry: RegistryStore | Path | None) -> frozenset[str]:
    """Origin fingerprints already in the registry (pending or approved). For the reports only, so a
    registry file that cannot be read is logged and counts as none (writing to it is refused)."""
    try:
        return _store(registry).origin_fingerprints()
    except RegistryFileError as e:
        log.warning("%s", e.message)
        return frozenset()
