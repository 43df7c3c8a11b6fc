"""The audit spool: queued events on local disk until the store holds them (governance/audit/spool.py).

- A spooled line reads back as the event it was, whatever its text (property, derandomized); a line
  cut short reads as nothing.
- Segments go only once every event in them is settled, and none is left when all are.
- A live owner's files are never claimed; a dead owner's (a real process, killed with SIGKILL while
  its store was down) are, and the next writer writes them first, exactly once each, even those
  already committed; then the files are gone.
- A shutdown that gives up on a down store leaves its events in the spool, and the next start writes
  them.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psycopg
import pytest
from hypothesis import given, settings, strategies as st

from ontoos_explore.governance import audit
from ontoos_explore.governance.audit import AuditWriter, Spool, spool_directory
from ontoos_explore.governance.audit import spool as spool_mod
from ontoos_explore.governance.audit.spool import event_of, line_of
from tests.governance.helpers import count_events, ev, fetch_events
from tests.governance.test_audit import _down_dsn

text = st.one_of(st.none(), st.text(max_size=40))  # st.text draws lone surrogates too


@settings(max_examples=200, derandomize=True, deadline=None)
@given(principal=st.text(min_size=1, max_size=20), exploration=text, message=text,
       rows=st.one_of(st.none(), st.integers(0, 2**40)), elapsed=st.one_of(st.none(), st.floats(0, 1e6)),
       truncated=st.one_of(st.none(), st.booleans()),
       at=st.datetimes(timezones=st.just(dt.timezone.utc)))
def test_a_spooled_line_reads_back_as_its_event(principal, exploration, message, rows, elapsed, truncated, at):
    event = audit.Event(id="e1", at=at, principal=principal, role=None, surface="mcp", exploration=exploration,
                        message=message, rows=rows, elapsed_ms=elapsed, truncated=truncated)
    line = line_of(event)
    assert line.endswith(b"\n") and line.count(b"\n") == 1  # one line, whatever the text holds
    assert event_of(line) == event


def test_a_line_cut_short_or_of_another_shape_is_not_an_event():
    line = line_of(ev("spool-cut"))
    assert event_of(line[: len(line) // 2]) is None
    assert event_of(b'{"id": "x"}') is None
    assert event_of(b"[1, 2]") is None


def _balanced(stats: dict) -> bool:
    """Every event accounted for once (the audit package's identity)."""
    return stats["recorded"] + stats["recovered"] == sum(
        stats[k] for k in ("written", "queued", "dropped", "rejected", "lost", "left"))


def _files(directory: Path) -> list[str]:
    return sorted(p.name.split(".", 1)[1] for p in directory.glob("*.jsonl"))


def test_segments_go_once_all_their_events_are_settled(tmp_path, monkeypatch):
    monkeypatch.setattr(spool_mod, "SEGMENT_EVENTS", 3)
    spool = Spool(tmp_path)
    for i in range(7):
        spool.append(ev("spool-seg", rows=i))
    assert _files(tmp_path) == ["000001.jsonl", "000002.jsonl", "000003.jsonl"]
    spool.settled(2)  # the first segment still holds an unsettled event
    assert len(_files(tmp_path)) == 3
    spool.settled(5)
    assert _files(tmp_path) == ["000002.jsonl", "000003.jsonl"]
    spool.settled(7)
    assert _files(tmp_path) == []
    spool.append(ev("spool-seg", rows=7))  # a new segment for what comes next
    assert _files(tmp_path) == ["000004.jsonl"]
    spool.settled(8)
    spool.close()
    assert list(tmp_path.iterdir()) == []  # nothing left behind, not even the lock


def test_a_live_owner_is_never_claimed(tmp_path):
    alive = Spool(tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == [f"{alive.owner}.lock"]  # locked before it was named .lock
    alive.append(ev("spool-live"))
    other = Spool(tmp_path)
    assert other.claim() == []
    alive.close()  # still holding an unsettled event: its files stay, and now they may be claimed
    (claimed,) = other.claim()
    assert [e.principal for e in claimed.events] == ["spool-live"] and claimed.skipped == 0
    claimed.release()
    other.close()
    assert list(tmp_path.iterdir()) == []


KILLED = textwrap.dedent("""
    import asyncio, sys, uuid, datetime as dt
    from pathlib import Path
    from ontoos_explore.governance.audit import AuditWriter, Event, Spool

    async def main():
        writer = AuditWriter(sys.argv[1], interval=0.05, retry=0.1, spool=Spool(Path(sys.argv[2])))
        await writer.start()
        for i in range(int(sys.argv[3])):
            writer.record(Event(id=f"killed-{i:04d}", at=dt.datetime.now(dt.timezone.utc), principal="spool-killed",
                                role=None, surface="rest", rows=i))
        print("recorded", flush=True)
        await asyncio.sleep(600)

    asyncio.run(main())
""")


def _killed_with_events(down_dsn: str, directory: Path, n: int) -> None:
    """A real writer process records `n` events while its store is down, and is killed outright."""
    proc = subprocess.Popen([sys.executable, "-c", KILLED, down_dsn, str(directory), str(n)],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "recorded"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)


@pytest.mark.anyio
async def test_what_a_killed_process_queued_is_written_by_the_next_start_exactly_once(pg_dsn, tmp_path):
    directory, nothing = tmp_path / "spool", tmp_path / "nothing"
    nothing.mkdir()
    with psycopg.connect(pg_dsn) as conn:
        audit.ensure_schema(conn)
    _killed_with_events(_down_dsn(pg_dsn, nothing), directory, 40)
    assert count_events(pg_dsn, "principal = 'spool-killed'") == 0  # the store never had them
    assert len(list(directory.glob("*.jsonl"))) == 1
    # a few were committed before the kill (as if the answer of a batch were lost): not doubled
    leftover = [event_of(line) for line in next(directory.glob("*.jsonl")).read_bytes().splitlines()]
    audit.record_sync(pg_dsn, leftover[:5])

    writer = AuditWriter(pg_dsn, interval=0.05, batch=8, spool=Spool(directory))  # the 40 in 5 batches
    await writer.start()
    try:
        deadline = time.monotonic() + 30
        while count_events(pg_dsn, "principal = 'spool-killed'") < 40 and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        writer.record(ev("spool-after"))  # its own events follow
        deadline = time.monotonic() + 30
        while writer.written < 41 and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
    finally:
        await writer.close()
    rows = fetch_events(pg_dsn, "principal = 'spool-killed'")
    assert sorted(r["id"] for r in rows) == [f"killed-{i:04d}" for i in range(40)]
    assert sorted(r["rows"] for r in rows) == list(range(40))
    stats = writer.stats()
    assert (stats["recovered"], stats["lost"], stats["left"], stats["queued"]) == (40, 0, 0, 0)
    assert _balanced(stats) and stats["recorded"] + stats["recovered"] == stats["written"] + stats["rejected"]
    assert count_events(pg_dsn, "principal = 'spool-after'") == 1
    assert list(directory.iterdir()) == []  # the dead owner's files and this writer's own: all gone


@pytest.mark.anyio
async def test_a_shutdown_that_gives_up_leaves_its_events_for_the_next_start(pg_dsn, tmp_path):
    directory, nothing = tmp_path / "spool", tmp_path / "nothing"
    nothing.mkdir()
    writer = AuditWriter(_down_dsn(pg_dsn, nothing), interval=0.05, retry=0.1, spool=Spool(directory))
    await writer.start()
    events = [ev("spool-left", rows=i) for i in range(6)]
    for e in events:
        writer.record(e)
    await asyncio.wait_for(writer.close(timeout=1.0), 30)
    assert (writer.written, writer.lost, writer.left, writer.queued) == (0, 0, 6, 0) and _balanced(writer.stats())
    assert list(directory.glob("*.jsonl")) and list(directory.glob("*.lock"))

    again = AuditWriter(pg_dsn, interval=0.05, spool=Spool(directory))
    await again.start()
    await again.close()
    assert again.recovered == 6 and _balanced(again.stats())
    assert sorted(r["id"] for r in fetch_events(pg_dsn, "principal = 'spool-left'")) == sorted(e.id for e in events)
    assert list(directory.iterdir()) == []


def test_the_spool_of_a_store_is_named_by_the_store_never_by_its_password(tmp_path):
    a = spool_directory(tmp_path, "postgresql://u:one@db.example:5432/audit")
    assert a == spool_directory(tmp_path, "postgresql://u:two@db.example:5432/audit")
    assert a != spool_directory(tmp_path, "postgresql://u:one@db.example:5432/other")
    assert a.parent == tmp_path and "one" not in a.name


def test_a_spool_that_cannot_be_written_is_given_up_without_raising(tmp_path):
    spool = Spool(tmp_path)
    spool.append(ev("spool-broken"))
    os.close(spool._fd)  # the descriptor goes away under it (a full disk fails the same way: OSError)
    spool.append(ev("spool-broken"))
    assert spool.broken and spool.appended == 1
    spool.settled(1)  # a broken spool deletes nothing: what it holds is written again by the next start
    assert len(list(tmp_path.glob("*.jsonl"))) == 1
