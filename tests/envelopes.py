"""Envelopes the tests compare: what two answers to one question share, whenever they were given."""

from __future__ import annotations

from typing import Any

PER_CALL = ("exploration_id", "elapsed_ms", "next_cursor")  # each answer's own (a cursor is signed with its time)


def comparable(env: dict[str, Any]) -> dict[str, Any]:
    """The envelope without what differs from one call to the next: its id, its time, and its evidence's
    age (a second may pass between two calls; the batches, their times and the class stay)."""
    meta = {k: v for k, v in env.get("meta", {}).items() if k not in PER_CALL}
    if isinstance(meta.get("evidence"), dict):
        evidence = meta["evidence"]
        meta["evidence"] = {**evidence, "freshness": {k: v for k, v in evidence["freshness"].items()
                                                      if k != "age_seconds"}}
    return {**env, "meta": meta}
