"""Names, every stage: identifier validation, ASCII case folding, did-you-mean.

Names are checked before they are normalized: an exact match of
`[A-Za-z_][A-Za-z0-9_]{0,62}` (PostgreSQL truncates identifiers at 63 bytes),
then folded with an ASCII-only lower-casing (Python's `str.lower()` folds
non-ASCII letters that PostgreSQL would not).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable

MAX_NAME = 63
IDENT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
CUTOFF = 0.6  # difflib ratio below which a name is not "close"
MARGIN = 0.1  # names within this of the best match are equally likely
_FOLD = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def is_identifier(name: object) -> bool:
    return isinstance(name, str) and IDENT_RE.fullmatch(name) is not None


def fold(name: str) -> str:
    """ASCII-only case fold: the key every contract lookup uses."""
    return name.translate(_FOLD)


def close_matches(name: str, candidates: Iterable[str], n: int = 3) -> list[str]:
    """Candidates close to `name`, compared case-insensitively, best first.

    Only those about as close as the best one are kept, so a clear winner
    comes back alone (`namspace` -> `namespace`, not also `name`).
    """
    by_key: dict[str, str] = {}
    for c in candidates:
        by_key.setdefault(fold(c), c)
    key = fold(name)
    scored = []
    for k, original in by_key.items():
        m = difflib.SequenceMatcher(None, key, k)
        if m.real_quick_ratio() >= CUTOFF and m.quick_ratio() >= CUTOFF:
            r = m.ratio()
            if r >= CUTOFF:
                scored.append((-r, k, original))
    scored.sort()
    if not scored:
        return []
    best = -scored[0][0]
    return [orig for neg, _, orig in scored[:n] if best - (-neg) <= MARGIN]


def quote_list(names: Iterable[str], limit: int = 40) -> str:
    items = sorted(names)
    shown = ", ".join(items[:limit])
    if len(items) > limit:
        shown += f", ... ({len(items) - limit} more)"
    return shown


def did_you_mean(name: str, candidates: Iterable[str], what: str) -> tuple[str, str | None]:
    """A hint for an unknown `name`, and the single obvious replacement if there is one.

    `candidates` must already be only what the caller may see.
    """
    pool = list(candidates)
    close = close_matches(name, pool)
    listing = f"{what}: {quote_list(pool)}" if pool else f"there are no {what}"
    if close:
        suggestion = " or ".join(f"'{c}'" for c in close)
        hint = f"did you mean {suggestion}? {listing}"
    else:
        hint = listing
    single = close[0] if len(close) == 1 else None
    return hint, single
