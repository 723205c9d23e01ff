//! Governance in the database: project settings (PII redaction, retention per kind), the
//! immutable and legal-hold flags of memories, subject erasure and export, retention sweeps,
//! and the content-free erasure ledger. Every function takes the project scope.

use crate::audit::append_audit_event;
use crate::entities::{
    erasure_ledger, index_outbox, memories, memory_history, memory_tombstones, projects,
};
use crate::memories::memory_from_model;
use crate::reembedding::embedding_json;
use crate::{Storage, StorageError};
use chrono::{DateTime, Utc};
use engram_core::NotFoundKind;
use engram_core::audit::{Actor, AuditAction, NewAuditEvent};
pub use engram_core::governance::{ExportedMemory, MemoryFlags, ProjectSettings};
use engram_core::pii::PiiRedaction;
use engram_core::{MemoryId, MemoryKind, ProjectScope};
use sea_orm::sea_query::Expr;
use sea_orm::{
    ActiveValue::Set, ColumnTrait, Condition, EntityTrait, PaginatorTrait, QueryFilter, QueryOrder,
    QuerySelect,
};
use std::collections::BTreeMap;

/// What one erasure removed from the database.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DatabaseErasure {
    pub memories: u64,
    pub history_entries: u64,
    pub idempotency_records: u64,
}

/// What an independent look at the database finds of a subject after erasure.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DatabaseRemains {
    pub memories: u64,
    pub history_entries: u64,
    pub idempotency_records: u64,
}

/// One entry of the erasure ledger: which project erased which subject (as a keyed digest,
/// never the id itself), and when.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ErasureLedgerEntry {
    pub project_scope: ProjectScope,
    pub subject_digest: String,
    pub erased_at: DateTime<Utc>,
}

/// What a project's row says about how it is searched and spent, read together so that the
/// settings and the query-cache epoch a process caches come from one moment.
#[derive(Clone, Debug)]
pub struct ProjectRowConfiguration {
    pub settings: ProjectSettings,
    pub spend_limits: engram_core::usage::SpendLimits,
    /// Raised by every erasure; a process drops its cached query embeddings when it changes.
    pub query_cache_epoch: i64,
}

impl Storage {
    pub async fn project_settings(
        &self,
        scope: &ProjectScope,
    ) -> Result<ProjectSettings, StorageError> {
        let project = projects::Entity::find()
            .filter(crate::tenancy::in_project::<projects::Entity>(scope))
            .one(&self.connection)
            .await
            .map_err(StorageError::from_db)?
            .ok_or(StorageError::NotFound(NotFoundKind::Project))?;
        Ok(settings_from_model(&project))
    }

    /// The project's settings, spend limits and query-cache epoch, from one read of its row.
    pub async fn project_configuration(
        &self,
        scope: &ProjectScope,
    ) -> Result<ProjectRowConfiguration, StorageError> {
        let project = projects::Entity::find()
            .filter(crate::tenancy::in_project::<projects::Entity>(scope))
            .one(&self.connection)
            .await
            .map_err(StorageError::from_db)?
            .ok_or(StorageError::NotFound(NotFoundKind::Project))?;
        Ok(ProjectRowConfiguration {
            settings: settings_from_model(&project),
            spend_limits: serde_json::from_value(project.spend_limits).unwrap_or_default(),
            query_cache_epoch: project.query_cache_epoch,
        })
    }

    /// The project's query-cache epoch (raised by every erasure).
    pub async fn query_cache_epoch(&self, scope: &ProjectScope) -> Result<i64, StorageError> {
        Ok(projects::Entity::find()
            .filter(crate::tenancy::in_project::<projects::Entity>(scope))
            .one(&self.connection)
            .await
            .map_err(StorageError::from_db)?
            .map_or(0, |project| project.query_cache_epoch))
    }

