"""A named query's life in the registry file (governance/promote.py, governance/store.py):
pending -> approved -> retired, or pending -> rejected.

- approving records who and when (ISO 8601 UTC, "Z"); one's own promotion is refused
  (SELF_APPROVAL) unless the server allows it; a retired or rejected query is not approved, and an
  approved one approved again (a form sent twice) keeps its first approval;
- retiring records who and when and keeps the entry in the file; only an approved one is retired
  (a pending one is rejected instead), only a pending one is rejected (an approved one retired);
- a refused change writes nothing (the file's bytes are the same); an unknown id is UNKNOWN_QUERY;
- an entry without a status is approved in the authors' format (`version: 1`) and pending in the
  older one: `listed()` says so, the raw `entries()` leave it out, and a change writes it out;
- retired and rejected entries keep their origin fingerprint (never a candidate again), load with
  their status, and are not offered to anyone.
"""

from __future__ import annotations

import datetime as dt
import re

import pytest
import yaml

from ontoos_explore.errors import Codes, ExploreError
from ontoos_explore.governance.promote import approve, now, reject, retire
from ontoos_explore.governance.registry import Registry
from ontoos_explore.governance.store import RegistryStore, default_status

HOSTS = {
    "title": "Hosts of a provider", "read_sets": ["engineering"],
    "parameters": [{"name": "provider", "type": "enum", "values": ["aws", "gcp", "azure", "onprem"]}],
    "sql": 'SELECT "h"."hostname" AS "hostname" FROM "lake"."hosts" AS "h" WHERE "h"."provider" = $1 '
           'ORDER BY "h"."hostname" LIMIT 51',
    "bind": ["provider"], "columns": ["hostname"], "max_rows": 50,
}
UTC_SECOND = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z")


def entry(ident: str, **extra) -> dict:
    return {"id": ident, **HOSTS, **extra}


def registry(tmp_path, *entries: dict, version: int | None = None) -> RegistryStore:
    path = tmp_path / "queries.yaml"
    doc = {"version": version, "queries": list(entries)} if version is not None else {"queries": list(entries)}
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return RegistryStore(path)


def in_file(store: RegistryStore, ident: str) -> dict:
    [q] = [q for q in yaml.safe_load(store.path.read_text(encoding="utf-8"))["queries"] if q["id"] == ident]
    return q


def recent(stamp: str) -> bool:
    """An ISO 8601 UTC second within a few seconds of now."""
    at = dt.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.timezone.utc)
    return abs((dt.datetime.now(dt.timezone.utc) - at).total_seconds()) < 5


def refused_unchanged(store: RegistryStore, call, code=Codes.INVALID_REQUEST) -> ExploreError:
    before = store.path.read_bytes()
    with pytest.raises(ExploreError) as e:
        call()
    assert e.value.error_code is code
    assert store.path.read_bytes() == before  # nothing written
    return e.value


def test_now_is_an_iso_utc_second():
    stamp = now()
    assert UTC_SECOND.fullmatch(stamp) and recent(stamp)


def test_approving_a_pending_query_records_who_and_when(tmp_path):
    store = registry(tmp_path, entry("hosts_by_provider", status="pending", promoted_by="ana"))
    written = approve(store, "Hosts_By_Provider", "vic")  # the id, whatever its case
    saved = in_file(store, "hosts_by_provider")
    assert (saved["status"], saved["approved_by"], saved["promoted_by"]) == ("approved", "vic", "ana")
    assert UTC_SECOND.fullmatch(saved["approved_at"]) and recent(saved["approved_at"])
    assert written == saved


@pytest.mark.parametrize("by", ["ana", "ANA"])
def test_approving_ones_own_promotion_is_refused(tmp_path, by):
    store = registry(tmp_path, entry("hosts_by_provider", status="pending", promoted_by="ana"))
    e = refused_unchanged(store, lambda: approve(store, "hosts_by_provider", by), Codes.SELF_APPROVAL)
    assert "hosts_by_provider" in e.message


