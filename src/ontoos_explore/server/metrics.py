"""Server, metrics: `/metrics` in the Prometheus text format, through the Prometheus client library.

    ontoos_requests_total{surface, tool, outcome, subtype}   every answer, as the audit records it
    ontoos_request_seconds{surface, tool}                    tool calls' latency (a histogram)
    ontoos_limited_total{reason}                             calls refused by a limit (RATE_LIMITED,
                                                             IN_FLIGHT, AUTH_FLOOD, MCP_SESSIONS, CONNECTIONS,
                                                             DRAINING)
    ontoos_pool_connections{state}                           size, idle, in_use, waiting (sampled)
    ontoos_audit_queue_depth, ontoos_audit_events{fate}      the audit writer: queued now; recorded,
                                                             written, dropped, rejected, lost (sampled)
    ontoos_cache_events{cache, event}                        template and cost caches' hits and misses
                                                             (sampled; a ratio is hits / (hits + misses))

`tool` is a built-in tool's name, `named_query` for a query's own tool,
`unknown` for a name no tool has, `none` for a surface's own refusal: the
labels stay few whatever callers send. Sampled values are read once a second
and at each scrape.

With `serve --workers N` the values of every worker are summed (the
library's multiprocess mode, in a directory the supervisor makes and removes:
`PROMETHEUS_MULTIPROC_DIR`), so any worker's `/metrics` speaks for the
server. `/metrics` is readable from loopback (unless the configuration says
`metrics_loopback: false`, as it must behind a proxy on the same machine) or
with the bearer token of a principal marked `metrics: true`.
"""

from __future__ import annotations

import os
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client import multiprocess

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
LIMITS = frozenset({"RATE_LIMITED", "IN_FLIGHT", "AUTH_FLOOD", "MCP_SESSIONS", "CONNECTIONS", "DRAINING"})


def multiprocess_dir() -> str | None:
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR") or None


class Metrics:
    """The server's metrics, in a registry of their own (one per app: tests build several)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter("ontoos_requests", "Answers, by surface, tool, outcome and error subtype",
                                ["surface", "tool", "outcome", "subtype"], registry=r)
        self.latency = Histogram("ontoos_request_seconds", "Tool calls' time from admission to answer",
                                 ["surface", "tool"], buckets=LATENCY_BUCKETS, registry=r)
        # each label set's child, kept (`labels()` checks and joins the values under a lock each time); the
        # label values are few (see the module), so these stay small
        self._counters: dict[tuple[str, ...], Any] = {}
        self._histograms: dict[tuple[str, ...], Any] = {}
        self.limited = Counter("ontoos_limited", "Calls refused by a limit, by reason", ["reason"], registry=r)
        self.pool = Gauge("ontoos_pool_connections", "The query pool's connections", ["state"], registry=r,
                          multiprocess_mode="livesum")
        self.audit_queue = Gauge("ontoos_audit_queue_depth", "Audit events queued, not yet written", registry=r,
                                 multiprocess_mode="livesum")
        self.audit = Gauge("ontoos_audit_events", "Audit events since start, by fate", ["fate"], registry=r,
                           multiprocess_mode="livesum")
        self.cache = Gauge("ontoos_cache_events", "Cache hits and misses since start", ["cache", "event"], registry=r,
                           multiprocess_mode="livesum")

    def answered(self, surface: str, tool: str, answer: Any, seconds: float | None = None) -> None:
        """One answer (as recorded); `seconds`: a tool call's latency."""
        error = answer.error
        if error is None:
            outcome, subtype = "ok", "none"
        else:
            code = error.error_code
            outcome = "failed" if code.type in ("internal", "network") else "refused"
            subtype = code.subtype
            if error.reason in LIMITS:
                self.limited.labels(error.reason).inc()
        counter = self._counters.get(key := (surface, tool, outcome, subtype))
        if counter is None:
            counter = self._counters[key] = self.requests.labels(*key)
        counter.inc()
        if seconds is not None:
            histogram = self._histograms.get(key := (surface, tool))
            if histogram is None:
                histogram = self._histograms[key] = self.latency.labels(*key)
            histogram.observe(seconds)

    def sample(self, tools: Any) -> None:
        """The values read rather than counted: the pool, the audit writer, the caches."""
        explorer = getattr(tools, "explorer", None)
        pool = getattr(getattr(explorer, "executor", None), "pool", None)
        if pool is not None:
            stats = pool.get_stats()
            size, idle = stats.get("pool_size", 0), stats.get("pool_available", 0)
            for state, value in (("size", size), ("idle", idle), ("in_use", max(0, size - idle)),
                                 ("waiting", stats.get("requests_waiting", 0))):
                self.pool.labels(state).set(value)
        audit = getattr(tools, "audit", None)
        if audit is not None:
            stats = audit.stats()
            self.audit_queue.set(stats["queued"])
            for fate in ("recorded", "written", "dropped", "rejected", "lost"):
                self.audit.labels(fate).set(stats[fate])
        cache = getattr(explorer, "cache", None)
        if cache is not None:
            stats = cache.stats()
            for event in ("hits", "misses", "exact_hits", "fallbacks"):
                self.cache.labels("template", event).set(stats.get(event, 0))
        costs = getattr(getattr(explorer, "executor", None), "costs", None)
        if costs is not None and hasattr(costs, "hits"):
            self.cache.labels("cost", "hits").set(costs.hits)
            self.cache.labels("cost", "misses").set(costs.misses)

    def exposition(self) -> bytes:
        """The text of /metrics: this process's, or (multiprocess mode) every worker's summed."""
        if multiprocess_dir() is None:
            return generate_latest(self.registry)
        together = CollectorRegistry()
        multiprocess.MultiProcessCollector(together)
        return generate_latest(together)


def tool_label(name: Any, built_in: Any, query_prefix: str) -> str:
    if isinstance(name, str) and name in built_in:
        return name
    if isinstance(name, str) and name.startswith(query_prefix):
        return "named_query"
    return "unknown"
