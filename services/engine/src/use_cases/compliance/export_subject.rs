//! Everything live the project holds about one end-user, audited as an export.

use crate::{EngineError, MemoryEngine};
use engram_core::{ExternalId, Operation, Principal};
use engram_storage::governance::ExportedMemory;

impl MemoryEngine {
    pub async fn export_subject_for(
        &self,
        principal: &Principal,
        user_id: &ExternalId,
    ) -> Result<Vec<ExportedMemory>, EngineError> {
        principal.authorize(Operation::ExportSubject)?;
        self.governance
            .export_subject(principal.scope(), user_id.as_str(), principal.actor())
            .await
    }
}
