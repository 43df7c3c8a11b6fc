"""The catalog's `sample: N`: a few rows of a dataset beside its description, read as an exploration is
(readable columns only, the role's budgets, the dataset's filters) and audited as one. Through `Tools` on
real PostgreSQL, and the GET form."""

from __future__ import annotations

import psycopg
import pytest

from ontoos_explore.engine.demo_data import SECRET_MARKER
from ontoos_explore.engine.executor import Executor
from ontoos_explore.server.config import Principal
from ontoos_explore.service import Explorer
from tests.recorded import Trail
from tests.server.test_tools import Counting, app_for, asgi

pytestmark = pytest.mark.anyio
VIEWER = Principal("vic", "viewer")


@pytest.fixture
def tools(demo, pool):
    p, settings = pool
    return Counting(demo, Explorer(demo, Executor(p, settings)), None, Trail())


async def test_a_sample_is_rows_the_role_may_read_and_is_audited_as_an_exploration(tools, demo, pg_dsn):
    answer = await tools.call("ontoos_catalog", {"dataset": "workloads", "sample": 3}, VIEWER, "mcp")
    assert answer.ok, answer.envelope
    data = answer.envelope["data"]
    sample = data["sample"]
    readable = [c.name for c in demo.dataset("workloads").readable_columns()]
    assert data["name"] == "workloads" and sample["columns"] == readable  # is_deleted, env_dump: never
    assert len(sample["rows"]) == 3 and sample["truncated"] is True and SECRET_MARKER not in str(sample)
    with psycopg.connect(pg_dsn) as conn:  # rows of live workloads of live projects only (the contract's filters)
        live = {r[0] for r in conn.execute("SELECT w.workload_id FROM lake.k8s_workloads w JOIN lake.gitlab_projects p "
                                           "ON p.project_id = w.project_id WHERE NOT w.is_deleted AND NOT p.is_deleted")}
    assert {r[0] for r in sample["rows"]} <= live
    assert sample["evidence"]["source_batch"]
    (event,) = tools.audit.events
    assert (event.surface, event.dataset, event.error_code) == ("mcp", "workloads", None)
    assert event.fingerprint == answer.compiled.fingerprint


async def test_a_sample_by_name_takes_a_dataset_and_the_role_budget(tools, demo):
    by_name = await tools.call("ontoos_catalog", {"name": "projects", "sample": 2}, VIEWER)
    assert by_name.ok and len(by_name.envelope["data"]["sample"]["rows"]) == 2
    wide = len(demo.dataset("projects").readable_columns())
    assert len(by_name.envelope["data"]["sample"]["columns"]) == min(wide, demo.role("viewer").max_fields)
    refused = {
        "a column": await tools.call("ontoos_catalog", {"name": "namespace", "sample": 2}, VIEWER),
        "no dataset": await tools.call("ontoos_catalog", {"sample": 2}, VIEWER),
        "too many": await tools.call("ontoos_catalog", {"dataset": "workloads", "sample": 11}, VIEWER),
        "not a number": await tools.call("ontoos_catalog", {"dataset": "workloads", "sample": "3"}, VIEWER),
    }
    for why, answer in refused.items():
        assert answer.envelope["error"]["code"] == "EX102", why
        assert "sample" in answer.envelope["error"]["message"] + answer.envelope["error"]["hint"], why
    heavy = await tools.call("ontoos_catalog", {"dataset": "table_refs", "sample": 2}, Principal("ana", "analyst"))
    assert heavy.envelope["error"]["code"] == "EX406" and "has no sample" in heavy.envelope["error"]["hint"]
    hidden = await tools.call("ontoos_catalog", {"dataset": "hosts", "sample": 2}, VIEWER)  # not the viewer's
    assert hidden.envelope["error"]["code"] == "EX202"


async def test_the_get_form_takes_sample(tools):
    status, body, _ = await asgi(app_for(tools), "GET", "/api/v1/catalog", query="dataset=workloads&sample=2")
    assert status == 200 and len(body["data"]["sample"]["rows"]) == 2
    status, body, _ = await asgi(app_for(tools), "GET", "/api/v1/catalog", query="dataset=workloads&sample=two")
    assert status == 400 and body["error"]["code"] == "EX102"
