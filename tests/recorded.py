"""What `Tools` recorded, for the tests: the audit sink as a list, and the answers the metrics counted."""

from __future__ import annotations

from typing import Any

from prometheus_client.parser import text_string_to_metric_families


class Trail:
    """The audit sink `Tools` records into (an AuditWriter's `record`), as a list."""

    def __init__(self) -> None:
        self.events: list[Any] = []

    def record(self, event) -> None:
        self.events.append(event)

    def codes(self) -> list[tuple[str, str | None]]:
        return [(e.surface, e.error_code) for e in self.events]


def answered(tools: Any) -> float:
    """How many answers `tools.metrics` has counted."""
    return sum(s.value for f in text_string_to_metric_families(tools.metrics.exposition().decode())
               for s in f.samples if s.name == "ontoos_requests_total")
