//! A session's key-value state as it is stored, the most keys a session holds, and why a
//! conditional write was refused.

use chrono::{DateTime, Utc};

/// Most keys one session may hold.
pub const MAX_KEYS_PER_SESSION: u64 = 1_000;

#[derive(Clone, Debug, PartialEq)]
pub struct SessionStateEntry {
    pub session_id: String,
    pub key: String,
    pub value: serde_json::Value,
    pub version: i64,
    pub user_id: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// Why a conditional write did not happen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StateWriteRefused {
    /// The stored version is not the expected one (`None`: there is no value).
    VersionMismatch { current: Option<i64> },
    /// The session already holds the most keys allowed.
    TooManyKeys,
}
