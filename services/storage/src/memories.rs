//! Memory repository: add (with supersede by key, history, outbox and idempotency in one
//! transaction), get, list, patch with optimistic concurrency, delete, history, hydrate.

use crate::MaintenanceStore;
use crate::audit::append_audit_event;
use crate::entities::{
    idempotency_records, index_outbox, memories, memory_history, memory_tombstones,
};
use crate::error::is_unique_violation;
use crate::{Storage, StorageError};
use chrono::{DateTime, Utc};
use engram_core::audit::{Actor, AuditAction, NewAuditEvent};
use engram_core::memory::content_digest;
pub use engram_core::memory::{HistoryEntry, MemoryListFilter, MemoryPage};
use engram_core::memory_filter::to_micros;
use engram_core::{
    ExternalId, Memory, MemoryFilter, MemoryId, MemoryState, NewMemory, ProjectScope, SubjectFilter,
};
use engram_core::{MemoryScope, NotFoundKind, Visibility};
use sea_orm::sea_query::{Expr, Func, LikeExpr};
use sea_orm::{
    ActiveValue::Set, ColumnTrait, Condition, ConnectionTrait, DbBackend, EntityTrait, QueryFilter,
    QueryOrder, QuerySelect, Select, Statement,
};
use std::collections::HashMap;

/// A memory ready to be stored: what the caller asked for plus its embedding.
#[derive(Clone, Debug)]
pub struct MemoryDraft {
    pub memory: NewMemory,
    pub embedding: Vec<f32>,
    pub embedding_model: String,
    /// The generation of the project's space `embedding` was computed in: refused once the
    /// project switched to another (`ProjectSettings::embedding_generation`).
    pub embedding_generation: i64,
    /// An active memory this one replaces (reconciliation's SUPERSEDE): marked superseded
    /// in the same transaction, unless it is immutable, on legal hold or no longer active.
    pub supersedes: Option<MemoryId>,
    /// Why it was stored, for its `created` history entry.
    pub reason: Option<String>,
}

/// An `Idempotency-Key` presented with a write, and a digest of the request it came with.
#[derive(Clone, Debug)]
pub struct IdempotencyClaim {
    pub key: String,
    pub request_fingerprint: String,
}

pub enum InsertOutcome {
    /// The memories were stored; `touched` lists every memory whose index entry must change
    /// (the new ones and any they superseded).
    Inserted {
        memories: Vec<Memory>,
        touched: Vec<MemoryId>,
    },
    /// The same idempotency key and request were seen before: the first answer, verbatim.
    Replayed { status: u16, body: String },
    /// The same idempotency key and request were seen before, but a memory of the first
    /// answer has since been deleted, expired or erased, and its content with the answer:
    /// nothing is written and nothing is replayed.
    AnswerErased,
}

/// A change to an existing memory. `None` leaves a field as it is.
#[derive(Clone, Debug, Default)]
pub struct MemoryPatch {
    /// New content with its embedding.
    pub content: Option<(String, Vec<f32>)>,
    /// With `content`: the generation of the project's space its embedding was computed in.
    pub embedding_generation: i64,
    pub metadata: Option<serde_json::Map<String, serde_json::Value>>,
    pub categories: Option<Vec<String>>,
    /// `Some(None)` clears the expiry.
    pub expires_at: Option<Option<DateTime<Utc>>>,
    pub occurred_at: Option<DateTime<Utc>>,
    /// Who among the project's agents reads it.
    pub visibility: Option<engram_core::Visibility>,
    /// The team a shared memory is shared with; `Some(None)`: every agent again.
    pub shared_with: Option<Option<ExternalId>>,
    pub reason: Option<String>,
}

/// Every memory query starts here, so none can forget the tenant filter.
pub(crate) fn memories_of(scope: &ProjectScope) -> Select<memories::Entity> {
    memories::Entity::find().filter(crate::tenancy::in_project::<memories::Entity>(scope))
}

/// The memories of `scope`: its project's, and for a scope confined to an end-user only that
/// end-user's.
pub(crate) fn owned_memories_of(scope: &MemoryScope) -> Select<memories::Entity> {
    memories::Entity::find().filter(crate::tenancy::within::<memories::Entity>(scope))
}

pub(crate) fn subject_condition(subject: &SubjectFilter) -> Condition {
    let mut condition = Condition::all();
    if let Some(user_id) = &subject.user_id {
        condition = condition.add(memories::Column::UserId.eq(user_id.as_str()));
    }
    if let Some(agent_id) = &subject.agent_id {
        condition = condition.add(memories::Column::AgentId.eq(agent_id.as_str()));
    }
    if let Some(session_id) = &subject.session_id {
        condition = condition.add(memories::Column::SessionId.eq(session_id.as_str()));
    }
    condition
}

pub(crate) fn encode_embedding(vector: &[f32]) -> Vec<u8> {
    vector
        .iter()
        .flat_map(|component| component.to_le_bytes())
        .collect()
}

pub(crate) fn decode_embedding(bytes: &[u8]) -> Vec<f32> {
    bytes
        .as_chunks::<4>()
        .0
        .iter()
        .map(|chunk| f32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]))
        .collect()
}

fn optional_external_id(
    value: Option<String>,
    column: &str,
) -> Result<Option<ExternalId>, StorageError> {
    value
        .map(|text| {
            ExternalId::parse(&text).map_err(|error| {
                StorageError::Internal(format!("stored {column} is invalid: {error}"))
            })
        })
        .transpose()
}

pub(crate) fn memory_from_model(model: memories::Model) -> Result<Memory, StorageError> {
    let corrupt = |column: &str, error: String| {
        StorageError::Internal(format!("stored {column} is invalid: {error}"))
    };
    let metadata = match model.metadata {
        serde_json::Value::Object(map) => map,
        other => {
            return Err(corrupt(
                "metadata",
                format!("expected an object, got {other}"),
            ));
        }
    };
    let categories: Vec<String> = serde_json::from_value(model.categories)
        .map_err(|error| corrupt("categories", error.to_string()))?;
    Ok(Memory {
        id: MemoryId::from_uuid(model.id),
        organization_id: engram_core::OrganizationId::from_uuid(model.organization_id),
        project_id: engram_core::ProjectId::from_uuid(model.project_id),
        user_id: optional_external_id(model.user_id, "user_id")?,
        agent_id: optional_external_id(model.agent_id, "agent_id")?,
        session_id: optional_external_id(model.session_id, "session_id")?,
        kind: model.kind.parse().map_err(|error| corrupt("kind", error))?,
        key: optional_external_id(model.key, "key")?,
        content: model.content,
        metadata,
        categories,
        source: model
            .source
            .parse()
            .map_err(|error| corrupt("source", error))?,
        confidence: model.confidence,
        state: model
            .state
            .parse()
            .map_err(|error| corrupt("state", error))?,
        version: model.version,
        created_at: model.created_at,
        updated_at: model.updated_at,
        occurred_at: model.occurred_at,
        valid_from: model.valid_from,
        valid_to: model.valid_to,
        expires_at: model.expires_at,
        embedding_model: model.embedding_model,
        content_hash: model.content_hash,
        immutable: model.immutable,
        legal_hold: model.legal_hold,
        visibility: model
            .visibility
            .parse()
            .map_err(|error| corrupt("visibility", error))?,
        shared_with: model
            .shared_with
            .map(|team| ExternalId::parse(&team))
            .transpose()
            .map_err(|error| corrupt("shared_with", error))?,
        verified_at: model.verified_at,
        verified_by: model.verified_by,
        content_omitted: false,
    })
}

