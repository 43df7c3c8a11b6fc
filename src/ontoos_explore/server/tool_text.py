"""Server, MCP: the text a tool result carries beside its structured content.

A successful call's result holds the envelope twice: as structured content
(for programs: every row) and as JSON text in its content (for the clients
and models that read only text). For most answers that costs little. For a
large one it doubled the bytes on the wire and the encoding work, and gave a
model more text than any host passes it (a 5,000-row answer is some 100,000
tokens of JSON). So the text holds the whole envelope up to `TEXT_BYTES`;
past that, the envelope with the first rows that fit, and a `text` member
saying how many it shows of how many and where the rest is. The structured
content always holds the whole envelope.

A client of a protocol version before 2025-06-18 knows no structured
content: the text is all it gets, so it gets the whole envelope
(`knows_structured`).
"""

from __future__ import annotations

import math
from typing import Any

from ..jsontext import dumps

TEXT_BYTES = 12_000  # characters of JSON text, about 3,000 tokens: the most a result's text holds
SAMPLE_ROWS = 64  # rows whose text is measured to estimate how many fit
WHOLE_SLACK = 1.25  # the whole is encoded to see if it fits when the sample's estimate is within this of `most`
WITHOUT_STRUCTURED = frozenset({"2024-11-05", "2025-03-26"})  # protocol versions before structured content


def knows_structured(protocol_version: str | None) -> bool:
    """Whether a client of `protocol_version` reads structured content (None: unknown, taken as yes)."""
    return protocol_version not in WITHOUT_STRUCTURED


def text_of(envelope: dict[str, Any], most: int | None = TEXT_BYTES) -> str:
    """The envelope as JSON text: whole when it fits in `most` characters (or `most` is None), else with
    the longest prefix of its rows that fits and a `text` member that says so. (Past SAMPLE_ROWS rows
    the whole is tried when the first rows put it within WHOLE_SLACK of `most`: rows far shorter further
    on can leave a whole that would have fit cut.)"""
    data = envelope.get("data")
    rows = data.get("rows") if isinstance(data, dict) else None
    if most is None or not isinstance(rows, list) or len(rows) <= 1:
        return dumps(envelope)
    sample = rows[:SAMPLE_ROWS]
    per_row = (len(dumps(sample)) - 1) / len(sample)  # each row and its comma
    # a sample's rows or fewer: the whole costs what measuring would; more: only if it may fit
    if len(rows) <= SAMPLE_ROWS or (len(dumps({**envelope, "data": {**data, "rows": []}}))
                                    + per_row * len(rows) <= most * WHOLE_SLACK):
        whole = dumps(envelope)
        if len(whole) <= most:
            return whole
    head = len(dumps({**envelope, "data": {**data, "rows": []}, "text": _said(len(rows), len(rows))}))

    def render(k: int) -> str:
        return dumps({**envelope, "data": {**data, "rows": rows[:k]}, "text": _said(k, len(rows))})

    shown = max(0, min(len(rows) - 1, int((most - head) / max(per_row, 1.0))))
    text = render(shown)
    while len(text) > most and shown > 0:  # the sample ran short of the rows further on
        shown = max(0, shown - max(1, math.ceil((len(text) - most) / max(per_row, 1.0))))
        text = render(shown)
    room, more = most - len(text), shown  # then the rows that still fit, one by one
    while more < len(rows) - 1 and room > 0:
        cost = len(dumps(rows[more])) + 1
        if cost > room:
            break
        room, more = room - cost, more + 1
    while more > shown:  # the count said twice may have grown a digit
        grown = render(more)
        if len(grown) <= most:
            return grown
        more -= 1
    return text


def _said(shown: int, rows: int) -> dict[str, Any]:
    return {"rows_shown": shown, "rows": rows,
            "note": f"this text shows the first {shown} of the answer's {rows} rows; the result's structured "
                    "content holds them all (or ask for fewer rows or fields to read them all here)"}
