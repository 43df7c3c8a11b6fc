"""Stats: what the service can say about the lake for a role, without reading rows.

    await freshness(explorer, "analyst")
    {"role": "analyst", "datasets": [{"name": "workloads", "evidence": {...}}, ...]}

`freshness` gives each dataset the role may read the evidence an answer from
it would carry (`evidence.render`: its sources and their parents' that the
role may read, the strictest threshold), from one read of the publish log as
the role's database role. No rows are read with it, so its consistency is
`unverified`; a dataset drift made unavailable says so beside its evidence.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from .catalog import status
from .evidence import EvidenceSpec, render, spec_for
from .pipeline import resolve_role

WHAT = ("freshness",)


async def freshness(explorer, role: str) -> dict[str, Any]:
    contract = explorer.contract
    r = resolve_role(contract, role)
    scope = contract.scope(r)
    datasets = sorted(contract.readable_datasets(r), key=lambda d: d.name)
    specs = {ds.name: spec_for(contract, [ds], scope) for ds in datasets}
    every = [s for s in specs.values() if s is not None]
    batches = None
    if every:
        union = EvidenceSpec(every[0].schema, every[0].table, tuple(sorted({x for s in every for x in s.sources})),
                             min(s.threshold_s for s in every))
        batches = await explorer.executor.read_batches(union, r.name)
    now = dt.datetime.now(dt.timezone.utc)
    drift = explorer.lake.drift
    return {"role": r.name, "as_of": now.isoformat().replace("+00:00", "Z"), "datasets": [
        {"name": ds.name, **status(drift.dataset(ds.name)),
         "evidence": render(specs[ds.name], batches, consistent=False, now=now)} for ds in datasets]}
