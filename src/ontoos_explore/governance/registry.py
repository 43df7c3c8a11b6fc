"""Governance, named queries: registry YAML -> verified NamedQuery entries -> runs.

Every entry's SQL is verified by the guard when the registry loads (against
its read sets and row budget); a broken entry is reported and skipped, never
fatal. Only `approved` entries run, and only for roles that may read every
dataset the SQL touches; for anyone else an entry does not exist.

    queries:
      - id: workloads_in_namespace
        title: Workloads of a namespace
        status: approved
        read_sets: [published]
        parameters:
          - {name: namespace, type: text, description: Kubernetes namespace}
        sql: SELECT "w"."name" AS "name" FROM "lake"."k8s_workloads" AS "w" WHERE "w"."namespace" = $1 LIMIT 101
        bind: [namespace]          # $1..$n -> parameter names
        columns: [name]
        max_rows: 100
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..allowed import allowed_for_read_sets
from ..compiler import CompiledQuery, ParamSlot
from ..contract import Contract
from ..errors import BudgetError, Codes, ExploreError, InputError
from ..guard import check
from ..names import did_you_mean, fold
from ..policy.bound import Budget
from ..service import Answer, Explorer
from ..types import ColumnType, LiteralTypeError, a, convert, python_kind

log = logging.getLogger("ontoos_explore.registry")

JSON_TYPES = {"text": "string", "enum": "string", "integer": "integer", "numeric": "number",
              "boolean": "boolean", "date": "string", "timestamp": "string"}


class Parameter(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    name: str
    type: ColumnType
    description: str = ""
    required: bool = True
    values: tuple[str, ...] | None = None
    examples: tuple[Any, ...] = ()

    def json_schema(self) -> dict[str, Any]:
        schema: dict[str, Any] = {"type": JSON_TYPES[self.type]}
        if self.description:
            schema["description"] = self.description
        if self.values:
            schema["enum"] = list(self.values)
        if self.type in ("date", "timestamp"):
            schema["format"] = "date" if self.type == "date" else "date-time"
        if self.examples:
            schema["examples"] = list(self.examples)
        return schema


class Constant(BaseModel):
    """A $n bound to a fixed value (a contract always-filter kept by promotion)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    value: Any
    type: ColumnType


class NamedQuery(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    id: str
    title: str
    description: str = ""
    status: Literal["pending", "approved"] = "pending"
    read_sets: tuple[str, ...]
    parameters: tuple[Parameter, ...] = ()
    sql: str
    bind: tuple[str | Constant, ...] = ()  # $1..$n: a parameter name, or a constant
    columns: tuple[str, ...]
    max_rows: int = Field(100, ge=1)
    timeout_ms: int | None = Field(None, ge=1)
    notes: tuple[str, ...] = ()
    origin_fingerprint: str | None = None
    datasets: tuple[str, ...] = Field((), exclude=True)  # filled from the guard's verdict

    def params_schema(self) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": {p.name: p.json_schema() for p in self.parameters},
            "required": [p.name for p in self.parameters if p.required],
            "additionalProperties": False,
        }

    def describe(self) -> dict[str, Any]:
        return {"id": self.id, "title": self.title, "description": self.description,
                "parameters": self.params_schema(), "columns": list(self.columns), "max_rows": self.max_rows,
                "notes": list(self.notes)}


class Registry:
    def __init__(self, contract: Contract, entries: dict[str, NamedQuery], problems: list[tuple[str, str]]):
        self.contract = contract
        self.entries = entries
        self.problems = problems

    @classmethod
    def load(cls, path: str | Path | None, contract: Contract) -> "Registry":
        if path is None or not Path(path).exists():
            return cls(contract, {}, [])
        raw = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
        entries: dict[str, NamedQuery] = {}
        problems: list[tuple[str, str]] = []
        for i, item in enumerate(raw.get("queries") or []):
            ident = item.get("id", f"#{i}") if isinstance(item, dict) else f"#{i}"
            try:
                entry = NamedQuery.model_validate(item)
                entries[fold(entry.id)] = verify(entry, contract)
            except (ValidationError, ValueError) as e:
                problems.append((str(ident), str(e).splitlines()[0] if str(e) else type(e).__name__))
                log.warning("named query %s skipped: %s", ident, problems[-1][1])
        return cls(contract, entries, problems)

    def visible(self, role_name: str) -> list[NamedQuery]:
        role = self.contract.role(role_name)
        scope = self.contract.scope(role)
        return [q for q in self.entries.values()
                if q.status == "approved" and all(fold(d) in scope for d in q.datasets)]

    async def run(self, explorer: Explorer, role_name: str, ident: Any, params: Any) -> Answer:
        visible = {fold(q.id): q for q in self.visible(role_name)}
        entry = visible.get(fold(ident)) if isinstance(ident, str) else None
        if entry is None:
            hint, _ = did_you_mean(str(ident), [q.id for q in visible.values()], "named queries you may run")
            raise InputError(Codes.UNKNOWN_QUERY, f"'{str(ident)[:60]}' is not a named query you may run", hint=hint)
        role = self.contract.role(role_name)
        values = bind_params(entry, params if params is not None else {}, role.max_literal_length)
        limit = min(role.max_rows, entry.max_rows)
        q = CompiledQuery(
            sql=entry.sql, params=tuple(values),
            slots=tuple(ParamSlot(b, "", True) if isinstance(b, str) else ParamSlot("", b.type, False) for b in entry.bind),
            fingerprint=f"named:{entry.id}", shape=f"named query {entry.id}", normalized=f"named query {entry.id}",
            columns=entry.columns, sources=tuple(None for _ in entry.columns), datasets=entry.datasets, relations=(),
            limit=limit, notes=entry.notes,
            budget=Budget(role.name, limit, min(role.timeout_ms, entry.timeout_ms or role.timeout_ms), role.max_cost),
            contract_hash=self.contract.hash,
        )
        return await explorer.run_compiled(q)


