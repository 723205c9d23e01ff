//! Uploaded files of a project: stored with their ingest task in one transaction (so an
//! acknowledged upload is never lost), their text kept only until it has been ingested,
//! the memories they became, and their removal with an erased subject.

use crate::entities::{files, tasks};
use crate::tasks::TaskRecord;
use crate::{Storage, StorageError};
use chrono::Utc;
pub use engram_core::files::FileRecord;
use engram_core::files::{FileFormat, FileName, FileStatus};
use engram_core::{ExternalId, MemoryId, MemoryKind, ProjectScope, TaskKind, TaskStatus};
use engram_core::{MemoryScope, NotFoundKind};
use sea_orm::sea_query::Expr;
use sea_orm::{ActiveValue::Set, ColumnTrait, EntityTrait, QueryFilter, QueryOrder, QuerySelect};
use uuid::Uuid;

/// A file to store and ingest.
#[derive(Clone, Debug)]
pub struct NewFile {
    pub name: FileName,
    pub format: FileFormat,
    pub text: String,
    pub user_id: Option<ExternalId>,
    pub agent_id: Option<ExternalId>,
    pub session_id: Option<ExternalId>,
    pub kind: MemoryKind,
    /// Who is billed for it: a usage attribution's billing label (`key:<id>@http`).
    pub credential: String,
}

fn file_record(model: files::Model) -> Result<FileRecord, StorageError> {
    let memory_ids = model
        .memory_ids
        .as_array()
        .map(|ids| {
            ids.iter()
                .filter_map(|id| id.as_str()?.parse::<MemoryId>().ok())
                .collect()
        })
        .unwrap_or_default();
    let status = model.status.parse().map_err(|error| {
        StorageError::Internal(format!("stored file status is invalid: {error}"))
    })?;
    Ok(FileRecord {
        id: model.id,
        name: model.name,
        format: model.format,
        size_bytes: model.size_bytes,
        sha256: model.sha256,
        user_id: model.user_id,
        agent_id: model.agent_id,
        session_id: model.session_id,
        kind: model.kind,
        credential: model.credential,
        status,
        chunk_count: model.chunk_count,
        memory_ids,
        task_id: model.task_id,
        error: model.error,
        created_at: model.created_at,
        updated_at: model.updated_at,
    })
}

fn of_project(scope: &ProjectScope, file_id: Uuid) -> sea_orm::Select<files::Entity> {
    files::Entity::find()
        .filter(crate::tenancy::in_project::<files::Entity>(scope))
        .filter(files::Column::Id.eq(file_id))
}