def test_approving_ones_own_promotion_is_allowed_when_the_server_says_so(tmp_path):
    store = registry(tmp_path, entry("hosts_by_provider", status="pending", promoted_by="ana"))
    approve(store, "hosts_by_provider", "ana", allow_self=True)
    saved = in_file(store, "hosts_by_provider")
    assert (saved["status"], saved["approved_by"]) == ("approved", "ana")


@pytest.mark.parametrize("status", ["retired", "rejected"])
def test_a_retired_or_rejected_query_is_not_approved(tmp_path, status):
    store = registry(tmp_path, entry("hosts_by_provider", status=status, promoted_by="ana"))
    e = refused_unchanged(store, lambda: approve(store, "hosts_by_provider", "vic"))
    assert e.message == f"'hosts_by_provider' is {status}, not pending"


def test_approving_an_approved_query_again_keeps_its_first_approval(tmp_path):
    first = entry("hosts_by_provider", status="approved", approved_by="vic", approved_at="2026-11-30T10:00:00Z")
    store = registry(tmp_path, first)
    assert approve(store, "hosts_by_provider", "zoe") == first  # a form sent twice
    assert in_file(store, "hosts_by_provider") == first


def test_retiring_an_approved_query_keeps_it_in_the_file(tmp_path):
    store = registry(tmp_path, entry("hosts_by_provider", status="approved", approved_by="vic"),
                     entry("other", status="approved"))
    retire(store, "hosts_by_provider", "zoe")
    assert [q["id"] for q in store.entries()] == ["hosts_by_provider", "other"]
    saved = in_file(store, "hosts_by_provider")
    assert (saved["status"], saved["retired_by"], saved["approved_by"]) == ("retired", "zoe", "vic")
    assert UTC_SECOND.fullmatch(saved["retired_at"]) and recent(saved["retired_at"])
    assert in_file(store, "other")["status"] == "approved"


@pytest.mark.parametrize("change, status, wanted, instead", [
    *[(retire, status, "approved", "reject") for status in ("pending", "retired", "rejected")],
    *[(reject, status, "pending", "retire") for status in ("approved", "retired", "rejected")]])
def test_a_status_changes_only_from_its_own(tmp_path, change, status, wanted, instead):
    """Only an approved query is retired (a pending one is rejected instead), only a pending one rejected."""
    store = registry(tmp_path, entry("hosts_by_provider", status=status))
    e = refused_unchanged(store, lambda: change(store, "hosts_by_provider", "zoe"))
    assert e.message == f"'hosts_by_provider' is {status}, not {wanted}"
    assert instead in e.hint


def test_rejecting_a_pending_query_records_who_and_when(tmp_path):
    store = registry(tmp_path, entry("hosts_by_provider", status="pending", promoted_by="ana"))
    reject(store, "hosts_by_provider", "ana")  # one's own promotion may be withdrawn
    saved = in_file(store, "hosts_by_provider")
    assert (saved["status"], saved["rejected_by"]) == ("rejected", "ana") and "approved_by" not in saved
    assert UTC_SECOND.fullmatch(saved["rejected_at"]) and recent(saved["rejected_at"])


@pytest.mark.parametrize("change", [approve, retire, reject])
def test_an_unknown_id_is_unknown_query(tmp_path, change):
    store = registry(tmp_path, entry("hosts_by_provider", status="pending"))
    e = refused_unchanged(store, lambda: change(store, "nope", "vic"), Codes.UNKNOWN_QUERY)
    assert "'nope'" in e.message


def test_default_status_depends_on_the_format():
    assert default_status({"version": 1, "queries": []}) == "approved"
    assert default_status({"queries": []}) == "pending"
    assert default_status({}) == "pending"


def test_in_the_authors_format_an_entry_without_status_is_approved_and_can_be_retired(tmp_path):
    store = registry(tmp_path, entry("hosts_by_provider"), version=1)
    assert "status" not in store.entries()[0]
    assert [(q["id"], q["status"]) for q in store.listed()] == [("hosts_by_provider", "approved")]
    retire(store, "hosts_by_provider", "zoe")
    saved = in_file(store, "hosts_by_provider")
    assert (saved["status"], saved["retired_by"]) == ("retired", "zoe")
    assert yaml.safe_load(store.path.read_text(encoding="utf-8"))["version"] == 1
    again = registry(tmp_path, entry("hosts_by_provider"), version=1)  # approved already: stays so
    assert approve(again, "hosts_by_provider", "vic") == entry("hosts_by_provider", status="approved")


