"""CLI, a refusal for a person at a terminal: a sentence on stderr instead of an envelope on stdout.

    error: 'namspace' is not a readable column of workloads
      explore workloads fields namspace
                               ^
    hint: did you mean 'namespace'?

`main` uses it when stdout is a terminal and the command was not asked for
`--format json`; piped, or asked for JSON, the envelope goes to stdout as
always (a script reads the same bytes it always did). The exit code is the
same either way. The caret is drawn under the envelope's `position` in the
exploration's text when the command line gave the text (`-q`).
"""

from __future__ import annotations

import json
from typing import Any


def refusal_text(envelope: dict[str, Any], source: str | None = None) -> str:
    err = envelope.get("error", {})
    lines = [f"error: {err.get('message', 'refused')}"]
    position = err.get("position") or {}
    if source and position.get("line") and position.get("column"):
        text_lines = source.splitlines() or [""]
        line_no = min(max(1, int(position["line"])), len(text_lines))
        text = text_lines[line_no - 1]
        column = min(max(1, int(position["column"])), len(text) + 1)
        lines += [f"  {text}", "  " + " " * (column - 1) + "^"]
    if err.get("hint"):
        lines.append(f"hint: {err['hint']}")
    if err.get("retry_with"):
        lines.append("retry with: " + json.dumps(err["retry_with"], ensure_ascii=False, separators=(", ", ": ")))
    return "\n".join(lines)