impl Storage {
    /// Store a file and queue its ingest, in one transaction.
    pub async fn create_file(
        &self,
        scope: &ProjectScope,
        file: NewFile,
        request_id: Option<&str>,
    ) -> Result<(FileRecord, TaskRecord), StorageError> {
        let _permit = self.write_permit().await;
        let now = Utc::now();
        let file_id = Uuid::now_v7();
        let task_id = Uuid::now_v7();
        let transaction = self.begin_write().await?;
        tasks::Entity::insert(tasks::ActiveModel {
            id: Set(task_id),
            organization_id: Set(scope.organization_id().as_uuid()),
            project_id: Set(scope.project_id().as_uuid()),
            kind: Set(TaskKind::FileIngest.as_str().to_string()),
            // The file the task ingests.
            subject: Set(Some(file_id.to_string())),
            status: Set(TaskStatus::Queued.as_str().to_string()),
            progress_done: Set(0),
            progress_total: Set(0),
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
        files::Entity::insert(files::ActiveModel {
            id: Set(file_id),
            organization_id: Set(scope.organization_id().as_uuid()),
            project_id: Set(scope.project_id().as_uuid()),
            name: Set(file.name.as_str().to_string()),
            format: Set(file.format.as_str().to_string()),
            size_bytes: Set(i64::try_from(file.text.len()).unwrap_or(i64::MAX)),
            sha256: Set(engram_core::memory::content_digest(&file.text)),
            user_id: Set(file.user_id.map(ExternalId::into_string)),
            agent_id: Set(file.agent_id.map(ExternalId::into_string)),
            session_id: Set(file.session_id.map(ExternalId::into_string)),
            kind: Set(file.kind.as_str().to_string()),
            credential: Set(file.credential),
            body: Set(Some(file.text)),
            status: Set(FileStatus::Queued.as_str().to_string()),
            chunk_count: Set(0),
            memory_ids: Set(serde_json::json!([])),
            task_id: Set(task_id),
            error: Set(None),
            created_at: Set(now),
            updated_at: Set(now),
        })
        .exec_without_returning(&transaction)
        .await
        .map_err(StorageError::from_db)?;
        transaction.commit().await.map_err(StorageError::from_db)?;
        let file = self
            .file(&MemoryScope::project_wide(*scope), file_id)
            .await?
            .ok_or(StorageError::NotFound(NotFoundKind::File))?;
        let task = self
            .task(scope, task_id)
            .await?
            .ok_or(StorageError::NotFound(NotFoundKind::Task))?;
        Ok((file, task))
    }

    /// A file of the project; `None` for an unknown id, another project's file or, for a
    /// scope confined to an end-user, another end-user's.
    pub async fn file(
        &self,
        memory_scope: &MemoryScope,
        file_id: Uuid,
    ) -> Result<Option<FileRecord>, StorageError> {
        let mut query = of_project(memory_scope.project(), file_id);
        query = query.filter(crate::tenancy::within::<files::Entity>(memory_scope));
        query
            .one(&self.connection)
            .await
            .map_err(StorageError::from_db)?
            .map(file_record)
            .transpose()
    }

    /// The text of a file not yet ingested.
    pub async fn file_text(
        &self,
        scope: &ProjectScope,
        file_id: Uuid,
    ) -> Result<Option<String>, StorageError> {
        Ok(of_project(scope, file_id)
            .select_only()
            .column(files::Column::Body)
            .into_tuple::<Option<String>>()
            .one(&self.connection)
            .await
            .map_err(StorageError::from_db)?
            .flatten())
    }

    /// Record the memories stored so far (an ingest that is retried continues after them).
    pub async fn record_file_progress(
        &self,
        scope: &ProjectScope,
        file_id: Uuid,
        chunk_count: usize,
        memory_ids: &[MemoryId],
    ) -> Result<(), StorageError> {
        let _permit = self.write_permit().await;
        let ids: Vec<String> = memory_ids.iter().map(ToString::to_string).collect();
        files::Entity::update_many()
            .col_expr(
                files::Column::Status,
                Expr::value(FileStatus::Ingesting.as_str()),
            )
            .col_expr(
                files::Column::ChunkCount,
                Expr::value(i32::try_from(chunk_count).unwrap_or(i32::MAX)),
            )
            .col_expr(
                files::Column::MemoryIds,
                Expr::value(serde_json::json!(ids)),
            )
            .col_expr(files::Column::UpdatedAt, Expr::value(Utc::now()))
            .filter(crate::tenancy::in_project::<files::Entity>(scope))
            .filter(files::Column::Id.eq(file_id))
            .exec(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        Ok(())
    }

    /// End a file's ingest; its text is dropped either way (the memories hold what was
    /// ingested, and a failed file is uploaded again).
    pub async fn finish_file(
        &self,
        scope: &ProjectScope,
        file_id: Uuid,
        outcome: Result<(), String>,
    ) -> Result<(), StorageError> {
        let _permit = self.write_permit().await;
        let (status, error) = match outcome {
            Ok(()) => (FileStatus::Ingested, None),
            Err(error) => (FileStatus::Failed, Some(error)),
        };
        files::Entity::update_many()
            .col_expr(files::Column::Status, Expr::value(status.as_str()))
            .col_expr(files::Column::Error, Expr::value(error))
            .col_expr(files::Column::Body, Expr::value(Option::<String>::None))
            .col_expr(files::Column::UpdatedAt, Expr::value(Utc::now()))
            .filter(crate::tenancy::in_project::<files::Entity>(scope))
            .filter(files::Column::Id.eq(file_id))
            .exec(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        Ok(())
    }

    /// Forget a file (its memories are deleted by the caller first).
    pub async fn delete_file_record(
        &self,
        scope: &ProjectScope,
        file_id: Uuid,
    ) -> Result<bool, StorageError> {
        let _permit = self.write_permit().await;
        let deleted = files::Entity::delete_many()
            .filter(crate::tenancy::in_project::<files::Entity>(scope))
            .filter(files::Column::Id.eq(file_id))
            .exec(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        Ok(deleted.rows_affected == 1)
    }

    /// Every file about an end-user, oldest first (subject export).
    pub async fn files_of_subject(
        &self,
        scope: &ProjectScope,
        user_id: &str,
    ) -> Result<Vec<FileRecord>, StorageError> {
        files::Entity::find()
            .filter(crate::tenancy::in_project::<files::Entity>(scope))
            .filter(files::Column::UserId.eq(user_id))
            .order_by_asc(files::Column::Id)
            .all(&self.connection)
            .await
            .map_err(StorageError::from_db)?
            .into_iter()
            .map(file_record)
            .collect()
    }

    /// Remove every file about an end-user (subject erasure); returns how many.
    pub async fn delete_files_of_subject(
        &self,
        scope: &ProjectScope,
        user_id: &str,
    ) -> Result<u64, StorageError> {
        let _permit = self.write_permit().await;
        let deleted = files::Entity::delete_many()
            .filter(crate::tenancy::in_project::<files::Entity>(scope))
            .filter(files::Column::UserId.eq(user_id))
            .exec(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        Ok(deleted.rows_affected)
    }
}
