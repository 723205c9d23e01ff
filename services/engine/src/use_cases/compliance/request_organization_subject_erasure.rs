//! Erase one end-user from every project of the caller's organization: refused while any of
//! their memories anywhere is held; queued as one task with one receipt, audited per project.

use crate::{EngineError, MemoryEngine};
use engram_core::audit::{AuditAction, NewAuditEvent};
use engram_core::{ExternalId, Operation, Principal};
use engram_storage::tasks::TaskRecord;

impl MemoryEngine {
    /// Only a principal holding `ManageOrganizationSubjectData` (a console owner, admin or
    /// compliance member, or the operator) may; a project API key never does.
    pub async fn request_organization_subject_erasure_for(
        &self,
        principal: &Principal,
        user_id: &ExternalId,
        confirmation: Option<&str>,
    ) -> Result<TaskRecord, EngineError> {
        principal.authorize(Operation::RequestOrganizationSubjectErasure)?;
        super::check_erasure_confirmation(user_id, confirmation)?;
        let organization_id = principal.scope().organization_id();
        let scopes = self
            .governance
            .maintenance_store()
            .project_scopes_of_organization(organization_id)
            .await?;
        self.governance
            .refuse_while_held(&scopes, user_id.as_str())
            .await?;
        // The task lives in the project the request came through; its receipt is shown only
        // to callers who may erase across the organization (`get_task_for`).
        let task = self
            .storage
            .create_task(
                principal.scope(),
                engram_core::TaskKind::OrganizationSubjectErasure,
                Some(user_id.as_str()),
                principal.actor().request_id.as_deref(),
            )
            .await?;
        for scope in &scopes {
            self.storage
                .record_audit_event(
                    organization_id,
                    Some(scope),
                    principal.actor(),
                    &NewAuditEvent::success(
                        AuditAction::SubjectErasureRequested,
                        vec![
                            self.governance.subject_digest(scope, user_id.as_str()),
                            task.id.to_string(),
                        ],
                        serde_json::json!({
                            "task_id": task.id.to_string(),
                            "organization_wide": true,
                        }),
                    ),
                )
                .await?;
        }
        self.governance.task_queued.notify_waiters();
        Ok(task)
    }
}
