//! Agent runs in the database: runs, their steps in order, and the uses of memories that link
//! a memory to the recalls, contexts and runs it reached; erased with their end-user, swept by
//! the project's retention. Every function takes the scope first.

use crate::entities::{
    agent_runs, memories, memory_history, memory_uses, recall_events, run_steps,
};
use crate::{Storage, StorageError};
use chrono::{DateTime, Utc};
use engram_core::runs::{
    MAX_RUN_STEPS, MemoryImpactCounts, MemoryUseKind, MemoryUseRecord, NewMemoryUse,
    RUN_IDLE_EXPIRY_HOURS, RecallFilter, RunFilter, RunRecord, RunStatus, RunStepRecord,
    RunStepType, StartRunRequest,
};
use engram_core::{Memory, MemoryId, MemoryScope, NotFoundKind, ProjectScope};
use sea_orm::sea_query::Expr;
use sea_orm::{
    ActiveValue::Set, ColumnTrait, Condition, ConnectionTrait, EntityTrait, PaginatorTrait,
    QueryFilter, QueryOrder, QuerySelect, QueryTrait,
};
use std::collections::HashMap;
use uuid::Uuid;

/// Who opened a run, for its record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunOpener {
    pub credential: String,
    pub channel: String,
}

/// What appending a step found.
#[derive(Clone, Debug, PartialEq)]
pub enum StepAppended {
    Appended(Box<RunStepRecord>),
    /// The run is ended or expired: it takes no more steps.
    Closed(RunStatus),
    /// The run holds [`MAX_RUN_STEPS`] steps.
    Full,
}

/// What ending a run found.
#[derive(Clone, Debug, PartialEq)]
pub enum RunEnded {
    Ended(Box<RunRecord>),
    Closed(RunStatus),
}

fn run_record(model: agent_runs::Model) -> RunRecord {
    RunRecord {
        id: model.id,
        user_id: model.user_id,
        agent_id: model.agent_id,
        session_id: model.session_id,
        parent_run_id: model.parent_run_id,
        task: model.task,
        metadata: model.metadata,
        status: model.status.parse().unwrap_or(RunStatus::Open),
        outcome: model.outcome,
        created_at: model.created_at,
        last_activity_at: model.last_activity_at,
        ended_at: model.ended_at,
        step_count: u32::try_from(model.step_count).unwrap_or(0),
        credential: model.credential,
        channel: model.channel,
        trajectory_memory_id: model.trajectory_memory_id.map(MemoryId::from_uuid),
    }
}

fn step_record(model: run_steps::Model) -> RunStepRecord {
    RunStepRecord {
        id: model.id,
        run_id: model.run_id,
        seq: u32::try_from(model.seq).unwrap_or(0),
        step_type: model.step_type.parse().unwrap_or(RunStepType::Note),
        created_at: model.created_at,
        detail: model.detail,
    }
}

fn use_record(model: memory_uses::Model) -> MemoryUseRecord {
    MemoryUseRecord {
        id: model.id,
        memory_id: MemoryId::from_uuid(model.memory_id),
        version: model.memory_version,
        kind: model.use_kind.parse().unwrap_or(MemoryUseKind::Returned),
        used_at: model.used_at,
        recall_id: model.recall_id,
        run_id: model.run_id,
        user_id: model.user_id,
    }
}

fn idle_cutoff(now: DateTime<Utc>) -> DateTime<Utc> {
    now - chrono::Duration::hours(RUN_IDLE_EXPIRY_HOURS)
}

