//! The metadata store, source of truth for memories: connection setup for SQLite and
//! PostgreSQL, migrations, and repositories whose every memory query is project-scoped.

pub mod api_keys;
pub mod audit;
pub mod audit_seal;
mod caller_thread_read;
pub mod console_sessions;
pub mod conversations;
mod entities;
mod error;
pub mod feedback;
pub mod files;
pub mod governance;
mod idempotency;
pub mod members;
pub mod memories;
pub mod memory_entities;
mod memory_filter_sql;
pub mod memory_limits;
pub mod outbox;
pub mod recall;
pub mod recall_quality;
pub mod reembedding;
pub mod runs;
pub mod session_state;
pub mod statements;
pub mod subject_data;
pub mod tasks;
mod tenancy;
pub mod tenants;
pub mod usage;

pub use api_keys::{ApiKeyPepper, ApiKeyRecord, NewApiKey, VerifiedApiKey};
pub use audit::{AuditEventRecord, AuditFilter, AuditVerification, BrokenLink, VerificationStart};
pub use audit_seal::{AnchoredHead, AuditSeal};
pub use console_sessions::RefreshOutcome;
pub use error::{StorageError, retry_while_busy};
pub use members::{ConsoleInvitationRecord, ConsoleMemberRecord};
pub use memories::{
    HistoryEntry, IdempotencyClaim, InsertOutcome, MemoryDraft, MemoryListFilter, MemoryPage,
    MemoryPatch,
};
pub use outbox::{ChangedMemoryVersion, IndexingRow, OutboxEntry};
pub use tenants::{BootstrapRecord, ConsoleAccountRecord, ProjectRecord};

use engram_core::ProjectScope;
use engram_migrations::{Migrator, MigratorTrait};
use sea_orm::{
    ConnectionTrait, DatabaseConnection, DbBackend, SqlxPostgresConnector, SqlxSqliteConnector,
};
use sqlx::postgres::PgPoolOptions;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

/// Handle to the metadata database. Cheap to clone.
#[derive(Clone)]
pub struct Storage {
    connection: DatabaseConnection,
    /// SQLite has one writer at a time and upgrades a read transaction to a write one only if
    /// nothing committed in between; funnelling write transactions through one gate turns
    /// those would-be `SQLITE_BUSY` failures into a short wait. PostgreSQL needs no gate.
    write_gate: Option<Arc<tokio::sync::Mutex<()>>>,
    /// The key and anchor of the audit chain (see [`audit_seal`]); `None` writes and
    /// verifies plain hashes with no anchor (component tests that need neither).
    audit_seal: Option<Arc<AuditSeal>>,
    /// Reads a search's candidates on the caller's thread (SQLite files only; `None` for
    /// PostgreSQL and in-memory SQLite, where the pool reads them).
    caller_thread_reader: Option<Arc<caller_thread_read::CallerThreadReader>>,
    candidate_reads: Arc<recall::CandidateReadCounters>,
}

/// The tenant store's other face: work that spans every project — the outbox the indexer
/// drains, the tasks runners claim, the tombstone purge, every project's scope for sweeps
/// and schedules. Only the index applier, data governance, the workers and the start-up
/// steps hold one; the front doors (the gateway and the console) cannot name this crate, so
/// they can neither receive nor build one. It reads and writes what a [`Storage`] does.
#[derive(Clone)]
pub struct MaintenanceStore {
    storage: Storage,
}

impl MaintenanceStore {
    pub fn new(storage: Storage) -> Self {
        Self { storage }
    }

    // What the periodic jobs (schedulers, the usage sampler) need of one project's rows,
    // each under the scope `all_project_scopes` handed them; nothing else of `Storage`.

    pub async fn open_task_exists(
        &self,
        scope: &ProjectScope,
        kind: engram_core::TaskKind,
    ) -> Result<bool, StorageError> {
        self.storage.open_task_exists(scope, kind).await
    }

    pub async fn create_task(
        &self,
        scope: &ProjectScope,
        kind: engram_core::TaskKind,
        subject: Option<&str>,
        request_id: Option<&str>,
    ) -> Result<tasks::TaskRecord, StorageError> {
        self.storage
            .create_task(scope, kind, subject, request_id)
            .await
    }