    /// Raise the project's query-cache epoch: every process drops the project's cached query
    /// embeddings when it next reads its settings. Returns the new epoch: the one this raise
    /// wrote (`RETURNING`, in the same statement), never another erasure's after it.
    pub async fn raise_query_cache_epoch(&self, scope: &ProjectScope) -> Result<i64, StorageError> {
        use sea_orm::{ConnectionTrait, IdenStatic, QueryTrait};
        let mut raise = projects::Entity::update_many()
            .col_expr(
                projects::Column::QueryCacheEpoch,
                Expr::col(projects::Column::QueryCacheEpoch).add(1),
            )
            .filter(crate::tenancy::in_project::<projects::Entity>(scope))
            .into_query();
        raise.returning_col(projects::Column::QueryCacheEpoch);
        let statement = self.connection.get_database_backend().build(&raise);
        let _permit = self.write_permit().await;
        let raised = self
            .connection
            .query_one(statement)
            .await
            .map_err(StorageError::from_db)?;
        drop(_permit);
        match raised {
            Some(row) => row
                .try_get::<i64>("", projects::Column::QueryCacheEpoch.as_str())
                .map_err(StorageError::from_db),
            // No such project: nothing was cached under it either.
            None => Ok(0),
        }
    }

    /// Replace the project's settings; the change is audited (old and new values, which
    /// hold no personal data).
    pub async fn update_project_settings(
        &self,
        scope: &ProjectScope,
        settings: &ProjectSettings,
        actor: &Actor,
    ) -> Result<ProjectSettings, StorageError> {
        let _permit = self.write_permit().await;
        let transaction = self.begin_write().await?;
        // Locked: a write of vectors holds the row shared until it commits, so the count of
        // memories below sees every write embedded in the old space.
        let project = crate::reembedding::lock_project_for_switch(&transaction, scope).await?;
        let previous = settings_from_model(&project);
        let changes_space = previous.embedding != settings.embedding;
        if changes_space {
            // Vectors of two spaces cannot be compared: the space changes only while no
            // memory (active or superseded, both searchable) holds a vector of the old one.
            let memories_with_vectors = crate::reembedding::searchable_memories_of(scope)
                .count(&transaction)
                .await
                .map_err(StorageError::from_db)?;
            if memories_with_vectors > 0 {
                return Err(StorageError::ProjectNotEmpty {
                    memories: memories_with_vectors,
                });
            }
        }
        projects::Entity::update_many()
            .col_expr(
                projects::Column::PiiRedaction,
                Expr::value(settings.pii_redaction.as_str()),
            )
            .col_expr(
                projects::Column::RetentionDays,
                Expr::value(retention_json(&settings.retention_days)),
            )
            .col_expr(
                projects::Column::DeriveMemories,
                Expr::value(settings.derive_memories),
            )
            .col_expr(
                projects::Column::RecallEvents,
                Expr::value(settings.recall_events.as_str()),
            )
            .col_expr(
                projects::Column::RecallEventRetentionDays,
                Expr::value(settings.recall_event_retention_days as i32),
            )
            .col_expr(
                projects::Column::StoreRetentionDays,
                Expr::value(store_retention_json(&settings.store_retention_days)),
            )
            .col_expr(
                projects::Column::RunCapture,
                Expr::value(settings.run_capture.as_str()),
            )
            .col_expr(
                projects::Column::KeepTrajectories,
                Expr::value(settings.keep_trajectories),
            )
            .col_expr(
                projects::Column::RelevanceFloor,
                Expr::value(settings.relevance_floor.to_column()),
            )
            .col_expr(
                projects::Column::DefaultVisibility,
                Expr::value(settings.default_visibility.as_str()),
            )
            .col_expr(
                projects::Column::VerifiedOnlyFromOtherAgents,
                Expr::value(settings.verified_only_from_other_agents),
            )
            .col_expr(
                projects::Column::AgentTeams,
                Expr::value(serde_json::to_value(&settings.agent_teams).unwrap_or_default()),
            )
            .col_expr(
                projects::Column::EmbeddingSource,
                Expr::value(settings.embedding.stored_source()),
            )
            .col_expr(
                projects::Column::EmbeddingDimension,
                Expr::value(
                    settings
                        .embedding
                        .client_dimension()
                        .map(|dimension| dimension as i32),
                ),
            )
            .col_expr(
                projects::Column::EmbeddingGeneration,
                Expr::col(projects::Column::EmbeddingGeneration).add(i64::from(changes_space)),
            )
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
                AuditAction::ProjectSettingsChanged,
                vec![scope.project_id().to_string()],
                serde_json::json!({
                    "pii_redaction": { "from": previous.pii_redaction.as_str(), "to": settings.pii_redaction.as_str() },
                    "retention_days": { "from": retention_json(&previous.retention_days), "to": retention_json(&settings.retention_days) },
                    "derive_memories": { "from": previous.derive_memories, "to": settings.derive_memories },
                    "embedding": { "from": embedding_json(previous.embedding), "to": embedding_json(settings.embedding) },
                    "recall_events": { "from": previous.recall_events.as_str(), "to": settings.recall_events.as_str() },
                    "recall_event_retention_days": { "from": previous.recall_event_retention_days, "to": settings.recall_event_retention_days },
                    "store_retention_days": { "from": store_retention_json(&previous.store_retention_days), "to": store_retention_json(&settings.store_retention_days) },
                    "run_capture": { "from": previous.run_capture.as_str(), "to": settings.run_capture.as_str() },
                    "keep_trajectories": { "from": previous.keep_trajectories, "to": settings.keep_trajectories },
                    "relevance_floor": { "from": previous.relevance_floor.to_json(), "to": settings.relevance_floor.to_json() },
                    "default_visibility": { "from": previous.default_visibility.as_str(), "to": settings.default_visibility.as_str() },
                    "verified_only_from_other_agents": { "from": previous.verified_only_from_other_agents, "to": settings.verified_only_from_other_agents },
                    "agent_teams": { "from": previous.agent_teams, "to": settings.agent_teams },
                }),
            ),
        )
        .await?;
        transaction.commit().await.map_err(StorageError::from_db)?;
        Ok(settings.clone())
    }

    pub async fn memory_flags(
        &self,
        scope: &ProjectScope,
        memory_id: MemoryId,
    ) -> Result<MemoryFlags, StorageError> {
        let flags = memories::Entity::find()
            .select_only()
            .column(memories::Column::Immutable)
            .column(memories::Column::LegalHold)
            .filter(crate::tenancy::in_project::<memories::Entity>(scope))
            .filter(memories::Column::Id.eq(memory_id.as_uuid()))
            .into_tuple::<(bool, bool)>()
            .one(&self.connection)
            .await
            .map_err(StorageError::from_db)?
            .ok_or(StorageError::NotFound(NotFoundKind::Memory))?;
        Ok(MemoryFlags {
            immutable: flags.0,
            legal_hold: flags.1,
        })
    }

    /// Set the flags of a memory (audited with the reason). `None` leaves a flag as it is.
    pub async fn set_memory_flags(
        &self,
        scope: &ProjectScope,
        memory_id: MemoryId,
        immutable: Option<bool>,
        legal_hold: Option<bool>,
        reason: Option<&str>,
        actor: &Actor,
    ) -> Result<MemoryFlags, StorageError> {
        let _permit = self.write_permit().await;
        let transaction = self.begin_write().await?;
        let mut update = memories::Entity::update_many();
        if let Some(immutable) = immutable {
            update = update.col_expr(memories::Column::Immutable, Expr::value(immutable));
        }
        if let Some(legal_hold) = legal_hold {
            update = update.col_expr(memories::Column::LegalHold, Expr::value(legal_hold));
        }
        let changed = if immutable.is_some() || legal_hold.is_some() {
            update
                .filter(crate::tenancy::in_project::<memories::Entity>(scope))
                .filter(memories::Column::Id.eq(memory_id.as_uuid()))
                .exec(&transaction)
                .await
                .map_err(StorageError::from_db)?
                .rows_affected
        } else {
            1
        };
        let flags = memories::Entity::find()
            .select_only()
            .column(memories::Column::Immutable)
            .column(memories::Column::LegalHold)
            .filter(crate::tenancy::in_project::<memories::Entity>(scope))
            .filter(memories::Column::Id.eq(memory_id.as_uuid()))
            .into_tuple::<(bool, bool)>()
            .one(&transaction)
            .await
            .map_err(StorageError::from_db)?;
        let (Some((now_immutable, now_held)), true) = (flags, changed == 1) else {
            return Err(StorageError::NotFound(NotFoundKind::Memory));
        };
        append_audit_event(
            &transaction,
            scope.organization_id(),
            Some(scope),
            actor,
            &NewAuditEvent::success(
                AuditAction::MemoryFlagsChanged,
                vec![memory_id.to_string()],
                serde_json::json!({
                    "immutable": now_immutable,
                    "legal_hold": now_held,
                    "reason_given": reason.is_some(),
                }),
            ),
        )
        .await?;
        transaction.commit().await.map_err(StorageError::from_db)?;
        Ok(MemoryFlags {
            immutable: now_immutable,
            legal_hold: now_held,
        })
    }

    /// Ids of the subject's memories under legal hold (erasure refuses while there are any).
    pub async fn held_memories_of_subject(
        &self,
        scope: &ProjectScope,
        user_id: &str,
    ) -> Result<Vec<MemoryId>, StorageError> {
        let held = memories::Entity::find()
            .select_only()
            .column(memories::Column::Id)
            .filter(crate::tenancy::in_project::<memories::Entity>(scope))
            .filter(memories::Column::UserId.eq(user_id))
            .filter(memories::Column::LegalHold.eq(true))
            .order_by_asc(memories::Column::Id)
            .into_tuple::<uuid::Uuid>()
            .all(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        Ok(held.into_iter().map(MemoryId::from_uuid).collect())
    }

    /// How many memories (every state) the subject has in the project.
    pub async fn count_subject_memories(
        &self,
        scope: &ProjectScope,
        user_id: &str,
    ) -> Result<u64, StorageError> {
        memories::Entity::find()
            .filter(crate::tenancy::in_project::<memories::Entity>(scope))
            .filter(memories::Column::UserId.eq(user_id))
            .count(&self.connection)
            .await
            .map_err(StorageError::from_db)
    }

    /// Erase up to `batch` of the subject's memories in one transaction: rows, history
    /// (content included), a content-free tombstone each and an outbox entry each, so the
    /// index follows even if the process dies before it deletes the points itself. Held
    /// memories are refused (`Refused`). Returns the ids erased; call until it returns none.
    pub async fn erase_subject_batch(
        &self,
        scope: &ProjectScope,
        user_id: &str,
        batch: u64,
    ) -> Result<(Vec<MemoryId>, u64), StorageError> {
        let _permit = self.write_permit().await;
        let transaction = self.begin_write().await?;
        let rows = memories::Entity::find()
            .select_only()
            .column(memories::Column::Id)
            .column(memories::Column::Version)
            .column(memories::Column::LegalHold)
            .filter(crate::tenancy::in_project::<memories::Entity>(scope))
            .filter(memories::Column::UserId.eq(user_id))
            .order_by_asc(memories::Column::Id)
            .limit(batch)
            .into_tuple::<(uuid::Uuid, i64, bool)>()
            .all(&transaction)
            .await
            .map_err(StorageError::from_db)?;
        if rows.iter().any(|(_, _, held)| *held) {
            return Err(StorageError::Refused(
                "a memory of this subject is under legal hold".to_string(),
            ));
        }
        if rows.is_empty() {
            return Ok((Vec::new(), 0));
        }
        let versions: Vec<(uuid::Uuid, i64)> = rows
            .iter()
            .map(|(id, version, _)| (*id, *version))
            .collect();
        let history_deleted = remove_memory_rows(&transaction, scope, &versions).await?;
        let ids: Vec<uuid::Uuid> = versions.iter().map(|(id, _)| *id).collect();
        transaction.commit().await.map_err(StorageError::from_db)?;
        Ok((
            ids.into_iter().map(MemoryId::from_uuid).collect(),
            history_deleted,
        ))
    }

    /// History rows of these memories (erasure verification).
    pub async fn count_history_of_memories(
        &self,
        scope: &ProjectScope,
        memory_ids: &[MemoryId],
    ) -> Result<u64, StorageError> {
        let mut left = 0;
        for chunk in memory_ids.chunks(500) {
            left += memory_history::Entity::find()
                .filter(crate::tenancy::in_project::<memory_history::Entity>(scope))
                .filter(
                    memory_history::Column::MemoryId
                        .is_in(chunk.iter().map(|id| id.as_uuid()).collect::<Vec<_>>()),
                )
                .count(&self.connection)
                .await
                .map_err(StorageError::from_db)?;
        }
        Ok(left)
    }

    /// An independent count of what is left of the subject: memories with its `user_id`,
    /// history rows of the erased ids, and idempotency answers that mention it.
    pub async fn subject_remains(
        &self,
        scope: &ProjectScope,
        user_id: &str,
        erased_ids: &[MemoryId],
    ) -> Result<DatabaseRemains, StorageError> {
        Ok(DatabaseRemains {
            memories: self.count_subject_memories(scope, user_id).await?,
            history_entries: self.count_history_of_memories(scope, erased_ids).await?,
            idempotency_records: self
                .count_idempotency_records_naming_subject(scope, user_id)
                .await?,
        })
    }

    /// Record a finished erasure in the ledger and the audit log, in one transaction.
    pub async fn record_erasure(
        &self,
        scope: &ProjectScope,
        subject_digest: &str,
        receipt: &serde_json::Value,
        actor: &Actor,
    ) -> Result<(), StorageError> {
        let _permit = self.write_permit().await;
        let transaction = self.begin_write().await?;
        erasure_ledger::Entity::insert(erasure_ledger::ActiveModel {
            id: Set(uuid::Uuid::now_v7()),
            organization_id: Set(scope.organization_id().as_uuid()),
            project_id: Set(scope.project_id().as_uuid()),
            subject_digest: Set(subject_digest.to_string()),
            erased_at: Set(Utc::now()),
        })
        .exec_without_returning(&transaction)
        .await
        .map_err(StorageError::from_db)?;
        append_audit_event(
            &transaction,
            scope.organization_id(),
            Some(scope),
            actor,
            &NewAuditEvent::success(
                AuditAction::SubjectErased,
                vec![subject_digest.to_string()],
                receipt.clone(),
            ),
        )
        .await?;
        transaction.commit().await.map_err(StorageError::from_db)
    }

    /// Whether the ledger holds this subject digest for the project.
    pub async fn erasure_recorded(
        &self,
        scope: &ProjectScope,
        subject_digest: &str,
    ) -> Result<bool, StorageError> {
        Ok(erasure_ledger::Entity::find()
            .filter(crate::tenancy::in_project::<erasure_ledger::Entity>(scope))
            .filter(erasure_ledger::Column::SubjectDigest.eq(subject_digest))
            .count(&self.connection)
            .await
            .map_err(StorageError::from_db)?
            > 0)
    }

    /// The distinct `user_id`s with memories in the project (to match ledger digests after
    /// a restore).
    pub async fn subjects_of_project(
        &self,
        scope: &ProjectScope,
    ) -> Result<Vec<String>, StorageError> {
        memories::Entity::find()
            .select_only()
            .column(memories::Column::UserId)
            .distinct()
            .filter(crate::tenancy::in_project::<memories::Entity>(scope))
            .filter(memories::Column::UserId.is_not_null())
            .into_tuple::<String>()
            .all(&self.connection)
            .await
            .map_err(StorageError::from_db)
    }

    /// Every live memory of the subject with its history, oldest first.
    pub async fn export_subject(
        &self,
        scope: &ProjectScope,
        user_id: &str,
    ) -> Result<Vec<ExportedMemory>, StorageError> {
        let rows = memories::Entity::find()
            .filter(crate::tenancy::in_project::<memories::Entity>(scope))
            .filter(memories::Column::UserId.eq(user_id))
            .order_by_asc(memories::Column::CreatedAt)
            .order_by_asc(memories::Column::Id)
            .all(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        let mut exported = Vec::with_capacity(rows.len());
        for row in rows {
            let flags = MemoryFlags {
                immutable: row.immutable,
                legal_hold: row.legal_hold,
            };
            let memory = memory_from_model(row)?;
            // Deleted (by a sweep, an erasure, a user) since the listing: no longer live, so
            // not exported, rather than failing the whole export with a 404.
            let history = match self
                .memory_history(&engram_core::MemoryScope::project_wide(*scope), memory.id)
                .await
            {
                Err(StorageError::NotFound(_)) => continue,
                history => history?,
            };
            exported.push(ExportedMemory {
                memory,
                flags,
                history,
            });
        }
        Ok(exported)
    }

    /// Memories the retention rules remove at `now`: past their own `expires_at`, or older
    /// than their kind's retention; never immutable or held ones. At most `limit`, oldest
    /// first, as (id, kind).
    pub async fn memories_due_for_retention(
        &self,
        scope: &ProjectScope,
        settings: &ProjectSettings,
        now: DateTime<Utc>,
        limit: u64,
    ) -> Result<Vec<(MemoryId, MemoryKind)>, StorageError> {
        let mut due = Condition::any().add(memories::Column::ExpiresAt.lte(now));
        for (kind, days) in &settings.retention_days {
            due = due.add(
                Condition::all()
                    .add(memories::Column::Kind.eq(kind.as_str()))
                    .add(
                        memories::Column::CreatedAt
                            .lte(now - chrono::Duration::days(i64::from(*days))),
                    ),
            );
        }
        let rows = memories::Entity::find()
            .select_only()
            .column(memories::Column::Id)
            .column(memories::Column::Kind)
            .filter(crate::tenancy::in_project::<memories::Entity>(scope))
            .filter(memories::Column::Immutable.eq(false))
            .filter(memories::Column::LegalHold.eq(false))
            // A held end-user keeps every memory, not only the held ones.
            .filter(crate::subject_data::outside_hold(
                memories::Column::UserId,
                scope,
            ))
            .filter(due)
            .order_by_asc(memories::Column::CreatedAt)
            .limit(limit)
            .into_tuple::<(uuid::Uuid, String)>()
            .all(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        rows.into_iter()
            .map(|(id, kind)| {
                let kind = kind
                    .parse()
                    .map_err(|error| StorageError::Internal(format!("stored kind: {error}")))?;
                Ok((MemoryId::from_uuid(id), kind))
            })
            .collect()
    }

    /// Hard-delete expired memories (rows, history, tombstone and outbox entry each) and
    /// audit them in one event. Memories that became immutable or held meanwhile stay.
    pub async fn expire_memories(
        &self,
        scope: &ProjectScope,
        memory_ids: &[MemoryId],
        actor: &Actor,
    ) -> Result<Vec<MemoryId>, StorageError> {
        // Authorised by whoever set the policy, not by the sweeper: the project's retention
        // settings (changed only with `admin`, audited) or the memory's own `expires_at`
        // (written only with `memories:delete`).
        self.hard_delete_memories(
            scope,
            memory_ids,
            AuditAction::MemoryExpired,
            Some("authorised by project policy: the kind's retention_days or the memory's expires_at"),
            actor,
            serde_json::Map::new(),
        )
        .await
    }

    /// Hard-delete memories chosen by a filter (console bulk delete) with the reason given;
    /// immutable and held ones are skipped. Returns the ids deleted.
    pub async fn delete_memories_in_bulk(
        &self,
        scope: &ProjectScope,
        memory_ids: &[MemoryId],
        reason: &str,
        actor: &Actor,
    ) -> Result<Vec<MemoryId>, StorageError> {
        self.hard_delete_memories(
            scope,
            memory_ids,
            AuditAction::MemoryDeleted,
            Some(reason),
            actor,
            serde_json::Map::new(),
        )
        .await
    }

    /// Hard-delete memories the project's memory limits evict (immutable and held ones are
    /// never deleted): one `memory.evicted` event in the name of `limit_setter`, whose policy
    /// authorises it, with the limit, the subject and the write that made room necessary.
    pub async fn evict_memories(
        &self,
        scope: &ProjectScope,
        memory_ids: &[MemoryId],
        eviction: &Eviction,
        limit_setter: &Actor,
    ) -> Result<Vec<MemoryId>, StorageError> {
        let mut details = serde_json::Map::new();
        details.insert("limit".into(), eviction.limit_name.into());
        details.insert("maximum".into(), eviction.maximum.into());
        details.insert("policy".into(), eviction.policy.into());
        details.insert("subject".into(), eviction.subject.clone().into());
        details.insert(
            "made_room_for".into(),
            eviction.made_room_for.clone().into(),
        );
        self.hard_delete_memories(
            scope,
            memory_ids,
            AuditAction::MemoryEvicted,
            Some("authorised by project policy: the project's memory limits"),
            limit_setter,
            details,
        )
        .await
    }

    async fn hard_delete_memories(
        &self,
        scope: &ProjectScope,
        memory_ids: &[MemoryId],
        action: AuditAction,
        reason: Option<&str>,
        actor: &Actor,
        mut details: serde_json::Map<String, serde_json::Value>,
    ) -> Result<Vec<MemoryId>, StorageError> {
        if memory_ids.is_empty() {
            return Ok(Vec::new());
        }
        let _permit = self.write_permit().await;
        let transaction = self.begin_write().await?;
        let candidates: Vec<uuid::Uuid> = memory_ids.iter().map(|id| id.as_uuid()).collect();
        let rows = memories::Entity::find()
            .select_only()
            .column(memories::Column::Id)
            .column(memories::Column::Version)
            .filter(crate::tenancy::in_project::<memories::Entity>(scope))
            .filter(memories::Column::Id.is_in(candidates))
            .filter(memories::Column::Immutable.eq(false))
            .filter(memories::Column::LegalHold.eq(false))
            .into_tuple::<(uuid::Uuid, i64)>()
            .all(&transaction)
            .await
            .map_err(StorageError::from_db)?;
        if rows.is_empty() {
            return Ok(Vec::new());
        }
        remove_memory_rows(&transaction, scope, &rows).await?;
        let ids: Vec<uuid::Uuid> = rows.iter().map(|(id, _)| *id).collect();
        append_audit_event(
            &transaction,
            scope.organization_id(),
            Some(scope),
            actor,
            &NewAuditEvent::success(action, ids.iter().map(ToString::to_string).collect(), {
                details.insert("count".into(), ids.len().into());
                details.insert("bulk".into(), true.into());
                details.insert("reason".into(), reason.into());
                serde_json::Value::Object(details)
            }),
        )
        .await?;
        transaction.commit().await.map_err(StorageError::from_db)?;
        Ok(ids.into_iter().map(MemoryId::from_uuid).collect())
    }
}

/// Why memories are evicted, for the audit event.
#[derive(Clone, Debug)]
pub struct Eviction {
    /// `memory_limits.per_end_user` or `memory_limits.per_agent`.
    pub limit_name: &'static str,
    pub maximum: u32,
    pub policy: &'static str,
    /// `end-user <subject digest>`, `agent "support"`.
    pub subject: String,
    /// The writer whose memories needed the room (an actor label).
    pub made_room_for: String,
}

/// Inside `transaction`: hard-delete the memories `(id, last version)` with their history
/// (content included), leave a content-free tombstone each, and an outbox entry each so the
/// index follows even if the caller dies before deleting the points itself. Returns how many
/// history rows went.
async fn remove_memory_rows(
    transaction: &crate::WriteTransaction,
    scope: &ProjectScope,
    rows: &[(uuid::Uuid, i64)],
) -> Result<u64, StorageError> {
    let ids: Vec<uuid::Uuid> = rows.iter().map(|(id, _)| *id).collect();
    let history_deleted = memory_history::Entity::delete_many()
        .filter(crate::tenancy::in_project::<memory_history::Entity>(scope))
        .filter(memory_history::Column::MemoryId.is_in(ids.clone()))
        .exec(transaction)
        .await
        .map_err(StorageError::from_db)?
        .rows_affected;
    memories::Entity::delete_many()
        .filter(crate::tenancy::in_project::<memories::Entity>(scope))
        .filter(memories::Column::Id.is_in(ids.clone()))
        .exec(transaction)
        .await
        .map_err(StorageError::from_db)?;
    let now = Utc::now();
    memory_tombstones::Entity::insert_many(rows.iter().map(|(id, version)| {
        memory_tombstones::ActiveModel {
            memory_id: Set(*id),
            organization_id: Set(scope.organization_id().as_uuid()),
            project_id: Set(scope.project_id().as_uuid()),
            last_version: Set(*version),
            deleted_at: Set(now),
        }
    }))
    .on_conflict(
        sea_orm::sea_query::OnConflict::column(memory_tombstones::Column::MemoryId)
            .do_nothing()
            .to_owned(),
    )
    .exec_without_returning(transaction)
    .await
    .map_err(StorageError::from_db)?;
    index_outbox::Entity::insert_many(ids.iter().map(|id| index_outbox::ActiveModel {
        organization_id: Set(scope.organization_id().as_uuid()),
        project_id: Set(scope.project_id().as_uuid()),
        memory_id: Set(*id),
        created_at: Set(now),
        attempts: Set(0),
        last_error: Set(None),
        ..Default::default()
    }))
    .exec_without_returning(transaction)
    .await
    .map_err(StorageError::from_db)?;
    crate::idempotency::erase_idempotency_answers(transaction, scope, &ids).await?;
    Ok(history_deleted)
}

fn settings_from_model(project: &projects::Model) -> ProjectSettings {
    let retention_days = project
        .retention_days
        .as_object()
        .map(|days| {
            days.iter()
                .filter_map(|(kind, days)| {
                    Some((kind.parse().ok()?, u32::try_from(days.as_u64()?).ok()?))
                })
                .collect()
        })
        .unwrap_or_default();
    ProjectSettings {
        pii_redaction: PiiRedaction::parse(&project.pii_redaction).unwrap_or_default(),
        retention_days,
        derive_memories: project.derive_memories,
        embedding: engram_core::ProjectEmbedding::from_columns(
            &project.embedding_source,
            project.embedding_dimension,
        ),
        recall_events: engram_core::recall::RecallEventCapture::parse(&project.recall_events)
            .unwrap_or_default(),
        recall_event_retention_days: u32::try_from(project.recall_event_retention_days)
            .unwrap_or(engram_core::recall::DEFAULT_RECALL_EVENT_RETENTION_DAYS),
        store_retention_days: project
            .store_retention_days
            .as_object()
            .map(|days| {
                days.iter()
                    .filter_map(|(name, days)| {
                        Some((
                            crate::subject_data::SubjectStore::named(name)?,
                            u32::try_from(days.as_u64()?).ok()?,
                        ))
                    })
                    .collect()
            })
            .unwrap_or_default(),
        run_capture: project
            .run_capture
            .parse()
            .unwrap_or(engram_core::runs::RunCapture::Digests),
        keep_trajectories: project.keep_trajectories,
        relevance_floor: engram_core::search::RelevanceFloorSetting::from_column(
            project.relevance_floor,
        ),
        default_visibility: project
            .default_visibility
            .parse()
            .unwrap_or(engram_core::Visibility::Shared),
        verified_only_from_other_agents: project.verified_only_from_other_agents,
        agent_teams: serde_json::from_value(project.agent_teams.clone()).unwrap_or_default(),
        embedding_generation: project.embedding_generation,
        embedding_change: match (
            &project.embedding_target_source,
            project.embedding_target_task,
        ) {
            (Some(source), Some(task_id)) => Some(engram_core::governance::EmbeddingChange {
                to: engram_core::ProjectEmbedding::from_columns(source, None),
                task_id,
            }),
            _ => None,
        },
    }
}

fn store_retention_json(
    store_retention_days: &BTreeMap<crate::subject_data::SubjectStore, u32>,
) -> serde_json::Value {
    serde_json::Value::Object(
        store_retention_days
            .iter()
            .map(|(store, days)| {
                (
                    store.declaration().name.to_string(),
                    serde_json::json!(days),
                )
            })
            .collect(),
    )
}

fn retention_json(retention_days: &BTreeMap<MemoryKind, u32>) -> serde_json::Value {
    serde_json::Value::Object(
        retention_days
            .iter()
            .map(|(kind, days)| (kind.as_str().to_string(), serde_json::json!(days)))
            .collect(),
    )
}
