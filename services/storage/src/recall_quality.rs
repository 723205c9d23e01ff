//! Recall quality in the database: recall events (one per search, erased with their
//! end-user, purged after the project's retention), named retrieval profiles, evaluation sets
//! with their labelled cases, and evaluation runs. Every function takes the project scope.

use crate::entities::{
    eval_cases, eval_runs, eval_sets, feedback, memories, recall_events, retrieval_profiles,
};
use crate::{Storage, StorageError};
use chrono::{DateTime, Utc};
use engram_core::recall::EvalTrigger;
use engram_core::{MemoryId, MemoryState, ProjectScope, TaskKind, TaskStatus};
use engram_core::{MemoryScope, NotFoundKind};
use sea_orm::sea_query::Expr;
use sea_orm::{
    ActiveValue::Set, ColumnTrait, EntityTrait, PaginatorTrait, QueryFilter, QueryOrder,
    QuerySelect,
};
use std::collections::HashMap;
use uuid::Uuid;

pub(crate) fn recall_event_record(model: recall_events::Model) -> RecallEventRecord {
    RecallEventRecord {
        id: model.id,
        created_at: model.created_at,
        user_id: model.user_id,
        agent_id: model.agent_id,
        session_id: model.session_id,
        query_text: model.query_text,
        profile: model.profile,
        retrieval: model.retrieval,
        filters: model.filters,
        results: model.results,
        result_count: u32::try_from(model.result_count).unwrap_or(0),
        top_score: model.top_score,
        total_micros: u64::try_from(model.total_micros).unwrap_or(0),
        timings: model.timings,
        trace_id: model.trace_id,
        credential: model.credential,
        channel: model.channel,
        run_id: model.run_id,
        purpose: model.purpose,
    }
}

fn profile_record(model: retrieval_profiles::Model) -> RetrievalProfileRecord {
    RetrievalProfileRecord {
        name: model.name,
        parameters: model.parameters,
        traffic_share: model.traffic_share,
        created_at: model.created_at,
        updated_at: model.updated_at,
    }
}

/// An evaluation set's settings.
#[derive(Clone, Debug, PartialEq)]
pub struct NewEvalSet {
    pub name: String,
    pub k: u32,
    pub regression_threshold: f64,
    pub schedule_interval_secs: Option<u64>,
    pub profile: Option<String>,
}

pub use engram_core::recall::NewEvalCase;
pub use engram_core::recall::{
    EvalCaseRecord, EvalRunRecord, EvalSetRecord, MemoryFate, NewRecallEvent, RecallEventRecord,
    RetrievalProfileRecord,
};

/// What a finished run found.
#[derive(Clone, Debug, PartialEq)]
pub struct EvalRunOutcome {
    pub metrics: serde_json::Value,
    pub comparison: Option<serde_json::Value>,
    pub regression: bool,
    pub regression_reasons: Vec<String>,
}

fn run_record(model: eval_runs::Model) -> Result<EvalRunRecord, StorageError> {
    let corrupt = |column: &str, error: String| {
        StorageError::Internal(format!(
            "stored evaluation run {column} is invalid: {error}"
        ))
    };
    Ok(EvalRunRecord {
        id: model.id,
        set_id: model.set_id,
        task_id: model.task_id,
        profile: model.profile,
        compare_profile: model.compare_profile,
        trigger: model
            .trigger
            .parse()
            .map_err(|error| corrupt("trigger", error))?,
        status: model
            .status
            .parse()
            .map_err(|error| corrupt("status", error))?,
        metrics: model.metrics,
        comparison: model.comparison,
        regression: model.regression,
        regression_reasons: model
            .regression_reasons
            .and_then(|reasons| serde_json::from_value(reasons).ok())
            .unwrap_or_default(),
        error: model.error,
        created_at: model.created_at,
        finished_at: model.finished_at,
    })
}

pub(crate) fn case_record(model: eval_cases::Model) -> EvalCaseRecord {
    let strings = |value: serde_json::Value| -> Vec<String> {
        serde_json::from_value(value).unwrap_or_default()
    };
    EvalCaseRecord {
        id: model.id,
        case: NewEvalCase {
            query: model.query,
            user_id: model.user_id,
            agent_id: model.agent_id,
            filters: model.filters,
            expected_memory_ids: strings(model.expected_memory_ids),
            expected_contents: strings(model.expected_contents),
            query_vector: model
                .query_vector
                .and_then(|vector| serde_json::from_value(vector).ok()),
        },
    }
}

