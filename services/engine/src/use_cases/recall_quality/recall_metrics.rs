//! The project's recall quality over a window. Its empty queries are end-users' words: a
//! caller that may not read content gets their counts, never their texts.

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
        if window.bucket == crate::recall_metrics::MetricsBucket::Hour
            && window.to - window.from
                > chrono::TimeDelta::hours(crate::recall_metrics::MAX_BUCKETS)
        {
            return Err(engram_core::InvalidInput(vec![engram_core::FieldError::new(
                "bucket",
                format!(
                    "hourly buckets cover at most {} hours; use day",
                    crate::recall_metrics::MAX_BUCKETS
                ),
            )])
            .into());
        }
        let mut metrics = self.recall_metrics(principal.scope(), window).await?;
        if principal.answers_without_content(Operation::GetRecallMetrics) {
            for empty_query in &mut metrics.empty_queries {
                empty_query.query = None;
            }
        }
        Ok(metrics)
    }
}
