"""Evidence (evidence.py): a spec and the publish log's current batches -> meta.evidence, by its rules."""

from __future__ import annotations

import datetime as dt

import pytest

from ontoos_explore import load_contract
from ontoos_explore.evidence import Batch, EvidenceSpec, fingerprint, render, spec_for

from .conftest import ROOT

NOW = dt.datetime(2026, 9, 20, 12, 0, tzinfo=dt.timezone.utc)
H = dt.timedelta(hours=1)
SPEC = EvidenceSpec("lake", "publish_log", ("gitlab", "k8s"), threshold_s=86_400)


def batch(source: str, collected_h: float | None, published_h: float, as_of_h: float | None = None) -> Batch:
    return Batch(source, f"b-{source}-{published_h}", None if collected_h is None else NOW - collected_h * H,
                 NOW - published_h * H, None if as_of_h is None else NOW - as_of_h * H)


def test_exact_when_every_source_says_when_it_collected_and_the_times_are_the_oldest():
    ev = render(SPEC, [batch("k8s", 6, 5, 6), batch("gitlab", 9, 8, 10)], consistent=True, now=NOW)
    assert ev["freshness"] == {"class": "exact", "age_seconds": 9 * 3600, "threshold_seconds": 86_400, "fresh": True}
    assert (ev["collected_at"], ev["published_at"], ev["as_of"]) == (
        "2026-09-20T03:00:00Z", "2026-09-20T04:00:00Z", "2026-09-20T02:00:00Z")
    assert ev["consistency"] == "fixed_read"
    assert ev["source_batch"] == {"gitlab": "b-gitlab-8", "k8s": "b-k8s-5"}
    assert ev["batch_fingerprint"] == fingerprint({"k8s": "b-k8s-5", "gitlab": "b-gitlab-8"})  # order-free


def test_estimated_when_a_source_says_only_when_it_published_and_no_publish_time_passes_for_a_collection():
    ev = render(SPEC, [batch("k8s", None, 30), batch("gitlab", 9, 8)], consistent=True, now=NOW)
    assert ev["freshness"]["class"] == "estimated" and ev["freshness"]["estimated_from"] == ["k8s"]
    assert ev["freshness"]["age_seconds"] == 30 * 3600 and ev["freshness"]["fresh"] is False  # past the 24 h
    assert ev["collected_at"] is None and ev["as_of"] is None  # one source does not say
    assert ev["published_at"] == "2026-09-19T06:00:00Z"


@pytest.mark.parametrize("spec, batches, why", [
    (EvidenceSpec("lake", "publish_log", (), 100, unsourced=("hosts",)), [], "no source feeds hosts"),
    (EvidenceSpec("lake", "publish_log", ("k8s",), 100, unsourced=("hosts",)), [batch("k8s", 1, 1)],
     "no source feeds hosts"),
    (SPEC, [batch("k8s", 1, 1)], "no published batch of gitlab"),
    (SPEC, None, "the publish log was not read (missing, or not granted to the role)"),
    (None, None, "the contract names no publish log"),
], ids=["unsourced", "one-unsourced", "no-batch", "unread", "no-log"])
def test_unknown_and_unverified_when_evidence_is_missing(spec, batches, why):
    ev = render(spec, batches, consistent=True, now=NOW)
    assert ev["freshness"]["class"] == "unknown" and ev["freshness"]["unknown_because"] == why
    assert ev["freshness"]["age_seconds"] is None and ev["freshness"]["fresh"] is None
    assert ev["consistency"] == "unverified"


def test_consistency_is_fixed_read_only_when_read_in_the_rows_snapshot():
    batches = [batch("k8s", 1, 1), batch("gitlab", 1, 1)]
    assert render(SPEC, batches, consistent=False, now=NOW)["consistency"] == "unverified"
    assert render(SPEC, batches, consistent=True, now=NOW)["consistency"] == "fixed_read"


def test_a_read_on_a_standby_says_so_and_its_lag_without_touching_the_rest():
    batches = [batch("k8s", 6, 5), batch("gitlab", 9, 8)]
    on_primary = render(SPEC, batches, consistent=True, now=NOW)
    on_standby = render(SPEC, batches, consistent=True, now=NOW, replay_lag_s=2.5)
    assert on_primary["replica"] is None
    assert on_standby["replica"] == {"standby": True, "replay_lag_seconds": 2.5}
    assert {k: v for k, v in on_standby.items() if k != "replica"} == {k: v for k, v in on_primary.items()
                                                                       if k != "replica"}
    assert render(SPEC, batches, consistent=True, now=NOW)["replica"] is None  # the cached part never keeps it


def test_the_spec_reads_the_sources_of_the_datasets_and_their_parents_at_the_strictest_threshold():
    demo = load_contract(ROOT / "contracts" / "demo.yaml")
    everything = demo.scope(demo.role("admin"))
    containers = spec_for(demo, [demo.dataset("containers")], everything)
    # containers exist with their workload (k8s, 24 h) and the workload's project (gitlab)
    assert containers.sources == ("gitlab", "k8s") and containers.threshold_s == 86_400
    images = spec_for(demo, [demo.dataset("images")], everything)
    assert images.sources == ("archiver", "gitlab", "registry") and images.threshold_s == demo.evidence.threshold_s
    assert spec_for(demo, [demo.dataset("hosts")], everything).unsourced == ("hosts",)
