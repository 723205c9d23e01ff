//! The read side: gather candidates from dense (vector) and keyword (BM25) search inside the
//! project, hydrate them from the database, fuse, boost, filter, diversify and rank.

use crate::EngineError;
use crate::pipeline::MemoryEngine;
use chrono::{DateTime, Utc};
use engram_core::{ExternalId, Memory, MemoryId, MemoryScope};
use engram_index::{
    InMemoryKeywordScorer, KeywordQuery, PayloadBound, PayloadFilter, VectorHit, VectorQuery,
    payload_filter_for,
};
use engram_storage::recall::{MemoryWithEmbedding, SessionMember};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;
use tracing::Instrument;
use uuid::Uuid;

pub use crate::search_request::*;

/// The rank constant of reciprocal rank fusion.
const RRF_K: f32 = 60.0;

/// Why a result ranks where it does.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RankingSignals {
    /// Cosine similarity of query and memory (absent in keyword mode).
    pub dense_similarity: Option<f32>,
    /// BM25 score (absent when the memory holds no query term or keyword search did not run).
    pub keyword_score: Option<f32>,
    pub recency_bonus: f32,
    pub session_bonus: f32,
    /// Bonus for an event time inside the window of time the query names.
    pub time_bonus: f32,
    /// How far the memory rose toward the best score among its neighbours in its session.
    pub neighbour_bonus: f32,
}

#[derive(Clone, Debug)]
pub struct SearchHit {
    pub memory: Memory,
    /// 0–1, best first. Dense mode: the cosine similarity; keyword mode: BM25 relative to the
    /// best match; hybrid: their weighted sum. Plus the recency and session bonuses.
    pub score: f32,
    /// 0–1, on one scale for every query: what a relevance floor compares (absent without a
    /// cosine, in keyword mode).
    pub relevance: Option<f32>,
    pub signals: RankingSignals,
}

/// Where the time of one search went, in microseconds. Each phase is its own duration; the
/// dense and keyword searches run side by side, and a second keyword pass beside the
/// hydrate, whose time it then includes (see `candidates_from_index`), so the phases may add
/// up to more than `total_micros`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SearchTimings {
    pub embed_micros: u64,
    pub dense_micros: u64,
    pub keyword_micros: u64,
    pub hydrate_micros: u64,
    pub rank_micros: u64,
    pub total_micros: u64,
}

#[derive(Clone, Debug)]
pub struct SearchOutcome {
    pub results: Vec<SearchHit>,
    /// `always` procedures (with `include_always`), oldest first; never repeated in `results`.
    pub always: Vec<Memory>,
    pub recall_id: Uuid,
    pub timings: SearchTimings,
    /// Tokens of the query run through the model (0 when cached or not embedded).
    pub tokens_embedded: u64,
    /// The relevance floor applied (none when 0 or without a cosine).
    pub relevance_floor: Option<f32>,
    /// The floor left nothing of what would have been returned: nothing relevant is known.
    pub abstained: bool,
    /// The window of event time the query names, whose memories got a bonus.
    pub understood_time: Option<engram_core::query_time::TimeInQuery>,
    /// The names of the query no candidate mentions, which raised the relevance floor.
    pub unmentioned_names: Vec<String>,
}

/// Candidates fetched per requested result from each retriever: fusion needs both lists
/// deep enough to overlap, and hydration drops what is no longer active or filtered out.
const CANDIDATE_FACTOR: usize = 5;
const MIN_CANDIDATES: usize = 50;
const FILTERED_CANDIDATES: usize = 500;
/// A filter the index cannot answer alone (a substring) is first run in the database: when it
/// matches at most this many memories, the index searches exactly those.
pub const MAX_FILTER_PRESELECTION: u64 = 10_000;

/// Search latency by phase (`embed`, `dense`, `keyword`, `hydrate`, `rank`, `total`).
pub const SEARCH_DURATION_SECONDS: &str = "engram_search_duration_seconds";

/// A query's vector and the tokens embedding it took (0 when it came from a cache or the
/// caller).
type EmbeddedQuery = (Arc<Vec<f32>>, u64);

/// What confines a search of the index within the project (see `index_bounds_of`).
#[derive(Clone)]
struct IndexBounds {
    user_id: Option<String>,
    agent_id: Option<String>,
    session_id: Option<String>,
    payload_filter: Option<PayloadFilter>,
}

impl IndexBounds {
    fn keyword_query(
        &self,
        request: &SearchRequest,
        limit: usize,
        only_ids: Option<Vec<MemoryId>>,
    ) -> KeywordQuery {
        KeywordQuery {
            text: request.query.clone(),
            limit,
            user_id: self.user_id.clone(),
            agent_id: self.agent_id.clone(),
            session_id: self.session_id.clone(),
            kinds: request.kinds.clone(),
            only_ids,
            filter: self.payload_filter.clone(),
        }
    }
}

/// What the keyword half of a search found: the bounds it decided for both halves, and its
/// hits.
#[derive(Default)]
struct KeywordHalf {
    /// `None` when nothing can match.
    bounds: Option<IndexBounds>,
    hits: Vec<VectorHit>,
    keyword_micros: u64,
}

/// One memory under consideration, with what the retrievers said about it.
struct Candidate {
    memory: Memory,
    embedding: Vec<f32>,
    keyword_score: Option<f32>,
}

