//! Conversation history of a session (stored with the derivation task that turns it into
//! memories, in one transaction, so an acknowledged message is never lost), paged in order,
//! removed with the end-user it belongs to; and the record of every LLM call with its tokens.

use crate::entities::{llm_calls, session_messages, tasks};
use crate::tasks::TaskRecord;
use crate::usage::{UsageIncrement, add_to_usage_counters};
use crate::{Storage, StorageError};
use chrono::{DateTime, Utc};
pub use engram_core::conversation::{LlmModelUsage, NewMessage, SessionMessage};
use engram_core::usage::UsageUnit;
use engram_core::{ExternalId, ProjectScope, TaskKind, TaskStatus};
use engram_core::{MemoryScope, NotFoundKind};
use sea_orm::{
    ActiveValue::Set, ColumnTrait, Condition, EntityTrait, QueryFilter, QueryOrder, QuerySelect,
};
use std::collections::BTreeMap;
use uuid::Uuid;

/// Messages of one call, with the subject they belong to.
#[derive(Clone, Debug, PartialEq)]
pub struct MessageBatch {
    pub session_id: ExternalId,
    pub user_id: Option<ExternalId>,
    pub agent_id: Option<ExternalId>,
    pub messages: Vec<NewMessage>,
}

/// What a derivation task works on: the batch, who pays for the work, and whether that
/// credential may delete memories (an LLM's DELETE decision is applied only then; otherwise
/// it is recorded as a proposal). Kept in the task's `subject` column as `<batch id>
/// <credential>`, followed by ` +delete` when it may delete; a subject written before the
/// flag existed reads as "may not".
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DerivationSubject {
    pub batch_id: Uuid,
    pub credential: String,
    pub may_delete: bool,
}

/// Who asks for a batch to be derived: the billed credential and whether it holds
/// `memories:delete`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DerivationRequest<'a> {
    /// A usage attribution's billing label (`key:<id>@http`).
    pub credential: &'a str,
    pub may_delete: bool,
}

const MAY_DELETE_MARK: &str = " +delete";

impl DerivationSubject {
    pub fn encode(&self) -> String {
        let mark = if self.may_delete { MAY_DELETE_MARK } else { "" };
        format!("{} {}{mark}", self.batch_id, self.credential)
    }

    pub fn parse(text: &str) -> Option<Self> {
        let (batch_id, rest) = text.split_once(' ')?;
        let (credential, may_delete) = match rest.strip_suffix(MAY_DELETE_MARK) {
            Some(credential) => (credential, true),
            None => (rest, false),
        };
        Some(Self {
            batch_id: batch_id.parse().ok()?,
            credential: credential.to_string(),
            may_delete,
        })
    }
}

/// One call to the LLM, as recorded for cost by model.
#[derive(Clone, Debug, PartialEq)]
pub struct LlmCallRecord {
    /// Who is billed: the credential (stored with the call) and the rest of the attribution
    /// (in the usage counters).
    pub attribution: engram_core::usage::UsageAttribution,
    pub model: String,
    /// `extraction`, `reconciliation`, …
    pub purpose: String,
    pub tokens_in: i64,
    pub tokens_out: i64,
    pub duration_ms: i64,
    pub succeeded: bool,
    pub at: DateTime<Utc>,
}

fn message(model: session_messages::Model) -> SessionMessage {
    SessionMessage {
        id: model.id,
        session_id: model.session_id,
        user_id: model.user_id,
        agent_id: model.agent_id,
        role: model.role,
        name: model.name,
        content: model.content,
        memory_key: model.memory_key,
        sent_at: model.sent_at,
        created_at: model.created_at,
        batch_id: model.batch_id,
    }
}

fn messages_of(scope: &ProjectScope) -> sea_orm::Select<session_messages::Entity> {
    session_messages::Entity::find().filter(crate::tenancy::in_project::<session_messages::Entity>(
        scope,
    ))
}

