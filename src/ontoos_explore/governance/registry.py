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
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..compiler import CompiledQuery, ParamSlot
from ..contract import Contract
from ..errors import Codes, InputError
from ..names import did_you_mean, fold
from ..policy.named import bind_named, plan_named, verify_named
from ..require import Require
from ..service import Answer, Explorer
from ..types import ColumnType

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
    promoted_by: str | None = None  # the principal who promoted it (the dashboard), or "cli:<user>"
    approved_by: str | None = None  # the principal who approved it on the dashboard
    datasets: tuple[str, ...] = Field((), exclude=True)  # filled from the guard's verdict
    # per output column, the (dataset, column) pairs it reads: from the guard's verdict, for masking
    sources: tuple[tuple[tuple[str, str], ...], ...] = Field((), exclude=True)
    touches: frozenset[tuple[str, str, str]] = Field(frozenset(), exclude=True)  # (schema, table, column) read

    @property
    def reads(self) -> frozenset[tuple[str, str]]:
        """The (dataset, column) pairs its output reads."""
        return frozenset(pair for item in self.sources for pair in item)

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
    def load(cls, source: Any, contract: Contract) -> "Registry":
        """The entries of the registry file (`source`: a `store.RegistryStore`, a path or None), read
        through its store and each verified; a missing file (or None) is an empty registry, one that
        cannot be read a `store.RegistryFileError`."""
        from .store import RegistryStore

        store = source if isinstance(source, RegistryStore) else RegistryStore(source)
        entries: dict[str, NamedQuery] = {}
        problems: list[tuple[str, str]] = []
        for i, item in enumerate(store.entries()):
            ident = item.get("id", f"#{i}") if isinstance(item, dict) else f"#{i}"
            try:
                entry = NamedQuery.model_validate(item)
                entries[fold(entry.id)] = verify(entry, contract)
            except (ValidationError, ValueError) as e:
                problems.append((str(ident), str(e).splitlines()[0] if str(e) else type(e).__name__))
                log.warning("named query %s skipped: %s", ident, problems[-1][1])
        return cls(contract, entries, problems)

    def visible(self, role_name: str, statuses: tuple[str, ...] = ("approved",)) -> list[NamedQuery]:
        """The entries (approved ones, unless `statuses` says otherwise) whose datasets the role may read."""
        role = self.contract.role(role_name)
        scope = self.contract.scope(role)
        return [q for q in self.entries.values()
                if q.status in statuses and all(fold(d) in scope for d in q.datasets)]

    async def run(self, explorer: Explorer, role_name: str, ident: Any, params: Any,
                  require: Require | None = None) -> Answer:
        return await explorer.run_compiled(self.compiled(role_name, ident, params), require)

    def compiled(self, role_name: str, ident: Any, params: Any,
                 statuses: tuple[str, ...] = ("approved",)) -> CompiledQuery:
        """A named query the role may run, with its parameters bound, as the executor runs it."""
        visible = {fold(q.id): q for q in self.visible(role_name, statuses)}
        entry = visible.get(fold(ident)) if isinstance(ident, str) else None
        if entry is None:
            hint, _ = did_you_mean(str(ident), [q.id for q in visible.values()], "named queries you may run")
            raise InputError(Codes.UNKNOWN_QUERY, f"'{str(ident)[:60]}' is not a named query you may run", hint=hint)
        role = self.contract.role(role_name)
        values = bind_named(entry, params if params is not None else {}, role)
        plan = plan_named(entry, self.contract, role)
        q = CompiledQuery(
            sql=entry.sql, params=tuple(values),
            slots=tuple(ParamSlot(b, "", True) if isinstance(b, str) else ParamSlot("", b.type, False) for b in entry.bind),
            fingerprint=f"named:{entry.id}", shape=f"named query {entry.id}", normalized=f"named query {entry.id}",
            columns=entry.columns, datasets=entry.datasets, relations=(), limit=plan.max_rows, notes=entry.notes,
            plan=plan, contract_hash=self.contract.hash, reads=entry.reads, touches=entry.touches,
        )
        return q


def verify(entry: NamedQuery, contract: Contract) -> NamedQuery:
    """The policy's check of an entry (`policy.named.verify_named`: the guard, then the contract's
    column rules); raises a ValueError naming the first problem."""
    datasets, sources, touches = verify_named(entry, contract)
    return entry.model_copy(update={"datasets": datasets, "sources": sources, "touches": touches})