impl MemoryEngine {
    /// Search inside `memory_scope`: for a scope confined to an end-user, only that
    /// end-user's memories are candidates, whatever `request.subject` says.
    pub(crate) async fn search(
        &self,
        memory_scope: &MemoryScope,
        request: SearchRequest,
    ) -> Result<SearchOutcome, EngineError> {
        let started = Instant::now();
        let mut timings = SearchTimings::default();
        let mut request = request;
        let scope = memory_scope.project();
        if let Some(end_user) = memory_scope.end_user() {
            if request
                .subject
                .user_id
                .as_ref()
                .is_some_and(|requested| requested != end_user)
            {
                return Err(engram_core::principal::OutsideEndUser {
                    field: "user_id".to_string(),
                    end_user: end_user.as_str().to_string(),
                }
                .into());
            }
            request.subject.user_id = Some(end_user.clone());
        }
        let space = self.spaces.space_for(scope).await?;
        let client_vector = match request.query_vector.take() {
            Some(vector) if request.retrieval != RetrievalMode::Keyword => Some(vector),
            _ => None,
        };
        let embeds_here = request.retrieval != RetrievalMode::Keyword
            && client_vector.is_none()
            && space.client_dimension().is_none();
        if request.retrieval != RetrievalMode::Keyword && !embeds_here {
            let vectors = client_vector.as_ref().map(std::slice::from_ref);
            crate::pipeline::check_vectors_match_space(&space, vectors, 1, |_| {
                "query_vector".to_string()
            })?;
        }
        let embedder = match embeds_here {
            true => Some(space.embedder().await?),
            false => None,
        };
        // The local model's forward pass takes every core, so a keyword search waits for it;
        // a provider's is a network call, and the keyword search runs beside it.
        let embedding_takes_the_cores = embedder
            .as_ref()
            .is_some_and(|embedder| embedder.embeds_on_this_machine());
        // The query's vector and the tokens embedding it took. Left unstarted: a search of
        // the index decides its bounds while the model embeds the query.
        let embedding = async {
            let embedded = match (client_vector, &embedder) {
                (Some(vector), _) => Some((Arc::new(vector), 0)),
                (None, Some(embedder)) => Some(
                    self.embed_query(scope, &space, embedder.as_ref(), &request.query)
                        .await?,
                ),
                (None, None) => None,
            };
            Ok::<_, EngineError>((embedded, started.elapsed().as_micros() as u64))
        };

        let (candidates, embedded) = match request.as_of {
            Some(as_of) => {
                let (embedded, embed_micros) = embedding.await?;
                timings.embed_micros = embed_micros;
                let query_vector = embedded.as_ref().map(|(vector, _)| vector.as_ref());
                let candidates = self
                    .candidates_valid_at(memory_scope, &request, as_of, query_vector, &mut timings)
                    .await?;
                (candidates, embedded)
            }
            None => {
                self.candidates_from_index(
                    memory_scope,
                    space.index.as_ref(),
                    &request,
                    embedding,
                    embedding_takes_the_cores,
                    &mut timings,
                )
                .await?
            }
        };
        let tokens_embedded = embedded.as_ref().map_or(0, |(_, tokens)| *tokens);
        let query_vector: Option<Arc<Vec<f32>>> = embedded.map(|(vector, _)| vector);

        let ranking_started = Instant::now();
        let always = if request.include_always {
            self.storage
                .always_procedures(
                    memory_scope,
                    request.subject.user_id.as_ref(),
                    request.subject.agent_id.as_ref(),
                    MAX_ALWAYS_PROCEDURES,
                )
                .await?
        } else {
            Vec::new()
        };
        let always_ids: Vec<MemoryId> = always.iter().map(|memory| memory.id).collect();
        let positions = if request.neighbour_weight > 0.0 {
            let read_started = Instant::now();
            let members: Vec<SessionMember<'_>> = candidates
                .iter()
                .filter_map(|candidate| {
                    Some(SessionMember {
                        id: candidate.memory.id,
                        end_user: candidate.memory.user_id.as_ref().map(ExternalId::as_str),
                        session: candidate.memory.session_id.as_ref()?.as_str(),
                    })
                })
                .collect();
            let positions = self
                .storage
                .session_positions(memory_scope, &members, request.as_of.is_some())
                .await?;
            timings.hydrate_micros += read_started.elapsed().as_micros() as u64;
            positions
        } else {
            HashMap::new()
        };
        let query_vector = query_vector.as_deref().map(Vec::as_slice);
        let understood_time = engram_core::query_time::time_in_query(
            &request.query,
            request.now.or(request.as_of).unwrap_or_else(Utc::now),
        );
        let ranked = rank_candidates(
            candidates,
            &request,
            query_vector,
            &always_ids,
            &positions,
            request.as_of.unwrap_or_else(Utc::now),
            understood_time.as_ref(),
        );
        let relevance_floor =
            (ranked.floor > 0.0 && query_vector.is_some()).then_some(ranked.floor);
        timings.rank_micros = ranking_started.elapsed().as_micros() as u64;
        timings.total_micros = started.elapsed().as_micros() as u64;

        let outcome = SearchOutcome {
            abstained: ranked.hits.is_empty() && ranked.floored > 0,
            results: ranked.hits,
            unmentioned_names: ranked.unmentioned_names,
            always,
            recall_id: Uuid::now_v7(),
            timings,
            tokens_embedded,
            relevance_floor,
            understood_time,
        };
        record_search_metrics(&timings);
        tracing::debug!(
            recall_id = %outcome.recall_id,
            retrieval = request.retrieval.as_str(),
            results = outcome.results.len(),
            embed_micros = timings.embed_micros,
            dense_micros = timings.dense_micros,
            keyword_micros = timings.keyword_micros,
            hydrate_micros = timings.hydrate_micros,
            rank_micros = timings.rank_micros,
            "search answered"
        );
        Ok(outcome)
    }

