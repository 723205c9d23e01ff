//! The JSON shapes of the public API (as in API.md) and their parsing into validated
//! engine inputs, collecting every field problem with its path.

use chrono::{DateTime, Utc};
use engram_core::request_bodies::metadata_object;
use engram_core::{FieldError, Memory};
use engram_engine::HistoryEntry;
use engram_engine::MemoryEdit;

// The add and search bodies are engram-core's, where they are parsed (and fuzzed).
pub use engram_core::request_bodies::{
    AddMemoriesBody, NewMemoryBody, SearchBody, SearchFiltersBody,
};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// A memory as the API returns it.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct MemoryView {
    pub id: String,
    pub user_id: Option<String>,
    pub agent_id: Option<String>,
    pub session_id: Option<String>,
    /// `semantic | episodic | procedural | preference`
    pub kind: String,
    pub key: Option<String>,
    /// Absent when `content_omitted` is true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// Absent when `content_omitted` is true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<serde_json::Map<String, serde_json::Value>>,
    pub categories: Vec<String>,
    /// `user_stated | tool_result | model_inferred | manual | file`
    pub source: String,
    pub confidence: f64,
    /// `active | superseded`
    pub state: String,
    pub version: i64,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub valid_from: DateTime<Utc>,
    pub valid_to: Option<DateTime<Utc>>,
    pub expires_at: Option<DateTime<Utc>>,
    /// Cannot be edited or deleted (subject erasure still removes it).
    pub immutable: bool,
    /// Cannot be edited, deleted, expired or erased until the hold is lifted.
    pub legal_hold: bool,
    /// The model its vector came from (`client-vectors-<dimension>` when the client sent it).
    pub embedding_model: String,
    /// True when `content` and `metadata` were left out because the credential may not read
    /// content (it lacks `memories:read`); absent otherwise.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub content_omitted: bool,
}

