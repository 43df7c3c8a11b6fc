"""Evidence: what an answer's data is as of -> `meta.evidence`.

    spec = spec_for(contract, datasets)        # policy, once per plan: the sources to read, the threshold
    batches = ...                              # each source's current batch, read in the answer's snapshot
    meta["evidence"] = render(spec, batches, consistent=True, now=now)

The lake records what it published in a publish log (the contract's
`evidence.publish_log`: one row per batch of a source; a source's current
batch is its latest `published_at`). An answer's evidence names the current
batch of every source of every dataset it read (the contract's parents
included, those the role may read: they decide which rows exist), and its times are the most
conservative over them:

- `collected_at`, `published_at`, `as_of`: the oldest of each; `collected_at`
  and `as_of` are null when a source does not say (a publish time is never
  passed off as a collection time);
- `freshness.class`: `exact` when every source says when it collected,
  `estimated` when some say only when they published (their age is counted
  from that, and `freshness.estimated_from` names them), `unknown` when a
  dataset has no sources, a source has no batch, or the contract no publish
  log; `age_seconds` against `threshold_seconds` (the strictest of the
  datasets read), and `fresh`;
- `consistency`: `fixed_read` when the publish log and the rows were read in
  one snapshot (a REPEATABLE READ, READ ONLY transaction), else `unverified`;
- `source_batch` (source -> batch id) and `batch_fingerprint`, a stable hash
  of it: two answers with the same fingerprint read the same batches;
- `replica`: null when the rows were read on a primary; read on a hot standby,
  `{"standby": true, "replay_lag_seconds": s}`, how far its data is behind the
  primary's (0 when it has replayed all it received). The batches were read on
  the same standby, in the same snapshot, so the times above are those of the
  rows given, however far behind.
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from .contract import Contract, Dataset
from .names import fold


@dataclass(frozen=True, slots=True)
class EvidenceSpec:
    """What an answer's evidence is read from: the publish log, the sources, the threshold."""

    schema: str
    table: str
    sources: tuple[str, ...]  # sorted, each once: every source of every dataset read
    threshold_s: int  # the strictest freshness threshold of the datasets read
    unsourced: tuple[str, ...] = ()  # datasets read that name no source (their freshness is unknown)


@dataclass(frozen=True, slots=True)
class Batch:
    """A source's current batch, as the publish log has it."""

    source: str
    batch_id: str
    collected_at: dt.datetime | None
    published_at: dt.datetime
    as_of: dt.datetime | None


def spec_for(contract: Contract, datasets: Iterable[Dataset], scope: frozenset[str]) -> EvidenceSpec | None:
    """The evidence of a query reading `datasets` and, up each `exists_with` chain, their parents that
    are in `scope` (folded names the role may read: a parent outside it is answered as a dataset that
    does not exist, so nothing of it, its sources, threshold or name, shows); None when the contract has
    no publish log."""
    log = contract.evidence
    if log is None:
        return None
    read: dict[str, Dataset] = {}
    todo = list(datasets)
    while todo:
        ds = todo.pop()
        if fold(ds.name) not in read:
            read[fold(ds.name)] = ds
            todo.extend(parent for r in contract.parents_of(ds.name)
                        if fold((parent := contract.dataset(r.to)).name) in scope)
    sources = tuple(sorted({s for ds in read.values() for s in ds.sources}))
    threshold = min((ds.freshness_threshold_s or log.threshold_s for ds in read.values()), default=log.threshold_s)
    unsourced = tuple(sorted(ds.name for ds in read.values() if not ds.sources))
    return EvidenceSpec(log.schema_name, log.table_name, sources, threshold, unsourced)


def render(spec: EvidenceSpec | None, batches: Sequence[Batch] | None, *, consistent: bool,
           now: dt.datetime, replay_lag_s: float | None = None) -> dict[str, Any]:
    """`meta.evidence`. `batches`: each source's current batch (None: not read); `consistent`: read in
    the rows' own snapshot; `replay_lag_s`: read on a hot standby this far behind its primary (None: on
    a primary). All but the age and the lag depends only on the spec and the batches, which change when
    the lake publishes: it is worked out once per (spec, batches, consistent) and copied (`_fixed`)."""
    fixed, oldest = _fixed(spec, None if batches is None else tuple(batches), consistent)
    freshness = dict(fixed["freshness"])
    if oldest is not None:
        age = max(0, int((now - oldest).total_seconds()))
        freshness["age_seconds"] = age
        freshness["fresh"] = age <= spec.threshold_s
        if "estimated_from" in freshness:
            freshness["estimated_from"] = list(freshness["estimated_from"])
    replica = None if replay_lag_s is None else {"standby": True, "replay_lag_seconds": replay_lag_s}
    return {**fixed, "freshness": freshness, "source_batch": dict(fixed["source_batch"]), "replica": replica}


@functools.lru_cache(maxsize=1024)
def _fixed(spec: EvidenceSpec | None, batches: tuple[Batch, ...] | None,
           consistent: bool) -> tuple[dict[str, Any], dt.datetime | None]:
    """The evidence without its age, and the time the age counts from (None: unknown). Never handed out
    as it is: `render` copies what it changes and every mutable part."""
    current = {b.source: b for b in batches or ()}
    found = [current[s] for s in spec.sources if s in current] if spec else []
    source_batch = {b.source: b.batch_id for b in found}
    missing = [s for s in spec.sources if s not in current] if spec else []
    known = spec is not None and batches is not None and bool(spec.sources) and not missing and not spec.unsourced
    freshness: dict[str, Any] = {"class": "unknown", "age_seconds": None,
                                 "threshold_seconds": spec.threshold_s if spec else None, "fresh": None}
    oldest = None
    if known:
        estimated = [b.source for b in found if b.collected_at is None]
        oldest = min(b.collected_at or b.published_at for b in found)
        freshness["class"] = "estimated" if estimated else "exact"
        if estimated:
            freshness["estimated_from"] = estimated
    else:
        freshness["unknown_because"] = _why_unknown(spec, missing, batches is None)
    return {
        "collected_at": _oldest([b.collected_at for b in found]),
        "published_at": _oldest([b.published_at for b in found]),
        "as_of": _oldest([b.as_of for b in found]),
        "freshness": freshness,
        "consistency": "fixed_read" if consistent and known else "unverified",
        "source_batch": source_batch,
        "batch_fingerprint": fingerprint(source_batch) if source_batch else None,
    }, oldest


def _why_unknown(spec: EvidenceSpec | None, missing: list[str], unread: bool) -> str:
    if spec is None:
        return "the contract names no publish log"
    if spec.unsourced:
        return f"no source feeds {', '.join(spec.unsourced)}"
    if unread:
        return "the publish log was not read (missing, or not granted to the role)"
    return f"no published batch of {', '.join(missing)}"


def _oldest(times: Sequence[dt.datetime | None]) -> str | None:
    """The oldest of `times` in ISO 8601, or None when there are none or one is unknown."""
    if not times or any(t is None for t in times):
        return None
    return min(times).isoformat().replace("+00:00", "Z")


def fingerprint(source_batch: dict[str, str]) -> str:
    """A stable hash of source -> batch id: the same batches, the same fingerprint."""
    canonical = json.dumps(source_batch, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]