/// Store uses of memories inside a transaction or on the connection.
pub(crate) async fn insert_uses<C: ConnectionTrait>(
    connection: &C,
    scope: &ProjectScope,
    uses: &[NewMemoryUse],
) -> Result<(), StorageError> {
    for chunk in uses.chunks(500) {
        let models = chunk.iter().map(|used| memory_uses::ActiveModel {
            // Ids are in time of use (not of writing: recall events are written in batches
            // after their search), so newest-first pages are by id.
            id: Set(Uuid::new_v7(uuid::Timestamp::from_unix(
                uuid::NoContext,
                used.used_at.timestamp().max(0) as u64,
                used.used_at.timestamp_subsec_nanos(),
            ))),
            organization_id: Set(scope.organization_id().as_uuid()),
            project_id: Set(scope.project_id().as_uuid()),
            memory_id: Set(used.memory.memory_id.as_uuid()),
            memory_version: Set(used.memory.version),
            used_at: Set(used.used_at),
            use_kind: Set(used.kind.as_str().to_string()),
            recall_id: Set(used.recall_id),
            run_id: Set(used.run_id),
            user_id: Set(used.user_id.clone()),
        });
        memory_uses::Entity::insert_many(models)
            .exec_without_returning(connection)
            .await
            .map_err(StorageError::from_db)?;
    }
    Ok(())
}

/// Remove runs (with their steps and uses) created before `cutoff`, of no held end-user.
pub(crate) async fn delete_runs_before<C: ConnectionTrait>(
    connection: &C,
    scope: &ProjectScope,
    cutoff: DateTime<Utc>,
) -> Result<u64, StorageError> {
    let old_runs = || {
        agent_runs::Entity::find()
            .select_only()
            .column(agent_runs::Column::Id)
            .filter(crate::tenancy::in_project::<agent_runs::Entity>(scope))
            .filter(agent_runs::Column::CreatedAt.lt(cutoff))
            .filter(crate::subject_data::outside_hold(
                agent_runs::Column::UserId,
                scope,
            ))
            .into_query()
    };
    run_steps::Entity::delete_many()
        .filter(crate::tenancy::in_project::<run_steps::Entity>(scope))
        .filter(run_steps::Column::RunId.in_subquery(old_runs()))
        .exec(connection)
        .await
        .map_err(StorageError::from_db)?;
    memory_uses::Entity::delete_many()
        .filter(crate::tenancy::in_project::<memory_uses::Entity>(scope))
        .filter(memory_uses::Column::UsedAt.lt(cutoff))
        .filter(crate::subject_data::outside_hold(
            memory_uses::Column::UserId,
            scope,
        ))
        .exec(connection)
        .await
        .map_err(StorageError::from_db)?;
    Ok(agent_runs::Entity::delete_many()
        .filter(crate::tenancy::in_project::<agent_runs::Entity>(scope))
        .filter(agent_runs::Column::CreatedAt.lt(cutoff))
        .filter(crate::subject_data::outside_hold(
            agent_runs::Column::UserId,
            scope,
        ))
        .exec(connection)
        .await
        .map_err(StorageError::from_db)?
        .rows_affected)
}

/// One page of `query`'s rows newest first (by their time-ordered UUIDv7 `id_column`),
/// starting after (older than) `before`, and the cursor of the next page.
async fn newest_first_page<C: ConnectionTrait, E: EntityTrait, T>(
    connection: &C,
    query: sea_orm::Select<E>,
    id_column: E::Column,
    before: Option<Uuid>,
    limit: u64,
    record: impl Fn(E::Model) -> T,
    id_of: impl Fn(&T) -> Uuid,
) -> Result<(Vec<T>, Option<Uuid>), StorageError> {
    let query = match before {
        Some(before) => query.filter(id_column.lt(before)),
        None => query,
    };
    let mut page: Vec<T> = query
        .order_by_desc(id_column)
        .limit(limit + 1)
        .all(connection)
        .await
        .map_err(StorageError::from_db)?
        .into_iter()
        .map(record)
        .collect();
    let more = page.len() as u64 > limit;
    page.truncate(limit as usize);
    let cursor = if more { page.last().map(&id_of) } else { None };
    Ok((page, cursor))
}

