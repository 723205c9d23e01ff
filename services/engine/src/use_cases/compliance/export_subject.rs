//! Everything live the project holds about one end-user, audited as an export.

use crate::governance::SubjectExport;
use crate::{EngineError, MemoryEngine};
use engram_core::{ExternalId, Operation, Principal};

impl MemoryEngine {
    pub async fn export_subject_for(
        &self,
        principal: &Principal,
        user_id: &ExternalId,
    ) -> Result<SubjectExport, EngineError> {
        principal.authorize(Operation::ExportSubject)?;
        self.governance
            .export_subject(principal.scope(), user_id.as_str(), principal.actor())
            .await
    }
}