impl Storage {
    /// Store a batch of messages, and with `derive_for` (the credential billed) the task
    /// that derives memories from them, in one transaction.
    pub async fn append_session_messages(
        &self,
        scope: &ProjectScope,
        batch: MessageBatch,
        derive_for: Option<DerivationRequest<'_>>,
        request_id: Option<&str>,
    ) -> Result<(Vec<SessionMessage>, Option<TaskRecord>), StorageError> {
        let _permit = self.write_permit().await;
        let now = Utc::now();
        let batch_id = Uuid::now_v7();
        let transaction = self.begin_write().await?;
        let mut ids = Vec::with_capacity(batch.messages.len());
        for new_message in &batch.messages {
            let id = Uuid::now_v7();
            ids.push(id);
            session_messages::Entity::insert(session_messages::ActiveModel {
                id: Set(id),
                organization_id: Set(scope.organization_id().as_uuid()),
                project_id: Set(scope.project_id().as_uuid()),
                session_id: Set(batch.session_id.as_str().to_string()),
                user_id: Set(batch.user_id.as_ref().map(|id| id.as_str().to_string())),
                agent_id: Set(batch.agent_id.as_ref().map(|id| id.as_str().to_string())),
                role: Set(new_message.role.as_str().to_string()),
                name: Set(new_message.name.clone()),
                content: Set(new_message.content.clone()),
                memory_key: Set(new_message
                    .memory_key
                    .as_ref()
                    .map(|key| key.as_str().to_string())),
                sent_at: Set(new_message.sent_at),
                created_at: Set(now),
                batch_id: Set(batch_id),
            })
            .exec_without_returning(&transaction)
            .await
            .map_err(StorageError::from_db)?;
        }
        let task_id = Uuid::now_v7();
        if let Some(requester) = derive_for {
            tasks::Entity::insert(tasks::ActiveModel {
                id: Set(task_id),
                organization_id: Set(scope.organization_id().as_uuid()),
                project_id: Set(scope.project_id().as_uuid()),
                kind: Set(TaskKind::MessageDerivation.as_str().to_string()),
                subject: Set(Some(
                    DerivationSubject {
                        batch_id,
                        credential: requester.credential.to_string(),
                        may_delete: requester.may_delete,
                    }
                    .encode(),
                )),
                status: Set(TaskStatus::Queued.as_str().to_string()),
                progress_done: Set(0),
                progress_total: Set(i64::try_from(batch.messages.len()).unwrap_or(0)),
                result: Set(None),
                error: Set(None),
                request_id: Set(request_id.map(str::to_string)),
                created_at: Set(now),
                updated_at: Set(now),
                claimed_until: Set(None),
            })
            .exec_without_returning(&transaction)
            .await
            .map_err(StorageError::from_db)?;
        }
        transaction.commit().await.map_err(StorageError::from_db)?;
        let stored = self.messages_of_batch(scope, batch_id).await?;
        let task = match derive_for {
            Some(_) => Some(
                self.task(scope, task_id)
                    .await?
                    .ok_or(StorageError::NotFound(NotFoundKind::Task))?,
            ),
            None => None,
        };
        Ok((stored, task))
    }

    /// The messages of one call, in the order they were sent.
    pub async fn messages_of_batch(
        &self,
        scope: &ProjectScope,
        batch_id: Uuid,
    ) -> Result<Vec<SessionMessage>, StorageError> {
        Ok(messages_of(scope)
            .filter(session_messages::Column::BatchId.eq(batch_id))
            .order_by_asc(session_messages::Column::Id)
            .all(&self.connection)
            .await
            .map_err(StorageError::from_db)?
            .into_iter()
            .map(message)
            .collect())
    }

