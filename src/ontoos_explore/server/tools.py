"""Server, the tools: what agents and scripts may call, as data, and one entry point for every surface.

    answer = await tools.call("ontoos_explore", {"dataset": "workloads", "fields": ["name"]}, principal, "rest")
    answer.envelope, answer.status, answer.exit      # the same envelope on MCP (HTTP, stdio) and REST

`Tools.call(name, arguments, principal, surface)` is the only way a tool runs:
the caller's rate limit is taken first (RATE_LIMITED, with
`meta.retry_after_s`; REST takes it itself before reading a body, and passes
its ticket as `admitted`; a call that queries takes one of the principal's
slots in flight with it: `admission.py`), the arguments are checked as a whole (`check_json`:
depth, size, NUL bytes and unpaired surrogates) before any of them is read or
echoed, then validated by the tool's input model (the same pydantic model
tools/list publishes as its input schema), then the tool runs. Every outcome is
an `Answer` and is recorded once (`recording.py`), a call cancelled half-way (the client went
away) too. A surface's own refusal of a request (a body it cannot read, a
session too many) is recorded through `Tools.refuse`. Descriptions stay short;
the shared guidance is `INSTRUCTIONS`.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg
from pydantic import BaseModel

from ..catalog import describe_dataset, list_datasets, status
from ..contract import Contract
from ..drift.state import LakeState
from ..envelope import Answer, new_id
from ..errors import Codes, ExploreError, InputError, UpstreamError, cancelled, no_token, rate_limited
from ..grammar.forms import from_json
from ..grammar.limits import CheckedJSON, check_json
from .. import pages
from ..cursors import Cursors
from ..explain import explain, is_named
from ..governance.registry import matching
from ..lookup import lookup
from ..names import close_matches, fold
from ..ir import Exploration
from ..offload import INLINE_SOURCE, source_size
from ..require import read as read_require
from ..service import Explorer
from ..sample import with_sample
from ..stats import freshness
from .admission import Admission, Ticket
from .recording import Recording, counted_after_send  # noqa: F401 - for the surfaces
from .config import Principal, RateLimiter
from .tool_models import (  # noqa: F401 - the tools as data, re-exported for the surfaces
    EXPLORE_ARGUMENTS, INSTRUCTIONS, QUERY_PREFIX, READ_ONLY, TOOLS, CatalogInput, Envelope, ExplainInput, ExploreInput,
    FilterObject, Meta,
    QueriesInput, RequestInput, RequireInput, RunQueryInput, StatsInput, input_schema, output_schema, validate)


def _queries(name: str, arguments: Any) -> bool:
    """Whether a call reads the database (and so takes one of its principal's slots in flight)."""
    if name.startswith(QUERY_PREFIX) or name in QUERYING:
        return True
    return name == "ontoos_catalog" and isinstance(arguments, dict) and arguments.get("sample") is not None


def _source(name: str, arguments: Any) -> Any:
    """What the audit records as asked: an exploration's text form as its text, else its JSON form;
    another tool's call as text."""
    if name == "ontoos_explore":
        if not isinstance(arguments, dict):
            return arguments
        form = {k: v for k, v in arguments.items() if k not in OPTIONS}
        return form["query"] if list(form) == ["query"] and isinstance(form["query"], str) else form
    try:
        return f"{name} {json.dumps(arguments, default=str)[:500]}"
    except (ValueError, RecursionError):  # a self-referencing or absurdly deep value (in-process)
        return name


def _asked(name: str, arguments: Any) -> Exploration | None:
    """The exploration a call asked, when its arguments read as one (for the audit of a call cancelled
    half-way, whose parse in the pipeline was cancelled with it)."""
    if name != "ontoos_explore" or not isinstance(arguments, dict):
        return None
    try:
        return from_json({k: v for k, v in arguments.items() if k not in OPTIONS})
    except ExploreError:
        return None


_SURFACE: contextvars.ContextVar[str] = contextvars.ContextVar("ontoos_surface", default="mcp")
OPTIONS = ("dry_run", "require", "cursor")  # ontoos_explore's arguments that are not the exploration

Handler = Callable[[BaseModel, dict[str, Any], Principal], Awaitable[Answer]]
QUERYING = ("ontoos_explore", "ontoos_run_query", "ontoos_explain", "ontoos_request_query", "ontoos_stats")  # the tools that take a database connection


class Tools(Recording):
    def __init__(self, contract: Contract, explorer: Explorer, registry=None, audit=None,
                 limiter: RateLimiter | None = None, cursors: Cursors | None = None) -> None:
        self.contract = contract
        self.explorer = explorer
        self._lake = LakeState(contract)  # until an explorer (with the service's lake) is given
        self.registry = registry
        self.audit = audit  # an AuditWriter, or None (no audit store configured)
        self.admission = Admission(limiter)  # rate limits and calls in flight (shared: set by the server)
        self.metrics = None  # a metrics.Metrics when the server exposes /metrics
        self.cursors = cursors if cursors is not None else Cursors(None)  # signs meta.next_cursor
        self._visible: dict[str | None, tuple[str, ...]] = {}  # role -> its tools, for `_visible_of`
        self._visible_of: tuple[Any, Any] = (None, None)  # the (registry, contract) they were listed from
        self.handlers: dict[str, Handler] = {
            "ontoos_catalog": self._catalog, "ontoos_explore": self._explore,
            "ontoos_queries": self._queries, "ontoos_run_query": self._run_query, "ontoos_explain": self._explain,
            "ontoos_request_query": self._request, "ontoos_stats": self._stats}

    @property
    def in_flight(self) -> dict[str, int]:
        """Principal name -> its queries running in this process now."""
        return self.admission.in_flight

    # ------------------------------------------------------------ the entry point

    async def call(self, name: str, arguments: Any, principal: Principal | None, surface: str = "mcp", *,
                   admitted: Ticket | None = None) -> Answer:
        """One tool call on any surface: admitted (rate limit, and a slot in flight for one that queries),
        validated, run, recorded once. `admitted`: the ticket of a surface that took this call from the rate
        limit already (REST, before a body)."""
        source = _source(name, arguments)
        started = time.perf_counter()
        ticket, answer = (admitted, None) if admitted is not None else await self.admit(
            principal, _queries(name, arguments))
        try:
            if answer is None:
                _SURFACE.set(surface)  # this call's task (and what it awaits): the tools that record where it came
                try:
                    answer = await self._run(name, arguments, principal, ticket)
                except asyncio.CancelledError:  # recorded with what it asked: the pipeline's parse went with it
                    answer = Answer.refusal(cancelled(surface), exploration=_asked(name, arguments),
                                            exploration_id=new_id(), contract_hash=self.contract.hash,
                                            notice=self._notice(principal))
                    self.record(answer, principal, surface, source, name, time.perf_counter() - started)
                    raise
        finally:
            self.admission.done(ticket)
        seconds = time.perf_counter() - started
        # the event of an answer with no query renders what was asked instead (`event_for`, up to 64 KB):
        # for a large source, built on the worker thread; any other event is a few fields, built inline
        if self.audit is not None and answer.compiled is None and source_size(source) > INLINE_SOURCE:
            try:
                await self._record_off_loop(answer, principal, surface, source)
            finally:  # counted even if the call is cancelled meanwhile (its event is queued when built)
                self._counted(answer, surface, name, seconds, principal)
        else:
            self.record(answer, principal, surface, source, name, seconds)
        return answer

    async def admit(self, principal: Principal | None, querying: bool = False) -> tuple[Ticket | None, Answer | None]:
        """Take one call from the principal's rate limit (and, `querying`, a slot in flight): its ticket,
        and None to go ahead or the refusal."""
        if principal is None:
            return None, None
        ticket = await self.admission.admit(principal, querying)
        if ticket.wait_s <= 0:
            return ticket, None
        self.admission.done(ticket)
        return ticket, self._refusal(rate_limited(principal.name, principal.rate.describe(), ticket.wait_s), principal)

    def refuse(self, e: ExploreError, principal: Principal | None, surface: str, source: Any = None) -> Answer:
        """A surface's own refusal of a request before any tool runs (its body, its session): answered
        and recorded like a call's, under the id its envelope gives the caller to quote."""
        answer = Answer.refusal(e, notice=self._notice(principal), exploration_id=new_id(),
                                contract_hash=self.contract.hash)
        self.record(answer, principal, surface, source)
        return answer

    # ------------------------------------------------------------ running one

    def _notice(self, principal: Principal | None) -> dict[str, Any]:
        """The caller's `_notice`: what drifted among what its role may read."""
        return self.lake.notice_for(principal.role if principal is not None else None)

    def _refusal(self, e: ExploreError, principal: Principal | None = None) -> Answer:
        return Answer.refusal(e, exploration_id=new_id(), contract_hash=self.contract.hash,
                              notice=self._notice(principal))

    def _ok(self, data: dict[str, Any], principal: Principal) -> Answer:
        return Answer.success({"ok": True, "data": data,
                               "meta": {"exploration_id": new_id(), "contract_hash": self.contract.hash}},
                              notice=self._notice(principal))

    async def _run(self, name: str, arguments: Any, principal: Principal | None, ticket: Ticket | None) -> Answer:
        """Run one tool for `principal`; every outcome is an envelope."""
        if principal is None:
            return self._refusal(no_token("no valid bearer token"))
        if arguments is None:
            arguments = {}
        try:
            if not isinstance(arguments, dict):
                raise InputError(Codes.INVALID_REQUEST, "arguments must be an object", hint="send a JSON object")
            check_json(arguments, "the arguments")
            visible = self.visible(principal)
            if name not in visible:
                close = close_matches(str(name)[:60], visible, n=1)
                raise InputError(Codes.UNKNOWN_TOOL, f"no tool '{str(name)[:60]}'",
                                 hint=(f"did you mean '{close[0]}'? " if close else "") + f"tools: {', '.join(visible)}")
            if name in TOOLS:
                args, handler = validate(name, TOOLS[name][2], arguments), self.handlers[name]
            else:  # a named query's own tool: its arguments are the query's parameters
                args, handler = name[len(QUERY_PREFIX):], self._query_tool
            if not _queries(name, arguments):
                return await handler(args, arguments, principal)
            if ticket is None or not ticket.querying:  # admitted before it was known to query (REST's catalog)
                self.admission.done(ticket)
                ticket = await self.admission.admit(principal, True, rate=False)
            async with self.admission.running(ticket):  # its most at once, here or across the deployment
                return await handler(args, arguments, principal)
        except ExploreError as e:
            return self._refusal(e, principal)

    async def _explore(self, args: ExploreInput, arguments: dict[str, Any], principal: Principal) -> Answer:
        # as given (the reader names what is wrong), and checked whole already (check_json, above)
        form = CheckedJSON((k, v) for k, v in arguments.items() if k not in OPTIONS)
        answer = await pages.explore(self.explorer, self.cursors, form, principal.role, principal.name,
                                     cursor=args.cursor, dry_run=args.dry_run,
                                     require=read_require(arguments.get("require")))
        if args.dry_run and answer.error is not None and answer.error.retry_with is not None:
            # the retry must stay a dry run: sent back unchanged, it must not read rows
            answer.error.retry_with = {**answer.error.retry_with, "dry_run": True}
            answer.envelope["error"]["retry_with"] = answer.error.retry_with
        return answer

    def visible(self, principal: Principal | None) -> tuple[str, ...]:
        """The tools `principal` may call, in listing order: every built-in tool (ontoos_explore only for a
        role the contract lets explore), then a tool of its own for each named query it may run. Any other
        is answered as a tool that does not exist. Listed once per role while the registry served and the
        contract are the same objects (a registry that changed is a new one): an MCP call asks three times."""
        basis = (self.registry_now(), self.contract)
        if basis[0] is not self._visible_of[0] or basis[1] is not self._visible_of[1]:
            self._visible, self._visible_of = {}, basis
        key = None if principal is None else principal.role
        found = self._visible.get(key)
        if found is None:
            role = self.contract.role(principal.role) if principal is not None else None
            built_in = [name for name in TOOLS if name != "ontoos_explore" or role is None or role.explore]
            found = self._visible[key] = (*built_in, *(QUERY_PREFIX + q.id for q in self.query_tools(principal)))
        return found

    def query_tools(self, principal: Principal | None) -> list[Any]:
        """The named queries `principal` may run, as its tools list them: by id."""
        if principal is None or self.registry is None:
            return []
        return sorted(self.registry.visible(principal.role), key=lambda q: q.id)

    def registry_now(self) -> Any:
        """The registry served now (a new object whenever it changed): what tools/list_changed watches."""
        current = getattr(self.registry, "current", None)
        return current() if current is not None else self.registry

    @property
    def lake(self) -> LakeState:
        """The service's view of the lake (drift, `_notice`): the explorer's."""
        return self.explorer.lake if self.explorer is not None else self._lake

    async def _catalog(self, args: CatalogInput, arguments: dict[str, Any], principal: Principal) -> Answer:
        drift = self.lake.drift
        if args.name is not None:
            if args.dataset is not None:
                raise InputError(Codes.INVALID_REQUEST, "give 'name' or 'dataset', not both",
                                 hint='e.g. {"name": "namespace"}: name finds datasets, columns and more')
            found = lookup(self.contract, principal.role, args.name, drift)
        elif args.dataset is None:
            if args.sample is not None:
                raise InputError(Codes.INVALID_REQUEST, "'sample' takes a dataset",
                                 hint='e.g. {"dataset": "workloads", "sample": 3}')
            return self._ok(list_datasets(self.contract, principal.role, drift), principal)
        else:
            found = describe_dataset(self.contract, principal.role, args.dataset, drift)
        if args.sample is None:
            return self._ok(found, principal)
        return await with_sample(self.explorer, principal.role, found, args.sample, drift,
                                 lambda data: self._ok(data, principal).envelope)

    async def _queries(self, args: QueriesInput, arguments: dict[str, Any], principal: Principal) -> Answer:
        lake = self.lake
        if args.id is not None:  # one: refused as running it would be when it is not the caller's to run
            if self.registry is None:
                raise InputError(Codes.UNKNOWN_QUERY, "there are no named queries", hint="use ontoos_explore")
            entry = self.registry.entry(principal.role, args.id)
            return self._ok({"query": {**entry.describe(), **status(lake.named_refusal(entry))}}, principal)
        queries = matching(self.registry.visible(principal.role) if self.registry else [], args.domain, args.q)
        return self._ok({"queries": [{**q.describe(), **status(lake.named_refusal(q))} for q in queries]}, principal)

    async def _explain(self, args: ExplainInput, arguments: dict[str, Any], principal: Principal) -> Answer:
        source = arguments if is_named(arguments) else CheckedJSON(arguments)
        return self._ok(await explain(self.explorer, source, principal.role, self.registry), principal)

    async def _request(self, args: RequestInput, arguments: dict[str, Any], principal: Principal) -> Answer:
        """File a template request (governance/requests.py) in the audit store, for reviewers."""
        from ..governance import requests

        question = requests.question_of(args.question)
        dataset = None
        if args.dataset is not None:  # a dataset it may read, named as the contract does; else refused as the catalog does
            dataset = describe_dataset(self.contract, principal.role, args.dataset)["name"]
        if self.audit is None:
            raise ExploreError(Codes.DATABASE_SETUP, "this server keeps no audit store, where requests are filed",
                               hint="ask the operators to start it with ONTOOS_AUDIT=on")
        surface = _SURFACE.get()

        def write():
            with psycopg.connect(self.audit.dsn, connect_timeout=5) as conn:
                return requests.file(conn, principal=principal.name, role=principal.role, surface=surface,
                                     question=question, dataset=dataset)

        try:
            filed = await asyncio.to_thread(write)
        except psycopg.Error:
            raise UpstreamError("the audit store is unavailable", reason="REQUEST_NOT_FILED") from None
        return self._ok({**filed, "next": "a reviewer sees it on the governance dashboard; ontoos_queries will "
                                          "list the named query that answers it"}, principal)

    async def _stats(self, args: StatsInput, arguments: dict[str, Any], principal: Principal) -> Answer:
        return self._ok(await freshness(self.explorer, principal.role), principal)

    async def _query_tool(self, ident: str, arguments: dict[str, Any], principal: Principal) -> Answer:
        """A named query called as its own tool: the arguments are its parameters, and `require` and
        `cursor` (each unless the query has a parameter of that name: then its schema has no such option)."""
        entry = self.registry.entries.get(fold(ident))
        own = {p.name.split(".")[0] for p in entry.parameters} if entry is not None else set()
        options = {k: arguments[k] for k in ("require", "cursor") if k in arguments and k not in own}
        params = {k: v for k, v in arguments.items() if k not in options}
        cursor = options.get("cursor")
        if cursor is not None and not isinstance(cursor, str):
            raise InputError(Codes.INVALID_REQUEST, "'cursor' must be a string",
                             hint="pass meta.next_cursor exactly as it came")
        return await pages.run_named(self.explorer, self.cursors, self.registry, principal.role, principal.name,
                                     ident, params, cursor=cursor, require=read_require(options.get("require")))

    async def _run_query(self, args: RunQueryInput, arguments: dict[str, Any], principal: Principal) -> Answer:
        if args.id is None and args.cursor is None:
            raise InputError(Codes.INVALID_REQUEST, "'id' must be a string: the named query's id (only a cursor "
                             "goes without one)",
                             hint='e.g. {"id": "<a named query id from ontoos_queries>", "params": {}}')
        if self.registry is None:
            raise InputError(Codes.UNKNOWN_QUERY, "there are no named queries", hint="use ontoos_explore")
        return await pages.run_named(self.explorer, self.cursors, self.registry, principal.role, principal.name,
                                     args.id, args.params, cursor=args.cursor,
                                     require=read_require(arguments.get("require")))
