//! The PostgreSQL tables as numbered migrations, recorded in `schema_migrations`.
//!
//! The rows are the SQLite backend's: the same columns, JSON kept as the same text (an
//! event's `data` is the exact text sent over SSE). Integers are `BIGINT` (Rust's `i64`)
//! and ids sort bytewise (`COLLATE "C"`), as SQLite sorts them, so paging and "oldest
//! first" order rows alike on both backends whatever the database's locale.

/// The migrations in order: (version, statements). Add one (never edit one that shipped)
/// when the tables change.
pub(super) const POSTGRES_MIGRATIONS: &[(i64, &str)] = &[
    (1, INITIAL),
    (2, PAUSED_SANDBOXES),
    (3, crate::store::replicas_schema::POSTGRES_REPLICAS),
    (4, crate::store::gateway_records::POSTGRES_GATEWAY_RECORDS),
    (5, ENVS),
    (6, crate::store::replicas_schema::POSTGRES_ENV_OWNERS),
];

/// The newest migration.
pub(super) const SCHEMA_VERSION: i64 = 6;

/// The advisory lock servers starting together take while migrating ("cordon").
pub(super) const MIGRATION_LOCK: i64 = 0x636f_7264_6f6e;

const INITIAL: &str = r#"
CREATE TABLE meta (
    key   TEXT COLLATE "C" PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE sandboxes (
    id          TEXT COLLATE "C" PRIMARY KEY,
    language    TEXT NOT NULL,
    tools       TEXT NOT NULL,
    limits      TEXT NOT NULL,
    stateful    BOOLEAN NOT NULL,
    ttl_ms      BIGINT NOT NULL,
    created_ms  BIGINT NOT NULL,
    expires_ms  BIGINT NOT NULL,
    state       TEXT NOT NULL,
    reason      TEXT
);
CREATE TABLE executions (
    id          TEXT COLLATE "C" PRIMARY KEY,
    sandbox_id  TEXT NOT NULL,
    language    TEXT NOT NULL,
    code        TEXT NOT NULL,
    status      TEXT NOT NULL,
    created_ms  BIGINT NOT NULL,
    finished_ms BIGINT,
    result      TEXT
);
CREATE INDEX executions_by_status ON executions (status);
CREATE TABLE events (
    execution_id TEXT COLLATE "C" NOT NULL,
    seq          BIGINT NOT NULL,
    type         TEXT NOT NULL,
    data         TEXT NOT NULL,
    at_ms        BIGINT NOT NULL,
    PRIMARY KEY (execution_id, seq)
);
CREATE TABLE approvals (
    id           TEXT COLLATE "C" PRIMARY KEY,
    execution_id TEXT COLLATE "C" NOT NULL,
    call_id      TEXT NOT NULL,
    tool         TEXT NOT NULL,
    input        TEXT NOT NULL,
    reason       TEXT NOT NULL,
    status       TEXT NOT NULL,
    created_ms   BIGINT NOT NULL,
    decided_ms   BIGINT
);
CREATE INDEX approvals_by_execution ON approvals (execution_id);
CREATE TABLE computers (
    id          TEXT COLLATE "C" PRIMARY KEY,
    setup       TEXT NOT NULL,
    trajectory  TEXT NOT NULL,
    ttl_ms      BIGINT NOT NULL,
    created_ms  BIGINT NOT NULL,
    expires_ms  BIGINT NOT NULL,
    state       TEXT NOT NULL,
    reason      TEXT,
    finished_ms BIGINT,
    current_url TEXT,
    steps       BIGINT NOT NULL DEFAULT 0,
    pending     TEXT
);
CREATE INDEX computers_by_state ON computers (state);
CREATE TABLE computer_steps (
    computer_id TEXT COLLATE "C" NOT NULL,
    step        BIGINT NOT NULL,
    status      TEXT NOT NULL,
    data        TEXT NOT NULL,
    screenshot  TEXT,
    at_ms       BIGINT NOT NULL,
    PRIMARY KEY (computer_id, step)
);
CREATE TABLE computer_approvals (
    id          TEXT COLLATE "C" PRIMARY KEY,
    computer_id TEXT COLLATE "C" NOT NULL,
    step        BIGINT NOT NULL,
    status      TEXT NOT NULL,
    created_ms  BIGINT NOT NULL,
    decided_ms  BIGINT
);
CREATE INDEX computer_approvals_by_computer ON computer_approvals (computer_id);
CREATE TABLE conversations (
    id          TEXT COLLATE "C" PRIMARY KEY,
    upstream    TEXT NOT NULL,
    created_ms  BIGINT NOT NULL,
    updated_ms  BIGINT NOT NULL,
    entries     BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX conversations_by_update ON conversations (updated_ms DESC, id DESC);
CREATE TABLE conversation_entries (
    conversation_id TEXT COLLATE "C" NOT NULL,
    seq             BIGINT NOT NULL,
    kind            TEXT NOT NULL,
    call_id         TEXT,
    round           BIGINT,
    duration_ms     BIGINT,
    data            TEXT NOT NULL,
    at_ms           BIGINT NOT NULL,
    PRIMARY KEY (conversation_id, seq)
);
CREATE TABLE responses (
    id          TEXT COLLATE "C" PRIMARY KEY,
    parent      TEXT,
    items       TEXT NOT NULL,
    created_ms  BIGINT NOT NULL
);
CREATE TABLE sessions (
    id          TEXT COLLATE "C" PRIMARY KEY,
    state       TEXT NOT NULL,
    created_ms  BIGINT NOT NULL,
    updated_ms  BIGINT NOT NULL
);
"#;

/// Benchmark environments (`/v1/envs`) and their episodes.
const ENVS: &str = r#"
CREATE TABLE envs (
    id          TEXT COLLATE "C" PRIMARY KEY,
    suite       TEXT NOT NULL,
    state       TEXT NOT NULL,
    reason      TEXT,
    created_ms  BIGINT NOT NULL,
    updated_ms  BIGINT NOT NULL
);
CREATE INDEX envs_by_state ON envs (state);
CREATE TABLE env_episodes (
    env_id      TEXT COLLATE "C" NOT NULL,
    episode     BIGINT NOT NULL,
    task        TEXT NOT NULL,
    seed        BIGINT NOT NULL,
    steps       BIGINT NOT NULL,
    reward      DOUBLE PRECISION NOT NULL,
    done        BOOLEAN NOT NULL,
    started_ms  BIGINT NOT NULL,
    updated_ms  BIGINT NOT NULL,
    PRIMARY KEY (env_id, episode)
);
"#;

/// Paused sandboxes: where their state is in the object store and how large it is, and
/// the index the reaper reads to expire them.
const PAUSED_SANDBOXES: &str = r#"
ALTER TABLE sandboxes ADD COLUMN paused_bytes BIGINT;
ALTER TABLE sandboxes ADD COLUMN paused_key TEXT;
CREATE INDEX sandboxes_by_state ON sandboxes (state, expires_ms);
"#;
