//! The tables of replicas and owners, as one migration per backend (SQLite 5, PostgreSQL
//! 3), and the SQL both backends share to find the live owner of a thing; leaf.
//!
//! A replica is one `cordon serve` process sharing the database with others
//! (`--replica-address`). It writes its heartbeat to `replicas`; the things that live in
//! its memory (sandboxes, executions, computer sessions, benchmark environments) name it in their `owner` column,
//! so a request that reaches another replica can be forwarded to it, and once its
//! heartbeat is older than the lease the others end what it owned.

/// SQLite migration 5: `replicas` and the `owner` columns.
pub(super) const SQLITE_REPLICAS: &str = "
CREATE TABLE replicas (
    id          TEXT PRIMARY KEY,
    address     TEXT NOT NULL,
    seen_at_ms  INTEGER NOT NULL
);
ALTER TABLE sandboxes ADD COLUMN owner TEXT;
ALTER TABLE executions ADD COLUMN owner TEXT;
ALTER TABLE computers ADD COLUMN owner TEXT;
";

/// PostgreSQL migration 3: `replicas`, the `owner` columns, and a trigger that announces
/// each stored event on channel [`EVENTS_CHANNEL`] (payload: the execution id), so an event
/// stream served by one replica wakes when another stores an event — recovery's final
/// events included. In a trigger rather than in the code that appends: every writer
/// announces, and it costs no extra round trip (the notification goes out at commit).
pub(super) const POSTGRES_REPLICAS: &str = r#"
CREATE TABLE replicas (
    id          TEXT COLLATE "C" PRIMARY KEY,
    address     TEXT NOT NULL,
    seen_at_ms  BIGINT NOT NULL
);
ALTER TABLE sandboxes ADD COLUMN owner TEXT COLLATE "C";
ALTER TABLE executions ADD COLUMN owner TEXT COLLATE "C";
ALTER TABLE computers ADD COLUMN owner TEXT COLLATE "C";
CREATE FUNCTION cordon_announce_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('cordon_events', NEW.execution_id);
    RETURN NULL;
END
$$;
CREATE TRIGGER events_announce AFTER INSERT ON events
    FOR EACH ROW EXECUTE FUNCTION cordon_announce_event();
"#;

/// SQLite migration 8: benchmark environments (`/v1/envs`, whose browser lives in one
/// process) name their replica too, so a starting or surviving replica interrupts only
/// the environments of dead ones.
pub(super) const SQLITE_ENV_OWNERS: &str = "ALTER TABLE envs ADD COLUMN owner TEXT;";

/// PostgreSQL migration 6: as [`SQLITE_ENV_OWNERS`].
pub(super) const POSTGRES_ENV_OWNERS: &str =
    r#"ALTER TABLE envs ADD COLUMN owner TEXT COLLATE "C";"#;

/// The channel stored events are announced on (PostgreSQL).
pub(crate) const EVENTS_CHANNEL: &str = "cordon_events";

/// What a request can name whose owner it must reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owned {
    /// A sandbox (`/v1/sandboxes/{id}…`), while `live`.
    Sandbox,
    /// An execution (`/v1/executions/{id}…`), while `running`.
    Execution,
    /// A computer session (`/v1/computers/{id}…`), while `live`.
    Computer,
    /// An approval (`/v1/approvals/{id}`): of a running execution or a live computer
    /// session.
    Approval,
    /// A benchmark environment (`/v1/envs/{id}/…`), while `live`: its browser session is
    /// in its replica's memory.
    Env,
}

/// The live owner of a thing: its replica id and address, when that replica's heartbeat
/// is not older than `$2` (Unix ms). `$1` is the thing's id. Spelled for PostgreSQL;
/// [`sqlite`] respells the placeholders. Each is a primary-key read joined to a
/// primary-key read.
pub(super) fn live_owner_sql(owned: Owned) -> &'static str {
    match owned {
        Owned::Sandbox => {
            "SELECT t.owner, r.address FROM sandboxes t JOIN replicas r ON r.id = t.owner
             WHERE t.id = $1 AND t.state = 'live' AND r.seen_at_ms >= $2"
        }
        Owned::Execution => {
            "SELECT t.owner, r.address FROM executions t JOIN replicas r ON r.id = t.owner
             WHERE t.id = $1 AND t.status = 'running' AND r.seen_at_ms >= $2"
        }
        Owned::Computer => {
            "SELECT t.owner, r.address FROM computers t JOIN replicas r ON r.id = t.owner
             WHERE t.id = $1 AND t.state = 'live' AND r.seen_at_ms >= $2"
        }
        Owned::Approval => {
            "SELECT e.owner, r.address FROM approvals a
                 JOIN executions e ON e.id = a.execution_id
                 JOIN replicas r ON r.id = e.owner
             WHERE a.id = $1 AND e.status = 'running' AND r.seen_at_ms >= $2
             UNION ALL
             SELECT c.owner, r.address FROM computer_approvals a
                 JOIN computers c ON c.id = a.computer_id
                 JOIN replicas r ON r.id = c.owner
             WHERE a.id = $1 AND c.state = 'live' AND r.seen_at_ms >= $2"
        }
        Owned::Env => {
            "SELECT t.owner, r.address FROM envs t JOIN replicas r ON r.id = t.owner
             WHERE t.id = $1 AND t.state = 'live' AND r.seen_at_ms >= $2"
        }
    }
}

/// The live owner of a thing, as [`live_owner_sql`] finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveOwner {
    /// Its replica id (`rpl_…`).
    pub replica: String,
    /// Where other replicas reach it (`--replica-address`).
    pub address: String,
}

/// Which rows a recovery ends: those whose owner has no row in `replicas` (after the
/// replicas whose heartbeat is older than `dead_before_ms` are removed) and is not `me`.
#[derive(Debug, Clone, Copy)]
pub struct Recovery<'a> {
    /// This replica: its rows are never touched.
    pub me: &'a str,
    /// A replica whose heartbeat is older than this (Unix ms) is dead.
    pub dead_before_ms: u64,
    /// End rows of owners without a heartbeat even when no replica died just now: at start
    /// (rows of a server that ran alone, or of a previous run). The periodic recovery
    /// leaves this off, so a round where nobody died is one `DELETE` that finds nothing.
    pub orphans: bool,
}

/// Predicate on a table's `owner` column (aliased `t`): the owner is dead. `$1` is `me`.
pub(super) const DEAD_OWNER: &str = "(t.owner IS NULL OR t.owner <> $1) AND NOT EXISTS (SELECT 1 FROM replicas r WHERE r.id = t.owner)";

/// Shared SQL respelled for SQLite: `$n` placeholders become `?n` (SQLite would number
/// `$n` by order of appearance, not by `n`).
pub(super) fn sqlite(sql: &str) -> String {
    sql.replace('$', "?")
}