    pub async fn eval_sets_due(
        &self,
        scope: &ProjectScope,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<Vec<recall_quality::EvalSetRecord>, StorageError> {
        self.storage.eval_sets_due(scope, now).await
    }

    #[allow(clippy::too_many_arguments)]
    pub async fn queue_eval_run(
        &self,
        scope: &ProjectScope,
        set_id: uuid::Uuid,
        profile: &str,
        compare_profile: Option<&str>,
        trigger: engram_core::recall::EvalTrigger,
        task_kind: engram_core::TaskKind,
        request_id: Option<&str>,
    ) -> Result<recall_quality::EvalRunRecord, StorageError> {
        self.storage
            .queue_eval_run(
                scope,
                set_id,
                profile,
                compare_profile,
                trigger,
                task_kind,
                request_id,
            )
            .await
    }

    pub async fn count_active_memories(&self, scope: &ProjectScope) -> Result<u64, StorageError> {
        self.storage.count_active_memories(scope).await
    }

    pub async fn set_daily_sample(
        &self,
        scope: &ProjectScope,
        unit: engram_core::usage::UsageUnit,
        day: chrono::DateTime<chrono::Utc>,
        quantity: i64,
    ) -> Result<(), StorageError> {
        self.storage
            .set_daily_sample(scope, unit, day, quantity)
            .await
    }
}

/// How strictly the database must promise durability before Engram uses it.
#[derive(Clone, Copy, Debug, Default)]
pub struct StorageOptions {
    /// Start even when the database may lose acknowledged commits (PostgreSQL `fsync=off`
    /// or `synchronous_commit=off`); a loud warning is logged instead of refusing.
    pub allow_unsafe_durability: bool,
    /// Leave the schema as it is and refuse to start when migrations are pending (cluster
    /// gateways and workers: only `engram migrate` changes a shared schema, so two new
    /// pods never race to migrate it).
    pub require_migrated_schema: bool,
    /// How long a statement waits for another connection's (or process's) write lock on
    /// SQLite before it fails with [`StorageError::Busy`]; `None` is the server's 10 s.
    pub sqlite_busy_timeout: Option<Duration>,
}

/// A server's wait for SQLite's write lock: long enough for any of its own transactions.
const DEFAULT_SQLITE_BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// The first statement of a write transaction on SQLite: it writes nothing, but takes the
/// database's write lock (waiting up to the busy timeout) before anything is read.
const SQLITE_TAKE_WRITE_LOCK: &str = "UPDATE seaql_migrations SET version = version WHERE 0";

impl Storage {
    /// Connect to `database_url` (`sqlite://path?mode=rwc` or `postgres://…`), refuse a
    /// database that could lose acknowledged commits, and apply pending migrations.
    pub async fn connect(database_url: &str) -> Result<Self, StorageError> {
        Self::connect_with_options(database_url, StorageOptions::default()).await
    }

    pub async fn connect_with_options(
        database_url: &str,
        options: StorageOptions,
    ) -> Result<Self, StorageError> {
        let sqlite_busy_timeout = options
            .sqlite_busy_timeout
            .unwrap_or(DEFAULT_SQLITE_BUSY_TIMEOUT);
        let storage = if database_url.starts_with("sqlite:") {
            // WAL lets readers run beside the writer; synchronous=FULL makes every commit
            // durable before it is acknowledged (a kill -9 or power loss loses nothing).
            let options = SqliteConnectOptions::from_str(database_url)
                .map_err(|error| {
                    StorageError::Configuration(format!("invalid SQLite URL: {error}"))
                })?
                .create_if_missing(true)
                .journal_mode(SqliteJournalMode::Wal)
                .synchronous(SqliteSynchronous::Full)
                .foreign_keys(true)
                .busy_timeout(sqlite_busy_timeout);
            // No ping before each use: it is a round trip to the connection's thread on the
            // request's path, and sqlx pings every connection again when it goes back to the
            // pool (dropping a dead one there), so the ping before use only repeated that
            // (tests/BENCHMARKS.md, "Where the hydrate's time goes").
            let pool = SqlitePoolOptions::new()
                .test_before_acquire(false)
                .max_connections(8)
                .connect_with(options)
                .await
                .map_err(|error| {
                    StorageError::Unavailable(format!("cannot open SQLite database: {error}"))
                })?;
            let connection = SqlxSqliteConnector::from_sqlx_sqlite_pool(pool);
            let caller_thread_reader =
                caller_thread_read::CallerThreadReader::for_database(database_url, &connection)
                    .await
                    .map(Arc::new);
            if caller_thread_reader.is_none() {
                tracing::info!(
                    "searches read their candidates through the pool: the SQLite database is \
                     not a plain file this process can open again"
                );
            }
            Self {
                connection,
                write_gate: Some(Arc::new(tokio::sync::Mutex::new(()))),
                audit_seal: None,
                caller_thread_reader,
                candidate_reads: Default::default(),
            }
        } else if database_url.starts_with("postgres:") || database_url.starts_with("postgresql:") {
            let pool = PgPoolOptions::new()
                .max_connections(16)
                .acquire_timeout(Duration::from_secs(5))
                .connect(database_url)
                .await
                .map_err(|error| {
                    StorageError::Unavailable(format!("cannot connect to PostgreSQL: {error}"))
                })?;
            Self {
                connection: SqlxPostgresConnector::from_sqlx_postgres_pool(pool),
                write_gate: None,
                audit_seal: None,
                caller_thread_reader: None,
                candidate_reads: Default::default(),
            }
        } else {
            // Only the scheme: the rest of a URL may hold a password.
            let scheme = database_url
                .split_once("://")
                .map_or("", |(scheme, _)| scheme);
            return Err(StorageError::Configuration(format!(
                "unsupported database URL scheme {scheme:?}: use sqlite://… or postgres://…"
            )));
        };
        let unsafe_settings = storage.durability_violations().await?;
        if !unsafe_settings.is_empty() {
            let summary = unsafe_settings.join(", ");
            if !options.allow_unsafe_durability {
                return Err(StorageError::Configuration(format!(
                    "the database may lose acknowledged writes ({summary}); fix its configuration, \
                     or set ENGRAM_ALLOW_UNSAFE_DURABILITY=true to start anyway"
                )));
            }
            tracing::warn!(
                settings = %summary,
                "UNSAFE: the database may lose acknowledged writes; starting only because \
                 ENGRAM_ALLOW_UNSAFE_DURABILITY is set"
            );
        }
        if options.require_migrated_schema {
            let pending = Migrator::get_pending_migrations(&storage.connection)
                .await
                .map_err(StorageError::from_db)?;
            if !pending.is_empty() {
                return Err(StorageError::Configuration(format!(
                    "the database schema has {} pending migration(s); run `engram migrate` first",
                    pending.len()
                )));
            }
            return Ok(storage);
        }
        Migrator::up(&storage.connection, None)
            .await
            .map_err(StorageError::from_db)?;
        // Answers stored before they were indexed at write time are indexed once, here.
        let listed = storage.index_idempotency_answers().await?;
        if listed > 0 {
            tracing::info!(
                listed,
                "indexed stored idempotency answers by memory and end-user"
            );
        }
        Ok(storage)
    }

