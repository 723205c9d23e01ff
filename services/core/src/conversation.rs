//! Conversation messages and what they become: the roles a message can have, the candidate
//! memories drawn from them, and the reconciliation rules that decide, for each candidate,
//! whether it is added, updates, supersedes or deletes a memory, or changes nothing.

use crate::memory::{MemoryKind, MemorySource, content_digest};
use crate::validation::ExternalId;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;
use uuid::Uuid;

/// Messages accepted in one call.
pub const MAX_MESSAGES_PER_CALL: usize = 100;
/// Largest page of session history.
pub const MAX_MESSAGE_PAGE: u64 = 500;
/// Similarity (cosine, 0–1) at or above which a candidate is the same memory said again.
pub const NEAR_DUPLICATE_SIMILARITY: f32 = 0.95;
/// Similarity at or above which an existing memory is shown to the model for reconciliation.
pub const RELATED_SIMILARITY: f32 = 0.55;
/// Existing memories shown to the model per candidate.
pub const RELATED_PER_CANDIDATE: usize = 5;

/// What is wrong with a batch of message contents against the documented limits: at least
/// one message, at most [`MAX_MESSAGES_PER_CALL`], each content not blank and within
/// [`crate::limits::MAX_CONTENT_BYTES`]. The add-messages use case holds every door to it; a
/// door may call it beside its own parsing to report every bad field in one answer.
pub fn message_batch_errors(contents: &[&str]) -> Vec<crate::FieldError> {
    use crate::FieldError;
    use crate::limits::MAX_CONTENT_BYTES;
    if contents.is_empty() {
        return vec![FieldError::new("messages", "send at least one message")];
    }
    if contents.len() > MAX_MESSAGES_PER_CALL {
        return vec![FieldError::new(
            "messages",
            format!(
                "at most {MAX_MESSAGES_PER_CALL} messages per call, got {}",
                contents.len()
            ),
        )];
    }
    let mut errors = Vec::new();
    for (index, content) in contents.iter().enumerate() {
        let field = format!("messages[{index}].content");
        if content.trim().is_empty() {
            errors.push(FieldError::new(field, "must not be empty"));
        } else if content.len() > MAX_CONTENT_BYTES {
            errors.push(FieldError::new(
                field,
                format!("at most {MAX_CONTENT_BYTES} bytes, got {}", content.len()),
            ));
        }
    }
    errors
}

/// The page size a session-history read asks for, within 1..=[`MAX_MESSAGE_PAGE`].
pub fn message_page_errors(limit: u64) -> Vec<crate::FieldError> {
    if (1..=MAX_MESSAGE_PAGE).contains(&limit) {
        return Vec::new();
    }
    vec![crate::FieldError::new(
        "limit",
        format!("must be between 1 and {MAX_MESSAGE_PAGE}"),
    )]
}

/// Who said a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MessageRole {
    User,
    Assistant,
    System,
    Tool,
}

impl MessageRole {
    pub const ALL: [MessageRole; 4] = [
        MessageRole::User,
        MessageRole::Assistant,
        MessageRole::System,
        MessageRole::Tool,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            MessageRole::User => "user",
            MessageRole::Assistant => "assistant",
            MessageRole::System => "system",
            MessageRole::Tool => "tool",
        }
    }

    /// The source a memory taken verbatim from such a message carries.
    pub const fn verbatim_source(self) -> MemorySource {
        match self {
            MessageRole::User => MemorySource::UserStated,
            MessageRole::Tool => MemorySource::ToolResult,
            MessageRole::Assistant | MessageRole::System => MemorySource::ModelInferred,
        }
    }
}

impl fmt::Display for MessageRole {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.as_str())
    }
}

impl FromStr for MessageRole {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|role| role.as_str() == text)
            .ok_or_else(|| {
                format!("unknown role {text:?}; expected one of: user, assistant, system, tool")
            })
    }
}

/// A memory drawn from messages, before it is compared with what the scope already holds.
#[derive(Clone, Debug, PartialEq)]
pub struct CandidateMemory {
    pub kind: MemoryKind,
    pub content: String,
    pub key: Option<String>,
    pub confidence: f64,
    pub expires_at: Option<DateTime<Utc>>,
    pub source: MemorySource,
}

