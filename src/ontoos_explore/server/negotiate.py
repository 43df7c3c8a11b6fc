"""Server, what a REST answer is sent as: JSON (the envelope) or CSV (the rows), and the catalog's ETag.

`choose(accept, offered, format_)` picks the media type of an answer from the
`Accept` header (q-values, `type/*`, `*/*`; none at all is JSON) and the
`format=csv|json` query parameter, which wins: a browser link or `curl` can ask
for CSV without a header. None when nothing offered is acceptable: the request
is refused 406 before anything runs.

`csv_response(answer)` is a successful answer's rows as CSV (RFC 4180, a header
row, UTF-8): NULL an empty field, lists and objects their JSON text. What the
envelope's `meta` says travels in headers: `X-Ontoos-Exploration-Id`,
`X-Ontoos-Rows`, `X-Ontoos-Truncated`, `X-Ontoos-Next-Cursor` (when truncated
with one), and `X-Ontoos-Evidence` (the evidence as compact ASCII JSON).
Refusals stay the JSON envelope, whatever was asked for.

`etag(envelope)` is a weak validator of what an answer says (its `data` and the
contract hash, not the per-request id): the catalog's answers carry it, and
`If-None-Match` naming it is answered 304 with no body.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
from typing import Any

from starlette.responses import Response

JSON, CSV = "application/json", "text/csv"
FORMATS = {"json": JSON, "csv": CSV}


def choose(accept: str | None, offered: tuple[str, ...], format_: str | None = None) -> str | None:
    """The media type to answer with, of `offered` (the first is the default), or None (406)."""
    if format_ is not None:
        wanted = FORMATS.get(format_.strip().lower())
        return wanted if wanted in offered else None
    if not accept or not accept.strip():
        return offered[0]
    ranked: list[tuple[float, int, str]] = []
    for i, part in enumerate(accept.split(",")):
        media, _, params = part.strip().partition(";")
        q = 1.0
        for p in params.split(";"):
            key, _, value = p.strip().partition("=")
            if key.strip().lower() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        if q > 0:
            ranked.append((q, -i, media.strip().lower()))
    for _, _, media in sorted(ranked, reverse=True):
        for kind in offered:
            if media in (kind, "*/*") or (media.endswith("/*") and kind.startswith(media[:-1])):
                return kind
    return None


def csv_cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, (list, dict)):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


CSV_MEDIA = "text/csv; charset=utf-8; header=present"


def csv_body(columns, rows, cell=csv_cell) -> bytes:
    """RFC 4180 text, UTF-8: a header row of `columns`, then each row's values through `cell`."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(columns)
    writer.writerows([cell(v) for v in row] for row in rows)
    return out.getvalue().encode("utf-8")


def csv_response(envelope: dict[str, Any]) -> Response:
    data, meta = envelope.get("data", {}), envelope.get("meta", {})
    headers = {"X-Ontoos-Exploration-Id": str(meta.get("exploration_id", "")),
               "X-Ontoos-Rows": str(meta.get("rows", len(data.get("rows", [])))),
               "X-Ontoos-Truncated": "true" if meta.get("truncated") else "false"}
    if meta.get("next_cursor"):
        headers["X-Ontoos-Next-Cursor"] = str(meta["next_cursor"])
    if meta.get("evidence") is not None:
        headers["X-Ontoos-Evidence"] = json.dumps(meta["evidence"], separators=(",", ":"), ensure_ascii=True)
    return Response(csv_body(data.get("columns", []), data.get("rows", [])), media_type=CSV_MEDIA, headers=headers)


def etag(envelope: dict[str, Any]) -> str:
    said = json.dumps([envelope.get("data"), envelope.get("meta", {}).get("contract_hash")], sort_keys=True,
                      separators=(",", ":"), default=str)
    return 'W/"' + hashlib.sha256(said.encode()).hexdigest()[:32] + '"'


def matches(if_none_match: str | None, tag: str) -> bool:
    """Whether If-None-Match names `tag` (weak comparison, as RFC 9110 asks for it)."""
    if not if_none_match:
        return False
    bare = tag.removeprefix("W/")
    return any(t.strip() == "*" or t.strip().removeprefix("W/") == bare for t in if_none_match.split(","))
