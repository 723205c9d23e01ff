//! The index outbox: entries written in the same transaction as a memory change, read by
//! the indexer, which re-reads the memory row and makes the vector index match it.

use crate::MaintenanceStore;
use crate::entities::{index_outbox, memories, memory_tombstones};
use crate::memories::decode_embedding;
use crate::{Storage, StorageError};
use chrono::{DateTime, Utc};
use engram_core::{MemoryId, MemoryKind, MemoryState, OrganizationId, ProjectId, ProjectScope};
use sea_orm::sea_query::Expr;
use sea_orm::{
    ColumnTrait, Condition, ConnectionTrait, DbBackend, EntityTrait, PaginatorTrait, QueryFilter,
    QueryOrder, QuerySelect, Statement, UpdateMany,
};
use std::collections::HashMap;
use std::time::Duration;

/// "Bring the index entry of this memory in line with the database."
#[derive(Clone, Debug, PartialEq)]
pub struct OutboxEntry {
    pub id: i64,
    pub scope: ProjectScope,
    pub memory_id: MemoryId,
    pub attempts: i32,
}

/// What the index needs of an active memory.
#[derive(Clone, Debug, PartialEq)]
pub struct IndexingRow {
    pub memory_id: MemoryId,
    pub version: i64,
    pub vector: Vec<f32>,
    pub user_id: Option<String>,
    pub agent_id: Option<String>,
    pub session_id: Option<String>,
    pub kind: MemoryKind,
    pub created_at: DateTime<Utc>,
    /// The stored (PII-masked) content, for keyword search.
    pub content: String,
    /// What filters read beyond the subject and kind.
    pub source: engram_core::MemorySource,
    pub categories: Vec<String>,
    pub confidence: f64,
    pub updated_at: DateTime<Utc>,
    pub occurred_at: DateTime<Utc>,
    pub metadata: serde_json::Map<String, serde_json::Value>,
    /// Who among the project's agents reads it.
    pub visibility: engram_core::Visibility,
    /// The team a shared memory is shared with; `None`: every agent.
    pub shared_with: Option<String>,
    /// Whether a reviewer or a supervisor verified it.
    pub verified: bool,
}

fn entry_from_model(model: index_outbox::Model) -> OutboxEntry {
    OutboxEntry {
        id: model.id,
        // The entry was written under this scope by a request that held it.
        scope: ProjectScope::from_verified_credential(
            OrganizationId::from_uuid(model.organization_id),
            ProjectId::from_uuid(model.project_id),
        ),
        memory_id: MemoryId::from_uuid(model.memory_id),
        attempts: model.attempts,
    }
}

/// Leases the oldest unleased entries (or entries whose lease ran out) to one worker.
/// PostgreSQL: rows another worker is claiming right now are skipped, not waited for.
const CLAIM_POSTGRES: &str = "UPDATE index_outbox SET claimed_by = $1, claimed_until = $2 \
     WHERE id IN (SELECT id FROM index_outbox \
                  WHERE claimed_until IS NULL OR claimed_until < $3 \
                  ORDER BY id LIMIT $4 FOR UPDATE SKIP LOCKED) \
     RETURNING *";
/// SQLite has one writer at a time, so the statement alone is atomic.
const CLAIM_SQLITE: &str = "UPDATE index_outbox SET claimed_by = ?, claimed_until = ? \
     WHERE id IN (SELECT id FROM index_outbox \
                  WHERE claimed_until IS NULL OR claimed_until < ? \
                  ORDER BY id LIMIT ?) \
     RETURNING *";

/// An outbox update that also clears the lease of the rows it touches.
fn without_lease(update: UpdateMany<index_outbox::Entity>) -> UpdateMany<index_outbox::Entity> {
    update
        .col_expr(
            index_outbox::Column::ClaimedBy,
            Expr::value(Option::<String>::None),
        )
        .col_expr(
            index_outbox::Column::ClaimedUntil,
            Expr::value(Option::<DateTime<Utc>>::None),
        )
}