/// The memory row `memory_id` of `scope`'s project, read inside `transaction`.
async fn memory_row(
    transaction: &crate::WriteTransaction,
    scope: &ProjectScope,
    memory_id: MemoryId,
) -> Result<memories::Model, StorageError> {
    memories_of(scope)
        .filter(memories::Column::Id.eq(memory_id.as_uuid()))
        .one(transaction)
        .await
        .map_err(StorageError::from_db)?
        .ok_or(StorageError::NotFound(NotFoundKind::Memory))
}

/// A change made only while the memory is at `expected` (when given) is a conflict at any
/// other version.
fn expect_version(expected: Option<i64>, current_version: i64) -> Result<(), StorageError> {
    match expected {
        Some(expected) if expected != current_version => {
            Err(StorageError::VersionConflict { current_version })
        }
        _ => Ok(()),
    }
}

/// Immutable and held memories refuse edits and deletes, naming why.
fn refuse_locked(immutable: bool, legal_hold: bool) -> Result<(), StorageError> {
    if legal_hold {
        return Err(StorageError::Refused(
            "the memory is under legal hold: lift the hold before changing or deleting it"
                .to_string(),
        ));
    }
    if immutable {
        return Err(StorageError::Refused(
            "the memory is immutable: it cannot be changed or deleted".to_string(),
        ));
    }
    Ok(())
}

#[expect(clippy::too_many_arguments, reason = "the columns of one history row")]
async fn append_history(
    transaction: &crate::WriteTransaction,
    scope: &ProjectScope,
    memory_id: MemoryId,
    version: i64,
    event: &str,
    content: Option<String>,
    actor: &str,
    reason: Option<String>,
) -> Result<(), StorageError> {
    memory_history::Entity::insert(memory_history::ActiveModel {
        memory_id: Set(memory_id.as_uuid()),
        project_id: Set(scope.project_id().as_uuid()),
        version: Set(version),
        event: Set(event.to_string()),
        content: Set(content),
        actor: Set(actor.to_string()),
        reason: Set(reason),
        at: Set(Utc::now()),
        ..Default::default()
    })
    .exec(transaction)
    .await
    .map_err(StorageError::from_db)?;
    Ok(())
}

/// Record that the index entry of `memory_id` must be brought in line with the database.
async fn enqueue_index_change(
    transaction: &crate::WriteTransaction,
    scope: &ProjectScope,
    memory_id: MemoryId,
) -> Result<(), StorageError> {
    index_outbox::Entity::insert(index_outbox::ActiveModel {
        organization_id: Set(scope.organization_id().as_uuid()),
        project_id: Set(scope.project_id().as_uuid()),
        memory_id: Set(memory_id.as_uuid()),
        created_at: Set(Utc::now()),
        attempts: Set(0),
        last_error: Set(None),
        ..Default::default()
    })
    .exec(transaction)
    .await
    .map_err(StorageError::from_db)?;
    Ok(())
}

/// PostgreSQL: take a transaction-scoped advisory lock for every memory key and the
/// idempotency key this insert touches, in a fixed order (no deadlocks), so concurrent
/// writers of one key take turns instead of failing on the unique index. SQLite needs none:
/// its writers already go one at a time.
async fn lock_write_targets(
    transaction: &crate::WriteTransaction,
    scope: &ProjectScope,
    drafts: &[MemoryDraft],
    idempotency: Option<&IdempotencyClaim>,
) -> Result<(), StorageError> {
    let backend = transaction.get_database_backend();
    if backend != DbBackend::Postgres {
        return Ok(());
    }
    let project = scope.project_id().to_string();
    let mut lock_ids: Vec<i64> = drafts
        .iter()
        .filter_map(|draft| {
            let key = draft.memory.key.as_ref()?;
            Some(advisory_lock_id(&[
                "memory-key",
                &project,
                draft.memory.user_id.as_ref().map_or("", |id| id.as_str()),
                draft.memory.agent_id.as_ref().map_or("", |id| id.as_str()),
                key.as_str(),
            ]))
        })
        .collect();
    if let Some(claim) = idempotency {
        lock_ids.push(advisory_lock_id(&["idempotency-key", &project, &claim.key]));
    }
    lock_ids.sort_unstable();
    lock_ids.dedup();
    for lock_id in lock_ids {
        transaction
            .execute(Statement::from_sql_and_values(
                backend,
                "SELECT pg_advisory_xact_lock($1)",
                [lock_id.into()],
            ))
            .await
            .map_err(StorageError::from_db)?;
    }
    Ok(())
}

/// A 64-bit lock id from the parts (length-prefixed, so ("ab","c") and ("a","bc") differ).
fn advisory_lock_id(parts: &[&str]) -> i64 {
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update((part.len() as u64).to_le_bytes());
        hasher.update(part.as_bytes());
    }
    let digest = hasher.finalize();
    let mut first_eight = [0u8; 8];
    first_eight.copy_from_slice(&digest[..8]);
    i64::from_le_bytes(first_eight)
}

