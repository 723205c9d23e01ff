//! The registry of subject data: every store that holds anything about an end-user, the
//! tables and columns that find the subject's rows, and the tables that hold none (with why).
//! Erasure, its verification, the receipt and export walk `SubjectStore::ALL`; a test compares
//! the migrated schema with this file, so a new table fails until it is classified here.

use crate::entities::{eval_cases, eval_runs, files, session_state, tasks};
use crate::recall_quality::EvalCaseRecord;
use crate::{Storage, StorageError};
use engram_core::ProjectScope;
pub use engram_core::subject_stores::{
    StoreRetention, SubjectStore, SubjectStoreDeclaration, SubjectTable,
    TABLES_WITHOUT_SUBJECT_DATA,
};
use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, EntityTrait, PaginatorTrait, QueryFilter, QueryOrder, QuerySelect};
use std::collections::HashSet;
use uuid::Uuid;

/// Rows read at once when an erasure looks through a whole store (task results, evaluation
/// runs): it never holds more than a page.
const PAGE: u64 = 200;

/// Strings anywhere in a JSON value (object keys excluded).
fn strings_in(value: &serde_json::Value, found: &mut Vec<String>) {
    match value {
        serde_json::Value::String(text) => found.push(text.clone()),
        serde_json::Value::Array(items) => items.iter().for_each(|item| strings_in(item, found)),
        serde_json::Value::Object(fields) => {
            fields.values().for_each(|item| strings_in(item, found))
        }
        _ => {}
    }
}

fn mentions_any(value: &serde_json::Value, ids: &HashSet<String>) -> bool {
    let mut found = Vec::new();
    strings_in(value, &mut found);
    found.iter().any(|text| ids.contains(text))
}

/// Whether a per-case result is about one of `case_ids`.
fn names_a_case(entry: &serde_json::Value, case_ids: &HashSet<String>) -> bool {
    entry
        .get("case_id")
        .and_then(serde_json::Value::as_str)
        .is_some_and(|id| case_ids.contains(id))
}

/// `metrics` without the per-case entries of `case_ids`, and how many went; `None` when
/// nothing changed.
fn without_cases(
    metrics: &serde_json::Value,
    case_ids: &HashSet<String>,
) -> Option<(serde_json::Value, u64)> {
    let mut metrics = metrics.clone();
    let per_case = metrics.get_mut("per_case")?.as_array_mut()?;
    let before = per_case.len();
    per_case.retain(|entry| !names_a_case(entry, case_ids));
    let removed = (before - per_case.len()) as u64;
    (removed > 0).then_some((metrics, removed))
}

fn comparison_without_cases(
    comparison: &serde_json::Value,
    case_ids: &HashSet<String>,
) -> Option<(serde_json::Value, u64)> {
    let second = comparison.get("second_metrics")?;
    let (cleaned, removed) = without_cases(second, case_ids)?;
    let mut comparison = comparison.clone();
    comparison["second_metrics"] = cleaned;
    Some((comparison, removed))
}

/// Records of no held end-user: of no end-user at all, or of one without any memory under
/// legal hold in the project (retention keeps every record of a held end-user until the hold
/// is lifted). A subquery, so any number of held end-users fits in one statement.
pub(crate) fn outside_hold(
    user_column: impl sea_orm::ColumnTrait,
    scope: &ProjectScope,
) -> sea_orm::Condition {
    use crate::entities::memories;
    use sea_orm::{QuerySelect, QueryTrait};
    let held = memories::Entity::find()
        .select_only()
        .column(memories::Column::UserId)
        .filter(crate::tenancy::in_project::<memories::Entity>(scope))
        .filter(memories::Column::LegalHold.eq(true))
        .filter(memories::Column::UserId.is_not_null())
        .into_query();
    sea_orm::Condition::any()
        .add(user_column.is_null())
        .add(user_column.not_in_subquery(held))
}

