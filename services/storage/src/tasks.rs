//! Background tasks of a project (subject erasure): queued by a request, claimed by one
//! runner at a time with a lease (a runner that dies leaves its task to the next), with
//! progress, result and error readable through the API.

use crate::MaintenanceStore;
use crate::entities::tasks;
use crate::{Storage, StorageError};
use chrono::{DateTime, Utc};
use engram_core::NotFoundKind;
pub use engram_core::tasks::TaskRecord;
use engram_core::{OrganizationId, ProjectId, ProjectScope, TaskKind, TaskStatus};
use sea_orm::sea_query::Expr;
use sea_orm::{ActiveValue::Set, ColumnTrait, Condition, EntityTrait, QueryFilter, QueryOrder};
use uuid::Uuid;

/// A task a runner holds the lease of.
#[derive(Clone, Debug, PartialEq)]
pub struct ClaimedTask {
    pub id: Uuid,
    pub scope: ProjectScope,
    pub kind: TaskKind,
    pub subject: Option<String>,
    pub request_id: Option<String>,
}

/// Insert a queued task; its id. Through `connection`, so a task and the record it names
/// (an evaluation run) are committed together: a worker never claims a task whose record
/// does not exist yet.
pub(crate) async fn insert_task<C: sea_orm::ConnectionTrait>(
    connection: &C,
    scope: &ProjectScope,
    kind: TaskKind,
    subject: Option<&str>,
    request_id: Option<&str>,
) -> Result<Uuid, StorageError> {
    let now = Utc::now();
    let id = Uuid::now_v7();
    let model = tasks::ActiveModel {
        id: Set(id),
        organization_id: Set(scope.organization_id().as_uuid()),
        project_id: Set(scope.project_id().as_uuid()),
        kind: Set(kind.as_str().to_string()),
        subject: Set(subject.map(str::to_string)),
        status: Set(TaskStatus::Queued.as_str().to_string()),
        progress_done: Set(0),
        progress_total: Set(0),
        result: Set(None),
        error: Set(None),
        request_id: Set(request_id.map(str::to_string)),
        created_at: Set(now),
        updated_at: Set(now),
        claimed_until: Set(None),
    };
    tasks::Entity::insert(model)
        .exec_without_returning(connection)
        .await
        .map_err(StorageError::from_db)?;
    Ok(id)
}

impl Storage {
    /// Queue a task for `scope`'s project.
    pub async fn create_task(
        &self,
        scope: &ProjectScope,
        kind: TaskKind,
        subject: Option<&str>,
        request_id: Option<&str>,
    ) -> Result<TaskRecord, StorageError> {
        let _permit = self.write_permit().await;
        let id = insert_task(&self.connection, scope, kind, subject, request_id).await?;
        self.task(scope, id)
            .await?
            .ok_or(StorageError::NotFound(NotFoundKind::Task))
    }