    /// Dense and keyword candidates from the index, hydrated from the database. The query is
    /// embedded first, while the bounds of the search are decided (they may wait on the
    /// database, not on a core); then the dense and the keyword search run side by side, and
    /// their hits are read in one query, beside the keyword scoring of the dense-only hits.
    /// With `embedding_takes_the_cores` (the local model) the keyword search does not run
    /// beside the embedding: a lone query's forward pass uses every core, and a search beside
    /// it slows both (tests/BENCHMARKS.md, "The embedding first"). Returns the candidates and
    /// what `embedding` gave. `index` is the project's own (resolved once per search).
    async fn candidates_from_index(
        &self,
        memory_scope: &MemoryScope,
        index: &dyn engram_index::VectorIndex,
        request: &SearchRequest,
        embedding: impl Future<Output = Result<(Option<EmbeddedQuery>, u64), EngineError>>,
        embedding_takes_the_cores: bool,
        timings: &mut SearchTimings,
    ) -> Result<(Vec<Candidate>, Option<EmbeddedQuery>), EngineError> {
        let candidate_limit = if request.filters.is_everything() {
            (request.top_k * CANDIDATE_FACTOR).max(MIN_CANDIDATES)
        } else {
            FILTERED_CANDIDATES
        };
        // The keyword half decides the bounds (it may read the database) and hands them to the
        // dense half; `None` when nothing can match. A dropped sender means the keyword half
        // failed, and its error is the one returned.
        let (bounds_sender, bounds_receiver) =
            tokio::sync::oneshot::channel::<Option<IndexBounds>>();
        // The dense half says when the embedding is done (a caller's vector or a cached query
        // at once), whether it succeeded or failed (a failure ends the search through
        // `try_join!`); a keyword search that waits for the local model starts then.
        let (embedded_sender, embedded_receiver) = tokio::sync::oneshot::channel::<()>();
        let keyword_half = async {
            let bounds = self.index_bounds_of(memory_scope, request).await?;
            let _ = bounds_sender.send(bounds.clone());
            let Some(bounds) = bounds else {
                return Ok::<_, EngineError>(KeywordHalf::default());
            };
            if request.retrieval == RetrievalMode::Dense {
                return Ok(KeywordHalf {
                    bounds: Some(bounds),
                    ..KeywordHalf::default()
                });
            }
            if embedding_takes_the_cores {
                let _ = embedded_receiver.await;
            }
            let keyword_started = Instant::now();
            let hits = index
                .keyword_search(
                    memory_scope.project(),
                    bounds.keyword_query(request, candidate_limit, None),
                )
                .instrument(tracing::info_span!(
                    "index.keyword_search",
                    limit = candidate_limit
                ))
                .await?;
            Ok(KeywordHalf {
                bounds: Some(bounds),
                hits,
                keyword_micros: keyword_started.elapsed().as_micros() as u64,
            })
        };
        let dense_half = async {
            let embedded = embedding.await;
            let _ = embedded_sender.send(());
            let (embedded, embed_micros) = embedded?;
            let no_hits = |embedded| Ok::<_, EngineError>((embedded, embed_micros, Vec::new(), 0));
            let Ok(Some(bounds)) = bounds_receiver.await else {
                return no_hits(embedded);
            };
            let Some((vector, _)) = &embedded else {
                return no_hits(embedded);
            };
            let dense_started = Instant::now();
            let hits = index
                .search(
                    memory_scope.project(),
                    VectorQuery {
                        vector: vector.as_ref().clone(),
                        limit: candidate_limit,
                        user_id: bounds.user_id,
                        agent_id: bounds.agent_id,
                        session_id: bounds.session_id,
                        kinds: request.kinds.clone(),
                        filter: bounds.payload_filter,
                    },
                )
                .instrument(tracing::info_span!("index.search", limit = candidate_limit))
                .await?;
            let dense_micros = dense_started.elapsed().as_micros() as u64;
            Ok((embedded, embed_micros, hits, dense_micros))
        };
        // The first error ends the search; the dense half's (the embedding's) comes first.
        let ((embedded, embed_micros, dense_hits, dense_micros), keyword) =
            tokio::try_join!(biased; dense_half, keyword_half)?;
        let KeywordHalf {
            bounds,
            hits: mut keyword_hits,
            mut keyword_micros,
        } = keyword;
        timings.embed_micros = embed_micros;
        // Dense candidates beyond the keyword list's depth may still hold query terms (BM25
        // ties are common among similar memories): score them too, so that fusion compares
        // every candidate on both signals. A keyword list shorter than its limit already holds
        // every memory with a query term (where the index promises complete lists), so the
        // others would all score nothing: no second pass then.
        let keyword_list_was_cut =
            keyword_hits.len() >= candidate_limit || !index.keyword_lists_are_complete();
        let second_pass = match (request.retrieval, keyword_list_was_cut, &bounds) {
            (RetrievalMode::Hybrid, true, Some(bounds)) => {
                let keyword_known: std::collections::HashSet<MemoryId> =
                    keyword_hits.iter().map(|hit| hit.memory_id).collect();
                let unscored: Vec<MemoryId> = dense_hits
                    .iter()
                    .map(|hit| hit.memory_id)
                    .filter(|memory_id| !keyword_known.contains(memory_id))
                    .collect();
                (!unscored.is_empty())
                    .then(|| bounds.keyword_query(request, unscored.len(), Some(unscored)))
            }
            _ => None,
        };
        let rescoring = async move {
            let Some(query) = second_pass else {
                return Ok::<_, EngineError>((Vec::new(), 0));
            };
            let rescoring_started = Instant::now();
            let extra = index.keyword_search(memory_scope.project(), query).await?;
            Ok((extra, rescoring_started.elapsed().as_micros() as u64))
        };
        // The second pass scores only dense hits, which are read anyway: the read of every
        // candidate runs beside it (the index searches on its own threads, the read of a few
        // candidates on this one), rather than after it. `biased` makes that so: the pass is
        // polled first and hands its search to the index's thread before the read, which
        // runs to its end on its first poll, takes this thread. The pass's time is therefore
        // seen when both are done: the `keyword` phase then spans the read too. Either's
        // error ends the search.
        let mut ids: Vec<MemoryId> = dense_hits
            .iter()
            .chain(keyword_hits.iter())
            .map(|hit: &VectorHit| hit.memory_id)
            .collect();
        ids.sort();
        ids.dedup();
        let hydrating = async {
            let hydrate_started = Instant::now();
            let hydrated = self
                .storage
                .active_memories_with_embeddings(memory_scope, &ids)
                .instrument(tracing::info_span!("db.hydrate", candidates = ids.len()))
                .await?;
            Ok::<_, EngineError>((hydrated, hydrate_started.elapsed().as_micros() as u64))
        };
        let ((extra, rescoring_micros), (mut hydrated, read_micros)) =
            tokio::try_join!(biased; rescoring, hydrating)?;
        let assembling_started = Instant::now();
        keyword_hits.extend(extra);
        keyword_micros += rescoring_micros;
        timings.dense_micros = dense_micros;
        timings.keyword_micros = keyword_micros;
        let keyword_scores: HashMap<MemoryId, f32> = keyword_hits
            .iter()
            .map(|hit| (hit.memory_id, hit.score))
            .collect();
        let now = Utc::now();
        let candidates = ids
            .into_iter()
            .filter_map(|memory_id| hydrated.remove(&memory_id))
            .filter(|found| {
                found
                    .memory
                    .expires_at
                    .is_none_or(|expires_at| expires_at > now)
            })
            .map(|found| Candidate {
                keyword_score: keyword_scores.get(&found.memory.id).copied(),
                memory: found.memory,
                embedding: found.embedding,
            })
            .collect();
        timings.hydrate_micros = read_micros + assembling_started.elapsed().as_micros() as u64;
        Ok((candidates, embedded))
    }