impl From<&Memory> for MemoryView {
    fn from(memory: &Memory) -> Self {
        Self {
            id: memory.id.to_string(),
            user_id: memory.user_id.as_ref().map(ToString::to_string),
            agent_id: memory.agent_id.as_ref().map(ToString::to_string),
            session_id: memory.session_id.as_ref().map(ToString::to_string),
            kind: memory.kind.to_string(),
            key: memory.key.as_ref().map(ToString::to_string),
            content: (!memory.content_omitted).then(|| memory.content.clone()),
            metadata: (!memory.content_omitted).then(|| memory.metadata.clone()),
            categories: memory.categories.clone(),
            source: memory.source.to_string(),
            confidence: memory.confidence,
            state: memory.state.to_string(),
            version: memory.version,
            created_at: memory.created_at,
            updated_at: memory.updated_at,
            valid_from: memory.valid_from,
            valid_to: memory.valid_to,
            expires_at: memory.expires_at,
            immutable: memory.immutable,
            legal_hold: memory.legal_hold,
            embedding_model: memory.embedding_model.clone(),
            content_omitted: memory.content_omitted,
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct MemoriesEnvelope {
    pub memories: Vec<MemoryView>,
}

#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct MemoryListView {
    pub memories: Vec<MemoryView>,
    /// Pass as `cursor` for the next page; null at the end.
    pub next_cursor: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct HistoryEntryView {
    pub version: i64,
    /// `created | updated | superseded`
    pub event: String,
    pub content: Option<String>,
    pub actor: String,
    pub reason: Option<String>,
    pub at: DateTime<Utc>,
}

impl From<HistoryEntry> for HistoryEntryView {
    fn from(entry: HistoryEntry) -> Self {
        Self {
            version: entry.version,
            event: entry.event,
            content: entry.content,
            actor: entry.actor,
            reason: entry.reason,
            at: entry.at,
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct HistoryView {
    pub history: Vec<HistoryEntryView>,
}

#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct SearchResultView {
    pub memory: MemoryView,
    /// Relevance in [0, 1], higher is better: the weighted sum of cosine similarity and BM25
    /// (relative to the best keyword match) in hybrid mode, plus recency and session bonuses.
    pub score: f32,
    /// Why it ranks here (with `explain: true`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signals: Option<RankingSignalsView>,
}

/// The signals behind one result's score.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct RankingSignalsView {
    /// Cosine similarity of query and memory; absent in keyword mode.
    pub dense_similarity: Option<f32>,
    /// BM25 score; absent when the memory holds no query term (or in dense mode).
    pub keyword_score: Option<f32>,
    pub recency_bonus: f32,
    pub session_bonus: f32,
}

impl From<&engram_engine::RankingSignals> for RankingSignalsView {
    fn from(signals: &engram_engine::RankingSignals) -> Self {
        Self {
            dense_similarity: signals.dense_similarity,
            keyword_score: signals.keyword_score,
            recency_bonus: signals.recency_bonus,
            session_bonus: signals.session_bonus,
        }
    }
}

/// Where one search's time went, in milliseconds (with `explain: true`).
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct SearchTimingsView {
    pub embed: f64,
    pub dense: f64,
    pub keyword: f64,
    pub hydrate: f64,
    pub rank: f64,
    /// Inside the engine, from the first stage to the last.
    pub total: f64,
}

impl From<&engram_engine::SearchTimings> for SearchTimingsView {
    fn from(timings: &engram_engine::SearchTimings) -> Self {
        let millis = |micros: u64| micros as f64 / 1_000.0;
        Self {
            embed: millis(timings.embed_micros),
            dense: millis(timings.dense_micros),
            keyword: millis(timings.keyword_micros),
            hydrate: millis(timings.hydrate_micros),
            rank: millis(timings.rank_micros),
            total: millis(timings.total_micros),
        }
    }
}

/// Memories packed into a ready-to-inject text within a token budget (`context_tokens`).
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct SearchContextView {
    /// One line per memory: content, then kind, source, date and id (its provenance).
    /// `always` procedures come first, then results best first.
    pub text: String,
    /// Tokens of `text`, counted by the embedding model's tokenizer.
    pub tokens: u64,
    pub memory_ids: Vec<String>,
    /// Memories that did not fit the budget.
    pub omitted: usize,
}

#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct SearchResponseView {
    pub results: Vec<SearchResultView>,
    pub recall_id: String,
    /// Procedural memories marked `"always": true` (with `include_always: true`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub always: Option<Vec<MemoryView>>,
    /// With `context_tokens`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<SearchContextView>,
    /// With `explain: true`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timings_ms: Option<SearchTimingsView>,
    /// Present when the project's recall budget cut the results short.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recall_budget: Option<RecallBudgetView>,
}

/// The project's recall budget as applied to one search.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct RecallBudgetView {
    /// Most memories a search returns.
    pub max_results: Option<u32>,
    /// Most tokens of memory content a search returns, counted by the embedding model's
    /// tokenizer.
    pub max_tokens: Option<u32>,
    /// Memories found but left out to stay within `max_tokens` (`max_results` is applied
    /// before the search, as a lower `top_k`).
    pub omitted: u32,
}

#[derive(Clone, Debug, Deserialize, ToSchema)]
pub struct EditMemoryBody {
    #[schema(schema_with = engram_core::openapi_schemas::optional_memory_content)]
    pub content: Option<String>,
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<serde_json::Value>,
    #[schema(schema_with = engram_core::openapi_schemas::optional_categories)]
    pub categories: Option<Vec<String>>,
    /// Set to null to clear the expiry.
    #[serde(default, deserialize_with = "present_or_null")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub expires_at: Option<Option<DateTime<Utc>>>,
    /// Why the memory was changed; kept in its history (at most 1,024 characters).
    #[schema(max_length = 1024)]
    pub reason: Option<String>,
    /// The new content's vector, for a project whose embedding source is `client`.
    #[schema(schema_with = engram_core::openapi_schemas::optional_client_vector)]
    pub embedding: Option<Vec<f32>>,
}

fn present_or_null<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Option<DateTime<Utc>>>, D::Error> {
    Option::<DateTime<Utc>>::deserialize(deserializer).map(Some)
}

impl EditMemoryBody {
    /// The wire body as the engine's edit: only the shape is checked here (metadata must be
    /// an object); the limits are the edit use case's, reported with it in one answer.
    pub fn into_edit(self) -> Result<(MemoryEdit, Option<Vec<f32>>), Vec<FieldError>> {
        let mut errors = Vec::new();
        let metadata = self
            .metadata
            .map(|value| metadata_object(Some(value), "metadata", &mut errors));
        let edit = MemoryEdit {
            content: self.content,
            metadata,
            categories: self.categories,
            expires_at: self.expires_at,
            reason: self.reason,
        };
        errors.extend(edit.limit_errors());
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok((edit, self.embedding))
    }
}
