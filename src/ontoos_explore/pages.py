"""Pages: an exploration or a named query, or its cursor, -> one page of its answer, with the cursor to the next.

`explore(explorer, cursors, source, role, principal, cursor=...)` and
`run_named(explorer, cursors, registry, role, principal, ident, params,
cursor=...)` are what every surface that knows its caller calls (MCP and
REST through `Tools`, the CLI): without a cursor it is the first page; with
one (`cursors.Cursors.open` checks it) the same question is asked again,
`offset` rows on in its total order (for a named query: its SQL with that
OFFSET, verified again, `governance/registry.page_sql`). A truncated page
of a question whose order is total gets `meta.next_cursor` until the role's
`max_pages`; every page says its number (`meta.page`). A question sent
beside a cursor must be the cursor's own; a cursor of an exploration does
not page a named query, nor the other way round.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from .cursors import Cursors, Page, batches_digest, expired
from .envelope import Answer, new_id
from .errors import ExploreError
from .names import fold
from .pipeline import compile_exploration
from .require import Require
from .service import Explorer

NAMED = "named:"  # the fingerprint prefix of a named query's answers


async def explore(explorer: Explorer, cursors: Cursors | None, source: Any, role: str, principal: str, *,
                  cursor: str | None = None, dry_run: bool = False, require: Require | None = None) -> Answer:
    principal = f"{principal} as {role}"  # a cursor is the caller's, in the role it asked in
    if cursor is None:
        answer = await explorer.explore(source, role, dry_run=dry_run, require=require)
        return _with_next(answer, explorer, cursors, role, principal, 1, None, dry_run)
    contract = explorer.contract
    try:
        page = _open(cursors, cursor, principal, explorer)
        if page.fingerprint.startswith(NAMED):
            raise expired("the cursor pages a named query, not an exploration",
                          "send it with that query: ontoos_run_query's cursor, or the query's own tool")
        if dry_run:
            raise expired("a cursor asks for rows; a dry run reads none", "leave dry_run out with a cursor")
        if _asks_something(source):
            asked = compile_exploration(source, contract, role, explorer.cache)
            if (asked.fingerprint, asked.normalized) != (page.fingerprint, page.question):
                raise expired("the cursor belongs to another question than the one sent with it",
                              "send the cursor alone, or with the exploration it came with")
    except ExploreError as e:
        return Answer.refusal(e, exploration_id=new_id(), contract_hash=contract.hash,
                              notice=explorer.lake.notice_for(role))
    answer = await explorer.explore(page.question, role, require=require, offset=page.offset)
    return _continued(answer, page, explorer, cursors, role, principal)


async def run_named(explorer: Explorer, cursors: Cursors | None, registry: Any, role: str, principal: str,
                    ident: Any, params: Any, *, cursor: str | None = None, require: Require | None = None) -> Answer:
    """A named query's first page, or (`cursor`) the page it names. A refusal before the query runs (an
    unknown id, a bad parameter) raises, as `Registry.compiled` does; one of the cursor is answered."""
    principal = f"{principal} as {role}"
    if cursor is None:
        compiled = registry.compiled(role, ident, params)
        answer = await explorer.run_compiled(compiled, require)
        question = _named_question(compiled.fingerprint, params if params is not None else {}, compiled.sql)
        return _with_next(answer, explorer, cursors, role, principal, 1, None, False, question)
    try:
        page = _open(cursors, cursor, principal, explorer)
        if not page.fingerprint.startswith(NAMED):
            raise expired("the cursor pages an exploration, not a named query",
                          'send it to ontoos_explore as {"cursor": ...}')
        asked = json.loads(page.question)
        if ((ident is not None and fold(str(ident)) != fold(asked["query"]))
                or (params and _named_question(page.fingerprint, params, None)["params"] != asked["params"])):
            raise expired("the cursor belongs to another question than the one sent with it",
                          "send the cursor alone, or with the query and parameters it came with")
        entry = registry.entries.get(fold(asked["query"]))
        if entry is not None and _sql_digest(entry.sql) != asked.get("sql"):
            raise expired("the named query was changed since page 1 (its pages would not be the same rows)")
        compiled = registry.compiled(role, asked["query"], asked["params"], offset=page.offset)
    except ExploreError as e:
        return Answer.refusal(e, exploration_id=new_id(), contract_hash=explorer.contract.hash,
                              notice=explorer.lake.notice_for(role))
    answer = await explorer.run_compiled(compiled, require)
    return _continued(answer, page, explorer, cursors, role, principal)


def _named_question(fingerprint: str, params: Any, sql: str | None) -> Any:
    """A named query's call as a cursor's question: its id, its parameters and a digest of its SQL (a
    changed entry does not continue), canonical JSON; with `sql` None, the question as an object."""
    asked = {"query": fingerprint[len(NAMED):],
             "params": json.loads(json.dumps(params, sort_keys=True, ensure_ascii=False, default=str))}
    if sql is None:
        return asked
    return json.dumps({**asked, "sql": _sql_digest(sql)}, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _sql_digest(sql: str) -> str:
    return hashlib.sha256(sql.encode("utf-8")).hexdigest()[:16]


def _open(cursors: Cursors | None, cursor: str, principal: str, explorer: Explorer) -> Page:
    if cursors is None:
        raise expired("this CLI signs no cursors", "set ONTOOS_SECRET (the servers' own) to page from the CLI")
    return cursors.open(cursor, principal, explorer.contract.hash)


def _continued(answer: Answer, page: Page, explorer: Explorer, cursors: Cursors | None, role: str,
               principal: str) -> Answer:
    """A later page: refused when the data it was read from is not the first page's."""
    if answer.ok:
        evidence = answer.envelope["meta"].get("evidence")
        if answer.compiled.fingerprint != page.fingerprint or batches_digest(evidence) != page.batches:
            e = expired(f"the data was republished since page 1 of this question (page {page.number} would not "
                        "continue the same rows)")
            return Answer.refusal(e, answer.compiled, exploration_id=answer.envelope["meta"]["exploration_id"],
                                  contract_hash=explorer.contract.hash, evidence=evidence,
                                  notice=explorer.lake.notice_for(role))
    return _with_next(answer, explorer, cursors, role, principal, page.number, page.batches, False, page.question)