    /// What confines a search of the index beyond the project: the request's end-user, agent
    /// (or agent and what is shared with it), session and filters, and the verification rule.
    /// `None` when nothing can match.
    async fn index_bounds_of(
        &self,
        memory_scope: &MemoryScope,
        request: &SearchRequest,
    ) -> Result<Option<IndexBounds>, EngineError> {
        let Some(mut payload_filter) = self.payload_filter_of(memory_scope, request).await? else {
            return Ok(None);
        };
        let as_text =
            |id: &Option<engram_core::ExternalId>| id.as_ref().map(|id| id.as_str().to_string());
        // With `include_shared`, the agent's memories and the shared ones: an either-or the
        // payload filter carries instead of the agent's field.
        let agent_id = match (&request.subject.agent_id, request.include_shared) {
            (Some(agent), true) => {
                let teams = self
                    .teams_of_agent(memory_scope.project(), agent.as_str())
                    .await?;
                let agent_or_shared = engram_index::payload_filter::of_agents_or_shared(
                    vec![agent.as_str().to_string()],
                    Some(&teams),
                );
                payload_filter = Some(engram_index::payload_filter::and_also(
                    payload_filter.take(),
                    agent_or_shared,
                ));
                None
            }
            (agent, _) => as_text(agent),
        };
        // Memories that must be verified to be found are left out before the top-k cut too.
        if let engram_core::search::VerificationRule::VerifiedUnlessOf(own) = &request.verification
        {
            payload_filter = Some(engram_index::payload_filter::and_also(
                payload_filter.take(),
                engram_index::payload_filter::verified_or_of(own),
            ));
        }
        Ok(Some(IndexBounds {
            user_id: as_text(&request.subject.user_id),
            agent_id,
            session_id: if request.session_only {
                as_text(&request.subject.session_id)
            } else {
                None
            },
            payload_filter,
        }))
    }

    /// The payload filter the index applies before its top-k cut: `Some(None)` when the
    /// request has no filter, `None` when nothing can match. Conditions payloads cannot answer
    /// (substrings) are first run in the database; when they match few enough memories the
    /// index is given exactly those, else the index narrows by the rest and the check after
    /// hydration decides.
    async fn payload_filter_of(
        &self,
        memory_scope: &MemoryScope,
        request: &SearchRequest,
    ) -> Result<Option<Option<PayloadFilter>>, EngineError> {
        if request.filters.is_everything() {
            return Ok(Some(engram_index::within_agents(None, memory_scope)));
        }
        let translation = payload_filter_for(&request.filters);
        let mut payload_filter = match translation.bound {
            PayloadBound::Nothing => return Ok(None),
            PayloadBound::Everything => None,
            PayloadBound::Only(filter) => Some(engram_index::or_written_before_filters(filter)),
        };
        if !translation.exact {
            let mut subject = request.subject.clone();
            if !request.session_only {
                subject.session_id = None;
            }
            let mut tree = request.filters.clone();
            if !request.kinds.is_empty() {
                tree = tree.and(engram_core::MemoryFilter::condition(
                    engram_core::memory_filter::FilterCondition::Kind(request.kinds.clone()),
                ));
            }
            let listing = engram_core::memory::MemoryListFilter {
                subject,
                tree,
                ..Default::default()
            };
            let matching = self
                .storage
                .memory_ids_matching(memory_scope, &listing, MAX_FILTER_PRESELECTION + 1)
                .instrument(tracing::info_span!("db.filter_preselection"))
                .await?;
            if matching.is_empty() {
                return Ok(None);
            }
            if matching.len() as u64 <= MAX_FILTER_PRESELECTION {
                payload_filter = Some(engram_index::payload_filter::and_also(
                    payload_filter.take(),
                    PayloadFilter::Ids(matching),
                ));
            }
        }
        Ok(Some(engram_index::within_agents(
            payload_filter,
            memory_scope,
        )))
    }

    /// The project's named teams `agent` belongs to: what is shared with them is shared with it.
    async fn teams_of_agent(
        &self,
        scope: &engram_core::ProjectScope,
        agent: &str,
    ) -> Result<Vec<String>, EngineError> {
        let settings = self.spaces.settings_cache().of(scope).await?;
        Ok(settings.settings.agent_teams.teams_of([agent]))
    }

