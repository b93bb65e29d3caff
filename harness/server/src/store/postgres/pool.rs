//! The PostgreSQL connections: a few clients kept for reuse, whose connections run on a
//! runtime of the store's own (one thread). A client hands its queries to its connection
//! over a channel, so any caller can use it: a task on any runtime, or a thread that
//! blocks on it (the gateway's recorder is synchronous), without the two ever waiting on
//! one another's scheduler.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::{Semaphore, SemaphorePermit};
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Config, Error, NoTls, Row, Statement, Transaction};

use crate::store::error::{Result, StoreError};

/// How many connections one server opens at most.
const MAX_CONNECTIONS: usize = 8;

/// Up to [`MAX_CONNECTIONS`] clients, opened when first needed.
pub(super) struct Pool {
    config: Config,
    runtime: OwnRuntime,
    idle: Mutex<Vec<Conn>>,
    permits: Semaphore,
}

impl fmt::Debug for Pool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pool")
            .field("hosts", &self.config.get_hosts())
            .field("dbname", &self.config.get_dbname())
            .field("available", &self.permits.available_permits())
            .finish_non_exhaustive()
    }
}

impl Pool {
    pub(super) fn new(mut config: Config) -> Result<Pool> {
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(Duration::from_secs(10));
        }
        config.application_name("cordon");
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("cordon-postgres")
            .enable_all()
            .build()
            .map_err(|source| StoreError::Io {
                path: "the PostgreSQL connection thread".to_owned(),
                source,
            })?;
        Ok(Pool {
            config,
            runtime: OwnRuntime(Some(runtime)),
            idle: Mutex::new(Vec::new()),
            permits: Semaphore::new(MAX_CONNECTIONS),
        })
    }

    /// A client for this caller alone until the returned guard drops; waits while all are
    /// in use.
    pub(super) async fn get(&self) -> Result<Pooled<'_>> {
        let permit = self
            .permits
            .acquire()
            .await
            .map_err(|_| StoreError::ShuttingDown)?;
        let reused = {
            let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
            // A client whose connection ended (the server restarted, a timeout) is dropped.
            idle.retain(|conn| !conn.client.is_closed());
            idle.pop()
        };
        let conn = match reused {
            Some(conn) => conn,
            None => Conn {
                client: self.connect().await?,
                statements: HashMap::new(),
            },
        };
        Ok(Pooled {
            conn: Some(conn),
            pool: self,
            _permit: permit,
        })
    }

    /// Runs `task` on the connections' runtime (it ends when the store is dropped).
    pub(super) fn spawn<F>(&self, task: F)
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        if let Some(runtime) = &self.runtime.0 {
            runtime.spawn(task);
        }
    }

    async fn connect(&self) -> Result<Client> {
        let config = self.config.clone();
        let runtime = self.runtime.0.as_ref().ok_or(StoreError::ShuttingDown)?;
        runtime
            .spawn(async move {
                let (client, connection) = config.connect(NoTls).await?;
                // Its errors reach the client: its next call fails and it is not reused.
                tokio::spawn(async move {
                    let _ = connection.await;
                });
                Ok(client)
            })
            .await
            .map_err(|_| StoreError::ShuttingDown)?
    }
}

/// A client taken from the pool; it goes back when this drops (unless its connection
/// ended). A transaction left open (its future was dropped) is rolled back first:
/// `tokio-postgres` queues the `ROLLBACK` ahead of the next caller's statements.
///
/// Its `execute`/`query…`/`transaction` prepare each statement once per connection and
/// keep it: a statement is then one round trip instead of two (parse, then run).
pub(super) struct Pooled<'a> {
    conn: Option<Conn>,
    pool: &'a Pool,
    _permit: SemaphorePermit<'a>,
}

/// A client with the statements prepared on its connection.
struct Conn {
    client: Client,
    statements: HashMap<String, Statement>,
}

