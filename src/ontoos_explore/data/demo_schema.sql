-- The demo lakehouse: one table per dataset of contracts/demo.yaml, in schema lake.
--
-- Table and column names are exactly the contract's physical names; the
-- contract's types map to PostgreSQL as text -> text, integer -> bigint (keys,
-- large counts) or integer, numeric -> numeric, boolean -> boolean,
-- date -> date, timestamp -> timestamptz, enum -> text with a CHECK listing
-- the values. Loaded by ontoos_explore.engine.demo_data, which runs the part
-- above the "after-load" marker, COPYs the rows, then runs the rest: foreign
-- keys and indexes are cheaper to build once over loaded tables than to
-- maintain row by row. Run as a whole, the file creates the same schema empty.

CREATE SCHEMA lake;

CREATE TABLE lake.demo_meta (
    key   text PRIMARY KEY,
    value text NOT NULL
);

-- What the lake published: one row per batch of a source (a crawler), its
-- current batch the one with the latest published_at. collected_at and as_of
-- are null when the source does not say.
CREATE TABLE lake.publish_log (
    source       text NOT NULL,
    batch_id     text NOT NULL,
    collected_at timestamptz,
    published_at timestamptz NOT NULL,
    as_of        timestamptz,
    PRIMARY KEY (source, batch_id)
);

CREATE TABLE lake.gitlab_projects (
    project_id       bigint PRIMARY KEY,
    path             text NOT NULL UNIQUE,
    name             text NOT NULL,
    namespace        text NOT NULL,
    visibility       text NOT NULL CHECK (visibility IN ('private', 'internal', 'public')),
    default_branch   text NOT NULL,
    star_count       integer NOT NULL,
    created_at       timestamptz NOT NULL,
    last_activity_at timestamptz NOT NULL,
    archived         boolean NOT NULL,
    is_deleted       boolean NOT NULL,
    ci_token         text NOT NULL
);

CREATE TABLE lake.gitlab_repo_stats (
    project_id     bigint PRIMARY KEY,
    commit_count   integer NOT NULL,
    contributors   integer NOT NULL,
    open_mrs       integer NOT NULL,
    last_commit_at timestamptz NOT NULL
);

CREATE TABLE lake.k8s_workloads (
    workload_id bigint PRIMARY KEY,
    project_id  bigint NOT NULL,
    cluster     text NOT NULL,
    namespace   text NOT NULL,
    name        text NOT NULL,
    kind        text NOT NULL CHECK (kind IN ('Deployment', 'StatefulSet', 'DaemonSet', 'CronJob', 'Job')),
    replicas    integer NOT NULL,
    created_at  timestamptz NOT NULL,
    is_deleted  boolean NOT NULL,
    env_dump    text NOT NULL
);

CREATE TABLE lake.k8s_containers (
    container_id  bigint PRIMARY KEY,
    workload_id   bigint NOT NULL,
    image_id      bigint NOT NULL,
    name          text NOT NULL,
    cpu_millis    integer NOT NULL,
    memory_mb     integer NOT NULL,
    restart_count integer NOT NULL,
    started_at    timestamptz NOT NULL,
    env_vars      text NOT NULL
);

CREATE TABLE lake.container_images (
    image_id          bigint PRIMARY KEY,
    archive_id        bigint NOT NULL,
    repository        text NOT NULL,
    tag               text NOT NULL,
    digest            text NOT NULL,
    size_bytes        numeric NOT NULL,
    built_at          timestamptz NOT NULL,
    base_image        text,  -- null: built FROM scratch
    registry_password text NOT NULL
);

CREATE TABLE lake.code_archives (
    archive_id  bigint PRIMARY KEY,
    project_id  bigint NOT NULL,
    commit_sha  text NOT NULL,
    language    text NOT NULL CHECK (language IN ('python', 'java', 'go', 'typescript', 'scala', 'sql')),
    loc         integer NOT NULL,
    archived_on date NOT NULL,
    storage_uri text NOT NULL
);

CREATE TABLE lake.code_table_refs (
    ref_id      bigint PRIMARY KEY,
    archive_id  bigint NOT NULL,
    table_id    bigint NOT NULL,
    file_path   text NOT NULL,
    line        integer NOT NULL,
    access      text NOT NULL CHECK (access IN ('read', 'write', 'read_write')),
    confidence  numeric(3, 2) NOT NULL CHECK (confidence BETWEEN 0 AND 1),
    detected_at timestamptz NOT NULL
);