    /// Every memory of the subject that was valid at `as_of` (superseded ones included),
    /// scored in memory: the index only holds what is active now.
    async fn candidates_valid_at(
        &self,
        scope: &MemoryScope,
        request: &SearchRequest,
        as_of: DateTime<Utc>,
        query_vector: Option<&Vec<f32>>,
        timings: &mut SearchTimings,
    ) -> Result<Vec<Candidate>, EngineError> {
        let hydrate_started = Instant::now();
        let mut subject = request.subject.clone();
        if !request.session_only {
            subject.session_id = None;
        }
        // With `include_shared`, the agent is checked below (its memories or shared ones).
        let shared_too = request
            .include_shared
            .then(|| subject.agent_id.take())
            .flatten();
        let teams = match &shared_too {
            Some(agent) => self.teams_of_agent(scope.project(), agent.as_str()).await?,
            None => Vec::new(),
        };
        let valid = self
            .storage
            .memories_valid_at(scope, &subject, &request.kinds, as_of, MAX_AS_OF_CANDIDATES)
            .instrument(tracing::info_span!("db.memories_valid_at"))
            .await?;
        timings.hydrate_micros = hydrate_started.elapsed().as_micros() as u64;
        let valid: Vec<MemoryWithEmbedding> =
            valid
                .into_iter()
                .filter(|found| {
                    found
                        .memory
                        .expires_at
                        .is_none_or(|expires_at| expires_at > as_of)
                })
                .filter(|found| {
                    shared_too.as_ref().is_none_or(|agent| {
                        found.memory.agent_id.as_ref() == Some(agent)
                            || (found.memory.visibility == engram_core::Visibility::Shared
                                && found.memory.shared_with.as_ref().is_none_or(|team| {
                                    teams.iter().any(|own| own == team.as_str())
                                }))
                    })
                })
                .collect();
        let keyword_started = Instant::now();
        let keyword_scores = if request.retrieval == RetrievalMode::Dense {
            vec![0.0; valid.len()]
        } else {
            let texts: Vec<&str> = valid
                .iter()
                .map(|found| found.memory.content.as_str())
                .collect();
            InMemoryKeywordScorer::new()?.score(&request.query, &texts)
        };
        timings.keyword_micros = keyword_started.elapsed().as_micros() as u64;
        let keep_without_keywords = query_vector.is_some();
        Ok(valid
            .into_iter()
            .zip(keyword_scores)
            .filter(|(_, keyword_score)| keep_without_keywords || *keyword_score > 0.0)
            .map(|(found, keyword_score)| Candidate {
                memory: found.memory,
                embedding: found.embedding,
                keyword_score: (keyword_score > 0.0).then_some(keyword_score),
            })
            .collect())
    }
}