    /// Settings under which a commit the database acknowledged could still be lost, as
    /// `name=value` (empty when the database is safe): SQLite's `synchronous` below FULL,
    /// PostgreSQL's `fsync` or `synchronous_commit` off.
    pub async fn durability_violations(&self) -> Result<Vec<String>, StorageError> {
        let backend = self.connection.get_database_backend();
        let mut violations = Vec::new();
        match backend {
            DbBackend::Sqlite => {
                // 0 OFF, 1 NORMAL, 2 FULL, 3 EXTRA.
                let level = self.single_setting("PRAGMA synchronous").await?;
                if !matches!(level.as_str(), "2" | "3") {
                    violations.push(format!("synchronous={level}"));
                }
            }
            DbBackend::Postgres => {
                let fsync = self.single_setting("SHOW fsync").await?;
                if fsync != "on" {
                    violations.push(format!("fsync={fsync}"));
                }
                // `local`, `remote_write`, `on` and `remote_apply` all flush the local WAL.
                let synchronous_commit = self.single_setting("SHOW synchronous_commit").await?;
                if synchronous_commit == "off" {
                    violations.push(format!("synchronous_commit={synchronous_commit}"));
                }
            }
            DbBackend::MySql => {}
        }
        Ok(violations)
    }

    /// The first column of the first row of `sql`, as text.
    async fn single_setting(&self, sql: &str) -> Result<String, StorageError> {
        let backend = self.connection.get_database_backend();
        let row = self
            .connection
            .query_one(sea_orm::Statement::from_string(backend, sql.to_string()))
            .await
            .map_err(StorageError::from_db)?
            .ok_or_else(|| StorageError::Internal(format!("{sql} returned no row")))?;
        if let Ok(text) = row.try_get_by_index::<String>(0) {
            return Ok(text);
        }
        row.try_get_by_index::<i64>(0)
            .map(|number| number.to_string())
            .map_err(StorageError::from_db)
    }

    /// How many schema migrations this database has applied.
    pub async fn applied_migration_count(&self) -> Result<usize, StorageError> {
        Migrator::get_applied_migrations(&self.connection)
            .await
            .map(|applied| applied.len())
            .map_err(StorageError::from_db)
    }

    pub fn backend_name(&self) -> &'static str {
        match self.connection.get_database_backend() {
            DbBackend::Sqlite => "sqlite",
            DbBackend::Postgres => "postgres",
            DbBackend::MySql => "mysql",
        }
    }