type Params<'p> = &'p [&'p (dyn ToSql + Sync)];

impl Pooled<'_> {
    #[expect(clippy::expect_used, reason = "the client is only taken in drop")]
    fn conn(&mut self) -> &mut Conn {
        self.conn.as_mut().expect("a pooled client until dropped")
    }

    /// The client itself (statements it runs are not kept).
    pub(super) fn client(&mut self) -> &mut Client {
        &mut self.conn().client
    }

    async fn statement(&mut self, sql: &str) -> Result<Statement, Error> {
        let conn = self.conn();
        if let Some(statement) = conn.statements.get(sql) {
            return Ok(statement.clone());
        }
        let statement = conn.client.prepare(sql).await?;
        conn.statements.insert(sql.to_owned(), statement.clone());
        Ok(statement)
    }

    pub(super) async fn execute(&mut self, sql: &str, params: Params<'_>) -> Result<u64, Error> {
        let statement = self.statement(sql).await?;
        self.conn().client.execute(&statement, params).await
    }

    pub(super) async fn query(&mut self, sql: &str, params: Params<'_>) -> Result<Vec<Row>, Error> {
        let statement = self.statement(sql).await?;
        self.conn().client.query(&statement, params).await
    }

    pub(super) async fn query_opt(
        &mut self,
        sql: &str,
        params: Params<'_>,
    ) -> Result<Option<Row>, Error> {
        let statement = self.statement(sql).await?;
        self.conn().client.query_opt(&statement, params).await
    }

    /// A transaction whose statements are kept like the pooled client's.
    pub(super) async fn transaction(&mut self) -> Result<CachedTransaction<'_>, Error> {
        let conn = self.conn();
        Ok(CachedTransaction {
            tx: conn.client.transaction().await?,
            statements: &mut conn.statements,
        })
    }
}

impl Drop for Pooled<'_> {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take().filter(|conn| !conn.client.is_closed()) {
            self.pool
                .idle
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(conn);
        }
    }
}

/// A transaction on a pooled client, preparing its statements once per connection.
pub(super) struct CachedTransaction<'a> {
    tx: Transaction<'a>,
    statements: &'a mut HashMap<String, Statement>,
}

impl CachedTransaction<'_> {
    async fn statement(&mut self, sql: &str) -> Result<Statement, Error> {
        if let Some(statement) = self.statements.get(sql) {
            return Ok(statement.clone());
        }
        let statement = self.tx.prepare(sql).await?;
        self.statements.insert(sql.to_owned(), statement.clone());
        Ok(statement)
    }

    pub(super) async fn execute(&mut self, sql: &str, params: Params<'_>) -> Result<u64, Error> {
        let statement = self.statement(sql).await?;
        self.tx.execute(&statement, params).await
    }

    pub(super) async fn query(&mut self, sql: &str, params: Params<'_>) -> Result<Vec<Row>, Error> {
        let statement = self.statement(sql).await?;
        self.tx.query(&statement, params).await
    }

    pub(super) async fn query_opt(
        &mut self,
        sql: &str,
        params: Params<'_>,
    ) -> Result<Option<Row>, Error> {
        let statement = self.statement(sql).await?;
        self.tx.query_opt(&statement, params).await
    }

    pub(super) async fn query_one(&mut self, sql: &str, params: Params<'_>) -> Result<Row, Error> {
        let statement = self.statement(sql).await?;
        self.tx.query_one(&statement, params).await
    }

    /// Runs statements as they are (migrations), without keeping them.
    pub(super) async fn batch_execute(&mut self, sql: &str) -> Result<(), Error> {
        self.tx.batch_execute(sql).await
    }

    pub(super) async fn commit(self) -> Result<(), Error> {
        self.tx.commit().await
    }
}

/// The connections' runtime. Dropped without waiting (the store may be dropped on an
/// async task, where a blocking shutdown would panic): its connections close with it.
struct OwnRuntime(Option<tokio::runtime::Runtime>);

impl Drop for OwnRuntime {
    fn drop(&mut self) {
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_background();
        }
    }
}
