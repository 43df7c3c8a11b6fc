"""Engine: the demo lakehouse, generated and loaded (scale, seed -> rows -> schema `lake`).

`generate()` builds the rows of every table of the demo contract in pure
Python, deterministically: each table draws from its own `random.Random`
seeded by (seed, table), and every date is fixed relative to `SNAPSHOT`, the
moment the imaginary crawlers ran. The data is an R&D ontology: GitLab
projects with their repository statistics and code archives, the images built
from the archives, Kubernetes workloads and their containers running those
images, config entries mounted into the workloads, the database tables the
code reads and writes (found in MyBatis mappers, JPA repositories, ORM models,
migrations), the databases holding them and the hosts under everything.

`load()` recreates the schema from `data/demo_schema.sql` and COPYs the rows;
`ensure()` loads only when the database holds no demo or another one.

Every value of a secret column contains `SECRET_MARKER`, so a test (or an
audit) can prove that no secret ever leaves the lake: finding the marker in
an answer is a leak.

    >>> rows = generate(scale=0.1)          # doctest: +SKIP
    >>> len(rows["gitlab_projects"])        # doctest: +SKIP
    20
"""

from __future__ import annotations

import base64
import datetime as dt
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from importlib import resources

import psycopg
from psycopg import sql
from psycopg.pq import TransactionStatus

from ..contract import PUBLISH_LOG_COLUMNS

GENERATOR_VERSION = 2  # bump whenever the rows generate() returns change shape or content
SECRET_MARKER = "ONTOOS-SECRET-"
SCHEMA = "lake"
AFTER_LOAD = "-- ontoos:after-load"  # splits demo_schema.sql: tables before, keys and indexes after
LOAD_LOCK = 0x6F6E746F6F73  # pg_advisory_xact_lock key ("ontoos"): one loader at a time per database
# No placeholders in any statement here: callers may hand over connections whose cursors bind
# $n (psycopg.RawCursor) or %s, and a constant needs neither.
LOCK_SQL = sql.SQL("SELECT pg_advisory_xact_lock({})").format(sql.Literal(LOAD_LOCK))

UTC = dt.timezone.utc
SNAPSHOT = dt.datetime(2026, 7, 1, tzinfo=UTC)  # when the crawlers ran; nothing happens after it
ARCHIVE_START = dt.datetime(2024, 1, 1, tzinfo=UTC)  # code archiving started then

# Column order of every table, as in demo_schema.sql and the contract; also the
# load order (parents before children).
COLUMNS: dict[str, tuple[str, ...]] = {
    "hosts": ("host_id", "hostname", "cluster", "provider", "region", "instance_type", "vcpus", "memory_gb",
              "launched_at", "decommissioned", "ssh_private_key"),
    "gitlab_projects": ("project_id", "path", "name", "namespace", "visibility", "default_branch", "star_count",
                        "created_at", "last_activity_at", "archived", "is_deleted", "ci_token"),
    "gitlab_repo_stats": ("project_id", "commit_count", "contributors", "open_mrs", "last_commit_at"),
    "code_archives": ("archive_id", "project_id", "commit_sha", "language", "loc", "archived_on", "storage_uri"),
    "container_images": ("image_id", "archive_id", "repository", "tag", "digest", "size_bytes", "built_at",
                         "base_image", "registry_password"),
    "k8s_workloads": ("workload_id", "project_id", "cluster", "namespace", "name", "kind", "replicas",
                      "created_at", "is_deleted", "env_dump"),
    "k8s_containers": ("container_id", "workload_id", "image_id", "name", "cpu_millis", "memory_mb",
                       "restart_count", "started_at", "env_vars"),
    "config_entries": ("config_id", "workload_id", "key", "source", "updated_at", "is_sensitive", "value"),
    "databases": ("database_id", "host_id", "name", "engine", "version", "owner_team", "connection_password"),
    "db_tables": ("table_id", "database_id", "schema_name", "table_name", "row_estimate", "size_bytes",
                  "owner_team", "has_pii", "last_analyzed"),
    "code_table_refs": ("ref_id", "archive_id", "table_id", "file_path", "line", "access", "confidence",
                        "detected_at"),
}

# Rows at scale 1 of the tables sized directly; the others follow from their
# parents (containers ~3 per workload, configs ~10, archives ~7.5 per project,
# images ~2/3 of archives, tables ~20 per database, table refs ~13 per archive).
BASE_ROWS = {"gitlab_projects": 200, "k8s_workloads": 800, "databases": 300, "hosts": 150}
MIN_ROWS = {"gitlab_projects": 20, "k8s_workloads": 40, "databases": 6, "hosts": 12}

# ---------------------------------------------------------------- vocabulary

# (cluster, provider, region): workloads run here, and hosts are their nodes.
CLUSTERS = (
    ("prod-eu-1", "aws", "eu-west-1"),
    ("prod-us-1", "gcp", "us-central1"),
    ("staging-eu-1", "aws", "eu-central-1"),
    ("dev-shared", "onprem", "fra1"),
)
PROD_CLUSTERS = ("prod-eu-1", "prod-us-1")

# (GitLab group, owning team, production namespace, weight)
GROUPS = (
    ("platform", "team-platform", "prod", 3),
    ("platform/sandbox", "team-platform", "sandbox", 1),
    ("fp", "team-fp-core", "prod-fp", 3),
    ("fp/ledger", "team-fp-core", "prod-fp", 2),
    ("payments", "team-payments", "payments", 2),
    ("data", "team-data", "data-platform", 2),
    ("data/pipelines", "team-data", "data-platform", 2),
    ("ml", "team-ml", "ml-serving", 1),
    ("web", "team-web", "prod", 2),
    ("identity", "team-identity", "prod", 1),
)
TEAMS = sorted({g[1] for g in GROUPS} | {"team-sre"})

DOMAINS = ("order", "payment", "ledger", "invoice", "customer", "account", "catalog", "inventory", "pricing",
           "shipping", "notification", "search", "recommendation", "fraud", "risk", "settlement", "billing",
           "identity", "session", "report", "audit", "feature-flag", "checkout", "cart", "merchant", "kyc",
           "fx-rate", "loyalty", "promotion", "review", "media", "document", "scheduler", "workflow",
           "analytics", "ingest", "export", "refund", "subscription", "wallet")
# (suffix, kind of project): kinds decide language and what gets deployed how.
SUFFIXES = (("service", "service"), ("api", "service"), ("core", "service"), ("gateway", "service"),
            ("worker", "service"), ("consumer", "service"), ("etl", "etl"), ("web", "web"), ("ui", "web"),
            ("db", "db"), ("jobs", "jobs"), ("lib", "lib"), ("sdk", "lib"))

