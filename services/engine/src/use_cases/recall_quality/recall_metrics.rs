//! The project's recall quality over a window.

use crate::recall_metrics::{MetricsWindow, RecallMetrics};
use crate::{EngineError, MemoryEngine};
use engram_core::{Operation, Principal};

impl MemoryEngine {
    pub async fn recall_metrics_for(
        &self,
        principal: &Principal,
        window: &MetricsWindow,
    ) -> Result<RecallMetrics, EngineError> {
        principal.authorize(Operation::GetRecallMetrics)?;
        crate::use_cases::usage::check_report_window(window.from, window.to)?;
        self.recall_metrics(principal.scope(), window).await
    }
}