impl Storage {
    /// Pending entries for particular memories of one project (read-your-writes path).
    pub async fn pending_index_changes_for(
        &self,
        scope: &ProjectScope,
        memory_ids: &[MemoryId],
    ) -> Result<Vec<OutboxEntry>, StorageError> {
        if memory_ids.is_empty() {
            return Ok(Vec::new());
        }
        let models = index_outbox::Entity::find()
            .filter(crate::tenancy::in_project::<index_outbox::Entity>(scope))
            .filter(index_outbox::Column::MemoryId.is_in(memory_ids.iter().map(|id| id.as_uuid())))
            .order_by_asc(index_outbox::Column::Id)
            .all(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        Ok(models.into_iter().map(entry_from_model).collect())
    }

    /// Current indexable state of `ids`: present only for memories that exist and are active.
    pub async fn indexing_rows(
        &self,
        scope: &ProjectScope,
        ids: &[MemoryId],
    ) -> Result<HashMap<MemoryId, IndexingRow>, StorageError> {
        if ids.is_empty() {
            return Ok(HashMap::new());
        }
        let models = memories::Entity::find()
            .filter(crate::tenancy::in_project::<memories::Entity>(scope))
            .filter(memories::Column::State.eq(MemoryState::Active.as_str()))
            .filter(memories::Column::Id.is_in(ids.iter().map(|id| id.as_uuid())))
            .all(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        let mut rows = HashMap::with_capacity(models.len());
        for model in models {
            let kind = model.kind.parse().map_err(|error| {
                StorageError::Internal(format!("stored kind is invalid: {error}"))
            })?;
            let source = model.source.parse().map_err(|error| {
                StorageError::Internal(format!("stored source is invalid: {error}"))
            })?;
            let categories: Vec<String> = serde_json::from_value(model.categories.clone())
                .map_err(|error| {
                    StorageError::Internal(format!("stored categories are invalid: {error}"))
                })?;
            let metadata = match model.metadata.clone() {
                serde_json::Value::Object(metadata) => metadata,
                _ => serde_json::Map::new(),
            };
            let memory_id = MemoryId::from_uuid(model.id);
            rows.insert(
                memory_id,
                IndexingRow {
                    memory_id,
                    version: model.version,
                    vector: decode_embedding(&model.embedding),
                    user_id: model.user_id,
                    agent_id: model.agent_id,
                    session_id: model.session_id,
                    kind,
                    created_at: model.created_at,
                    content: model.content,
                    source,
                    categories,
                    confidence: model.confidence,
                    updated_at: model.updated_at,
                    occurred_at: model.occurred_at,
                    metadata,
                    visibility: model
                        .visibility
                        .parse()
                        .unwrap_or(engram_core::Visibility::Private),
                    shared_with: model.shared_with,
                    verified: model.verified_at.is_some(),
                },
            );
        }
        Ok(rows)
    }

    /// Which of `ids` are active memories of `scope`'s project right now (ids only: the
    /// indexer's after-write check and the reconciler's orphan check need no embeddings).
    pub async fn active_memory_ids(
        &self,
        scope: &ProjectScope,
        ids: &[MemoryId],
    ) -> Result<std::collections::HashSet<MemoryId>, StorageError> {
        if ids.is_empty() {
            return Ok(std::collections::HashSet::new());
        }
        let rows: Vec<uuid::Uuid> = memories::Entity::find()
            .select_only()
            .column(memories::Column::Id)
            .filter(crate::tenancy::in_project::<memories::Entity>(scope))
            .filter(memories::Column::State.eq(MemoryState::Active.as_str()))
            .filter(memories::Column::Id.is_in(ids.iter().map(|id| id.as_uuid())))
            .into_tuple()
            .all(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        Ok(rows.into_iter().map(MemoryId::from_uuid).collect())
    }

    /// One project's active memories in id order after `after`, with their versions: the
    /// database side of the reconciler's comparison.
    pub async fn active_memory_versions_of(
        &self,
        scope: &ProjectScope,
        after: Option<MemoryId>,
        limit: u64,
    ) -> Result<Vec<(MemoryId, i64)>, StorageError> {
        let mut query = memories::Entity::find()
            .select_only()
            .column(memories::Column::Id)
            .column(memories::Column::Version)
            .filter(crate::tenancy::in_project::<memories::Entity>(scope))
            .filter(memories::Column::State.eq(MemoryState::Active.as_str()));
        if let Some(after) = after {
            query = query.filter(memories::Column::Id.gt(after.as_uuid()));
        }
        let rows: Vec<(uuid::Uuid, i64)> = query
            .order_by_asc(memories::Column::Id)
            .limit(limit)
            .into_tuple()
            .all(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        Ok(rows
            .into_iter()
            .map(|(id, version)| (MemoryId::from_uuid(id), version))
            .collect())
    }

    /// One project's memories changed at or after `since` (written, edited or superseded), in
    /// (change time, id) order after `after` (the last one of the previous page): their
    /// versions and whether they are active. The database side of the reconciler's pass over
    /// recent changes; each page is one range read of the (project, change time) index.
    pub async fn memory_versions_changed_since(
        &self,
        scope: &ProjectScope,
        since: DateTime<Utc>,
        after: Option<&ChangedMemoryVersion>,
        limit: u64,
    ) -> Result<Vec<ChangedMemoryVersion>, StorageError> {
        let mut query = memories::Entity::find()
            .select_only()
            .column(memories::Column::Id)
            .column(memories::Column::Version)
            .column(memories::Column::State)
            .column(memories::Column::UpdatedAt)
            .filter(crate::tenancy::in_project::<memories::Entity>(scope))
            .filter(memories::Column::UpdatedAt.gte(since));
        if let Some(after) = after {
            query = query.filter(
                Condition::any()
                    .add(memories::Column::UpdatedAt.gt(after.changed_at))
                    .add(
                        Condition::all()
                            .add(memories::Column::UpdatedAt.eq(after.changed_at))
                            .add(memories::Column::Id.gt(after.memory_id.as_uuid())),
                    ),
            );
        }
        let rows: Vec<(uuid::Uuid, i64, String, DateTime<Utc>)> = query
            .order_by_asc(memories::Column::UpdatedAt)
            .order_by_asc(memories::Column::Id)
            .limit(limit)
            .into_tuple()
            .all(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        Ok(rows
            .into_iter()
            .map(|(id, version, state, changed_at)| ChangedMemoryVersion {
                memory_id: MemoryId::from_uuid(id),
                version,
                active: state == MemoryState::Active.as_str(),
                changed_at,
            })
            .collect())
    }
}

impl Storage {
    /// One project's memories deleted at or after `since` (their tombstones), in (deletion
    /// time, id) order after `after` (the last one of the previous page): points of theirs
    /// still in the index are orphans.
    pub async fn memories_deleted_since(
        &self,
        scope: &ProjectScope,
        since: DateTime<Utc>,
        after: Option<&(DateTime<Utc>, MemoryId)>,
        limit: u64,
    ) -> Result<Vec<(DateTime<Utc>, MemoryId)>, StorageError> {
        let mut query = memory_tombstones::Entity::find()
            .select_only()
            .column(memory_tombstones::Column::DeletedAt)
            .column(memory_tombstones::Column::MemoryId)
            .filter(crate::tenancy::in_project::<memory_tombstones::Entity>(
                scope,
            ))
            .filter(memory_tombstones::Column::DeletedAt.gte(since));
        if let Some((deleted_at, memory_id)) = after {
            query = query.filter(
                Condition::any()
                    .add(memory_tombstones::Column::DeletedAt.gt(*deleted_at))
                    .add(
                        Condition::all()
                            .add(memory_tombstones::Column::DeletedAt.eq(*deleted_at))
                            .add(memory_tombstones::Column::MemoryId.gt(memory_id.as_uuid())),
                    ),
            );
        }
        let rows: Vec<(DateTime<Utc>, uuid::Uuid)> = query
            .order_by_asc(memory_tombstones::Column::DeletedAt)
            .order_by_asc(memory_tombstones::Column::MemoryId)
            .limit(limit)
            .into_tuple()
            .all(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        Ok(rows
            .into_iter()
            .map(|(deleted_at, id)| (deleted_at, MemoryId::from_uuid(id)))
            .collect())
    }
}

/// A memory that changed since a reconciler pass began (see
/// [`Storage::memory_versions_changed_since`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChangedMemoryVersion {
    pub memory_id: MemoryId,
    pub version: i64,
    pub active: bool,
    /// When the row last changed (`updated_at`).
    pub changed_at: DateTime<Utc>,
}

impl MaintenanceStore {
    /// Lease up to `limit` of the oldest entries that no live lease holds, for `lease`.
    /// Any number of workers may call this at once: each entry goes to one of them, and
    /// comes back to the pool if its worker dies before completing it.
    pub async fn claim_index_changes(
        &self,
        worker_id: &str,
        limit: u64,
        lease: Duration,
    ) -> Result<Vec<OutboxEntry>, StorageError> {
        let now = Utc::now();
        let lease_end = now
            + chrono::Duration::from_std(lease).map_err(|_| {
                StorageError::Configuration(format!("outbox lease {lease:?} is too long"))
            })?;
        let backend = self.storage.connection.get_database_backend();
        let sql = match backend {
            DbBackend::Postgres => CLAIM_POSTGRES,
            _ => CLAIM_SQLITE,
        };
        let statement = Statement::from_sql_and_values(
            backend,
            sql,
            [
                worker_id.into(),
                lease_end.into(),
                now.into(),
                (limit.min(i64::MAX as u64) as i64).into(),
            ],
        );
        let _permit = self.storage.write_permit().await;
        let mut models = index_outbox::Entity::find()
            .from_raw_sql(statement)
            .all(&self.storage.connection)
            .await
            .map_err(StorageError::from_db)?;
        models.sort_by_key(|model| model.id);
        Ok(models.into_iter().map(entry_from_model).collect())
    }

    /// Drop every lease. Only for a process that is the sole indexer of this database (the
    /// embedded `engram serve`): at its start, leases can only belong to an earlier run that
    /// died, and waiting for them to expire would keep acknowledged changes out of the index.
    pub async fn release_all_outbox_claims(&self) -> Result<u64, StorageError> {
        let _permit = self.storage.write_permit().await;
        let released = without_lease(index_outbox::Entity::update_many())
            .filter(index_outbox::Column::ClaimedBy.is_not_null())
            .exec(&self.storage.connection)
            .await
            .map_err(StorageError::from_db)?;
        Ok(released.rows_affected)
    }

    /// The oldest pending entries of every project, leased or not (for inspection).
    pub async fn pending_index_changes(
        &self,
        limit: u64,
    ) -> Result<Vec<OutboxEntry>, StorageError> {
        let models = index_outbox::Entity::find()
            .order_by_asc(index_outbox::Column::Id)
            .limit(limit)
            .all(&self.storage.connection)
            .await
            .map_err(StorageError::from_db)?;
        Ok(models.into_iter().map(entry_from_model).collect())
    }

    /// Entries whose change is applied and flushed in the index.
    pub async fn complete_index_changes(&self, entry_ids: &[i64]) -> Result<(), StorageError> {
        if entry_ids.is_empty() {
            return Ok(());
        }
        let _permit = self.storage.write_permit().await;
        index_outbox::Entity::delete_many()
            .filter(index_outbox::Column::Id.is_in(entry_ids.iter().copied()))
            .exec(&self.storage.connection)
            .await
            .map_err(StorageError::from_db)?;
        Ok(())
    }

    pub async fn record_index_failure(
        &self,
        entry_ids: &[i64],
        error: &str,
    ) -> Result<(), StorageError> {
        if entry_ids.is_empty() {
            return Ok(());
        }
        let _permit = self.storage.write_permit().await;
        // The lease is released so another attempt (by any worker) can follow the backoff.
        without_lease(index_outbox::Entity::update_many())
            .col_expr(
                index_outbox::Column::Attempts,
                Expr::col(index_outbox::Column::Attempts).add(1),
            )
            .col_expr(
                index_outbox::Column::LastError,
                Expr::value(error.chars().take(1000).collect::<String>()),
            )
            .filter(index_outbox::Column::Id.is_in(entry_ids.iter().copied()))
            .exec(&self.storage.connection)
            .await
            .map_err(StorageError::from_db)?;
        Ok(())
    }

    /// Entries not yet applied to the index.
    pub async fn outbox_backlog(&self) -> Result<u64, StorageError> {
        index_outbox::Entity::find()
            .count(&self.storage.connection)
            .await
            .map_err(StorageError::from_db)
    }
}
