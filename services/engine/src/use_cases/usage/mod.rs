//! What a project used and spent, and the limits on it: the same figures for the API and the
//! console (the month so far includes what this server's meter has not written yet).

mod costs;
mod llm_usage;
mod spend_limits;
mod usage_report;

pub use spend_limits::SpendLimitsReport;
pub use usage_report::UsageReport;
