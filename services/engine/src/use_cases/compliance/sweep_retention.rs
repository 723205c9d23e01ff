//! Removing now the memories whose retention has run out, instead of waiting for the
//! periodic sweep.

use crate::{EngineError, MemoryEngine};
use engram_core::{Operation, Principal};

impl MemoryEngine {
    /// How many memories were removed.
    pub async fn sweep_retention_for(&self, principal: &Principal) -> Result<u64, EngineError> {
        principal.authorize(Operation::SweepRetention)?;
        self.governance.sweep_retention(principal.scope()).await
    }
}
