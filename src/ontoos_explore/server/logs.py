"""Server, logs: stderr as text (the default) or as JSON lines, one per request with its exploration id.

`ONTOOS_LOG_FORMAT=json` makes every log record one JSON object on a line of
stderr (`ts`, `level`, `logger`, `message`, and a record's own fields), the
HTTP server's and the operator's lines (`say`: where it listens, its contract)
too, and adds one `request` line per answer (`request`):

    {"ts": "...", "level": "INFO", "logger": "ontoos_explore.requests", "message": "request",
     "exploration_id": "...", "surface": "rest", "tool": "ontoos_explore", "principal": "alice",
     "role": "analyst", "outcome": "ok", "status": 200, "code": null, "subtype": null, "rows": 3,
     "truncated": false, "elapsed_ms": 1.9}

The line holds what the audit holds of the answer, never the exploration's
text or a value; the audit stays the record.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import sys
from typing import Any

REQUESTS = logging.getLogger("ontoos_explore.requests")
_JSON = {"on": False}  # whether to_stderr made the logs JSON lines (the request lines are for those only)
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime"}


class JsonLines(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": dt.datetime.fromtimestamp(record.created, dt.timezone.utc).isoformat(timespec="milliseconds"),
            "level": record.levelname, "logger": record.name, "message": record.getMessage()}
        out.update({k: v for k, v in vars(record).items() if k not in _STANDARD and not k.startswith("_")})
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str, ensure_ascii=False)


def to_stderr(level: str = "WARNING", fmt: str = "text") -> None:
    """stdio carries the protocol on stdout: everything else goes to stderr, as text or JSON lines."""
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonLines())
        REQUESTS.setLevel(logging.INFO)
        _JSON["on"] = True
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)


def say(text: str, level: str = "INFO") -> None:
    """A line the server says to its operator (where it listens, its contract and drift, draining, a
    worker replaced, a warning of its configuration): `ontoos: text` on stderr, or, with JSON logs, a
    JSON line like every other (logger `ontoos_explore.server`), so a log shipper reads one format."""
    if _JSON["on"]:
        line = json.dumps({"ts": dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds"),
                           "level": level, "logger": "ontoos_explore.server", "message": text}, ensure_ascii=False)
    else:
        line = f"ontoos: {text}"
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def request(answer: Any, principal: Any, surface: str, tool: str, seconds: float | None) -> None:
    """The answer's request line (only when JSON logs are on: the requests logger is then at INFO)."""
    if not _JSON["on"] or not REQUESTS.isEnabledFor(logging.INFO):
        return
    meta = answer.envelope.get("meta") or {}
    error = answer.error
    REQUESTS.info("request", extra={
        "exploration_id": meta.get("exploration_id"), "surface": surface, "tool": tool,
        "principal": getattr(principal, "name", None), "role": getattr(principal, "role", None),
        "outcome": "ok" if error is None else "refused", "status": answer.status,
        "code": error.error_code.code if error else None, "subtype": error.error_code.subtype if error else None,
        "rows": meta.get("rows"), "truncated": meta.get("truncated"),
        "elapsed_ms": round(seconds * 1000, 3) if seconds is not None else None})
