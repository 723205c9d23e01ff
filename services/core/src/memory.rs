//! The memory record and its enumerations, as DESIGN.md describes them.

use crate::ids::{MemoryId, OrganizationId, ProjectId};
use crate::validation::ExternalId;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

text_enum!(
    /// What sort of knowledge a memory holds.
    MemoryKind {
        Semantic => "semantic",
        Episodic => "episodic",
        Procedural => "procedural",
        Preference => "preference",
    }
);

text_enum!(
    /// Where a memory came from.
    MemorySource {
        UserStated => "user_stated",
        ToolResult => "tool_result",
        ModelInferred => "model_inferred",
        Manual => "manual",
        File => "file",
    }
);

text_enum!(
    /// Lifecycle state. `deleted` memories are never shown through the API.
    MemoryState {
        Active => "active",
        Superseded => "superseded",
        Deleted => "deleted",
    }
);

/// What a caller asks Engram to remember, already validated; the engine computes its
/// embedding and storage assigns its id, version and timestamps.
#[derive(Clone, Debug)]
pub struct NewMemory {
    pub user_id: Option<ExternalId>,
    pub agent_id: Option<ExternalId>,
    pub session_id: Option<ExternalId>,
    pub kind: MemoryKind,
    pub key: Option<ExternalId>,
    pub content: String,
    pub metadata: serde_json::Map<String, serde_json::Value>,
    pub categories: Vec<String>,
    pub source: MemorySource,
    pub confidence: f64,
    pub expires_at: Option<DateTime<Utc>>,
}

/// A stored memory, as the domain sees it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Memory {
    pub id: MemoryId,
    pub organization_id: OrganizationId,
    pub project_id: ProjectId,
    pub user_id: Option<ExternalId>,
    pub agent_id: Option<ExternalId>,
    pub session_id: Option<ExternalId>,
    pub kind: MemoryKind,
    pub key: Option<ExternalId>,
    pub content: String,
    pub metadata: serde_json::Map<String, serde_json::Value>,
    pub categories: Vec<String>,
    pub source: MemorySource,
    pub confidence: f64,
    pub state: MemoryState,
    pub version: i64,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub valid_from: DateTime<Utc>,
    pub valid_to: Option<DateTime<Utc>>,
    pub expires_at: Option<DateTime<Utc>>,
    pub embedding_model: String,
    pub content_hash: String,
    /// Cannot be edited or deleted (subject erasure still removes it).
    pub immutable: bool,
    /// Cannot be edited, deleted, expired or erased until the hold is lifted.
    pub legal_hold: bool,
}

/// SHA-256 of the content, hex encoded: lets the audit log and deduplication refer to
/// content without holding it.
pub fn content_digest(content: &str) -> String {
    hex::encode(Sha256::digest(content.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_enum_values_are_rejected_with_the_allowed_list() {
        let error = "fact".parse::<MemoryKind>().unwrap_err();
        assert!(
            error.contains("semantic, episodic, procedural, preference"),
            "{error}"
        );
        assert_eq!(
            "user_stated".parse::<MemorySource>(),
            Ok(MemorySource::UserStated)
        );
    }
}
