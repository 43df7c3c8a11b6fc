"""The pipeline: source -> parse -> policy -> compile -> guard. Each line is one stage.

    >>> q = compile_exploration("explore workloads fields name", contract, "analyst")  # doctest: +SKIP
    >>> q.sql
    'SELECT "t0"."name" AS "name" FROM "lake"."k8s_workloads" AS "t0" WHERE ...'
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from .compiler import CompiledQuery, compile_plan
from .contract import Contract, Role
from .allowed import allowed_for_role
from .errors import AuthError, Codes, ExploreError, GuardViolation
from .guard import check
from .grammar.forms import from_json
from .grammar.limits import check_shape
from .grammar.parser import parse_text
from .ir import Exploration
from .names import did_you_mean
from .policy import bind
from .templates import TEMPLATES, TemplateCache


def parse_source(source: str | dict[str, Any] | Exploration) -> Exploration:
    """Text form, JSON form (a dict) or an Exploration built by hand -> Exploration, its shape checked
    once: by the parser for text and JSON, here for one built by hand."""
    if isinstance(source, Exploration):
        check_shape(source)
        return source
    if isinstance(source, dict):
        return from_json(source)
    return parse_text(source)


def resolve_role(contract: Contract, role: str | Role) -> Role:
    if isinstance(role, Role):
        return role
    found = contract.role(role) if isinstance(role, str) else None
    if found is None:
        hint, _ = did_you_mean(str(role), contract.roles, "roles")
        raise AuthError(Codes.UNKNOWN_ROLE, f"'{role}' is not a role of this contract", hint=hint)
    return found


def compile_exploration(
    source: str | dict[str, Any] | Exploration,
    contract: Contract,
    role: str | Role,
    cache: TemplateCache | None = TEMPLATES,
) -> CompiledQuery:
    """Parse, bind and compile one exploration for `role`; raise ExploreError on refusal.

    An exploration compiled before for this contract and role, up to its
    literal values, reuses that guarded SQL with its new values (the template
    cache, `templates.py`); `cache=None` always takes the whole path."""
    role_ = resolve_role(contract, role)
    if cache is not None:
        return cache.compile(source, contract, role_, compile_whole, parse_source)
    return compile_whole(source, None, contract, role_)[0]


def compiled_before(source: Any, contract: Contract, role: str | Role,
                    cache: TemplateCache | None = TEMPLATES) -> CompiledQuery | None:
    """What `compile_exploration` returned for this very source before (contract, role and every character
    the same), from the cache's table of exact sources; None when it was not asked so, or there is no
    cache, or `role` is no role (the compile gives that refusal). Nothing is parsed (`TemplateCache.again`)."""
    if cache is None or (isinstance(role, str) and contract.role(role) is None):
        return None
    return cache.again(source, contract, resolve_role(contract, role))


def compile_whole(source: Any, exploration: Exploration | None, contract: Contract, role: Role):
    """The whole path, one line a stage: parse, bind, compile, guard -> (CompiledQuery, BoundExploration)."""
    exploration = exploration or parse_source(source)
    plan = _bind(source, exploration, contract, role)
    compiled = compile_plan(plan)
    verify(compiled, allowed_for_role(contract, role))
    return dataclasses.replace(compiled, contract_hash=contract.hash), plan


def compile_page(source: Any, contract: Contract, role: str | Role, offset: int) -> CompiledQuery:
    """A later page of a truncated answer: the whole path, with `offset` rows skipped in the total order
    (the template cache holds first pages only)."""
    role_ = resolve_role(contract, role)
    _, plan = compile_whole(source, None, contract, role_)
    compiled = compile_plan(dataclasses.replace(plan, offset=offset))
    verify(compiled, allowed_for_role(contract, role_))
    return dataclasses.replace(compiled, contract_hash=contract.hash)


def _bind(source: Any, exploration: Exploration, contract: Contract, role: Role):
    """Policy, with a refusal made fit for its caller: it carries the exploration (for the audit), a
    position only for the text form, and a retry_with only if that compiles."""
    try:
        return bind(exploration, contract, role)
    except ExploreError as e:
        e.exploration = exploration
        if e.subtype == "UNSUPPORTED_QUERY" and REQUEST_HINT not in (e.hint or ""):
            e.hint = f"{e.hint}; {REQUEST_HINT}" if e.hint else REQUEST_HINT
        if not _is_text(source):
            e.position = None  # positions inside one JSON entry or flag would mislead
        if e.retry_with is not None and not _compiles(e.retry_with, contract, role):
            e.retry_with = None  # offer only a retry that works
        raise


# What the language cannot say can still be asked for: a template request, which reviewers see.
REQUEST_HINT = ("if the language cannot say what you need, ask for it: ontoos_request_query (POST /api/v1/requests, "
                "ontoos queries request)")


def _compiles(body: dict[str, Any], contract: Contract, role: Role) -> bool:
    try:
        bind(from_json(body), contract, role)
    except ExploreError:
        return False
    return True


def _is_text(source: Any) -> bool:
    return isinstance(source, str) or (isinstance(source, dict) and "query" in source)


log = logging.getLogger("ontoos_explore.guard")


def verify(compiled: CompiledQuery, allowed) -> None:
    """The second wall: the guard re-checks the exact SQL text, and what it saw
    read must be exactly what the compiler emitted. Any difference is a policy
    bug: refused and logged (the exploration's shape, never its values)."""
    verdict = check(compiled.sql, dataclasses.replace(allowed, max_rows=compiled.limit), len(compiled.params))
    problems = [v.to_json(compiled.sql) for v in verdict.violations]
    if not problems and verdict.columns != compiled.touches:
        problems.append({"kind": "Columns", "message": "the guard and the compiler disagree on the columns read"})
    if problems:
        log.error("guard refused a compiled exploration %s (%s): %s", compiled.fingerprint, compiled.shape, problems)
        raise GuardViolation(problems)
