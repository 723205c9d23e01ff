//! What the project's memory limits read: how many live memories a subject (an end-user or
//! an agent) holds, and which of them a policy would evict first.

use crate::entities::{feedback, memories, memory_uses};
use crate::{Storage, StorageError};
use chrono::{DateTime, Utc};
use engram_core::memory_limits::{
    ImportanceSignals, LimitedSubject, MemoryLimitPolicy, importance,
};
use engram_core::{MemoryId, MemoryState, ProjectScope};
use sea_orm::{
    ColumnTrait, Condition, EntityTrait, PaginatorTrait, QueryFilter, QueryOrder, QuerySelect,
};
use std::collections::HashMap;

/// The live memories of a subject.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SubjectMemoryCount {
    pub live: u64,
    /// Immutable or under legal hold: never evicted.
    pub locked: u64,
}

/// The live memories of `subject` in the project. Memory limits are the project's policy, so
/// they count every agent's memories of the subject, whoever writes.
fn of_subject(scope: &ProjectScope, subject: &LimitedSubject) -> Condition {
    let subject_condition = match subject {
        LimitedSubject::EndUser(user_id) => memories::Column::UserId.eq(user_id.as_str()),
        LimitedSubject::Agent(agent_id) => memories::Column::AgentId.eq(agent_id.as_str()),
    };
    crate::tenancy::in_project::<memories::Entity>(scope)
        .add(memories::Column::State.eq(MemoryState::Active.as_str()))
        .add(subject_condition)
}

fn evictable() -> Condition {
    Condition::all()
        .add(memories::Column::Immutable.eq(false))
        .add(memories::Column::LegalHold.eq(false))
}

/// Ids per query of an `IN` list.
const ID_CHUNK: usize = 500;

