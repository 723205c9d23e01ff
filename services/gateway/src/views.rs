//! The JSON shapes of the public API (as in API.md) and their parsing into validated
//! engine inputs, collecting every field problem with its path.

use chrono::{DateTime, Utc};
use engram_core::{ExternalId, FieldError, Memory, MemoryKind, MemorySource};
use engram_engine::HistoryEntry;
use engram_engine::{MemoryEdit, NewMemory, SearchFilters};
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
    pub content: String,
    #[schema(value_type = Object)]
    pub metadata: serde_json::Map<String, serde_json::Value>,
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
            content: memory.content.clone(),
            metadata: memory.metadata.clone(),
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

/// One memory to add. Only `content` is required.
#[derive(Clone, Debug, Deserialize, ToSchema)]
pub struct NewMemoryBody {
    /// 1 byte – 32 KiB of UTF-8.
    pub content: String,
    pub user_id: Option<String>,
    pub agent_id: Option<String>,
    pub session_id: Option<String>,
    /// Default `semantic`.
    pub kind: Option<String>,
    /// A memory with a key supersedes the active memory with the same (user_id, agent_id, key).
    pub key: Option<String>,
    /// A JSON object of at most 16 KiB.
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<serde_json::Value>,
    pub categories: Option<Vec<String>>,
    /// Default `user_stated`.
    pub source: Option<String>,
    /// 0–1, default 1.
    pub confidence: Option<f64>,
    pub expires_at: Option<DateTime<Utc>>,
    /// The memory's vector, for a project whose embedding source is `client` (required
    /// there, refused elsewhere): exactly the project's declared dimension, finite numbers,
    /// not all zero.
    pub embedding: Option<Vec<f32>>,
}

/// Validated memories to add, with the vectors the client sent (all or none).
pub struct ParsedMemories {
    pub memories: Vec<NewMemory>,
    pub client_vectors: Option<Vec<Vec<f32>>>,
}

#[derive(Clone, Debug, Deserialize, ToSchema)]
pub struct AddMemoriesBody {
    /// 1–100 memories.
    pub memories: Vec<NewMemoryBody>,
}

#[derive(Clone, Debug, Deserialize, ToSchema)]
pub struct EditMemoryBody {
    pub content: Option<String>,
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<serde_json::Value>,
    pub categories: Option<Vec<String>>,
    /// Set to null to clear the expiry.
    #[serde(default, deserialize_with = "present_or_null")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub expires_at: Option<Option<DateTime<Utc>>>,
    /// Why the memory was changed; kept in its history.
    pub reason: Option<String>,
    /// The new content's vector, for a project whose embedding source is `client`.
    pub embedding: Option<Vec<f32>>,
}

fn present_or_null<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Option<DateTime<Utc>>>, D::Error> {
    Option::<DateTime<Utc>>::deserialize(deserializer).map(Some)
}

/// Conditions on metadata and time.
#[derive(Clone, Debug, Default, Deserialize, ToSchema)]
pub struct SearchFiltersBody {
    /// Every key must equal the given JSON value.
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<serde_json::Map<String, serde_json::Value>>,
    pub created_after: Option<DateTime<Utc>>,
    pub created_before: Option<DateTime<Utc>>,
    /// At least one of these categories.
    pub categories: Option<Vec<String>>,
}

