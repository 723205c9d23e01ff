//! The status of a background task. Task results may carry memory content (a derivation's
//! changes) or per-case evaluation results: only for a caller that may read memories.

use crate::{EngineError, MemoryEngine};
use engram_core::NotFoundKind;
use engram_core::{Operation, Permission, Principal};
use engram_storage::tasks::TaskRecord;

impl MemoryEngine {
    pub async fn get_task_for(
        &self,
        principal: &Principal,
        task_id: uuid::Uuid,
    ) -> Result<TaskRecord, EngineError> {
        principal.authorize(Operation::GetTask)?;
        let mut task = self
            .storage
            .task(principal.scope(), task_id)
            .await?
            .ok_or(EngineError::NotFound(NotFoundKind::Task))?;
        // An organization-wide erasure's receipt names every project of the organization: only
        // for a caller who may erase across it (never a project key, which sees 404).
        if task.kind == engram_core::TaskKind::OrganizationSubjectErasure
            && !principal
                .kind()
                .holds(Permission::ManageOrganizationSubjectData)
        {
            return Err(EngineError::NotFound(NotFoundKind::Task));
        }
        if principal.answers_without_content(Operation::GetTask)
            && let Some(result) = task.result.as_mut()
        {
            crate::use_cases::strip_content_fields(result);
        }
        Ok(task)
    }
}
