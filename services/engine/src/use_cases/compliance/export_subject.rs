//! Everything live the project holds about one end-user: content, so it needs
//! `memories:read` besides subject-data rights, and is audited as an export and as a
//! content read (compliance sees who read a person's data, whatever the door).

use crate::governance::SubjectExport;
use crate::{EngineError, MemoryEngine};
use engram_core::audit::{AuditAction, NewAuditEvent};
use engram_core::{ExternalId, Operation, Principal};

impl MemoryEngine {
    pub async fn export_subject_for(
        &self,
        principal: &Principal,
        user_id: &ExternalId,
    ) -> Result<SubjectExport, EngineError> {
        principal.authorize(Operation::ExportSubject)?;
        let scope = principal.scope();
        let exported = self
            .governance
            .export_subject(scope, user_id.as_str(), principal.actor())
            .await?;
        self.storage
            .record_audit_event(
                scope.organization_id(),
                Some(scope),
                principal.actor(),
                &NewAuditEvent::success(
                    AuditAction::MemoryContentViewed,
                    vec![self.governance.subject_digest(scope, user_id.as_str())],
                    serde_json::json!({ "page": "subject_export", "counts": exported.counts() }),
                ),
            )
            .await?;
        Ok(exported)
    }
}