/// Mark the active memory with the same (user, agent, key) as superseded.
async fn supersede_active_with_key(
    transaction: &crate::WriteTransaction,
    scope: &ProjectScope,
    draft: &MemoryDraft,
    key: &ExternalId,
    superseded_by: MemoryId,
    actor: &str,
    now: DateTime<Utc>,
) -> Result<Option<MemoryId>, StorageError> {
    let mut query = memories_of(scope)
        .filter(memories::Column::State.eq(MemoryState::Active.as_str()))
        .filter(memories::Column::Key.eq(key.as_str()));
    query = match &draft.memory.user_id {
        Some(user_id) => query.filter(memories::Column::UserId.eq(user_id.as_str())),
        None => query.filter(memories::Column::UserId.is_null()),
    };
    query = match &draft.memory.agent_id {
        Some(agent_id) => query.filter(memories::Column::AgentId.eq(agent_id.as_str())),
        None => query.filter(memories::Column::AgentId.is_null()),
    };
    let Some(previous) = query
        .one(transaction)
        .await
        .map_err(StorageError::from_db)?
    else {
        return Ok(None);
    };
    // A locked memory is not replaced by a write that names its key: the write is refused
    // (and the whole add with it), the locked memory stays active.
    if previous.legal_hold || previous.immutable {
        let lock = if previous.legal_hold {
            "is under legal hold: lift the hold before replacing it"
        } else {
            "is immutable: it cannot be replaced"
        };
        return Err(StorageError::Refused(format!(
            "the active memory {} with key {:?} {lock}",
            previous.id,
            key.as_str()
        )));
    }
    mark_superseded(
        transaction,
        scope,
        previous,
        actor,
        now,
        format!("superseded by {superseded_by} (same key {key:?})"),
    )
    .await
    .map(Some)
}

/// Mark one named active memory superseded (reconciliation decided the new memory replaces
/// it); an immutable or held memory, or one no longer active, is left alone.
async fn supersede_named_memory(
    transaction: &crate::WriteTransaction,
    scope: &ProjectScope,
    target: MemoryId,
    superseded_by: MemoryId,
    actor: &str,
    now: DateTime<Utc>,
    reason: Option<&str>,
) -> Result<Option<MemoryId>, StorageError> {
    let Some(previous) = memories_of(scope)
        .filter(memories::Column::Id.eq(target.as_uuid()))
        .filter(memories::Column::State.eq(MemoryState::Active.as_str()))
        .filter(memories::Column::Immutable.eq(false))
        .filter(memories::Column::LegalHold.eq(false))
        .one(transaction)
        .await
        .map_err(StorageError::from_db)?
    else {
        return Ok(None);
    };
    let why = match reason {
        Some(reason) => format!("superseded by {superseded_by}: {reason}"),
        None => format!("superseded by {superseded_by}"),
    };
    mark_superseded(transaction, scope, previous, actor, now, why)
        .await
        .map(Some)
}

async fn mark_superseded(
    transaction: &crate::WriteTransaction,
    scope: &ProjectScope,
    previous: memories::Model,
    actor: &str,
    now: DateTime<Utc>,
    reason: String,
) -> Result<MemoryId, StorageError> {
    let next_version = previous.version + 1;
    // Only while it is still active and unlocked: a hold set since it was read (PostgreSQL
    // reads committed data) refuses the write rather than being superseded.
    let updated = memories::Entity::update_many()
        .col_expr(
            memories::Column::State,
            Expr::value(MemoryState::Superseded.as_str()),
        )
        .col_expr(memories::Column::ValidTo, Expr::value(now))
        .col_expr(memories::Column::UpdatedAt, Expr::value(now))
        .col_expr(memories::Column::Version, Expr::value(next_version))
        .filter(crate::tenancy::in_project::<memories::Entity>(scope))
        .filter(memories::Column::Id.eq(previous.id))
        .filter(memories::Column::Version.eq(previous.version))
        .filter(memories::Column::State.eq(MemoryState::Active.as_str()))
        .filter(memories::Column::Immutable.eq(false))
        .filter(memories::Column::LegalHold.eq(false))
        .exec(transaction)
        .await
        .map_err(StorageError::from_db)?;
    if updated.rows_affected == 0 {
        return Err(StorageError::Refused(format!(
            "the memory {} was locked or changed while it was being replaced",
            previous.id
        )));
    }
    let previous_id = MemoryId::from_uuid(previous.id);
    append_history(
        transaction,
        scope,
        previous_id,
        next_version,
        "superseded",
        None,
        actor,
        Some(reason),
    )
    .await?;
    enqueue_index_change(transaction, scope, previous_id).await?;
    Ok(previous_id)
}

impl Storage {
    /// Store new memories in one transaction: each with a `created` history entry and an
    /// outbox entry; keyed ones supersede the active memory with the same key. With an
    /// idempotency claim, a repeated request returns the first answer and writes nothing.
    pub async fn insert_memories(
        &self,
        scope: &ProjectScope,
        drafts: Vec<MemoryDraft>,
        actor: &Actor,
        idempotency: Option<IdempotencyClaim>,
        render_response: impl Fn(&[Memory]) -> (u16, String) + Send + Sync,
    ) -> Result<InsertOutcome, StorageError> {
        // PostgreSQL writers of the same key or idempotency key queue on advisory locks (see
        // `lock_write_targets`), so a conflict on a unique index is rare: only two brand-new
        // keys racing. A retry then sees the winner's committed rows. SQLite's write gate
        // makes conflicts impossible.
        const ATTEMPTS: u32 = 5;
        for attempt in 1..=ATTEMPTS {
            match self
                .try_insert_memories(
                    scope,
                    &drafts,
                    actor,
                    idempotency.as_ref(),
                    &render_response,
                )
                .await
            {
                Err(StorageError::WriteConflict(conflict)) if attempt < ATTEMPTS => {
                    tracing::debug!(attempt, %conflict, "insert conflicted with a concurrent writer; retrying");
                    tokio::time::sleep(std::time::Duration::from_millis(u64::from(attempt) * 5))
                        .await;
                }
                other => return other,
            }
        }
        Err(StorageError::Internal(
            "insert kept conflicting with concurrent writers".to_string(),
        ))
    }

