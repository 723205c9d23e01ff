//! Moving a project with memories to another embedding model, in the database: the move's
//! start (its target and task), the new vectors staged beside their memories, the switch that
//! copies them in at once, and the generation that keeps a late write out of the new space.
//!
//! A staged vector is fresh while its memory's content digest is the one it was computed
//! from; deleting or erasing a memory deletes its staged vector (foreign key).

use crate::WriteTransaction;
use crate::audit::append_audit_event;
use crate::entities::{memories, memory_reembeddings, projects};
use crate::memories::encode_embedding;
use crate::tasks::{TaskRecord, insert_task};
use crate::{Storage, StorageError};
use engram_core::audit::{Actor, AuditAction, NewAuditEvent};
use engram_core::{MemoryId, MemoryState, NotFoundKind, ProjectEmbedding, ProjectScope, TaskKind};
use sea_orm::sea_query::{Expr, LockType, Query, SimpleExpr, SubQueryStatement};
use sea_orm::{
    ActiveValue::Set, ColumnTrait, ConnectionTrait, DbBackend, EntityTrait, PaginatorTrait,
    QueryFilter, QueryOrder, QuerySelect,
};

/// A memory to embed into the new space: what the model reads and whether the index holds it.
#[derive(Clone, Debug)]
pub struct ReembeddingSource {
    pub memory_id: MemoryId,
    pub content: String,
    pub content_hash: String,
    /// Active memories are in the index; superseded ones only answer `as_of` searches.
    pub active: bool,
}

/// A memory's vector in the new space, from the content whose digest is `content_hash`.
#[derive(Clone, Debug)]
pub struct StagedVector {
    pub memory_id: MemoryId,
    pub content_hash: String,
    pub vector: Vec<f32>,
}

/// How a switch attempt ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SwitchOutcome {
    /// The project now uses the new space; its searchable memories moved with it.
    Switched { memories: u64 },
    /// Memories written or changed since they were staged still need their new vector.
    Behind { memories: u64 },
    /// The move was cancelled or replaced by another: nothing changed.
    NoLongerWanted,
}

/// Searchable memories: active or superseded (deleted rows are gone).
fn searchable() -> sea_orm::Condition {
    sea_orm::Condition::all().add(memories::Column::State.ne(MemoryState::Deleted.as_str()))
}

/// The searchable memories of `scope`'s project.
pub(crate) fn searchable_memories_of(scope: &ProjectScope) -> sea_orm::Select<memories::Entity> {
    crate::memories::memories_of(scope).filter(searchable())
}

/// Ends the project's move, switched or abandoned: no target any more, no staged vector.
async fn end_move(
    transaction: &WriteTransaction,
    scope: &ProjectScope,
) -> Result<(), StorageError> {
    projects::Entity::update_many()
        .col_expr(
            projects::Column::EmbeddingTargetSource,
            Expr::value(Option::<String>::None),
        )
        .col_expr(
            projects::Column::EmbeddingTargetTask,
            Expr::value(Option::<uuid::Uuid>::None),
        )
        .filter(crate::tenancy::in_project::<projects::Entity>(scope))
        .exec(transaction)
        .await
        .map_err(StorageError::from_db)?;
    memory_reembeddings::Entity::delete_many()
        .filter(crate::tenancy::in_project::<memory_reembeddings::Entity>(
            scope,
        ))
        .exec(transaction)
        .await
        .map_err(StorageError::from_db)?;
    Ok(())
}

/// The staged vector of the memory in the outer query, fresh: of `model_id`, from the
/// memory's current content, in `scope`'s project.
fn fresh_stage_of_memory(scope: &ProjectScope, model_id: &str) -> sea_orm::Condition {
    let staged = |column| Expr::col((memory_reembeddings::Entity, column));
    crate::tenancy::in_project::<memory_reembeddings::Entity>(scope)
        .add(
            staged(memory_reembeddings::Column::MemoryId)
                .equals((memories::Entity, memories::Column::Id)),
        )
        .add(
            staged(memory_reembeddings::Column::ContentHash)
                .equals((memories::Entity, memories::Column::ContentHash)),
        )
        .add(staged(memory_reembeddings::Column::EmbeddingModel).eq(model_id))
}

/// Memories of `scope`'s project without a fresh staged vector of `model_id`.
fn without_fresh_stage(scope: &ProjectScope, model_id: &str) -> SimpleExpr {
    let fresh = Query::select()
        .expr(Expr::val(1))
        .from(memory_reembeddings::Entity)
        .cond_where(fresh_stage_of_memory(scope, model_id))
        .to_owned();
    Expr::exists(fresh).not()
}

