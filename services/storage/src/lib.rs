//! The metadata store, source of truth for memories: connection setup for SQLite and
//! PostgreSQL, migrations, and repositories whose every memory query is project-scoped.

mod entities;
mod error;
pub mod memories;
pub mod outbox;
pub mod tenants;

pub use error::StorageError;
pub use memories::{
    HistoryEntry, IdempotencyClaim, InsertOutcome, MemoryDraft, MemoryListFilter, MemoryPage,
    MemoryPatch,
};
pub use outbox::{IndexingRow, OutboxEntry};
pub use tenants::{ApiKeyPepper, BootstrapRecord, ConsoleAccountRecord, ProjectRecord};

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
}

impl Storage {
    /// Connect to `database_url` (`sqlite://path?mode=rwc` or `postgres://…`) and apply
    /// pending migrations.
    pub async fn connect(database_url: &str) -> Result<Self, StorageError> {
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
                .busy_timeout(Duration::from_secs(10));
            let pool = SqlitePoolOptions::new()
                .max_connections(8)
                .connect_with(options)
                .await
                .map_err(|error| {
                    StorageError::Unavailable(format!("cannot open SQLite database: {error}"))
                })?;
            Self {
                connection: SqlxSqliteConnector::from_sqlx_sqlite_pool(pool),
                write_gate: Some(Arc::new(tokio::sync::Mutex::new(()))),
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
            }
        } else {
            return Err(StorageError::Configuration(format!(
                "unsupported database URL {database_url:?}: use sqlite://… or postgres://…"
            )));
        };
        Migrator::up(&storage.connection, None)
            .await
            .map_err(StorageError::from_db)?;
        Ok(storage)
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
        self.connection.close().await.map_err(StorageError::from_db)
    }

    async fn write_permit(&self) -> Option<tokio::sync::MutexGuard<'_, ()>> {
        match &self.write_gate {
            Some(gate) => Some(gate.lock().await),
            None => None,
        }
    }
}