def _asks_something(source: Any) -> bool:
    """Whether a source sent beside a cursor names an exploration (else the cursor alone asks)."""
    if source is None:
        return False
    if isinstance(source, str):
        return bool(source.strip())
    return isinstance(source, dict) and bool(source)


def _with_next(answer: Answer, explorer: Explorer, cursors: Cursors | None, role: str, principal: str, number: int,
               batches: str | None, dry_run: bool, question: str | None = None) -> Answer:
    """The page's number, and the cursor to the next when it was truncated and its order is total.
    `question`: what the cursor asks again (an exploration's canonical text unless given)."""
    if not answer.ok or dry_run or answer.compiled is None:
        return answer
    meta = answer.envelope["meta"]
    q = answer.compiled
    meta["page"] = number
    if not meta.get("truncated"):
        return answer
    limit = explorer.contract.role(role).max_pages
    if not q.pageable:
        why = ("its ORDER BY does not make the order total (each table's key, or every GROUP BY column)"
               if q.fingerprint.startswith(NAMED) else "a dataset read declares no key")
        meta.setdefault("notes", []).append(f"no next page: the order of these rows is not total ({why}); "
                                            "narrow the question instead")
    elif cursors is None:
        meta.setdefault("notes", []).append("set ONTOOS_SECRET to get a cursor to the next page here")
    elif number >= limit:
        meta.setdefault("notes", []).append(f"page {number} is the last a cursor reaches for this role "
                                            f"(max_pages {limit}): narrow the question to see the rest")
    else:
        first = batches if batches is not None else batches_digest(meta.get("evidence"))
        if not first:
            meta.setdefault("notes", []).append("no publish log feeds these datasets: a later page cannot tell "
                                                "whether the lake was republished in between")
        meta["next_cursor"] = cursors.next_page(principal, explorer.contract.hash, q.fingerprint,
                                                q.normalized if question is None else question,
                                                q.offset + q.limit, number + 1, first)
    return answer