impl Storage {
    /// Open a run in `scope`'s project.
    pub async fn insert_run(
        &self,
        scope: &ProjectScope,
        request: &StartRunRequest,
        opener: &RunOpener,
        now: DateTime<Utc>,
    ) -> Result<RunRecord, StorageError> {
        let _permit = self.write_permit().await;
        let model = agent_runs::ActiveModel {
            id: Set(Uuid::now_v7()),
            organization_id: Set(scope.organization_id().as_uuid()),
            project_id: Set(scope.project_id().as_uuid()),
            user_id: Set(request.user_id.as_ref().map(|id| id.as_str().to_string())),
            agent_id: Set(request.agent_id.as_ref().map(|id| id.as_str().to_string())),
            session_id: Set(request
                .session_id
                .as_ref()
                .map(|id| id.as_str().to_string())),
            parent_run_id: Set(request.parent_run_id),
            task: Set(request.task.clone()),
            metadata: Set(serde_json::Value::Object(request.metadata.clone())),
            status: Set(RunStatus::Open.as_str().to_string()),
            outcome: Set(None),
            created_at: Set(now),
            last_activity_at: Set(now),
            ended_at: Set(None),
            step_count: Set(0),
            credential: Set(opener.credential.clone()),
            channel: Set(opener.channel.clone()),
            trajectory_memory_id: Set(None),
        };
        let inserted = agent_runs::Entity::insert(model)
            .exec_with_returning(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        Ok(run_record(inserted))
    }

    /// One run `scope` may see (another project's, or another end-user's for a token, is
    /// missing).
    pub async fn run(
        &self,
        scope: &MemoryScope,
        run_id: Uuid,
    ) -> Result<Option<RunRecord>, StorageError> {
        Ok(agent_runs::Entity::find_by_id(run_id)
            .filter(crate::tenancy::within::<agent_runs::Entity>(scope))
            .one(&self.connection)
            .await
            .map_err(StorageError::from_db)?
            .map(run_record))
    }

    /// A page of runs, newest first, starting before `before`; and the next page's cursor.
    pub async fn runs(
        &self,
        scope: &MemoryScope,
        filter: &RunFilter,
        before: Option<Uuid>,
        limit: u64,
        now: DateTime<Utc>,
    ) -> Result<(Vec<RunRecord>, Option<Uuid>), StorageError> {
        let mut query =
            agent_runs::Entity::find().filter(crate::tenancy::within::<agent_runs::Entity>(scope));
        if let Some(user_id) = &filter.user_id {
            query = query.filter(agent_runs::Column::UserId.eq(user_id.as_str()));
        }
        if let Some(agent_id) = &filter.agent_id {
            query = query.filter(agent_runs::Column::AgentId.eq(agent_id.as_str()));
        }
        if let Some(session_id) = &filter.session_id {
            query = query.filter(agent_runs::Column::SessionId.eq(session_id.as_str()));
        }
        if let Some(from) = filter.from {
            query = query.filter(agent_runs::Column::CreatedAt.gte(from));
        }
        if let Some(to) = filter.to {
            query = query.filter(agent_runs::Column::CreatedAt.lt(to));
        }
        let open = RunStatus::Open.as_str();
        query = match filter.status {
            None => query,
            Some(RunStatus::Ended) => {
                query.filter(agent_runs::Column::Status.eq(RunStatus::Ended.as_str()))
            }
            Some(RunStatus::Open) => query
                .filter(agent_runs::Column::Status.eq(open))
                .filter(agent_runs::Column::LastActivityAt.gte(idle_cutoff(now))),
            Some(RunStatus::Expired) => query
                .filter(agent_runs::Column::Status.eq(open))
                .filter(agent_runs::Column::LastActivityAt.lt(idle_cutoff(now))),
        };
        newest_first_page(
            &self.connection,
            query,
            agent_runs::Column::Id,
            before,
            limit,
            run_record,
            |run| run.id,
        )
        .await
    }

    /// Append one step to an open run, in order, with the memory uses it records; the run's
    /// activity time moves so it does not expire while in use.
    pub async fn append_run_step(
        &self,
        scope: &MemoryScope,
        run_id: Uuid,
        step_type: RunStepType,
        detail: serde_json::Value,
        uses: &[NewMemoryUse],
        now: DateTime<Utc>,
    ) -> Result<StepAppended, StorageError> {
        let project = scope.project();
        let _permit = self.write_permit().await;
        let transaction = self.begin_write().await?;
        let run = agent_runs::Entity::find_by_id(run_id)
            .filter(crate::tenancy::within::<agent_runs::Entity>(scope))
            .one(&transaction)
            .await
            .map_err(StorageError::from_db)?
            .map(run_record)
            .ok_or(StorageError::NotFound(NotFoundKind::Run))?;
        let status = run.status_at(now);
        if status != RunStatus::Open {
            return Ok(StepAppended::Closed(status));
        }
        if run.step_count >= MAX_RUN_STEPS {
            return Ok(StepAppended::Full);
        }
        // The count moves only where it still is what was read: a concurrent step takes
        // the next place or this transaction retries on the unique (run, seq) index.
        let moved = agent_runs::Entity::update_many()
            .col_expr(
                agent_runs::Column::StepCount,
                Expr::value(run.step_count as i32 + 1),
            )
            .col_expr(agent_runs::Column::LastActivityAt, Expr::value(now))
            .filter(crate::tenancy::in_project::<agent_runs::Entity>(project))
            .filter(agent_runs::Column::Id.eq(run_id))
            .filter(agent_runs::Column::StepCount.eq(run.step_count as i32))
            .exec(&transaction)
            .await
            .map_err(StorageError::from_db)?;
        if moved.rows_affected != 1 {
            return Err(StorageError::WriteConflict(
                "another step of the run was recorded at the same moment".to_string(),
            ));
        }
        let step = run_steps::ActiveModel {
            id: Set(Uuid::now_v7()),
            organization_id: Set(project.organization_id().as_uuid()),
            project_id: Set(project.project_id().as_uuid()),
            run_id: Set(run_id),
            user_id: Set(run.user_id.clone()),
            seq: Set(run.step_count as i32 + 1),
            step_type: Set(step_type.as_str().to_string()),
            created_at: Set(now),
            detail: Set(detail),
        };
        let step = run_steps::Entity::insert(step)
            .exec_with_returning(&transaction)
            .await
            .map_err(StorageError::from_db)?;
        insert_uses(&transaction, project, uses).await?;
        transaction.commit().await.map_err(StorageError::from_db)?;
        Ok(StepAppended::Appended(Box::new(step_record(step))))
    }

    /// End an open run with its outcome (and the trajectory memory it left, if any).
    pub async fn end_run(
        &self,
        scope: &MemoryScope,
        run_id: Uuid,
        outcome: &str,
        trajectory_memory_id: Option<MemoryId>,
        now: DateTime<Utc>,
    ) -> Result<RunEnded, StorageError> {
        let Some(run) = self.run(scope, run_id).await? else {
            return Err(StorageError::NotFound(NotFoundKind::Run));
        };
        let status = run.status_at(now);
        if status != RunStatus::Open {
            return Ok(RunEnded::Closed(status));
        }
        let _permit = self.write_permit().await;
        let ended = agent_runs::Entity::update_many()
            .col_expr(
                agent_runs::Column::Status,
                Expr::value(RunStatus::Ended.as_str()),
            )
            .col_expr(agent_runs::Column::Outcome, Expr::value(outcome))
            .col_expr(agent_runs::Column::EndedAt, Expr::value(now))
            .col_expr(agent_runs::Column::LastActivityAt, Expr::value(now))
            .col_expr(
                agent_runs::Column::TrajectoryMemoryId,
                Expr::value(trajectory_memory_id.map(|id| id.as_uuid())),
            )
            .filter(crate::tenancy::within::<agent_runs::Entity>(scope))
            .filter(agent_runs::Column::Id.eq(run_id))
            .filter(agent_runs::Column::Status.eq(RunStatus::Open.as_str()))
            .exec(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        drop(_permit);
        if ended.rows_affected == 0 {
            return Ok(RunEnded::Closed(RunStatus::Ended));
        }
        let run = self
            .run(scope, run_id)
            .await?
            .ok_or(StorageError::NotFound(NotFoundKind::Run))?;
        Ok(RunEnded::Ended(Box::new(run)))
    }

    /// Name the trajectory memory an ended run left.
    pub async fn set_run_trajectory(
        &self,
        scope: &MemoryScope,
        run_id: Uuid,
        memory_id: MemoryId,
    ) -> Result<(), StorageError> {
        let _permit = self.write_permit().await;
        agent_runs::Entity::update_many()
            .col_expr(
                agent_runs::Column::TrajectoryMemoryId,
                Expr::value(memory_id.as_uuid()),
            )
            .filter(crate::tenancy::within::<agent_runs::Entity>(scope))
            .filter(agent_runs::Column::Id.eq(run_id))
            .exec(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        Ok(())
    }

    /// Every step of a run `scope` may see, in order.
    pub async fn run_steps(
        &self,
        scope: &MemoryScope,
        run_id: Uuid,
    ) -> Result<Vec<RunStepRecord>, StorageError> {
        Ok(run_steps::Entity::find()
            .filter(crate::tenancy::within::<run_steps::Entity>(scope))
            .filter(run_steps::Column::RunId.eq(run_id))
            .order_by_asc(run_steps::Column::Seq)
            .all(&self.connection)
            .await
            .map_err(StorageError::from_db)?
            .into_iter()
            .map(step_record)
            .collect())
    }

    /// The memories among `ids` that `scope` may see, in any state.
    pub async fn memories_by_id(
        &self,
        scope: &MemoryScope,
        ids: &[MemoryId],
    ) -> Result<HashMap<MemoryId, Memory>, StorageError> {
        let mut found = HashMap::with_capacity(ids.len());
        for chunk in ids.chunks(500) {
            let models = memories::Entity::find()
                .filter(crate::tenancy::within::<memories::Entity>(scope))
                .filter(memories::Column::Id.is_in(chunk.iter().map(|id| id.as_uuid())))
                .all(&self.connection)
                .await
                .map_err(StorageError::from_db)?;
            for model in models {
                let memory = crate::memories::memory_from_model(model)?;
                found.insert(memory.id, memory);
            }
        }
        Ok(found)
    }

    /// The text each of these memories had at each version, where the history keeps it.
    pub async fn memory_texts_at_versions(
        &self,
        scope: &ProjectScope,
        ids: &[MemoryId],
    ) -> Result<HashMap<(MemoryId, i64), String>, StorageError> {
        let mut texts = HashMap::new();
        for chunk in ids.chunks(500) {
            let rows = memory_history::Entity::find()
                .filter(crate::tenancy::in_project::<memory_history::Entity>(scope))
                .filter(memory_history::Column::MemoryId.is_in(chunk.iter().map(|id| id.as_uuid())))
                .order_by_asc(memory_history::Column::Id)
                .all(&self.connection)
                .await
                .map_err(StorageError::from_db)?;
            for row in rows {
                if let Some(content) = row.content {
                    texts.insert((MemoryId::from_uuid(row.memory_id), row.version), content);
                }
            }
        }
        Ok(texts)
    }

    /// Store uses of memories (the recall recorder's batches, outside a run step).
    pub async fn insert_memory_uses(
        &self,
        scope: &ProjectScope,
        uses: &[NewMemoryUse],
    ) -> Result<(), StorageError> {
        if uses.is_empty() {
            return Ok(());
        }
        let _permit = self.write_permit().await;
        insert_uses(&self.connection, scope, uses).await
    }

    /// A page of one memory's uses `scope` may see, newest first, before `before`.
    pub async fn memory_uses(
        &self,
        scope: &MemoryScope,
        memory_id: MemoryId,
        before: Option<Uuid>,
        limit: u64,
    ) -> Result<(Vec<MemoryUseRecord>, Option<Uuid>), StorageError> {
        let query = memory_uses::Entity::find()
            .filter(crate::tenancy::within::<memory_uses::Entity>(scope))
            .filter(memory_uses::Column::MemoryId.eq(memory_id.as_uuid()));
        newest_first_page(
            &self.connection,
            query,
            memory_uses::Column::Id,
            before,
            limit,
            use_record,
            |used| used.id,
        )
        .await
    }

    /// How often one memory was used since `since`: recalls that returned it, contexts that
    /// packed it, and distinct runs it reached.
    pub async fn memory_impact_counts(
        &self,
        scope: &MemoryScope,
        memory_id: MemoryId,
        since: DateTime<Utc>,
    ) -> Result<MemoryImpactCounts, StorageError> {
        let of_memory = || {
            memory_uses::Entity::find()
                .filter(crate::tenancy::within::<memory_uses::Entity>(scope))
                .filter(memory_uses::Column::MemoryId.eq(memory_id.as_uuid()))
                .filter(memory_uses::Column::UsedAt.gte(since))
        };
        // Counted in the database: a much-used memory has many uses, the answer three numbers.
        let count_distinct = |query: sea_orm::Select<memory_uses::Entity>,
                              column: memory_uses::Column| {
            let query = query
                .select_only()
                .column_as(Expr::col(column).count_distinct(), "distinct_count")
                .into_tuple::<i64>();
            async move {
                query
                    .one(&self.connection)
                    .await
                    .map_err(StorageError::from_db)
                    .map(|count| count.unwrap_or(0).max(0) as u64)
            }
        };
        let of_kind = |kind: MemoryUseKind| {
            of_memory().filter(memory_uses::Column::UseKind.eq(kind.as_str()))
        };
        let recalls = count_distinct(
            of_kind(MemoryUseKind::Returned),
            memory_uses::Column::RecallId,
        )
        .await?;
        let contexts = count_distinct(
            of_kind(MemoryUseKind::Packed),
            memory_uses::Column::RecallId,
        )
        .await?;
        let runs = count_distinct(of_memory(), memory_uses::Column::RunId).await?;
        Ok(MemoryImpactCounts {
            recalls,
            contexts,
            runs,
        })
    }

    /// A page of recall events `scope` may see, newest first, before `before`.
    pub async fn recall_events_page(
        &self,
        scope: &MemoryScope,
        filter: &RecallFilter,
        before: Option<Uuid>,
        limit: u64,
    ) -> Result<(Vec<crate::recall_quality::RecallEventRecord>, Option<Uuid>), StorageError> {
        let mut query = recall_events::Entity::find()
            .filter(crate::tenancy::within::<recall_events::Entity>(scope));
        if let Some(user_id) = &filter.user_id {
            query = query.filter(recall_events::Column::UserId.eq(user_id.as_str()));
        }
        if let Some(session_id) = &filter.session_id {
            query = query.filter(recall_events::Column::SessionId.eq(session_id.as_str()));
        }
        if let Some(run_id) = filter.run_id {
            query = query.filter(recall_events::Column::RunId.eq(run_id));
        }
        if let Some(profile) = &filter.profile {
            query = query.filter(recall_events::Column::Profile.eq(profile.as_str()));
        }
        if let Some(from) = filter.from {
            query = query.filter(recall_events::Column::CreatedAt.gte(from));
        }
        if let Some(to) = filter.to {
            query = query.filter(recall_events::Column::CreatedAt.lt(to));
        }
        if let Some(memory_id) = filter.memory_id {
            let recalls_of_memory = memory_uses::Entity::find()
                .select_only()
                .column(memory_uses::Column::RecallId)
                .filter(crate::tenancy::within::<memory_uses::Entity>(scope))
                .filter(memory_uses::Column::MemoryId.eq(memory_id.as_uuid()))
                .filter(memory_uses::Column::RecallId.is_not_null())
                .into_query();
            query = query.filter(
                Condition::all().add(recall_events::Column::Id.in_subquery(recalls_of_memory)),
            );
        }
        newest_first_page(
            &self.connection,
            query,
            recall_events::Column::Id,
            before,
            limit,
            crate::recall_quality::recall_event_record,
            |event| event.id,
        )
        .await
    }

    /// Every run of an end-user with its steps, oldest first (subject export).
    pub async fn runs_of_subject(
        &self,
        scope: &ProjectScope,
        user_id: &str,
    ) -> Result<Vec<(RunRecord, Vec<RunStepRecord>)>, StorageError> {
        let runs = agent_runs::Entity::find()
            .filter(crate::tenancy::in_project::<agent_runs::Entity>(scope))
            .filter(agent_runs::Column::UserId.eq(user_id))
            .order_by_asc(agent_runs::Column::Id)
            .all(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        let mut exported = Vec::with_capacity(runs.len());
        for run in runs {
            let steps = run_steps::Entity::find()
                .filter(crate::tenancy::in_project::<run_steps::Entity>(scope))
                .filter(run_steps::Column::RunId.eq(run.id))
                .order_by_asc(run_steps::Column::Seq)
                .all(&self.connection)
                .await
                .map_err(StorageError::from_db)?
                .into_iter()
                .map(step_record)
                .collect();
            exported.push((run_record(run), steps));
        }
        Ok(exported)
    }

    /// Remove an end-user's runs, steps and memory uses, and every use of `memory_ids` (the
    /// subject's memories) whoever's it was (subject erasure); how many rows.
    pub async fn delete_runs_of_subject(
        &self,
        scope: &ProjectScope,
        user_id: &str,
        memory_ids: &[MemoryId],
    ) -> Result<u64, StorageError> {
        let _permit = self.write_permit().await;
        let transaction = self.begin_write().await?;
        let steps = run_steps::Entity::delete_many()
            .filter(crate::tenancy::in_project::<run_steps::Entity>(scope))
            .filter(run_steps::Column::UserId.eq(user_id))
            .exec(&transaction)
            .await
            .map_err(StorageError::from_db)?
            .rows_affected;
        let uses = memory_uses::Entity::delete_many()
            .filter(crate::tenancy::in_project::<memory_uses::Entity>(scope))
            .filter(memory_uses::Column::UserId.eq(user_id))
            .exec(&transaction)
            .await
            .map_err(StorageError::from_db)?
            .rows_affected;
        let mut uses_of_memories = 0;
        for chunk in memory_ids.chunks(500) {
            uses_of_memories += memory_uses::Entity::delete_many()
                .filter(crate::tenancy::in_project::<memory_uses::Entity>(scope))
                .filter(memory_uses::Column::MemoryId.is_in(chunk.iter().map(|id| id.as_uuid())))
                .exec(&transaction)
                .await
                .map_err(StorageError::from_db)?
                .rows_affected;
        }
        let runs = agent_runs::Entity::delete_many()
            .filter(crate::tenancy::in_project::<agent_runs::Entity>(scope))
            .filter(agent_runs::Column::UserId.eq(user_id))
            .exec(&transaction)
            .await
            .map_err(StorageError::from_db)?
            .rows_affected;
        transaction.commit().await.map_err(StorageError::from_db)?;
        Ok(runs + steps + uses + uses_of_memories)
    }

    /// Runs, steps and uses of an end-user, and uses of `memory_ids`, still stored (erasure
    /// verification).
    pub async fn count_runs_of_subject(
        &self,
        scope: &ProjectScope,
        user_id: &str,
        memory_ids: &[MemoryId],
    ) -> Result<u64, StorageError> {
        let runs = agent_runs::Entity::find()
            .filter(crate::tenancy::in_project::<agent_runs::Entity>(scope))
            .filter(agent_runs::Column::UserId.eq(user_id))
            .count(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        let steps = run_steps::Entity::find()
            .filter(crate::tenancy::in_project::<run_steps::Entity>(scope))
            .filter(run_steps::Column::UserId.eq(user_id))
            .count(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        let uses = memory_uses::Entity::find()
            .filter(crate::tenancy::in_project::<memory_uses::Entity>(scope))
            .filter(memory_uses::Column::UserId.eq(user_id))
            .count(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        let mut uses_of_memories = 0;
        for chunk in memory_ids.chunks(500) {
            uses_of_memories += memory_uses::Entity::find()
                .filter(crate::tenancy::in_project::<memory_uses::Entity>(scope))
                .filter(memory_uses::Column::MemoryId.is_in(chunk.iter().map(|id| id.as_uuid())))
                .count(&self.connection)
                .await
                .map_err(StorageError::from_db)?;
        }
        Ok(runs + steps + uses + uses_of_memories)
    }

    /// Runs created before `cutoff`, of no held end-user (what the next sweep removes).
    pub(crate) async fn count_runs_before(
        &self,
        scope: &ProjectScope,
        cutoff: DateTime<Utc>,
    ) -> Result<u64, StorageError> {
        agent_runs::Entity::find()
            .filter(crate::tenancy::in_project::<agent_runs::Entity>(scope))
            .filter(agent_runs::Column::CreatedAt.lt(cutoff))
            .filter(crate::subject_data::outside_hold(
                agent_runs::Column::UserId,
                scope,
            ))
            .count(&self.connection)
            .await
            .map_err(StorageError::from_db)
    }
}
