"""Policy, paging: a bound exploration -> the order keys that make its order total, and whether it pages.

A truncated answer can be continued only when the order of its rows is
total: the same question asked again returns the same rows in the same
order, so page n+1 starts where page n stopped. The caller's ORDER BY keys
come first; then, without GROUP BY, each source's `key` columns (the
contract's, in the order declared: the root's, then each joined dataset's);
with GROUP BY, the grouped columns (a group is one row). A source without a
key leaves the order partial: such an answer carries no cursor. A single
aggregate row needs nothing.

These keys are the SQL's alone: the exploration's text, shape and
fingerprint are the caller's.
"""

from __future__ import annotations

from .bound import Col, OrderKey
from .scope import Binding


def tiebreak(b: Binding) -> tuple[tuple[OrderKey, ...], bool]:
    """(the keys to append to ORDER BY, whether the order is then total)."""
    ordered = {k.expr for k in b.order_by}
    if b.aggregated and not b.group_by:
        return (), True  # one row
    if b.group_by:
        return tuple(OrderKey(c, False) for c in b.group_by if c not in ordered), True
    keys: list[OrderKey] = []
    for source in b.sources():
        ds = b.datasets[source.alias]
        if not ds.key:
            return (), False
        for name in ds.key:
            col = ds.column(name)
            c = Col(source, col.name, col.type)
            if c not in ordered:
                keys.append(OrderKey(c, False))
                ordered.add(c)
    return tuple(keys), True