/// Longest a recall-event read may be (metrics over more are computed on the newest).
pub const MAX_RECALL_EVENTS_READ: u64 = 200_000;

impl Storage {
    /// Store a batch of recall events, of any projects (the recorder batches them).
    pub async fn insert_recall_events(
        &self,
        events: Vec<(ProjectScope, NewRecallEvent)>,
    ) -> Result<(), StorageError> {
        if events.is_empty() {
            return Ok(());
        }
        let _permit = self.write_permit().await;
        let transaction = self.begin_write().await?;
        for (scope, event) in &events {
            crate::runs::insert_uses(&transaction, scope, &event.memory_uses()).await?;
        }
        let models = events
            .into_iter()
            .map(|(scope, event)| recall_events::ActiveModel {
                id: Set(event.id),
                organization_id: Set(scope.organization_id().as_uuid()),
                project_id: Set(scope.project_id().as_uuid()),
                created_at: Set(event.created_at),
                user_id: Set(event.user_id),
                agent_id: Set(event.agent_id),
                session_id: Set(event.session_id),
                query_text: Set(event.query_text),
                profile: Set(event.profile),
                retrieval: Set(event.retrieval),
                filters: Set(event.filters),
                results: Set(event.results),
                result_count: Set(i32::try_from(event.result_count).unwrap_or(i32::MAX)),
                top_score: Set(event.top_score),
                total_micros: Set(i64::try_from(event.total_micros).unwrap_or(i64::MAX)),
                timings: Set(event.timings),
                trace_id: Set(event.trace_id),
                credential: Set(event.credential),
                channel: Set(event.channel),
                run_id: Set(event.run_id),
                purpose: Set(event.purpose),
            });
        recall_events::Entity::insert_many(models)
            .exec_without_returning(&transaction)
            .await
            .map_err(StorageError::from_db)?;
        transaction.commit().await.map_err(StorageError::from_db)?;
        Ok(())
    }

    /// One recall event of `scope`'s project.
    pub async fn recall_event(
        &self,
        memory_scope: &MemoryScope,
        recall_id: Uuid,
    ) -> Result<Option<RecallEventRecord>, StorageError> {
        let query = recall_events::Entity::find_by_id(recall_id).filter(crate::tenancy::within::<
            recall_events::Entity,
        >(memory_scope));
        Ok(query
            .one(&self.connection)
            .await
            .map_err(StorageError::from_db)?
            .map(recall_event_record))
    }

    /// Recall events created in `[from, to)`, newest first, at most
    /// [`MAX_RECALL_EVENTS_READ`]; of one profile when given.
    pub async fn recall_events_between(
        &self,
        scope: &ProjectScope,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        profile: Option<&str>,
    ) -> Result<Vec<RecallEventRecord>, StorageError> {
        let mut query = recall_events::Entity::find()
            .filter(crate::tenancy::in_project::<recall_events::Entity>(scope))
            .filter(recall_events::Column::CreatedAt.gte(from))
            .filter(recall_events::Column::CreatedAt.lt(to));
        if let Some(profile) = profile {
            query = query.filter(recall_events::Column::Profile.eq(profile));
        }
        Ok(query
            .order_by_desc(recall_events::Column::CreatedAt)
            .limit(MAX_RECALL_EVENTS_READ)
            .all(&self.connection)
            .await
            .map_err(StorageError::from_db)?
            .into_iter()
            .map(recall_event_record)
            .collect())
    }

    /// Every recall event of an end-user, oldest first (subject export).
    pub async fn recall_events_of_subject(
        &self,
        scope: &ProjectScope,
        user_id: &str,
    ) -> Result<Vec<RecallEventRecord>, StorageError> {
        Ok(recall_events::Entity::find()
            .filter(crate::tenancy::in_project::<recall_events::Entity>(scope))
            .filter(recall_events::Column::UserId.eq(user_id))
            .order_by_asc(recall_events::Column::Id)
            .all(&self.connection)
            .await
            .map_err(StorageError::from_db)?
            .into_iter()
            .map(recall_event_record)
            .collect())
    }

