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

# A query of the published read set, in the authors' format: the workloads of a kind (the tests of many
# processes serve it, and change the registry it is in).
WORKLOADS_OF_A_KIND = {
    "id": "kinds", "title": "Workloads of a kind", "read_sets": ["published"],
    "params": [{"name": "kind", "type": "string"}],
    "constants": [{"name": "kept", "type": "boolean", "value": False}],
    "sql": "SELECT w.name AS name FROM lake.k8s_workloads AS w INNER JOIN lake.gitlab_projects AS p "
           "ON p.project_id = w.project_id WHERE w.kind = :kind AND w.is_deleted = :kept "
           "AND p.is_deleted = :kept ORDER BY w.workload_id LIMIT 6"}

# Config keys as a named query must read them: a config entry exists only with its workload, a workload
# only with its project (the contract's exists_with), so both are joined, and every always-filter holds:
# `KEPT.format(n=n)` ANDs them all to `$n`, bound to false.
CONFIG_KEYS_FROM = ("FROM lake.config_entries c INNER JOIN lake.k8s_workloads w ON w.workload_id = c.workload_id "
                    "INNER JOIN lake.gitlab_projects p ON p.project_id = w.project_id")
PARENTS_KEPT = "w.is_deleted = ${n} AND p.is_deleted = ${n}"
KEPT = "c.is_sensitive = ${n} AND " + PARENTS_KEPT

# The demo registry's queries (data/demo_queries.yaml) as each role's tools/list shows them: after the
# built-in tools, by id. The engineering read set's two are the analyst's and the admin's only.
DEMO_QUERY_TOOLS = {
    "viewer": ["ontoos_q_images_built_in_window", "ontoos_q_languages_by_group", "ontoos_q_memory_hungry_containers",
               "ontoos_q_project_footprint", "ontoos_q_workloads_in_namespace"],
    "analyst": ["ontoos_q_hosts_by_provider", "ontoos_q_images_built_in_window", "ontoos_q_languages_by_group",
                "ontoos_q_memory_hungry_containers", "ontoos_q_project_footprint",
                "ontoos_q_table_change_blast_radius", "ontoos_q_workloads_in_namespace"],
}