    async fn try_insert_memories(
        &self,
        scope: &ProjectScope,
        drafts: &[MemoryDraft],
        actor: &Actor,
        idempotency: Option<&IdempotencyClaim>,
        render_response: &(impl Fn(&[Memory]) -> (u16, String) + Send + Sync),
    ) -> Result<InsertOutcome, StorageError> {
        let _permit = self.write_permit().await;
        let transaction = self.begin_write().await?;
        lock_write_targets(&transaction, scope, drafts, idempotency).await?;
        if let Some(claim) = idempotency {
            let previous = idempotency_records::Entity::find_by_id((
                scope.project_id().as_uuid(),
                claim.key.clone(),
            ))
            .one(&transaction)
            .await
            .map_err(StorageError::from_db)?;
            if let Some(previous) = previous {
                if previous.request_fingerprint != claim.request_fingerprint {
                    return Err(StorageError::IdempotencyKeyReused);
                }
                if previous.response_status == crate::idempotency::ERASED_ANSWER_STATUS {
                    return Ok(InsertOutcome::AnswerErased);
                }
                let status = u16::try_from(previous.response_status).unwrap_or(201);
                return Ok(InsertOutcome::Replayed {
                    status,
                    body: previous.response_body,
                });
            }
        }
        // After the replay: a repeated request that succeeded before the switch is answered.
        for generation in drafts
            .iter()
            .map(|draft| draft.embedding_generation)
            .collect::<std::collections::BTreeSet<_>>()
        {
            crate::reembedding::check_embedding_generation(&transaction, scope, generation).await?;
        }
        // Microseconds, as PostgreSQL keeps them and filters compare them (SQLite would keep
        // nanoseconds the index and the filter language do not).
        let now = to_micros(Utc::now());
        let mut stored = Vec::with_capacity(drafts.len());
        let mut touched = Vec::with_capacity(drafts.len());
        let mut superseded = Vec::new();
        for draft in drafts {
            let memory_id = MemoryId::generate();
            let Some(asked_visibility) = draft.memory.visibility else {
                return Err(StorageError::Internal(
                    "a memory to store names no visibility: the engine resolves it first"
                        .to_string(),
                ));
            };
            let mut replaced = Vec::new();
            if let Some(key) = &draft.memory.key
                && let Some(previous_id) = supersede_active_with_key(
                    &transaction,
                    scope,
                    draft,
                    key,
                    memory_id,
                    &actor.label(),
                    now,
                )
                .await?
            {
                touched.push(previous_id);
                superseded.push(previous_id.to_string());
                replaced.push(previous_id.as_uuid());
            }
            if let Some(target) = draft.supersedes
                && let Some(previous_id) = supersede_named_memory(
                    &transaction,
                    scope,
                    target,
                    memory_id,
                    &actor.label(),
                    now,
                    draft.reason.as_deref(),
                )
                .await?
            {
                touched.push(previous_id);
                superseded.push(previous_id.to_string());
                replaced.push(previous_id.as_uuid());
            }
            // A replacement of a private memory stays private, and one of a memory shared
            // with a team stays within the team: its words may carry the old.
            let replaced_sharing: Vec<(String, Option<String>)> = if replaced.is_empty() {
                Vec::new()
            } else {
                memories_of(scope)
                    .select_only()
                    .column(memories::Column::Visibility)
                    .column(memories::Column::SharedWith)
                    .filter(memories::Column::Id.is_in(replaced))
                    .into_tuple()
                    .all(&transaction)
                    .await
                    .map_err(StorageError::from_db)?
            };
            let replaces_private = draft.memory.agent_id.is_some()
                && replaced_sharing
                    .iter()
                    .any(|(visibility, _)| visibility == Visibility::Private.as_str());
            let (visibility, shared_with) = match replaces_private {
                true => (Visibility::Private, None),
                false if asked_visibility == Visibility::Private => (Visibility::Private, None),
                // The team of what it replaces wins over the one asked: a write cannot move
                // words a team was given to another team.
                false => (
                    asked_visibility,
                    replaced_sharing
                        .iter()
                        .find_map(|(_, shared_with)| shared_with.clone())
                        .or_else(|| {
                            draft
                                .memory
                                .shared_with
                                .as_ref()
                                .map(|team| team.as_str().to_string())
                        }),
                ),
            };
            let model = memories::ActiveModel {
                id: Set(memory_id.as_uuid()),
                organization_id: Set(scope.organization_id().as_uuid()),
                project_id: Set(scope.project_id().as_uuid()),
                user_id: Set(draft
                    .memory
                    .user_id
                    .as_ref()
                    .map(|id| id.as_str().to_string())),
                agent_id: Set(draft
                    .memory
                    .agent_id
                    .as_ref()
                    .map(|id| id.as_str().to_string())),
                session_id: Set(draft
                    .memory
                    .session_id
                    .as_ref()
                    .map(|id| id.as_str().to_string())),
                kind: Set(draft.memory.kind.as_str().to_string()),
                key: Set(draft.memory.key.as_ref().map(|id| id.as_str().to_string())),
                content: Set(draft.memory.content.clone()),
                metadata: Set(serde_json::Value::Object(draft.memory.metadata.clone())),
                categories: Set(serde_json::json!(draft.memory.categories)),
                source: Set(draft.memory.source.as_str().to_string()),
                confidence: Set(draft.memory.confidence),
                state: Set(MemoryState::Active.as_str().to_string()),
                version: Set(1),
                created_at: Set(now),
                updated_at: Set(now),
                occurred_at: Set(draft.memory.occurred_at.map(to_micros).unwrap_or(now)),
                valid_from: Set(now),
                valid_to: Set(None),
                expires_at: Set(draft.memory.expires_at),
                embedding_model: Set(draft.embedding_model.clone()),
                embedding: Set(encode_embedding(&draft.embedding)),
                content_hash: Set(content_digest(&draft.memory.content)),
                immutable: Set(false),
                legal_hold: Set(false),
                visibility: Set(visibility.as_str().to_string()),
                shared_with: Set(shared_with),
                verified_at: Set(None),
                verified_by: Set(None),
            };
            let inserted = memories::Entity::insert(model)
                .exec_with_returning(&transaction)
                .await
                .map_err(|error| {
                    if is_unique_violation(&error) {
                        StorageError::WriteConflict(error.to_string())
                    } else {
                        StorageError::from_db(error)
                    }
                })?;
            append_history(
                &transaction,
                scope,
                memory_id,
                1,
                "created",
                Some(draft.memory.content.clone()),
                &actor.label(),
                draft.reason.clone(),
            )
            .await?;
            enqueue_index_change(&transaction, scope, memory_id).await?;
            touched.push(memory_id);
            stored.push(memory_from_model(inserted)?);
        }
        append_audit_event(
            &transaction,
            scope.organization_id(),
            Some(scope),
            actor,
            &NewAuditEvent::success(
                AuditAction::MemoryCreated,
                stored.iter().map(|memory| memory.id.to_string()).collect(),
                serde_json::json!({
                    "content_sha256": stored
                        .iter()
                        .map(|memory| content_digest(&memory.content))
                        .collect::<Vec<_>>(),
                    "superseded": superseded,
                }),
            ),
        )
        .await?;
        if let Some(claim) = idempotency {
            let (status, body) = render_response(&stored);
            idempotency_records::Entity::insert(idempotency_records::ActiveModel {
                project_id: Set(scope.project_id().as_uuid()),
                idempotency_key: Set(claim.key.clone()),
                request_fingerprint: Set(claim.request_fingerprint.clone()),
                response_status: Set(i32::from(status)),
                response_body: Set(body),
                created_at: Set(now),
                indexed: Set(true),
            })
            .exec(&transaction)
            .await
            .map_err(|error| {
                if is_unique_violation(&error) {
                    StorageError::WriteConflict(format!("idempotency key: {error}"))
                } else {
                    StorageError::from_db(error)
                }
            })?;
            // Listed by memory and end-user: deletes and erasure find this answer by index.
            let named: Vec<(uuid::Uuid, Option<String>)> = stored
                .iter()
                .map(|memory| {
                    (
                        memory.id.as_uuid(),
                        memory
                            .user_id
                            .as_ref()
                            .map(|user| user.as_str().to_string()),
                    )
                })
                .collect();
            crate::idempotency::record_answer_memories(
                &transaction,
                scope.project_id().as_uuid(),
                &claim.key,
                &named,
            )
            .await?;
        }
        transaction.commit().await.map_err(StorageError::from_db)?;
        Ok(InsertOutcome::Inserted {
            memories: stored,
            touched,
        })
    }