    /// Remove an end-user's recall events (subject erasure).
    pub async fn delete_recall_events_of_subject(
        &self,
        scope: &ProjectScope,
        user_id: &str,
    ) -> Result<u64, StorageError> {
        let _permit = self.write_permit().await;
        let deleted = recall_events::Entity::delete_many()
            .filter(crate::tenancy::in_project::<recall_events::Entity>(scope))
            .filter(recall_events::Column::UserId.eq(user_id))
            .exec(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        Ok(deleted.rows_affected)
    }

    /// Recall events of an end-user still stored (erasure verification).
    pub async fn count_recall_events_of_subject(
        &self,
        scope: &ProjectScope,
        user_id: &str,
    ) -> Result<u64, StorageError> {
        recall_events::Entity::find()
            .filter(crate::tenancy::in_project::<recall_events::Entity>(scope))
            .filter(recall_events::Column::UserId.eq(user_id))
            .count(&self.connection)
            .await
            .map_err(StorageError::from_db)
    }

    /// The state and last change of each of `ids` that still exists in `scope`'s project.
    pub async fn memory_fates(
        &self,
        scope: &ProjectScope,
        ids: &[MemoryId],
    ) -> Result<HashMap<MemoryId, MemoryFate>, StorageError> {
        let mut fates = HashMap::with_capacity(ids.len());
        for chunk in ids.chunks(500) {
            let rows = memories::Entity::find()
                .select_only()
                .column(memories::Column::Id)
                .column(memories::Column::State)
                .column(memories::Column::UpdatedAt)
                .filter(crate::tenancy::in_project::<memories::Entity>(scope))
                .filter(
                    memories::Column::Id
                        .is_in(chunk.iter().map(|id| id.as_uuid()).collect::<Vec<_>>()),
                )
                .into_tuple::<(Uuid, String, DateTime<Utc>)>()
                .all(&self.connection)
                .await
                .map_err(StorageError::from_db)?;
            for (id, state, updated_at) in rows {
                if let Ok(state) = state.parse::<MemoryState>() {
                    fates.insert(MemoryId::from_uuid(id), MemoryFate { state, updated_at });
                }
            }
        }
        Ok(fates)
    }

    /// Feedback given on any of these recalls (or on a memory within one).
    pub async fn feedback_on_recalls(
        &self,
        scope: &ProjectScope,
        recall_ids: &[Uuid],
    ) -> Result<Vec<crate::feedback::FeedbackRecord>, StorageError> {
        let mut found = Vec::new();
        for chunk in recall_ids.chunks(500) {
            let rows = feedback::Entity::find()
                .filter(crate::tenancy::in_project::<feedback::Entity>(scope))
                .filter(feedback::Column::RecallId.is_in(chunk.to_vec()))
                .all(&self.connection)
                .await
                .map_err(StorageError::from_db)?;
            found.extend(rows.into_iter().map(crate::feedback::record));
        }
        Ok(found)
    }

    // --- retrieval profiles ---

    /// Create or replace a profile. The traffic shares of all profiles may add up to 1 at
    /// most; a change that would pass it is refused and nothing changes.
    pub async fn put_retrieval_profile(
        &self,
        scope: &ProjectScope,
        name: &str,
        parameters: serde_json::Value,
        traffic_share: f64,
    ) -> Result<RetrievalProfileRecord, StorageError> {
        let _permit = self.write_permit().await;
        let transaction = self.begin_write().await?;
        let existing = retrieval_profiles::Entity::find()
            .filter(crate::tenancy::in_project::<retrieval_profiles::Entity>(
                scope,
            ))
            .all(&transaction)
            .await
            .map_err(StorageError::from_db)?;
        let others: f64 = existing
            .iter()
            .filter(|profile| profile.name != name)
            .map(|profile| profile.traffic_share)
            .sum();
        if others + traffic_share > 1.0 + 1e-9 {
            return Err(StorageError::Refused(format!(
                "the other profiles already take {:.0} % of the traffic: at most {:.0} % is left for this one",
                others * 100.0,
                ((1.0 - others) * 100.0).max(0.0)
            )));
        }
        let now = Utc::now();
        match existing.into_iter().find(|profile| profile.name == name) {
            Some(current) => {
                retrieval_profiles::Entity::update_many()
                    .col_expr(
                        retrieval_profiles::Column::Parameters,
                        Expr::value(parameters),
                    )
                    .col_expr(
                        retrieval_profiles::Column::TrafficShare,
                        Expr::value(traffic_share),
                    )
                    .col_expr(retrieval_profiles::Column::UpdatedAt, Expr::value(now))
                    .filter(retrieval_profiles::Column::Id.eq(current.id))
                    .exec(&transaction)
                    .await
                    .map_err(StorageError::from_db)?;
            }
            None => {
                retrieval_profiles::Entity::insert(retrieval_profiles::ActiveModel {
                    id: Set(Uuid::now_v7()),
                    organization_id: Set(scope.organization_id().as_uuid()),
                    project_id: Set(scope.project_id().as_uuid()),
                    name: Set(name.to_string()),
                    parameters: Set(parameters),
                    traffic_share: Set(traffic_share),
                    created_at: Set(now),
                    updated_at: Set(now),
                })
                .exec_without_returning(&transaction)
                .await
                .map_err(StorageError::from_db)?;
            }
        }
        transaction.commit().await.map_err(StorageError::from_db)?;
        self.retrieval_profile(scope, name)
            .await?
            .ok_or(StorageError::NotFound(NotFoundKind::RetrievalProfile))
    }

    pub async fn retrieval_profiles(
        &self,
        scope: &ProjectScope,
    ) -> Result<Vec<RetrievalProfileRecord>, StorageError> {
        Ok(retrieval_profiles::Entity::find()
            .filter(crate::tenancy::in_project::<retrieval_profiles::Entity>(
                scope,
            ))
            .order_by_asc(retrieval_profiles::Column::Name)
            .all(&self.connection)
            .await
            .map_err(StorageError::from_db)?
            .into_iter()
            .map(profile_record)
            .collect())
    }

    pub async fn retrieval_profile(
        &self,
        scope: &ProjectScope,
        name: &str,
    ) -> Result<Option<RetrievalProfileRecord>, StorageError> {
        Ok(retrieval_profiles::Entity::find()
            .filter(crate::tenancy::in_project::<retrieval_profiles::Entity>(
                scope,
            ))
            .filter(retrieval_profiles::Column::Name.eq(name))
            .one(&self.connection)
            .await
            .map_err(StorageError::from_db)?
            .map(profile_record))
    }

    /// Remove a profile; false when there was none of that name.
    pub async fn delete_retrieval_profile(
        &self,
        scope: &ProjectScope,
        name: &str,
    ) -> Result<bool, StorageError> {
        let _permit = self.write_permit().await;
        let deleted = retrieval_profiles::Entity::delete_many()
            .filter(crate::tenancy::in_project::<retrieval_profiles::Entity>(
                scope,
            ))
            .filter(retrieval_profiles::Column::Name.eq(name))
            .exec(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        Ok(deleted.rows_affected > 0)
    }

    // --- evaluation sets ---

    /// Create a set with its first cases, in one transaction. A name already used in the
    /// project is refused.
    pub async fn create_eval_set(
        &self,
        scope: &ProjectScope,
        set: NewEvalSet,
        cases: Vec<NewEvalCase>,
    ) -> Result<EvalSetRecord, StorageError> {
        let _permit = self.write_permit().await;
        let transaction = self.begin_write().await?;
        let taken = eval_sets::Entity::find()
            .filter(crate::tenancy::in_project::<eval_sets::Entity>(scope))
            .filter(eval_sets::Column::Name.eq(set.name.as_str()))
            .count(&transaction)
            .await
            .map_err(StorageError::from_db)?;
        if taken > 0 {
            return Err(StorageError::Refused(format!(
                "an evaluation set named {:?} already exists in this project",
                set.name
            )));
        }
        let id = Uuid::now_v7();
        eval_sets::Entity::insert(eval_sets::ActiveModel {
            id: Set(id),
            organization_id: Set(scope.organization_id().as_uuid()),
            project_id: Set(scope.project_id().as_uuid()),
            name: Set(set.name),
            k: Set(i32::try_from(set.k).unwrap_or(i32::MAX)),
            regression_threshold: Set(set.regression_threshold),
            schedule_interval_secs: Set(set
                .schedule_interval_secs
                .map(|seconds| i64::try_from(seconds).unwrap_or(i64::MAX))),
            profile: Set(set.profile),
            created_at: Set(Utc::now()),
        })
        .exec_without_returning(&transaction)
        .await
        .map_err(StorageError::from_db)?;
        insert_cases(&transaction, scope, id, cases).await?;
        transaction.commit().await.map_err(StorageError::from_db)?;
        self.eval_set(scope, id)
            .await?
            .ok_or(StorageError::NotFound(NotFoundKind::EvaluationSet))
    }

    /// Add cases to a set.
    pub async fn add_eval_cases(
        &self,
        scope: &ProjectScope,
        set_id: Uuid,
        cases: Vec<NewEvalCase>,
    ) -> Result<EvalSetRecord, StorageError> {
        if self.eval_set(scope, set_id).await?.is_none() {
            return Err(StorageError::NotFound(NotFoundKind::EvaluationSet));
        }
        let _permit = self.write_permit().await;
        let transaction = self.begin_write().await?;
        insert_cases(&transaction, scope, set_id, cases).await?;
        transaction.commit().await.map_err(StorageError::from_db)?;
        drop(_permit);
        self.eval_set(scope, set_id)
            .await?
            .ok_or(StorageError::NotFound(NotFoundKind::EvaluationSet))
    }

    pub async fn eval_set(
        &self,
        scope: &ProjectScope,
        set_id: Uuid,
    ) -> Result<Option<EvalSetRecord>, StorageError> {
        let Some(model) = eval_sets::Entity::find_by_id(set_id)
            .filter(crate::tenancy::in_project::<eval_sets::Entity>(scope))
            .one(&self.connection)
            .await
            .map_err(StorageError::from_db)?
        else {
            return Ok(None);
        };
        let cases = eval_cases::Entity::find()
            .filter(crate::tenancy::in_project::<eval_cases::Entity>(scope))
            .filter(eval_cases::Column::SetId.eq(set_id))
            .count(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        Ok(Some(set_record(model, cases)))
    }

    pub async fn eval_sets(
        &self,
        scope: &ProjectScope,
    ) -> Result<Vec<EvalSetRecord>, StorageError> {
        let models = eval_sets::Entity::find()
            .filter(crate::tenancy::in_project::<eval_sets::Entity>(scope))
            .order_by_asc(eval_sets::Column::Name)
            .all(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        // One grouped count for all sets, not one query per set.
        let counts: HashMap<Uuid, i64> = eval_cases::Entity::find()
            .select_only()
            .column(eval_cases::Column::SetId)
            .column_as(eval_cases::Column::Id.count(), "cases")
            .filter(crate::tenancy::in_project::<eval_cases::Entity>(scope))
            .group_by(eval_cases::Column::SetId)
            .into_tuple::<(Uuid, i64)>()
            .all(&self.connection)
            .await
            .map_err(StorageError::from_db)?
            .into_iter()
            .collect();
        Ok(models
            .into_iter()
            .map(|model| {
                let cases = counts.get(&model.id).copied().unwrap_or(0);
                set_record(model, u64::try_from(cases).unwrap_or(0))
            })
            .collect())
    }

    pub async fn eval_cases(
        &self,
        scope: &ProjectScope,
        set_id: Uuid,
    ) -> Result<Vec<EvalCaseRecord>, StorageError> {
        Ok(eval_cases::Entity::find()
            .filter(crate::tenancy::in_project::<eval_cases::Entity>(scope))
            .filter(eval_cases::Column::SetId.eq(set_id))
            .order_by_asc(eval_cases::Column::Id)
            .all(&self.connection)
            .await
            .map_err(StorageError::from_db)?
            .into_iter()
            .map(case_record)
            .collect())
    }

    /// Queue a run of a set: its task (whose subject is the run id), then the run. A task
    /// left without its run by a crash in between fails when claimed, telling why.
    #[allow(clippy::too_many_arguments)]
    pub async fn queue_eval_run(
        &self,
        scope: &ProjectScope,
        set_id: Uuid,
        profile: &str,
        compare_profile: Option<&str>,
        trigger: EvalTrigger,
        task_kind: TaskKind,
        request_id: Option<&str>,
    ) -> Result<EvalRunRecord, StorageError> {
        if self.eval_set(scope, set_id).await?.is_none() {
            return Err(StorageError::NotFound(NotFoundKind::EvaluationSet));
        }
        let run_id = Uuid::now_v7();
        // The run and its task in one transaction: a task committed before its run was
        // claimed in between, failed ("does not exist") and left the run queued forever.
        let _permit = self.write_permit().await;
        let transaction = self.begin_write().await?;
        let task_id = crate::tasks::insert_task(
            &transaction,
            scope,
            task_kind,
            Some(&run_id.to_string()),
            request_id,
        )
        .await?;
        eval_runs::Entity::insert(eval_runs::ActiveModel {
            id: Set(run_id),
            set_id: Set(set_id),
            organization_id: Set(scope.organization_id().as_uuid()),
            project_id: Set(scope.project_id().as_uuid()),
            task_id: Set(task_id),
            profile: Set(profile.to_string()),
            compare_profile: Set(compare_profile.map(str::to_string)),
            trigger: Set(trigger.as_str().to_string()),
            status: Set(TaskStatus::Queued.as_str().to_string()),
            metrics: Set(None),
            comparison: Set(None),
            regression: Set(false),
            regression_reasons: Set(None),
            error: Set(None),
            created_at: Set(Utc::now()),
            finished_at: Set(None),
        })
        .exec_without_returning(&transaction)
        .await
        .map_err(StorageError::from_db)?;
        transaction.commit().await.map_err(StorageError::from_db)?;
        drop(_permit);
        self.eval_run(scope, run_id)
            .await?
            .ok_or(StorageError::NotFound(NotFoundKind::EvaluationRun))
    }

    pub async fn eval_run(
        &self,
        scope: &ProjectScope,
        run_id: Uuid,
    ) -> Result<Option<EvalRunRecord>, StorageError> {
        eval_runs::Entity::find_by_id(run_id)
            .filter(crate::tenancy::in_project::<eval_runs::Entity>(scope))
            .one(&self.connection)
            .await
            .map_err(StorageError::from_db)?
            .map(run_record)
            .transpose()
    }

    /// The runs of a set, newest first.
    pub async fn eval_runs(
        &self,
        scope: &ProjectScope,
        set_id: Uuid,
        limit: u64,
    ) -> Result<Vec<EvalRunRecord>, StorageError> {
        eval_runs::Entity::find()
            .filter(crate::tenancy::in_project::<eval_runs::Entity>(scope))
            .filter(eval_runs::Column::SetId.eq(set_id))
            .order_by_desc(eval_runs::Column::CreatedAt)
            .order_by_desc(eval_runs::Column::Id)
            .limit(limit)
            .all(&self.connection)
            .await
            .map_err(StorageError::from_db)?
            .into_iter()
            .map(run_record)
            .collect::<Result<_, _>>()
    }

    /// The newest succeeded run of a set and profile before `run_id` (the baseline a run is
    /// compared with).
    pub async fn previous_succeeded_eval_run(
        &self,
        scope: &ProjectScope,
        set_id: Uuid,
        profile: &str,
        before_run: Uuid,
    ) -> Result<Option<EvalRunRecord>, StorageError> {
        eval_runs::Entity::find()
            .filter(crate::tenancy::in_project::<eval_runs::Entity>(scope))
            .filter(eval_runs::Column::SetId.eq(set_id))
            .filter(eval_runs::Column::Profile.eq(profile))
            .filter(eval_runs::Column::Status.eq(TaskStatus::Succeeded.as_str()))
            .filter(eval_runs::Column::Id.lt(before_run))
            .order_by_desc(eval_runs::Column::Id)
            .one(&self.connection)
            .await
            .map_err(StorageError::from_db)?
            .map(run_record)
            .transpose()
    }

    /// Mark a run running.
    pub async fn start_eval_run(
        &self,
        scope: &ProjectScope,
        run_id: Uuid,
    ) -> Result<(), StorageError> {
        let _permit = self.write_permit().await;
        eval_runs::Entity::update_many()
            .col_expr(
                eval_runs::Column::Status,
                Expr::value(TaskStatus::Running.as_str()),
            )
            .filter(crate::tenancy::in_project::<eval_runs::Entity>(scope))
            .filter(eval_runs::Column::Id.eq(run_id))
            .exec(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        Ok(())
    }

    /// Record how a run ended: its metrics, or why it failed.
    pub async fn finish_eval_run(
        &self,
        scope: &ProjectScope,
        run_id: Uuid,
        outcome: Result<EvalRunOutcome, String>,
    ) -> Result<(), StorageError> {
        let _permit = self.write_permit().await;
        let update = eval_runs::Entity::update_many()
            .col_expr(eval_runs::Column::FinishedAt, Expr::value(Utc::now()));
        let update = match outcome {
            Ok(outcome) => update
                .col_expr(
                    eval_runs::Column::Status,
                    Expr::value(TaskStatus::Succeeded.as_str()),
                )
                .col_expr(eval_runs::Column::Metrics, Expr::value(outcome.metrics))
                .col_expr(
                    eval_runs::Column::Comparison,
                    Expr::value(outcome.comparison),
                )
                .col_expr(
                    eval_runs::Column::Regression,
                    Expr::value(outcome.regression),
                )
                .col_expr(
                    eval_runs::Column::RegressionReasons,
                    Expr::value(serde_json::json!(outcome.regression_reasons)),
                ),
            Err(error) => update
                .col_expr(
                    eval_runs::Column::Status,
                    Expr::value(TaskStatus::Failed.as_str()),
                )
                .col_expr(eval_runs::Column::Error, Expr::value(error)),
        };
        update
            .filter(crate::tenancy::in_project::<eval_runs::Entity>(scope))
            .filter(eval_runs::Column::Id.eq(run_id))
            .exec(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        Ok(())
    }

    /// Scheduled sets of `scope`'s project whose last run is older than their interval and
    /// that have no run open (a scheduler queues their next one).
    pub async fn eval_sets_due(
        &self,
        scope: &ProjectScope,
        now: DateTime<Utc>,
    ) -> Result<Vec<EvalSetRecord>, StorageError> {
        let mut due = Vec::new();
        for set in self.eval_sets(scope).await? {
            let Some(interval) = set.schedule_interval_secs else {
                continue;
            };
            let last = self.eval_runs(scope, set.id, 1).await?;
            let is_due = match last.first() {
                None => true,
                Some(run) if run.status.is_open() => false,
                Some(run) => {
                    run.created_at
                        + chrono::Duration::seconds(i64::try_from(interval).unwrap_or(i64::MAX))
                        <= now
                }
            };
            if is_due {
                due.push(set);
            }
        }
        Ok(due)
    }
}

fn set_record(model: eval_sets::Model, cases: u64) -> EvalSetRecord {
    EvalSetRecord {
        id: model.id,
        name: model.name,
        k: u32::try_from(model.k).unwrap_or(10),
        regression_threshold: model.regression_threshold,
        schedule_interval_secs: model
            .schedule_interval_secs
            .and_then(|seconds| u64::try_from(seconds).ok()),
        profile: model.profile,
        created_at: model.created_at,
        cases,
    }
}

async fn insert_cases(
    transaction: &crate::WriteTransaction,
    scope: &ProjectScope,
    set_id: Uuid,
    cases: Vec<NewEvalCase>,
) -> Result<(), StorageError> {
    if cases.is_empty() {
        return Ok(());
    }
    let now = Utc::now();
    let models: Vec<eval_cases::ActiveModel> = cases
        .into_iter()
        .map(|case| eval_cases::ActiveModel {
            id: Set(Uuid::now_v7()),
            set_id: Set(set_id),
            project_id: Set(scope.project_id().as_uuid()),
            query: Set(case.query),
            user_id: Set(case.user_id),
            agent_id: Set(case.agent_id),
            filters: Set(case.filters),
            expected_memory_ids: Set(serde_json::json!(case.expected_memory_ids)),
            expected_contents: Set(serde_json::json!(case.expected_contents)),
            query_vector: Set(case.query_vector.map(|vector| serde_json::json!(vector))),
            created_at: Set(now),
        })
        .collect();
    // Batches keep each statement under the databases' bound-parameter limits.
    for batch in models.chunks(500) {
        eval_cases::Entity::insert_many(batch.to_vec())
            .exec_without_returning(transaction)
            .await
            .map_err(StorageError::from_db)?;
    }
    Ok(())
}
