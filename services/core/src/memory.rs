//! The memory record and its enumerations, as DESIGN.md describes them.

use crate::ids::{MemoryId, OrganizationId, ProjectId};
use crate::scope::SubjectFilter;
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
        Trajectory => "trajectory",
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

text_enum!(
    /// Who among a project's agents reads a memory: `private`, only its own agent (and
    /// credentials bound to no agent); `shared`, every agent of the project.
    Visibility {
        Private => "private",
        Shared => "shared",
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
    /// When what the memory describes happened (event time); `None`: when it is written.
    pub occurred_at: Option<DateTime<Utc>>,
    /// Who among the project's agents reads it; `None`: the project's default.
    pub visibility: Option<Visibility>,
    /// The team of agents a shared memory is shared with; `None`: every agent.
    pub shared_with: Option<ExternalId>,
}

/// Content within the documented size: not empty, at most
/// [`crate::limits::MAX_CONTENT_BYTES`].
pub fn content_errors(field: &str, content: &str) -> Vec<crate::FieldError> {
    use crate::limits::MAX_CONTENT_BYTES;
    if content.is_empty() {
        return vec![crate::FieldError::new(field, "must not be empty")];
    }
    if content.len() > MAX_CONTENT_BYTES {
        return vec![crate::FieldError::new(
            field,
            format!(
                "must be at most {MAX_CONTENT_BYTES} bytes, got {}",
                content.len()
            ),
        )];
    }
    Vec::new()
}

/// `Some` refusal when an event time lies in the future beyond
/// [`crate::limits::MAX_OCCURRED_AT_SKEW_SECONDS`] (clocks differ a little; events have not
/// happened yet).
pub fn occurred_at_error(
    field: &str,
    occurred_at: Option<DateTime<Utc>>,
) -> Option<crate::FieldError> {
    use crate::limits::MAX_OCCURRED_AT_SKEW_SECONDS;
    let latest = Utc::now() + chrono::Duration::seconds(MAX_OCCURRED_AT_SKEW_SECONDS);
    occurred_at.filter(|at| *at > latest).map(|at| {
        crate::FieldError::new(
            field,
            format!(
                "{} is in the future; an event time may be at most {MAX_OCCURRED_AT_SKEW_SECONDS} s ahead of the server's clock",
                at.to_rfc3339()
            ),
        )
    })
}

/// Metadata within [`crate::limits::MAX_METADATA_BYTES`] as JSON.
pub fn metadata_errors(
    field: &str,
    metadata: &serde_json::Map<String, serde_json::Value>,
) -> Vec<crate::FieldError> {
    use crate::limits::MAX_METADATA_BYTES;
    let size = serde_json::to_vec(metadata)
        .map(|bytes| bytes.len())
        .unwrap_or(usize::MAX);
    if size > MAX_METADATA_BYTES {
        return vec![crate::FieldError::new(
            field,
            format!("must be at most {MAX_METADATA_BYTES} bytes as JSON, got {size}"),
        )];
    }
    Vec::new()
}

/// At most [`crate::limits::MAX_CATEGORIES`] categories of 1–
/// [`crate::limits::MAX_CATEGORY_CHARS`] characters (each named `field[i]`).
pub fn categories_errors(field: &str, categories: &[String]) -> Vec<crate::FieldError> {
    use crate::limits::{MAX_CATEGORIES, MAX_CATEGORY_CHARS};
    let mut errors = Vec::new();
    if categories.len() > MAX_CATEGORIES {
        errors.push(crate::FieldError::new(
            field,
            format!(
                "at most {MAX_CATEGORIES} categories, got {}",
                categories.len()
            ),
        ));
    }
    for (position, category) in categories.iter().enumerate() {
        let characters = category.chars().count();
        if characters == 0 || characters > MAX_CATEGORY_CHARS {
            errors.push(crate::FieldError::new(
                format!("{field}[{position}]"),
                format!("must be 1–{MAX_CATEGORY_CHARS} characters"),
            ));
        }
    }
    errors
}

impl NewMemory {
    /// What is wrong with the memory against the documented limits, each field named under
    /// `path` (`memories[3]`). Every door's add is held to them by the add use case.
    pub fn limit_errors(&self, path: &str) -> Vec<crate::FieldError> {
        let field = |name: &str| format!("{path}.{name}");
        let mut errors = content_errors(&field("content"), &self.content);
        if !(0.0..=1.0).contains(&self.confidence) {
            errors.push(crate::FieldError::new(
                field("confidence"),
                "must be between 0 and 1",
            ));
        }
        errors.extend(metadata_errors(&field("metadata"), &self.metadata));
        errors.extend(categories_errors(&field("categories"), &self.categories));
        if let Some(error) = occurred_at_error(&field("occurred_at"), self.occurred_at) {
            errors.push(error);
        }
        errors
    }

    /// `Some` refusal naming `memories` unless an add holds 1–
    /// [`crate::limits::MAX_MEMORIES_PER_ADD`] memories.
    pub fn batch_size_error(count: usize) -> Option<crate::FieldError> {
        use crate::limits::MAX_MEMORIES_PER_ADD;
        (count == 0 || count > MAX_MEMORIES_PER_ADD).then(|| {
            crate::FieldError::new(
                "memories",
                format!("must hold 1–{MAX_MEMORIES_PER_ADD} memories, got {count}"),
            )
        })
    }

    /// A whole add: the batch size, then each memory within the limits (named
    /// `memories[i].…`).
    pub fn batch_limit_errors(memories: &[NewMemory]) -> Vec<crate::FieldError> {
        if let Some(error) = Self::batch_size_error(memories.len()) {
            return vec![error];
        }
        memories
            .iter()
            .enumerate()
            .flat_map(|(position, memory)| memory.limit_errors(&format!("memories[{position}]")))
            .collect()
    }
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
    /// When what the memory describes happened (event time); the write time unless given.
    pub occurred_at: DateTime<Utc>,
    pub valid_from: DateTime<Utc>,
    pub valid_to: Option<DateTime<Utc>>,
    pub expires_at: Option<DateTime<Utc>>,
    pub embedding_model: String,
    pub content_hash: String,
    /// Cannot be edited or deleted (subject erasure still removes it).
    pub immutable: bool,
    /// Cannot be edited, deleted, expired or erased until the hold is lifted.
    pub legal_hold: bool,
    /// Who among the project's agents reads it.
    pub visibility: Visibility,
    /// For a shared memory, the one team of agents it is shared with; `None`: every agent.
    #[serde(default)]
    pub shared_with: Option<ExternalId>,
    /// When a reviewer or a supervisor verified it; `None`: unverified (an agent's
    /// intermediate result until someone vouches for it).
    pub verified_at: Option<DateTime<Utc>>,
    /// Who verified it (an actor label: `console_account:<id>`, `api_key:<id>`).
    pub verified_by: Option<String>,
    /// `content` and `metadata` were left out: the caller may not read content.
    #[serde(default)]
    pub content_omitted: bool,
}

impl Memory {
    /// The content-free form shown to a caller that may not read content: no `content`, no
    /// `metadata` (free text too); ids, versions, kinds, states, categories and times stay.
    pub fn without_content(mut self) -> Memory {
        self.content = String::new();
        self.metadata = serde_json::Map::new();
        self.content_omitted = true;
        self
    }
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
            error.contains("semantic, episodic, procedural, preference, trajectory"),
            "{error}"
        );
        assert_eq!(
            "user_stated".parse::<MemorySource>(),
            Ok(MemorySource::UserStated)
        );
    }
}