    /// The memory, in any state; `NotFound` for another project's or, for a scope confined
    /// to an end-user, another end-user's.
    pub async fn get_memory(
        &self,
        scope: &MemoryScope,
        memory_id: MemoryId,
    ) -> Result<Memory, StorageError> {
        let found = owned_memories_of(scope)
            .filter(memories::Column::Id.eq(memory_id.as_uuid()))
            .one(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        match found {
            Some(model) => memory_from_model(model),
            None => Err(StorageError::NotFound(NotFoundKind::Memory)),
        }
    }

    /// One page of memories, newest first (for a scope confined to an end-user, only that
    /// end-user's).
    pub async fn list_memories(
        &self,
        scope: &MemoryScope,
        filter: &MemoryListFilter,
    ) -> Result<MemoryPage, StorageError> {
        let mut query = self.memories_matching(scope, filter);
        if let Some(after) = filter.after {
            query = query.filter(memories::Column::Id.lt(after.as_uuid()));
        }
        let limit = filter.limit.max(1);
        let mut models = query
            .order_by_desc(memories::Column::Id)
            .limit(limit + 1)
            .all(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        let has_more = models.len() as u64 > limit;
        models.truncate(limit as usize);
        let memories = models
            .into_iter()
            .map(memory_from_model)
            .collect::<Result<Vec<_>, _>>()?;
        let next_cursor = if has_more {
            memories.last().map(|memory| memory.id)
        } else {
            None
        };
        Ok(MemoryPage {
            memories,
            next_cursor,
        })
    }

    /// How many memories `filter` matches (its cursor and limit aside).
    pub async fn count_memories(
        &self,
        scope: &MemoryScope,
        filter: &MemoryListFilter,
    ) -> Result<u64, StorageError> {
        sea_orm::PaginatorTrait::count(self.memories_matching(scope, filter), &self.connection)
            .await
            .map_err(StorageError::from_db)
    }

    /// The ids of at most `limit` memories `filter` matches, newest first (its cursor and
    /// limit aside).
    pub async fn memory_ids_matching(
        &self,
        scope: &MemoryScope,
        filter: &MemoryListFilter,
        limit: u64,
    ) -> Result<Vec<MemoryId>, StorageError> {
        let ids: Vec<uuid::Uuid> = self
            .memories_matching(scope, filter)
            .select_only()
            .column(memories::Column::Id)
            .order_by_desc(memories::Column::Id)
            .limit(limit)
            .into_tuple()
            .all(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        Ok(ids.into_iter().map(MemoryId::from_uuid).collect())
    }

    /// The end-users with memories whose id starts with `id_prefix` (exactly, case
    /// included) and with at least one memory `tree` matches, by id, each with how many of
    /// their memories match; at most `limit`.
    pub async fn subjects_matching(
        &self,
        scope: &MemoryScope,
        id_prefix: Option<&str>,
        tree: &MemoryFilter,
        limit: u64,
    ) -> Result<Vec<(String, u64)>, StorageError> {
        let mut query = owned_memories_of(scope).filter(memories::Column::UserId.is_not_null());
        if let Some(prefix) = id_prefix.filter(|prefix| !prefix.is_empty()) {
            // `substr` rather than LIKE: the same on both databases (SQLite's LIKE folds
            // case, PostgreSQL's does not) and no wildcard to escape. The length is ours.
            let length = prefix.chars().count();
            query = query.filter(crate::memory_filter_sql::custom(
                self.connection.get_database_backend(),
                format!("substr(\"memories\".\"user_id\", 1, {length}) = ?"),
                [prefix.to_string()],
            ));
        }
        if !tree.is_everything() {
            query = query.filter(crate::memory_filter_sql::memory_filter_condition(
                tree,
                self.connection.get_database_backend(),
            ));
        }
        let rows: Vec<(String, i64)> = query
            .select_only()
            .column(memories::Column::UserId)
            .column_as(memories::Column::Id.count(), "matching")
            .group_by(memories::Column::UserId)
            .order_by_asc(memories::Column::UserId)
            .limit(limit)
            .into_tuple()
            .all(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        Ok(rows
            .into_iter()
            .map(|(user_id, matching)| (user_id, u64::try_from(matching).unwrap_or(0)))
            .collect())
    }

    /// The memories of `scope` that `filter` matches, cursor and limit aside.
    fn memories_matching(
        &self,
        scope: &MemoryScope,
        filter: &MemoryListFilter,
    ) -> Select<memories::Entity> {
        let state = filter.state.unwrap_or(MemoryState::Active);
        let mut query = owned_memories_of(scope)
            .filter(memories::Column::State.eq(state.as_str()))
            .filter(subject_condition(&filter.subject));
        if let Some(kind) = filter.kind {
            query = query.filter(memories::Column::Kind.eq(kind.as_str()));
        }
        if !filter.tree.is_everything() {
            query = query.filter(crate::memory_filter_sql::memory_filter_condition(
                &filter.tree,
                self.connection.get_database_backend(),
            ));
        }
        if let Some(source) = filter.source {
            query = query.filter(memories::Column::Source.eq(source.as_str()));
        }
        if let Some(from) = filter.created_from {
            query = query.filter(memories::Column::CreatedAt.gte(from));
        }
        if let Some(to) = filter.created_to {
            query = query.filter(memories::Column::CreatedAt.lt(to));
        }
        if let Some(category) = filter.category.as_deref().filter(|c| !c.is_empty()) {
            // Categories are a JSON array of strings: match the quoted element in its text.
            let element = serde_json::Value::String(category.to_string()).to_string();
            let escaped = element
                .replace('\\', "\\\\")
                .replace('%', "\\%")
                .replace('_', "\\_");
            query = query.filter(
                Expr::col(memories::Column::Categories)
                    .cast_as(sea_orm::sea_query::Alias::new("text"))
                    .like(LikeExpr::new(format!("%{escaped}%")).escape('\\')),
            );
        }
        if let Some(text) = filter
            .text_contains
            .as_deref()
            .filter(|text| !text.is_empty())
        {
            let escaped = text
                .to_lowercase()
                .replace('\\', "\\\\")
                .replace('%', "\\%")
                .replace('_', "\\_");
            let pattern = format!("%{escaped}%");
            let like = |column: memories::Column| {
                Expr::expr(Func::lower(Expr::col(column)))
                    .like(LikeExpr::new(pattern.clone()).escape('\\'))
            };
            query = query.filter(
                Condition::any()
                    .add(like(memories::Column::Content))
                    .add(like(memories::Column::UserId)),
            );
        }
        query
    }

    /// Apply a patch. With `expected_version`, a mismatch is a conflict and changes nothing.
    pub async fn update_memory(
        &self,
        scope: &ProjectScope,
        memory_id: MemoryId,
        patch: MemoryPatch,
        expected_version: Option<i64>,
        actor: &Actor,
    ) -> Result<(Memory, MemoryId), StorageError> {
        let _permit = self.write_permit().await;
        let transaction = self.begin_write().await?;
        if patch.content.is_some() {
            crate::reembedding::check_embedding_generation(
                &transaction,
                scope,
                patch.embedding_generation,
            )
            .await?;
        }
        let current = memory_row(&transaction, scope, memory_id).await?;
        expect_version(expected_version, current.version)?;
        refuse_locked(current.immutable, current.legal_hold)?;
        // Microseconds, as PostgreSQL keeps them and filters compare them (SQLite would keep
        // nanoseconds the index and the filter language do not).
        let now = to_micros(Utc::now());
        let next_version = current.version + 1;
        let mut update = memories::Entity::update_many()
            .col_expr(memories::Column::Version, Expr::value(next_version))
            .col_expr(memories::Column::UpdatedAt, Expr::value(now));
        let mut history_content = None;
        if let Some((content, embedding)) = &patch.content {
            update = update
                .col_expr(memories::Column::Content, Expr::value(content.clone()))
                .col_expr(
                    memories::Column::ContentHash,
                    Expr::value(content_digest(content)),
                )
                .col_expr(
                    memories::Column::Embedding,
                    Expr::value(encode_embedding(embedding)),
                );
            history_content = Some(content.clone());
        }
        if let Some(metadata) = &patch.metadata {
            update = update.col_expr(
                memories::Column::Metadata,
                Expr::value(serde_json::Value::Object(metadata.clone())),
            );
        }
        if let Some(categories) = &patch.categories {
            update = update.col_expr(
                memories::Column::Categories,
                Expr::value(serde_json::json!(categories)),
            );
        }
        if let Some(expires_at) = patch.expires_at {
            update = update.col_expr(memories::Column::ExpiresAt, Expr::value(expires_at));
        }
        if let Some(occurred_at) = patch.occurred_at {
            update = update.col_expr(
                memories::Column::OccurredAt,
                Expr::value(to_micros(occurred_at)),
            );
        }
        if let Some(visibility) = patch.visibility {
            update = update.col_expr(
                memories::Column::Visibility,
                Expr::value(visibility.as_str()),
            );
        }
        if let Some(shared_with) = &patch.shared_with {
            update = update.col_expr(
                memories::Column::SharedWith,
                Expr::value(shared_with.as_ref().map(|team| team.as_str().to_string())),
            );
        }
        // A verification vouched for what the memory said: a change of what it says (its
        // words, metadata, categories or time) is unverified until someone vouches again.
        let changes_what_it_says = patch.content.is_some()
            || patch.metadata.is_some()
            || patch.categories.is_some()
            || patch.occurred_at.is_some();
        let withdraws_verification = changes_what_it_says && current.verified_at.is_some();
        if withdraws_verification {
            update = update
                .col_expr(
                    memories::Column::VerifiedAt,
                    Expr::value(Option::<DateTime<Utc>>::None),
                )
                .col_expr(
                    memories::Column::VerifiedBy,
                    Expr::value(Option::<String>::None),
                );
        }
        // The version guard makes a concurrent patch that slipped in between lose cleanly.
        let result = update
            .filter(crate::tenancy::in_project::<memories::Entity>(scope))
            .filter(memories::Column::Id.eq(memory_id.as_uuid()))
            .filter(memories::Column::Version.eq(current.version))
            .exec(&transaction)
            .await
            .map_err(StorageError::from_db)?;
        if result.rows_affected != 1 {
            return Err(StorageError::VersionConflict {
                current_version: current.version,
            });
        }
        append_history(
            &transaction,
            scope,
            memory_id,
            next_version,
            "updated",
            history_content,
            &actor.label(),
            patch.reason.clone(),
        )
        .await?;
        let mut changed_fields = Vec::new();
        for (field, changed) in [
            ("content", patch.content.is_some()),
            ("metadata", patch.metadata.is_some()),
            ("categories", patch.categories.is_some()),
            ("expires_at", patch.expires_at.is_some()),
            ("occurred_at", patch.occurred_at.is_some()),
            ("visibility", patch.visibility.is_some()),
            ("shared_with", patch.shared_with.is_some()),
        ] {
            if changed {
                changed_fields.push(field);
            }
        }
        append_audit_event(
            &transaction,
            scope.organization_id(),
            Some(scope),
            actor,
            &NewAuditEvent::success(
                AuditAction::MemoryUpdated,
                vec![memory_id.to_string()],
                serde_json::json!({
                    "version": next_version,
                    "fields": changed_fields,
                    "content_sha256": patch.content.as_ref().map(|(content, _)| content_digest(content)),
                    "visibility": patch.visibility.map(|visibility| {
                        serde_json::json!({ "from": current.visibility, "to": visibility.as_str() })
                    }),
                    "shared_with": patch.shared_with.as_ref().map(|shared_with| {
                        serde_json::json!({
                            "from": current.shared_with,
                            "to": shared_with.as_ref().map(ExternalId::as_str),
                        })
                    }),
                    "verification_withdrawn": withdraws_verification,
                    "reason_given": patch.reason.is_some(),
                }),
            ),
        )
        .await?;
        enqueue_index_change(&transaction, scope, memory_id).await?;
        let updated = memory_row(&transaction, scope, memory_id).await?;
        transaction.commit().await.map_err(StorageError::from_db)?;
        Ok((memory_from_model(updated)?, memory_id))
    }

    /// Mark an active memory verified by `actor` (`verified`), or withdraw its verification:
    /// a new version, a history entry naming who and why, an audit event, and the index
    /// told through the outbox. Verifying vouches for what it says and changes none of it,
    /// so it is open to immutable and held memories too.
    pub async fn set_memory_verification(
        &self,
        scope: &ProjectScope,
        memory_id: MemoryId,
        verified: bool,
        expected_version: Option<i64>,
        reason: &str,
        actor: &Actor,
    ) -> Result<Memory, StorageError> {
        let _permit = self.write_permit().await;
        let transaction = self.begin_write().await?;
        let current = memories_of(scope)
            .filter(memories::Column::Id.eq(memory_id.as_uuid()))
            .filter(memories::Column::State.eq(MemoryState::Active.as_str()))
            .one(&transaction)
            .await
            .map_err(StorageError::from_db)?
            .ok_or(StorageError::NotFound(NotFoundKind::Memory))?;
        // The reviewer vouches for the version it read, not one written since.
        expect_version(expected_version, current.version)?;
        let now = to_micros(Utc::now());
        let next_version = current.version + 1;
        let (verified_at, verified_by) = match verified {
            true => (Some(now), Some(actor.label())),
            false => (None, None),
        };
        let result = memories::Entity::update_many()
            .col_expr(memories::Column::Version, Expr::value(next_version))
            .col_expr(memories::Column::UpdatedAt, Expr::value(now))
            .col_expr(memories::Column::VerifiedAt, Expr::value(verified_at))
            .col_expr(memories::Column::VerifiedBy, Expr::value(verified_by))
            .filter(crate::tenancy::in_project::<memories::Entity>(scope))
            .filter(memories::Column::Id.eq(memory_id.as_uuid()))
            .filter(memories::Column::Version.eq(current.version))
            .exec(&transaction)
            .await
            .map_err(StorageError::from_db)?;
        if result.rows_affected != 1 {
            return Err(StorageError::VersionConflict {
                current_version: current.version,
            });
        }
        let action = if verified { "verified" } else { "unverified" };
        append_history(
            &transaction,
            scope,
            memory_id,
            next_version,
            action,
            None,
            &actor.label(),
            Some(reason.to_string()),
        )
        .await?;
        append_audit_event(
            &transaction,
            scope.organization_id(),
            Some(scope),
            actor,
            &NewAuditEvent::success(
                AuditAction::MemoryVerified,
                vec![memory_id.to_string()],
                serde_json::json!({ "version": next_version, "verified": verified }),
            ),
        )
        .await?;
        enqueue_index_change(&transaction, scope, memory_id).await?;
        let updated = memory_row(&transaction, scope, memory_id).await?;
        transaction.commit().await.map_err(StorageError::from_db)?;
        memory_from_model(updated)
    }

    /// Remove a memory and all its content, history text included, leaving a content-free
    /// tombstone (ids, last version, time). The index entry is removed through the outbox.
    pub async fn delete_memory(
        &self,
        scope: &ProjectScope,
        memory_id: MemoryId,
        actor: &Actor,
    ) -> Result<(), StorageError> {
        self.delete_memory_with_reason(scope, memory_id, None, actor)
            .await
    }

    /// [`Storage::delete_memory`] with the reason a person gave (kept in the audit event).
    pub async fn delete_memory_with_reason(
        &self,
        scope: &ProjectScope,
        memory_id: MemoryId,
        reason: Option<&str>,
        actor: &Actor,
    ) -> Result<(), StorageError> {
        let _permit = self.write_permit().await;
        let transaction = self.begin_write().await?;
        let Some((last_version, immutable, legal_hold)) = memories_of(scope)
            .select_only()
            .column(memories::Column::Version)
            .column(memories::Column::Immutable)
            .column(memories::Column::LegalHold)
            .filter(memories::Column::Id.eq(memory_id.as_uuid()))
            .into_tuple::<(i64, bool, bool)>()
            .one(&transaction)
            .await
            .map_err(StorageError::from_db)?
        else {
            return Err(StorageError::NotFound(NotFoundKind::Memory));
        };
        refuse_locked(immutable, legal_hold)?;
        let deleted = memories::Entity::delete_many()
            .filter(crate::tenancy::in_project::<memories::Entity>(scope))
            .filter(memories::Column::Id.eq(memory_id.as_uuid()))
            .exec(&transaction)
            .await
            .map_err(StorageError::from_db)?;
        if deleted.rows_affected == 0 {
            return Err(StorageError::NotFound(NotFoundKind::Memory));
        }
        memory_tombstones::Entity::insert(memory_tombstones::ActiveModel {
            memory_id: Set(memory_id.as_uuid()),
            organization_id: Set(scope.organization_id().as_uuid()),
            project_id: Set(scope.project_id().as_uuid()),
            last_version: Set(last_version),
            deleted_at: Set(Utc::now()),
        })
        .exec(&transaction)
        .await
        .map_err(StorageError::from_db)?;
        memory_history::Entity::delete_many()
            .filter(crate::tenancy::in_project::<memory_history::Entity>(scope))
            .filter(memory_history::Column::MemoryId.eq(memory_id.as_uuid()))
            .exec(&transaction)
            .await
            .map_err(StorageError::from_db)?;
        append_audit_event(
            &transaction,
            scope.organization_id(),
            Some(scope),
            actor,
            &NewAuditEvent::success(
                AuditAction::MemoryDeleted,
                vec![memory_id.to_string()],
                serde_json::json!({ "last_version": last_version, "reason": reason }),
            ),
        )
        .await?;
        crate::idempotency::erase_idempotency_answers(&transaction, scope, &[memory_id.as_uuid()])
            .await?;
        enqueue_index_change(&transaction, scope, memory_id).await?;
        transaction.commit().await.map_err(StorageError::from_db)?;
        Ok(())
    }

    /// Record, without applying it, a deletion that was decided for a credential that may not
    /// delete (an LLM's DELETE, a correction that deletes, for a key without
    /// `memories:delete`): a `delete_proposed` entry in the memory's history with the
    /// reason, for someone who may delete to act on. The memory itself is unchanged.
    pub async fn record_delete_proposal(
        &self,
        scope: &ProjectScope,
        memory_id: MemoryId,
        reason: &str,
        actor: &Actor,
    ) -> Result<(), StorageError> {
        let _permit = self.write_permit().await;
        let transaction = self.begin_write().await?;
        let version = memories_of(scope)
            .select_only()
            .column(memories::Column::Version)
            .filter(memories::Column::Id.eq(memory_id.as_uuid()))
            .into_tuple::<i64>()
            .one(&transaction)
            .await
            .map_err(StorageError::from_db)?
            .ok_or(StorageError::NotFound(NotFoundKind::Memory))?;
        append_history(
            &transaction,
            scope,
            memory_id,
            version,
            "delete_proposed",
            None,
            &actor.label(),
            Some(reason.to_string()),
        )
        .await?;
        transaction.commit().await.map_err(StorageError::from_db)?;
        Ok(())
    }

    /// The tombstone of a deleted memory of `scope`'s project: its last version and when it
    /// was deleted (nothing else is kept). `None` for a live, unknown or purged id.
    pub async fn memory_tombstone(
        &self,
        scope: &ProjectScope,
        memory_id: MemoryId,
    ) -> Result<Option<(i64, DateTime<Utc>)>, StorageError> {
        let tombstone = memory_tombstones::Entity::find()
            .filter(crate::tenancy::in_project::<memory_tombstones::Entity>(
                scope,
            ))
            .filter(memory_tombstones::Column::MemoryId.eq(memory_id.as_uuid()))
            .one(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        Ok(tombstone.map(|tombstone| (tombstone.last_version, tombstone.deleted_at)))
    }

    /// Which of `ids` were deleted from `scope`'s project (tombstone still kept).
    pub async fn tombstoned_memory_ids(
        &self,
        scope: &ProjectScope,
        ids: &[MemoryId],
    ) -> Result<std::collections::HashSet<MemoryId>, StorageError> {
        if ids.is_empty() {
            return Ok(std::collections::HashSet::new());
        }
        let rows: Vec<uuid::Uuid> = memory_tombstones::Entity::find()
            .select_only()
            .column(memory_tombstones::Column::MemoryId)
            .filter(crate::tenancy::in_project::<memory_tombstones::Entity>(
                scope,
            ))
            .filter(memory_tombstones::Column::MemoryId.is_in(ids.iter().map(|id| id.as_uuid())))
            .into_tuple()
            .all(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        Ok(rows.into_iter().map(MemoryId::from_uuid).collect())
    }

    /// The memory's changes, oldest first; `NotFound` like [`Self::get_memory`].
    pub async fn memory_history(
        &self,
        memory_scope: &MemoryScope,
        memory_id: MemoryId,
    ) -> Result<Vec<HistoryEntry>, StorageError> {
        // Existence first, so an id of another project (or end-user) and a deleted id both
        // answer NotFound.
        self.get_memory(memory_scope, memory_id).await?;
        let scope = memory_scope.project();
        let rows = memory_history::Entity::find()
            .filter(crate::tenancy::in_project::<memory_history::Entity>(scope))
            .filter(memory_history::Column::MemoryId.eq(memory_id.as_uuid()))
            .order_by_asc(memory_history::Column::Id)
            .all(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        Ok(rows
            .into_iter()
            .map(|row| HistoryEntry {
                version: row.version,
                event: row.event,
                content: row.content,
                actor: row.actor,
                reason: row.reason,
                at: row.at,
            })
            .collect())
    }

    /// The active memories among `ids`: search results are hydrated from here, so anything
    /// deleted or superseded is dropped even while the index lags.
    pub async fn active_memories_by_id(
        &self,
        scope: &ProjectScope,
        ids: &[MemoryId],
    ) -> Result<HashMap<MemoryId, Memory>, StorageError> {
        if ids.is_empty() {
            return Ok(HashMap::new());
        }
        let models = memories_of(scope)
            .filter(memories::Column::State.eq(MemoryState::Active.as_str()))
            .filter(memories::Column::Id.is_in(ids.iter().map(|id| id.as_uuid())))
            .all(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        models
            .into_iter()
            .map(|model| memory_from_model(model).map(|memory| (memory.id, memory)))
            .collect()
    }

    /// Mark `merged` superseded by `kept` in one transaction (consolidation found them to say
    /// the same), each with `reason` in its history; their index points are removed through
    /// the outbox. Immutable, held and no-longer-active ones are left as they are. Returns
    /// the ids actually superseded.
    pub async fn supersede_memories_by(
        &self,
        scope: &ProjectScope,
        kept: MemoryId,
        merged: &[MemoryId],
        reason: &str,
        actor: &Actor,
    ) -> Result<Vec<MemoryId>, StorageError> {
        if merged.is_empty() {
            return Ok(Vec::new());
        }
        let _permit = self.write_permit().await;
        let transaction = self.begin_write().await?;
        let now = Utc::now();
        let mut superseded = Vec::with_capacity(merged.len());
        for target in merged {
            if *target == kept {
                continue;
            }
            if let Some(previous_id) = supersede_named_memory(
                &transaction,
                scope,
                *target,
                kept,
                &actor.label(),
                now,
                Some(reason),
            )
            .await?
            {
                superseded.push(previous_id);
            }
        }
        transaction.commit().await.map_err(StorageError::from_db)?;
        Ok(superseded)
    }

    /// Count of active memories in the project (for benchmarks and dashboards).
    pub async fn count_active_memories(&self, scope: &ProjectScope) -> Result<u64, StorageError> {
        use sea_orm::PaginatorTrait;
        memories_of(scope)
            .filter(memories::Column::State.eq(MemoryState::Active.as_str()))
            .count(&self.connection)
            .await
            .map_err(StorageError::from_db)
    }
}

impl MaintenanceStore {
    /// Drop tombstones of memories deleted before `deleted_before` (every project: a
    /// maintenance sweep of the worker); returns how many went.
    pub async fn purge_tombstones_deleted_before(
        &self,
        deleted_before: DateTime<Utc>,
    ) -> Result<u64, StorageError> {
        let _permit = self.storage.write_permit().await;
        let purged = memory_tombstones::Entity::delete_many()
            .filter(memory_tombstones::Column::DeletedAt.lt(deleted_before))
            .exec(&self.storage.connection)
            .await
            .map_err(StorageError::from_db)?;
        Ok(purged.rows_affected)
    }
}
