"""Governance, named queries: registry YAML -> verified NamedQuery entries -> runs.

Every entry's SQL is verified by the guard when the registry loads (against
its read sets and row budget); a broken entry is reported and skipped, never
fatal. Only `approved` entries run, and only for roles that may read every
dataset the SQL touches (and, when it names them, only for its `auth.roles`);
for anyone else an entry does not exist.

Entries are written in the authors' format (`authoring.py`: `version: 1`,
`:name` placeholders, `params`, `constants`, `budget`, `auth`), which loads
into the record below, the service's own shape (still accepted as it is):

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

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ..compiler import CompiledQuery, ParamSlot
from ..contract import Contract
from ..errors import Codes, InputError, InternalError
from ..names import did_you_mean, fold
from ..plan import Plan
from ..policy.named import bind_named, plan_named, verify_named
from ..policy.named_paging import with_offset
from ..require import Require
from ..service import Answer, Explorer
from ..types import ColumnType
from .authoring import normalize

log = logging.getLogger("ontoos_explore.registry")

JSON_TYPES = {"text": "string", "enum": "string", "integer": "integer", "numeric": "number",
              "boolean": "boolean", "date": "string", "timestamp": "string"}


class Parameter(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")  # a.b: nested in object a
    type: ColumnType
    description: str = ""
    required: bool = True
    values: tuple[str, ...] | None = None
    default: Any = None  # bound when the caller leaves the parameter out
    examples: tuple[Any, ...] = ()

    @model_validator(mode="after")
    def _enum_has_values(self) -> "Parameter":
        if self.type == "enum" and not self.values:
            raise ValueError(f"parameter {self.name} is an enum without values")
        return self

    def json_schema(self) -> dict[str, Any]:
        schema: dict[str, Any] = {"type": JSON_TYPES[self.type]}
        if self.description:
            schema["description"] = self.description
        if self.values:
            schema["enum"] = list(self.values)
        if self.default is not None:
            schema["default"] = self.default
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
    status: Literal["pending", "approved", "retired", "rejected"] = "pending"  # only approved ones run
    read_sets: tuple[str, ...]
    parameters: tuple[Parameter, ...] = ()
    sql: str
    bind: tuple[str | Constant, ...] = ()  # $1..$n: a parameter name, or a constant
    columns: tuple[str, ...]
    max_rows: int = Field(100, ge=1)
    timeout_ms: int | None = Field(None, ge=1)
    notes: tuple[str, ...] = ()
    # what its authors say of it: the service shows these and acts on none but `roles`
    domain: str | None = None  # product | architecture | rnd-commit | ops | fault | incident
    scenarios: tuple[str, ...] = ()
    risk: Literal["read"] = "read"  # the service runs reads only
    roles: tuple[str, ...] | None = None  # auth.roles: only these roles may run it (and only if they may read it)
    heavy: bool = False
    inventory: dict[str, Any] | None = None
    related: tuple[Any, ...] = ()
    supersedes: dict[str, Any] | None = None
    origin_fingerprint: str | None = None
    promoted_by: str | None = None  # the principal who promoted it (the dashboard), or "cli:<user>"
    approved_by: str | None = None  # the principal who approved it on the dashboard
    # when each of those happened (ISO 8601, UTC), and who retired an approved one or rejected a pending one
    promoted_at: str | None = None
    approved_at: str | None = None
    retired_by: str | None = None
    retired_at: str | None = None
    rejected_by: str | None = None
    rejected_at: str | None = None
    datasets: tuple[str, ...] = Field((), exclude=True)  # filled from the guard's verdict
    # per output column, the (dataset, column) pairs it reads: from the guard's verdict, for masking
    sources: tuple[tuple[tuple[str, str], ...], ...] = Field((), exclude=True)
    touches: frozenset[tuple[str, str, str]] = Field(frozenset(), exclude=True)  # (schema, table, column) read
    pageable: bool = Field(False, exclude=True)  # its ORDER BY makes the order total: a truncated answer pages

    @property
    def reads(self) -> frozenset[tuple[str, str]]:
        """The (dataset, column) pairs its output reads."""
        return frozenset(pair for item in self.sources for pair in item)

    def params_schema(self) -> dict[str, Any]:
        """The JSON Schema of its parameters: a dotted name (`window.from`) is a property of an object
        property (`window`), built recursively; an object is required when any of its members is."""
        return object_schema([(p.name.split("."), p) for p in self.parameters])

    def about(self) -> dict[str, Any]:
        """What its authors say of it that the service only shows."""
        out = {"domain": self.domain, "scenarios": list(self.scenarios), "roles": list(self.roles or ()) or None,
               "heavy": self.heavy or None, "inventory": self.inventory, "related": list(self.related),
               "supersedes": self.supersedes}
        return {k: v for k, v in out.items() if v}

    def describe(self) -> dict[str, Any]:
        return {"id": self.id, "title": self.title, "description": self.description,
                "parameters": self.params_schema(), "columns": list(self.columns), "max_rows": self.max_rows,
                "notes": list(self.notes), **self.about()}


def matching(queries: list[NamedQuery], domain: str | None = None, words: str | None = None) -> list[NamedQuery]:
    """The queries of `domain` (any, when None) whose text holds every word of `words`, case-insensitively:
    id, title, description, notes, scenarios and domain (what `ontoos queries list -q` and
    ontoos_queries' `q` search)."""
    wanted = [fold(w) for w in (words or "").split()]
    out = []
    for q in queries:
        if domain is not None and fold(q.domain or "") != fold(domain):
            continue
        text = fold(" ".join([q.id, q.id.replace("_", " "), q.title, q.description, *q.notes, *q.scenarios,
                              q.domain or ""]))
        if all(w in text for w in wanted):
            out.append(q)
    return out


def object_schema(members: list[tuple[list[str], Parameter]]) -> dict[str, Any]:
    """An object schema from (path, parameter) records: a one-part path is a property, a longer one a
    member of the object property named by its first part."""
    properties: dict[str, Any] = {}
    required: list[str] = []
    nested: dict[str, list[tuple[list[str], Parameter]]] = {}
    for path, p in members:
        if len(path) == 1:
            properties[path[0]] = p.json_schema()
            if p.required:
                required.append(path[0])
        else:
            if path[0] not in nested:
                properties[path[0]] = None  # its place in the order
            nested.setdefault(path[0], []).append((path[1:], p))
    for name, inner in nested.items():
        properties[name] = object_schema(inner)
        if properties[name]["required"]:
            required.append(name)
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


class Registry:
    """The verified entries of one reading of the registry file, against one contract. Nothing of it changes
    (a changed file is a new Registry), so what a call works out from an entry and a role alone, which
    entries the role may run and the plan it runs one with, is worked out once per role (a named query's
    call: 90 -> 27 us in a loop; an exploration asked again costs 4). The parameters are bound per call."""

    def __init__(self, contract: Contract, entries: dict[str, NamedQuery], problems: list[tuple[str, str]]):
        self.contract = contract
        self.entries = entries
        self.problems = problems
        self._runnable: dict[tuple[str, tuple[str, ...]], dict[str, NamedQuery]] = {}  # (role, statuses) -> id -> entry
        self._plans: dict[tuple[str, str], tuple[Plan, tuple[ParamSlot, ...]]] = {}  # (id, role) -> plan, slots

    @classmethod
    def load(cls, source: Any, contract: Contract) -> "Registry":
        """The entries of the registry file (`source`: a `store.RegistryStore`, a path or None), read
        through its store and each verified; a missing file (or None) is an empty registry, one that
        cannot be read a `store.RegistryFileError`."""
        from .store import RegistryStore, default_status

        store = source if isinstance(source, RegistryStore) else RegistryStore(source)
        entries: dict[str, NamedQuery] = {}
        problems: list[tuple[str, str]] = []
        data, _ = store.read()
        status = default_status(data)
        for i, item in enumerate(data.get("queries") or []):
            ident = item.get("id", f"#{i}") if isinstance(item, dict) else f"#{i}"
            try:
                if not isinstance(item, dict):
                    raise ValueError(f"an entry is a mapping, not a {type(item).__name__}")
                entry = NamedQuery.model_validate(normalize(item, status))
                entries[fold(entry.id)] = verify(entry, contract)
            except ValidationError as e:
                first = e.errors()[0]
                where = ".".join(str(part) for part in first["loc"])
                problems.append((str(ident), f"{where}: {first['msg']}" if where else first["msg"]))
                log.warning("named query %s skipped: %s", ident, problems[-1][1])
            except ValueError as e:
                problems.append((str(ident), str(e).splitlines()[0] if str(e) else type(e).__name__))
                log.warning("named query %s skipped: %s", ident, problems[-1][1])
        return cls(contract, entries, problems)

    def visible(self, role_name: str, statuses: tuple[str, ...] = ("approved",)) -> list[NamedQuery]:
        """The entries (approved ones, unless `statuses` says otherwise) whose datasets the role may read."""
        role = self.contract.role(role_name)
        scope = self.contract.scope(role)
        return [q for q in self.entries.values()
                if q.status in statuses and all(fold(d) in scope for d in q.datasets)
                and (q.roles is None or fold(role.name) in {fold(r) for r in q.roles})]

    def entry(self, role_name: str, ident: Any, statuses: tuple[str, ...] = ("approved",)) -> NamedQuery:
        """The named query of this id the role may run; InputError UNKNOWN_QUERY (with did-you-mean among
        those it may run) otherwise: one it may not run is refused as one that does not exist."""
        visible = self._runnable.get((role_name, statuses))
        if visible is None:
            visible = self._runnable[(role_name, statuses)] = {fold(q.id): q for q in self.visible(role_name, statuses)}
        entry = visible.get(fold(ident)) if isinstance(ident, str) else None
        if entry is None:
            hint, _ = did_you_mean(str(ident), [q.id for q in visible.values()], "named queries you may run")
            raise InputError(Codes.UNKNOWN_QUERY, f"'{str(ident)[:60]}' is not a named query you may run", hint=hint)
        return entry

    async def run(self, explorer: Explorer, role_name: str, ident: Any, params: Any,
                  require: Require | None = None) -> Answer:
        return await explorer.run_compiled(self.compiled(role_name, ident, params), require)

    def compiled(self, role_name: str, ident: Any, params: Any,
                 statuses: tuple[str, ...] = ("approved",), offset: int = 0) -> CompiledQuery:
        """A named query the role may run, with its parameters bound, as the executor runs it; `offset`:
        the rows before this page (`pages.run_named` passes it, for an entry that pages)."""
        entry = self.entry(role_name, ident, statuses)
        role = self.contract.role(role_name)
        values = bind_named(entry, params if params is not None else {}, role)
        found = self._plans.get((entry.id, role_name))
        if found is None:
            slots = tuple(ParamSlot(b, "", True) if isinstance(b, str) else ParamSlot("", b.type, False) for b in entry.bind)
            found = self._plans[(entry.id, role_name)] = (plan_named(entry, self.contract, role), slots)
        plan, slots = found
        q = CompiledQuery(
            sql=page_sql(entry, offset, self.contract) if offset else entry.sql, params=tuple(values),
            slots=slots,
            fingerprint=f"named:{entry.id}", shape=f"named query {entry.id}", normalized=f"named query {entry.id}",
            columns=entry.columns, datasets=entry.datasets, relations=(), limit=plan.max_rows, notes=entry.notes,
            plan=plan, contract_hash=self.contract.hash, reads=entry.reads, touches=entry.touches,
            pageable=entry.pageable, offset=offset,
        )
        return q


def verify(entry: NamedQuery, contract: Contract) -> NamedQuery:
    """The policy's check of an entry (`policy.named.verify_named`: the guard, then the contract's
    column rules); raises a ValueError naming the first problem."""
    unknown = [r for r in entry.roles or () if contract.role(r) is None]
    if unknown:
        raise ValueError(f"auth names role '{unknown[0]}', which the contract does not have")
    v = verify_named(entry, contract)
    return entry.model_copy(update={"datasets": v.datasets, "sources": v.sources, "touches": v.touches,
                                    "pageable": v.pageable})


def page_sql(entry: NamedQuery, offset: int, contract: Contract) -> str:
    """The SQL of the entry's page `offset` rows on (`named_paging.with_offset`), verified again as the
    entry was: new text runs only once the guard and the contract's rules accept it, reading what the
    entry reads."""
    sql = with_offset(entry.sql, offset)
    try:
        v = verify_named(entry.model_copy(update={"sql": sql}), contract)
    except ValueError:
        v = None
    if v is None or (v.datasets, v.sources, v.touches) != (entry.datasets, entry.sources, entry.touches):
        log.error("named query %s: its page SQL at offset %d does not verify as the entry does", entry.id, offset)
        raise InternalError(reason="PAGE_NOT_VERIFIED")
    return sql