#[derive(Clone, Debug, Deserialize, ToSchema)]
pub struct SearchBody {
    pub query: String,
    pub user_id: Option<String>,
    pub agent_id: Option<String>,
    pub session_id: Option<String>,
    pub kinds: Option<Vec<String>>,
    pub filters: Option<SearchFiltersBody>,
    /// 1–100, default 10.
    pub top_k: Option<i64>,
    /// 0–1, default 0.
    pub min_score: Option<f64>,
    /// `hybrid` (default), `dense` or `keyword`.
    pub retrieval: Option<String>,
    /// How hybrid mode combines its signals: `weighted` (default: the weighted sum of cosine
    /// and relative BM25) or `rrf` (reciprocal rank fusion, k = 60, scaled to 0–1).
    pub fusion: Option<String>,
    /// `true` makes `session_id` a filter; by default it only boosts that session's memories.
    pub session_only: Option<bool>,
    /// Rank what was true at this moment (RFC 3339, not in the future): memories superseded
    /// since then are candidates, memories created after it are not.
    pub as_of: Option<DateTime<Utc>>,
    /// 0–1, default 0.5: share of the keyword (BM25) signal in the hybrid score.
    pub keyword_weight: Option<f64>,
    /// 0–1, default 0.05: largest bonus for recency, halving every 30 days.
    pub recency_weight: Option<f64>,
    /// Default true: leave out results nearly identical to a better one.
    pub diversify: Option<bool>,
    /// Also return the procedural memories marked `"always": true` (at task start).
    pub include_always: Option<bool>,
    /// 1–8192: also return `context`, the results packed into this many tokens.
    pub context_tokens: Option<i64>,
    /// Add `signals` to each result and `timings_ms` to the response.
    pub explain: Option<bool>,
    /// The query's vector, for a project whose embedding source is `client`: required there
    /// for `dense` and `hybrid` retrieval (`query` still feeds the keyword signal), refused
    /// elsewhere.
    pub query_vector: Option<Vec<f32>>,
    /// A retrieval profile of the project (`PUT /v1/retrieval-profiles/{name}`): its
    /// parameters apply where the request sets none. Without it (and without any of
    /// `retrieval`, `fusion`, `keyword_weight`, `recency_weight`, `diversify`, `min_score`),
    /// a profile with a traffic share may serve the search.
    pub profile: Option<String>,
}

/// The metadata as an object (`null` or absent: empty); anything else is refused.
fn metadata_object(
    metadata: Option<serde_json::Value>,
    field: &str,
    errors: &mut Vec<FieldError>,
) -> serde_json::Map<String, serde_json::Value> {
    match metadata {
        None | Some(serde_json::Value::Null) => serde_json::Map::new(),
        Some(serde_json::Value::Object(map)) => map,
        Some(_) => {
            errors.push(FieldError::new(field, "must be a JSON object"));
            serde_json::Map::new()
        }
    }
}

fn parse_enum<T: std::str::FromStr<Err = String>>(
    text: Option<&str>,
    default: T,
    field: &str,
    errors: &mut Vec<FieldError>,
) -> T {
    match text {
        None => default,
        Some(text) => text.parse().unwrap_or_else(|message| {
            errors.push(FieldError::new(field, message));
            default
        }),
    }
}

