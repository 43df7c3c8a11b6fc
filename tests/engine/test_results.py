"""Golden results: explorations on the seeded demo lakehouse give exactly these rows."""

from __future__ import annotations

import pytest
import yaml

from ontoos_explore.engine.executor import Executor, open_pool
from ontoos_explore.engine.settings import Settings
from ontoos_explore.service import Explorer

from ..conftest import CASES, DEMO_SCALE, DEMO_SEED

RESULTS = yaml.safe_load((CASES / "results.yaml").read_text())
pytestmark = pytest.mark.anyio


def test_the_goldens_were_made_on_the_fixture_data():
    assert (DEMO_SCALE, DEMO_SEED) == (1.0, 7) and len(RESULTS) >= 8


@pytest.mark.parametrize("case", RESULTS, ids=[c["id"] for c in RESULTS])
async def test_result(case, pg_dsn, demo):
    settings = Settings(dsn=pg_dsn, pool_max=1)
    pool = await open_pool(pg_dsn, settings)
    try:
        answer = await Explorer(demo, Executor(pool, demo, settings)).explore(case["source"], case["role"])
    finally:
        await pool.close()
    assert answer.ok, answer.envelope
    assert answer.envelope["data"]["columns"] == case["columns"]
    assert answer.envelope["data"]["rows"] == case["rows"]
    assert answer.envelope["meta"]["truncated"] == case["truncated"]
