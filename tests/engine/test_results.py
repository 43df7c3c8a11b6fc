"""Golden results: explorations on the seeded demo lakehouse give exactly these rows."""

from __future__ import annotations

import pytest
import yaml

from ontoos_explore.service import Explorer

from ..conftest import CASES, DEMO_SCALE, DEMO_SEED, executor_for

RESULTS = yaml.safe_load((CASES / "results.yaml").read_text())
pytestmark = pytest.mark.anyio


def test_the_goldens_were_made_on_the_fixture_data():
    assert (DEMO_SCALE, DEMO_SEED) == (1.0, 7) and len(RESULTS) >= 8


@pytest.mark.parametrize("case", RESULTS, ids=[c["id"] for c in RESULTS])
async def test_result(case, pg_dsn, demo):
    async with executor_for(pg_dsn, demo, pool_max=1) as executor:
        answer = await Explorer(demo, executor).explore(case["source"], case["role"])
    assert answer.ok, answer.envelope
    assert answer.envelope["data"]["columns"] == case["columns"]
    assert answer.envelope["data"]["rows"] == case["rows"]
    assert answer.envelope["meta"]["truncated"] == case["truncated"]