LANGUAGES = ("java", "python", "go", "typescript", "scala", "sql")
LANGUAGE_WEIGHTS = (40, 22, 15, 10, 8, 5)

# Always present, so small scales still cover every enum value and the README's examples.
# (group, name, kind, language)
ANCHORS = (
    ("platform", "api-gateway", "service", "go"),
    ("fp", "order-service", "service", "java"),
    ("fp/ledger", "ledger-core", "service", "scala"),
    ("fp/ledger", "ledger-db", "db", "sql"),
    ("payments", "payment-service", "service", "java"),
    ("data/pipelines", "orders-etl", "etl", "python"),
    ("ml", "fraud-scoring", "service", "python"),
    ("web", "checkout-web", "web", "typescript"),
)

# Platform projects: images used as sidecars and init containers everywhere,
# and (some) one workload per cluster. (name, language, workload or None)
INFRA = (
    ("istio-proxy", "go", None),
    ("vault-agent", "go", None),
    ("busybox-tools", "go", None),
    ("cloud-sql-proxy", "go", None),
    ("fluent-bit", "go", ("fluent-bit", "kube-system", "DaemonSet")),
    ("otel-collector", "go", ("otel-agent", "monitoring", "DaemonSet")),
    ("node-exporter", "go", ("node-exporter", "monitoring", "DaemonSet")),
    ("coredns", "go", ("coredns", "kube-system", "Deployment")),
    ("ingress-nginx", "go", ("ingress-nginx-controller", "ingress", "Deployment")),
)

# A project's k-th workload: (environment, prod cluster index, name suffix, kind or None for the main kind).
SLOTS = (
    ("prod", 0, "", None), ("staging", 0, "", None), ("prod", 1, "", None), ("prod", 0, "-worker", "Deployment"),
    ("prod", 0, "-cron", "CronJob"), ("dev", 0, "", None), ("staging", 0, "-worker", "Deployment"),
    ("prod", 0, "-migrate", "Job"), ("prod", 1, "-worker", "Deployment"), ("staging", 0, "-cron", "CronJob"),
)

BASE_IMAGES = {
    "java": ("eclipse-temurin:21-jre", "eclipse-temurin:17-jre", "amazoncorretto:21"),
    "scala": ("eclipse-temurin:17-jre", "eclipse-temurin:21-jre"),
    "python": ("python:3.12-slim", "python:3.11-slim", "python:3.12-alpine"),
    "go": ("gcr.io/distroless/static-debian12", "alpine:3.20"),
    "typescript": ("node:20-alpine", "node:22-alpine", "nginx:1.27-alpine"),
    "sql": ("flyway/flyway:10", "postgres:16-alpine"),
}
IMAGE_MB = {"java": (180, 650), "scala": (250, 720), "python": (120, 950), "go": (12, 90),
            "typescript": (90, 420), "sql": (80, 260)}

ENGINES = (("postgresql", 50, ("13.15", "14.12", "15.7", "16.3")), ("mysql", 28, ("5.7.44", "8.0.37", "8.4.1")),
           ("oracle", 10, ("19c", "21c")), ("sqlserver", 12, ("2019", "2022")))

TABLE_NAMES = ("orders", "order_items", "order_events", "customers", "customer_addresses", "accounts",
               "account_balances", "invoices", "invoice_lines", "payments", "payment_methods", "refunds",
               "ledger_entries", "journal_batches", "settlements", "merchants", "products", "product_prices",
               "inventory_items", "stock_movements", "shipments", "carriers", "users", "user_sessions", "roles",
               "permissions", "audit_log", "outbox_events", "feature_flags", "fx_rates", "currencies",
               "countries", "subscriptions", "plans", "coupons", "promotions", "reviews", "notifications",
               "documents", "kyc_documents", "risk_scores", "fraud_cases", "reports", "report_runs", "jobs",
               "job_runs", "tenants", "contacts", "employees", "wallets", "wallet_transactions", "carts",
               "cart_items", "search_queries", "media_assets", "webhooks", "api_keys", "exports",
               "flyway_schema_history", "schema_migrations")
PII_TABLES = frozenset({"customers", "customer_addresses", "accounts", "payment_methods", "users", "user_sessions",
                        "kyc_documents", "contacts", "employees", "wallets"})
WRITE_ONLY_TABLES = frozenset({"audit_log", "outbox_events", "order_events", "stock_movements", "job_runs"})
READ_ONLY_TABLES = frozenset({"fx_rates", "currencies", "countries", "feature_flags", "carriers", "plans"})

# Config keys: (key, is_sensitive, languages or None for all)
CONFIG_KEYS = (
    ("LOG_LEVEL", False, None), ("TZ", False, None), ("HTTP_PORT", False, None),
    ("OTEL_EXPORTER_OTLP_ENDPOINT", False, None), ("OTEL_SERVICE_NAME", False, None),
    ("KAFKA_BOOTSTRAP_SERVERS", False, None), ("KAFKA_CONSUMER_GROUP", False, None), ("REDIS_URL", False, None),
    ("REDIS_PASSWORD", True, None), ("FEATURE_FLAGS_URL", False, None), ("SENTRY_DSN", True, None),
    ("JWT_SIGNING_KEY", True, None), ("AWS_ACCESS_KEY_ID", True, None), ("AWS_SECRET_ACCESS_KEY", True, None),
    ("S3_BUCKET", False, None), ("MAX_POOL_SIZE", False, None), ("CACHE_TTL_SECONDS", False, None),
    ("API_RATE_LIMIT", False, None), ("SMTP_PASSWORD", True, None), ("OAUTH_CLIENT_ID", False, None),
    ("OAUTH_CLIENT_SECRET", True, None),
    ("SPRING_DATASOURCE_URL", False, ("java", "scala")), ("SPRING_DATASOURCE_USERNAME", False, ("java", "scala")),
    ("SPRING_DATASOURCE_PASSWORD", True, ("java", "scala")), ("SPRING_PROFILES_ACTIVE", False, ("java", "scala")),
    ("JAVA_OPTS", False, ("java", "scala")), ("SERVER_PORT", False, ("java", "scala")),
    ("MANAGEMENT_ENDPOINTS_WEB_EXPOSURE_INCLUDE", False, ("java", "scala")),
    ("DATABASE_URL", True, ("python", "typescript")), ("GUNICORN_WORKERS", False, ("python",)),
    ("DJANGO_SECRET_KEY", True, ("python",)), ("CELERY_BROKER_URL", True, ("python",)),
    ("PYTHONUNBUFFERED", False, ("python",)), ("DB_DSN", True, ("go",)), ("GOMAXPROCS", False, ("go",)),
    ("GRPC_PORT", False, ("go",)), ("NODE_ENV", False, ("typescript",)), ("NODE_OPTIONS", False, ("typescript",)),
    ("SESSION_SECRET", True, ("typescript",)), ("FLYWAY_URL", False, ("sql",)), ("FLYWAY_USER", False, ("sql",)),
    ("FLYWAY_PASSWORD", True, ("sql",)),
)

