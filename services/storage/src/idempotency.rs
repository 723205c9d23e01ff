//! Stored idempotency answers, found by index: every answer lists the memories it names
//! (and their end-users) in `idempotency_answer_memories`, so deletes and erasure reach the
//! answers that may carry a memory's content without reading any body, and answers expire.

use crate::entities::{idempotency_answer_memories, idempotency_records};
use crate::{MaintenanceStore, Storage, StorageError};
use chrono::{DateTime, Utc};
use engram_core::ProjectScope;
use sea_orm::sea_query::Expr;
use sea_orm::{
    ActiveValue::Set, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder,
    QuerySelect,
};

/// The stored status of an idempotency answer whose content was erased (no HTTP status is 0).
pub const ERASED_ANSWER_STATUS: i32 = 0;

/// How many answers one statement (or one expiry batch) touches at most.
const BATCH: usize = 500;

/// Inside `transaction`: list the memories (id, end-user) the answer stored under `key` names.
pub(crate) async fn record_answer_memories<C: ConnectionTrait>(
    transaction: &C,
    project_id: uuid::Uuid,
    key: &str,
    memories: &[(uuid::Uuid, Option<String>)],
) -> Result<(), StorageError> {
    for chunk in memories.chunks(BATCH) {
        idempotency_answer_memories::Entity::insert_many(chunk.iter().map(
            |(memory_id, user_id)| idempotency_answer_memories::ActiveModel {
                project_id: Set(project_id),
                idempotency_key: Set(key.to_string()),
                memory_id: Set(*memory_id),
                user_id: Set(user_id.clone()),
            },
        ))
        .on_conflict(
            sea_orm::sea_query::OnConflict::columns([
                idempotency_answer_memories::Column::ProjectId,
                idempotency_answer_memories::Column::IdempotencyKey,
                idempotency_answer_memories::Column::MemoryId,
            ])
            .do_nothing()
            .to_owned(),
        )
        .exec_without_returning(transaction)
        .await
        .map_err(StorageError::from_db)?;
    }
    Ok(())
}

/// Blank the answers stored under `keys` (kept as erased: a retry is told the answer is gone
/// and writes nothing). Returns how many were blanked now.
async fn blank_answers<C: ConnectionTrait>(
    connection: &C,
    scope: &ProjectScope,
    keys: &[String],
) -> Result<u64, StorageError> {
    let mut blanked = 0;
    for chunk in keys.chunks(BATCH) {
        blanked += idempotency_records::Entity::update_many()
            .col_expr(
                idempotency_records::Column::ResponseStatus,
                Expr::value(ERASED_ANSWER_STATUS),
            )
            .col_expr(
                idempotency_records::Column::ResponseBody,
                Expr::value(String::new()),
            )
            .filter(crate::tenancy::in_project::<idempotency_records::Entity>(
                scope,
            ))
            .filter(idempotency_records::Column::IdempotencyKey.is_in(chunk.to_vec()))
            .filter(idempotency_records::Column::ResponseStatus.ne(ERASED_ANSWER_STATUS))
            .exec(connection)
            .await
            .map_err(StorageError::from_db)?
            .rows_affected;
    }
    Ok(blanked)
}

/// The keys of the project's answers that name one of `memory_ids` (by index).
async fn keys_naming_memories<C: ConnectionTrait>(
    connection: &C,
    scope: &ProjectScope,
    memory_ids: &[uuid::Uuid],
) -> Result<Vec<String>, StorageError> {
    let mut keys = Vec::new();
    for chunk in memory_ids.chunks(BATCH) {
        let found: Vec<String> = idempotency_answer_memories::Entity::find()
            .select_only()
            .column(idempotency_answer_memories::Column::IdempotencyKey)
            .distinct()
            .filter(crate::tenancy::in_project::<
                idempotency_answer_memories::Entity,
            >(scope))
            .filter(idempotency_answer_memories::Column::MemoryId.is_in(chunk.to_vec()))
            .into_tuple()
            .all(connection)
            .await
            .map_err(StorageError::from_db)?;
        keys.extend(found);
    }
    keys.sort_unstable();
    keys.dedup();
    Ok(keys)
}