    /// Cheap round trip for `/readyz`.
    pub async fn check_ready(&self) -> Result<(), StorageError> {
        self.connection.ping().await.map_err(StorageError::from_db)
    }

    pub async fn close(self) -> Result<(), StorageError> {
        if let Some(reader) = &self.caller_thread_reader {
            reader.close();
        }
        self.connection.close().await.map_err(StorageError::from_db)
    }

    /// Starts a transaction that will write. On SQLite its first statement takes the write
    /// lock, so the transaction never reads a snapshot that another connection's commit then
    /// makes stale: SQLite refuses that upgrade at once ("database is locked"), whatever the
    /// busy timeout, which is how a CLI command beside a running server used to fail.
    async fn begin_write(&self) -> Result<WriteTransaction, StorageError> {
        use sea_orm::TransactionTrait;
        let transaction = self
            .connection
            .begin()
            .await
            .map_err(StorageError::from_db)?;
        if self.connection.get_database_backend() == DbBackend::Sqlite {
            transaction
                .execute_unprepared(SQLITE_TAKE_WRITE_LOCK)
                .await
                .map_err(StorageError::from_db)?;
        }
        Ok(WriteTransaction {
            inner: transaction,
            audit_seal: self.audit_seal.clone(),
            appended_audit_events: std::sync::Mutex::new(Vec::new()),
        })
    }

    async fn write_permit(&self) -> Option<tokio::sync::MutexGuard<'_, ()>> {
        match &self.write_gate {
            Some(gate) => Some(gate.lock().await),
            None => None,
        }
    }
}

/// A write transaction that knows the audit events it appended: committing it commits the
/// database transaction, then records those events as committed in the audit anchor, so the
/// anchor can tell a rolled-back append from a deleted event.
pub(crate) struct WriteTransaction {
    inner: sea_orm::DatabaseTransaction,
    audit_seal: Option<Arc<AuditSeal>>,
    appended_audit_events: std::sync::Mutex<Vec<audit_seal::AnchorLine>>,
}

impl WriteTransaction {
    pub(crate) fn audit_seal(&self) -> Option<&Arc<AuditSeal>> {
        self.audit_seal.as_ref()
    }

    pub(crate) fn appended(&self, line: audit_seal::AnchorLine) {
        if let Ok(mut appended) = self.appended_audit_events.lock() {
            appended.push(line);
        }
    }

    pub(crate) async fn commit(self) -> Result<(), sea_orm::DbErr> {
        self.inner.commit().await?;
        let Some(seal) = self.audit_seal else {
            return Ok(());
        };
        let appended = self.appended_audit_events.into_inner().unwrap_or_default();
        // The newest event of each organization stands for the ones before it.
        let mut newest: std::collections::BTreeMap<uuid::Uuid, audit_seal::AnchorLine> =
            std::collections::BTreeMap::new();
        for line in appended {
            match newest.get(&line.organization_id) {
                Some(kept) if kept.sequence >= line.sequence => {}
                _ => {
                    newest.insert(line.organization_id, line);
                }
            }
        }
        let committed = newest
            .into_values()
            .map(|line| audit_seal::AnchorLine {
                state: audit_seal::AnchorState::Committed,
                ..line
            })
            .collect();
        if let Err(error) = seal.anchor(committed, false).await {
            // The change is committed and its event anchored as pending, which verification
            // accepts; failing the request now would invite a retry of a done change.
            tracing::error!(%error, "audit event committed but its committed mark was not anchored");
        }
        Ok(())
    }
}

#[async_trait::async_trait]
impl ConnectionTrait for WriteTransaction {
    fn get_database_backend(&self) -> DbBackend {
        self.inner.get_database_backend()
    }

    async fn execute(
        &self,
        statement: sea_orm::Statement,
    ) -> Result<sea_orm::ExecResult, sea_orm::DbErr> {
        self.inner.execute(statement).await
    }

    async fn execute_unprepared(&self, sql: &str) -> Result<sea_orm::ExecResult, sea_orm::DbErr> {
        self.inner.execute_unprepared(sql).await
    }

    async fn query_one(
        &self,
        statement: sea_orm::Statement,
    ) -> Result<Option<sea_orm::QueryResult>, sea_orm::DbErr> {
        self.inner.query_one(statement).await
    }

    async fn query_all(
        &self,
        statement: sea_orm::Statement,
    ) -> Result<Vec<sea_orm::QueryResult>, sea_orm::DbErr> {
        self.inner.query_all(statement).await
    }

    fn support_returning(&self) -> bool {
        self.inner.support_returning()
    }

    fn is_mock_connection(&self) -> bool {
        self.inner.is_mock_connection()
    }
}
