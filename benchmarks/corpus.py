"""The benchmark corpus: explorations over the demo contract, each in three languages.

Every entry is one question asked three ways:

- `text`: our exploration language (compiled, guarded, run by ontoos-explore),
- `sql`: the hand-written PostgreSQL a person would write for the same rows
  (the "restricted raw SQL" alternative: parse it with sqlglot and walk it),
- `prql`: the same question in PRQL (compiled to SQL by prqlc).

The three are equivalent on the demo lakehouse: `python -m benchmarks.corpus`
runs all three on the scale-1 demo and compares the rows (the contract's
always-filters are written out in the SQL and PRQL forms, as a person writing
raw SQL against these tables would have to).

`kind` is the shape: small, join1/join2/join3 (relations followed),
aggregate, in_list (100-200 values), predicates (many predicates), mixed.
A few long lists are built from the fixed vocabularies below, deterministically,
so the data stays readable; everything else is written out.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Case:
    id: str
    kind: str
    role: str
    text: str
    sql: str
    prql: str


# ---------------------------------------------------------------- fixed vocabularies for the long lists

DOMAINS = ("order", "payment", "ledger", "invoice", "customer", "account", "catalog", "inventory", "pricing",
           "shipping", "notification", "search", "recommendation", "fraud", "risk", "settlement", "billing",
           "identity", "session", "report", "audit", "feature-flag", "checkout", "cart", "merchant", "kyc",
           "fx-rate", "loyalty", "promotion", "review", "media", "document", "scheduler", "workflow",
           "analytics", "ingest", "export", "refund", "subscription", "wallet")
SUFFIXES = ("service", "api", "core", "gateway", "worker", "consumer", "etl", "web", "ui", "db", "jobs", "lib", "sdk")
PROJECT_NAMES = tuple(f"{d}-{s}" for s in SUFFIXES for d in DOMAINS)  # 520 plausible project names


def ints(start: int, step: int, n: int) -> tuple[int, ...]:
    return tuple(range(start, start + step * n, step))


def words(values, quote: str = "'") -> str:
    return ", ".join(f"{quote}{v}{quote}" for v in values)


def numbers(values) -> str:
    return ", ".join(str(v) for v in values)


def prql_list(values) -> str:
    return "[" + ", ".join(f'"{v}"' if isinstance(v, str) else str(v) for v in values) + "]"


# The long lists (each used by one case)
W_IDS = ints(3, 4, 200)  # workload ids 3..799
P_NAMES = PROJECT_NAMES[::3][:150]
IMG_IDS = ints(5, 8, 120)
TBL_IDS = ints(11, 33, 180)
IMG_IDS_100 = ints(2, 10, 100)
P_IDS = ints(1, 1, 200)
ARC_IDS = ints(4, 9, 160)
HOSTNAMES = tuple(f"ip-10-{i % 32}-{(i * 7) % 250}-{(i * 13) % 250}.eu-west-1.compute.internal" for i in range(100))
W_IDS_150 = ints(1, 5, 150)

# Generated predicate chains for the "many predicates" cases
OR_IDS = ints(1, 26, 30)
NEQ_STARS = ints(1000, 1, 80)  # star counts that do not occur: every row passes
NEQ_VCPUS = ints(100, 1, 25)
NEQ_REGIONS = tuple(f"zz-region-{i}" for i in range(25))
REST_LIMITS = ints(10, 10, 12)


def _chain(parts, sep: str) -> str:
    return sep.join(parts)


# ---------------------------------------------------------------- the corpus

CASES: list[Case] = [
    # ------------------------------------------------------------ small: one dataset, a few predicates
    Case("s01", "small", "analyst",
         "explore projects fields name, path limit 10",
         "SELECT name, path FROM lake.gitlab_projects WHERE is_deleted = false LIMIT 10",
         "from p = lake.gitlab_projects\nfilter p.is_deleted == false\nselect {p.name, p.path}\ntake 10"),
    Case("s02", "small", "analyst",
         "explore workloads fields name, namespace, kind where namespace = 'prod-fp' limit 50",
         "SELECT name, namespace, kind FROM lake.k8s_workloads WHERE namespace = 'prod-fp' AND is_deleted = false "
         "LIMIT 50",
         "from w = lake.k8s_workloads\nfilter w.namespace == \"prod-fp\" && w.is_deleted == false\n"
         "select {w.name, w.namespace, w.kind}\ntake 50"),
    Case("s03", "small", "analyst",
         "explore hosts fields hostname, provider, region where provider = 'aws' order by hostname limit 20",
         "SELECT hostname, provider, region FROM lake.hosts WHERE provider = 'aws' ORDER BY hostname LIMIT 20",
         "from h = lake.hosts\nfilter h.provider == \"aws\"\nselect {h.hostname, h.provider, h.region}\n"
         "sort {h.hostname}\ntake 20"),
    Case("s04", "small", "analyst",
         "explore images fields repository, tag, size_bytes where size_bytes > 500000000 "
         "order by size_bytes desc limit 25",
         "SELECT repository, tag, size_bytes FROM lake.container_images WHERE size_bytes > 500000000 "
         "ORDER BY size_bytes DESC LIMIT 25",
         "from i = lake.container_images\nfilter i.size_bytes > 500000000\nselect {i.repository, i.tag, i.size_bytes}\n"
         "sort {-i.size_bytes}\ntake 25"),
    Case("s05", "small", "analyst",
         "explore databases fields name, engine, version where engine in ('postgresql', 'mysql') limit 50",
         "SELECT name, engine, version FROM lake.databases WHERE engine IN ('postgresql', 'mysql') LIMIT 50",
         "from d = lake.databases\nfilter (d.engine | in [\"postgresql\", \"mysql\"])\n"
         "select {d.name, d.engine, d.version}\ntake 50"),
    Case("s06", "small", "analyst",
         "explore archives fields archive_id, language, loc where archived_on >= '2025-01-01' "
         "order by loc desc limit 10",
         "SELECT archive_id, language, loc FROM lake.code_archives WHERE archived_on >= DATE '2025-01-01' "
         "ORDER BY loc DESC LIMIT 10",
         "from a = lake.code_archives\nfilter a.archived_on >= @2025-01-01\nselect {a.archive_id, a.language, a.loc}\n"
         "sort {-a.loc}\ntake 10"),
    Case("s07", "small", "analyst",
         "explore containers fields name, cpu_millis, memory_mb where restart_count > 3 limit 30",
         "SELECT name, cpu_millis, memory_mb FROM lake.k8s_containers WHERE restart_count > 3 LIMIT 30",
         "from c = lake.k8s_containers\nfilter c.restart_count > 3\nselect {c.name, c.cpu_millis, c.memory_mb}\ntake 30"),
    Case("s08", "small", "analyst",
         "explore tables fields schema_name, table_name where has_pii = true limit 40",
         "SELECT schema_name, table_name FROM lake.db_tables WHERE has_pii = true LIMIT 40",
         "from t = lake.db_tables\nfilter t.has_pii == true\nselect {t.schema_name, t.table_name}\ntake 40"),
    Case("s09", "small", "analyst",
         "explore repo_stats fields project_id, commit_count where contributors >= 10 "
         "order by commit_count desc limit 15",
         "SELECT project_id, commit_count FROM lake.gitlab_repo_stats WHERE contributors >= 10 "
         "ORDER BY commit_count DESC LIMIT 15",
         "from r = lake.gitlab_repo_stats\nfilter r.contributors >= 10\nselect {r.project_id, r.commit_count}\n"
         "sort {-r.commit_count}\ntake 15"),
    Case("s10", "small", "analyst",
         "explore projects fields name as project, star_count as stars where visibility = 'public' "
         "order by star_count desc limit 5",
         "SELECT name AS project, star_count AS stars FROM lake.gitlab_projects "
         "WHERE visibility = 'public' AND is_deleted = false ORDER BY star_count DESC LIMIT 5",
         "from p = lake.gitlab_projects\nfilter p.visibility == \"public\" && p.is_deleted == false\n"
         "select {project = p.name, stars = p.star_count}\nsort {-stars}\ntake 5"),
    Case("s11", "small", "analyst",
         "explore workloads fields name, replicas where name like 'order%' limit 20",
         "SELECT name, replicas FROM lake.k8s_workloads WHERE name LIKE 'order%' AND is_deleted = false LIMIT 20",
         "from w = lake.k8s_workloads\nfilter (w.name | text.starts_with \"order\") && w.is_deleted == false\n"
         "select {w.name, w.replicas}\ntake 20"),
    Case("s12", "small", "analyst",
         "explore images fields repository, tag where base_image is null limit 20",
         "SELECT repository, tag FROM lake.container_images WHERE base_image IS NULL LIMIT 20",
         "from i = lake.container_images\nfilter i.base_image == null\nselect {i.repository, i.tag}\ntake 20"),
    Case("s13", "small", "analyst",
         "explore hosts fields hostname, vcpus, memory_gb where vcpus between 8 and 32 and decommissioned = false "
         "limit 50",
         "SELECT hostname, vcpus, memory_gb FROM lake.hosts WHERE vcpus BETWEEN 8 AND 32 AND decommissioned = false "
         "LIMIT 50",
         "from h = lake.hosts\nfilter (h.vcpus | in 8..32) && h.decommissioned == false\n"
         "select {h.hostname, h.vcpus, h.memory_gb}\ntake 50"),
    Case("s14", "small", "analyst",
         "explore configs fields key, source where source = 'configmap' limit 50",
         "SELECT key, source FROM lake.config_entries WHERE source = 'configmap' AND is_sensitive = false LIMIT 50",
         "from e = lake.config_entries\nfilter e.source == \"configmap\" && e.is_sensitive == false\n"
         "select {e.key, e.source}\ntake 50"),

    # ------------------------------------------------------------ joins: one relation
    Case("j01", "join1", "analyst",
         "explore workloads via containers fields name, containers.name as container, containers.cpu_millis "
         "where namespace = 'prod-fp' limit 50",
         "SELECT w.name, c.name AS container, c.cpu_millis FROM lake.k8s_workloads w "
         "JOIN lake.k8s_containers c ON w.workload_id = c.workload_id "
         "WHERE w.namespace = 'prod-fp' AND w.is_deleted = false LIMIT 50",
         "from w = lake.k8s_workloads\njoin side:inner c = lake.k8s_containers (w.workload_id == c.workload_id)\n"
         "filter w.namespace == \"prod-fp\" && w.is_deleted == false\n"
         "select {w.name, container = c.name, c.cpu_millis}\ntake 50"),
    Case("j02", "join1", "analyst",
         "explore projects via stats fields name, stats.commit_count, stats.open_mrs where stats.open_mrs > 5 "
         "order by stats.open_mrs desc limit 20",
         "SELECT p.name, s.commit_count, s.open_mrs FROM lake.gitlab_projects p "
         "JOIN lake.gitlab_repo_stats s ON p.project_id = s.project_id "
         "WHERE s.open_mrs > 5 AND p.is_deleted = false ORDER BY s.open_mrs DESC LIMIT 20",
         "from p = lake.gitlab_projects\njoin side:inner s = lake.gitlab_repo_stats (p.project_id == s.project_id)\n"
         "filter s.open_mrs > 5 && p.is_deleted == false\nselect {p.name, s.commit_count, s.open_mrs}\n"
         "sort {-s.open_mrs}\ntake 20"),
    Case("j03", "join1", "analyst",
         "explore containers via image fields name, image.repository, image.tag where cpu_millis >= 1000 limit 50",
         "SELECT c.name, i.repository, i.tag FROM lake.k8s_containers c "
         "JOIN lake.container_images i ON c.image_id = i.image_id WHERE c.cpu_millis >= 1000 LIMIT 50",
         "from c = lake.k8s_containers\njoin side:inner i = lake.container_images (c.image_id == i.image_id)\n"
         "filter c.cpu_millis >= 1000\nselect {c.name, i.repository, i.tag}\ntake 50"),
    Case("j04", "join1", "analyst",
         "explore projects via archives fields path, archives.language, archives.loc "
         "where archives.language = 'go' and archives.loc > 10000 limit 30",
         "SELECT p.path, a.language, a.loc FROM lake.gitlab_projects p "
         "JOIN lake.code_archives a ON p.project_id = a.project_id "
         "WHERE a.language = 'go' AND a.loc > 10000 AND p.is_deleted = false LIMIT 30",
         "from p = lake.gitlab_projects\njoin side:inner a = lake.code_archives (p.project_id == a.project_id)\n"
         "filter a.language == \"go\" && a.loc > 10000 && p.is_deleted == false\n"
         "select {p.path, a.language, a.loc}\ntake 30"),
    Case("j05", "join1", "analyst",
         "explore tables via database fields table_name, database.name as db, database.engine "
         "where has_pii = true and database.engine = 'postgresql' limit 50",
         "SELECT t.table_name, d.name AS db, d.engine FROM lake.db_tables t "
         "JOIN lake.databases d ON t.database_id = d.database_id "
         "WHERE t.has_pii = true AND d.engine = 'postgresql' LIMIT 50",
         "from t = lake.db_tables\njoin side:inner d = lake.databases (t.database_id == d.database_id)\n"
         "filter t.has_pii == true && d.engine == \"postgresql\"\nselect {t.table_name, db = d.name, d.engine}\ntake 50"),
    Case("j06", "join1", "analyst",
         "explore databases via host fields name, host.hostname, host.provider where host.provider = 'onprem' limit 25",
         "SELECT d.name, h.hostname, h.provider FROM lake.databases d JOIN lake.hosts h ON d.host_id = h.host_id "
         "WHERE h.provider = 'onprem' LIMIT 25",
         "from d = lake.databases\njoin side:inner h = lake.hosts (d.host_id == h.host_id)\n"
         "filter h.provider == \"onprem\"\nselect {d.name, h.hostname, h.provider}\ntake 25"),
    Case("j07", "join1", "analyst",
         "explore workloads via project fields name, project.path where kind = 'StatefulSet' order by name limit 40",
         "SELECT w.name, p.path FROM lake.k8s_workloads w JOIN lake.gitlab_projects p ON w.project_id = p.project_id "
         "WHERE w.kind = 'StatefulSet' AND w.is_deleted = false AND p.is_deleted = false ORDER BY w.name LIMIT 40",
         "from w = lake.k8s_workloads\njoin side:inner p = lake.gitlab_projects (w.project_id == p.project_id)\n"
         "filter w.kind == \"StatefulSet\" && w.is_deleted == false && p.is_deleted == false\n"
         "select {w.name, p.path}\nsort {w.name}\ntake 40"),
    Case("j08", "join1", "analyst",
         "explore workloads via configs fields name, configs.key where configs.source = 'helm' "
         "and namespace = 'payments' limit 50",
         "SELECT w.name, e.key FROM lake.k8s_workloads w JOIN lake.config_entries e ON w.workload_id = e.workload_id "
         "WHERE e.source = 'helm' AND w.namespace = 'payments' AND w.is_deleted = false AND e.is_sensitive = false "
         "LIMIT 50",
         "from w = lake.k8s_workloads\njoin side:inner e = lake.config_entries (w.workload_id == e.workload_id)\n"
         "filter e.source == \"helm\" && w.namespace == \"payments\" && w.is_deleted == false "
         "&& e.is_sensitive == false\nselect {w.name, e.key}\ntake 50"),

    # ------------------------------------------------------------ joins: two relations
    Case("j09", "join2", "analyst",
         "explore projects via workloads, containers fields path, workloads.name, containers.name "
         "where namespace = 'fp' and containers.restart_count > 0 limit 50",
         "SELECT p.path, w.name, c.name FROM lake.gitlab_projects p "
         "JOIN lake.k8s_workloads w ON p.project_id = w.project_id "
         "JOIN lake.k8s_containers c ON w.workload_id = c.workload_id "
         "WHERE p.namespace = 'fp' AND c.restart_count > 0 AND p.is_deleted = false AND w.is_deleted = false LIMIT 50",
         "from p = lake.gitlab_projects\njoin side:inner w = lake.k8s_workloads (p.project_id == w.project_id)\n"
         "join side:inner c = lake.k8s_containers (w.workload_id == c.workload_id)\n"
         "filter p.namespace == \"fp\" && c.restart_count > 0 && p.is_deleted == false && w.is_deleted == false\n"
         "select {p.path, w.name, c.name}\ntake 50"),
    Case("j10", "join2", "analyst",
         "explore workloads via containers, image fields name, containers.name, image.tag "
         "where cluster = 'prod-eu-1' and image.base_image like 'eclipse-temurin%' limit 50",
         "SELECT w.name, c.name, i.tag FROM lake.k8s_workloads w "
         "JOIN lake.k8s_containers c ON w.workload_id = c.workload_id "
         "JOIN lake.container_images i ON c.image_id = i.image_id "
         "WHERE w.cluster = 'prod-eu-1' AND i.base_image LIKE 'eclipse-temurin%' AND w.is_deleted = false LIMIT 50",
         "from w = lake.k8s_workloads\njoin side:inner c = lake.k8s_containers (w.workload_id == c.workload_id)\n"
         "join side:inner i = lake.container_images (c.image_id == i.image_id)\n"
         "filter w.cluster == \"prod-eu-1\" && (i.base_image | text.starts_with \"eclipse-temurin\") "
         "&& w.is_deleted == false\nselect {w.name, c.name, i.tag}\ntake 50"),
    Case("j11", "join2", "analyst",
         "explore containers via image, archive fields name, image.repository, archive.language "
         "where archive.language in ('java', 'scala') limit 40",
         "SELECT c.name, i.repository, a.language FROM lake.k8s_containers c "
         "JOIN lake.container_images i ON c.image_id = i.image_id "
         "JOIN lake.code_archives a ON i.archive_id = a.archive_id WHERE a.language IN ('java', 'scala') LIMIT 40",
         "from c = lake.k8s_containers\njoin side:inner i = lake.container_images (c.image_id == i.image_id)\n"
         "join side:inner a = lake.code_archives (i.archive_id == a.archive_id)\n"
         "filter (a.language | in [\"java\", \"scala\"])\nselect {c.name, i.repository, a.language}\ntake 40"),
    Case("j12", "join2", "analyst",
         "explore tables via database, host fields table_name, database.name, host.region "
         "where host.provider = 'aws' and row_estimate > 100000 limit 50",
         "SELECT t.table_name, d.name, h.region FROM lake.db_tables t "
         "JOIN lake.databases d ON t.database_id = d.database_id JOIN lake.hosts h ON d.host_id = h.host_id "
         "WHERE h.provider = 'aws' AND t.row_estimate > 100000 LIMIT 50",
         "from t = lake.db_tables\njoin side:inner d = lake.databases (t.database_id == d.database_id)\n"
         "join side:inner h = lake.hosts (d.host_id == h.host_id)\n"
         "filter h.provider == \"aws\" && t.row_estimate > 100000\nselect {t.table_name, d.name, h.region}\ntake 50"),
    Case("j13", "join2", "analyst",
         "explore archives via table_refs, table fields commit_sha, table_refs.file_path, table.table_name "
         "where table_refs.access = 'write' and language = 'python' limit 50",
         "SELECT a.commit_sha, r.file_path, t.table_name FROM lake.code_archives a "
         "JOIN lake.code_table_refs r ON a.archive_id = r.archive_id JOIN lake.db_tables t ON r.table_id = t.table_id "
         "WHERE r.access = 'write' AND a.language = 'python' LIMIT 50",
         "from a = lake.code_archives\njoin side:inner r = lake.code_table_refs (a.archive_id == r.archive_id)\n"
         "join side:inner t = lake.db_tables (r.table_id == t.table_id)\n"
         "filter r.access == \"write\" && a.language == \"python\"\nselect {a.commit_sha, r.file_path, t.table_name}\n"
         "take 50"),
    Case("j14", "join2", "analyst",
         "explore projects via stats, archives fields name, stats.contributors, archives.loc "
         "where stats.contributors > 20 order by archives.loc desc limit 10",
         "SELECT p.name, s.contributors, a.loc FROM lake.gitlab_projects p "
         "JOIN lake.gitlab_repo_stats s ON p.project_id = s.project_id "
         "JOIN lake.code_archives a ON p.project_id = a.project_id "
         "WHERE s.contributors > 20 AND p.is_deleted = false ORDER BY a.loc DESC LIMIT 10",
         "from p = lake.gitlab_projects\njoin side:inner s = lake.gitlab_repo_stats (p.project_id == s.project_id)\n"
         "join side:inner a = lake.code_archives (p.project_id == a.project_id)\n"
         "filter s.contributors > 20 && p.is_deleted == false\nselect {p.name, s.contributors, a.loc}\n"
         "sort {-a.loc}\ntake 10"),

    # ------------------------------------------------------------ joins: three relations (admin may follow 4)
    Case("j15", "join3", "admin",
         "explore projects via workloads, containers, image fields path, workloads.name, containers.name, image.tag "
         "where visibility = 'internal' and workloads.kind = 'Deployment' limit 50",
         "SELECT p.path, w.name, c.name, i.tag FROM lake.gitlab_projects p "
         "JOIN lake.k8s_workloads w ON p.project_id = w.project_id "
         "JOIN lake.k8s_containers c ON w.workload_id = c.workload_id "
         "JOIN lake.container_images i ON c.image_id = i.image_id "
         "WHERE p.visibility = 'internal' AND w.kind = 'Deployment' AND p.is_deleted = false "
         "AND w.is_deleted = false LIMIT 50",
         "from p = lake.gitlab_projects\njoin side:inner w = lake.k8s_workloads (p.project_id == w.project_id)\n"
         "join side:inner c = lake.k8s_containers (w.workload_id == c.workload_id)\n"
         "join side:inner i = lake.container_images (c.image_id == i.image_id)\n"
         "filter p.visibility == \"internal\" && w.kind == \"Deployment\" && p.is_deleted == false "
         "&& w.is_deleted == false\nselect {p.path, w.name, c.name, i.tag}\ntake 50"),
    Case("j16", "join3", "admin",
         "explore workloads via containers, image, archive fields name, containers.cpu_millis, image.repository, "
         "archive.language where namespace in ('prod', 'prod-fp') and archive.loc > 50000 limit 50",
         "SELECT w.name, c.cpu_millis, i.repository, a.language FROM lake.k8s_workloads w "
         "JOIN lake.k8s_containers c ON w.workload_id = c.workload_id "
         "JOIN lake.container_images i ON c.image_id = i.image_id "
         "JOIN lake.code_archives a ON i.archive_id = a.archive_id "
         "WHERE w.namespace IN ('prod', 'prod-fp') AND a.loc > 50000 AND w.is_deleted = false LIMIT 50",
         "from w = lake.k8s_workloads\njoin side:inner c = lake.k8s_containers (w.workload_id == c.workload_id)\n"
         "join side:inner i = lake.container_images (c.image_id == i.image_id)\n"
         "join side:inner a = lake.code_archives (i.archive_id == a.archive_id)\n"
         "filter (w.namespace | in [\"prod\", \"prod-fp\"]) && a.loc > 50000 && w.is_deleted == false\n"
         "select {w.name, c.cpu_millis, i.repository, a.language}\ntake 50"),
    Case("j17", "join3", "admin",
         "explore archives via table_refs, table, database fields commit_sha, table.table_name, database.engine "
         "where table_refs.confidence >= 0.9 and database.engine = 'oracle' limit 50",
         "SELECT a.commit_sha, t.table_name, d.engine FROM lake.code_archives a "
         "JOIN lake.code_table_refs r ON a.archive_id = r.archive_id JOIN lake.db_tables t ON r.table_id = t.table_id "
         "JOIN lake.databases d ON t.database_id = d.database_id "
         "WHERE r.confidence >= 0.9 AND d.engine = 'oracle' LIMIT 50",
         "from a = lake.code_archives\njoin side:inner r = lake.code_table_refs (a.archive_id == r.archive_id)\n"
         "join side:inner t = lake.db_tables (r.table_id == t.table_id)\n"
         "join side:inner d = lake.databases (t.database_id == d.database_id)\n"
         "filter r.confidence >= 0.9 && d.engine == \"oracle\"\nselect {a.commit_sha, t.table_name, d.engine}\ntake 50"),
    Case("j18", "join3", "admin",
         "explore containers via workload, image, archive fields name, workload.namespace, image.tag, "
         "archive.commit_sha where workload.cluster = 'prod-us-1' and memory_mb >= 2048 limit 50",
         "SELECT c.name, w.namespace, i.tag, a.commit_sha FROM lake.k8s_containers c "
         "JOIN lake.k8s_workloads w ON c.workload_id = w.workload_id "
         "JOIN lake.container_images i ON c.image_id = i.image_id "
         "JOIN lake.code_archives a ON i.archive_id = a.archive_id "
         "WHERE w.cluster = 'prod-us-1' AND c.memory_mb >= 2048 AND w.is_deleted = false LIMIT 50",
         "from c = lake.k8s_containers\njoin side:inner w = lake.k8s_workloads (c.workload_id == w.workload_id)\n"
         "join side:inner i = lake.container_images (c.image_id == i.image_id)\n"
         "join side:inner a = lake.code_archives (i.archive_id == a.archive_id)\n"
         "filter w.cluster == \"prod-us-1\" && c.memory_mb >= 2048 && w.is_deleted == false\n"
         "select {c.name, w.namespace, i.tag, a.commit_sha}\ntake 50"),

    # ------------------------------------------------------------ aggregates with group by
    Case("a01", "aggregate", "analyst",
         "explore workloads fields namespace, count() as n group by namespace order by n desc limit 20",
         "SELECT namespace, count(*) AS n FROM lake.k8s_workloads WHERE is_deleted = false GROUP BY namespace "
         "ORDER BY n DESC LIMIT 20",
         "from w = lake.k8s_workloads\nfilter w.is_deleted == false\ngroup {w.namespace} (aggregate {n = count this})\n"
         "sort {-n}\ntake 20"),
    Case("a02", "aggregate", "analyst",
         "explore workloads via containers fields namespace, sum(containers.cpu_millis) as cpu "
         "group by namespace order by cpu desc limit 3",
         "SELECT w.namespace, sum(c.cpu_millis) AS cpu FROM lake.k8s_workloads w "
         "JOIN lake.k8s_containers c ON w.workload_id = c.workload_id WHERE w.is_deleted = false "
         "GROUP BY w.namespace ORDER BY cpu DESC LIMIT 3",
         "from w = lake.k8s_workloads\njoin side:inner c = lake.k8s_containers (w.workload_id == c.workload_id)\n"
         "filter w.is_deleted == false\ngroup {w.namespace} (aggregate {cpu = sum c.cpu_millis})\nsort {-cpu}\ntake 3"),
    Case("a03", "aggregate", "analyst",
         "explore containers fields name, avg(memory_mb) as mem, max(restart_count) as restarts "
         "where cpu_millis > 100 group by name order by mem desc limit 25",
         "SELECT name, avg(memory_mb) AS mem, max(restart_count) AS restarts FROM lake.k8s_containers "
         "WHERE cpu_millis > 100 GROUP BY name ORDER BY mem DESC LIMIT 25",
         "from c = lake.k8s_containers\nfilter c.cpu_millis > 100\n"
         "group {c.name} (aggregate {mem = average c.memory_mb, restarts = max c.restart_count})\nsort {-mem}\ntake 25"),
    Case("a04", "aggregate", "analyst",
         "explore projects fields visibility, count(distinct namespace) as groups, min(created_at), "
         "max(last_activity_at) group by visibility limit 10",
         "SELECT visibility, count(DISTINCT namespace) AS groups, min(created_at), max(last_activity_at) "
         "FROM lake.gitlab_projects WHERE is_deleted = false GROUP BY visibility LIMIT 10",
         "from p = lake.gitlab_projects\nfilter p.is_deleted == false\n"
         "group {p.visibility} (aggregate {groups = count_distinct p.namespace, first = min p.created_at, "
         "last = max p.last_activity_at})\ntake 10"),
    Case("a05", "aggregate", "analyst",
         "explore archives fields language, count(), sum(loc) as total_loc, avg(loc) as avg_loc "
         "group by language order by total_loc desc limit 10",
         "SELECT language, count(*), sum(loc) AS total_loc, avg(loc) AS avg_loc FROM lake.code_archives "
         "GROUP BY language ORDER BY total_loc DESC LIMIT 10",
         "from a = lake.code_archives\n"
         "group {a.language} (aggregate {n = count this, total_loc = sum a.loc, avg_loc = average a.loc})\n"
         "sort {-total_loc}\ntake 10"),
    Case("a06", "aggregate", "analyst",
         "explore tables via database fields database.engine, count() as tables, sum(size_bytes) as bytes "
         "where has_pii = true group by database.engine order by bytes desc limit 10",
         "SELECT d.engine, count(*) AS tables, sum(t.size_bytes) AS bytes FROM lake.db_tables t "
         "JOIN lake.databases d ON t.database_id = d.database_id WHERE t.has_pii = true "
         "GROUP BY d.engine ORDER BY bytes DESC LIMIT 10",
         "from t = lake.db_tables\njoin side:inner d = lake.databases (t.database_id == d.database_id)\n"
         "filter t.has_pii == true\ngroup {d.engine} (aggregate {tables = count this, bytes = sum t.size_bytes})\n"
         "sort {-bytes}\ntake 10"),
    Case("a07", "aggregate", "analyst",
         "explore hosts fields provider, region, count() as n, sum(vcpus) as vcpus group by provider, region "
         "order by provider, region limit 50",
         "SELECT provider, region, count(*) AS n, sum(vcpus) AS vcpus FROM lake.hosts GROUP BY provider, region "
         "ORDER BY provider, region LIMIT 50",
         "from h = lake.hosts\ngroup {h.provider, h.region} (aggregate {n = count this, vcpus = sum h.vcpus})\n"
         "sort {provider, region}\ntake 50"),
    Case("a08", "aggregate", "analyst",
         "explore images fields base_image, count() as n, max(size_bytes) as biggest where built_at >= '2025-01-01' "
         "group by base_image order by n desc limit 15",
         "SELECT base_image, count(*) AS n, max(size_bytes) AS biggest FROM lake.container_images "
         "WHERE built_at >= '2025-01-01' GROUP BY base_image ORDER BY n DESC LIMIT 15",
         "from i = lake.container_images\nfilter i.built_at >= @2025-01-01\n"
         "group {i.base_image} (aggregate {n = count this, biggest = max i.size_bytes})\nsort {-n}\ntake 15"),
    Case("a09", "aggregate", "analyst",
         "explore table_refs fields access, count() as n, avg(confidence) as conf where confidence > 0.5 "
         "group by access limit 10",
         "SELECT access, count(*) AS n, avg(confidence) AS conf FROM lake.code_table_refs WHERE confidence > 0.5 "
         "GROUP BY access LIMIT 10",
         "from r = lake.code_table_refs\nfilter r.confidence > 0.5\n"
         "group {r.access} (aggregate {n = count this, conf = average r.confidence})\ntake 10"),
    Case("a10", "aggregate", "analyst",
         "explore workloads via project fields project.namespace, kind, count() as n, sum(replicas) as replicas "
         "where cluster in ('prod-eu-1', 'prod-us-1') group by project.namespace, kind order by n desc limit 50",
         "SELECT p.namespace, w.kind, count(*) AS n, sum(w.replicas) AS replicas FROM lake.k8s_workloads w "
         "JOIN lake.gitlab_projects p ON w.project_id = p.project_id "
         "WHERE w.cluster IN ('prod-eu-1', 'prod-us-1') AND w.is_deleted = false AND p.is_deleted = false "
         "GROUP BY p.namespace, w.kind ORDER BY n DESC LIMIT 50",
         "from w = lake.k8s_workloads\njoin side:inner p = lake.gitlab_projects (w.project_id == p.project_id)\n"
         "filter (w.cluster | in [\"prod-eu-1\", \"prod-us-1\"]) && w.is_deleted == false && p.is_deleted == false\n"
         "group {p.namespace, w.kind} (aggregate {n = count this, replicas = sum w.replicas})\nsort {-n}\ntake 50"),
    Case("a11", "aggregate", "analyst",
         "explore projects via workloads, containers fields namespace, "
         "count(distinct workloads.workload_id) as workloads, sum(containers.memory_mb) as memory "
         "group by namespace order by memory desc limit 10",
         "SELECT p.namespace, count(DISTINCT w.workload_id) AS workloads, sum(c.memory_mb) AS memory "
         "FROM lake.gitlab_projects p JOIN lake.k8s_workloads w ON p.project_id = w.project_id "
         "JOIN lake.k8s_containers c ON w.workload_id = c.workload_id "
         "WHERE p.is_deleted = false AND w.is_deleted = false GROUP BY p.namespace ORDER BY memory DESC LIMIT 10",
         "from p = lake.gitlab_projects\njoin side:inner w = lake.k8s_workloads (p.project_id == w.project_id)\n"
         "join side:inner c = lake.k8s_containers (w.workload_id == c.workload_id)\n"
         "filter p.is_deleted == false && w.is_deleted == false\n"
         "group {p.namespace} (aggregate {workloads = count_distinct w.workload_id, memory = sum c.memory_mb})\n"
         "sort {-memory}\ntake 10"),
    Case("a12", "aggregate", "analyst",
         "explore databases fields owner_team, engine, count() group by owner_team, engine order by owner_team limit 50",
         "SELECT owner_team, engine, count(*) FROM lake.databases GROUP BY owner_team, engine ORDER BY owner_team "
         "LIMIT 50",
         "from d = lake.databases\ngroup {d.owner_team, d.engine} (aggregate {n = count this})\nsort {owner_team}\n"
         "take 50"),

    # ------------------------------------------------------------ large IN lists (100-200 values)
    Case("i01", "in_list", "analyst",
         f"explore workloads fields name, namespace where workload_id in ({numbers(W_IDS)}) limit 100",
         f"SELECT name, namespace FROM lake.k8s_workloads WHERE workload_id IN ({numbers(W_IDS)}) "
         "AND is_deleted = false LIMIT 100",
         f"from w = lake.k8s_workloads\nfilter (w.workload_id | in {prql_list(W_IDS)}) && w.is_deleted == false\n"
         "select {w.name, w.namespace}\ntake 100"),
    Case("i02", "in_list", "analyst",
         f"explore projects fields path, star_count where name in ({words(P_NAMES)}) limit 200",
         f"SELECT path, star_count FROM lake.gitlab_projects WHERE name IN ({words(P_NAMES)}) "
         "AND is_deleted = false LIMIT 200",
         f"from p = lake.gitlab_projects\nfilter (p.name | in {prql_list(P_NAMES)}) && p.is_deleted == false\n"
         "select {p.path, p.star_count}\ntake 200"),
    Case("i03", "in_list", "analyst",
         f"explore containers fields name, image_id, cpu_millis where image_id in ({numbers(IMG_IDS)}) "
         "and cpu_millis >= 500 limit 100",
         f"SELECT name, image_id, cpu_millis FROM lake.k8s_containers WHERE image_id IN ({numbers(IMG_IDS)}) "
         "AND cpu_millis >= 500 LIMIT 100",
         f"from c = lake.k8s_containers\nfilter (c.image_id | in {prql_list(IMG_IDS)}) && c.cpu_millis >= 500\n"
         "select {c.name, c.image_id, c.cpu_millis}\ntake 100"),
    Case("i04", "in_list", "analyst",
         f"explore tables via database fields table_name, database.name where table_id in ({numbers(TBL_IDS)}) "
         "limit 200",
         f"SELECT t.table_name, d.name FROM lake.db_tables t JOIN lake.databases d ON t.database_id = d.database_id "
         f"WHERE t.table_id IN ({numbers(TBL_IDS)}) LIMIT 200",
         "from t = lake.db_tables\njoin side:inner d = lake.databases (t.database_id == d.database_id)\n"
         f"filter (t.table_id | in {prql_list(TBL_IDS)})\nselect {{t.table_name, d.name}}\ntake 200"),
    Case("i05", "in_list", "analyst",
         f"explore workloads via containers fields name, containers.name where containers.image_id in "
         f"({numbers(IMG_IDS_100)}) and namespace not in ('kube-system', 'monitoring', 'ingress') limit 100",
         "SELECT w.name, c.name FROM lake.k8s_workloads w JOIN lake.k8s_containers c "
         f"ON w.workload_id = c.workload_id WHERE c.image_id IN ({numbers(IMG_IDS_100)}) "
         "AND NOT w.namespace IN ('kube-system', 'monitoring', 'ingress') AND w.is_deleted = false LIMIT 100",
         "from w = lake.k8s_workloads\njoin side:inner c = lake.k8s_containers (w.workload_id == c.workload_id)\n"
         f"filter (c.image_id | in {prql_list(IMG_IDS_100)}) "
         "&& !(w.namespace | in [\"kube-system\", \"monitoring\", \"ingress\"]) && w.is_deleted == false\n"
         "select {w.name, c.name}\ntake 100"),
    Case("i06", "in_list", "analyst",
         f"explore projects fields namespace, count() as n where project_id in ({numbers(P_IDS)}) "
         "group by namespace order by n desc limit 20",
         f"SELECT namespace, count(*) AS n FROM lake.gitlab_projects WHERE project_id IN ({numbers(P_IDS)}) "
         "AND is_deleted = false GROUP BY namespace ORDER BY n DESC LIMIT 20",
         f"from p = lake.gitlab_projects\nfilter (p.project_id | in {prql_list(P_IDS)}) && p.is_deleted == false\n"
         "group {p.namespace} (aggregate {n = count this})\nsort {-n}\ntake 20"),
    Case("i07", "in_list", "analyst",
         f"explore archives fields archive_id, commit_sha, loc where archive_id in ({numbers(ARC_IDS)}) "
         "and language = 'java' limit 100",
         f"SELECT archive_id, commit_sha, loc FROM lake.code_archives WHERE archive_id IN ({numbers(ARC_IDS)}) "
         "AND language = 'java' LIMIT 100",
         f"from a = lake.code_archives\nfilter (a.archive_id | in {prql_list(ARC_IDS)}) && a.language == \"java\"\n"
         "select {a.archive_id, a.commit_sha, a.loc}\ntake 100"),
    Case("i08", "in_list", "analyst",
         f"explore hosts fields hostname, cluster where hostname not in ({words(HOSTNAMES)}) and provider = 'gcp' "
         "limit 50",
         f"SELECT hostname, cluster FROM lake.hosts WHERE NOT hostname IN ({words(HOSTNAMES)}) "
         "AND provider = 'gcp' LIMIT 50",
         f"from h = lake.hosts\nfilter !(h.hostname | in {prql_list(HOSTNAMES)}) && h.provider == \"gcp\"\n"
         "select {h.hostname, h.cluster}\ntake 50"),

    # ------------------------------------------------------------ many predicates
    Case("p01", "predicates", "analyst",
         "explore workloads fields name, namespace, replicas where namespace != 'kube-system' "
         "and namespace != 'monitoring' and replicas >= 1 and replicas <= 20 and kind != 'Job' "
         "and cluster like 'prod%' and created_at >= '2023-01-01' and created_at < '2026-07-01' "
         "and name is not null and project_id > 0 limit 50",
         "SELECT name, namespace, replicas FROM lake.k8s_workloads WHERE namespace <> 'kube-system' "
         "AND namespace <> 'monitoring' AND replicas >= 1 AND replicas <= 20 AND kind <> 'Job' "
         "AND cluster LIKE 'prod%' AND created_at >= '2023-01-01' AND created_at < '2026-07-01' "
         "AND name IS NOT NULL AND project_id > 0 AND is_deleted = false LIMIT 50",
         "from w = lake.k8s_workloads\nfilter w.namespace != \"kube-system\" && w.namespace != \"monitoring\" "
         "&& w.replicas >= 1 && w.replicas <= 20 && w.kind != \"Job\" && (w.cluster | text.starts_with \"prod\") "
         "&& w.created_at >= @2023-01-01 && w.created_at < @2026-07-01 && w.name != null && w.project_id > 0 "
         "&& w.is_deleted == false\nselect {w.name, w.namespace, w.replicas}\ntake 50"),
    Case("p02", "predicates", "analyst",
         "explore workloads fields name, namespace, kind where (namespace = 'prod' or namespace = 'prod-fp' "
         "or namespace = 'payments') and not (kind = 'Job' or kind = 'CronJob') and replicas between 2 and 12 "
         "and (name like '%service%' or name like '%api%' or name ilike '%GATEWAY%') limit 50",
         "SELECT name, namespace, kind FROM lake.k8s_workloads WHERE (namespace = 'prod' OR namespace = 'prod-fp' "
         "OR namespace = 'payments') AND NOT (kind = 'Job' OR kind = 'CronJob') AND replicas BETWEEN 2 AND 12 "
         "AND (name LIKE '%service%' OR name LIKE '%api%' OR name ILIKE '%GATEWAY%') AND is_deleted = false LIMIT 50",
         "from w = lake.k8s_workloads\nfilter (w.namespace == \"prod\" || w.namespace == \"prod-fp\" "
         "|| w.namespace == \"payments\") && !(w.kind == \"Job\" || w.kind == \"CronJob\") && (w.replicas | in 2..12) "
         "&& ((w.name | text.contains \"service\") || (w.name | text.contains \"api\") "
         "|| s\"{w.name} ILIKE '%GATEWAY%'\") && w.is_deleted == false\nselect {w.name, w.namespace, w.kind}\ntake 50"),
    Case("p03", "predicates", "analyst",
         "explore workloads fields workload_id, name where "
         + _chain((f"workload_id = {i}" for i in OR_IDS), " or ") + " limit 50",
         "SELECT workload_id, name FROM lake.k8s_workloads WHERE ("
         + _chain((f"workload_id = {i}" for i in OR_IDS), " OR ") + ") AND is_deleted = false LIMIT 50",
         "from w = lake.k8s_workloads\nfilter ("
         + _chain((f"w.workload_id == {i}" for i in OR_IDS), " || ") + ") && w.is_deleted == false\n"
         "select {w.workload_id, w.name}\ntake 50"),
    Case("p04", "predicates", "analyst",
         "explore containers via image fields name, image.tag where "
         + _chain((f"cpu_millis != {k} and memory_mb != {k + 1}" for k in ints(7, 13, 12)), " and ")
         + " and image.size_bytes > 1000 limit 50",
         "SELECT c.name, i.tag FROM lake.k8s_containers c JOIN lake.container_images i ON c.image_id = i.image_id WHERE "
         + _chain((f"c.cpu_millis <> {k} AND c.memory_mb <> {k + 1}" for k in ints(7, 13, 12)), " AND ")
         + " AND i.size_bytes > 1000 LIMIT 50",
         "from c = lake.k8s_containers\njoin side:inner i = lake.container_images (c.image_id == i.image_id)\nfilter "
         + _chain((f"c.cpu_millis != {k} && c.memory_mb != {k + 1}" for k in ints(7, 13, 12)), " && ")
         + " && i.size_bytes > 1000\nselect {c.name, i.tag}\ntake 50"),
    Case("p05", "predicates", "admin",
         "explore projects fields name, star_count where "
         + _chain((f"star_count != {k}" for k in NEQ_STARS), " and ") + " limit 50",
         "SELECT name, star_count FROM lake.gitlab_projects WHERE "
         + _chain((f"star_count <> {k}" for k in NEQ_STARS), " AND ") + " AND is_deleted = false LIMIT 50",
         "from p = lake.gitlab_projects\nfilter "
         + _chain((f"p.star_count != {k}" for k in NEQ_STARS), " && ") + " && p.is_deleted == false\n"
         "select {p.name, p.star_count}\ntake 50"),
    Case("p06", "predicates", "analyst",
         "explore hosts fields hostname, region where "
         + _chain((f"vcpus != {v} and region != '{r}'" for v, r in zip(NEQ_VCPUS, NEQ_REGIONS)), " and ")
         + " limit 50",
         "SELECT hostname, region FROM lake.hosts WHERE "
         + _chain((f"vcpus <> {v} AND region <> '{r}'" for v, r in zip(NEQ_VCPUS, NEQ_REGIONS)), " AND ")
         + " LIMIT 50",
         "from h = lake.hosts\nfilter "
         + _chain((f"h.vcpus != {v} && h.region != \"{r}\"" for v, r in zip(NEQ_VCPUS, NEQ_REGIONS)), " && ")
         + "\nselect {h.hostname, h.region}\ntake 50"),
    Case("p07", "predicates", "analyst",
         "explore images fields repository, tag, size_bytes where not (base_image is null) "
         "and size_bytes between 10000000 and 800000000 and tag not like '%-rc%' and repository ilike '%/FP/%' "
         "and built_at between '2024-01-01' and '2026-07-01' and digest is not null "
         "and (tag like 'v1.%' or tag like 'v2.%' or tag like 'v3.%') and not (repository like '%sandbox%') "
         "and archive_id > 0 and archive_id < 100000000 and image_id != 0 and base_image != 'alpine:3.20' "
         "order by size_bytes desc limit 50",
         "SELECT repository, tag, size_bytes FROM lake.container_images WHERE NOT (base_image IS NULL) "
         "AND size_bytes BETWEEN 10000000 AND 800000000 AND tag NOT LIKE '%-rc%' AND repository ILIKE '%/FP/%' "
         "AND built_at BETWEEN '2024-01-01' AND '2026-07-01' AND digest IS NOT NULL "
         "AND (tag LIKE 'v1.%' OR tag LIKE 'v2.%' OR tag LIKE 'v3.%') AND NOT (repository LIKE '%sandbox%') "
         "AND archive_id > 0 AND archive_id < 100000000 AND image_id <> 0 AND base_image <> 'alpine:3.20' "
         "ORDER BY size_bytes DESC LIMIT 50",
         "from i = lake.container_images\nfilter !(i.base_image == null) && (i.size_bytes | in 10000000..800000000) "
         "&& !(i.tag | text.contains \"-rc\") && s\"{i.repository} ILIKE '%/FP/%'\" "
         "&& (i.built_at | in @2024-01-01..@2026-07-01) && i.digest != null "
         "&& ((i.tag | text.starts_with \"v1.\") || (i.tag | text.starts_with \"v2.\") "
         "|| (i.tag | text.starts_with \"v3.\")) && !(i.repository | text.contains \"sandbox\") "
         "&& i.archive_id > 0 && i.archive_id < 100000000 && i.image_id != 0 && i.base_image != \"alpine:3.20\"\n"
         "select {i.repository, i.tag, i.size_bytes}\nsort {-i.size_bytes}\ntake 50"),

    # ------------------------------------------------------------ mixed: joins, aggregates, a long list, predicates
    Case("x01", "mixed", "analyst",
         "explore workloads via containers, image fields namespace, image.base_image, count() as n, "
         "avg(containers.cpu_millis) as cpu where cluster in ('prod-eu-1', 'prod-us-1') "
         "and containers.restart_count < 5 and image.size_bytes between 10000000 and 900000000 "
         f"and workload_id in ({numbers(W_IDS_150)}) group by namespace, image.base_image order by n desc limit 50",
         "SELECT w.namespace, i.base_image, count(*) AS n, avg(c.cpu_millis) AS cpu FROM lake.k8s_workloads w "
         "JOIN lake.k8s_containers c ON w.workload_id = c.workload_id "
         "JOIN lake.container_images i ON c.image_id = i.image_id "
         "WHERE w.cluster IN ('prod-eu-1', 'prod-us-1') AND c.restart_count < 5 "
         f"AND i.size_bytes BETWEEN 10000000 AND 900000000 AND w.workload_id IN ({numbers(W_IDS_150)}) "
         "AND w.is_deleted = false GROUP BY w.namespace, i.base_image ORDER BY n DESC LIMIT 50",
         "from w = lake.k8s_workloads\njoin side:inner c = lake.k8s_containers (w.workload_id == c.workload_id)\n"
         "join side:inner i = lake.container_images (c.image_id == i.image_id)\n"
         "filter (w.cluster | in [\"prod-eu-1\", \"prod-us-1\"]) && c.restart_count < 5 "
         f"&& (i.size_bytes | in 10000000..900000000) && (w.workload_id | in {prql_list(W_IDS_150)}) "
         "&& w.is_deleted == false\n"
         "group {w.namespace, i.base_image} (aggregate {n = count this, cpu = average c.cpu_millis})\n"
         "sort {-n}\ntake 50"),
    Case("x02", "mixed", "analyst",
         "explore projects via workloads fields namespace, workloads.kind, count(distinct workloads.cluster) as clusters, "
         "max(star_count) as stars where visibility != 'public' and workloads.replicas > 1 "
         "and (workloads.namespace like 'prod%' or workloads.namespace = 'payments') "
         "group by namespace, workloads.kind order by stars desc, namespace limit 40",
         "SELECT p.namespace, w.kind, count(DISTINCT w.cluster) AS clusters, max(p.star_count) AS stars "
         "FROM lake.gitlab_projects p JOIN lake.k8s_workloads w ON p.project_id = w.project_id "
         "WHERE p.visibility <> 'public' AND w.replicas > 1 AND (w.namespace LIKE 'prod%' OR w.namespace = 'payments') "
         "AND p.is_deleted = false AND w.is_deleted = false GROUP BY p.namespace, w.kind "
         "ORDER BY stars DESC, p.namespace LIMIT 40",
         "from p = lake.gitlab_projects\njoin side:inner w = lake.k8s_workloads (p.project_id == w.project_id)\n"
         "filter p.visibility != \"public\" && w.replicas > 1 && ((w.namespace | text.starts_with \"prod\") "
         "|| w.namespace == \"payments\") && p.is_deleted == false && w.is_deleted == false\n"
         "group {p.namespace, w.kind} (aggregate {clusters = count_distinct w.cluster, stars = max p.star_count})\n"
         "sort {-stars, namespace}\ntake 40"),
]


KINDS = ("small", "join1", "join2", "join3", "aggregate", "in_list", "predicates", "mixed")


def by_id() -> dict[str, Case]:
    return {c.id: c for c in CASES}


# ---------------------------------------------------------------- verification: the three forms agree


def _norm_cell(v):
    import datetime as dt
    from decimal import Decimal

    if isinstance(v, (Decimal, float)):
        return f"{float(v):.6g}"
    if isinstance(v, (dt.date, dt.datetime)):
        return v.isoformat()
    return str(v) if v is not None else None


def _norm(rows, limit, positional: bool = True):
    out = [tuple(_norm_cell(v) for v in r) for r in rows[:limit]]
    if not positional:  # PRQL puts group keys first: compare each row as a bag of values
        out = [tuple(sorted(x or "" for x in r)) for r in out]
    return sorted(out, key=repr)


def verify(dsn: str, cases: list[Case] | None = None) -> list[str]:
    """Run each case three ways on the demo lakehouse; return the disagreements (empty: all agree)."""
    import psycopg
    import prqlc

    from ontoos_explore import compile_exploration
    from ontoos_explore.contract import load_contract

    from .common import CONTRACT_PATH, prql_options

    contract = load_contract(CONTRACT_PATH)
    opts = prql_options()
    problems: list[str] = []
    with psycopg.connect(dsn, autocommit=True, options="-c TimeZone=UTC") as conn:
        raw = psycopg.RawCursor(conn)
        for case in cases or CASES:
            try:
                q = compile_exploration(case.text, contract, case.role)
            except Exception as e:  # noqa: BLE001 - report every failure
                problems.append(f"{case.id}: does not compile: {e}")
                continue
            raw.execute(q.sql, list(q.params))
            ours = raw.fetchall()
            complete = len(ours) <= q.limit
            hand = conn.execute(case.sql).fetchall()
            prql_sql = prqlc.compile(case.prql, opts)
            prql_rows = conn.execute(prql_sql).fetchall()
            n = min(len(ours), q.limit)
            if len(hand) != n or len(prql_rows) != n:
                problems.append(f"{case.id}: rows ours {n}, hand SQL {len(hand)}, PRQL {len(prql_rows)}")
                continue
            if complete or "order by" in case.text.lower():
                if complete and _norm(ours, q.limit) != _norm(hand, q.limit):
                    problems.append(f"{case.id}: hand SQL rows differ")
                if complete and _norm(ours, q.limit, False) != _norm(prql_rows, q.limit, False):
                    problems.append(f"{case.id}: PRQL rows differ")
    return problems


if __name__ == "__main__":  # python -m benchmarks.corpus [scale]: check the three forms agree
    import sys

    from ontoos_explore.contract import load_contract

    from .common import CONTRACT_PATH
    from .db import ensure_database

    scale = float(sys.argv[1]) if len(sys.argv) > 1 else 1.0
    dsn, _ = ensure_database(load_contract(CONTRACT_PATH), scale)
    found = verify(dsn)
    kinds = {k: sum(1 for c in CASES if c.kind == k) for k in KINDS}
    print(f"{len(CASES)} cases {kinds}")
    print("\n".join(found) if found else "all three forms agree on every case")
    sys.exit(1 if found else 0)
