"""Server, the tools: what agents and scripts may call, as data, and one handler each.

Both the MCP server and the HTTP API call `Tools.call(name, arguments,
principal)`, which answers `(ok, envelope)`: the same envelope on every
surface. Descriptions stay short; the shared guidance is `INSTRUCTIONS`.

`Tools.call` is also where every surface's calls are admitted: the caller's
rate limit is taken first (RATE_LIMITED, with `meta.retry_after_s`), the
arguments are checked as a whole (`check_json`: depth, size, NUL bytes and
unpaired surrogates) before any of them is read or echoed, and a call
cancelled half-way (the client went away) is still recorded, once.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..catalog import describe_dataset, list_datasets
from ..contract import Contract
from ..envelope import clean_text, presentable, scrub  # noqa: F401 (re-exported for the surfaces)
from ..errors import Codes, ExploreError, InputError, cancelled, no_token, rate_limited
from ..grammar.limits import check_json
from ..names import close_matches
from ..envelope import Answer, new_id
from ..service import Explorer
from .config import Principal, RateLimiter

INSTRUCTIONS = """\
Read-only exploration of an R&D-ontology lakehouse (code projects, Kubernetes workloads and containers,
images, code archives, the tables code reads and writes, databases, configs, hosts).
Workflow: ontoos_catalog to see the datasets and columns your role may read; ontoos_explore to ask
(dry_run: true first when unsure); on a refusal, read error.hint and, when present, send error.retry_with
as the next ontoos_explore arguments unchanged. Names are matched case-insensitively. Filters:
= != < <= > >=, in (...), between ... and ..., is [not] null, [not] like/ilike; strings in single quotes;
combine with and/or/not. Rows are capped by your role; meta.truncated true means more rows exist.
Prefer a named query (ontoos_queries, ontoos_run_query) when one answers the question."""


class FilterObject(BaseModel):
    model_config = ConfigDict(extra="forbid")
    field: str = Field(description="Column: name, or relation.name for a followed relation")
    op: str = Field("=", description="= != < <= > >= in, not in, between, is null, is not null, like, ilike, ...")
    value: str | int | float | bool | list[str | int | float | bool] | None = Field(
        None, description="A value; a list for in/between; absent for is null")


class ExploreInput(BaseModel):
    """The JSON form of an exploration (the README's "The language"), plus dry_run."""

    model_config = ConfigDict(extra="forbid")
    dataset: str | None = Field(None, description="Dataset to explore (see ontoos_catalog)")
    fields: list[str] | None = Field(
        None, description='Columns or aggregates, e.g. ["name", "count()", "sum(cpu_millis) as cpu", "relation.column"]')
    filter: str | list[FilterObject] | None = Field(
        None, description="A predicate, e.g. \"namespace = 'prod' and replicas > 2\", or a list of {field, op, value} (ANDed)")
    relations: list[str] | None = Field(None, description="Relations to follow (joins), from ontoos_catalog")
    group_by: list[str] | None = Field(None, description="Columns to group by; every plain field must be listed when aggregating")
    order_by: list[str] | None = Field(None, description='Order keys: a column or alias; "-name" or "name desc" for descending')
    limit: int | None = Field(None, description="Most rows to return; lowered to your role's budget with a note")
    query: str | None = Field(None, description="The whole exploration in text form instead of the keys above")
    dry_run: bool = Field(False, description="Return the plan (datasets, limit, cost estimate, notes) instead of rows")


class CatalogInput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    dataset: str | None = Field(None, description="Describe this dataset; leave out to list every readable dataset")


class RunQueryInput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str = Field(description="Named query id, from ontoos_queries")
    params: dict[str, Any] = Field(default_factory=dict, description="Parameter values by name")


class Meta(BaseModel):
    model_config = ConfigDict(extra="allow")
    exploration_id: str | None = None
    contract_hash: str | None = None


class Envelope(BaseModel):
    """A success envelope: data plus meta (rows, truncated, limit, notes, ...)."""

    model_config = ConfigDict(extra="allow")
    ok: Literal[True]
    data: dict[str, Any]
    meta: Meta


EXPLORE_ARGUMENTS = tuple(ExploreInput.model_fields)

READ_ONLY = {"read_only_hint": True, "destructive_hint": False, "idempotent_hint": True, "open_world_hint": False}

# name -> (title, description, input model); the order is the order tools are listed in.
TOOLS: dict[str, tuple[str, str, type[BaseModel]]] = {
    "ontoos_catalog": (
        "List or describe datasets",
        "List the datasets your role may read, or describe one: its readable columns (types, enum values), "
        "the relations that start there, and the limits. Start here before ontoos_explore.",
        CatalogInput,
    ),
    "ontoos_explore": (
        "Explore the lakehouse",
        "Ask a structural question: a dataset, fields (columns or aggregates), an optional filter, relations to "
        "follow, group/order/limit. Returns rows. Use ontoos_catalog first for the names; a refusal carries a hint "
        "and often retry_with, the corrected arguments. dry_run shows the plan and cost without reading rows.",
        ExploreInput,
    ),
    "ontoos_queries": (
        "List named queries",
        "List the reviewed named queries you may run, with their parameters. Prefer one when it answers the question.",
        BaseModel,
    ),
    "ontoos_run_query": (
        "Run a named query",
        "Run a reviewed named query by id with its parameters (see ontoos_queries). Same budgets and envelope as "
        "ontoos_explore.",
        RunQueryInput,
    ),
}


def input_schema(model: type[BaseModel]) -> dict[str, Any]:
    if model is BaseModel:
        return {"type": "object", "properties": {}, "additionalProperties": False}
    schema = model.model_json_schema()
    schema.setdefault("additionalProperties", False)
    return schema


def output_schema() -> dict[str, Any]:
    return Envelope.model_json_schema()


def _unknown_keys(arguments: dict[str, Any], allowed: tuple[str, ...], tool: str) -> None:
    """Refuse an unknown argument; when one name is close, retry_with is the call with it renamed."""
    unknown = [k for k in arguments if k not in allowed]
    if unknown:
        key = str(unknown[0])
        close = close_matches(key, allowed, n=1)
        retry = None
        if close and close[0] not in arguments and len(unknown) == 1:
            retry = {(close[0] if k == key else k): v for k, v in arguments.items()}
        listing = f"arguments: {', '.join(allowed)}" if allowed else f"{tool} takes no arguments"
        raise InputError(
            Codes.INVALID_REQUEST,
            f"{tool} has no argument '{key[:40]}'",
            hint=(f"did you mean '{close[0]}'? " if close else "") + listing,
            retry_with=retry,
        )


class Tools:
    def __init__(self, contract: Contract, explorer: Explorer, registry=None, audit=None) -> None:
        self.contract = contract
        self.explorer = explorer
        self.registry = registry
        self.audit = audit  # an AuditWriter, or None (no audit store configured)
        self.limiter = RateLimiter()

    def record(self, answer: Answer, principal: Principal | None, surface: str, source: Any) -> None:
        if self.audit is None:
            return
        from ..governance.audit import event_for

        try:
            event = event_for(answer, principal=principal.name if principal else None,
                              role=principal.role if principal else None, surface=surface,
                              source=source, contract=self.contract)
            # hostile text (a NUL, a lone surrogate) must not reach, and jam, the audit store's COPY
            self.audit.record(dataclasses.replace(event, **{
                f.name: clean_text(v) for f in dataclasses.fields(event)
                if isinstance(v := getattr(event, f.name), str)}))
        except Exception:  # the audit must never break an answer
            import logging

            logging.getLogger("ontoos_explore.audit").exception("could not record an event")

    def admit(self, principal: Principal | None) -> Answer | None:
        """Take one call from the principal's rate limit: None to go ahead, or the refusal."""
        if principal is None or principal.rate is None:
            return None
        wait_s = self.limiter.take(principal)
        if wait_s <= 0:
            return None
        return self._refusal(rate_limited(principal.name, principal.rate.describe(), wait_s))

    async def call(self, name: str, arguments: Any, principal: Principal | None, surface: str = "mcp", *,
                   admitted: bool = False) -> Answer:
        """One tool call on any surface: admitted (rate limit), run, recorded. `admitted`: the
        surface has already taken this call from the rate limit (REST does, before reading a body)."""
        source = arguments
        if name == "ontoos_explore" and isinstance(arguments, dict):
            source = {k: v for k, v in arguments.items() if k != "dry_run"}
        elif name != "ontoos_explore":
            try:
                source = f"{name} {json.dumps(arguments, default=str)[:500]}"
            except (ValueError, RecursionError):  # a self-referencing or absurdly deep value (in-process)
                source = name
        answer = None if admitted else self.admit(principal)
        if answer is None:
            try:
                answer = await self._call(name, arguments, principal)
            except asyncio.CancelledError:
                self.record(self._refusal(cancelled(surface)), principal, surface, source)
                raise
        self.record(answer, principal, surface, source)
        return answer

    async def explore(self, source: Any, principal: Principal, surface: str, dry_run: bool = False, *,
                      admitted: bool = False) -> Answer:
        """An exploration already parsed by the surface (the REST query string)."""
        answer = None if admitted else self.admit(principal)
        if answer is None:
            try:
                answer = await self.explorer.explore(source, principal.role, dry_run=dry_run)
            except asyncio.CancelledError:
                self.record(self._refusal(cancelled(surface)), principal, surface, source)
                raise
        self.record(answer, principal, surface, source)
        return answer

    def _refusal(self, e: ExploreError) -> Answer:
        return Answer.refusal(e, exploration_id=new_id(), contract_hash=self.contract.hash)

    def _ok(self, data: dict[str, Any]) -> dict[str, Any]:
        return {"ok": True, "data": data, "meta": {"exploration_id": new_id(), "contract_hash": self.contract.hash}}

    async def _call(self, name: str, arguments: Any, principal: Principal | None) -> Answer:
        """Run one tool for `principal`; every outcome is an envelope."""
        if principal is None:
            return self._refusal(no_token("no valid bearer token"))
        if not isinstance(arguments, dict):
            arguments = {} if arguments is None else arguments
        try:
            if not isinstance(arguments, dict):
                raise InputError(Codes.INVALID_REQUEST, "arguments must be an object", hint="send a JSON object")
            check_json(arguments, "the arguments")
            if name == "ontoos_explore":
                _unknown_keys(arguments, EXPLORE_ARGUMENTS, name)
                args = dict(arguments)
                dry_run = args.pop("dry_run", False)
                if not isinstance(dry_run, bool):
                    raise InputError(Codes.INVALID_REQUEST, "'dry_run' must be true or false", hint='e.g. "dry_run": true')
                answer = await self.explorer.explore(args, principal.role, dry_run=dry_run)
                if dry_run and answer.error is not None and answer.error.retry_with is not None:
                    # the retry must stay a dry run: sent back unchanged, it must not read rows
                    answer.error.retry_with = {**answer.error.retry_with, "dry_run": True}
                    answer.envelope["error"]["retry_with"] = answer.error.retry_with
                return answer
            if name == "ontoos_catalog":
                _unknown_keys(arguments, ("dataset",), name)
                dataset = arguments.get("dataset")
                if dataset is None:
                    return Answer.success(self._ok(list_datasets(self.contract, principal.role)))
                if not isinstance(dataset, str):
                    raise InputError(Codes.INVALID_REQUEST, "'dataset' must be a string", hint='e.g. {"dataset": "workloads"}')
                return Answer.success(self._ok(describe_dataset(self.contract, principal.role, dataset)))
            if name == "ontoos_queries":
                _unknown_keys(arguments, (), name)
                queries = self.registry.visible(principal.role) if self.registry else []
                return Answer.success(self._ok({"queries": [q.describe() for q in queries]}))
            if name == "ontoos_run_query":
                _unknown_keys(arguments, ("id", "params"), name)
                if not isinstance(arguments.get("id"), str):
                    raise InputError(Codes.INVALID_REQUEST, "'id' must be a string",
                                     hint='e.g. {"id": "<a named query id from ontoos_queries>", "params": {}}')
                if self.registry is None:
                    raise InputError(Codes.UNKNOWN_QUERY, "there are no named queries", hint="use ontoos_explore")
                return await self.registry.run(self.explorer, principal.role, arguments.get("id"), arguments.get("params"))
        except ExploreError as e:
            return self._refusal(e)
        return self._refusal(InputError(Codes.UNKNOWN_TOOL, f"no tool '{str(name)[:60]}'", hint=f"tools: {', '.join(TOOLS)}"))
