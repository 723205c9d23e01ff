//! Find the end-users a compliance request is about when the exact id is not at hand: by the
//! start of their id, or by a metadata value one of their memories carries.

use crate::{EngineError, MemoryEngine};
use engram_core::{FieldError, InvalidInput, Operation, Principal};

/// Most end-users one lookup answers.
pub const MAX_SUBJECT_MATCHES: u64 = 50;

#[derive(Clone, Debug, Default)]
pub struct FindSubjectsRequest {
    /// The id starts with this (case included).
    pub id_prefix: Option<String>,
    /// One of their memories carries this metadata key with this value (a JSON scalar:
    /// numbers and booleans compare as such).
    pub metadata: Option<(String, serde_json::Value)>,
    pub limit: u64,
}

/// One end-user found, with how many of their memories matched.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SubjectMatch {
    pub user_id: String,
    pub memories: u64,
}

impl MemoryEngine {
    pub async fn find_subjects_for(
        &self,
        principal: &Principal,
        request: FindSubjectsRequest,
    ) -> Result<Vec<SubjectMatch>, EngineError> {
        principal.authorize(Operation::SummarizeSubject)?;
        // Whether any memory carries a metadata value is content: a lookup by it needs what
        // reading memories needs.
        if request.metadata.is_some() {
            principal.authorize(Operation::ListMemories)?;
        }
        let mut errors = Vec::new();
        let id_prefix = request
            .id_prefix
            .as_deref()
            .map(str::trim)
            .filter(|prefix| !prefix.is_empty());
        if id_prefix.is_some_and(|prefix| prefix.chars().count() > 255) {
            errors.push(FieldError::new(
                "id_prefix",
                "must be at most 255 characters",
            ));
        }
        if id_prefix.is_none() && request.metadata.is_none() {
            errors.push(FieldError::new(
                "id_prefix",
                "give the start of an end-user id or a metadata key=value to look for",
            ));
        }
        if !(1..=MAX_SUBJECT_MATCHES).contains(&request.limit) {
            errors.push(FieldError::new(
                "limit",
                format!("must be 1–{MAX_SUBJECT_MATCHES}"),
            ));
        }
        // The filter language's own rules for a metadata condition (key syntax, scalar value).
        let tree = match &request.metadata {
            None => engram_core::MemoryFilter::everything(),
            Some((key, value)) => {
                let condition = serde_json::json!({ "metadata": { key.trim(): value } });
                match engram_core::memory_filter::parse_memory_filter(&condition, "metadata") {
                    Ok(tree) => tree,
                    Err(mut invalid) => {
                        errors.append(&mut invalid);
                        engram_core::MemoryFilter::nothing()
                    }
                }
            }
        };
        if !errors.is_empty() {
            return Err(InvalidInput(errors).into());
        }
        let found = self
            .storage
            .subjects_matching(principal.memory_scope(), id_prefix, &tree, request.limit)
            .await?;
        Ok(found
            .into_iter()
            .map(|(user_id, memories)| SubjectMatch { user_id, memories })
            .collect())
    }
}
