//! One page of the audit log.

use super::{checked, confined};
use crate::{EngineError, MemoryEngine};
use engram_core::{Operation, Principal};
use engram_storage::{AuditEventRecord, AuditFilter};

impl MemoryEngine {
    pub async fn list_audit_events_for(
        &self,
        principal: &Principal,
        filter: AuditFilter,
    ) -> Result<Vec<AuditEventRecord>, EngineError> {
        principal.authorize(Operation::ListAuditEvents)?;
        checked(&filter)?;
        let filter = confined(principal, filter);
        Ok(self
            .storage
            .audit_events(principal.scope(), &filter)
            .await?)
    }
}