CREATE TABLE lake.db_tables (
    table_id      bigint PRIMARY KEY,
    database_id   bigint NOT NULL,
    schema_name   text NOT NULL,
    table_name    text NOT NULL,
    row_estimate  bigint NOT NULL,
    size_bytes    numeric NOT NULL,
    owner_team    text NOT NULL,
    has_pii       boolean NOT NULL,
    last_analyzed timestamptz  -- null: never analyzed
);

CREATE TABLE lake.databases (
    database_id         bigint PRIMARY KEY,
    host_id             bigint NOT NULL,
    name                text NOT NULL,
    engine              text NOT NULL CHECK (engine IN ('postgresql', 'mysql', 'oracle', 'sqlserver')),
    version             text NOT NULL,
    owner_team          text NOT NULL,
    connection_password text NOT NULL
);

CREATE TABLE lake.config_entries (
    config_id    bigint PRIMARY KEY,
    workload_id  bigint NOT NULL,
    key          text NOT NULL,
    source       text NOT NULL CHECK (source IN ('configmap', 'secret', 'env', 'helm')),
    updated_at   timestamptz NOT NULL,
    is_sensitive boolean NOT NULL,
    value        text NOT NULL
);

CREATE TABLE lake.hosts (
    host_id         bigint PRIMARY KEY,
    hostname        text NOT NULL UNIQUE,
    cluster         text,  -- null: not a Kubernetes node (database servers, bastions)
    provider        text NOT NULL CHECK (provider IN ('aws', 'gcp', 'azure', 'onprem')),
    region          text NOT NULL,
    instance_type   text NOT NULL,
    vcpus           integer NOT NULL,
    memory_gb       numeric(7, 2) NOT NULL,
    launched_at     timestamptz NOT NULL,
    decommissioned  boolean NOT NULL,
    ssh_private_key text NOT NULL
);

-- ontoos:after-load

CREATE INDEX publish_log_current ON lake.publish_log (source, published_at DESC);

-- Foreign keys: every contract relation except cluster_hosts (workloads and
-- hosts meet on a cluster name, many to many; neither side is a key).
ALTER TABLE lake.gitlab_repo_stats
    ADD FOREIGN KEY (project_id) REFERENCES lake.gitlab_projects (project_id);
ALTER TABLE lake.k8s_workloads
    ADD FOREIGN KEY (project_id) REFERENCES lake.gitlab_projects (project_id);
ALTER TABLE lake.code_archives
    ADD FOREIGN KEY (project_id) REFERENCES lake.gitlab_projects (project_id);
ALTER TABLE lake.k8s_containers
    ADD FOREIGN KEY (workload_id) REFERENCES lake.k8s_workloads (workload_id),
    ADD FOREIGN KEY (image_id) REFERENCES lake.container_images (image_id);
ALTER TABLE lake.container_images
    ADD FOREIGN KEY (archive_id) REFERENCES lake.code_archives (archive_id);
ALTER TABLE lake.code_table_refs
    ADD FOREIGN KEY (archive_id) REFERENCES lake.code_archives (archive_id),
    ADD FOREIGN KEY (table_id) REFERENCES lake.db_tables (table_id);
ALTER TABLE lake.db_tables
    ADD FOREIGN KEY (database_id) REFERENCES lake.databases (database_id);
ALTER TABLE lake.databases
    ADD FOREIGN KEY (host_id) REFERENCES lake.hosts (host_id);
ALTER TABLE lake.config_entries
    ADD FOREIGN KEY (workload_id) REFERENCES lake.k8s_workloads (workload_id);

-- Indexes on the join columns (the child side; parents have their primary
-- keys) and on the columns explorations filter and group by most.
CREATE INDEX ON lake.gitlab_projects (namespace);
CREATE INDEX ON lake.k8s_workloads (project_id);
CREATE INDEX ON lake.k8s_workloads (cluster);
CREATE INDEX ON lake.k8s_workloads (namespace);
CREATE INDEX ON lake.k8s_containers (workload_id);
CREATE INDEX ON lake.k8s_containers (image_id);
CREATE INDEX ON lake.container_images (archive_id);
CREATE INDEX ON lake.code_archives (project_id);
CREATE INDEX ON lake.code_table_refs (archive_id);
CREATE INDEX ON lake.code_table_refs (table_id);
CREATE INDEX ON lake.code_table_refs (access);
CREATE INDEX ON lake.db_tables (database_id);
CREATE INDEX ON lake.databases (host_id);
CREATE INDEX ON lake.config_entries (workload_id);
CREATE INDEX ON lake.config_entries (source);
CREATE INDEX ON lake.hosts (cluster);
CREATE INDEX ON lake.hosts (provider);
