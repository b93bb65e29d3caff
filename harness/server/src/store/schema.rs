//! The SQLite tables of every table group as numbered migrations, and the schema version
//! written to `meta`.

/// The SQLite migrations in order: (version, statements). Each is recorded in
/// `schema_migrations` once applied. These three predate that table and create their
/// tables `IF NOT EXISTS`, so a file written before it was kept gets them again harmlessly;
/// a later migration may alter tables and need not be repeatable. Add one (never edit one
/// that shipped) when the tables change.
pub(super) const SQLITE_MIGRATIONS: &[(i64, &str)] = &[
    (1, SCHEMA),
    (2, CONVERSATIONS_SCHEMA),
    (3, SESSIONS_SCHEMA),
    (4, PAUSED_SANDBOXES),
    (5, super::replicas_schema::SQLITE_REPLICAS),
    (6, super::gateway_records::SQLITE_GATEWAY_RECORDS),
    (7, ENVS_SCHEMA),
    (8, super::replicas_schema::SQLITE_ENV_OWNERS),
];

/// The newest SQLite migration, also written to `meta` (`schema`), where builds from before
/// `schema_migrations` look for it.
pub(super) const SCHEMA_VERSION: i64 = 8;

/// The tables of sandboxes, executions (their events and approvals) and computer sessions
/// (their steps and approvals), and `meta`.
pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS sandboxes (
    id          TEXT PRIMARY KEY,
    language    TEXT NOT NULL,
    tools       TEXT NOT NULL,
    limits      TEXT NOT NULL,
    stateful    INTEGER NOT NULL,
    ttl_ms      INTEGER NOT NULL,
    created_ms  INTEGER NOT NULL,
    expires_ms  INTEGER NOT NULL,
    state       TEXT NOT NULL,
    reason      TEXT
);
CREATE TABLE IF NOT EXISTS executions (
    id          TEXT PRIMARY KEY,
    sandbox_id  TEXT NOT NULL,
    language    TEXT NOT NULL,
    code        TEXT NOT NULL,
    status      TEXT NOT NULL,
    created_ms  INTEGER NOT NULL,
    finished_ms INTEGER,
    result      TEXT
);
CREATE INDEX IF NOT EXISTS executions_by_status ON executions (status);
CREATE TABLE IF NOT EXISTS events (
    execution_id TEXT NOT NULL,
    seq          INTEGER NOT NULL,
    type         TEXT NOT NULL,
    data         TEXT NOT NULL,
    at_ms        INTEGER NOT NULL,
    PRIMARY KEY (execution_id, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS approvals (
    id           TEXT PRIMARY KEY,
    execution_id TEXT NOT NULL,
    call_id      TEXT NOT NULL,
    tool         TEXT NOT NULL,
    input        TEXT NOT NULL,
    reason       TEXT NOT NULL,
    status       TEXT NOT NULL,
    created_ms   INTEGER NOT NULL,
    decided_ms   INTEGER
);
CREATE INDEX IF NOT EXISTS approvals_by_execution ON approvals (execution_id);
CREATE TABLE IF NOT EXISTS computers (
    id          TEXT PRIMARY KEY,
    setup       TEXT NOT NULL,
    trajectory  TEXT NOT NULL,
    ttl_ms      INTEGER NOT NULL,
    created_ms  INTEGER NOT NULL,
    expires_ms  INTEGER NOT NULL,
    state       TEXT NOT NULL,
    reason      TEXT,
    finished_ms INTEGER,
    current_url TEXT,
    steps       INTEGER NOT NULL DEFAULT 0,
    pending     TEXT
);
CREATE INDEX IF NOT EXISTS computers_by_state ON computers (state);
CREATE TABLE IF NOT EXISTS computer_steps (
    computer_id TEXT NOT NULL,
    step        INTEGER NOT NULL,
    status      TEXT NOT NULL,
    data        TEXT NOT NULL,
    screenshot  TEXT,
    at_ms       INTEGER NOT NULL,
    PRIMARY KEY (computer_id, step)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS computer_approvals (
    id          TEXT PRIMARY KEY,
    computer_id TEXT NOT NULL,
    step        INTEGER NOT NULL,
    status      TEXT NOT NULL,
    created_ms  INTEGER NOT NULL,
    decided_ms  INTEGER
);
CREATE INDEX IF NOT EXISTS computer_approvals_by_computer ON computer_approvals (computer_id);
";

/// The tables of gateway conversations and Responses-API responses.
pub(super) const CONVERSATIONS_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS conversations (
    id          TEXT PRIMARY KEY,
    upstream    TEXT NOT NULL,
    created_ms  INTEGER NOT NULL,
    updated_ms  INTEGER NOT NULL,
    entries     INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS conversation_entries (
    conversation_id TEXT NOT NULL,
    seq             INTEGER NOT NULL,
    kind            TEXT NOT NULL,
    call_id         TEXT,
    round           INTEGER,
    duration_ms     INTEGER,
    data            TEXT NOT NULL,
    at_ms           INTEGER NOT NULL,
    PRIMARY KEY (conversation_id, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS responses (
    id          TEXT PRIMARY KEY,
    parent      TEXT,
    items       TEXT NOT NULL,
    created_ms  INTEGER NOT NULL
);
";

/// The table of session-protocol sessions.
pub(super) const SESSIONS_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS sessions (
    id          TEXT PRIMARY KEY,
    state       TEXT NOT NULL,
    created_ms  INTEGER NOT NULL,
    updated_ms  INTEGER NOT NULL
);
";

/// The tables of benchmark environments (`/v1/envs`) and their episodes.
pub(super) const ENVS_SCHEMA: &str = "
CREATE TABLE envs (
    id          TEXT PRIMARY KEY,
    suite       TEXT NOT NULL,
    state       TEXT NOT NULL,
    reason      TEXT,
    created_ms  INTEGER NOT NULL,
    updated_ms  INTEGER NOT NULL
);
CREATE INDEX envs_by_state ON envs (state);
CREATE TABLE env_episodes (
    env_id      TEXT NOT NULL,
    episode     INTEGER NOT NULL,
    task        TEXT NOT NULL,
    seed        INTEGER NOT NULL,
    steps       INTEGER NOT NULL,
    reward      REAL NOT NULL,
    done        INTEGER NOT NULL,
    started_ms  INTEGER NOT NULL,
    updated_ms  INTEGER NOT NULL,
    PRIMARY KEY (env_id, episode)
) WITHOUT ROWID;
";

/// Paused sandboxes: where their state is in the object store and how large it is, and
/// the index the reaper reads to expire them.
pub(super) const PAUSED_SANDBOXES: &str = "
ALTER TABLE sandboxes ADD COLUMN paused_bytes INTEGER;
ALTER TABLE sandboxes ADD COLUMN paused_key TEXT;
CREATE INDEX IF NOT EXISTS sandboxes_by_state ON sandboxes (state, expires_ms);
";
