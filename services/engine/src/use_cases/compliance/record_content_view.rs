//! Compliance must know who saw what: a console page that shows memory content (a list, a
//! memory with its history, a recall with its results) is logged before it is shown.

use crate::{EngineError, MemoryEngine};
use engram_core::audit::{AuditAction, NewAuditEvent};
use engram_core::{Operation, Principal};

impl MemoryEngine {
    /// Logs that the caller is being shown the content of `shown_ids` on `page`.
    pub async fn record_content_view_for(
        &self,
        principal: &Principal,
        shown_ids: Vec<String>,
        page: &str,
    ) -> Result<(), EngineError> {
        principal.authorize(Operation::GetMemory)?;
        if shown_ids.is_empty() {
            return Ok(());
        }
        self.storage
            .record_audit_event(
                principal.scope().organization_id(),
                Some(principal.scope()),
                principal.actor(),
                &NewAuditEvent::success(
                    AuditAction::MemoryContentViewed,
                    shown_ids,
                    serde_json::json!({ "page": page }),
                ),
            )
            .await?;
        Ok(())
    }
}