impl AddMemoriesBody {
    pub fn into_new_memories(self) -> Result<ParsedMemories, Vec<FieldError>> {
        let mut errors = Vec::new();
        // A wrong count is refused before any memory is parsed (the body may be large).
        if let Some(error) = NewMemory::batch_size_error(self.memories.len()) {
            return Err(vec![error]);
        }
        let with_vectors = self
            .memories
            .iter()
            .filter(|memory| memory.embedding.is_some())
            .count();
        if with_vectors != 0
            && with_vectors != self.memories.len()
            && let Some(position) = self
                .memories
                .iter()
                .position(|memory| memory.embedding.is_none())
        {
            errors.push(FieldError::new(
                format!("memories[{position}].embedding"),
                "either every memory of a request carries an embedding or none does",
            ));
        }
        let mut client_vectors = Vec::with_capacity(with_vectors);
        let mut parsed = Vec::with_capacity(self.memories.len());
        for (position, mut body) in self.memories.into_iter().enumerate() {
            let path = |name: &str| format!("memories[{position}].{name}");
            if let Some(vector) = body.embedding.take() {
                client_vectors.push(vector);
            }
            let confidence = body.confidence.unwrap_or(1.0);
            parsed.push(NewMemory {
                user_id: ExternalId::parse_field(
                    body.user_id.as_deref(),
                    &path("user_id"),
                    &mut errors,
                ),
                agent_id: ExternalId::parse_field(
                    body.agent_id.as_deref(),
                    &path("agent_id"),
                    &mut errors,
                ),
                session_id: ExternalId::parse_field(
                    body.session_id.as_deref(),
                    &path("session_id"),
                    &mut errors,
                ),
                kind: parse_enum(
                    body.kind.as_deref(),
                    MemoryKind::Semantic,
                    &path("kind"),
                    &mut errors,
                ),
                key: ExternalId::parse_field(body.key.as_deref(), &path("key"), &mut errors),
                metadata: metadata_object(body.metadata, &path("metadata"), &mut errors),
                categories: body.categories.unwrap_or_default(),
                source: parse_enum(
                    body.source.as_deref(),
                    MemorySource::UserStated,
                    &path("source"),
                    &mut errors,
                ),
                confidence,
                expires_at: body.expires_at,
                content: body.content,
            });
        }
        // The limits are the add use case's; reported here with the parse errors in one answer.
        errors.extend(NewMemory::batch_limit_errors(&parsed));
        if errors.is_empty() {
            Ok(ParsedMemories {
                memories: parsed,
                client_vectors: (with_vectors > 0).then_some(client_vectors),
            })
        } else {
            Err(errors)
        }
    }
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

/// A parsed search: the engine's request, and whether to explain the ranking.
pub struct ParsedSearch {
    pub search: engram_engine::SearchMemoriesRequest,
    pub explain: bool,
}

impl SearchBody {
    /// The wire body as the engine's request. Only what the wire format itself decides is
    /// checked here (names of kinds, modes and ids); the limits are the search use case's
    /// (`SearchMemoriesRequest::limit_errors`), reported with these in one answer.
    pub fn into_request(self) -> Result<ParsedSearch, Vec<FieldError>> {
        let mut errors = Vec::new();
        let top_k = self
            .top_k
            .unwrap_or(engram_core::limits::DEFAULT_TOP_K as i64);
        let mut kinds = Vec::new();
        for (position, kind) in self.kinds.unwrap_or_default().iter().enumerate() {
            match kind.parse::<MemoryKind>() {
                Ok(kind) => kinds.push(kind),
                Err(message) => errors.push(FieldError::new(format!("kinds[{position}]"), message)),
            }
        }
        let subject = engram_core::SubjectFilter {
            user_id: ExternalId::parse_field(self.user_id.as_deref(), "user_id", &mut errors),
            agent_id: ExternalId::parse_field(self.agent_id.as_deref(), "agent_id", &mut errors),
            session_id: ExternalId::parse_field(
                self.session_id.as_deref(),
                "session_id",
                &mut errors,
            ),
        };
        let filters_body = self.filters.unwrap_or_default();
        let filters = SearchFilters {
            metadata_equals: filters_body.metadata.unwrap_or_default(),
            created_after: filters_body.created_after,
            created_before: filters_body.created_before,
            categories_any: filters_body.categories.unwrap_or_default(),
        };
        let retrieval = match self.retrieval.as_deref() {
            None => engram_engine::RetrievalMode::default(),
            Some(text) => text.parse().unwrap_or_else(|message| {
                errors.push(FieldError::new("retrieval", message));
                engram_engine::RetrievalMode::default()
            }),
        };
        let fusion = match self.fusion.as_deref() {
            None => engram_engine::FusionMethod::default(),
            Some(text) => text.parse().unwrap_or_else(|message| {
                errors.push(FieldError::new("fusion", message));
                engram_engine::FusionMethod::default()
            }),
        };
        let keyword_weight = self
            .keyword_weight
            .map_or(engram_engine::DEFAULT_KEYWORD_WEIGHT, |weight| {
                weight as f32
            });
        let recency_weight = self
            .recency_weight
            .map_or(engram_engine::DEFAULT_RECENCY_WEIGHT, |weight| {
                weight as f32
            });
        let min_score = self.min_score.map_or(0.0, |score| score as f32);
        let caller_tuning = engram_engine::profiles::SearchTuning {
            retrieval: self.retrieval.is_some().then_some(retrieval),
            fusion: self.fusion.is_some().then_some(fusion),
            keyword_weight: self.keyword_weight.is_some().then_some(keyword_weight),
            recency_weight: self.recency_weight.is_some().then_some(recency_weight),
            diversify: self.diversify,
            min_score: self.min_score.is_some().then_some(min_score),
        };
        let search = engram_engine::SearchMemoriesRequest {
            request: engram_engine::SearchRequest {
                query: self.query,
                subject,
                session_only: self.session_only.unwrap_or(false),
                kinds,
                filters,
                // Out of range (negative included) is the use case's to name: 0 is refused.
                top_k: usize::try_from(top_k).unwrap_or(0),
                min_score,
                retrieval,
                fusion,
                keyword_weight,
                recency_weight,
                as_of: self.as_of,
                diversify: self.diversify.unwrap_or(true),
                include_always: self.include_always.unwrap_or(false),
                query_vector: self.query_vector,
            },
            caller_tuning,
            profile: self.profile,
            context_tokens: self
                .context_tokens
                .map(|tokens| u64::try_from(tokens).unwrap_or(0)),
            trace_id: None,
        };
        errors.extend(search.limit_errors());
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok(ParsedSearch {
            search,
            explain: self.explain.unwrap_or(false),
        })
    }
}