/// An active memory of the same scope that resembles a candidate.
#[derive(Clone, Debug, PartialEq)]
pub struct RelatedMemory {
    /// How the model refers to it (`m1`, `m2`, …): short labels, so it cannot invent ids.
    pub label: String,
    pub memory_id: crate::MemoryId,
    pub content: String,
    pub key: Option<String>,
    pub similarity: f32,
    /// Immutable or under legal hold: it cannot be updated, superseded or deleted.
    pub locked: bool,
}

/// What reconciliation does with one candidate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ReconcileAction {
    /// Store the candidate as a new memory.
    Add,
    /// Rewrite the target's content (same memory, next version).
    Update,
    /// Store the candidate and mark the target superseded by it.
    Supersede,
    /// The candidate says the target is no longer true: delete the target.
    Delete,
    /// Nothing new: store nothing.
    Noop,
}

impl ReconcileAction {
    pub const fn as_str(self) -> &'static str {
        match self {
            ReconcileAction::Add => "ADD",
            ReconcileAction::Update => "UPDATE",
            ReconcileAction::Supersede => "SUPERSEDE",
            ReconcileAction::Delete => "DELETE",
            ReconcileAction::Noop => "NOOP",
        }
    }

    fn parse(text: &str) -> Option<Self> {
        match text.trim().to_ascii_uppercase().as_str() {
            "ADD" => Some(ReconcileAction::Add),
            "UPDATE" => Some(ReconcileAction::Update),
            "SUPERSEDE" => Some(ReconcileAction::Supersede),
            "DELETE" => Some(ReconcileAction::Delete),
            "NOOP" | "NONE" => Some(ReconcileAction::Noop),
            _ => None,
        }
    }
}

/// What the model proposed for one candidate, as it wrote it (unchecked).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct ProposedDecision {
    pub candidate: usize,
    #[serde(default)]
    pub action: String,
    #[serde(default)]
    pub target: Option<String>,
    /// The merged content for UPDATE.
    #[serde(default)]
    pub content: Option<String>,
    #[serde(default)]
    pub reason: Option<String>,
}

/// The checked decision for one candidate.
#[derive(Clone, Debug, PartialEq)]
pub struct ReconcileDecision {
    pub action: ReconcileAction,
    /// The existing memory changed (UPDATE, SUPERSEDE, DELETE) or repeated (NOOP).
    pub target: Option<crate::MemoryId>,
    /// The content written for ADD, SUPERSEDE and UPDATE.
    pub content: Option<String>,
    /// Why, in words that go into the memory's history.
    pub reason: String,
}

