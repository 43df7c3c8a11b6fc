"""Governance, promotion: a recurring fingerprint -> a pending named query in the registry.

The explorations recorded under the fingerprint are compiled again (as the
role that ran them); the newest gives the SQL, every one gives observed
parameter values. Each literal the caller wrote becomes a named, typed
parameter (named after its column, with the observed range as examples);
the contract's always-filter values stay bound as constants. The entry must
pass the guard before it is written, with status `pending` until a reviewer
approves it, and records who promoted it (`promoted_by`); `approve` refuses
the same reviewer (EX504 SELF_APPROVAL) unless the server allows it. The
registry file is read and written only through its `store.RegistryStore`.

Examples are what every agent calling `ontoos_queries` reads, and they come
from other principals' literals, so an entry keeps only the examples a
reviewer saw and kept (`Examples`): by default the safe kinds (enum values,
numbers, booleans, dates and timestamps: the observed range); free text
(a `text` parameter with no declared values) only when kept on purpose (the
dashboard's promote form ticks each one; `ontoos promote
--keep-text-examples`). Each example is made presentable first
(`presentable`: control, format and line-separator characters become a
space, whitespace runs one space, at most 80 characters, a cut marked '…').
"""

from __future__ import annotations

import json
import logging
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from ..compiler import CompiledQuery, json_value
from ..contract import Contract
from ..errors import Codes, ExploreError, InputError
from ..names import fold, is_identifier
from ..pipeline import compile_exploration
from .authoring import authored
from .registry import NamedQuery, verify
from .store import UNCHANGED, RegistryFileError, RegistryStore

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


FINGERPRINT = re.compile(r"[0-9a-f]{16,64}")
MAX_EXAMPLE = 80  # characters of one example, as agents see it
MAX_TITLE = 200
SAFE_KINDS = frozenset({"enum", "integer", "numeric", "boolean", "date", "timestamp"})
_BLANKS = re.compile(r"\s+")


def presentable(value: Any) -> Any:
    """An example as agents may read it: a string with control, format, private-use and line-separator
    characters made spaces, whitespace runs one space, trimmed, at most MAX_EXAMPLE characters (a cut
    ends in '…'); None when nothing is left. Other values (numbers, booleans) as they are."""
    if not isinstance(value, str):
        return value
    text = "".join(" " if unicodedata.category(c) in ("Cc", "Cf", "Cs", "Co", "Zl", "Zp") else c for c in value)
    text = _BLANKS.sub(" ", text).strip()
    if len(text) > MAX_EXAMPLE:
        text = text[: MAX_EXAMPLE - 1].rstrip() + "…"
    return text or None


def example_key(value: Any) -> str:
    """How a kept example is named on the promote form and compared when it comes back."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def free_text(parameter: Mapping[str, Any]) -> bool:
    """A parameter whose examples are whatever callers typed (text, no declared values)."""
    return parameter.get("type") not in SAFE_KINDS and not parameter.get("values")


@dataclass(frozen=True, slots=True)
class Examples:
    """Which observed examples an entry keeps. `chosen` (the dashboard): per parameter, the
    `example_key`s the reviewer kept on the promote form, and nothing else. Without it (the CLI): the
    safe kinds, and free text only with `keep_text`."""

    keep_text: bool = False
    chosen: Mapping[str, frozenset[str]] | None = None

    def keeps(self, parameter: Mapping[str, Any], value: Any) -> bool:
        if self.chosen is not None:
            return example_key(value) in self.chosen.get(parameter["name"], frozenset())
        return self.keep_text or not free_text(parameter)


ALL_EXAMPLES = Examples(keep_text=True)  # what the promote form shows, for the reviewer to choose from


def _examples(values: list[Any]) -> tuple[Any, ...]:
    """The observed range, compared as the typed values (numbers by value, not as text), made presentable."""
    present = [v for v in values if v is not None]
    if not present:
        return ()
    try:
        low, high = min(present), max(present)
    except TypeError:
        low = high = present[0]
    shown = [presentable(json_value(v)) for v in ((low,) if low == high else (low, high))]
    return tuple(dict.fromkeys(v for v in shown if v is not None))  # two texts may read alike once cleaned


def build_entry(uses: list[tuple[str, str]], contract: Contract, ident: str, title: str,
                description: str = "", fingerprint: str = "", examples: Examples = Examples(),
                promoted_by: str | None = None) -> NamedQuery:
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
        parameter = {"name": name, "type": slot.type, "description": f"value compared with {slot.column}",
                     **({"values": list(values)} if values else {})}
        parameter["examples"] = [v for v in _examples(contract_col[name]) if examples.keeps(parameter, v)]
        parameters.append(parameter)
        bind.append(name)
    read_sets = sorted(s for s, members in contract.read_sets.items() if datasets & {fold(m) for m in members})
    entry = NamedQuery.model_validate({
        "id": ident, "title": title,
        "description": description or f"Promoted from: {newest.shape}",
        "status": "pending", "read_sets": read_sets, "parameters": parameters, "sql": newest.sql, "bind": bind,
        "columns": list(newest.columns), "max_rows": newest.limit, "timeout_ms": newest.plan.timeout_ms,
        "notes": [n for n in newest.notes if not n.startswith("limit ")], "origin_fingerprint": fingerprint or None,
        "promoted_by": promoted_by, "promoted_at": now() if promoted_by else None,
    })
    return verify(entry, contract)  # the guard must accept it before it is written


def _enum_values(contract: Contract, q: CompiledQuery, relation: str, column: str) -> tuple[str, ...] | None:
    dataset = q.datasets[0] if not relation else q.datasets[list(q.relations).index(relation) + 1]
    col = contract.dataset(dataset).column(column)
    return col.values if col is not None else None


def _store(registry: RegistryStore | Path | str | None) -> RegistryStore:
    return registry if isinstance(registry, RegistryStore) else RegistryStore(registry)


def write_entry(registry: RegistryStore | Path, entry: NamedQuery) -> None:
    """Add the entry to the registry file (refused if its id is there already), in the shape its authors
    write (`authoring.authored`: `:name` placeholders, `params`, `constants`, `budget`)."""
    _store(registry).add(authored(entry.model_dump(mode="json", exclude_none=True)))


def check_fingerprint(fingerprint: Any) -> str:
    if not isinstance(fingerprint, str) or not FINGERPRINT.fullmatch(fingerprint):
        raise InputError(Codes.INVALID_REQUEST, "the fingerprint must be 16 hex digits",
                         hint="ontoos audit (or the dashboard) lists the recurring fingerprints")
    return fingerprint


def preview(conn: psycopg.Connection, contract: Contract, fingerprint: str, ident: str, title: str) -> NamedQuery:
    """The entry promoting `fingerprint` would write, with every example a reviewer may keep
    (nothing is written): what the dashboard's promote form shows."""
    return build_entry(load_uses(conn, check_fingerprint(fingerprint)), contract, ident, title,
                       fingerprint=fingerprint, examples=ALL_EXAMPLES)