/// Score, filter, order and diversify the candidates; `always` procedures are left out (they
/// are returned on their own). Also says what the relevance floor did.
fn rank_candidates(
    candidates: Vec<Candidate>,
    request: &SearchRequest,
    query_vector: Option<&[f32]>,
    always_ids: &[MemoryId],
    positions: &HashMap<MemoryId, usize>,
    now: DateTime<Utc>,
    understood_time: Option<&engram_core::query_time::TimeInQuery>,
) -> Ranked {
    let mut floored = 0;
    let folded_query = request.query.trim().to_lowercase();
    // Only under a floor, and only for a query that names something: a phrase, or a word
    // with a capital, digit or sign ("the" is in every memory and means nothing).
    let exact_mention_counts = request.relevance_floor > 0.0 && {
        let query = request.query.trim();
        query.chars().count() >= 4
            && (query.split_whitespace().count() >= 2
                || query
                    .chars()
                    .any(|character| !character.is_lowercase() && !character.is_whitespace()))
    };
    let best_keyword_score = candidates
        .iter()
        .filter_map(|candidate| candidate.keyword_score)
        .fold(0.0_f32, f32::max);
    let keyword_weight = match request.retrieval {
        RetrievalMode::Hybrid => request.keyword_weight.clamp(0.0, 1.0),
        RetrievalMode::Dense => 0.0,
        RetrievalMode::Keyword => 1.0,
    };
    // Each candidate's cosine, computed once for ranking and scoring.
    let candidates: Vec<(Candidate, Option<f32>)> = candidates
        .into_iter()
        .map(|candidate| {
            let dense_similarity =
                query_vector.map(|query| cosine_similarity(query, &candidate.embedding));
            (candidate, dense_similarity)
        })
        .collect();
    // Ranks (1 = best) in each signal, for reciprocal rank fusion.
    type ScoreOf<'a> = dyn Fn(&(Candidate, Option<f32>)) -> Option<f32> + 'a;
    let rank_by = |score_of: &ScoreOf<'_>| -> HashMap<MemoryId, f32> {
        let mut scored: Vec<(MemoryId, f32)> = candidates
            .iter()
            .filter_map(|entry| score_of(entry).map(|score| (entry.0.memory.id, score)))
            .collect();
        scored.sort_by(|left, right| right.1.total_cmp(&left.1));
        scored
            .into_iter()
            .enumerate()
            .map(|(position, (memory_id, _))| (memory_id, position as f32 + 1.0))
            .collect()
    };
    let use_ranks =
        request.retrieval == RetrievalMode::Hybrid && request.fusion == FusionMethod::Rrf;
    let (dense_ranks, keyword_ranks) = if use_ranks {
        (
            rank_by(&|(_, dense_similarity)| *dense_similarity),
            rank_by(&|(candidate, _)| candidate.keyword_score),
        )
    } else {
        (HashMap::new(), HashMap::new())
    };
    let boosted_session = (!request.session_only)
        .then_some(request.subject.session_id.as_ref())
        .flatten();
    // The fused score of a candidate: the cosine and keyword signals, before any bonus.
    let base_of = |candidate: &Candidate, dense_similarity: Option<f32>| -> f32 {
        let keyword_relative = match (candidate.keyword_score, best_keyword_score > 0.0) {
            (Some(score), true) => score / best_keyword_score,
            _ => 0.0,
        };
        if use_ranks {
            let reciprocal = |ranks: &HashMap<MemoryId, f32>| {
                ranks
                    .get(&candidate.memory.id)
                    .map_or(0.0, |rank| (RRF_K + 1.0) / (RRF_K + rank))
            };
            (1.0 - keyword_weight) * reciprocal(&dense_ranks)
                + keyword_weight * reciprocal(&keyword_ranks)
        } else {
            (1.0 - keyword_weight) * dense_similarity.unwrap_or(0.0).clamp(0.0, 1.0)
                + keyword_weight * keyword_relative
        }
    };
    let eligible = |candidate: &Candidate| {
        !always_ids.contains(&candidate.memory.id)
            && request.filters.matches(&candidate.memory)
            && request.verification.admits(&candidate.memory)
    };
    // A query naming someone or something no candidate mentions is about someone these
    // memories do not know: its results must clear the higher floor. Only where the keyword
    // list was searched, which brings the memories holding a rare name among the candidates.
    let unmentioned_names = match request.retrieval == RetrievalMode::Hybrid
        && request.unmentioned_name_floor > request.relevance_floor
    {
        true => {
            // The end-user searched for is someone known: "What does Caroline like?" asked
            // of the end-user `caroline`, whose facts name no one ("Likes oolong tea.").
            let names: Vec<String> = engram_core::query_names::names_in_query(&request.query)
                .into_iter()
                .filter(|name| {
                    !request.subject.user_id.as_ref().is_some_and(|user| {
                        engram_core::query_names::mentions_any(
                            user.as_str(),
                            std::slice::from_ref(name),
                        )
                    })
                })
                .collect();
            let known = names.is_empty()
                || candidates.iter().any(|(candidate, _)| {
                    eligible(candidate)
                        && (engram_core::query_names::mentions_any(
                            &candidate.memory.content,
                            &names,
                        ) || engram_core::query_names::written_without_latin_names(
                            &candidate.memory.content,
                        ))
                });
            if known { Vec::new() } else { names }
        }
        false => Vec::new(),
    };
    let floor = match unmentioned_names.is_empty() {
        true => request.relevance_floor,
        false => request.unmentioned_name_floor,
    };
    // Each candidate's fused score, computed once for lending and for ranking.
    // With `include_shared`, a memory of another agent (or of none) counts `shared_weight`.
    let shared_from_others = |candidate: &Candidate| {
        request.include_shared
            && candidate.memory.agent_id.as_ref() != request.subject.agent_id.as_ref()
    };
    let bases: Vec<f32> = candidates
        .iter()
        .map(|(candidate, dense_similarity)| {
            let base = base_of(candidate, *dense_similarity);
            match shared_from_others(candidate) {
                true => base * request.shared_weight.clamp(0.0, 1.0),
                false => base,
            }
        })
        .collect();
    let neighbour_bonuses = neighbour_bonuses(&candidates, &bases, positions, request, &eligible);
    let mut scored: Vec<(SearchHit, Vec<f32>, f32)> = Vec::with_capacity(candidates.len());
    for (((candidate, dense_similarity), base), neighbour_bonus) in
        candidates.into_iter().zip(bases).zip(neighbour_bonuses)
    {
        if !eligible(&candidate) {
            continue;
        }
        let holds_query_term = candidate.keyword_score.is_some_and(|score| score > 0.0);
        if request.retrieval == RetrievalMode::Keyword && !holds_query_term {
            continue;
        }
        let age_days = (now - candidate.memory.valid_from).num_seconds().max(0) as f64 / 86_400.0;
        let recency_bonus = request.recency_weight.clamp(0.0, 1.0)
            * 0.5_f64.powf(age_days / RECENCY_HALF_LIFE_DAYS) as f32;
        let session_bonus = match (boosted_session, &candidate.memory.session_id) {
            (Some(wanted), Some(session)) if wanted == session => SESSION_BOOST,
            _ => 0.0,
        };
        // Ordered by the unclamped sum: bonuses must still separate results whose base is
        // already near 1 (the reported score is capped at 1).
        let time_bonus = match understood_time {
            Some(window) if (window.from..window.to).contains(&candidate.memory.occurred_at) => {
                TIME_IN_QUERY_BOOST
            }
            _ => 0.0,
        };
        let raw_score = base + neighbour_bonus + recency_bonus + session_bonus + time_bonus;
        let score = raw_score.clamp(0.0, 1.0);
        if score < request.min_score {
            continue;
        }
        // A memory that holds the query word for word (an order number, a ticket id, a
        // name, a phrase) is relevant whatever the model makes of it.
        let mentions_query = exact_mention_counts
            && candidate
                .memory
                .content
                .to_lowercase()
                .contains(folded_query.as_str());
        // Under the floor for unmentioned names the keyword bonus does not count: the words
        // a memory shares with such a question are about someone else.
        let keyword_score = match unmentioned_names.is_empty() {
            true => candidate.keyword_score,
            false => None,
        };
        let relevance = dense_similarity.map(|similarity| match mentions_query {
            true => 1.0,
            false => relevance_of(similarity, keyword_score),
        });
        // A memory of the time the query names answers it whatever its words ("what did I
        // do last month?", "上个月我做了什么？"), unless the query is about someone unknown.
        let answers_the_time = time_bonus > 0.0 && unmentioned_names.is_empty();
        if !answers_the_time && relevance.is_some_and(|relevance| relevance < floor) {
            floored += 1;
            continue;
        }
        scored.push((
            SearchHit {
                memory: candidate.memory,
                score,
                relevance,
                signals: RankingSignals {
                    dense_similarity,
                    keyword_score: candidate.keyword_score,
                    recency_bonus,
                    session_bonus,
                    time_bonus,
                    neighbour_bonus,
                },
            },
            candidate.embedding,
            raw_score,
        ));
    }
    // Ties (equal scores) keep a stable order: newer memories first.
    scored.sort_by(|(left, _, left_raw), (right, _, right_raw)| {
        right_raw
            .total_cmp(left_raw)
            .then_with(|| right.memory.id.cmp(&left.memory.id))
    });
    let mut kept: Vec<(SearchHit, Vec<f32>)> = Vec::with_capacity(request.top_k);
    for (hit, embedding, _) in scored {
        if kept.len() >= request.top_k {
            break;
        }
        let near_duplicate = request.diversify
            && kept.iter().any(|(_, kept_embedding)| {
                engram_core::embedding::comparable_similarity(
                    &hit.memory.embedding_model,
                    cosine_similarity(kept_embedding, &embedding),
                ) >= NEAR_DUPLICATE_SIMILARITY
            });
        if !near_duplicate {
            kept.push((hit, embedding));
        }
    }
    Ranked {
        hits: kept.into_iter().map(|(hit, _)| hit).collect(),
        floored,
        floor,
        unmentioned_names,
    }
}

