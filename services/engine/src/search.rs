//! The read side: embed the query (cached), ask the index for candidates inside the
//! project, hydrate them from the database, drop anything not active, filter and rank.

use crate::EngineError;
use crate::pipeline::MemoryEngine;
use chrono::{DateTime, Utc};
use engram_core::{Memory, MemoryKind, ProjectScope, SubjectFilter};
use engram_index::VectorQuery;
use std::time::Instant;
use tracing::Instrument;
use uuid::Uuid;

/// Conditions on metadata and time, applied to hydrated candidates.
#[derive(Clone, Debug, Default)]
pub struct SearchFilters {
    /// Every listed metadata key must equal the given JSON value.
    pub metadata_equals: serde_json::Map<String, serde_json::Value>,
    pub created_after: Option<DateTime<Utc>>,
    pub created_before: Option<DateTime<Utc>>,
    /// The memory must carry at least one of these categories (empty: no condition).
    pub categories_any: Vec<String>,
}

impl SearchFilters {
    fn is_empty(&self) -> bool {
        self.metadata_equals.is_empty()
            && self.created_after.is_none()
            && self.created_before.is_none()
            && self.categories_any.is_empty()
    }

    fn accepts(&self, memory: &Memory) -> bool {
        let metadata_matches = self
            .metadata_equals
            .iter()
            .all(|(key, expected)| memory.metadata.get(key) == Some(expected));
        let after_matches = self
            .created_after
            .is_none_or(|after| memory.created_at >= after);
        let before_matches = self
            .created_before
            .is_none_or(|before| memory.created_at < before);
        let categories_match = self.categories_any.is_empty()
            || memory
                .categories
                .iter()
                .any(|category| self.categories_any.contains(category));
        metadata_matches && after_matches && before_matches && categories_match
    }
}

#[derive(Clone, Debug)]
pub struct SearchRequest {
    pub query: String,
    pub subject: SubjectFilter,
    pub kinds: Vec<MemoryKind>,
    pub filters: SearchFilters,
    pub top_k: usize,
    pub min_score: f32,
}

#[derive(Clone, Debug)]
pub struct SearchHit {
    pub memory: Memory,
    /// Cosine similarity clamped to [0, 1].
    pub score: f32,
}

#[derive(Clone, Debug)]
pub struct SearchOutcome {
    pub results: Vec<SearchHit>,
    pub recall_id: Uuid,
    pub embed_micros: u64,
    pub index_micros: u64,
    pub hydrate_micros: u64,
    /// Tokens of the query run through the model (0 when its embedding was cached).
    pub tokens_embedded: u64,
}

/// Candidates fetched per requested result: hydration drops superseded, deleted, expired
/// and filtered-out memories, so the index is asked for more than `top_k`.
const CANDIDATE_FACTOR: usize = 3;
const FILTERED_CANDIDATES: usize = 500;

/// Search latency by phase (`embed`, `index`, `hydrate`, `total`).
pub const SEARCH_DURATION_SECONDS: &str = "engram_search_duration_seconds";

impl MemoryEngine {
    pub async fn search(
        &self,
        scope: &ProjectScope,
        request: SearchRequest,
    ) -> Result<SearchOutcome, EngineError> {
        let started = Instant::now();
        let (vector, tokens_embedded) = self.embed_query(&request.query).await?;
        let embedded = Instant::now();
        let candidate_limit = if request.filters.is_empty() {
            (request.top_k * CANDIDATE_FACTOR).max(30)
        } else {
            FILTERED_CANDIDATES
        };
        let hits = self
            .index
            .search(
                scope,
                VectorQuery {
                    vector: vector.as_ref().clone(),
                    limit: candidate_limit,
                    user_id: request
                        .subject
                        .user_id
                        .as_ref()
                        .map(|id| id.as_str().to_string()),
                    agent_id: request
                        .subject
                        .agent_id
                        .as_ref()
                        .map(|id| id.as_str().to_string()),
                    session_id: request
                        .subject
                        .session_id
                        .as_ref()
                        .map(|id| id.as_str().to_string()),
                    kinds: request.kinds.clone(),
                },
            )
            .instrument(tracing::info_span!("index.search", limit = candidate_limit))
            .await?;
        let searched = Instant::now();
        let ids: Vec<_> = hits.iter().map(|hit| hit.memory_id).collect();
        let mut active = self
            .storage
            .active_memories_by_id(scope, &ids)
            .instrument(tracing::info_span!("db.hydrate", candidates = ids.len()))
            .await?;
        let now = Utc::now();
        let mut results = Vec::with_capacity(request.top_k);
        for hit in hits {
            let Some(memory) = active.remove(&hit.memory_id) else {
                continue;
            };
            if memory
                .expires_at
                .is_some_and(|expires_at| expires_at <= now)
            {
                continue;
            }
            if !request.filters.accepts(&memory) {
                continue;
            }
            let score = hit.score.clamp(0.0, 1.0);
            if score < request.min_score {
                continue;
            }
            results.push(SearchHit { memory, score });
        }
        results.sort_by(|left, right| right.score.total_cmp(&left.score));
        results.truncate(request.top_k);
        let hydrated = Instant::now();
        let outcome = SearchOutcome {
            results,
            recall_id: Uuid::now_v7(),
            embed_micros: (embedded - started).as_micros() as u64,
            index_micros: (searched - embedded).as_micros() as u64,
            hydrate_micros: (hydrated - searched).as_micros() as u64,
            tokens_embedded,
        };
        let seconds = |micros: u64| micros as f64 / 1_000_000.0;
        metrics::histogram!(SEARCH_DURATION_SECONDS, "phase" => "embed")
            .record(seconds(outcome.embed_micros));
        metrics::histogram!(SEARCH_DURATION_SECONDS, "phase" => "index")
            .record(seconds(outcome.index_micros));
        metrics::histogram!(SEARCH_DURATION_SECONDS, "phase" => "hydrate")
            .record(seconds(outcome.hydrate_micros));
        metrics::histogram!(SEARCH_DURATION_SECONDS, "phase" => "total")
            .record((hydrated - started).as_secs_f64());
        tracing::debug!(
            recall_id = %outcome.recall_id,
            results = outcome.results.len(),
            embed_micros = outcome.embed_micros,
            index_micros = outcome.index_micros,
            hydrate_micros = outcome.hydrate_micros,
            "search answered"
        );
        Ok(outcome)
    }
}
