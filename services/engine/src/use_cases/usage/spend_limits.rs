//! The project's budget, quotas and recall budget with the month so far; replacing them
//! takes effect at once on this server (within the guard's cache time on others).

use crate::spend_guard::MonthToDate;
use crate::{EngineError, MemoryEngine};
use chrono::Utc;
use engram_core::usage::{BillingMonth, SpendLimits};
use engram_core::{Operation, Principal};
use engram_storage::usage::BudgetAlert;

pub struct SpendLimitsReport {
    pub limits: SpendLimits,
    pub month: BillingMonth,
    /// Written usage plus what this server's meter holds.
    pub month_to_date: MonthToDate,
    pub alerts: Vec<BudgetAlert>,
}

impl MemoryEngine {
    async fn spend_limits_report(
        &self,
        principal: &Principal,
        limits: SpendLimits,
    ) -> Result<SpendLimitsReport, EngineError> {
        let scope = principal.scope();
        let month = BillingMonth::containing(Utc::now());
        let month_to_date = self
            .spend_guard
            .month_to_date(scope, &limits, month)
            .await?;
        let alerts = self.storage.budget_alerts(scope, month).await?;
        Ok(SpendLimitsReport {
            limits,
            month,
            month_to_date,
            alerts,
        })
    }

    pub async fn spend_limits_for(
        &self,
        principal: &Principal,
    ) -> Result<SpendLimitsReport, EngineError> {
        principal.authorize(Operation::GetSpendLimits)?;
        let limits = self.storage.spend_limits(principal.scope()).await?;
        self.spend_limits_report(principal, limits).await
    }

    pub async fn put_spend_limits_for(
        &self,
        principal: &Principal,
        limits: SpendLimits,
    ) -> Result<SpendLimitsReport, EngineError> {
        principal.authorize(Operation::PutSpendLimits)?;
        let limit_errors = limits.limit_errors();
        if !limit_errors.is_empty() {
            return Err(engram_core::InvalidInput(limit_errors).into());
        }
        // Checked as sent (positions name the caller's own); kept in order, once each.
        let mut limits = limits;
        if let Some(budget) = &mut limits.monthly_budget {
            budget.alert_thresholds_percent.sort_unstable();
            budget.alert_thresholds_percent.dedup();
        }
        // Evictions are deletes by this policy, in the name of whoever last set it.
        if let Some(memory_limits) = &mut limits.memory_limits {
            memory_limits.set_by = Some(principal.actor().label());
        }
        let saved = self
            .storage
            .set_spend_limits(principal.scope(), &limits, principal.actor())
            .await?;
        self.forget_project_settings(principal.scope().project_id());
        self.spend_limits_report(principal, saved).await
    }
}
