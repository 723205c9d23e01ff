//! Calls to the configured LLM per model over a range: calls, failures and tokens, for the
//! usage page's table.

use crate::{EngineError, MemoryEngine};
use chrono::{DateTime, Utc};
use engram_core::{Operation, Principal};
use engram_storage::conversations::LlmModelUsage;

impl MemoryEngine {
    pub async fn llm_usage_for(
        &self,
        principal: &Principal,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Vec<LlmModelUsage>, EngineError> {
        principal.authorize(Operation::GetUsage)?;
        super::check_report_window(from, to)?;
        Ok(self
            .storage
            .llm_usage_by_model(principal.scope(), from, to)
            .await?)
    }
}
