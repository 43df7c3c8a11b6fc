"""The registry store (governance/store.py): the one reader and writer of the registry file, and
the live registry the servers serve from.

- a write replaces the file atomically: no temporary file is left, the mode is kept, a failure
  half-way leaves the old file as it was;
- an id already there is refused (whatever its case); an entry that is there is changed (`update`), an unknown one is UNKNOWN_QUERY;
- writers in parallel lose nothing (they take turns);
- a file that is not YAML, or not a mapping with a `queries` list, is refused naming the file
  and line, and nothing is written over it;
- every write is a new stamp (one stat tells a change);
- the live registry serves a change once it is checked, keeps the last good registry while the
  file cannot be read (logging why, once), and serves none once the file is gone.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
import yaml

from ontoos_explore.errors import ExploreError
from ontoos_explore.governance.registry import Registry
from ontoos_explore.governance.store import LiveRegistry, RegistryFileError, RegistryStore
from tests.governance.helpers import in_threads

HOSTS = {
    "title": "Hosts of a provider", "status": "pending", "read_sets": ["engineering"],
    "parameters": [{"name": "provider", "type": "enum", "values": ["aws", "gcp", "azure", "onprem"]}],
    "sql": 'SELECT "h"."hostname" AS "hostname" FROM "lake"."hosts" AS "h" WHERE "h"."provider" = $1 '
           'ORDER BY "h"."hostname" LIMIT 51',
    "bind": ["provider"], "columns": ["hostname"], "max_rows": 50,
}


def status_to(status: str):
    """A change of the status only (the lifecycle's own checks are governance/promote.py's)."""
    return lambda q: q.__setitem__("status", status)


def entry(ident: str, **extra) -> dict:
    return {"id": ident, **HOSTS, **extra}


@pytest.fixture
def store(tmp_path) -> RegistryStore:
    return RegistryStore(tmp_path / "queries.yaml")


def listing(path: Path) -> list[str]:
    return sorted(p.name for p in path.parent.iterdir())


# ---------------------------------------------------------------- reading and writing


def test_a_missing_file_is_an_empty_registry_and_the_first_add_makes_it(tmp_path):
    store = RegistryStore(tmp_path / "new" / "queries.yaml")
    assert store.entries() == [] and store.stamp() is None and store.origin_fingerprints() == frozenset()
    store.add(entry("hosts_by_provider", origin_fingerprint="abc123"))
    assert [q["id"] for q in store.entries()] == ["hosts_by_provider"]
    assert store.origin_fingerprints() == {"abc123"}
    assert yaml.safe_load(store.path.read_text(encoding="utf-8"))["queries"][0]["title"] == "Hosts of a provider"
    assert RegistryStore(None).entries() == []


def test_writes_are_atomic_and_leave_no_temporary_file(store):
    store.add(entry("a"))
    store.path.chmod(0o640)
    store.add(entry("b"))
    store.update("B", status_to("approved"))
    assert listing(store.path) == ["queries.yaml"]
    assert oct(store.path.stat().st_mode & 0o777) == oct(0o640)  # the registry's own mode is kept
    assert [(q["id"], q["status"]) for q in store.entries()] == [("a", "pending"), ("b", "approved")]


def test_a_write_that_fails_half_way_leaves_the_old_file_and_no_temporary_file(store, monkeypatch):
    store.add(entry("a"))
    before = store.path.read_bytes()

    def fail(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OSError):
        store.add(entry("b"))
    monkeypatch.undo()
    assert store.path.read_bytes() == before
    assert listing(store.path) == ["queries.yaml"]


def test_an_id_already_there_is_refused_whatever_its_case(store):
    store.add(entry("hosts_by_provider"))
    before = store.path.read_bytes()
    with pytest.raises(ExploreError) as e:
        store.add(entry("Hosts_By_Provider"))
    assert e.value.code == "EX102" and "already has a query 'Hosts_By_Provider'" in e.value.message
    assert store.path.read_bytes() == before


def test_a_status_is_set_only_on_an_entry_that_is_there(store):
    store.add(entry("a"))
    store.update("A", status_to("approved"))
    assert store.entries()[0]["status"] == "approved"
    before = store.path.read_bytes()
    with pytest.raises(ExploreError) as e:
        store.update("nope", status_to("approved"))
    assert e.value.code == "EX208" and store.path.read_bytes() == before


def test_writers_in_parallel_take_turns_and_lose_nothing(store):
    def writer(n: int) -> None:
        for i in range(10):
            RegistryStore(store.path).add(entry(f"q_{n}_{i}"))

    assert in_threads(writer, 6) == []
    assert sorted(q["id"] for q in store.entries()) == sorted(f"q_{n}_{i}" for n in range(6) for i in range(10))
    assert listing(store.path) == ["queries.yaml"]


@pytest.mark.parametrize(("text", "says"), [
    ("queries:\n  - id: a\n    title: x: y\n", "line 3: mapping values are not allowed here"),
    ("- just\n- a list\n", "not a mapping"),
    ("queries: 5\n", "'queries' is not a list"),
    (b"queries: \xff\xfe\n", "not UTF-8"),
])
def test_a_file_that_cannot_be_read_is_refused_and_never_written_over(store, text, says):
    if isinstance(text, str):
        store.path.write_text(text, encoding="utf-8")
    else:
        store.path.write_bytes(text)
    before = store.path.read_bytes()
    for act in (store.entries, lambda: store.add(entry("a")), lambda: store.update("a", status_to("approved"))):
        with pytest.raises(RegistryFileError) as e:
            act()
        assert e.value.code == "EX102" and "queries.yaml" in e.value.message and says in e.value.message
        assert str(store.path.parent) not in e.value.message  # the file's name, not the server's directories
        assert "nothing was written" in e.value.hint
    assert store.path.read_bytes() == before


def test_every_write_is_a_new_stamp_even_with_the_same_bytes(store):
    store.add(entry("a"))
    first = store.stamp()
    assert store.stamp() == first  # nothing changed: the same stamp
    store.update("a", status_to("pending"))  # the same bytes again
    assert store.stamp() != first
    assert store.read()[1] == store.stamp()


def test_registry_load_reads_through_the_store(store, demo):
    store.add(entry("hosts_by_provider", status="approved"))
    assert list(Registry.load(store, demo).entries) == ["hosts_by_provider"]
    assert list(Registry.load(store.path, demo).entries) == ["hosts_by_provider"]
    assert Registry.load(None, demo).entries == {}


# ---------------------------------------------------------------- the live registry


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_live_registry_serves_a_change_once_it_checks(store, demo):
    store.add(entry("hosts_by_provider"))
    clock = Clock()
    live = LiveRegistry(store, demo, interval=0.5, clock=clock)
    assert live.visible("analyst") == []  # pending
    first = live.current()
    clock.now += 1
    assert live.current() is first  # unchanged: one stat, no reload
    RegistryStore(store.path).update("hosts_by_provider", status_to("approved"))  # as another process would
    clock.now += 0.2
    assert live.current() is first  # checked at most every 0.5 s
    clock.now += 0.4
    assert [q.id for q in live.visible("analyst")] == ["hosts_by_provider"]
    assert live.visible("viewer") == []  # the viewer does not read hosts
    RegistryStore(store.path).add(entry("second", status="approved"))
    assert live.refresh() is True  # a check now (the dashboard's, after its own change)
    assert sorted(live.entries) == ["hosts_by_provider", "second"]


def test_a_file_that_cannot_be_read_keeps_the_last_good_registry(store, demo, caplog):
    store.add(entry("hosts_by_provider", status="approved"))
    clock = Clock()
    live = LiveRegistry(store, demo, interval=0.5, clock=clock)
    good = live.current()
    store.path.write_text("queries: [unclosed\n", encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="ontoos_explore.registry"):
        for _ in range(3):
            clock.now += 1
            assert live.current() is good and [q.id for q in live.visible("analyst")] == ["hosts_by_provider"]
    warnings = [r.getMessage() for r in caplog.records if "cannot be read" in r.getMessage()]
    assert len(warnings) == 1 and "still serving the 1 named queries read before" in warnings[0]  # once per version
    assert isinstance(live.error, RegistryFileError)
    store.path.write_text(yaml.safe_dump({"queries": [entry("fixed", status="approved")]}), encoding="utf-8")
    clock.now += 1
    assert [q.id for q in live.visible("analyst")] == ["fixed"] and live.error is None


def test_a_broken_entry_is_skipped_on_reload_and_a_removed_file_serves_none(store, demo):
    store.add(entry("hosts_by_provider", status="approved"))
    clock = Clock()
    live = LiveRegistry(store, demo, interval=0.5, clock=clock)
    store.add(entry("deletes", status="approved", sql="DELETE FROM lake.hosts", bind=[], parameters=[]))
    clock.now += 1
    assert list(live.entries) == ["hosts_by_provider"] and [i for i, _ in live.problems] == ["deletes"]
    store.path.unlink()
    clock.now += 1
    assert live.entries == {} and live.visible("analyst") == []


def test_a_live_registry_starts_from_a_file_that_cannot_be_read_with_none(store, demo):
    store.path.write_text("{{{", encoding="utf-8")
    live = LiveRegistry(store, demo)
    assert live.entries == {} and isinstance(live.error, RegistryFileError)