# Instance types: (name, vcpus, memory GiB) per provider; k8s nodes and servers draw from the same lists.
INSTANCE_TYPES = {
    "aws": (("m6i.xlarge", 4, "16"), ("m6i.2xlarge", 8, "32"), ("r6i.2xlarge", 8, "64"), ("c6i.4xlarge", 16, "32"),
            ("r6i.8xlarge", 32, "256"), ("t3.medium", 2, "4")),
    "gcp": (("n2-standard-4", 4, "16"), ("n2-standard-8", 8, "32"), ("n2-highmem-8", 8, "64"),
            ("e2-standard-16", 16, "64"), ("n1-standard-1", 1, "3.75")),
    "azure": (("Standard_D4s_v5", 4, "16"), ("Standard_E8s_v5", 8, "64"), ("Standard_D16s_v5", 16, "64"),
              ("Standard_M32ls", 32, "256")),
    "onprem": (("dell-r650", 32, "256"), ("hpe-dl380-g10", 48, "384"), ("vm-medium", 4, "15.5"),
               ("vm-large", 8, "31.25")),
}
SERVER_REGIONS = {"aws": "eu-west-1", "gcp": "europe-west3", "azure": "westeurope", "onprem": "fra1"}

# ---------------------------------------------------------------- helpers


def _rng(seed: int, part: str) -> random.Random:
    """One generator per table: drawing one table differently leaves the draws of the others alone."""
    return random.Random(f"ontoos-demo:{seed}:{part}")


def _count(table: str, scale: float) -> int:
    return max(MIN_ROWS[table], round(BASE_ROWS[table] * scale))


def _hex(rng: random.Random, digits: int) -> str:
    return f"{rng.getrandbits(4 * digits):0{digits}x}"


def _b64(rng: random.Random, nbytes: int) -> str:
    return base64.b64encode(rng.randbytes(nbytes)).decode("ascii")


def _secret(rng: random.Random, digits: int = 24) -> str:
    return SECRET_MARKER + _hex(rng, digits)


def _between(rng: random.Random, start: dt.datetime, end: dt.datetime) -> dt.datetime:
    """A whole second uniformly in [start, end]."""
    span = max(0, int((end - start).total_seconds()))
    return start + dt.timedelta(seconds=rng.randint(0, span))


def _both_values(flags: list[bool], rng: random.Random, keep: Callable[[int], bool] = lambda i: False) -> None:
    """Make a boolean column hold both values (an always-filter must filter something at any scale)."""
    for want in (True, False):
        if want not in flags:
            candidates = [i for i in range(len(flags)) if not keep(i)]
            flags[rng.choice(candidates)] = want


def _entity(table: str) -> str:
    """order_items -> OrderItem (the class a mapper or repository is named after)."""
    words = table.lower().split("_")
    last = words[-1]
    if last.endswith("ies"):
        last = last[:-3] + "y"
    elif last.endswith("ses") or last.endswith("xes"):
        last = last[:-2]
    elif last.endswith("s") and not last.endswith("ss"):
        last = last[:-1]
    return "".join(w.capitalize() for w in (*words[:-1], last))


# ---------------------------------------------------------------- the world


@dataclass(slots=True)
class Project:
    id: int
    group: str
    name: str
    kind: str  # service, etl, web, db, jobs, lib, infra
    language: str
    team: str
    created: dt.datetime
    last_activity: dt.datetime
    deleted: bool
    archives: list[int] = field(default_factory=list)  # archive ids, oldest first
    images: list[int] = field(default_factory=list)  # image ids, oldest first
    databases: list[int] = field(default_factory=list)

    @property
    def domain(self) -> str:
        return self.name.rsplit("-", 1)[0] if "-" in self.name else self.name

    @property
    def deployable(self) -> bool:
        return self.kind != "lib"


@dataclass(slots=True)
class World:
    """What later tables need to know about earlier ones (ids and a few attributes)."""

    scale: float
    seed: int
    rows: dict[str, list[tuple]] = field(default_factory=dict)
    projects: list[Project] = field(default_factory=list)
    infra: dict[str, Project] = field(default_factory=dict)  # infra project name -> project
    cluster_nodes: dict[str, int] = field(default_factory=dict)  # cluster -> live nodes
    server_hosts: list[int] = field(default_factory=list)  # host ids that run databases
    archive_dates: dict[int, dt.date] = field(default_factory=dict)
    archive_language: dict[int, str] = field(default_factory=dict)
    image_built: dict[int, dt.datetime] = field(default_factory=dict)
    workloads: list[tuple] = field(default_factory=list)  # (id, project, cluster, namespace, name, kind, created)
    tables_of: dict[int, list[tuple[int, str]]] = field(default_factory=dict)  # database -> [(table id, name)]

    def rng(self, part: str) -> random.Random:
        return _rng(self.seed, part)


def generate(scale: float = 1.0, seed: int = 7) -> dict[str, list[tuple]]:
    """Rows of every demo table (physical name without schema -> tuples in COLUMNS order)."""
    if not scale > 0:
        raise ValueError(f"scale must be positive, not {scale!r}")
    w = World(scale=scale, seed=seed)
    for step in (_hosts, _projects, _repo_stats, _archives, _images, _workloads, _containers, _configs,
                 _databases, _tables, _table_refs):
        step(w)
    return {table: w.rows[table] for table in COLUMNS}


# ---------------------------------------------------------------- hosts