/// Inside `transaction`: every stored idempotency answer of the project that names one of
/// `memory_ids` (and so may carry its content) keeps its key and fingerprint but loses its
/// answer, so a retry is told the answer is gone and writes nothing. Returns how many.
pub(crate) async fn erase_idempotency_answers(
    transaction: &crate::WriteTransaction,
    scope: &ProjectScope,
    memory_ids: &[uuid::Uuid],
) -> Result<u64, StorageError> {
    let keys = keys_naming_memories(transaction, scope, memory_ids).await?;
    let blanked = blank_answers(transaction, scope, &keys).await?;
    // The index rows of a deleted memory go with it: they hold its end-user's id.
    for chunk in memory_ids.chunks(BATCH) {
        idempotency_answer_memories::Entity::delete_many()
            .filter(crate::tenancy::in_project::<
                idempotency_answer_memories::Entity,
            >(scope))
            .filter(idempotency_answer_memories::Column::MemoryId.is_in(chunk.to_vec()))
            .exec(transaction)
            .await
            .map_err(StorageError::from_db)?;
    }
    Ok(blanked)
}

/// The memories (id, end-user) a stored answer names, read from its body: the two shapes
/// Engram stores (`{"memories": [{"id", "user_id"}, …]}` for API answers, `["<id>", …]` for
/// its own derivation and file-ingest keys).
fn memories_in_answer(body: &str) -> Vec<(uuid::Uuid, Option<String>)> {
    let Ok(answer) = serde_json::from_str::<serde_json::Value>(body) else {
        return Vec::new();
    };
    let items = match &answer {
        serde_json::Value::Array(items) => items.clone(),
        serde_json::Value::Object(object) => object
            .get("memories")
            .and_then(serde_json::Value::as_array)
            .cloned()
            .unwrap_or_default(),
        _ => Vec::new(),
    };
    items
        .iter()
        .filter_map(|item| match item {
            serde_json::Value::String(id) => Some((id.parse().ok()?, None)),
            serde_json::Value::Object(memory) => Some((
                memory.get("id")?.as_str()?.parse().ok()?,
                memory
                    .get("user_id")
                    .and_then(serde_json::Value::as_str)
                    .map(str::to_string),
            )),
            _ => None,
        })
        .collect()
}

impl Storage {
    /// List the memories of answers stored before they were listed at write time (a
    /// database from before the index), a batch at a time; run when storage opens. Returns
    /// how many answers were listed.
    pub(crate) async fn index_idempotency_answers(&self) -> Result<u64, StorageError> {
        let mut listed = 0;
        loop {
            let batch = idempotency_records::Entity::find()
                .filter(idempotency_records::Column::Indexed.eq(false))
                .order_by_asc(idempotency_records::Column::ProjectId)
                .order_by_asc(idempotency_records::Column::IdempotencyKey)
                .limit(BATCH as u64)
                .all(&self.connection)
                .await
                .map_err(StorageError::from_db)?;
            if batch.is_empty() {
                return Ok(listed);
            }
            let _permit = self.write_permit().await;
            let transaction = self.begin_write().await?;
            for record in &batch {
                record_answer_memories(
                    &transaction,
                    record.project_id,
                    &record.idempotency_key,
                    &memories_in_answer(&record.response_body),
                )
                .await?;
                idempotency_records::Entity::update_many()
                    .col_expr(idempotency_records::Column::Indexed, Expr::value(true))
                    .filter(idempotency_records::Column::ProjectId.eq(record.project_id))
                    .filter(
                        idempotency_records::Column::IdempotencyKey
                            .eq(record.idempotency_key.clone()),
                    )
                    .exec(&transaction)
                    .await
                    .map_err(StorageError::from_db)?;
            }
            transaction.commit().await.map_err(StorageError::from_db)?;
            listed += batch.len() as u64;
        }
    }

