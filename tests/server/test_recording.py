"""Server, recording: a call's audit event queued at once, always (an answer never leaves before it);
its count and request line held back in a `counted_after_send` block until the block ends, however
it ends, and made once; a count that fails breaks no answer and loses no audit event. Real PostgreSQL (the demo lakehouse) under the calls.
(The surfaces that send first are tested where they are: tests/server/test_tools.py for REST,
tests/server/test_mcp_direct.py for a direct MCP call.)
"""

from __future__ import annotations

import asyncio

import pytest

from ontoos_explore.engine.executor import Executor
from ontoos_explore.server.config import Principal
from ontoos_explore.server.metrics import Metrics
from ontoos_explore.server.recording import counted_after_send
from ontoos_explore.server.tools import Tools
from ontoos_explore.service import Explorer
from tests.recorded import Trail, answered

pytestmark = pytest.mark.anyio

ALICE = Principal("alice", "analyst")
QUESTION = {"dataset": "workloads", "fields": ["name", "namespace"], "filter": "namespace = 'prod'", "limit": 2}


@pytest.fixture
def tools(demo, pool):
    p, settings = pool
    return Tools(demo, Explorer(demo, Executor(p, settings)), None, Trail())


async def test_a_block_holds_back_the_count_never_the_audit_event_however_it_ends(tools):
    tools.metrics = Metrics()
    with pytest.raises(RuntimeError):
        with counted_after_send():
            assert (await tools.call("ontoos_explore", QUESTION, ALICE, "rest")).ok
            assert (tools.audit.codes(), answered(tools)) == ([("rest", None)], 0)  # audited, not counted
            raise RuntimeError("the send failed")
    assert tools.audit.codes() == [("rest", None)] and answered(tools) == 1

    called = asyncio.Event()

    async def answered_then_stuck() -> None:
        with counted_after_send():
            await tools.call("ontoos_explore", {**QUESTION, "limt": 1}, ALICE, "mcp")
            called.set()
            await asyncio.Event().wait()  # a send that never completes

    task = asyncio.create_task(answered_then_stuck())
    await asyncio.wait_for(called.wait(), 30)
    assert (len(tools.audit.events), answered(tools)) == (2, 1)  # the count held back
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert tools.audit.codes() == [("rest", None), ("mcp", "EX102")] and answered(tools) == 2
    # outside a block, a call is counted before it returns
    assert (await tools.call("ontoos_catalog", {}, ALICE, "mcp")).ok
    assert len(tools.audit.events) == 3 and answered(tools) == 3

    # a task started in a block (it has a copy of the block's context) that answers after the block ended
    go = asyncio.Event()

    async def later_call() -> None:
        await go.wait()
        await tools.call("ontoos_catalog", {}, ALICE, "rest")

    with counted_after_send():
        task = asyncio.create_task(later_call())
    go.set()
    await task
    assert len(tools.audit.events) == 4 and answered(tools) == 4  # counted as it answered, not lost


class FailingOnce(Metrics):
    """Metrics whose first count fails."""

    def __init__(self) -> None:
        super().__init__()
        self.failed = False

    def answered(self, *args, **kw) -> None:
        if not self.failed:
            self.failed = True
            raise RuntimeError("a broken counter")
        super().answered(*args, **kw)


async def test_a_count_that_fails_breaks_no_answer_and_loses_no_audit_event(tools, caplog):
    tools.metrics = FailingOnce()
    with counted_after_send():  # its count fails as the block ends
        first = await tools.call("ontoos_explore", QUESTION, ALICE, "rest")
        second = await tools.call("ontoos_explore", {**QUESTION, "limit": 1}, ALICE, "rest")
    tools.metrics.failed = False  # and once more, outside a block
    third = await tools.call("ontoos_catalog", {}, ALICE, "mcp")
    assert first.ok and second.ok and third.ok
    assert [e.id for e in tools.audit.events] == [a.envelope["meta"]["exploration_id"] for a in (first, second, third)]
    assert answered(tools) == 1  # the second counted
    assert [r.getMessage() for r in caplog.records if r.name == "ontoos_explore.audit"] == [
        "could not count an answer"] * 2