/// The rules that hold whatever a model says, in order:
/// 1. the same content already stored in the scope, or a near-duplicate of it
///    (similarity ≥ [`NEAR_DUPLICATE_SIMILARITY`]): NOOP;
/// 2. a candidate with a key: ADD, and storage supersedes the active memory with that key;
/// 3. the model's decision, if it names a shown, unlocked memory where one is needed;
/// 4. otherwise ADD.
pub fn reconcile_candidate(
    candidate: &CandidateMemory,
    related: &[RelatedMemory],
    proposed: Option<&ProposedDecision>,
) -> ReconcileDecision {
    let candidate_digest = content_digest(candidate.content.trim());
    if let Some(same) = related
        .iter()
        .find(|memory| content_digest(memory.content.trim()) == candidate_digest)
    {
        return ReconcileDecision {
            action: ReconcileAction::Noop,
            target: Some(same.memory_id),
            content: None,
            reason: "the same content is already stored".to_string(),
        };
    }
    // A keyed candidate may restate a keyed fact with a new value that reads almost the
    // same ("prefers tea" / "prefers green tea"): for it the key decides, not the wording.
    if candidate.key.is_none()
        && let Some(close) = related
            .iter()
            .filter(|memory| memory.similarity >= NEAR_DUPLICATE_SIMILARITY)
            .max_by(|left, right| left.similarity.total_cmp(&right.similarity))
    {
        return ReconcileDecision {
            action: ReconcileAction::Noop,
            target: Some(close.memory_id),
            content: None,
            reason: format!(
                "a near-duplicate of a stored memory (similarity {:.3})",
                close.similarity
            ),
        };
    }
    if let Some(key) = &candidate.key {
        return ReconcileDecision {
            action: ReconcileAction::Add,
            target: None,
            content: Some(candidate.content.clone()),
            reason: format!("keyed fact {key:?}: supersedes the active memory with that key"),
        };
    }
    let Some(proposed) = proposed else {
        return add(candidate, "new information");
    };
    let model_reason = proposed
        .reason
        .as_deref()
        .map(str::trim)
        .filter(|reason| !reason.is_empty())
        .map(|reason| {
            reason
                .chars()
                .take(crate::limits::MAX_REASON_CHARS)
                .collect::<String>()
        });
    let Some(action) = ReconcileAction::parse(&proposed.action) else {
        return add(
            candidate,
            &format!(
                "the model's action {:?} is not one of ADD, UPDATE, SUPERSEDE, DELETE, NOOP",
                proposed.action
            ),
        );
    };
    if action == ReconcileAction::Add {
        return add(
            candidate,
            model_reason.as_deref().unwrap_or("new information"),
        );
    }
    let target = proposed
        .target
        .as_deref()
        .and_then(|label| related.iter().find(|memory| memory.label == label.trim()));
    let Some(target) = target else {
        if action == ReconcileAction::Noop {
            return ReconcileDecision {
                action,
                target: None,
                content: None,
                reason: model_reason.unwrap_or_else(|| "nothing new".to_string()),
            };
        }
        return add(
            candidate,
            &format!(
                "the model chose {} but named no memory it was shown",
                action.as_str()
            ),
        );
    };
    if target.locked && action != ReconcileAction::Noop {
        return add(
            candidate,
            &format!(
                "the model chose {} of a memory that is immutable or on legal hold",
                action.as_str()
            ),
        );
    }
    let reason = model_reason.unwrap_or_else(|| action.as_str().to_ascii_lowercase());
    let content = match action {
        ReconcileAction::Update => Some(
            proposed
                .content
                .as_deref()
                .map(str::trim)
                .filter(|content| !content.is_empty())
                .unwrap_or(candidate.content.as_str())
                .to_string(),
        ),
        ReconcileAction::Supersede => Some(candidate.content.clone()),
        _ => None,
    };
    ReconcileDecision {
        action,
        target: Some(target.memory_id),
        content,
        reason,
    }
}

fn add(candidate: &CandidateMemory, reason: &str) -> ReconcileDecision {
    ReconcileDecision {
        action: ReconcileAction::Add,
        target: None,
        content: Some(candidate.content.clone()),
        reason: reason.to_string(),
    }
}

/// A candidate as the model wrote it (unchecked): kind, content, key, confidence,
/// expires_at and source, any of which may be missing or wrong.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct ProposedCandidate {
    #[serde(default)]
    pub kind: Option<String>,
    #[serde(default)]
    pub content: Option<String>,
    #[serde(default)]
    pub key: Option<String>,
    #[serde(default)]
    pub confidence: Option<f64>,
    #[serde(default)]
    pub expires_at: Option<String>,
    #[serde(default)]
    pub source: Option<String>,
}