def test_in_the_older_format_an_entry_without_status_is_pending(tmp_path):
    store = registry(tmp_path, entry("hosts_by_provider"))
    assert "status" not in store.entries()[0]
    assert [q["status"] for q in store.listed()] == ["pending"]
    refused_unchanged(store, lambda: retire(store, "hosts_by_provider", "zoe"))
    approve(store, "hosts_by_provider", "vic")
    assert in_file(store, "hosts_by_provider")["status"] == "approved"


def test_listed_keeps_a_status_the_file_gives(tmp_path):
    store = registry(tmp_path, entry("a", status="pending"), entry("b", status="retired"), entry("c"), "junk",
                     version=1)
    assert [(q["id"], q["status"]) for q in store.listed()] == [("a", "pending"), ("b", "retired"),
                                                               ("c", "approved")]


def test_retired_and_rejected_entries_keep_their_origin_fingerprint(tmp_path):
    store = registry(tmp_path, entry("a", status="approved", origin_fingerprint="aaaaaaaaaaaaaaaa"),
                     entry("b", status="pending", origin_fingerprint="bbbbbbbbbbbbbbbb"),
                     entry("c", status="pending", origin_fingerprint="cccccccccccccccc"))
    retire(store, "a", "zoe")
    reject(store, "b", "zoe")
    assert [q["status"] for q in store.listed()] == ["retired", "rejected", "pending"]
    assert store.origin_fingerprints() == {"aaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbb", "cccccccccccccccc"}


def test_retired_and_rejected_entries_load_with_their_status_and_are_not_offered(tmp_path, demo):
    store = registry(tmp_path, *(entry(i, status="pending") for i in ("live", "gone", "refused", "waiting")))
    for ident in ("live", "gone"):
        approve(store, ident, "vic")
    retire(store, "gone", "zoe")
    reject(store, "refused", "zoe")
    loaded = Registry.load(store, demo)
    assert loaded.problems == []
    assert {k: q.status for k, q in loaded.entries.items()} == {
        "live": "approved", "gone": "retired", "refused": "rejected", "waiting": "pending"}
    assert (loaded.entries["gone"].retired_by, loaded.entries["refused"].rejected_by) == ("zoe", "zoe")
    assert [q.id for q in loaded.visible("analyst")] == ["live"]
    assert loaded.visible("viewer") == []  # the viewer does not read hosts


def test_the_cli_retires_and_rejects_as_whoever_runs_it(tmp_path, capsys, demo):
    from ontoos_explore import cli

    store = registry(tmp_path, entry("hosts_by_provider", status="approved"), entry("other", status="pending"))
    for action, ident, status in (("retire", "hosts_by_provider", "retired"), ("reject", "other", "rejected")):
        code = cli.main(["queries", action, ident, "--queries", str(store.path), "--format", "json"])
        out = capsys.readouterr().out
        assert code == 0, out
        assert yaml.safe_load(out)["data"] == {status: ident, "status": status}
        saved = in_file(store, ident)
        assert saved["status"] == status and saved[f"{status}_by"].startswith("cli:")
    # a retired query does not run, and says so (before any database is asked)
    assert cli.main(["queries", "run", "hosts_by_provider", "--queries", str(store.path), "--role", "analyst",
                     "--dsn", "host=/nonexistent", "--format", "json"]) == 2
    said = yaml.safe_load(capsys.readouterr().out)["error"]
    assert said["message"] == "'hosts_by_provider' is retired: it no longer runs" and "queries show" in said["hint"]
    # a change from the wrong status is the CLI's refusal, exit 2, the file as it was
    before = store.path.read_bytes()
    assert cli.main(["queries", "retire", "other", "--queries", str(store.path), "--format", "json"]) == 2
    assert "'other' is rejected, not approved" in capsys.readouterr().out
    assert store.path.read_bytes() == before
