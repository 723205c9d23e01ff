//! Erase everything the project holds about one end-user: refused while any of their
//! memories is under legal hold; queued as a task, audited under the subject's digest.

use crate::{EngineError, MemoryEngine};
use engram_core::audit::{AuditAction, NewAuditEvent};
use engram_core::{ExternalId, Operation, Principal};
use engram_storage::tasks::TaskRecord;

impl MemoryEngine {
    pub async fn request_subject_erasure_for(
        &self,
        principal: &Principal,
        user_id: &ExternalId,
        confirmation: Option<&str>,
    ) -> Result<TaskRecord, EngineError> {
        principal.authorize(Operation::RequestSubjectErasure)?;
        super::check_erasure_confirmation(user_id, confirmation)?;
        let scope = principal.scope();
        let held = self
            .storage
            .held_memories_of_subject(scope, user_id.as_str())
            .await?;
        if !held.is_empty() {
            return Err(EngineError::SubjectHeld { memory_ids: held });
        }
        let task = self
            .storage
            .create_task(
                scope,
                engram_core::TaskKind::SubjectErasure,
                Some(user_id.as_str()),
                principal.actor().request_id.as_deref(),
            )
            .await?;
        self.storage
            .record_audit_event(
                scope.organization_id(),
                Some(scope),
                principal.actor(),
                &NewAuditEvent::success(
                    AuditAction::SubjectErasureRequested,
                    vec![
                        self.governance.subject_digest(scope, user_id.as_str()),
                        task.id.to_string(),
                    ],
                    serde_json::json!({ "task_id": task.id.to_string() }),
                ),
            )
            .await?;
        self.governance.task_queued.notify_waiters();
        Ok(task)
    }
}