def promote(conn: psycopg.Connection, contract: Contract, registry: RegistryStore | Path, fingerprint: str, ident: str,
            title: str, description: str = "", *, examples: Examples = Examples(),
            promoted_by: str | None = None) -> NamedQuery:
    if not is_identifier(ident):
        raise InputError(Codes.INVALID_NAME, "the id must be an identifier", hint="e.g. workloads_by_namespace")
    check_fingerprint(fingerprint)
    if not isinstance(title, str) or len(title) > MAX_TITLE:
        raise InputError(Codes.INVALID_REQUEST, f"the title must be at most {MAX_TITLE} characters",
                         hint="a short name for agents, e.g. Workloads of a namespace")
    entry = build_entry(load_uses(conn, fingerprint), contract, ident, title, description, fingerprint, examples,
                        promoted_by)
    write_entry(registry, entry)
    return entry


def approve(registry: RegistryStore | Path, ident: str, by: str, *, allow_self: bool = False) -> dict[str, Any]:
    """Approve the pending entry `ident` as principal `by` (recorded as `approved_by`, `approved_at`);
    refused (EX504 SELF_APPROVAL) when `by` promoted it, unless `allow_self`, and refused for a retired
    or rejected one; an approved one stays as it is. Checked and written under the store's
    lock, so what is checked is what is approved. Returns the entry as written."""
    from ..errors import self_approval

    def change(entry: dict[str, Any]) -> Any:
        status = entry.get("status", "pending")
        if status == "approved":
            return UNCHANGED  # approved already (a form sent twice): the file as it was, its approver kept
        if status != "pending":
            raise _not(entry, ident, "pending", "only a pending query is approved")
        if not allow_self and fold(str(entry.get("promoted_by") or "")) == fold(by):
            raise self_approval(str(entry.get("id", ident)), by)
        entry.update(status="approved", approved_by=by, approved_at=now())

    return _store(registry).update(ident, change)


def retire(registry: RegistryStore | Path, ident: str, by: str) -> dict[str, Any]:
    """An approved query no longer runs (status `retired`, `retired_by`, `retired_at`); it stays in the
    file, so its history and its fingerprint (never a candidate again) are kept."""
    def change(entry: dict[str, Any]) -> None:
        if entry.get("status") != "approved":
            raise _not(entry, ident, "approved", "a pending one is rejected instead")
        entry.update(status="retired", retired_by=by, retired_at=now())

    return _store(registry).update(ident, change)


def reject(registry: RegistryStore | Path, ident: str, by: str) -> dict[str, Any]:
    """A pending query is refused for good (status `rejected`): it never runs, and its fingerprint is no
    longer offered for promotion."""
    def change(entry: dict[str, Any]) -> None:
        if entry.get("status", "pending") != "pending":
            raise _not(entry, ident, "pending", "an approved one is retired instead")
        entry.update(status="rejected", rejected_by=by, rejected_at=now())

    return _store(registry).update(ident, change)


def _not(entry: dict[str, Any], ident: str, wanted: str, hint: str) -> InputError:
    name = str(entry.get("id", ident))[:60]
    return InputError(Codes.INVALID_REQUEST, f"'{name}' is {entry.get('status', 'pending')}, not {wanted}",
                      hint=f"{hint}; its page on the dashboard (or ontoos queries show) says where it stands")


def now() -> str:
    """The time of a registry change as the file records it: ISO 8601, UTC, to the second."""
    import datetime as dt

    return dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def promoted_fingerprints(registry: RegistryStore | Path | None) -> frozenset[str]:
    """Origin fingerprints already in the registry, whatever their status. For the reports only, so a
    registry file that cannot be read is logged and counts as none (writing to it is refused)."""
    try:
        return _store(registry).origin_fingerprints()
    except RegistryFileError as e:
        log.warning("%s", e.message)
        return frozenset()