impl Storage {
    /// Remove the project's records of `store` older than `days` (by the store's age column)
    /// and audit how many, in one transaction. Files still waiting to be ingested are kept,
    /// and a file's age counts from the end of its ingest.
    /// Returns how many were removed; 0 for a store not swept by age.
    pub async fn remove_records_past_retention(
        &self,
        scope: &ProjectScope,
        store: SubjectStore,
        days: u32,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<u64, StorageError> {
        use crate::entities::{feedback, recall_events, session_messages};
        let cutoff = now - chrono::Duration::days(i64::from(days.max(1)));
        let _permit = self.write_permit().await;
        let transaction = self.begin_write().await?;
        let removed = match store {
            SubjectStore::Messages => {
                session_messages::Entity::delete_many()
                    .filter(crate::tenancy::in_project::<session_messages::Entity>(
                        scope,
                    ))
                    .filter(session_messages::Column::CreatedAt.lt(cutoff))
                    .filter(outside_hold(session_messages::Column::UserId, scope))
                    .exec(&transaction)
                    .await
            }
            SubjectStore::SessionState => {
                session_state::Entity::delete_many()
                    .filter(crate::tenancy::in_project::<session_state::Entity>(scope))
                    .filter(session_state::Column::UpdatedAt.lt(cutoff))
                    .filter(outside_hold(session_state::Column::UserId, scope))
                    .exec(&transaction)
                    .await
            }
            SubjectStore::Files => {
                files::Entity::delete_many()
                    .filter(crate::tenancy::in_project::<files::Entity>(scope))
                    .filter(files::Column::UpdatedAt.lt(cutoff))
                    .filter(outside_hold(files::Column::UserId, scope))
                    .filter(files::Column::Status.is_in([
                        engram_core::files::FileStatus::Ingested.as_str(),
                        engram_core::files::FileStatus::Failed.as_str(),
                    ]))
                    .exec(&transaction)
                    .await
            }
            SubjectStore::Feedback => {
                feedback::Entity::delete_many()
                    .filter(crate::tenancy::in_project::<feedback::Entity>(scope))
                    .filter(feedback::Column::CreatedAt.lt(cutoff))
                    .filter(outside_hold(feedback::Column::UserId, scope))
                    .exec(&transaction)
                    .await
            }
            SubjectStore::RecallEvents => {
                recall_events::Entity::delete_many()
                    .filter(crate::tenancy::in_project::<recall_events::Entity>(scope))
                    .filter(recall_events::Column::CreatedAt.lt(cutoff))
                    .filter(outside_hold(recall_events::Column::UserId, scope))
                    .exec(&transaction)
                    .await
            }
            SubjectStore::Runs => {
                let removed = crate::runs::delete_runs_before(&transaction, scope, cutoff).await?;
                Ok(sea_orm::DeleteResult {
                    rows_affected: removed,
                })
            }
            SubjectStore::Memories
            | SubjectStore::History
            | SubjectStore::EvaluationCases
            | SubjectStore::EvaluationRuns
            | SubjectStore::TaskResults
            | SubjectStore::Idempotency
            | SubjectStore::Index
            | SubjectStore::QueryCache
            | SubjectStore::Usage => return Ok(0),
        }
        .map_err(StorageError::from_db)?
        .rows_affected;
        if removed == 0 {
            return Ok(0);
        }
        crate::audit::append_audit_event(
            &transaction,
            scope.organization_id(),
            Some(scope),
            &engram_core::audit::Actor::system("retention"),
            &engram_core::audit::NewAuditEvent::success(
                engram_core::audit::AuditAction::RetentionSwept,
                vec![scope.project_id().to_string()],
                serde_json::json!({
                    "store": store.declaration().name,
                    "removed": removed,
                    "retention_days": days,
                    "older_than": cutoff.to_rfc3339(),
                    "authorised_by": "project policy: store_retention_days",
                }),
            ),
        )
        .await?;
        transaction.commit().await.map_err(StorageError::from_db)?;
        Ok(removed)
    }

    /// How many of the project's records of `store` are older than `days`: what the next
    /// sweep removes.
    pub async fn count_records_past_retention(
        &self,
        scope: &ProjectScope,
        store: SubjectStore,
        days: u32,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<u64, StorageError> {
        use crate::entities::{feedback, recall_events, session_messages};
        let cutoff = now - chrono::Duration::days(i64::from(days.max(1)));
        match store {
            SubjectStore::Messages => {
                session_messages::Entity::find()
                    .filter(crate::tenancy::in_project::<session_messages::Entity>(
                        scope,
                    ))
                    .filter(session_messages::Column::CreatedAt.lt(cutoff))
                    .filter(outside_hold(session_messages::Column::UserId, scope))
                    .count(&self.connection)
                    .await
            }
            SubjectStore::SessionState => {
                session_state::Entity::find()
                    .filter(crate::tenancy::in_project::<session_state::Entity>(scope))
                    .filter(session_state::Column::UpdatedAt.lt(cutoff))
                    .filter(outside_hold(session_state::Column::UserId, scope))
                    .count(&self.connection)
                    .await
            }
            SubjectStore::Files => {
                files::Entity::find()
                    .filter(crate::tenancy::in_project::<files::Entity>(scope))
                    .filter(files::Column::UpdatedAt.lt(cutoff))
                    .filter(outside_hold(files::Column::UserId, scope))
                    .filter(files::Column::Status.is_in([
                        engram_core::files::FileStatus::Ingested.as_str(),
                        engram_core::files::FileStatus::Failed.as_str(),
                    ]))
                    .count(&self.connection)
                    .await
            }
            SubjectStore::Feedback => {
                feedback::Entity::find()
                    .filter(crate::tenancy::in_project::<feedback::Entity>(scope))
                    .filter(feedback::Column::CreatedAt.lt(cutoff))
                    .filter(outside_hold(feedback::Column::UserId, scope))
                    .count(&self.connection)
                    .await
            }
            SubjectStore::RecallEvents => {
                recall_events::Entity::find()
                    .filter(crate::tenancy::in_project::<recall_events::Entity>(scope))
                    .filter(recall_events::Column::CreatedAt.lt(cutoff))
                    .filter(outside_hold(recall_events::Column::UserId, scope))
                    .count(&self.connection)
                    .await
            }
            SubjectStore::Runs => return self.count_runs_before(scope, cutoff).await,
            SubjectStore::Memories
            | SubjectStore::History
            | SubjectStore::EvaluationCases
            | SubjectStore::EvaluationRuns
            | SubjectStore::TaskResults
            | SubjectStore::Idempotency
            | SubjectStore::Index
            | SubjectStore::QueryCache
            | SubjectStore::Usage => return Ok(0),
        }
        .map_err(StorageError::from_db)
    }

    pub async fn count_files_of_subject(
        &self,
        scope: &ProjectScope,
        user_id: &str,
    ) -> Result<u64, StorageError> {
        files::Entity::find()
            .filter(crate::tenancy::in_project::<files::Entity>(scope))
            .filter(files::Column::UserId.eq(user_id))
            .count(&self.connection)
            .await
            .map_err(StorageError::from_db)
    }

    pub async fn count_session_state_of_subject(
        &self,
        scope: &ProjectScope,
        user_id: &str,
    ) -> Result<u64, StorageError> {
        session_state::Entity::find()
            .filter(crate::tenancy::in_project::<session_state::Entity>(scope))
            .filter(session_state::Column::UserId.eq(user_id))
            .count(&self.connection)
            .await
            .map_err(StorageError::from_db)
    }

    /// The subject's evaluation cases, in every set (subject export).
    pub async fn eval_cases_of_subject(
        &self,
        scope: &ProjectScope,
        user_id: &str,
    ) -> Result<Vec<(Uuid, EvalCaseRecord)>, StorageError> {
        Ok(eval_cases::Entity::find()
            .filter(crate::tenancy::in_project::<eval_cases::Entity>(scope))
            .filter(eval_cases::Column::UserId.eq(user_id))
            .order_by_asc(eval_cases::Column::Id)
            .all(&self.connection)
            .await
            .map_err(StorageError::from_db)?
            .into_iter()
            .map(|model| (model.set_id, crate::recall_quality::case_record(model)))
            .collect())
    }

    /// Ids of the subject's evaluation cases (taken before anything is erased, for the
    /// per-case results that name them).
    pub async fn eval_case_ids_of_subject(
        &self,
        scope: &ProjectScope,
        user_id: &str,
    ) -> Result<Vec<Uuid>, StorageError> {
        eval_cases::Entity::find()
            .select_only()
            .column(eval_cases::Column::Id)
            .filter(crate::tenancy::in_project::<eval_cases::Entity>(scope))
            .filter(eval_cases::Column::UserId.eq(user_id))
            .into_tuple::<Uuid>()
            .all(&self.connection)
            .await
            .map_err(StorageError::from_db)
    }

    /// Ids of the subject's memories in every state (taken before anything is erased, for
    /// the stores that name them).
    pub async fn memory_ids_of_subject(
        &self,
        scope: &ProjectScope,
        user_id: &str,
    ) -> Result<Vec<engram_core::MemoryId>, StorageError> {
        Ok(crate::entities::memories::Entity::find()
            .select_only()
            .column(crate::entities::memories::Column::Id)
            .filter(crate::tenancy::in_project::<
                crate::entities::memories::Entity,
            >(scope))
            .filter(crate::entities::memories::Column::UserId.eq(user_id))
            .into_tuple::<Uuid>()
            .all(&self.connection)
            .await
            .map_err(StorageError::from_db)?
            .into_iter()
            .map(engram_core::MemoryId::from_uuid)
            .collect())
    }

    /// Remove the subject's evaluation cases; returns their ids.
    pub async fn delete_eval_cases_of_subject(
        &self,
        scope: &ProjectScope,
        user_id: &str,
    ) -> Result<Vec<Uuid>, StorageError> {
        let ids = self.eval_case_ids_of_subject(scope, user_id).await?;
        let _permit = self.write_permit().await;
        for chunk in ids.chunks(500) {
            eval_cases::Entity::delete_many()
                .filter(crate::tenancy::in_project::<eval_cases::Entity>(scope))
                .filter(eval_cases::Column::Id.is_in(chunk.to_vec()))
                .exec(&self.connection)
                .await
                .map_err(StorageError::from_db)?;
        }
        Ok(ids)
    }

    pub async fn count_eval_cases_of_subject(
        &self,
        scope: &ProjectScope,
        user_id: &str,
    ) -> Result<u64, StorageError> {
        eval_cases::Entity::find()
            .filter(crate::tenancy::in_project::<eval_cases::Entity>(scope))
            .filter(eval_cases::Column::UserId.eq(user_id))
            .count(&self.connection)
            .await
            .map_err(StorageError::from_db)
    }

    /// Per-case results of these cases in the project's runs: (run id, entry).
    pub async fn eval_results_of_cases(
        &self,
        scope: &ProjectScope,
        case_ids: &[Uuid],
    ) -> Result<Vec<(Uuid, serde_json::Value)>, StorageError> {
        if case_ids.is_empty() {
            return Ok(Vec::new());
        }
        let wanted: HashSet<String> = case_ids.iter().map(Uuid::to_string).collect();
        let mut results = Vec::new();
        // A page of runs at a time: only the per-case entries naming the cases are kept.
        let mut after: Option<Uuid> = None;
        loop {
            let mut page = eval_runs::Entity::find()
                .filter(crate::tenancy::in_project::<eval_runs::Entity>(scope));
            if let Some(after) = after {
                page = page.filter(eval_runs::Column::Id.gt(after));
            }
            let runs = page
                .order_by_asc(eval_runs::Column::Id)
                .limit(PAGE)
                .all(&self.connection)
                .await
                .map_err(StorageError::from_db)?;
            let Some(last) = runs.last() else {
                return Ok(results);
            };
            after = Some(last.id);
            for run in runs {
                let per_case = [
                    run.metrics.as_ref(),
                    run.comparison
                        .as_ref()
                        .and_then(|comparison| comparison.get("second_metrics")),
                ];
                for metrics in per_case.into_iter().flatten() {
                    let entries = metrics
                        .get("per_case")
                        .and_then(serde_json::Value::as_array)
                        .into_iter()
                        .flatten();
                    for entry in entries.filter(|entry| names_a_case(entry, &wanted)) {
                        results.push((run.id, entry.clone()));
                    }
                }
            }
        }
    }

    /// Remove the per-case results of these cases from the project's runs (the runs' figures
    /// stay); returns how many per-case results went (the unit the verification counts).
    pub async fn erase_eval_results_of_cases(
        &self,
        scope: &ProjectScope,
        case_ids: &[Uuid],
    ) -> Result<u64, StorageError> {
        if case_ids.is_empty() {
            return Ok(0);
        }
        let wanted: HashSet<String> = case_ids.iter().map(Uuid::to_string).collect();
        // Read and rewritten under one permit, so two erasures cannot write back each
        // other's entries.
        let _permit = self.write_permit().await;
        let mut changed = 0;
        // A page of runs at a time: an erasure never holds every run of the project.
        let mut after: Option<Uuid> = None;
        loop {
            let mut page = eval_runs::Entity::find()
                .filter(crate::tenancy::in_project::<eval_runs::Entity>(scope));
            if let Some(after) = after {
                page = page.filter(eval_runs::Column::Id.gt(after));
            }
            let runs = page
                .order_by_asc(eval_runs::Column::Id)
                .limit(PAGE)
                .all(&self.connection)
                .await
                .map_err(StorageError::from_db)?;
            let Some(last) = runs.last() else {
                break;
            };
            after = Some(last.id);
            for run in runs {
                let metrics = run
                    .metrics
                    .as_ref()
                    .and_then(|metrics| without_cases(metrics, &wanted));
                let comparison = run
                    .comparison
                    .as_ref()
                    .and_then(|comparison| comparison_without_cases(comparison, &wanted));
                if metrics.is_none() && comparison.is_none() {
                    continue;
                }
                let entries = metrics.as_ref().map_or(0, |(_, removed)| *removed)
                    + comparison.as_ref().map_or(0, |(_, removed)| *removed);
                let metrics = metrics.map(|(metrics, _)| metrics);
                let comparison = comparison.map(|(comparison, _)| comparison);
                let mut update = eval_runs::Entity::update_many()
                    .filter(crate::tenancy::in_project::<eval_runs::Entity>(scope))
                    .filter(eval_runs::Column::Id.eq(run.id));
                if let Some(metrics) = metrics {
                    update = update.col_expr(eval_runs::Column::Metrics, Expr::value(metrics));
                }
                if let Some(comparison) = comparison {
                    update =
                        update.col_expr(eval_runs::Column::Comparison, Expr::value(comparison));
                }
                update
                    .exec(&self.connection)
                    .await
                    .map_err(StorageError::from_db)?;
                changed += entries;
            }
        }
        Ok(changed)
    }

    /// Task results of the project that name any of `ids` (memory or case ids).
    async fn task_results_naming(
        &self,
        scope: &ProjectScope,
        ids: &HashSet<String>,
    ) -> Result<Vec<Uuid>, StorageError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        // A page at a time: an erasure never holds every task result of the project.
        let mut naming = Vec::new();
        let mut after: Option<Uuid> = None;
        loop {
            let mut page = tasks::Entity::find()
                .select_only()
                .column(tasks::Column::Id)
                .column(tasks::Column::Result)
                .filter(crate::tenancy::in_project::<tasks::Entity>(scope))
                .filter(tasks::Column::Result.is_not_null());
            if let Some(after) = after {
                page = page.filter(tasks::Column::Id.gt(after));
            }
            let results = page
                .order_by_asc(tasks::Column::Id)
                .limit(PAGE)
                .into_tuple::<(Uuid, Option<serde_json::Value>)>()
                .all(&self.connection)
                .await
                .map_err(StorageError::from_db)?;
            let Some((last, _)) = results.last() else {
                return Ok(naming);
            };
            after = Some(*last);
            naming.extend(
                results
                    .into_iter()
                    .filter(|(_, result)| {
                        result
                            .as_ref()
                            .is_some_and(|result| mentions_any(result, ids))
                    })
                    .map(|(id, _)| id),
            );
        }
    }

    /// Blank the results of tasks that name any of `ids`; returns how many.
    pub async fn erase_task_results_naming(
        &self,
        scope: &ProjectScope,
        ids: &HashSet<String>,
    ) -> Result<u64, StorageError> {
        let task_ids = self.task_results_naming(scope, ids).await?;
        if task_ids.is_empty() {
            return Ok(0);
        }
        let _permit = self.write_permit().await;
        let mut erased = 0;
        for chunk in task_ids.chunks(500) {
            erased += tasks::Entity::update_many()
                .col_expr(
                    tasks::Column::Result,
                    Expr::value(
                        serde_json::json!({"erased": "the result named an erased end-user's data"}),
                    ),
                )
                .filter(crate::tenancy::in_project::<tasks::Entity>(scope))
                .filter(tasks::Column::Id.is_in(chunk.to_vec()))
                .exec(&self.connection)
                .await
                .map_err(StorageError::from_db)?
                .rows_affected;
        }
        Ok(erased)
    }

    pub async fn count_task_results_naming(
        &self,
        scope: &ProjectScope,
        ids: &HashSet<String>,
    ) -> Result<u64, StorageError> {
        Ok(self.task_results_naming(scope, ids).await?.len() as u64)
    }
}

impl crate::MaintenanceStore {
    /// Every table of the migrated schema (for the registry test).
    pub async fn table_names(&self) -> Result<Vec<String>, StorageError> {
        use sea_orm::{ConnectionTrait, DatabaseBackend, Statement};
        let backend = self.storage.connection.get_database_backend();
        let sql = match backend {
            DatabaseBackend::Sqlite => {
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name"
            }
            _ => {
                "SELECT table_name AS name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' ORDER BY table_name"
            }
        };
        let rows = self
            .storage
            .connection
            .query_all(Statement::from_string(backend, sql))
            .await
            .map_err(StorageError::from_db)?;
        rows.iter()
            .map(|row| {
                row.try_get::<String>("", "name")
                    .map_err(StorageError::from_db)
            })
            .collect()
    }

    /// The columns of a table (for the registry test).
    pub async fn column_names(&self, table: &str) -> Result<Vec<String>, StorageError> {
        use sea_orm::{ConnectionTrait, DatabaseBackend, Statement};
        let backend = self.storage.connection.get_database_backend();
        let statement = match backend {
            DatabaseBackend::Sqlite => Statement::from_sql_and_values(
                backend,
                "SELECT name FROM pragma_table_info(?) ORDER BY cid",
                [table.into()],
            ),
            _ => Statement::from_sql_and_values(
                backend,
                "SELECT column_name AS name FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = $1 ORDER BY ordinal_position",
                [table.into()],
            ),
        };
        let rows = self
            .storage
            .connection
            .query_all(statement)
            .await
            .map_err(StorageError::from_db)?;
        rows.iter()
            .map(|row| {
                row.try_get::<String>("", "name")
                    .map_err(StorageError::from_db)
            })
            .collect()
    }
}