def verify(entry: NamedQuery, contract: Contract) -> NamedQuery:
    """The guard's check of an entry; raises ValueError with every violation."""
    known = {fold(k) for k in contract.read_sets}
    missing = [s for s in entry.read_sets if fold(s) not in known]
    if missing:
        raise ValueError(f"read set '{missing[0]}' is not in the contract")
    names = {p.name for p in entry.parameters}
    unknown = sorted(b for b in entry.bind if isinstance(b, str) and b not in names)
    if unknown:
        raise ValueError(f"bind names unknown parameter '{unknown[0]}'")
    verdict = check(entry.sql, allowed_for_read_sets(contract, entry.read_sets, entry.max_rows), len(entry.bind))
    if not verdict.ok:
        raise ValueError("the guard refused its SQL: " + "; ".join(f"{v.kind}: {v.message}" for v in verdict.violations))
    by_table = {(d.schema_name, d.table_name): d for d in contract.datasets.values()}
    _check_contract_columns(verdict, by_table)
    return entry.model_copy(update={"datasets": tuple(sorted(by_table[t].name for t in verdict.relations))})


def _check_contract_columns(verdict, by_table) -> None:
    """Columns the contract hides may only filter and join, and every always-filter must be there.

    The guard allows join and always-filter columns (the compiler needs them);
    a hand-written query could select them, or leave the always-filter out
    and read the rows the contract hides."""
    for clause, schema, table, column in sorted(verdict.placed):
        col = by_table[(schema, table)].column(column)
        if not col.readable and clause not in ("whereClause", "fromClause"):
            raise ValueError(f"{schema}.{table}.{column} is not readable: it may only filter or join, not appear in {clause}")
    filtered = {(s, t, c) for clause, s, t, c in verdict.placed if clause == "whereClause"}
    for key in sorted(verdict.relations):
        ds = by_table[key]
        for rule in ds.always_filter:
            if (*key, ds.column(rule.column).name) not in filtered:
                raise ValueError(f"it reads {ds.name} without the contract's always-filter on {rule.column}")


def _signature(entry: NamedQuery) -> str:
    return ", ".join(f"{p.name}: {p.type}{'' if p.required else ' (optional)'}" for p in entry.parameters) or "none"


def bind_params(entry: NamedQuery, params: Any, max_literal: int | None = None) -> list[Any]:
    """The caller's parameters, checked and converted as the binder converts literals;
    text values are held to the role's `max_literal_length`, like literals."""
    if not isinstance(params, dict):
        raise InputError(Codes.INVALID_REQUEST, "params must be an object",
                         hint=f'e.g. {{"name": value}}; parameters of {entry.id}: {_signature(entry)}')
    declared = {p.name: p for p in entry.parameters}
    unknown = [k for k in params if k not in declared]
    if unknown:
        hint, _ = did_you_mean(str(unknown[0]), declared, f"parameters of {entry.id}")
        raise InputError(Codes.INVALID_REQUEST, f"{entry.id} has no parameter '{str(unknown[0])[:40]}'", hint=hint)
    values = {}
    for p in entry.parameters:
        if p.name not in params:
            if p.required:
                raise InputError(Codes.INVALID_REQUEST, f"parameter '{p.name}' is required",
                                 hint=f"{p.name}: {p.type}" + (f", e.g. {p.examples[0]!r}" if p.examples else ""))
            values[p.name] = None
            continue
        try:
            kind, v = python_kind(params[p.name])
            values[p.name] = convert(kind, v, p.type, p.values)
        except (ValueError, LiteralTypeError) as e:
            raise ExploreError(Codes.TYPE_MISMATCH, f"parameter '{p.name}': {getattr(e, 'message', e)}",
                               hint=getattr(e, "hint", f"{a(p.type)} value")) from None
        if max_literal is not None and kind == "string" and len(v) > max_literal:
            raise BudgetError(Codes.LITERAL_TOO_LONG, f"parameter '{p.name}' is {len(v)} characters long",
                              hint=f"values of at most {max_literal} characters are allowed for this role")
    out = []
    for b in entry.bind:
        if isinstance(b, Constant):
            kind, v = python_kind(b.value)
            out.append(convert(kind, v, b.type))
        else:
            out.append(values[b])
    return out