def _hosts(w: World) -> None:
    rng = w.rng("hosts")
    n = _count("hosts", w.scale)
    n_servers = max(3, round(n * 0.3))
    rows, names = [], set()
    for i in range(n):
        host_id = i + 1
        if i < n - n_servers:
            # the first nodes go round-robin so every cluster has some; then prod clusters grow larger
            cluster, provider, region = CLUSTERS[i] if i < len(CLUSTERS) else rng.choices(CLUSTERS, (4, 3, 2, 1))[0]
            role = "node"
        else:
            k = i - (n - n_servers)
            cluster = None
            provider = ("azure", "onprem", "aws", "gcp")[k] if k < 4 else rng.choices(
                ("aws", "onprem", "azure", "gcp"), (35, 30, 20, 15))[0]
            region = SERVER_REGIONS[provider]
            role = "db" if k == 0 or rng.random() < 0.85 else rng.choice(("bastion", "ci-runner"))
        hostname = _hostname(rng, host_id, role, cluster, provider, region)
        while hostname in names:  # random octets can repeat; hostnames are unique
            hostname = _hostname(rng, host_id, role, cluster, provider, region)
        names.add(hostname)
        itype, vcpus, mem = rng.choice(INSTANCE_TYPES[provider][:-1] if role == "node" else INSTANCE_TYPES[provider])
        launched = _between(rng, dt.datetime(2021, 1, 1, tzinfo=UTC), SNAPSHOT - dt.timedelta(days=3))
        decommissioned = launched < dt.datetime(2025, 1, 1, tzinfo=UTC) and rng.random() < 0.15
        if role == "db" and not decommissioned:
            w.server_hosts.append(host_id)
        if role == "node" and not decommissioned:
            w.cluster_nodes[cluster] = w.cluster_nodes.get(cluster, 0) + 1
        rows.append((host_id, hostname, cluster, provider, region, itype, vcpus, Decimal(mem), launched,
                     decommissioned, _ssh_key(rng)))
    if not w.server_hosts:  # a database server decommissioned at small scale: databases still need hosts
        w.server_hosts.append(n - n_servers + 1)
    w.rows["hosts"] = rows


def _hostname(rng: random.Random, host_id: int, role: str, cluster: str | None, provider: str, region: str) -> str:
    if role != "node":
        return f"{role}-{host_id:04d}.{region}.ontoos.internal"
    if provider == "aws":
        subnet = 10 + [c[0] for c in CLUSTERS].index(cluster)  # one VPC range per cluster
        return f"ip-10-{subnet}-{rng.randint(0, 255)}-{rng.randint(1, 254)}.{region}.compute.internal"
    if provider == "gcp":
        return f"gke-{cluster}-pool-{rng.randint(1, 3)}-{_hex(rng, 8)}-{_hex(rng, 4)}"
    return f"k8s-{cluster}-node{host_id:04d}.{region}.ontoos.lan"


def _ssh_key(rng: random.Random) -> str:
    body = SECRET_MARKER + _b64(rng, 48)
    lines = [body[i:i + 70] for i in range(0, len(body), 70)]
    return "-----BEGIN OPENSSH PRIVATE KEY-----\n" + "\n".join(lines) + "\n-----END OPENSSH PRIVATE KEY-----\n"


# ---------------------------------------------------------------- projects


def _projects(w: World) -> None:
    rng = w.rng("projects")
    n = _count("gitlab_projects", w.scale)
    specs = [(g, name, kind, lang) for g, name, kind, lang in ANCHORS]
    specs += [("infra", name, "infra", lang) for name, lang, _ in INFRA]
    paths = {f"{g}/{name}" for g, name, _, _ in specs}
    group_weights = [g[3] for g in GROUPS]
    while len(specs) < n:
        group = rng.choices(GROUPS, group_weights)[0][0]
        suffix, kind = rng.choice(SUFFIXES)
        name = f"{rng.choice(DOMAINS)}-{suffix}"
        path = f"{group}/{name}"
        if path in paths:  # the vocabulary runs out at large scales: number the repeats
            name = f"{name}-{rng.randint(2, 999)}"
            path = f"{group}/{name}"
            if path in paths:
                continue
        paths.add(path)
        specs.append((group, name, kind, _language(rng, kind)))
    deleted = [i >= len(ANCHORS) + len(INFRA) and rng.random() < 0.04 for i in range(len(specs))]
    _both_values(deleted, rng, keep=lambda i: i < len(ANCHORS) + len(INFRA))
    team_of = {g[0]: g[1] for g in GROUPS} | {"infra": "team-sre"}
    rows = []
    for i, (group, name, kind, lang) in enumerate(specs):
        created = _between(rng, dt.datetime(2018, 1, 1, tzinfo=UTC), dt.datetime(2025, 9, 1, tzinfo=UTC))
        archived = not deleted[i] and i >= len(ANCHORS) + len(INFRA) and rng.random() < 0.07
        if archived:  # archived projects went quiet long ago
            last = _between(rng, created + dt.timedelta(days=30), SNAPSHOT - dt.timedelta(days=400))
        else:
            last = _between(rng, max(created, SNAPSHOT - dt.timedelta(days=120)), SNAPSHOT - dt.timedelta(hours=1))
        last = max(last, created + dt.timedelta(days=1))
        p = Project(id=i + 1, group=group, name=name, kind=kind, language=lang, team=team_of[group],
                    created=created, last_activity=last, deleted=deleted[i])
        w.projects.append(p)
        if kind == "infra":
            w.infra[name] = p
        visibility = rng.choices(("private", "internal", "public"), (60, 35, 5))[0]
        branch = rng.choices(("main", "master", "develop"), (80, 18, 2))[0]
        stars = min(5000, int(rng.paretovariate(1.3)) - 1) + (rng.randint(0, 40) if visibility == "public" else 0)
        rows.append((p.id, f"{group}/{name}", name, group, visibility, branch, stars, created, last, archived,
                     p.deleted, f"glptt-{SECRET_MARKER}{_hex(rng, 20)}"))
    w.rows["gitlab_projects"] = rows


def _language(rng: random.Random, kind: str) -> str:
    if kind == "web":
        return "typescript"
    if kind == "db":
        return "sql"
    if kind == "etl":
        return rng.choice(("python", "scala", "sql"))
    return rng.choices(LANGUAGES, LANGUAGE_WEIGHTS)[0]


def _repo_stats(w: World) -> None:
    rng = w.rng("repo_stats")
    rows = []
    for p in w.projects:
        age_days = (p.last_activity - p.created).days
        commits = max(1, int(rng.lognormvariate(5.5, 1.2) * min(1.0, age_days / 700 + 0.2)))
        contributors = max(1, min(commits, int(commits ** 0.5 / 2 + rng.randint(0, 6))))
        open_mrs = 0 if p.deleted else min(40, int(rng.expovariate(1 / 4)))
        last_commit = p.last_activity - dt.timedelta(minutes=rng.randint(0, 60 * 24 * 3))
        rows.append((p.id, commits, contributors, open_mrs, max(last_commit, p.created)))
    w.rows["gitlab_repo_stats"] = rows


# ---------------------------------------------------------------- code archives and images