impl ProposedCandidate {
    /// The candidate, or why it is dropped. Unknown kinds become `semantic`, an unknown
    /// source `model_inferred`, a confidence outside 0–1 is clamped, and an expiry in the
    /// past or unreadable is dropped (the fact is kept).
    pub fn check(self, now: DateTime<Utc>) -> Result<CandidateMemory, String> {
        let content = self
            .content
            .map(|content| content.trim().to_string())
            .filter(|content| !content.is_empty())
            .ok_or_else(|| "no content".to_string())?;
        if content.len() > crate::limits::MAX_CONTENT_BYTES {
            return Err("content longer than the memory limit".to_string());
        }
        let kind = self
            .kind
            .as_deref()
            .and_then(|kind| kind.trim().to_ascii_lowercase().parse().ok())
            .unwrap_or(MemoryKind::Semantic);
        let source = self
            .source
            .as_deref()
            .and_then(|source| source.trim().to_ascii_lowercase().parse().ok())
            .filter(|source| {
                matches!(
                    source,
                    MemorySource::UserStated
                        | MemorySource::ModelInferred
                        | MemorySource::ToolResult
                )
            })
            .unwrap_or(MemorySource::ModelInferred);
        let key = self
            .key
            .map(|key| key.trim().to_string())
            .filter(|key| crate::ExternalId::parse(key).is_ok());
        let expires_at = self
            .expires_at
            .as_deref()
            .and_then(|text| DateTime::parse_from_rfc3339(text.trim()).ok())
            .map(|at| at.with_timezone(&Utc))
            .filter(|at| *at > now);
        Ok(CandidateMemory {
            kind,
            content,
            key,
            confidence: self.confidence.unwrap_or(0.8).clamp(0.0, 1.0),
            expires_at,
            source,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MemoryId;

    fn candidate(content: &str, key: Option<&str>) -> CandidateMemory {
        CandidateMemory {
            kind: MemoryKind::Semantic,
            content: content.to_string(),
            key: key.map(str::to_string),
            confidence: 0.9,
            expires_at: None,
            source: MemorySource::UserStated,
        }
    }

    fn related(label: &str, content: &str, similarity: f32) -> RelatedMemory {
        RelatedMemory {
            label: label.to_string(),
            memory_id: MemoryId::generate(),
            content: content.to_string(),
            key: None,
            similarity,
            locked: false,
        }
    }

    fn proposed(action: &str, target: Option<&str>, content: Option<&str>) -> ProposedDecision {
        ProposedDecision {
            candidate: 0,
            action: action.to_string(),
            target: target.map(str::to_string),
            content: content.map(str::to_string),
            reason: Some("the user moved".to_string()),
        }
    }

    #[test]
    fn the_same_content_is_never_stored_twice_whatever_the_model_says() {
        let shown = [related("m1", "Lives in Berlin", 0.99)];
        let decision = reconcile_candidate(
            &candidate("Lives in Berlin", None),
            &shown,
            Some(&proposed("ADD", None, None)),
        );
        assert_eq!(decision.action, ReconcileAction::Noop);
        assert_eq!(decision.target, Some(shown[0].memory_id));
    }

    #[test]
    fn a_near_duplicate_is_a_noop_but_a_merely_related_memory_is_not() {
        let close = [related("m1", "Lives in Berlin, Germany", 0.97)];
        let decision = reconcile_candidate(&candidate("Lives in Berlin", None), &close, None);
        assert_eq!(decision.action, ReconcileAction::Noop);
        assert!(
            decision.reason.contains("near-duplicate"),
            "{}",
            decision.reason
        );

        let loose = [related("m1", "Works in Berlin", 0.80)];
        let decision = reconcile_candidate(&candidate("Lives in Berlin", None), &loose, None);
        assert_eq!(decision.action, ReconcileAction::Add);
    }

    #[test]
    fn a_keyed_candidate_is_added_so_storage_supersedes_by_key() {
        let shown = [related("m1", "Prefers tea", 0.96)];
        let decision = reconcile_candidate(
            &candidate("Prefers green tea", Some("drink")),
            &shown,
            Some(&proposed("NOOP", Some("m1"), None)),
        );
        assert_eq!(decision.action, ReconcileAction::Add);
        assert!(decision.reason.contains("drink"), "{}", decision.reason);
    }

    #[test]
    fn the_models_decision_is_taken_when_it_names_a_shown_memory() {
        let shown = [
            related("m1", "Lives in Berlin", 0.7),
            related("m2", "Has a dog", 0.6),
        ];
        let moved = candidate("Lives in Lisbon", None);
        let supersede = reconcile_candidate(
            &moved,
            &shown,
            Some(&proposed("SUPERSEDE", Some("m1"), None)),
        );
        assert_eq!(supersede.action, ReconcileAction::Supersede);
        assert_eq!(supersede.target, Some(shown[0].memory_id));
        assert_eq!(supersede.content.as_deref(), Some("Lives in Lisbon"));
        assert_eq!(supersede.reason, "the user moved");

        let update = reconcile_candidate(
            &moved,
            &shown,
            Some(&proposed(
                "update",
                Some(" m1 "),
                Some("Lived in Berlin, now Lisbon"),
            )),
        );
        assert_eq!(update.action, ReconcileAction::Update);
        assert_eq!(
            update.content.as_deref(),
            Some("Lived in Berlin, now Lisbon")
        );

        let delete = reconcile_candidate(
            &candidate("No longer has a dog", None),
            &shown,
            Some(&proposed("DELETE", Some("m2"), None)),
        );
        assert_eq!(delete.action, ReconcileAction::Delete);
        assert_eq!(delete.target, Some(shown[1].memory_id));
        assert_eq!(delete.content, None);
    }

    #[test]
    fn an_invented_target_an_unknown_action_or_a_locked_target_falls_back_to_add() {
        let mut shown = [related("m1", "Lives in Berlin", 0.7)];
        let moved = candidate("Lives in Lisbon", None);
        let invented =
            reconcile_candidate(&moved, &shown, Some(&proposed("UPDATE", Some("m9"), None)));
        assert_eq!(invented.action, ReconcileAction::Add);
        assert!(
            invented.reason.contains("named no memory"),
            "{}",
            invented.reason
        );

        let unknown =
            reconcile_candidate(&moved, &shown, Some(&proposed("MERGE", Some("m1"), None)));
        assert_eq!(unknown.action, ReconcileAction::Add);

        shown[0].locked = true;
        let locked =
            reconcile_candidate(&moved, &shown, Some(&proposed("DELETE", Some("m1"), None)));
        assert_eq!(locked.action, ReconcileAction::Add);
        assert!(locked.reason.contains("legal hold"), "{}", locked.reason);
    }

    #[test]
    fn without_a_model_decision_a_new_fact_is_added() {
        let decision = reconcile_candidate(&candidate("Has a cat", None), &[], None);
        assert_eq!(decision.action, ReconcileAction::Add);
        assert_eq!(decision.content.as_deref(), Some("Has a cat"));
    }

    #[test]
    fn proposed_candidates_are_checked_and_repaired_where_harmless() {
        let now = Utc::now();
        let checked = ProposedCandidate {
            kind: Some("Preference".into()),
            content: Some("  Likes jazz ".into()),
            key: Some("music".into()),
            confidence: Some(3.0),
            expires_at: Some("2001-01-01T00:00:00Z".into()),
            source: Some("file".into()),
        }
        .check(now)
        .unwrap();
        assert_eq!(checked.kind, MemoryKind::Preference);
        assert_eq!(checked.content, "Likes jazz");
        assert_eq!(checked.confidence, 1.0);
        assert_eq!(checked.expires_at, None, "an expiry in the past is dropped");
        assert_eq!(
            checked.source,
            MemorySource::ModelInferred,
            "file is not a message source"
        );
        assert!(ProposedCandidate::default().check(now).is_err());
        assert_eq!("tool".parse::<MessageRole>(), Ok(MessageRole::Tool));
        assert!("robot".parse::<MessageRole>().is_err());
    }
}

/// A message to store.
#[derive(Clone, Debug, PartialEq)]
pub struct NewMessage {
    pub role: MessageRole,
    pub name: Option<String>,
    pub content: String,
    /// Without an LLM the message is stored verbatim as a memory with this key, superseding
    /// the active memory with the same key.
    pub memory_key: Option<ExternalId>,
    /// When it was said (the caller's timestamp, else when it arrived).
    pub sent_at: DateTime<Utc>,
}

/// A stored message.
#[derive(Clone, Debug, PartialEq)]
pub struct SessionMessage {
    pub id: Uuid,
    pub session_id: String,
    pub user_id: Option<String>,
    pub agent_id: Option<String>,
    pub role: String,
    pub name: Option<String>,
    pub content: String,
    pub memory_key: Option<String>,
    pub sent_at: DateTime<Utc>,
    pub created_at: DateTime<Utc>,
    pub batch_id: Uuid,
}

/// LLM usage of one model over a range.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LlmModelUsage {
    pub model: String,
    pub calls: i64,
    pub failed_calls: i64,
    pub tokens_in: i64,
    pub tokens_out: i64,
}
