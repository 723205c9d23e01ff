//! Every matching event, oldest first, up to [`MAX_EXPORT_EVENTS`]: what the API's and the
//! console's exports hold.

use super::{checked, confined};
use crate::{EngineError, MemoryEngine};
use engram_core::{Operation, Principal};
use engram_storage::{AuditEventRecord, AuditFilter};

pub const MAX_EXPORT_EVENTS: usize = 100_000;

impl MemoryEngine {
    pub async fn export_audit_events_for(
        &self,
        principal: &Principal,
        filter: AuditFilter,
    ) -> Result<Vec<AuditEventRecord>, EngineError> {
        principal.authorize(Operation::ExportAuditEvents)?;
        const PAGE: u64 = 500;
        // The export reads every page itself: the caller's page size means nothing here.
        let filter = AuditFilter {
            limit: PAGE,
            ..filter
        };
        checked(&filter)?;
        let mut filter = confined(principal, filter);
        filter.after_id = None;
        filter.newest_first = false;
        let mut events = Vec::new();
        loop {
            let page = self
                .storage
                .audit_events(principal.scope(), &filter)
                .await?;
            let Some(last) = page.last() else { break };
            filter.after_id = Some(last.id);
            let full_page = page.len() as u64 == PAGE;
            events.extend(page);
            if events.len() >= MAX_EXPORT_EVENTS || !full_page {
                break;
            }
        }
        events.truncate(MAX_EXPORT_EVENTS);
        Ok(events)
    }
}