def _archives(w: World) -> None:
    rng = w.rng("code_archives")
    rows = []
    for p in w.projects:
        n = rng.randint(2, 5) if p.kind == "infra" else rng.randint(1, 14)
        start = max(p.created, ARCHIVE_START)
        if start >= p.last_activity:  # a project quiet since before archiving began: archived on its last day
            start = p.last_activity - dt.timedelta(days=1)
        days = sorted(_between(rng, start, p.last_activity).date() for _ in range(n))
        loc = int(rng.lognormvariate(10, 1))
        for k, day in enumerate(days):
            archive_id = len(rows) + 1
            # migrations often live beside the code and are archived on their own
            lang = p.language if p.language == "sql" or rng.random() < 0.88 else "sql"
            sha = _hex(rng, 40)
            size = int(loc * (0.6 + 0.4 * (k + 1) / n)) if lang == p.language else rng.randint(300, 6000)
            rows.append((archive_id, p.id, sha, lang, size, day,
                         f"s3://ontoos-code-archives/{p.group}/{p.name}/{sha}.tar.gz"))
            p.archives.append(archive_id)
            w.archive_dates[archive_id] = day
            w.archive_language[archive_id] = lang
    w.rows["code_archives"] = rows


def _images(w: World) -> None:
    rng = w.rng("container_images")
    rows = []
    for p in w.projects:
        version = [1, rng.randint(0, 4), 0]
        for k, archive_id in enumerate(p.archives):
            latest = k == len(p.archives) - 1
            lang = w.archive_language[archive_id]
            # deployable projects always have an image of their newest archive: workloads run it
            if not (latest and p.deployable) and rng.random() >= (0.3 if lang == "sql" else 0.72):
                continue
            image_id = len(rows) + 1
            version = _bump(rng, version)
            day = w.archive_dates[archive_id]
            built = dt.datetime(day.year, day.month, day.day, tzinfo=UTC) + dt.timedelta(
                minutes=rng.randint(10, 60 * 20))
            built = min(built, SNAPSHOT - dt.timedelta(minutes=1))
            tag = "v{}.{}.{}".format(*version) if rng.random() < 0.8 else f"main-{_hex(rng, 8)}"
            lo, hi = IMAGE_MB[lang]
            size = rng.randint(lo * 1_000_000, hi * 1_000_000)
            base = None if rng.random() < 0.12 else rng.choice(BASE_IMAGES[lang])
            rows.append((image_id, archive_id, f"registry.ontoos.dev/{p.group}/{p.name}", tag,
                         f"sha256:{_hex(rng, 64)}", size, built, base, f"gldt-{SECRET_MARKER}{_hex(rng, 20)}"))
            p.images.append(image_id)
            w.image_built[image_id] = built
    w.rows["container_images"] = rows


def _bump(rng: random.Random, version: list[int]) -> list[int]:
    major, minor, patch = version
    roll = rng.random()
    if roll < 0.05:
        return [major + 1, 0, 0]
    if roll < 0.35:
        return [major, minor + 1, 0]
    return [major, minor, patch + 1]


# ---------------------------------------------------------------- workloads, containers, configs


