//! What search and consolidation read besides the index: memories with their embeddings (for
//! fusion, diversity and near-duplicate detection), the memories that were true at a past
//! moment (`as_of`), and `always` procedures.

use crate::MaintenanceStore;
use crate::entities::memories;
use crate::memories::{decode_embedding, memories_of, memory_from_model, subject_condition};
use crate::{Storage, StorageError};
use chrono::{DateTime, Utc};
use engram_core::MemoryScope;
use engram_core::{
    ExternalId, Memory, MemoryId, MemoryKind, MemoryState, ProjectScope, SubjectFilter,
};
use sea_orm::{ColumnTrait, Condition, EntityTrait, QueryFilter, QueryOrder, QuerySelect};
use std::collections::HashMap;

/// A memory with the embedding it was indexed with.
#[derive(Clone, Debug)]
pub struct MemoryWithEmbedding {
    pub memory: Memory,
    pub embedding: Vec<f32>,
}

/// Procedural memories returned at task start carry `"always": true` in their metadata.
pub const ALWAYS_METADATA_KEY: &str = "always";

impl Storage {
    /// The active memories among `ids`, with their embeddings.
    pub async fn active_memories_with_embeddings(
        &self,
        scope: &MemoryScope,
        ids: &[MemoryId],
    ) -> Result<HashMap<MemoryId, MemoryWithEmbedding>, StorageError> {
        if ids.is_empty() {
            return Ok(HashMap::new());
        }
        let models = crate::memories::owned_memories_of(scope)
            .filter(memories::Column::State.eq(MemoryState::Active.as_str()))
            .filter(memories::Column::Id.is_in(ids.iter().map(|id| id.as_uuid())))
            .all(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        models
            .into_iter()
            .map(|model| {
                let found = with_embedding(model)?;
                Ok((found.memory.id, found))
            })
            .collect()
    }

    /// One page of the project's active memories with their embeddings, newest first,
    /// starting after `after` (consolidation walks the project with it).
    pub async fn active_memories_with_embeddings_page(
        &self,
        scope: &ProjectScope,
        after: Option<MemoryId>,
        limit: u64,
    ) -> Result<Vec<MemoryWithEmbedding>, StorageError> {
        let mut query =
            memories_of(scope).filter(memories::Column::State.eq(MemoryState::Active.as_str()));
        if let Some(after) = after {
            query = query.filter(memories::Column::Id.lt(after.as_uuid()));
        }
        let models = query
            .order_by_desc(memories::Column::Id)
            .limit(limit.max(1))
            .all(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        models.into_iter().map(with_embedding).collect()
    }

    /// Memories of `subject` that were valid at `as_of`: created by then, and either still
    /// active or superseded only later. Deleted memories are not history anyone may recall.
    /// The newest `limit` (by validity start), with their embeddings.
    pub async fn memories_valid_at(
        &self,
        scope: &ProjectScope,
        subject: &SubjectFilter,
        kinds: &[MemoryKind],
        as_of: DateTime<Utc>,
        limit: u64,
    ) -> Result<Vec<MemoryWithEmbedding>, StorageError> {
        let mut query = memories_of(scope)
            .filter(subject_condition(subject))
            .filter(memories::Column::State.is_in([
                MemoryState::Active.as_str(),
                MemoryState::Superseded.as_str(),
            ]))
            .filter(memories::Column::ValidFrom.lte(as_of))
            .filter(
                Condition::any()
                    .add(memories::Column::ValidTo.is_null())
                    .add(memories::Column::ValidTo.gt(as_of)),
            );
        if !kinds.is_empty() {
            query =
                query.filter(memories::Column::Kind.is_in(kinds.iter().map(|kind| kind.as_str())));
        }
        let models = query
            .order_by_desc(memories::Column::ValidFrom)
            .limit(limit)
            .all(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        models.into_iter().map(with_embedding).collect()
    }

    /// Active procedural memories marked `"always": true` that apply to this user and agent:
    /// those of the user (or of no user) and of the agent (or of no agent), oldest first.
    pub async fn always_procedures(
        &self,
        scope: &ProjectScope,
        user_id: Option<&ExternalId>,
        agent_id: Option<&ExternalId>,
        limit: usize,
    ) -> Result<Vec<Memory>, StorageError> {
        let applies_to = |column: memories::Column, wanted: Option<&ExternalId>| match wanted {
            Some(wanted) => Condition::any()
                .add(column.is_null())
                .add(column.eq(wanted.as_str())),
            None => Condition::all().add(column.is_null()),
        };
        // Metadata is JSON text on SQLite and JSON on PostgreSQL: the flag is checked here,
        // over at most a few hundred procedures.
        let models = memories_of(scope)
            .filter(memories::Column::State.eq(MemoryState::Active.as_str()))
            .filter(memories::Column::Kind.eq(MemoryKind::Procedural.as_str()))
            .filter(applies_to(memories::Column::UserId, user_id))
            .filter(applies_to(memories::Column::AgentId, agent_id))
            .order_by_asc(memories::Column::CreatedAt)
            .limit(MAX_PROCEDURES_SCANNED)
            .all(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        let mut procedures = Vec::new();
        for model in models {
            let memory = memory_from_model(model)?;
            let always =
                memory.metadata.get(ALWAYS_METADATA_KEY) == Some(&serde_json::Value::Bool(true));
            let expired = memory
                .expires_at
                .is_some_and(|expires_at| expires_at <= Utc::now());
            if always && !expired {
                procedures.push(memory);
                if procedures.len() >= limit {
                    break;
                }
            }
        }
        Ok(procedures)
    }
}

const MAX_PROCEDURES_SCANNED: u64 = 500;

fn with_embedding(model: memories::Model) -> Result<MemoryWithEmbedding, StorageError> {
    let embedding = decode_embedding(&model.embedding);
    Ok(MemoryWithEmbedding {
        memory: memory_from_model(model)?,
        embedding,
    })
}

impl MaintenanceStore {
    /// Which embedding models the searchable (active or superseded) memories of each
    /// project were embedded with, across every project: start-up refuses to serve a
    /// project whose vectors do not belong to its embedding space.
    pub async fn embedding_models_by_project(
        &self,
    ) -> Result<Vec<(engram_core::ProjectId, String)>, StorageError> {
        let rows = memories::Entity::find()
            .select_only()
            .column(memories::Column::ProjectId)
            .column(memories::Column::EmbeddingModel)
            .filter(memories::Column::State.ne(MemoryState::Deleted.as_str()))
            .distinct()
            .into_tuple::<(uuid::Uuid, String)>()
            .all(&self.storage.connection)
            .await
            .map_err(StorageError::from_db)?;
        Ok(rows
            .into_iter()
            .map(|(project_id, model)| (engram_core::ProjectId::from_uuid(project_id), model))
            .collect())
    }
}