/// The project's row, locked until the end of the transaction on PostgreSQL (SQLite has one
/// writer at a time): `exclusive` for a change of space, shared for a write of vectors.
async fn locked_project<C: ConnectionTrait>(
    connection: &C,
    scope: &ProjectScope,
    exclusive: bool,
) -> Result<projects::Model, StorageError> {
    let mut query =
        projects::Entity::find().filter(crate::tenancy::in_project::<projects::Entity>(scope));
    if connection.get_database_backend() == DbBackend::Postgres {
        // NO KEY UPDATE: conflicts with the shared lock of writers, not with the key-share
        // locks foreign keys take (inserts of memories and keys of the project).
        query = query.lock(if exclusive {
            LockType::NoKeyUpdate
        } else {
            LockType::Share
        });
    }
    query
        .one(connection)
        .await
        .map_err(StorageError::from_db)?
        .ok_or(StorageError::NotFound(NotFoundKind::Project))
}

/// Refuses a write of vectors embedded in another generation of the project's space: a
/// switch came between the embedding and the write. Holds the project's row (shared) until
/// the write commits, so a switch waits for it and then sees it.
pub(crate) async fn check_embedding_generation<C: ConnectionTrait>(
    connection: &C,
    scope: &ProjectScope,
    generation: i64,
) -> Result<(), StorageError> {
    let project = locked_project(connection, scope, false).await?;
    if project.embedding_generation != generation {
        return Err(StorageError::EmbeddingSpaceChanged);
    }
    Ok(())
}

/// Locks the project's row for a change of its space (see [`locked_project`]).
pub(crate) async fn lock_project_for_switch(
    transaction: &WriteTransaction,
    scope: &ProjectScope,
) -> Result<projects::Model, StorageError> {
    locked_project(transaction, scope, true).await
}

pub(crate) fn embedding_json(embedding: ProjectEmbedding) -> serde_json::Value {
    serde_json::json!({
        "source": embedding.source(),
        "model": embedding.local_model(),
        "dimension": embedding.client_dimension(),
    })
}

impl Storage {
    /// Start moving the project to `to`: record the move and queue its task (one move at a
    /// time). The current space stays in use until the task switches.
    pub async fn start_embedding_change(
        &self,
        scope: &ProjectScope,
        to: ProjectEmbedding,
        request_id: Option<&str>,
        actor: &Actor,
    ) -> Result<TaskRecord, StorageError> {
        let _permit = self.write_permit().await;
        let transaction = self.begin_write().await?;
        let project = lock_project_for_switch(&transaction, scope).await?;
        if let (Some(target), Some(task_id)) = (
            &project.embedding_target_source,
            project.embedding_target_task,
        ) {
            return Err(StorageError::EmbeddingChangeUnderWay(
                engram_core::governance::move_under_way(target, task_id),
            ));
        }
        let from =
            ProjectEmbedding::from_columns(&project.embedding_source, project.embedding_dimension);
        let memories = searchable_memories_of(scope)
            .count(&transaction)
            .await
            .map_err(StorageError::from_db)?;
        let task_id =
            insert_task(&transaction, scope, TaskKind::Reembedding, None, request_id).await?;
        crate::entities::tasks::Entity::update_many()
            .col_expr(
                crate::entities::tasks::Column::ProgressTotal,
                Expr::value(i64::try_from(memories).unwrap_or(i64::MAX)),
            )
            .filter(crate::tenancy::in_project::<crate::entities::tasks::Entity>(scope))
            .filter(crate::entities::tasks::Column::Id.eq(task_id))
            .exec(&transaction)
            .await
            .map_err(StorageError::from_db)?;
        projects::Entity::update_many()
            .col_expr(
                projects::Column::EmbeddingTargetSource,
                Expr::value(to.stored_source()),
            )
            .col_expr(projects::Column::EmbeddingTargetTask, Expr::value(task_id))
            .filter(crate::tenancy::in_project::<projects::Entity>(scope))
            .exec(&transaction)
            .await
            .map_err(StorageError::from_db)?;
        append_audit_event(
            &transaction,
            scope.organization_id(),
            Some(scope),
            actor,
            &NewAuditEvent::success(
                AuditAction::EmbeddingChangeStarted,
                vec![scope.project_id().to_string()],
                serde_json::json!({
                    "from": embedding_json(from),
                    "to": embedding_json(to),
                    "memories": memories,
                    "task_id": task_id,
                }),
            ),
        )
        .await?;
        transaction.commit().await.map_err(StorageError::from_db)?;
        self.task(scope, task_id)
            .await?
            .ok_or(StorageError::NotFound(NotFoundKind::Task))
    }