    /// Up to `limit` messages of the session before message `before`, oldest first (the
    /// conversation a new batch continues) — only `end_user`'s (or, for `None`, only those of
    /// no end-user): two end-users who share a session id never see each other's words. For a
    /// batch of an agent, only that agent's messages and those of no agent: another agent's
    /// words never reach the LLM that derives this agent's memories.
    pub async fn messages_before(
        &self,
        scope: &ProjectScope,
        session_id: &str,
        [end_user, agent]: [Option<&str>; 2],
        before: Uuid,
        limit: u64,
    ) -> Result<Vec<SessionMessage>, StorageError> {
        let of_end_user = match end_user {
            Some(user_id) => session_messages::Column::UserId.eq(user_id),
            None => session_messages::Column::UserId.is_null(),
        };
        let of_agent = agent.map(|agent| {
            Condition::any()
                .add(session_messages::Column::AgentId.eq(agent))
                .add(session_messages::Column::AgentId.is_null())
        });
        let mut earlier: Vec<SessionMessage> = messages_of(scope)
            .filter(session_messages::Column::SessionId.eq(session_id))
            .filter(of_end_user)
            .filter(Condition::all().add_option(of_agent))
            .filter(session_messages::Column::Id.lt(before))
            .order_by_desc(session_messages::Column::Id)
            .limit(limit)
            .all(&self.connection)
            .await
            .map_err(StorageError::from_db)?
            .into_iter()
            .map(message)
            .collect();
        earlier.reverse();
        Ok(earlier)
    }

    /// A page of a session's history in the order it was stored, after message `after`: the
    /// messages of end-user `user_id`, or with `None` those of no end-user (each end-user of a
    /// session has a history of its own). The cursor is the last message's id when more
    /// follow. A scope confined to an end-user reads only that end-user's history.
    pub async fn session_messages(
        &self,
        memory_scope: &MemoryScope,
        session_id: &str,
        user_id: Option<&str>,
        after: Option<Uuid>,
        limit: u64,
    ) -> Result<(Vec<SessionMessage>, Option<Uuid>), StorageError> {
        let scope = memory_scope.project();
        let Some(user_id) = memory_scope.owner_within(user_id) else {
            return Ok((Vec::new(), None));
        };
        let mut query = messages_of(scope)
            .filter(crate::tenancy::seen_by_agents_of::<session_messages::Entity>(memory_scope))
            .filter(session_messages::Column::SessionId.eq(session_id))
            .order_by_asc(session_messages::Column::Id)
            .limit(limit + 1);
        query = match user_id {
            Some(user_id) => query.filter(session_messages::Column::UserId.eq(user_id)),
            None => query.filter(session_messages::Column::UserId.is_null()),
        };
        if let Some(after) = after {
            query = query.filter(session_messages::Column::Id.gt(after));
        }
        let mut page: Vec<SessionMessage> = query
            .all(&self.connection)
            .await
            .map_err(StorageError::from_db)?
            .into_iter()
            .map(message)
            .collect();
        let more = page.len() as u64 > limit;
        page.truncate(limit as usize);
        let cursor = if more {
            page.last().map(|last| last.id)
        } else {
            None
        };
        Ok((page, cursor))
    }

    /// The newest `limit` messages of a session in `user_id`'s namespace, newest first.
    pub async fn latest_session_messages(
        &self,
        memory_scope: &MemoryScope,
        session_id: &str,
        user_id: Option<&str>,
        limit: u64,
    ) -> Result<Vec<SessionMessage>, StorageError> {
        let scope = memory_scope.project();
        let Some(user_id) = memory_scope.owner_within(user_id) else {
            return Ok(Vec::new());
        };
        let mut query = messages_of(scope)
            .filter(crate::tenancy::seen_by_agents_of::<session_messages::Entity>(memory_scope))
            .filter(session_messages::Column::SessionId.eq(session_id))
            .order_by_desc(session_messages::Column::Id)
            .limit(limit);
        query = match user_id {
            Some(user_id) => query.filter(session_messages::Column::UserId.eq(user_id)),
            None => query.filter(session_messages::Column::UserId.is_null()),
        };
        Ok(query
            .all(&self.connection)
            .await
            .map_err(StorageError::from_db)?
            .into_iter()
            .map(message)
            .collect())
    }