    /// Erase the answers of the project's idempotency records that name the subject (found
    /// by the index of their memories' end-users): a retry must neither bring back erased
    /// content nor write it anew. Keys written before end-users were named by digest carry
    /// the raw id (`client:user:<length>:<id>:…`): those records go entirely.
    pub async fn erase_subject_idempotency_records(
        &self,
        scope: &ProjectScope,
        user_id: &str,
    ) -> Result<u64, StorageError> {
        let keys = self.idempotency_keys_naming_subject(scope, user_id).await?;
        let legacy_prefix = format!("client:user:{}:{user_id}:", user_id.len());
        let legacy = self.keys_starting_with(scope, &legacy_prefix).await?;
        if keys.is_empty() && legacy.is_empty() {
            return Ok(0);
        }
        let _permit = self.write_permit().await;
        for chunk in legacy.chunks(BATCH) {
            idempotency_records::Entity::delete_many()
                .filter(crate::tenancy::in_project::<idempotency_records::Entity>(
                    scope,
                ))
                .filter(idempotency_records::Column::IdempotencyKey.is_in(chunk.to_vec()))
                .exec(&self.connection)
                .await
                .map_err(StorageError::from_db)?;
        }
        // Kept as erased answers, not removed: a retry must not write the content anew. The
        // index rows naming the subject go: they hold the raw user id.
        let blanked = blank_answers(&self.connection, scope, &keys).await?;
        idempotency_answer_memories::Entity::delete_many()
            .filter(crate::tenancy::in_project::<
                idempotency_answer_memories::Entity,
            >(scope))
            .filter(idempotency_answer_memories::Column::UserId.eq(user_id))
            .exec(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        Ok(blanked)
    }

    /// Stored answers that still name the subject (erasure verification): answers whose
    /// index lists one of the subject's memories, blanked or not (the index row itself
    /// holds the user id until erasure removes it).
    pub async fn count_idempotency_records_naming_subject(
        &self,
        scope: &ProjectScope,
        user_id: &str,
    ) -> Result<u64, StorageError> {
        Ok(self
            .idempotency_keys_naming_subject(scope, user_id)
            .await?
            .len() as u64)
    }

    async fn idempotency_keys_naming_subject(
        &self,
        scope: &ProjectScope,
        user_id: &str,
    ) -> Result<Vec<String>, StorageError> {
        idempotency_answer_memories::Entity::find()
            .select_only()
            .column(idempotency_answer_memories::Column::IdempotencyKey)
            .distinct()
            .filter(crate::tenancy::in_project::<
                idempotency_answer_memories::Entity,
            >(scope))
            .filter(idempotency_answer_memories::Column::UserId.eq(user_id))
            .into_tuple()
            .all(&self.connection)
            .await
            .map_err(StorageError::from_db)
    }

    /// The project's keys that start with `prefix` (compared exactly, not as a pattern).
    async fn keys_starting_with(
        &self,
        scope: &ProjectScope,
        prefix: &str,
    ) -> Result<Vec<String>, StorageError> {
        // Keys of tokens begin `client:user:`: only those are read, never bodies.
        let keys: Vec<String> = idempotency_records::Entity::find()
            .select_only()
            .column(idempotency_records::Column::IdempotencyKey)
            .filter(crate::tenancy::in_project::<idempotency_records::Entity>(
                scope,
            ))
            .filter(idempotency_records::Column::IdempotencyKey.starts_with("client:user:"))
            .into_tuple()
            .all(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        Ok(keys
            .into_iter()
            .filter(|key| key.starts_with(prefix))
            .collect())
    }
}

impl MaintenanceStore {
    /// Remove every project's idempotency answers stored before `cutoff`, with their index
    /// rows, a batch per transaction; returns how many. A retry after this writes anew.
    pub async fn purge_idempotency_answers_stored_before(
        &self,
        cutoff: DateTime<Utc>,
    ) -> Result<u64, StorageError> {
        let mut purged = 0;
        loop {
            let expired: Vec<(uuid::Uuid, String)> = idempotency_records::Entity::find()
                .select_only()
                .column(idempotency_records::Column::ProjectId)
                .column(idempotency_records::Column::IdempotencyKey)
                .filter(idempotency_records::Column::CreatedAt.lt(cutoff))
                .limit(BATCH as u64)
                .into_tuple()
                .all(&self.storage.connection)
                .await
                .map_err(StorageError::from_db)?;
            if expired.is_empty() {
                return Ok(purged);
            }
            let _permit = self.storage.write_permit().await;
            let transaction = self.storage.begin_write().await?;
            for (project_id, key) in &expired {
                idempotency_answer_memories::Entity::delete_many()
                    .filter(idempotency_answer_memories::Column::ProjectId.eq(*project_id))
                    .filter(idempotency_answer_memories::Column::IdempotencyKey.eq(key.clone()))
                    .exec(&transaction)
                    .await
                    .map_err(StorageError::from_db)?;
                idempotency_records::Entity::delete_many()
                    .filter(idempotency_records::Column::ProjectId.eq(*project_id))
                    .filter(idempotency_records::Column::IdempotencyKey.eq(key.clone()))
                    .exec(&transaction)
                    .await
                    .map_err(StorageError::from_db)?;
            }
            transaction.commit().await.map_err(StorageError::from_db)?;
            purged += expired.len() as u64;
        }
    }
}
