"""Pages: an exploration, or its cursor, -> one page of its answer, with the cursor to the next.

`explore(explorer, cursors, source, role, principal, cursor=...)` is what
every surface that knows its caller calls (MCP and REST through `Tools`, the
CLI): without a cursor it is the first page; with one (`cursors.Cursors.open`
checks it) the same question is asked again, `offset` rows on in its total
order. A truncated page of a question whose order is total gets
`meta.next_cursor` until the role's `max_pages`; every page says its number
(`meta.page`). An exploration sent beside a cursor must be the cursor's own.
"""

from __future__ import annotations

from typing import Any

from .cursors import Cursors, batches_digest, expired
from .envelope import Answer, new_id
from .errors import ExploreError
from .pipeline import compile_exploration
from .require import Require
from .service import Explorer


async def explore(explorer: Explorer, cursors: Cursors | None, source: Any, role: str, principal: str, *,
                  cursor: str | None = None, dry_run: bool = False, require: Require | None = None) -> Answer:
    principal = f"{principal} as {role}"  # a cursor is the caller's, in the role it asked in
    if cursor is None:
        answer = await explorer.explore(source, role, dry_run=dry_run, require=require)
        return _with_next(answer, explorer, cursors, role, principal, 1, None, dry_run)
    contract = explorer.contract
    try:
        if cursors is None:
            raise expired("this CLI signs no cursors", "set ONTOOS_SECRET (the servers' own) to page from the CLI")
        page = cursors.open(cursor, principal, contract.hash)
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
    if answer.ok:
        evidence = answer.envelope["meta"].get("evidence")
        if answer.compiled.fingerprint != page.fingerprint or batches_digest(evidence) != page.batches:
            e = expired(f"the data was republished since page 1 of this question (page {page.number} would not "
                        "continue the same rows)")
            return Answer.refusal(e, answer.compiled, exploration_id=answer.envelope["meta"]["exploration_id"],
                                  contract_hash=contract.hash, evidence=evidence,
                                  notice=explorer.lake.notice_for(role))
    return _with_next(answer, explorer, cursors, role, principal, page.number, page.batches, False)


def _asks_something(source: Any) -> bool:
    """Whether a source sent beside a cursor names an exploration (else the cursor alone asks)."""
    if source is None:
        return False
    if isinstance(source, str):
        return bool(source.strip())
    return isinstance(source, dict) and bool(source)


def _with_next(answer: Answer, explorer: Explorer, cursors: Cursors | None, role: str, principal: str, number: int,
               batches: str | None, dry_run: bool) -> Answer:
    """The page's number, and the cursor to the next when it was truncated and its order is total."""
    if not answer.ok or dry_run or answer.compiled is None:
        return answer
    meta = answer.envelope["meta"]
    q = answer.compiled
    meta["page"] = number
    if not meta.get("truncated"):
        return answer
    limit = explorer.contract.role(role).max_pages
    if not q.pageable:
        meta.setdefault("notes", []).append("no next page: the order of these rows is not total (a dataset read "
                                            "declares no key); narrow the question instead")
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
        meta["next_cursor"] = cursors.next_page(principal, explorer.contract.hash, q.fingerprint, q.normalized,
                                                q.offset + q.limit, number + 1, first)
    return answer