    /// Every message of an end-user in the project, oldest first (subject export).
    pub async fn session_messages_of_subject(
        &self,
        scope: &ProjectScope,
        user_id: &str,
    ) -> Result<Vec<SessionMessage>, StorageError> {
        Ok(messages_of(scope)
            .filter(session_messages::Column::UserId.eq(user_id))
            .order_by_asc(session_messages::Column::Id)
            .all(&self.connection)
            .await
            .map_err(StorageError::from_db)?
            .into_iter()
            .map(message)
            .collect())
    }

    /// Remove every message of an end-user in the project (subject erasure).
    pub async fn delete_session_messages_of_subject(
        &self,
        scope: &ProjectScope,
        user_id: &str,
    ) -> Result<u64, StorageError> {
        let _permit = self.write_permit().await;
        let deleted = session_messages::Entity::delete_many()
            .filter(crate::tenancy::in_project::<session_messages::Entity>(
                scope,
            ))
            .filter(session_messages::Column::UserId.eq(user_id))
            .exec(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        Ok(deleted.rows_affected)
    }

    /// Messages of an end-user still stored (erasure verification).
    pub async fn count_session_messages_of_subject(
        &self,
        scope: &ProjectScope,
        user_id: &str,
    ) -> Result<u64, StorageError> {
        use sea_orm::PaginatorTrait;
        messages_of(scope)
            .filter(session_messages::Column::UserId.eq(user_id))
            .count(&self.connection)
            .await
            .map_err(StorageError::from_db)
    }

    /// Record one LLM call and bill its tokens, in one transaction (so the per-model record
    /// and the hourly rollup can never disagree).
    pub async fn record_llm_call(
        &self,
        scope: &ProjectScope,
        call: &LlmCallRecord,
    ) -> Result<(), StorageError> {
        let _permit = self.write_permit().await;
        let transaction = self.begin_write().await?;
        llm_calls::Entity::insert(llm_calls::ActiveModel {
            id: Set(Uuid::now_v7()),
            organization_id: Set(scope.organization_id().as_uuid()),
            project_id: Set(scope.project_id().as_uuid()),
            credential: Set(call.attribution.credential.clone()),
            model: Set(call.model.clone()),
            purpose: Set(call.purpose.clone()),
            tokens_in: Set(call.tokens_in),
            tokens_out: Set(call.tokens_out),
            duration_ms: Set(call.duration_ms),
            succeeded: Set(call.succeeded),
            at: Set(call.at),
        })
        .exec_without_returning(&transaction)
        .await
        .map_err(StorageError::from_db)?;
        for (unit, quantity) in [
            (UsageUnit::LlmTokensIn, call.tokens_in),
            (UsageUnit::LlmTokensOut, call.tokens_out),
        ] {
            if quantity <= 0 {
                continue;
            }
            add_to_usage_counters(
                &transaction,
                &UsageIncrement {
                    organization_id: scope.organization_id(),
                    project_id: scope.project_id(),
                    attribution: call.attribution.clone(),
                    unit,
                    at: call.at,
                    quantity,
                },
            )
            .await?;
        }
        transaction.commit().await.map_err(StorageError::from_db)
    }

    /// LLM calls and tokens per model from `from` (inclusive) to `to` (exclusive).
    pub async fn llm_usage_by_model(
        &self,
        scope: &ProjectScope,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Vec<LlmModelUsage>, StorageError> {
        let calls = llm_calls::Entity::find()
            .filter(crate::tenancy::in_project::<llm_calls::Entity>(scope))
            .filter(llm_calls::Column::At.gte(from))
            .filter(llm_calls::Column::At.lt(to))
            .all(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        let mut per_model: BTreeMap<String, LlmModelUsage> = BTreeMap::new();
        for call in calls {
            let usage = per_model
                .entry(call.model.clone())
                .or_insert_with(|| LlmModelUsage {
                    model: call.model.clone(),
                    calls: 0,
                    failed_calls: 0,
                    tokens_in: 0,
                    tokens_out: 0,
                });
            usage.calls += 1;
            if !call.succeeded {
                usage.failed_calls += 1;
            }
            usage.tokens_in += call.tokens_in;
            usage.tokens_out += call.tokens_out;
        }
        Ok(per_model.into_values().collect())
    }
}
