//! A search's candidate read on the caller's own thread: a read-only rusqlite connection to
//! the same SQLite file, the same statement sea-orm would send, and rows decoded as sqlx would.
//!
//! sqlx runs each SQLite connection on a thread of its own and hands every row to the async
//! caller across a channel; for the ~70 rows a search reads that hand-off costs more than the
//! read itself (tests/BENCHMARKS.md, "Where the hydrate's time goes"). sqlx offers the handle
//! only as a raw pointer, and the workspace forbids `unsafe`, hence a connection of our own.

use crate::entities::memories;
use chrono::{DateTime, NaiveDateTime, Utc};
use rusqlite::types::{Value as SqliteValue, ValueRef};
use rusqlite::{ErrorCode, OpenFlags};
use sea_orm::{DbBackend, IdenStatic, Iterable, QueryTrait, Select, Value};
use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};

/// Most rows read on the caller's thread: the read holds an async worker while it runs (about
/// 15 µs a row from a warm page cache), so a larger one — a filtered search (up to 500
/// candidates from each half) or a `top_k` past about 13–25 (depending on how much the two
/// halves' hits overlap) — goes through the pool. A search with the default `top_k` reads
/// about 70.
pub(crate) const MAX_CALLER_THREAD_ROWS: usize = 128;

/// Connections kept open between reads, at least: one per core, since a read holds its
/// worker thread and so no more run at once than there are workers.
const MIN_IDLE_CONNECTIONS: usize = 8;

/// How long after a new connection failed (to open, or its first read) no other is opened: a
/// file this process cannot read again would otherwise cost every search a failed open
/// before it reads through the pool.
const OPEN_RETRY_AFTER: std::time::Duration = std::time::Duration::from_secs(30);

/// Prepared statements kept per connection: one per distinct candidate count and scope shape.
const STATEMENT_CACHE_CAPACITY: usize = 64;

/// Why a read on the caller's thread did not answer; the caller then reads through the pool.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CallerThreadReadError {
    /// SQLite answered busy or locked (the reader never waits: the pool's connections do).
    #[error("the database is busy")]
    Busy,
    #[error("sqlite: {0}")]
    Sqlite(rusqlite::Error),
    /// A parameter or a stored value this reader does not decode as sqlx would.
    #[error("{0}")]
    Unsupported(String),
    /// The database was closed.
    #[error("the database is closed")]
    Closed,
    /// A new connection failed less than [`OPEN_RETRY_AFTER`] ago.
    #[error("the last new connection to the database file failed; not retried yet")]
    OpenFailedRecently,
}

impl From<rusqlite::Error> for CallerThreadReadError {
    fn from(error: rusqlite::Error) -> Self {
        // A value of a type the decode did not expect is the row's, not the connection's.
        if matches!(
            error,
            rusqlite::Error::InvalidColumnType(..)
                | rusqlite::Error::FromSqlConversionFailure(..)
                | rusqlite::Error::IntegralValueOutOfRange(..)
        ) {
            return Self::Unsupported(error.to_string());
        }
        match error.sqlite_error_code() {
            Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => Self::Busy,
            _ => Self::Sqlite(error),
        }
    }
}

/// Read-only connections to one SQLite database file.
pub(crate) struct CallerThreadReader {
    path: PathBuf,
    idle: Mutex<Vec<rusqlite::Connection>>,
    max_idle: usize,
    /// Set once the database is closed: no read opens a connection after that.
    closed: std::sync::atomic::AtomicBool,
    /// When the last new connection failed (to open, or its first read), if none has read
    /// since.
    open_failed_at: Mutex<Option<std::time::Instant>>,
    /// Connections opened (or tried), for [`crate::recall::CandidateReads`].
    opens: std::sync::atomic::AtomicU64,
}