    /// Up to `limit` searchable memories after `after` (by id) without a fresh vector of
    /// `model_id`.
    pub async fn memories_to_reembed(
        &self,
        scope: &ProjectScope,
        model_id: &str,
        after: Option<MemoryId>,
        limit: u64,
    ) -> Result<Vec<ReembeddingSource>, StorageError> {
        let mut query = searchable_memories_of(scope).filter(without_fresh_stage(scope, model_id));
        if let Some(after) = after {
            query = query.filter(memories::Column::Id.gt(after.as_uuid()));
        }
        let rows: Vec<(uuid::Uuid, String, String, String)> = query
            .select_only()
            .column(memories::Column::Id)
            .column(memories::Column::Content)
            .column(memories::Column::ContentHash)
            .column(memories::Column::State)
            .order_by_asc(memories::Column::Id)
            .limit(limit)
            .into_tuple()
            .all(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        Ok(rows
            .into_iter()
            .map(|(id, content, content_hash, state)| ReembeddingSource {
                memory_id: MemoryId::from_uuid(id),
                content,
                content_hash,
                active: state == MemoryState::Active.as_str(),
            })
            .collect())
    }

    /// Keep new vectors of `model_id` for the move `task_id` until the switch. A memory
    /// deleted meanwhile is skipped (its vector must not outlive it), and a move cancelled or
    /// replaced meanwhile keeps nothing.
    pub async fn stage_reembeddings(
        &self,
        scope: &ProjectScope,
        task_id: uuid::Uuid,
        model_id: &str,
        staged: &[StagedVector],
    ) -> Result<(), StorageError> {
        if staged.is_empty() {
            return Ok(());
        }
        let _permit = self.write_permit().await;
        let transaction = self.begin_write().await?;
        // Shared: an abandonment (exclusive) waits for this batch and then removes it.
        let project = locked_project(&transaction, scope, false).await?;
        if project.embedding_target_task != Some(task_id) {
            return Err(StorageError::Refused(
                "the move was cancelled or replaced".to_string(),
            ));
        }
        let ids: Vec<uuid::Uuid> = staged
            .iter()
            .map(|vector| vector.memory_id.as_uuid())
            .collect();
        // Key-share locked (PostgreSQL), in id order: a concurrent delete of one of these
        // memories waits for this batch, then takes its staged vector with it.
        let mut existing_query = crate::memories::memories_of(scope)
            .select_only()
            .column(memories::Column::Id)
            .filter(memories::Column::Id.is_in(ids.clone()))
            .order_by_asc(memories::Column::Id);
        if transaction.get_database_backend() == DbBackend::Postgres {
            existing_query = existing_query.lock(LockType::KeyShare);
        }
        let existing: std::collections::HashSet<uuid::Uuid> = existing_query
            .into_tuple::<uuid::Uuid>()
            .all(&transaction)
            .await
            .map_err(StorageError::from_db)?
            .into_iter()
            .collect();
        memory_reembeddings::Entity::delete_many()
            .filter(crate::tenancy::in_project::<memory_reembeddings::Entity>(
                scope,
            ))
            .filter(memory_reembeddings::Column::MemoryId.is_in(ids))
            .exec(&transaction)
            .await
            .map_err(StorageError::from_db)?;
        let rows: Vec<memory_reembeddings::ActiveModel> = staged
            .iter()
            .filter(|vector| existing.contains(&vector.memory_id.as_uuid()))
            .map(|vector| memory_reembeddings::ActiveModel {
                memory_id: Set(vector.memory_id.as_uuid()),
                organization_id: Set(scope.organization_id().as_uuid()),
                project_id: Set(scope.project_id().as_uuid()),
                content_hash: Set(vector.content_hash.clone()),
                embedding_model: Set(model_id.to_string()),
                embedding: Set(encode_embedding(&vector.vector)),
            })
            .collect();
        if !rows.is_empty() {
            memory_reembeddings::Entity::insert_many(rows)
                .exec_without_returning(&transaction)
                .await
                .map_err(StorageError::from_db)?;
        }
        transaction.commit().await.map_err(StorageError::from_db)?;
        Ok(())
    }

    /// Switch the project to `to` at once, if the move `task_id` is still the one wanted and
    /// every searchable memory has a fresh vector of `model_id`: the vectors are copied into
    /// the memories, the generation is raised (a write embedded before is refused) and the
    /// cached query embeddings are dropped.
    pub async fn switch_embedding(
        &self,
        scope: &ProjectScope,
        task_id: uuid::Uuid,
        to: ProjectEmbedding,
        model_id: &str,
        actor: &Actor,
    ) -> Result<SwitchOutcome, StorageError> {
        let _permit = self.write_permit().await;
        let transaction = self.begin_write().await?;
        let project = lock_project_for_switch(&transaction, scope).await?;
        if project.embedding_target_task != Some(task_id)
            || project.embedding_target_source.as_deref() != Some(to.stored_source())
        {
            return Ok(SwitchOutcome::NoLongerWanted);
        }
        let behind = searchable_memories_of(scope)
            .filter(without_fresh_stage(scope, model_id))
            .count(&transaction)
            .await
            .map_err(StorageError::from_db)?;
        if behind > 0 {
            return Ok(SwitchOutcome::Behind { memories: behind });
        }
        // Only a fresh vector of the model (every searchable memory has one: counted above).
        let staged_vector = Query::select()
            .column(memory_reembeddings::Column::Embedding)
            .from(memory_reembeddings::Entity)
            .cond_where(fresh_stage_of_memory(scope, model_id))
            .to_owned();
        let moved = memories::Entity::update_many()
            .col_expr(
                memories::Column::Embedding,
                SimpleExpr::SubQuery(
                    None,
                    Box::new(SubQueryStatement::SelectStatement(staged_vector)),
                ),
            )
            .col_expr(memories::Column::EmbeddingModel, Expr::value(model_id))
            .filter(crate::tenancy::in_project::<memories::Entity>(scope))
            .filter(searchable())
            .exec(&transaction)
            .await
            .map_err(StorageError::from_db)?
            .rows_affected;
        let from =
            ProjectEmbedding::from_columns(&project.embedding_source, project.embedding_dimension);
        projects::Entity::update_many()
            .col_expr(
                projects::Column::EmbeddingSource,
                Expr::value(to.stored_source()),
            )
            .col_expr(
                projects::Column::EmbeddingDimension,
                Expr::value(Option::<i32>::None),
            )
            .col_expr(
                projects::Column::EmbeddingGeneration,
                Expr::col(projects::Column::EmbeddingGeneration).add(1),
            )
            .col_expr(
                projects::Column::QueryCacheEpoch,
                Expr::col(projects::Column::QueryCacheEpoch).add(1),
            )
            .filter(crate::tenancy::in_project::<projects::Entity>(scope))
            .exec(&transaction)
            .await
            .map_err(StorageError::from_db)?;
        end_move(&transaction, scope).await?;
        append_audit_event(
            &transaction,
            scope.organization_id(),
            Some(scope),
            actor,
            &NewAuditEvent::success(
                AuditAction::EmbeddingSwitched,
                vec![scope.project_id().to_string()],
                serde_json::json!({
                    "from": embedding_json(from),
                    "to": embedding_json(to),
                    "memories": moved,
                    "task_id": task_id,
                }),
            ),
        )
        .await?;
        transaction.commit().await.map_err(StorageError::from_db)?;
        Ok(SwitchOutcome::Switched { memories: moved })
    }

    /// Give up the move `task_id` (it failed, or was cancelled): its staged vectors go and
    /// the project stays in its space. `false` when that move is no longer under way.
    pub async fn abandon_embedding_change(
        &self,
        scope: &ProjectScope,
        task_id: uuid::Uuid,
        reason: &str,
        actor: &Actor,
    ) -> Result<bool, StorageError> {
        let _permit = self.write_permit().await;
        let transaction = self.begin_write().await?;
        let project = lock_project_for_switch(&transaction, scope).await?;
        if project.embedding_target_task != Some(task_id) {
            return Ok(false);
        }
        end_move(&transaction, scope).await?;
        append_audit_event(
            &transaction,
            scope.organization_id(),
            Some(scope),
            actor,
            &NewAuditEvent::success(
                AuditAction::EmbeddingChangeAbandoned,
                vec![scope.project_id().to_string()],
                serde_json::json!({
                    "to": project.embedding_target_source,
                    "task_id": task_id,
                    "reason": reason,
                }),
            ),
        )
        .await?;
        transaction.commit().await.map_err(StorageError::from_db)?;
        Ok(true)
    }

    /// Staged vectors of the project (tests: none may outlive a switch, an abandonment or
    /// their memory).
    pub async fn count_staged_reembeddings(
        &self,
        scope: &ProjectScope,
    ) -> Result<u64, StorageError> {
        memory_reembeddings::Entity::find()
            .filter(crate::tenancy::in_project::<memory_reembeddings::Entity>(
                scope,
            ))
            .count(&self.connection)
            .await
            .map_err(StorageError::from_db)
    }
}
