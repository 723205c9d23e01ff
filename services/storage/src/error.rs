//! Storage failures as the rest of the system needs to tell them apart: not found, version
//! conflict, idempotency conflict, a database that is down, and everything else.

use sea_orm::{DbErr, RuntimeErr};

#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// Nothing of this kind with this id in the scope; the kind names its problem code.
    #[error("no {0} with this id")]
    NotFound(engram_core::NotFoundKind),
    #[error("version conflict: the memory is at version {current_version}")]
    VersionConflict { current_version: i64 },
    #[error("the idempotency key was already used with a different request")]
    IdempotencyKeyReused,
    #[error("database unavailable: {0}")]
    Unavailable(String),
    /// SQLite stayed locked by another connection or process for the whole busy timeout;
    /// nothing of the failed statement's transaction was written, so it may be retried.
    #[error("the database stayed locked by another writer for the whole busy timeout: {0}")]
    Busy(String),
    #[error("storage configuration: {0}")]
    Configuration(String),
    #[error("database error: {0}")]
    Internal(String),
    /// A concurrent transaction won a unique index this one needed; retrying sees its rows.
    #[error("write conflict with a concurrent transaction: {0}")]
    WriteConflict(String),
    /// A rule of the domain forbids the change (e.g. removing an organization's last owner);
    /// the message says which.
    #[error("{0}")]
    Refused(String),
    /// A credential bound to agents asked to change a row of another agent (or of none); the
    /// message names the row.
    #[error("{0}")]
    AnotherAgents(String),
    /// The project's embedding space cannot change while memories hold vectors of it.
    #[error(
        "the project holds {memories} memories embedded in its current space: changing the embedding moves them with a re-embedding task"
    )]
    ProjectNotEmpty { memories: u64 },
    /// A write embedded in the project's old space arrived after it switched to another.
    #[error(
        "the project's embedding model changed while this was being written: nothing was stored; send it again"
    )]
    EmbeddingSpaceChanged,
    /// The project is already moving to another embedding; the message says where.
    #[error("{0}")]
    EmbeddingChangeUnderWay(String),
}

impl StorageError {
    /// The stable code of this failure, as problems carry it (`memory-not-found`, …).
    pub fn code(&self) -> &'static str {
        match self {
            StorageError::NotFound(kind) => kind.code(),
            StorageError::VersionConflict { .. } => "version-conflict",
            StorageError::IdempotencyKeyReused => "idempotency-key-reused",
            StorageError::Unavailable(_) => "database-unavailable",
            StorageError::Busy(_) => "database-busy",
            StorageError::Configuration(_) => "storage-configuration",
            StorageError::Internal(_) => "database-error",
            StorageError::WriteConflict(_) => "write-conflict",
            StorageError::Refused(_) => "refused",
            StorageError::AnotherAgents(_) => "forbidden",
            StorageError::ProjectNotEmpty { .. } => "project-not-empty",
            StorageError::EmbeddingSpaceChanged => "embedding-space-changed",
            StorageError::EmbeddingChangeUnderWay(_) => "conflict",
        }
    }

    pub(crate) fn from_db(error: DbErr) -> Self {
        match &error {
            DbErr::Query(RuntimeErr::SqlxError(sqlx_error))
            | DbErr::Exec(RuntimeErr::SqlxError(sqlx_error))
            | DbErr::Conn(RuntimeErr::SqlxError(sqlx_error))
                if is_sqlite_busy(sqlx_error) =>
            {
                StorageError::Busy(error.to_string())
            }
            DbErr::ConnectionAcquire(_) | DbErr::Conn(_) => {
                StorageError::Unavailable(error.to_string())
            }
            DbErr::Query(RuntimeErr::SqlxError(sqlx_error))
            | DbErr::Exec(RuntimeErr::SqlxError(sqlx_error))
                if is_connection_failure(sqlx_error) =>
            {
                StorageError::Unavailable(error.to_string())
            }
            _ => StorageError::Internal(error.to_string()),
        }
    }
}

/// SQLite's SQLITE_BUSY (5) or SQLITE_LOCKED (6), with any extended code (517 is a stale
/// snapshot).
pub(crate) fn is_sqlite_busy(error: &sqlx::Error) -> bool {
    let sqlx::Error::Database(database_error) = error else {
        return false;
    };
    if database_error
        .try_downcast_ref::<sqlx::sqlite::SqliteError>()
        .is_none()
    {
        return false;
    }
    database_error
        .code()
        .and_then(|code| code.parse::<i32>().ok())
        .is_some_and(|code| matches!(code & 0xff, 5 | 6))
}

fn is_connection_failure(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::Io(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed
        | sqlx::Error::Tls(_) => true,
        // The server answered, but only to say it will not serve us: class 08 (connection
        // exception), 57P01-57P03 (shut down, crashed, starting), 53300 (too many
        // connections), and a database closed to connections (55000 with that message).
        sqlx::Error::Database(database_error) => {
            let code = database_error.code().unwrap_or_default();
            code.starts_with("08")
                || matches!(code.as_ref(), "57P01" | "57P02" | "57P03" | "53300")
                || (code == "55000"
                    && database_error
                        .message()
                        .contains("not currently accepting connections"))
        }
        _ => false,
    }
}

pub(crate) fn is_unique_violation(error: &DbErr) -> bool {
    matches!(
        error.sql_err(),
        Some(sea_orm::SqlErr::UniqueConstraintViolation(_))
    )
}

/// Runs `write` (one transaction) again while SQLite answers that another process holds its
/// write lock, until `patience` has passed, backing off from 50 ms to 1 s; a refused
/// transaction wrote nothing, so running it again is safe. Gives up with the last `Busy`.
pub async fn retry_while_busy<T, Attempt>(
    what: &str,
    patience: std::time::Duration,
    mut write: impl FnMut() -> Attempt,
) -> Result<T, StorageError>
where
    Attempt: std::future::Future<Output = Result<T, StorageError>>,
{
    let deadline = tokio::time::Instant::now() + patience;
    let mut pause = std::time::Duration::from_millis(50);
    loop {
        match write().await {
            Err(StorageError::Busy(message)) if tokio::time::Instant::now() < deadline => {
                tracing::info!(%message, what, "database locked by another process; retrying");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(std::time::Duration::from_secs(1));
            }
            outcome => return outcome,
        }
    }
}