impl CallerThreadReader {
    /// A reader of the database `database_url` names, which `connection` (the pool) has
    /// opened; `None` unless it is a plain file. An in-memory database lives only in the
    /// pool's connections (another connection to its name is another database), an empty
    /// name is a private temporary one, and another VFS or `immutable` changes locking in
    /// ways a second connection must not guess at (any `immutable` option is taken as such,
    /// even `immutable=0`, which changes nothing). The URL's options are decoded as sqlx
    /// decodes them, and SQLite itself names the file (an empty name for memory or a
    /// temporary database), as an absolute path: a later change of directory changes nothing.
    pub(crate) async fn for_database(
        database_url: &str,
        connection: &sea_orm::DatabaseConnection,
    ) -> Option<Self> {
        use sea_orm::ConnectionTrait;
        let options = database_url
            .split_once('?')
            .map_or("", |(_, options)| options);
        let changes_how_it_opens =
            url::form_urlencoded::parse(options.as_bytes()).any(|(key, value)| match &*key {
                "mode" => value == "memory",
                "vfs" | "immutable" => true,
                _ => false,
            });
        if changes_how_it_opens {
            return None;
        }
        let main = connection
            .query_one(sea_orm::Statement::from_string(
                DbBackend::Sqlite,
                "SELECT file FROM pragma_database_list WHERE name = 'main'",
            ))
            .await;
        let file: String =
            match main.and_then(|row| row.map(|row| row.try_get("", "file")).transpose()) {
                Ok(Some(file)) => file,
                Ok(None) => return None,
                Err(error) => {
                    tracing::warn!(%error, "cannot ask SQLite which file it opened");
                    return None;
                }
            };
        (!file.is_empty()).then(|| Self::new(PathBuf::from(file)))
    }

