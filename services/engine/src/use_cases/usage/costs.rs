//! Usage times the price in effect, per day and unit, or per day, unit and value of a
//! breakdown (key, end-user, agent, channel).

use crate::{EngineError, MemoryEngine};
use chrono::{DateTime, Utc};
use engram_core::usage::{BreakdownValue, CostBreakdownRow, UsageBreakdown};
use engram_core::{Operation, Principal};

impl MemoryEngine {
    /// Costs per day and unit; with `by`, per day, unit and value of that dimension (the
    /// rows of one day and unit add up to the unbroken row).
    pub async fn costs_for(
        &self,
        principal: &Principal,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        by: Option<UsageBreakdown>,
    ) -> Result<Vec<CostBreakdownRow>, EngineError> {
        principal.authorize(Operation::GetCosts)?;
        super::check_report_window(from, to)?;
        let scope = principal.scope();
        Ok(match by {
            Some(by) => self.storage.costs_breakdown(scope, from, to, by).await?,
            None => self
                .storage
                .costs(scope, from, to)
                .await?
                .into_iter()
                .map(|cost| CostBreakdownRow {
                    value: BreakdownValue::Unattributed,
                    cost,
                })
                .collect(),
        })
    }
}