    /// Whether `scope`'s project has a task of `kind` queued or running (a scheduler queues
    /// no second one).
    pub async fn open_task_exists(
        &self,
        scope: &ProjectScope,
        kind: TaskKind,
    ) -> Result<bool, StorageError> {
        use sea_orm::PaginatorTrait;
        let open = tasks::Entity::find()
            .filter(crate::tenancy::in_project::<tasks::Entity>(scope))
            .filter(tasks::Column::Kind.eq(kind.as_str()))
            .filter(tasks::Column::Status.is_in(open_statuses()))
            .count(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        Ok(open > 0)
    }

    /// A task of `scope`'s project; `None` for an unknown id or another project's.
    pub async fn task(
        &self,
        scope: &ProjectScope,
        task_id: Uuid,
    ) -> Result<Option<TaskRecord>, StorageError> {
        let found = tasks::Entity::find_by_id(task_id)
            .filter(crate::tenancy::in_project::<tasks::Entity>(scope))
            .one(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        found.map(task_record).transpose()
    }
}

/// The stored spellings of the statuses of work still to do.
pub(crate) fn open_statuses() -> [&'static str; 2] {
    [TaskStatus::Queued.as_str(), TaskStatus::Running.as_str()]
}

fn task_record(model: tasks::Model) -> Result<TaskRecord, StorageError> {
    let corrupt = |column: &str, error: String| {
        StorageError::Internal(format!("stored task {column} is invalid: {error}"))
    };
    Ok(TaskRecord {
        id: model.id,
        kind: model.kind.parse().map_err(|error| corrupt("kind", error))?,
        status: model
            .status
            .parse()
            .map_err(|error| corrupt("status", error))?,
        progress_done: model.progress_done,
        progress_total: model.progress_total,
        result: model.result,
        error: model.error,
        request_id: model.request_id,
        created_at: model.created_at,
        updated_at: model.updated_at,
    })
}

impl MaintenanceStore {
    /// Lease the oldest queued task of one of `kinds` (or a running one whose lease ran out)
    /// for `lease`.
    pub async fn claim_next_task(
        &self,
        kinds: &[TaskKind],
        lease: std::time::Duration,
    ) -> Result<Option<ClaimedTask>, StorageError> {
        let _permit = self.storage.write_permit().await;
        let now = Utc::now();
        let candidates = tasks::Entity::find()
            .filter(tasks::Column::Kind.is_in(kinds.iter().map(TaskKind::as_str)))
            .filter(
                Condition::any()
                    .add(tasks::Column::Status.eq(TaskStatus::Queued.as_str()))
                    .add(
                        Condition::all()
                            .add(tasks::Column::Status.eq(TaskStatus::Running.as_str()))
                            .add(tasks::Column::ClaimedUntil.lt(now)),
                    ),
            )
            .order_by_asc(tasks::Column::CreatedAt)
            .all(&self.storage.connection)
            .await
            .map_err(StorageError::from_db)?;
        let until = now + chrono::Duration::from_std(lease).unwrap_or(chrono::Duration::minutes(5));
        for candidate in candidates {
            // Only one runner wins the row: the update is guarded by what it read.
            let mut claim = tasks::Entity::update_many()
                .col_expr(
                    tasks::Column::Status,
                    Expr::value(TaskStatus::Running.as_str()),
                )
                .col_expr(tasks::Column::ClaimedUntil, Expr::value(until))
                .col_expr(tasks::Column::UpdatedAt, Expr::value(now))
                .filter(tasks::Column::Id.eq(candidate.id))
                .filter(tasks::Column::Status.eq(candidate.status.clone()));
            claim = match candidate.claimed_until {
                Some(previous) => claim.filter(tasks::Column::ClaimedUntil.eq(previous)),
                None => claim.filter(tasks::Column::ClaimedUntil.is_null()),
            };
            let claimed = claim
                .exec(&self.storage.connection)
                .await
                .map_err(StorageError::from_db)?;
            if claimed.rows_affected == 1 {
                let kind = candidate.kind.parse().map_err(|error| {
                    StorageError::Internal(format!("stored task kind is invalid: {error}"))
                })?;
                return Ok(Some(ClaimedTask {
                    id: candidate.id,
                    scope: ProjectScope::from_verified_credential(
                        OrganizationId::from_uuid(candidate.organization_id),
                        ProjectId::from_uuid(candidate.project_id),
                    ),
                    kind,
                    subject: candidate.subject,
                    request_id: candidate.request_id,
                }));
            }
        }
        Ok(None)
    }

    /// Record progress and extend the lease.
    pub async fn task_progress(
        &self,
        task_id: Uuid,
        done: i64,
        total: i64,
        lease: std::time::Duration,
    ) -> Result<(), StorageError> {
        let _permit = self.storage.write_permit().await;
        let now = Utc::now();
        let until = now + chrono::Duration::from_std(lease).unwrap_or(chrono::Duration::minutes(5));
        tasks::Entity::update_many()
            .col_expr(tasks::Column::ProgressDone, Expr::value(done))
            .col_expr(tasks::Column::ProgressTotal, Expr::value(total))
            .col_expr(tasks::Column::UpdatedAt, Expr::value(now))
            .col_expr(tasks::Column::ClaimedUntil, Expr::value(until))
            .filter(tasks::Column::Id.eq(task_id))
            .exec(&self.storage.connection)
            .await
            .map_err(StorageError::from_db)?;
        Ok(())
    }

    /// End a task with its result or error. The subject is cleared: a finished task keeps
    /// no personal data.
    pub async fn finish_task(
        &self,
        task_id: Uuid,
        outcome: Result<serde_json::Value, String>,
    ) -> Result<(), StorageError> {
        let _permit = self.storage.write_permit().await;
        let (status, result, error) = match outcome {
            Ok(result) => (TaskStatus::Succeeded, Some(result), None),
            Err(error) => (TaskStatus::Failed, None, Some(error)),
        };
        tasks::Entity::update_many()
            .col_expr(tasks::Column::Status, Expr::value(status.as_str()))
            .col_expr(tasks::Column::Result, Expr::value(result))
            .col_expr(tasks::Column::Error, Expr::value(error))
            .col_expr(tasks::Column::Subject, Expr::value(Option::<String>::None))
            .col_expr(
                tasks::Column::ClaimedUntil,
                Expr::value(Option::<DateTime<Utc>>::None),
            )
            .col_expr(tasks::Column::UpdatedAt, Expr::value(Utc::now()))
            .filter(tasks::Column::Id.eq(task_id))
            .exec(&self.storage.connection)
            .await
            .map_err(StorageError::from_db)?;
        Ok(())
    }
}