#[cfg(test)]
mod add_limit_tests {
    use super::*;

    fn memory(content: &str) -> NewMemory {
        NewMemory {
            user_id: None,
            agent_id: None,
            session_id: None,
            kind: MemoryKind::Semantic,
            key: None,
            content: content.to_string(),
            metadata: serde_json::Map::new(),
            categories: Vec::new(),
            source: MemorySource::UserStated,
            confidence: 1.0,
            expires_at: None,
            occurred_at: None,
            visibility: None,
            shared_with: None,
        }
    }

    /// The add limits hold whatever door built the memories.
    #[test]
    fn an_add_beyond_the_documented_limits_names_each_field() {
        assert!(NewMemory::batch_limit_errors(&[memory("fine")]).is_empty());
        let mut beyond = memory("");
        beyond.confidence = 1.5;
        beyond.metadata.insert(
            "note".to_string(),
            serde_json::Value::String("x".repeat(crate::limits::MAX_METADATA_BYTES)),
        );
        beyond.categories = vec![String::new()];
        let fields: Vec<String> = NewMemory::batch_limit_errors(&[memory("fine"), beyond])
            .into_iter()
            .map(|error| error.field)
            .collect();
        assert_eq!(
            fields,
            vec![
                "memories[1].content",
                "memories[1].confidence",
                "memories[1].metadata",
                "memories[1].categories[0]"
            ]
        );
        let too_many: Vec<NewMemory> = (0..=crate::limits::MAX_MEMORIES_PER_ADD)
            .map(|_| memory("x"))
            .collect();
        let fields: Vec<String> = NewMemory::batch_limit_errors(&too_many)
            .into_iter()
            .map(|error| error.field)
            .collect();
        assert_eq!(fields, vec!["memories"]);
        assert_eq!(NewMemory::batch_limit_errors(&[])[0].field, "memories");
    }
}

