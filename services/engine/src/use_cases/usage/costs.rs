//! Usage times the price in effect, per day and unit, or per day, unit and value of a
//! breakdown (key, end-user, agent, channel).

use crate::{EngineError, MemoryEngine};
use chrono::{DateTime, Utc};
use engram_core::usage::{CostBreakdownRow, CostRow, UsageBreakdown};
use engram_core::{Operation, Principal};

impl MemoryEngine {
    /// Costs per day and unit.
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

    /// Costs per day, unit and value of `by` (the rows of one day and unit add up to the
    /// row [`MemoryEngine::costs_for`] gives).
    pub async fn costs_by_for(
        &self,
        principal: &Principal,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        by: UsageBreakdown,
    ) -> Result<Vec<CostBreakdownRow>, EngineError> {
        principal.authorize(Operation::GetCosts)?;
        super::check_report_window(from, to)?;
        Ok(self
            .storage
            .costs_breakdown(principal.scope(), from, to, by)
            .await?)
    }
}
