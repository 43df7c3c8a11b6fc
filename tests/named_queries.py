"""Named queries the tests share: hand-written, approved, guard-verified entries of the demo contract."""

from __future__ import annotations

# Hosts of a provider: a dataset only the engineering read set has (the viewer cannot read hosts).
HOSTS_BY_PROVIDER = {
    "id": "hosts_by_provider",
    "title": "Hosts of a provider",
    "status": "approved",
    "read_sets": ["engineering"],
    "parameters": [{"name": "provider", "type": "enum", "values": ["aws", "gcp", "azure", "onprem"]}],
    "sql": 'SELECT "h"."hostname" AS "hostname" FROM "lake"."hosts" AS "h" WHERE "h"."provider" = $1 LIMIT 51',
    "bind": ["provider"],
    "columns": ["hostname"],
    "max_rows": 50,
}