def _workloads(w: World) -> None:
    rng = w.rng("k8s_workloads")
    n = _count("k8s_workloads", w.scale)
    infra = _infra_workloads(w, n // 4)
    planned = infra + _service_workloads(w, rng, n - len(infra))
    deleted = [rng.random() < (0.5 if p.deleted else 0.04) for p, *_ in planned]
    _both_values(deleted, rng)
    rows, taken = [], set()
    for i, (p, cluster, namespace, name, kind, env) in enumerate(planned):
        base, k = name, 2
        while (cluster, namespace, name) in taken:  # one name per namespace, as in Kubernetes
            name, k = f"{base}-{k}", k + 1
        taken.add((cluster, namespace, name))
        workload_id = i + 1
        created = _between(rng, max(p.created, dt.datetime(2022, 1, 1, tzinfo=UTC)), SNAPSHOT - dt.timedelta(days=1))
        rows.append((workload_id, p.id, cluster, namespace, name, kind, _replicas(w, rng, cluster, kind, env),
                     created, deleted[i], _env_dump(rng, p, name, env)))
        w.workloads.append((workload_id, p, cluster, namespace, name, kind, created))
    w.rows["k8s_workloads"] = rows


def _infra_workloads(w: World, at_most: int) -> list[tuple]:
    planned = []
    for name, _, workload in INFRA:
        if workload is None:
            continue
        wname, namespace, kind = workload
        planned += [(w.infra[name], cluster, namespace, wname, kind, "infra") for cluster, _, _ in CLUSTERS]
    return planned[:at_most]


def _service_workloads(w: World, rng: random.Random, n: int) -> list[tuple]:
    """Spread the remaining workloads over deployable projects, busier projects getting more."""
    candidates = [p for p in w.projects if p.deployable and p.kind != "infra"]
    weights = [rng.uniform(0.5, 3.0) for _ in candidates]
    prod_ns = {g[0]: g[2] for g in GROUPS}
    slots_used: dict[int, int] = {}
    planned = []
    # anchors first, so the README's namespaces have workloads at any scale
    first = candidates[:min(n, len(ANCHORS))]
    chosen = first + rng.choices(candidates, weights, k=n - len(first))
    for p in chosen:
        k = slots_used.get(p.id, 0)
        slots_used[p.id] = k + 1
        env, prod_index, suffix, kind = SLOTS[k] if k < len(SLOTS) else ("prod", k % 2, f"-shard-{k}", "StatefulSet")
        kind = kind or {"db": "StatefulSet", "jobs": "CronJob"}.get(p.kind, "Deployment")
        if p.group == "platform/sandbox":  # sandbox projects only ever run on the shared dev cluster
            cluster, namespace = "dev-shared", "sandbox"
        elif env == "prod":
            cluster, namespace = PROD_CLUSTERS[prod_index], prod_ns[p.group]
        elif env == "staging":
            cluster, namespace = "staging-eu-1", "staging"
        else:
            cluster, namespace = "dev-shared", "default"
        name = p.name if p.name.endswith(suffix) else p.name + suffix  # report-worker, not report-worker-worker
        planned.append((p, cluster, namespace, name, kind, env))
    return planned


def _replicas(w: World, rng: random.Random, cluster: str, kind: str, env: str) -> int:
    if kind == "DaemonSet":  # one pod per live node of the cluster
        return w.cluster_nodes.get(cluster, 1)
    if kind in ("CronJob", "Job"):
        return 1
    if kind == "StatefulSet":
        return rng.choice((1, 3, 3, 3, 5))
    if env in ("prod", "infra"):
        return 0 if rng.random() < 0.04 else rng.choice((2, 2, 3, 3, 3, 4, 6, 8, 12))
    return rng.choice((1, 1, 1, 2))


def _env_dump(rng: random.Random, p: Project, name: str, env: str) -> str:
    lines = [f"SERVICE_NAME={name}", f"DEPLOY_ENV={env}"]
    if p.language in ("java", "scala"):
        lines += [f"SPRING_PROFILES_ACTIVE={env}", "JAVA_TOOL_OPTIONS=-XX:MaxRAMPercentage=75"]
    lines.append(f"{'VAULT_TOKEN' if p.kind == 'infra' else 'DB_PASSWORD'}={_secret(rng, 16)}")
    if rng.random() < 0.5:
        lines.append(f"AWS_SECRET_ACCESS_KEY={SECRET_MARKER}{_b64(rng, 24)}")
    return "\n".join(lines) + "\n"


SIDECARS = (  # (container, infra image project, probability, cpu, memory)
    ("istio-proxy", "istio-proxy", 0.9, 100, 128),
    ("vault-agent", "vault-agent", 0.45, 50, 64),
    ("log-shipper", "fluent-bit", 0.2, 50, 96),
    ("cloud-sql-proxy", "cloud-sql-proxy", 0.3, 100, 128),
)
INITS = (  # (container, image: None for the workload's own, probability)
    ("init-migrations", None, 0.35),
    ("init-config", "busybox-tools", 0.25),
    ("wait-for-db", "busybox-tools", 0.2),
)


def _containers(w: World) -> None:
    rng = w.rng("k8s_containers")
    rows = []

    def add(workload_id: int, image_id: int, name: str, cpu: int, mem: int, restarts: int,
            created: dt.datetime, env_vars: str) -> None:
        start = max(created, w.image_built[image_id])  # no container runs an image before it is built
        rows.append((len(rows) + 1, workload_id, image_id, name, cpu, mem, restarts,
                     _between(rng, start, SNAPSHOT - dt.timedelta(minutes=5)), env_vars))

    for workload_id, p, cluster, namespace, wname, kind, created in w.workloads:
        own = _pick_image(rng, p)
        add(workload_id, own, _main_container(p, wname), rng.choice((100, 250, 500, 500, 1000, 2000, 4000)),
            rng.choice((256, 512, 1024, 1024, 2048, 4096, 8192)), _restarts(rng), created,
            _env_vars(rng, "DB_PASSWORD", wname))
        if p.kind == "infra":
            continue
        long_running = kind not in ("Job", "CronJob")
        for name, image, prob in INITS:
            if rng.random() < prob and (image or long_running):
                img = own if image is None else _pick_image(rng, w.infra[image])
                add(workload_id, img, name, rng.choice((50, 100)), rng.choice((64, 128)), 0, created,
                    _env_vars(rng, "VAULT_TOKEN", wname))
        for name, image, prob, cpu, mem in SIDECARS:
            if name == "istio-proxy" and (namespace in ("default", "sandbox") or not long_running):
                continue  # no mesh on dev namespaces nor for batch pods
            if name == "cloud-sql-proxy" and cluster != "prod-us-1":
                continue  # only the GCP cluster talks to Cloud SQL
            if rng.random() < prob:
                add(workload_id, _pick_image(rng, w.infra[image]), name, cpu, mem, _restarts(rng, sidecar=True),
                    created, _env_vars(rng, "ISTIO_BOOTSTRAP_TOKEN" if name == "istio-proxy" else "VAULT_TOKEN",
                                       wname))
    w.rows["k8s_containers"] = rows


def _pick_image(rng: random.Random, p: Project) -> int:
    """Mostly the newest image; some workloads lag a release or two behind."""
    if len(p.images) > 1 and rng.random() < 0.2:
        return rng.choice(p.images[-3:])
    return p.images[-1]


def _main_container(p: Project, workload: str) -> str:
    if p.kind == "infra":
        return p.name
    for suffix, name in (("-worker", "worker"), ("-cron", "job"), ("-migrate", "migrate")):
        if workload.endswith(suffix):
            return name
    return {"web": "web", "db": "db", "etl": "etl", "jobs": "job"}.get(p.kind, ("api", "app", "server")[p.id % 3])


def _restarts(rng: random.Random, sidecar: bool = False) -> int:
    roll = rng.random()
    if roll < (0.85 if sidecar else 0.7):
        return 0
    if roll < 0.97:
        return int(rng.expovariate(1 / 3)) + 1
    return rng.randint(40, 400)  # crash-looping


def _env_vars(rng: random.Random, secret_key: str, workload: str) -> str:
    return f"POD_NAME={workload}-{_hex(rng, 5)}\n{secret_key}={_secret(rng, 16)}\n"


def _configs(w: World) -> None:
    rng = w.rng("config_entries")
    by_language = {lang: [c for c in CONFIG_KEYS if c[2] is None or lang in c[2]] for lang in LANGUAGES}
    planned = []
    for workload_id, p, cluster, namespace, wname, kind, created in w.workloads:
        pool = by_language[p.language]
        for key, sensitive, _ in rng.sample(pool, min(len(pool), rng.randint(2, 5) if p.kind == "infra"
                                                      else rng.randint(5, 16))):
            planned.append((workload_id, key, sensitive, created, namespace))
    flags = [s for _, _, s, _, _ in planned]
    _both_values(flags, rng)
    rows = []
    for i, (workload_id, key, _, created, namespace) in enumerate(planned):
        sensitive = flags[i]
        if sensitive:
            source = "secret" if rng.random() < 0.85 else "env"
        else:
            source = rng.choices(("configmap", "helm", "env"), (50, 30, 20))[0]
        rows.append((i + 1, workload_id, key, source, _between(rng, created, SNAPSHOT - dt.timedelta(minutes=1)),
                     sensitive, _config_value(rng, key, sensitive, namespace)))
    w.rows["config_entries"] = rows


def _config_value(rng: random.Random, key: str, sensitive: bool, namespace: str) -> str:
    """Credentials as mounted; other values as they sit in Git, sealed with SOPS (the column is secret either way)."""
    if not sensitive:
        return f"ENC[AES256_GCM,data:{SECRET_MARKER}{_b64(rng, 12)},iv:{_b64(rng, 12)},tag:{_b64(rng, 16)},type:str]"
    token = _secret(rng, 24)
    if key.endswith(("_URL", "_DSN")) and key != "SENTRY_DSN":
        db = f"app_{_hex(rng, 4)}"
        return f"postgresql://svc_{db}:{token}@{db}.{namespace}.svc.cluster.local:5432/{db}"
    if key == "SENTRY_DSN":
        return f"https://{token}@sentry.ontoos.dev/{rng.randint(2, 400)}"
    if key == "AWS_ACCESS_KEY_ID":
        return f"AKIA{SECRET_MARKER}{_hex(rng, 12).upper()}"
    return token


# ---------------------------------------------------------------- databases, tables and the code that touches them


def _databases(w: World) -> None:
    rng = w.rng("databases")
    n = _count("databases", w.scale)
    owners = [p for p in w.projects if p.deployable and p.kind != "infra"]
    rng.shuffle(owners)
    rows = []
    for i in range(n):
        database_id = i + 1
        owner = owners[i % len(owners)]
        # the first four cover every engine; then weighted like a typical estate
        engine, _, versions = ENGINES[i] if i < len(ENGINES) else rng.choices(ENGINES, [e[1] for e in ENGINES])[0]
        stem = owner.domain.replace("-", "_")
        name = stem if not owner.databases else f"{stem}_{('reporting', 'archive', 'replica', 'events')[i % 4]}"
        owner.databases.append(database_id)
        team = owner.team if rng.random() < 0.92 else rng.choice(TEAMS)
        rows.append((database_id, rng.choice(w.server_hosts), name, engine, rng.choice(versions), team,
                     f"{_b64(rng, 6)}{SECRET_MARKER}{_hex(rng, 12)}"))
    w.rows["databases"] = rows


def _tables(w: World) -> None:
    rng = w.rng("db_tables")
    rows = []
    for database_id, _, db_name, engine, _, team, _ in w.rows["databases"]:
        names = rng.sample(TABLE_NAMES, rng.randint(8, 32))
        w.tables_of[database_id] = []
        for table in names:
            table_id = len(rows) + 1
            schema, shown = _physical_name(rng, engine, db_name, table)
            row_estimate = min(3_000_000_000, int(rng.lognormvariate(8.5, 2.6)))
            size = row_estimate * rng.randint(60, 900) + 8192 * rng.randint(1, 16)
            pii = rng.random() < (0.9 if table in PII_TABLES else 0.03)
            analyzed = None if rng.random() < 0.03 else SNAPSHOT - dt.timedelta(seconds=rng.randint(600, 30 * 86400))
            rows.append((table_id, database_id, schema, shown, row_estimate, size,
                         team if rng.random() < 0.9 else rng.choice(TEAMS), pii, analyzed))
            w.tables_of[database_id].append((table_id, table))
    w.rows["db_tables"] = rows


def _physical_name(rng: random.Random, engine: str, db_name: str, table: str) -> tuple[str, str]:
    """(schema, table) as each engine's catalog shows them."""
    if engine == "postgresql":
        return rng.choices(("public", "app", "audit", "reporting"), (70, 15, 8, 7))[0], table
    if engine == "mysql":
        return db_name, table
    if engine == "oracle":
        return f"{db_name.upper()}_OWNER", table.upper()
    return "dbo", table


# How static analysis finds a table in code of each language: (path template, access or None for the
# table's own, line range, confidence range in hundredths). {E} is the entity class, {t} the table,
# {p} the package.
LANES = {
    "java": (
        (("src/main/resources/mapper/{E}Mapper.xml", None, (12, 640), (88, 99)),
         ("src/main/java/com/ontoos/{p}/mapper/{E}Mapper.java", None, (10, 120), (78, 95))),
        (("src/main/java/com/ontoos/{p}/repository/{E}Repository.java", "read_write", (8, 90), (70, 92)),
         ("src/main/java/com/ontoos/{p}/domain/{E}.java", "read_write", (15, 40), (85, 97))),
    ),
    "scala": ((("src/main/scala/com/ontoos/{p}/dao/{E}Dao.scala", None, (10, 260), (60, 90)),),),
    "python": ((("{p}/models/{t}.py", "read_write", (5, 80), (80, 95)),
                ("{p}/repositories/{t}_repository.py", None, (10, 300), (60, 90))),),
    "go": ((("internal/store/{t}_store.go", None, (20, 400), (55, 90)),
            ("internal/store/queries/{t}.sql", None, (1, 120), (90, 99))),),
    "typescript": ((("src/entities/{k}.entity.ts", "read_write", (5, 60), (75, 95)),
                    ("src/repositories/{k}.repository.ts", None, (10, 200), (60, 90))),),
    "sql": ((("db/migration/V{n}__create_{t}.sql", "write", (1, 80), (95, 100)),
             ("sql/reports/{t}_daily.sql", "read", (1, 160), (90, 99))),),
}


def _table_refs(w: World) -> None:
    rng = w.rng("code_table_refs")
    all_tables = [t for tables in w.tables_of.values() for t in tables]
    rows = []
    for p in w.projects:
        if p.kind in ("infra", "lib"):
            continue
        home = [t for db in p.databases for t in w.tables_of[db]]
        code_maps: dict[str, list[tuple]] = {}
        for archive_id in p.archives:
            lang = w.archive_language[archive_id]
            if lang not in code_maps:  # the same code finds the same tables in every snapshot
                code_maps[lang] = _code_map(rng, p, lang, home, all_tables)
            day = w.archive_dates[archive_id]
            detected = dt.datetime(day.year, day.month, day.day, tzinfo=UTC) + dt.timedelta(hours=rng.randint(1, 30))
            for table_id, path, access, line, conf in code_maps[lang]:
                if rng.random() >= 0.88:  # code changes between snapshots: some references come and go
                    continue
                line = max(1, line + rng.randint(-12, 12))
                confidence = min(Decimal(100), max(Decimal(0), conf + rng.randint(-3, 3))).scaleb(-2)
                rows.append((len(rows) + 1, archive_id, table_id, path, line, access, confidence,
                             min(detected, SNAPSHOT - dt.timedelta(minutes=1))))
    w.rows["code_table_refs"] = rows


def _code_map(rng: random.Random, p: Project, lang: str, home: Sequence[tuple[int, str]],
              all_tables: Sequence[tuple[int, str]]) -> list[tuple]:
    """(table id, file, access, line, confidence in hundredths) that one codebase yields."""
    picked = [(t, False) for t in rng.sample(home, min(len(home), rng.randint(6, 16)))]
    picked += [(rng.choice(all_tables), True) for _ in range(rng.choice((0, 0, 1, 2)))]  # reads another team's table
    package = p.domain.replace("-", "")
    entries = []
    for n, ((table_id, table), foreign) in enumerate(picked, start=1):
        for template, access, (lo, hi), (clo, chi) in rng.choice(LANES[lang]):
            if foreign and access == "write":
                continue  # nobody migrates another team's table
            if rng.random() < 0.3 and entries and entries[-1][0] == table_id:
                continue  # not every table has both files of its lane
            path = template.format(E=_entity(table), t=table.lower(), p=package, n=n,
                                   k=table.lower().replace("_", "-").removesuffix("s"))
            entries.append((table_id, path, "read" if foreign else access or _access(rng, table.lower()),
                            rng.randint(lo, hi), Decimal(rng.randint(clo, chi))))
    return entries


def _access(rng: random.Random, table: str) -> str:
    if table in WRITE_ONLY_TABLES:
        return "write"
    if table in READ_ONLY_TABLES:
        return "read"
    return rng.choices(("read_write", "read", "write"), (45, 40, 15))[0]


# ---------------------------------------------------------------- loading


def _schema_sql() -> tuple[str, str]:
    """demo_schema.sql as (tables, keys and indexes)."""
    text = resources.files("ontoos_explore").joinpath("data/demo_schema.sql").read_text(encoding="utf-8")
    before, _, after = text.partition(AFTER_LOAD)
    return before, after


def _copy(conn: psycopg.Connection, table: str, columns: Sequence[str], rows: list[tuple]) -> None:
    """COPY rows into one of the fixed demo tables (names from COLUMNS, never from data)."""
    stmt = sql.SQL("COPY {} ({}) FROM STDIN").format(
        sql.Identifier(SCHEMA, table), sql.SQL(", ").join(map(sql.Identifier, columns)))
    with conn.cursor() as cur, cur.copy(stmt) as copy:
        for row in rows:
            copy.write_row(row)


# The publish log, relative to when the demo is loaded (the lake is republished daily; an answer's age
# is its data's age now): source -> (hours before the load its current batch was collected, or None when
# the source does not say; hours before the load it was published). cmdb is stale past the demo's
# 36-hour threshold; registry says only when it published (its freshness is estimated).
PUBLISHED = {"gitlab": (9, 8), "k8s": (6, 5), "registry": (None, 3), "archiver": (20, 18), "code_scan": (14, 12),
             "cmdb": (80, 78)}
BATCHES = 3  # each source's current batch and the two before it, a day apart


def publish_log(loaded_at: dt.datetime) -> list[tuple]:
    """The publish log's rows (source, batch_id, collected_at, published_at, as_of) for a demo loaded at
    `loaded_at`."""
    rows = []
    for source, (collected_h, published_h) in PUBLISHED.items():
        for day in range(BATCHES):
            published = loaded_at - dt.timedelta(hours=published_h, days=day)
            collected = None if collected_h is None else loaded_at - dt.timedelta(hours=collected_h, days=day)
            batch = f"{published:%Y%m%d_%H%M%S}_{source}"
            rows.append((source, batch, collected, published, collected))
    return rows


def _write_publish_log(conn: psycopg.Connection) -> None:
    """The publish log as of now (replacing what it held): a demo kept for days keeps hours-old batches."""
    conn.execute(sql.SQL("DELETE FROM {}").format(sql.Identifier(SCHEMA, "publish_log")))
    _copy(conn, "publish_log", PUBLISH_LOG_COLUMNS, publish_log(dt.datetime.now(UTC).replace(microsecond=0)))


REPUBLISH_AFTER = dt.timedelta(hours=1)  # a start this long after the last writes the publish log again


def _published_lately(conn: psycopg.Connection) -> bool:
    """Whether the publish log was written less than REPUBLISH_AFTER ago: then a start keeps it, so the
    batches (and the cursors of answers read from them) outlive one CLI run."""
    (newest,) = conn.execute(sql.SQL("SELECT max(published_at) FROM {}").format(
        sql.Identifier(SCHEMA, "publish_log"))).fetchone()
    if newest is None:
        return False
    written = newest + dt.timedelta(hours=min(p for _, p in PUBLISHED.values()))
    return dt.datetime.now(UTC) - written < REPUBLISH_AFTER


def _meta(scale: float, seed: int, counts: dict[str, int]) -> dict[str, str]:
    return {"generator_version": str(GENERATOR_VERSION), "seed": str(int(seed)), "scale": repr(float(scale)),
            "rows": str(sum(counts.values()))}


def _load_locked(conn: psycopg.Connection, scale: float, seed: int) -> dict[str, int]:
    data = generate(scale, seed)
    tables, constraints = _schema_sql()
    conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(SCHEMA)))
    conn.execute(tables)
    for table in COLUMNS:
        _copy(conn, table, COLUMNS[table], data[table])
    if constraints.strip():
        conn.execute(constraints)
    counts = {table: len(rows) for table, rows in data.items()}
    _copy(conn, "demo_meta", ("key", "value"), list(_meta(scale, seed, counts).items()))
    _write_publish_log(conn)
    conn.execute(sql.SQL("ANALYZE {}").format(
        sql.SQL(", ").join(sql.Identifier(SCHEMA, t) for t in (*COLUMNS, "demo_meta", "publish_log"))))
    return counts


