"""Sample: a few rows of a dataset, beside its description in the catalog.

`ontoos_catalog` (`{"dataset": D, "sample": N}`, or a `name` that is a
dataset), `GET /api/v1/catalog?dataset=D&sample=N` and `ontoos describe NAME
--sample N` add `sample`: at most `MAX_SAMPLE` rows of the dataset's
readable columns (as many as the role's `max_fields` allows, in the
contract's order, none the drift made unavailable). The rows are an
exploration like any other, asked through `Explorer.explore`: the same
policy, masking, budgets (a heavy dataset needs a filter, so it has no
sample), evidence and audit (the answer carries its compiled query). A
refusal of the sample is the call's refusal.
"""

from __future__ import annotations

from typing import Any

from .catalog import NO_DRIFT
from .contract import Contract
from .drift.compare import Drift
from .envelope import Answer
from .errors import Codes, InputError
from .service import Explorer

MAX_SAMPLE = 10


def sample_count(n: Any) -> int:
    """`sample` as a row count, or EX102."""
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_SAMPLE:
        raise InputError(Codes.INVALID_REQUEST, f"'sample' must be a whole number from 1 to {MAX_SAMPLE}",
                         hint='e.g. {"dataset": "workloads", "sample": 3}')
    return n


def sampled_dataset(found: dict[str, Any]) -> str:
    """The dataset a catalog answer describes (a description, or a lookup whose match is one), or EX102."""
    if "columns" in found and "name" in found:
        return found["name"]
    datasets = [m["name"] for m in found.get("matches", ()) if m.get("kind") == "dataset"]
    if len(datasets) != 1:
        raise InputError(Codes.INVALID_REQUEST, "'sample' takes a dataset: this name is not one",
                         hint='name a dataset, e.g. {"dataset": "workloads", "sample": 3}')
    return datasets[0]


def exploration(contract: Contract, role: str, dataset: str, n: int, drift: Drift = NO_DRIFT) -> dict[str, Any]:
    """The JSON form that reads the sample."""
    ds = contract.dataset(dataset)
    fields = [c.name for c in ds.readable_columns() if drift.column(ds.name, c.name) is None]
    return {"dataset": ds.name, "fields": fields[: contract.role(role).max_fields], "limit": n}


async def with_sample(explorer: Explorer, role: str, found: dict[str, Any], n: Any, drift: Drift = NO_DRIFT,
                      envelope_of=None) -> Answer:
    """The catalog answer `found` with `sample` added (its rows, columns, truncated and evidence), as an
    `Answer` that carries the sample's compiled query for the audit; or the sample's refusal."""
    count = sample_count(n)
    dataset = sampled_dataset(found)
    answer = await explorer.explore(exploration(explorer.contract, role, dataset, count, drift), role)
    if not answer.ok:
        if answer.error.error_code is Codes.HEAVY_WITHOUT_FILTER:  # a sample cannot say what to filter on
            answer.error.hint = answer.envelope["error"]["hint"] = (
                f"{dataset} is heavy: it has no sample; explore it with a filter instead")
        return answer
    env = answer.envelope
    data = {**found, "sample": {"dataset": dataset, "columns": env["data"]["columns"], "rows": env["data"]["rows"],
                                "truncated": env["meta"]["truncated"], "evidence": env["meta"].get("evidence")}}
    envelope = envelope_of(data)
    return Answer(envelope, answer.compiled, None, answer.exploration, answer.cost)
