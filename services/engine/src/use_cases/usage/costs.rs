//! Usage times the price in effect, per day and unit.

use crate::{EngineError, MemoryEngine};
use chrono::{DateTime, Utc};
use engram_core::{Operation, Principal};
use engram_storage::usage::CostRow;

impl MemoryEngine {
    pub async fn costs_for(
        &self,
        principal: &Principal,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Vec<CostRow>, EngineError> {
        principal.authorize(Operation::GetCosts)?;
        super::check_report_window(from, to)?;
        Ok(self.storage.costs(principal.scope(), from, to).await?)
    }
}