impl Storage {
    pub async fn subject_memory_count(
        &self,
        scope: &ProjectScope,
        subject: &LimitedSubject,
    ) -> Result<SubjectMemoryCount, StorageError> {
        let live = memories::Entity::find()
            .filter(of_subject(scope, subject))
            .count(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        let locked = memories::Entity::find()
            .filter(of_subject(scope, subject))
            .filter(evictable().not())
            .count(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        Ok(SubjectMemoryCount { live, locked })
    }

    /// The `wanted` memories of `subject` the policy evicts first, never immutable or held
    /// ones nor those in `keep` (the write that needs the room): the oldest by creation, or
    /// the lowest [`importance`] (ties to the oldest).
    pub async fn eviction_candidates(
        &self,
        scope: &ProjectScope,
        subject: &LimitedSubject,
        policy: MemoryLimitPolicy,
        keep: &[MemoryId],
        wanted: u64,
        now: DateTime<Utc>,
    ) -> Result<Vec<MemoryId>, StorageError> {
        if wanted == 0 {
            return Ok(Vec::new());
        }
        let keep: Vec<uuid::Uuid> = keep.iter().map(|id| id.as_uuid()).collect();
        let candidates = memories::Entity::find()
            .select_only()
            .column(memories::Column::Id)
            .column(memories::Column::CreatedAt)
            .column(memories::Column::UpdatedAt)
            .filter(of_subject(scope, subject))
            .filter(evictable())
            .filter(memories::Column::Id.is_not_in(keep))
            .order_by_asc(memories::Column::CreatedAt)
            .order_by_asc(memories::Column::Id);
        let candidates = match policy {
            MemoryLimitPolicy::EvictOldest => candidates.limit(wanted),
            // Every candidate is scored; the limit bounds how many there are.
            MemoryLimitPolicy::EvictLeastImportant | MemoryLimitPolicy::Refuse => candidates,
        };
        let rows: Vec<(uuid::Uuid, DateTime<Utc>, DateTime<Utc>)> = candidates
            .into_tuple()
            .all(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        if policy != MemoryLimitPolicy::EvictLeastImportant {
            return Ok(rows
                .into_iter()
                .take(usize::try_from(wanted).unwrap_or(usize::MAX))
                .map(|(id, _, _)| MemoryId::from_uuid(id))
                .collect());
        }
        let signals = self.importance_signals(scope, &rows).await?;
        let mut scored: Vec<(f64, usize, uuid::Uuid)> = rows
            .iter()
            .enumerate()
            .map(|(position, (id, _, _))| {
                let score = signals
                    .get(id)
                    .map(|signals| importance(signals, now))
                    .unwrap_or(0.0);
                (score, position, *id)
            })
            .collect();
        // Lowest first; `position` is creation order, so ties go to the oldest.
        scored.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        Ok(scored
            .into_iter()
            .take(usize::try_from(wanted).unwrap_or(usize::MAX))
            .map(|(_, _, id)| MemoryId::from_uuid(id))
            .collect())
    }

    /// Recency, recalls (through the memory→recall link) and ratings of each memory.
    async fn importance_signals(
        &self,
        scope: &ProjectScope,
        rows: &[(uuid::Uuid, DateTime<Utc>, DateTime<Utc>)],
    ) -> Result<HashMap<uuid::Uuid, ImportanceSignals>, StorageError> {
        let mut signals: HashMap<uuid::Uuid, ImportanceSignals> = rows
            .iter()
            .map(|(id, created_at, updated_at)| {
                (
                    *id,
                    ImportanceSignals {
                        last_active_at: (*created_at).max(*updated_at),
                        recalls: 0,
                        rated_relevant: 0,
                        rated_unhelpful: 0,
                    },
                )
            })
            .collect();
        let ids: Vec<uuid::Uuid> = rows.iter().map(|(id, _, _)| *id).collect();
        for chunk in ids.chunks(ID_CHUNK) {
            let uses: Vec<(uuid::Uuid, i64, Option<DateTime<Utc>>)> = memory_uses::Entity::find()
                .select_only()
                .column(memory_uses::Column::MemoryId)
                .column_as(memory_uses::Column::Id.count(), "uses")
                .column_as(memory_uses::Column::UsedAt.max(), "last_used_at")
                .filter(crate::tenancy::in_project::<memory_uses::Entity>(scope))
                .filter(memory_uses::Column::MemoryId.is_in(chunk.to_vec()))
                .group_by(memory_uses::Column::MemoryId)
                .into_tuple()
                .all(&self.connection)
                .await
                .map_err(StorageError::from_db)?;
            for (id, uses, last_used_at) in uses {
                if let Some(memory) = signals.get_mut(&id) {
                    memory.recalls = u64::try_from(uses).unwrap_or(0);
                    if let Some(last_used_at) = last_used_at {
                        memory.last_active_at = memory.last_active_at.max(last_used_at);
                    }
                }
            }
            let ratings: Vec<(Option<uuid::Uuid>, String, i64)> = feedback::Entity::find()
                .select_only()
                .column(feedback::Column::MemoryId)
                .column(feedback::Column::Rating)
                .column_as(feedback::Column::Id.count(), "ratings")
                .filter(crate::tenancy::in_project::<feedback::Entity>(scope))
                .filter(feedback::Column::MemoryId.is_in(chunk.to_vec()))
                .group_by(feedback::Column::MemoryId)
                .group_by(feedback::Column::Rating)
                .into_tuple()
                .all(&self.connection)
                .await
                .map_err(StorageError::from_db)?;
            for (id, rating, count) in ratings {
                let Some(memory) = id.and_then(|id| signals.get_mut(&id)) else {
                    continue;
                };
                let count = u64::try_from(count).unwrap_or(0);
                match rating.as_str() {
                    "relevant" => memory.rated_relevant += count,
                    _ => memory.rated_unhelpful += count,
                }
            }
        }
        Ok(signals)
    }
}

impl Storage {
    /// Whether a keyed memory of `user_id` and `agent_id` would replace an active one (and so
    /// add nothing to what its subjects hold).
    pub async fn replaces_keyed_memory(
        &self,
        scope: &ProjectScope,
        user_id: Option<&str>,
        agent_id: Option<&str>,
        key: &str,
    ) -> Result<bool, StorageError> {
        let mut query = memories::Entity::find()
            .filter(crate::tenancy::in_project::<memories::Entity>(scope))
            .filter(memories::Column::State.eq(MemoryState::Active.as_str()))
            .filter(memories::Column::Key.eq(key));
        query = match user_id {
            Some(user_id) => query.filter(memories::Column::UserId.eq(user_id)),
            None => query.filter(memories::Column::UserId.is_null()),
        };
        query = match agent_id {
            Some(agent_id) => query.filter(memories::Column::AgentId.eq(agent_id)),
            None => query.filter(memories::Column::AgentId.is_null()),
        };
        Ok(query
            .count(&self.connection)
            .await
            .map_err(StorageError::from_db)?
            > 0)
    }
}

impl Storage {
    /// Whether a write with this idempotency key was already answered (a retry replays the
    /// answer: the memory limits, checked before, must not refuse it).
    pub async fn idempotency_key_used(
        &self,
        scope: &ProjectScope,
        key: &str,
    ) -> Result<bool, StorageError> {
        Ok(crate::entities::idempotency_records::Entity::find_by_id((
            scope.project_id().as_uuid(),
            key.to_string(),
        ))
        .one(&self.connection)
        .await
        .map_err(StorageError::from_db)?
        .is_some())
    }
}