/// What ranking kept, and what the relevance floor did.
struct Ranked {
    hits: Vec<SearchHit>,
    /// Candidates only the floor left out.
    floored: usize,
    /// The floor compared: the project's, or its floor for unmentioned names.
    floor: f32,
    /// The names of the query no candidate mentions, when they raised the floor.
    unmentioned_names: Vec<String>,
}

/// A session: its end-user (none for the project's own) and its id. The same session id of
/// two end-users is two sessions.
type SessionKey<'a> = (Option<&'a str>, &'a str);

fn session_of(memory: &Memory) -> Option<SessionKey<'_>> {
    Some((
        memory.user_id.as_ref().map(ExternalId::as_str),
        memory.session_id.as_ref()?.as_str(),
    ))
}

/// What each candidate gains from its neighbours (in `candidates`' order): a memory rises
/// `neighbour_weight` of the way toward the best fused score among the eligible candidates
/// of its session (one end-user's) at most [`NEIGHBOUR_REACH`] positions away, never past
/// it, so the turn that matches keeps its place and a memory already above its neighbours
/// gains nothing.
fn neighbour_bonuses(
    candidates: &[(Candidate, Option<f32>)],
    bases: &[f32],
    positions: &HashMap<MemoryId, usize>,
    request: &SearchRequest,
    eligible: &dyn Fn(&Candidate) -> bool,
) -> Vec<f32> {
    let mut bonuses = vec![0.0; candidates.len()];
    if request.neighbour_weight <= 0.0 || positions.is_empty() {
        return bonuses;
    }
    // Each candidate's session and position in it, where it has both.
    let placed: Vec<(Option<SessionKey<'_>>, Option<usize>)> = candidates
        .iter()
        .map(|(candidate, _)| {
            (
                session_of(&candidate.memory),
                positions.get(&candidate.memory.id).copied(),
            )
        })
        .collect();
    // (position, fused score) of the eligible candidates, by session.
    let mut lenders: HashMap<SessionKey<'_>, Vec<(usize, f32)>> = HashMap::new();
    for (((candidate, _), (session, position)), base) in candidates.iter().zip(&placed).zip(bases) {
        if let (true, Some(session), Some(position)) = (eligible(candidate), session, position) {
            lenders
                .entry(*session)
                .or_default()
                .push((*position, *base));
        }
    }
    for ((bonus, (session, position)), base) in bonuses.iter_mut().zip(&placed).zip(bases) {
        let (Some(session), Some(position)) = (session, position) else {
            continue;
        };
        let best_neighbour = lenders
            .get(session)
            .into_iter()
            .flatten()
            .filter(|(other, _)| other != position && other.abs_diff(*position) <= NEIGHBOUR_REACH)
            .map(|(_, lent)| *lent)
            .fold(0.0_f32, f32::max);
        *bonus = request.neighbour_weight.clamp(0.0, 1.0) * (best_neighbour - base).max(0.0);
    }
    bonuses
}

pub(crate) fn cosine_similarity(left: &[f32], right: &[f32]) -> f32 {
    if left.len() != right.len() || left.is_empty() {
        return 0.0;
    }
    let (mut dot, mut left_norm, mut right_norm) = (0.0_f32, 0.0_f32, 0.0_f32);
    for (a, b) in left.iter().zip(right) {
        dot += a * b;
        left_norm += a * a;
        right_norm += b * b;
    }
    if left_norm == 0.0 || right_norm == 0.0 {
        return 0.0;
    }
    dot / (left_norm.sqrt() * right_norm.sqrt())
}

fn record_search_metrics(timings: &SearchTimings) {
    let seconds = |micros: u64| micros as f64 / 1_000_000.0;
    for (phase, micros) in [
        ("embed", timings.embed_micros),
        ("dense", timings.dense_micros),
        ("keyword", timings.keyword_micros),
        ("hydrate", timings.hydrate_micros),
        ("rank", timings.rank_micros),
        ("total", timings.total_micros),
    ] {
        metrics::histogram!(SEARCH_DURATION_SECONDS, "phase" => phase).record(seconds(micros));
    }
}

/// A ready-to-inject block of memories that fits a token budget.
#[derive(Clone, Debug, PartialEq)]
pub struct PackedContext {
    pub text: String,
    /// Tokens of `text` by the embedding model's tokenizer (an estimate of an LLM's count).
    pub tokens: u64,
    /// The memories in `text`, in order.
    pub memory_ids: Vec<MemoryId>,
    /// Results that did not fit.
    pub omitted: usize,
}

/// Where one line of a packed context came from.
#[derive(Clone, Debug, PartialEq)]
pub enum ContextSource {
    Memory {
        memory_id: MemoryId,
        version: i64,
        /// The search score (absent for `always` procedures).
        score: Option<f32>,
    },
    Message {
        message_id: Uuid,
    },
    State {
        key: String,
        version: i64,
    },
    Summary,
}

/// One part of a context: a header and its lines in priority order.
#[derive(Clone, Debug)]
pub struct ContextSection {
    pub part: engram_core::runs::ContextPart,
    pub header: String,
    pub lines: Vec<(String, ContextSource)>,
    /// Lines fit in priority order but read in the reverse one (recent messages: the newest
    /// fit first, and read oldest first).
    pub reversed: bool,
    /// The header is written even when no line fits (search's `context`).
    pub header_always: bool,
}

/// What one section contributed to a packed context.
#[derive(Clone, Debug, PartialEq)]
pub struct PackedSection {
    pub part: engram_core::runs::ContextPart,
    pub tokens: u64,
    /// The sources of the lines written, in reading order.
    pub sources: Vec<ContextSource>,
    /// Lines that did not fit.
    pub omitted: usize,
}

/// Sections packed into one text.
#[derive(Clone, Debug, PartialEq)]
pub struct PackedSections {
    pub text: String,
    pub tokens: u64,
    pub sections: Vec<PackedSection>,
}

/// One line per memory with its provenance (content, kind, source, valid-from date, id).
pub fn memory_line(memory: &Memory, is_always: bool) -> String {
    format!(
        "- {} [{}{}, {}, {}, id {}]",
        memory.content.replace('\n', " "),
        memory.kind.as_str(),
        if is_always { ", always" } else { "" },
        memory.source.as_str(),
        memory.valid_from.format("%Y-%m-%d"),
        memory.id,
    )
}

/// Pack sections into `token_budget` tokens, in the order given: each section takes its
/// lines in order until the next would not fit (the rest of that section is left out and
/// counted), and the following sections get what is left. A section writes its header only
/// with a line (or when `header_always`); sections are separated by a blank line.
pub fn pack_sections(
    sections: Vec<ContextSection>,
    token_budget: u64,
    count_tokens: impl Fn(&str) -> u64,
) -> PackedSections {
    let mut text = String::new();
    let mut tokens = 0;
    let mut packed = Vec::with_capacity(sections.len());
    for section in sections {
        let separator = if text.is_empty() { "" } else { "\n\n" };
        let header = format!("{separator}{}", section.header);
        let header_tokens = count_tokens(&header);
        let mut section_tokens = header_tokens;
        let mut written: Vec<(String, ContextSource)> = Vec::new();
        let mut omitted = 0;
        for (line, source) in section.lines {
            if omitted > 0 {
                // Priority order is kept: once one line does not fit, the rest are left out.
                omitted += 1;
                continue;
            }
            let line = format!("\n{line}");
            let line_tokens = count_tokens(&line);
            if tokens + section_tokens + line_tokens > token_budget {
                omitted += 1;
                continue;
            }
            section_tokens += line_tokens;
            written.push((line, source));
        }
        if written.is_empty() && !section.header_always {
            packed.push(PackedSection {
                part: section.part,
                tokens: 0,
                sources: Vec::new(),
                omitted,
            });
            continue;
        }
        if section.reversed {
            written.reverse();
        }
        text.push_str(&header);
        let mut sources = Vec::with_capacity(written.len());
        for (line, source) in written {
            text.push_str(&line);
            sources.push(source);
        }
        tokens += section_tokens;
        packed.push(PackedSection {
            part: section.part,
            tokens: section_tokens,
            sources,
            omitted,
        });
    }
    PackedSections {
        text,
        tokens,
        sections: packed,
    }
}

/// Search's `context`: one line per memory, `always` procedures first, then results best
/// first, each with its provenance (kind, source, date, id), until the next line would exceed
/// `token_budget`.
pub fn pack_context(
    always: &[Memory],
    results: &[SearchHit],
    token_budget: u64,
    count_tokens: impl Fn(&str) -> u64,
) -> PackedContext {
    let lines = always
        .iter()
        .map(|memory| (memory, true, None))
        .chain(
            results
                .iter()
                .map(|hit| (&hit.memory, false, Some(hit.score))),
        )
        .map(|(memory, is_always, score)| {
            (
                memory_line(memory, is_always),
                ContextSource::Memory {
                    memory_id: memory.id,
                    version: memory.version,
                    score,
                },
            )
        })
        .collect();
    let packed = pack_sections(
        vec![ContextSection {
            part: engram_core::runs::ContextPart::Memories,
            header: "Memories (most relevant first):".to_string(),
            lines,
            reversed: false,
            header_always: true,
        }],
        token_budget,
        count_tokens,
    );
    let section = packed.sections.into_iter().next();
    PackedContext {
        text: packed.text,
        tokens: packed.tokens,
        memory_ids: section
            .as_ref()
            .map(|section| {
                section
                    .sources
                    .iter()
                    .filter_map(|source| match source {
                        ContextSource::Memory { memory_id, .. } => Some(*memory_id),
                        _ => None,
                    })
                    .collect()
            })
            .unwrap_or_default(),
        omitted: section.map_or(0, |section| section.omitted),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cosine_of_parallel_orthogonal_and_mismatched_vectors() {
        assert!((cosine_similarity(&[1.0, 0.0], &[2.0, 0.0]) - 1.0).abs() < 1e-6);
        assert_eq!(cosine_similarity(&[1.0, 0.0], &[0.0, 3.0]), 0.0);
        assert_eq!(cosine_similarity(&[1.0], &[1.0, 0.0]), 0.0);
    }

    /// Each section fits in its priority order; a section that cannot fit a line writes no
    /// header and counts what it left out; recent messages read oldest first.
    #[test]
    fn sections_share_the_budget_in_priority_order() {
        use engram_core::runs::ContextPart;
        let words = |text: &str| text.split_whitespace().count() as u64;
        let section = |part, header: &str, lines: &[&str], reversed| ContextSection {
            part,
            header: header.to_string(),
            lines: lines
                .iter()
                .map(|line| (line.to_string(), ContextSource::Summary))
                .collect(),
            reversed,
            header_always: false,
        };
        let packed = pack_sections(
            vec![
                section(ContextPart::State, "State:", &["- a: 1", "- b: 2"], false),
                section(
                    ContextPart::Memories,
                    "Memories:",
                    &["- far too many words for it"],
                    false,
                ),
                section(
                    ContextPart::RecentMessages,
                    "Messages:",
                    &["- new one", "- old one", "- oldest"],
                    true,
                ),
            ],
            14,
            words,
        );
        assert_eq!(
            packed.text,
            "State:\n- a: 1\n- b: 2\n\nMessages:\n- old one\n- new one"
        );
        assert_eq!(packed.tokens, 14);
        let omitted: Vec<usize> = packed.sections.iter().map(|s| s.omitted).collect();
        assert_eq!(omitted, vec![0, 1, 1]);
        assert_eq!(packed.sections[1].tokens, 0);
    }

    #[test]
    fn retrieval_modes_and_fusion_methods_parse_and_print() {
        for mode in RetrievalMode::ALL {
            assert_eq!(mode.as_str().parse::<RetrievalMode>(), Ok(mode));
        }
        assert!("bm25".parse::<RetrievalMode>().is_err());
        for method in FusionMethod::ALL {
            assert_eq!(method.as_str().parse::<FusionMethod>(), Ok(method));
        }
        assert!("max".parse::<FusionMethod>().is_err());
    }
}