    /// A reader of the database file at `path` (opened on first use, never created).
    fn new(path: PathBuf) -> Self {
        let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
        Self {
            path,
            idle: Mutex::new(Vec::new()),
            max_idle: cores.max(MIN_IDLE_CONNECTIONS),
            closed: std::sync::atomic::AtomicBool::new(false),
            open_failed_at: Mutex::new(None),
            opens: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// Close every connection and read nothing more (the database is closing: the pool's
    /// last connection checkpoints the WAL only when it is the last one open).
    pub(crate) fn close(&self) {
        self.closed.store(true, std::sync::atomic::Ordering::SeqCst);
        self.idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }

    /// The memories `select` finds, in the order SQLite returns them.
    pub(crate) fn memories(
        &self,
        select: &Select<memories::Entity>,
    ) -> Result<Vec<memories::Model>, CallerThreadReadError> {
        let statement = select.build(DbBackend::Sqlite);
        let parameters = statement
            .values
            .map(|values| values.0)
            .unwrap_or_default()
            .into_iter()
            .map(parameter)
            .collect::<Result<Vec<_>, _>>()?;
        let (connection, fresh) = self.take()?;
        let read = read_memories(&connection, &statement.sql, &parameters);
        // After busy or a row it does not decode the connection is as good as before (its
        // statement was reset); after any other SQLite error the next read opens afresh,
        // though not at once if this connection never read (the file is not readable so).
        let failed = matches!(read, Err(CallerThreadReadError::Sqlite(_)));
        if fresh {
            *self
                .open_failed_at
                .lock()
                .unwrap_or_else(PoisonError::into_inner) = failed.then(std::time::Instant::now);
        }
        if !failed {
            self.give_back(connection);
        }
        read
    }

    /// Connections this reader opened or tried to open.
    pub(crate) fn opens(&self) -> u64 {
        self.opens.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// An idle connection, or a new one (`true`).
    fn take(&self) -> Result<(rusqlite::Connection, bool), CallerThreadReadError> {
        if self.closed.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(CallerThreadReadError::Closed);
        }
        let idle = self
            .idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop();
        if let Some(connection) = idle {
            return Ok((connection, false));
        }
        let resting = self
            .open_failed_at
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some_and(|failed_at| failed_at.elapsed() < OPEN_RETRY_AFTER);
        if resting {
            return Err(CallerThreadReadError::OpenFailedRecently);
        }
        // Opened outside the lock: searches that find no idle connection open theirs at once.
        self.opens
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        match self.open() {
            Ok(connection) => Ok((connection, true)),
            Err(error) => {
                *self
                    .open_failed_at
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner) = Some(std::time::Instant::now());
                Err(error.into())
            }
        }
    }

    fn open(&self) -> Result<rusqlite::Connection, rusqlite::Error> {
        // Read-only and never created: this connection cannot change the database, and a
        // missing file is an error rather than a new empty database.
        let connection = rusqlite::Connection::open_with_flags(
            &self.path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        // Busy is answered at once; the caller then reads through the pool, whose
        // connections wait.
        connection.busy_timeout(std::time::Duration::ZERO)?;
        connection.set_prepared_statement_cache_capacity(STATEMENT_CACHE_CAPACITY);
        Ok(connection)
    }

    fn give_back(&self, connection: rusqlite::Connection) {
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        if idle.len() < self.max_idle && !self.closed.load(std::sync::atomic::Ordering::SeqCst) {
            idle.push(connection);
        }
    }
}

/// A sea-query parameter as sqlx binds it on SQLite (uuids as 16-byte blobs, booleans as
/// integers). Only the kinds the memory scope's conditions use; any other is refused, and the
/// read goes through the pool.
fn parameter(value: Value) -> Result<SqliteValue, CallerThreadReadError> {
    Ok(match value {
        Value::String(text) => text.map_or(SqliteValue::Null, |text| SqliteValue::Text(*text)),
        Value::Uuid(id) => id.map_or(SqliteValue::Null, |id| {
            SqliteValue::Blob(id.as_bytes().to_vec())
        }),
        Value::Bool(flag) => flag.map_or(SqliteValue::Null, |flag| {
            SqliteValue::Integer(i64::from(flag))
        }),
        Value::Int(number) => number.map_or(SqliteValue::Null, |number| {
            SqliteValue::Integer(i64::from(number))
        }),
        Value::BigInt(number) => number.map_or(SqliteValue::Null, SqliteValue::Integer),
        // Only the kind is named: a value may be a user's text.
        _ => {
            return Err(CallerThreadReadError::Unsupported(
                "a parameter of a kind this reader does not bind".to_string(),
            ));
        }
    })
}

fn read_memories(
    connection: &rusqlite::Connection,
    sql: &str,
    parameters: &[SqliteValue],
) -> Result<Vec<memories::Model>, CallerThreadReadError> {
    let mut statement = connection.prepare_cached(sql)?;
    // The decode below reads columns by the entity's field order; a select that differs from
    // it is refused rather than misread.
    let names = statement.column_names();
    let in_entity_order = names.len() == memories::Column::iter().count()
        && memories::Column::iter()
            .zip(&names)
            .all(|(column, name)| column.as_str() == *name);
    if !in_entity_order {
        return Err(CallerThreadReadError::Unsupported(format!(
            "columns {names:?} are not the memory entity's"
        )));
    }
    let mut rows = statement.query(rusqlite::params_from_iter(parameters))?;
    let mut models = Vec::new();
    while let Some(row) = rows.next()? {
        models.push(memory_model(row)?);
    }
    Ok(models)
}

/// One row of `memories`, decoded as sea-orm's sqlx decoding would.
fn memory_model(row: &rusqlite::Row<'_>) -> Result<memories::Model, CallerThreadReadError> {
    use memories::Column;
    Ok(memories::Model {
        id: uuid_at(row, Column::Id)?,
        organization_id: uuid_at(row, Column::OrganizationId)?,
        project_id: uuid_at(row, Column::ProjectId)?,
        user_id: row.get(at(Column::UserId))?,
        agent_id: row.get(at(Column::AgentId))?,
        session_id: row.get(at(Column::SessionId))?,
        kind: row.get(at(Column::Kind))?,
        key: row.get(at(Column::Key))?,
        content: row.get(at(Column::Content))?,
        metadata: json_at(row, Column::Metadata)?,
        categories: json_at(row, Column::Categories)?,
        source: row.get(at(Column::Source))?,
        confidence: row.get(at(Column::Confidence))?,
        state: row.get(at(Column::State))?,
        version: row.get(at(Column::Version))?,
        created_at: time_at(row, Column::CreatedAt)?,
        updated_at: time_at(row, Column::UpdatedAt)?,
        occurred_at: time_at(row, Column::OccurredAt)?,
        valid_from: time_at(row, Column::ValidFrom)?,
        valid_to: optional_time_at(row, Column::ValidTo)?,
        expires_at: optional_time_at(row, Column::ExpiresAt)?,
        embedding_model: row.get(at(Column::EmbeddingModel))?,
        embedding: row.get(at(Column::Embedding))?,
        content_hash: row.get(at(Column::ContentHash))?,
        immutable: row.get(at(Column::Immutable))?,
        legal_hold: row.get(at(Column::LegalHold))?,
        visibility: row.get(at(Column::Visibility))?,
        shared_with: row.get(at(Column::SharedWith))?,
        verified_at: optional_time_at(row, Column::VerifiedAt)?,
        verified_by: row.get(at(Column::VerifiedBy))?,
    })
}

/// Where `column` is in the row: the select lists the entity's columns in their order
/// (checked by [`read_memories`]).
fn at(column: memories::Column) -> usize {
    column as usize
}

fn unsupported(column: memories::Column, what: &str) -> CallerThreadReadError {
    CallerThreadReadError::Unsupported(format!("memories.{}: {what}", column.as_str()))
}

fn uuid_at(
    row: &rusqlite::Row<'_>,
    column: memories::Column,
) -> Result<uuid::Uuid, CallerThreadReadError> {
    match row.get_ref(at(column))? {
        ValueRef::Blob(bytes) => uuid::Uuid::from_slice(bytes)
            .map_err(|error| unsupported(column, &format!("not a uuid: {error}"))),
        _ => Err(unsupported(column, "not a 16-byte blob")),
    }
}

fn json_at(
    row: &rusqlite::Row<'_>,
    column: memories::Column,
) -> Result<serde_json::Value, CallerThreadReadError> {
    match row.get_ref(at(column))? {
        ValueRef::Text(text) => serde_json::from_slice(text)
            .map_err(|error| unsupported(column, &format!("not JSON: {error}"))),
        _ => Err(unsupported(column, "not JSON text")),
    }
}

fn time_at(
    row: &rusqlite::Row<'_>,
    column: memories::Column,
) -> Result<DateTime<Utc>, CallerThreadReadError> {
    optional_time_at(row, column)?.ok_or_else(|| unsupported(column, "null"))
}

/// A time as sqlx writes it (RFC 3339) or as SQLite's own functions do (`YYYY-MM-DD
/// HH:MM:SS`, UTC). sqlx reads a few more forms; a row in one of them is refused here and
/// read through the pool.
fn optional_time_at(
    row: &rusqlite::Row<'_>,
    column: memories::Column,
) -> Result<Option<DateTime<Utc>>, CallerThreadReadError> {
    let text = match row.get_ref(at(column))? {
        ValueRef::Null => return Ok(None),
        ValueRef::Text(text) => std::str::from_utf8(text)
            .map_err(|error| unsupported(column, &format!("not UTF-8: {error}")))?,
        _ => return Err(unsupported(column, "a time not stored as text")),
    };
    if let Ok(time) = DateTime::parse_from_rfc3339(text) {
        return Ok(Some(time.with_timezone(&Utc)));
    }
    NaiveDateTime::parse_from_str(text, "%F %T%.f")
        .map(|time| Some(time.and_utc()))
        .map_err(|_| unsupported(column, &format!("a time in an unexpected form: {text:?}")))
}