def _commit(conn: psycopg.Connection) -> None:
    """Commit the caller's open transaction too: a loaded demo nobody else can see is no use."""
    if not conn.autocommit and conn.info.transaction_status == TransactionStatus.INTRANS:
        conn.commit()


def load(conn: psycopg.Connection, scale: float = 1.0, seed: int = 7) -> dict[str, int]:
    """(Re)create schema lake with the demo rows; commit; return rows per table.

    Runs in one transaction (a failed load leaves the previous demo in place)
    under an advisory lock (two loaders at once take turns). Call it outside a
    transaction block: it commits."""
    with conn.transaction():
        conn.execute(LOCK_SQL)
        counts = _load_locked(conn, scale, seed)
    _commit(conn)
    return counts


def loaded(conn: psycopg.Connection) -> dict[str, str] | None:
    """The demo_meta of the loaded demo, or None when there is none."""
    with conn.transaction():
        (exists,) = conn.execute("SELECT to_regclass('lake.demo_meta') IS NOT NULL").fetchone()
        if not exists:
            return None
        meta = dict(conn.execute("SELECT key, value FROM lake.demo_meta").fetchall())
    return meta or None


def _current(meta: dict[str, str] | None, scale: float, seed: int) -> bool:
    if meta is None:
        return False
    try:
        return (int(meta.get("generator_version", "")) == GENERATOR_VERSION and int(meta.get("seed", "")) == seed
                and float(meta.get("scale", "")) == float(scale))
    except ValueError:
        return False


def ensure(conn: psycopg.Connection, scale: float = 1.0, seed: int = 7) -> bool:
    """Load the demo unless this very one (version, seed, scale) is loaded (then only its publish log is
    written again, as of now); True if it loaded."""
    with conn.transaction():
        # check under the lock: a loader that started first finishes before we look
        conn.execute(LOCK_SQL)
        if _current(loaded(conn), scale, seed):
            if not _published_lately(conn):  # the rows stay; what was published is as of this start
                _write_publish_log(conn)
            did_load = False
        else:
            _load_locked(conn, scale, seed)
            did_load = True
    _commit(conn)
    return did_load