#[derive(Clone, Debug, Default)]
pub struct MemoryListFilter {
    pub subject: SubjectFilter,
    pub kind: Option<MemoryKind>,
    pub state: Option<MemoryState>,
    /// Case-insensitive substring of the content or the user id (console search).
    pub text_contains: Option<String>,
    /// Exclusive: the page starts after this id (pages run newest first).
    pub after: Option<MemoryId>,
    pub limit: u64,
    pub source: Option<crate::MemorySource>,
    /// The memory carries this category.
    pub category: Option<String>,
    /// Created at or after.
    pub created_from: Option<DateTime<Utc>>,
    /// Created before.
    pub created_to: Option<DateTime<Utc>>,
    /// A filter tree the memories also meet (the filter language).
    pub tree: crate::MemoryFilter,
}

impl MemoryListFilter {
    /// The conditions a search can apply too (source, category, creation times and the
    /// tree), as one filter tree: subject, kind and state are a search's own fields.
    pub fn search_tree(&self) -> crate::MemoryFilter {
        use crate::memory_filter::{Comparison, FilterCondition, TimeField};
        let mut tree = self.tree.clone();
        let mut add = |condition: FilterCondition| {
            tree = std::mem::take(&mut tree).and(crate::MemoryFilter::condition(condition));
        };
        if let Some(source) = self.source {
            add(FilterCondition::Source(vec![source]));
        }
        if let Some(category) = self
            .category
            .clone()
            .filter(|category| !category.is_empty())
        {
            add(FilterCondition::CategoriesAny(vec![category]));
        }
        for (bound, comparison) in [
            (self.created_from, Comparison::Gte),
            (self.created_to, Comparison::Lt),
        ] {
            if let Some(at) = bound {
                add(FilterCondition::Time {
                    field: TimeField::CreatedAt,
                    comparison,
                    at,
                });
            }
        }
        tree
    }
}

/// One end-user, agent, session or application a project's memories name, and how many
/// active memories name it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EntityCount {
    pub id: String,
    pub memories: u64,
}

#[derive(Clone, Debug)]
pub struct MemoryPage {
    pub memories: Vec<Memory>,
    pub next_cursor: Option<MemoryId>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct HistoryEntry {
    pub version: i64,
    pub event: String,
    pub content: Option<String>,
    pub actor: String,
    pub reason: Option<String>,
    pub at: DateTime<Utc>,
}
