"""Governance, audit events: an `Answer` (+ who, where, what was asked) -> one `Event` (or a `Gap` row).

What was asked comes from the answer, never from parsing again: the compiled
query when there is one, else the exploration a policy refusal carries, else
the source as it came (it did not parse).
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import asdict, dataclass
from typing import Any

from ...compiler.fingerprint import of_shape
from ...contract import Contract
from ...envelope import Answer, clean_text, new_id
from ...errors import ExploreError
from ...grammar.render import to_text
from ...ir import Exploration
from ...names import fold

COLUMNS = ("id", "at", "principal", "role", "surface", "dataset", "exploration", "fingerprint", "outcome",
           "error_type", "error_subtype", "error_code", "reason", "column_name", "message", "hint", "rows",
           "truncated", "elapsed_ms", "cost")
TEXT_COLUMNS = tuple(c for c in COLUMNS if c not in ("at", "rows", "truncated", "elapsed_ms", "cost"))
GAP_COLUMNS = ("id", "at", "reason", "events", "first_at", "last_at", "writer", "detail")
MAX_TEXT = 4000
EVENT_OVERHEAD = 600  # bytes of an Event beyond its text (object, datetime, numbers), for the queue's byte bound


def _stored(value: Any) -> Any:
    """A value PostgreSQL can store: text `clean_text`ed, at most MAX_TEXT characters."""
    return clean_text(value, MAX_TEXT) if isinstance(value, str) else value


@dataclass(frozen=True, slots=True)
class Event:
    id: str
    at: dt.datetime
    principal: str
    role: str | None
    surface: str
    dataset: str | None = None
    exploration: str | None = None
    fingerprint: str | None = None
    outcome: str = "ok"
    error_type: str | None = None
    error_subtype: str | None = None
    error_code: str | None = None
    reason: str | None = None
    column_name: str | None = None
    message: str | None = None
    hint: str | None = None
    rows: int | None = None
    truncated: bool | None = None
    elapsed_ms: float | None = None
    cost: float | None = None  # the planner's estimate, when one was asked (callers never see it)

    def row(self) -> tuple:
        return tuple(_stored(getattr(self, c)) for c in COLUMNS)

    def size(self) -> int:
        """An estimate of the memory the event holds while queued, in bytes."""
        n = EVENT_OVERHEAD
        for c in TEXT_COLUMNS:
            v = getattr(self, c)
            if v:
                n += len(v) if v.isascii() else 4 * len(v)
        return n


@dataclass(frozen=True, slots=True)
class Gap:
    """Events the trail does not hold, and why: a row of `ontoos_audit.gaps`."""

    id: str
    at: dt.datetime
    reason: str  # QUEUE_FULL | REJECTED | AUTH_FLOOD
    events: int
    first_at: dt.datetime | None
    last_at: dt.datetime | None
    writer: str
    detail: str

    def row(self) -> tuple:
        return tuple(_stored(getattr(self, c)) for c in GAP_COLUMNS)


def _described(e: Exploration, contract: Contract) -> tuple[str, str, str]:
    """(dataset, text, fingerprint) of an exploration that parsed but was refused: its contract dataset
    name when it has one, its text form, and its shape hashed by the compiler's one scheme."""
    ds = contract.dataset(e.dataset.value)
    shape = fold(to_text(e, literal=lambda _: "?", with_limit=False))
    return (ds.name if ds is not None else e.dataset.value), to_text(e)[:MAX_TEXT], of_shape(shape)


def _raw(source: Any) -> str:
    """What was asked, as text, when it did not parse: recorded as it came (never parsed again)."""
    if isinstance(source, str):
        return source[:MAX_TEXT]
    try:
        return json.dumps(source, default=str, ensure_ascii=False)[:MAX_TEXT]
    except (ValueError, RecursionError):  # a self-referencing or absurdly deep value (in-process)
        return str(type(source).__name__)


def event_for(answer: Answer, *, principal: str | None, role: str | None, surface: str, source: Any,
              contract: Contract) -> Event:
    now = dt.datetime.now(dt.timezone.utc)
    env = answer.envelope
    q = answer.compiled
    if answer.ok:
        meta = env.get("meta", {})
        return Event(
            id=meta.get("exploration_id") or new_id(), at=now, principal=principal or "anonymous", role=role,
            surface=surface, dataset=q.datasets[0] if q and q.datasets else None,
            exploration=(q.normalized if q else None), fingerprint=(q.fingerprint if q else None), outcome="ok",
            rows=meta.get("rows"), truncated=meta.get("truncated"), elapsed_ms=meta.get("elapsed_ms"),
            cost=answer.cost,
        )
    err: ExploreError = answer.error
    if q is not None:
        dataset, text, fingerprint = q.datasets[0], q.normalized, q.fingerprint
    elif answer.exploration is not None:
        dataset, text, fingerprint = _described(answer.exploration, contract)
    elif source is not None:
        dataset, text, fingerprint = None, _raw(source), None
    else:
        dataset = text = fingerprint = None
    return Event(
        id=env.get("meta", {}).get("exploration_id") or new_id(), at=now, principal=principal or "anonymous",
        role=role, surface=surface, dataset=dataset, exploration=text, fingerprint=fingerprint,
        outcome="refused" if err.type in ("validation", "policy", "auth") else "failed",
        error_type=err.type, error_subtype=err.subtype, error_code=err.code, reason=err.reason,
        column_name=(err.detail or {}).get("column"), message=err.message[:MAX_TEXT],
        hint=(err.hint or "")[:MAX_TEXT] or None, cost=answer.cost,
    )


def as_dict(e: Event) -> dict[str, Any]:
    d = asdict(e)
    d["at"] = e.at.isoformat()
    return d
