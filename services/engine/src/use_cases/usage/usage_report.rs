//! Metered units per period, unit and credential, and LLM calls per model; or per day and
//! unit broken down by key, end-user, agent or channel.

use crate::{EngineError, MemoryEngine};
use chrono::{DateTime, Utc};
use engram_core::usage::{UsageBreakdown, UsageBreakdownRow};
use engram_core::{FieldError, InvalidInput, Operation, Principal};
use engram_storage::conversations::LlmModelUsage;
use engram_storage::usage::{UsageGranularity, UsageRow};

/// What a usage report covers and how it groups what it counts.
#[derive(Clone, Copy, Debug)]
pub struct UsageReportRequest {
    pub from: DateTime<Utc>,
    /// Exclusive.
    pub to: DateTime<Utc>,
    pub granularity: UsageGranularity,
    /// Daily rows per value of this dimension instead of per credential.
    pub by: Option<UsageBreakdown>,
}

pub struct UsageReport {
    /// Per period, unit and credential (empty when broken down).
    pub rows: Vec<UsageRow>,
    /// Per day, unit and value of the requested dimension.
    pub breakdown: Option<Vec<UsageBreakdownRow>>,
    pub llm_by_model: Vec<LlmModelUsage>,
}

impl MemoryEngine {
    pub async fn usage_report_for(
        &self,
        principal: &Principal,
        request: UsageReportRequest,
    ) -> Result<UsageReport, EngineError> {
        principal.authorize(Operation::GetUsage)?;
        let UsageReportRequest {
            from,
            to,
            granularity,
            by,
        } = request;
        super::check_report_window(from, to)?;
        if by.is_some() && granularity == UsageGranularity::Hour {
            return Err(InvalidInput(vec![FieldError::new(
                "granularity",
                "a breakdown (`by`) is daily: use granularity=day",
            )])
            .into());
        }
        let scope = principal.scope();
        let llm_by_model = self.storage.llm_usage_by_model(scope, from, to).await?;
        Ok(match by {
            Some(by) => UsageReport {
                rows: Vec::new(),
                breakdown: Some(self.storage.usage_breakdown(scope, from, to, by).await?),
                llm_by_model,
            },
            None => UsageReport {
                rows: self.storage.usage(scope, from, to, granularity).await?,
                breakdown: None,
                llm_by_model,
            },
        })
    }
}
