//! Feedback on a memory or a recall as it is stored: the rating, the text and what it
//! changed.

use crate::MemoryId;
use chrono::{DateTime, Utc};
use uuid::Uuid;

/// Stored feedback.
#[derive(Clone, Debug, PartialEq)]
pub struct FeedbackRecord {
    pub id: Uuid,
    pub memory_id: Option<MemoryId>,
    pub recall_id: Option<Uuid>,
    pub user_id: Option<String>,
    pub rating: String,
    pub text: Option<String>,
    pub correction: Option<serde_json::Value>,
    pub created_at: DateTime<Utc>,
}
