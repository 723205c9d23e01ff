//! Metered units per period, unit and credential, and LLM calls per model.

use crate::{EngineError, MemoryEngine};
use chrono::{DateTime, Utc};
use engram_core::{Operation, Principal};
use engram_storage::conversations::LlmModelUsage;
use engram_storage::usage::{UsageGranularity, UsageRow};

pub struct UsageReport {
    pub rows: Vec<UsageRow>,
    pub llm_by_model: Vec<LlmModelUsage>,
}

impl MemoryEngine {
    pub async fn usage_report_for(
        &self,
        principal: &Principal,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        granularity: UsageGranularity,
    ) -> Result<UsageReport, EngineError> {
        principal.authorize(Operation::GetUsage)?;
        super::check_report_window(from, to)?;
        let scope = principal.scope();
        Ok(UsageReport {
            rows: self.storage.usage(scope, from, to, granularity).await?,
            llm_by_model: self.storage.llm_usage_by_model(scope, from, to).await?,
        })
    }
}
