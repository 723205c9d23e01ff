//! Billable units: what a request spends, named the way invoices and the usage API name it.

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UsageUnit {
    /// Memories stored by a successful add (an idempotent replay stores none).
    MemoriesWritten,
    /// Successful searches.
    Searches,
}

impl UsageUnit {
    pub const ALL: [UsageUnit; 2] = [UsageUnit::MemoriesWritten, UsageUnit::Searches];

    pub const fn as_str(self) -> &'static str {
        match self {
            UsageUnit::MemoriesWritten => "memories_written",
            UsageUnit::Searches => "searches",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|unit| unit.as_str() == text)
    }
}
