//! Search: the retrieval profile (named, or drawn by traffic share for a search that tunes
//! nothing itself), the spend check, the project's recall budget, context packing, metering
//! and the recall event — the same for every door.

use crate::profiles::{DEFAULT_PROFILE, profile_for_draw};
use crate::{
    EngineError, MemoryEngine, PackedContext, RetrievalMode, SearchOutcome, SearchRequest,
    pack_context,
};
use engram_core::principal::Credential;
use engram_core::recall::RecallEventCapture;
use engram_core::runs::{MemoryAtVersion, MemoryUseKind, NewMemoryUse, RunRecord, RunStepType};
use engram_core::search::VerificationRule;
use engram_core::usage::{PlannedSpend, UsageAttribution, UsageUnit};
use engram_core::{Operation, Principal};
use engram_storage::recall_quality::NewRecallEvent;

pub use engram_core::search::{MAX_CONTEXT_TOKENS, SearchMemoriesRequest};

/// How the project's recall budget shortened the answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecallBudgetCut {
    pub max_results: Option<u32>,
    pub max_tokens: Option<u32>,
    /// Results found but left out.
    pub omitted: u32,
}

pub struct SearchAnswer {
    /// `results` holds what is returned, in ranked order, after the recall budget.
    pub outcome: SearchOutcome,
    pub recall_budget: Option<RecallBudgetCut>,
    pub context: Option<PackedContext>,
    /// The profile the search ran with (`default` for none).
    pub profile: String,
}

impl MemoryEngine {
    pub async fn search_memories_for(
        &self,
        principal: &Principal,
        search: SearchMemoriesRequest,
    ) -> Result<SearchAnswer, EngineError> {
        principal.authorize(Operation::SearchMemories)?;
        let subject =
            principal.end_user_subject(search.request.subject.user_id.clone(), "user_id")?;
        let run = self
            .run_to_link(
                principal,
                search.run_id,
                &[subject.as_ref().map(|id| id.as_str())],
            )
            .await?;
        let (answer, pending) = self.recall(principal, search).await?;
        let returned: Vec<RecalledMemory> = answer
            .outcome
            .results
            .iter()
            .map(|hit| RecalledMemory {
                memory_id: hit.memory.id,
                version: hit.memory.version,
                score: Some(hit.score),
            })
            .collect();
        let recorded = pending.is_some();
        if let Some(pending) = pending {
            let event = pending.into_event(
                answer.outcome.recall_id,
                &returned,
                &answer.outcome.timings,
                engram_core::recall::RECALL_PURPOSE_SEARCH,
            );
            self.recall_events.record(principal.scope(), event);
        }
        if let Some(run) = &run {
            let memories: Vec<serde_json::Value> =
                returned.iter().map(|memory| memory.to_json()).collect();
            let uses = match recorded {
                // The recall event records these uses itself.
                true => Vec::new(),
                false => uses_of(
                    &returned,
                    MemoryUseKind::Returned,
                    answer.outcome.recall_id,
                    run,
                ),
            };
            self.record_linked_step(
                principal,
                run,
                RunStepType::Search,
                serde_json::json!({
                    "recall_id": answer.outcome.recall_id.to_string(),
                    "profile": answer.profile,
                    "results": memories,
                }),
                uses,
            )
            .await;
        }
        Ok(answer)
    }

    /// A search as every recall runs it (search, context): profile, spend, recall budget,
    /// metering; the event to record is handed back for the caller to record with what it
    /// used of the results.
    pub(crate) async fn recall(
        &self,
        principal: &Principal,
        search: SearchMemoriesRequest,
    ) -> Result<(SearchAnswer, Option<PendingRecall>), EngineError> {
        let limit_errors = search.limit_errors();
        if !limit_errors.is_empty() {
            return Err(engram_core::InvalidInput(limit_errors).into());
        }
        let scope = principal.scope();
        let mut request = search.request;
        let recall_settings = self.recall_events.settings_of(scope).await;
        // A cut-off the caller or its profile asked for (0 included) replaces the floor.
        let mut cut_off_asked = search.caller_tuning.min_score.is_some();
        let profile = match search.profile {
            Some(name) => {
                let tuning = self.profile_tuning(scope, &name).await?;
                cut_off_asked |= tuning.min_score.is_some();
                tuning.fill_unset(&mut request, &search.caller_tuning);
                name
            }
            None if search.caller_tuning.is_empty() => {
                let shares: Vec<(String, f64)> = recall_settings
                    .traffic
                    .iter()
                    .map(|(name, _, share)| (name.clone(), *share))
                    .collect();
                let draw: f64 = rand::random();
                match profile_for_draw(&shares, draw).and_then(|name| {
                    recall_settings
                        .traffic
                        .iter()
                        .find(|(candidate, ..)| candidate == name)
                }) {
                    Some((name, tuning, _)) => {
                        cut_off_asked |= tuning.min_score.is_some();
                        tuning.fill_unset(&mut request, &search.caller_tuning);
                        name.clone()
                    }
                    None => DEFAULT_PROFILE.to_string(),
                }
            }
            None => DEFAULT_PROFILE.to_string(),
        };
        (request.relevance_floor, request.unmentioned_name_floor) = if cut_off_asked {
            (0.0, 0.0)
        } else {
            self.relevance_floors_of(scope).await?
        };
        request.subject.user_id =
            principal.end_user_subject(request.subject.user_id.take(), "user_id")?;
        // Other agents' conclusions only once verified, when the project says so. The
        // searcher's own agents: a bound credential's agents (naming another agent does not
        // make it one's own), else the agent the search is for (a search of no agent has no
        // "other agents"). A bound credential cannot ask the project's rule away.
        let own: Vec<String> = match principal.agents() {
            Some(agents) => agents
                .agents()
                .iter()
                .map(|agent| agent.as_str().to_string())
                .collect(),
            None => request
                .subject
                .agent_id
                .iter()
                .chain(request.for_agent.iter())
                .map(|agent| agent.as_str().to_string())
                .collect(),
        };
        let project_requires = !own.is_empty()
            && self
                .spaces
                .settings_cache()
                .of(scope)
                .await?
                .settings
                .verified_only_from_other_agents;
        request.verification = match (request.verified_only, project_requires) {
            (Some(true), _) => VerificationRule::VerifiedUnlessOf(Vec::new()),
            (Some(false), true) if principal.agents().is_none() => VerificationRule::Any,
            (_, true) => VerificationRule::VerifiedUnlessOf(own),
            (_, false) => VerificationRule::Any,
        };
        // A console member's lookup is neither an agent's recall nor bound by what agents may
        // be handed: it records no recall event (which would skew recall quality and keep a
        // compliance officer's query text) and is not shortened by the recall budget.
        let console_lookup = matches!(principal.credential(), Credential::ConsoleAccount { .. });
        // A person types words, never a vector: in a project that sends its own vectors, a
        // console lookup is by words only (an agent's search there must bring its vector).
        if console_lookup
            && request.query_vector.is_none()
            && request.retrieval != RetrievalMode::Keyword
            && self
                .spaces
                .space_for(scope)
                .await?
                .client_dimension()
                .is_some()
        {
            request.retrieval = RetrievalMode::Keyword;
        }
        let limits = self
            .spend_guard
            .admit(
                scope,
                &[
                    PlannedSpend {
                        unit: UsageUnit::Searches,
                        quantity: 1,
                    },
                    PlannedSpend {
                        unit: UsageUnit::TokensEmbedded,
                        quantity: 1,
                    },
                ],
            )
            .await?;
        let recall = if console_lookup {
            Default::default()
        } else {
            limits.recall.clone()
        };
        let requested = request.top_k;
        if let Some(max_results) = recall.max_results {
            request.top_k = request.top_k.min(max_results.max(1) as usize);
        }
        // Filed under the agent searched for, else the credential's own: a recall of a
        // credential bound to agents stays within them.
        let recorded_request = (recall_settings.capture != RecallEventCapture::Off
            && !console_lookup)
            .then(|| RecordedSearch::of(&request))
            .map(|mut recorded| {
                let own = |agent: &String| {
                    principal
                        .agents()
                        .is_none_or(|agents| agents.contains(agent))
                };
                recorded.agent_id = recorded
                    .agent_id
                    .filter(own)
                    .or_else(|| principal.acting_agent().map(ToString::to_string));
                recorded
            });
        let attribution = principal.usage_attribution().for_subject(
            request.subject.user_id.as_ref().map(|id| id.as_str()),
            request.subject.agent_id.as_ref().map(|id| id.as_str()),
        );
        let mut outcome = self.search(principal.memory_scope(), request).await?;
        self.meter
            .record(scope, &attribution, UsageUnit::Searches, 1);
        self.meter.record(
            scope,
            &attribution,
            UsageUnit::TokensEmbedded,
            outcome.tokens_embedded,
        );
        let found = outcome.results.len();
        let mut returned = found;
        if let Some(max_tokens) = recall.max_tokens {
            let mut tokens_returned: u64 = 0;
            // Ranked order is kept: a memory that does not fit ends the list.
            returned = outcome
                .results
                .iter()
                .take_while(|hit| {
                    let tokens = self.embedder.count_tokens(&hit.memory.content);
                    let fits = tokens_returned + tokens <= u64::from(max_tokens);
                    if fits {
                        tokens_returned += tokens;
                    }
                    fits
                })
                .count();
        }
        outcome.results.truncate(returned);
        let cut_by_count = recall.max_results.is_some_and(|max_results| {
            (max_results as usize) < requested && found >= max_results as usize
        });
        let omitted = found - returned;
        let recall_budget = (cut_by_count || omitted > 0).then_some(RecallBudgetCut {
            max_results: recall.max_results,
            max_tokens: recall.max_tokens,
            omitted: omitted as u32,
        });
        // The context holds what the answer returns: the recall budget applies to it too.
        let context = search.context_tokens.map(|token_budget| {
            pack_context(&outcome.always, &outcome.results, token_budget, |text| {
                self.embedder.count_tokens(text)
            })
        });
        let pending = recorded_request.map(|recorded| PendingRecall {
            recorded,
            capture: recall_settings.capture,
            profile: profile.clone(),
            trace_id: search.trace_id,
            attribution,
            run_id: search.run_id,
        });
        Ok((
            SearchAnswer {
                outcome,
                recall_budget,
                context,
                profile,
            },
            pending,
        ))
    }
}

impl MemoryEngine {
    /// The project's relevance floors, its setting resolved for the model it embeds with:
    /// the one every search applies, and the one for a query naming what no candidate
    /// mentions.
    pub(crate) async fn relevance_floors_of(
        &self,
        scope: &engram_core::ProjectScope,
    ) -> Result<(f32, f32), EngineError> {
        let configuration = self.spaces.settings_cache().of(scope).await?;
        let settings = &configuration.settings;
        let (model_id, _) = self.spaces.identity_of(settings.embedding)?;
        Ok((
            settings.relevance_floor.effective(&model_id),
            settings.relevance_floor.for_unmentioned_names(&model_id),
        ))
    }
}

/// A memory a recall used, at the version it had.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct RecalledMemory {
    pub memory_id: engram_core::MemoryId,
    pub version: i64,
    pub score: Option<f32>,
}

impl RecalledMemory {
    pub fn to_json(self) -> serde_json::Value {
        let mut value = serde_json::json!({
            "memory_id": self.memory_id.to_string(),
            "version": self.version,
        });
        if let Some(score) = self.score {
            value["score"] = serde_json::json!(score);
        }
        value
    }
}

/// Uses of memories a run's step records itself (when no recall event records them).
pub(crate) fn uses_of(
    memories: &[RecalledMemory],
    kind: MemoryUseKind,
    recall_id: uuid::Uuid,
    run: &RunRecord,
) -> Vec<NewMemoryUse> {
    let now = chrono::Utc::now();
    memories
        .iter()
        .map(|memory| NewMemoryUse {
            memory: MemoryAtVersion {
                memory_id: memory.memory_id,
                version: memory.version,
            },
            kind,
            used_at: now,
            recall_id: Some(recall_id),
            run_id: Some(run.id),
            user_id: run.user_id.clone(),
        })
        .collect()
}

/// A recall event waiting to be recorded with what the caller used of the results.
pub(crate) struct PendingRecall {
    recorded: RecordedSearch,
    capture: RecallEventCapture,
    profile: String,
    trace_id: Option<String>,
    attribution: UsageAttribution,
    run_id: Option<uuid::Uuid>,
}

impl PendingRecall {
    pub fn into_event(
        self,
        recall_id: uuid::Uuid,
        used: &[RecalledMemory],
        timings: &crate::SearchTimings,
        purpose: &str,
    ) -> NewRecallEvent {
        self.recorded.into_event(
            recall_id,
            used,
            timings,
            self.capture,
            self.profile,
            self.trace_id,
            self.attribution,
            self.run_id,
            purpose,
        )
    }
}

/// What a recall event keeps of the request, taken before the search consumes it.
struct RecordedSearch {
    query: String,
    user_id: Option<String>,
    agent_id: Option<String>,
    session_id: Option<String>,
    retrieval: &'static str,
    filters: serde_json::Value,
}

impl RecordedSearch {
    fn of(request: &SearchRequest) -> Self {
        let text = |id: &Option<engram_core::ExternalId>| id.as_ref().map(ToString::to_string);
        Self {
            query: request.query.clone(),
            user_id: text(&request.subject.user_id),
            agent_id: text(&request.subject.agent_id),
            session_id: text(&request.subject.session_id),
            retrieval: request.retrieval.as_str(),
            filters: serde_json::json!({
                "kinds": request.kinds.iter().map(|kind| kind.as_str()).collect::<Vec<_>>(),
                "filter": request.filters.to_json(),
                "session_only": request.session_only,
                "as_of": request.as_of,
                "top_k": request.top_k,
                "min_score": request.min_score,
                "relevance_floor": request.relevance_floor,
                "unmentioned_name_floor": request.unmentioned_name_floor,
                "fusion": request.fusion.as_str(),
                "keyword_weight": request.keyword_weight,
                "recency_weight": request.recency_weight,
                "neighbour_weight": request.neighbour_weight,
                "diversify": request.diversify,
            }),
        }
    }

    /// The event for what was used: a search's returned results (after the recall budget),
    /// a context's packed memories.
    #[allow(clippy::too_many_arguments)]
    fn into_event(
        self,
        recall_id: uuid::Uuid,
        used: &[RecalledMemory],
        timings: &crate::SearchTimings,
        capture: RecallEventCapture,
        profile: String,
        trace_id: Option<String>,
        attribution: UsageAttribution,
        run_id: Option<uuid::Uuid>,
        purpose: &str,
    ) -> NewRecallEvent {
        let results: Vec<serde_json::Value> = used
            .iter()
            .enumerate()
            .map(|(position, memory)| {
                let mut value = memory.to_json();
                value["rank"] = serde_json::json!(position + 1);
                value
            })
            .collect();
        NewRecallEvent {
            id: recall_id,
            created_at: chrono::Utc::now(),
            user_id: self.user_id,
            agent_id: self.agent_id,
            session_id: self.session_id,
            query_text: (capture == RecallEventCapture::Full).then_some(self.query),
            profile,
            retrieval: self.retrieval.to_string(),
            filters: self.filters,
            result_count: results.len() as u32,
            top_score: used
                .iter()
                .filter_map(|memory| memory.score)
                .map(f64::from)
                .reduce(f64::max),
            results: serde_json::Value::Array(results),
            total_micros: timings.total_micros,
            timings: serde_json::json!({
                "embed_micros": timings.embed_micros,
                "dense_micros": timings.dense_micros,
                "keyword_micros": timings.keyword_micros,
                "hydrate_micros": timings.hydrate_micros,
                "rank_micros": timings.rank_micros,
                "total_micros": timings.total_micros,
            }),
            trace_id,
            credential: attribution.credential,
            channel: Some(attribution.channel),
            run_id,
            purpose: purpose.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use engram_core::search::SearchTuning;

    fn search(request: SearchRequest, context_tokens: Option<u64>) -> SearchMemoriesRequest {
        SearchMemoriesRequest {
            request,
            caller_tuning: SearchTuning::default(),
            profile: None,
            context_tokens,
            trace_id: None,
            run_id: None,
        }
    }

    fn fields(search: &SearchMemoriesRequest) -> Vec<String> {
        search
            .limit_errors()
            .into_iter()
            .map(|error| error.field)
            .collect()
    }

    /// The limits are the use case's, whatever door built the request: a console, MCP or
    /// Mem0 door is held to what the HTTP API documents.
    #[test]
    fn a_search_beyond_the_documented_limits_names_each_field() {
        let within = search(
            SearchRequest {
                query: "tea".to_string(),
                ..SearchRequest::default()
            },
            Some(512),
        );
        assert!(fields(&within).is_empty());
        let beyond = search(
            SearchRequest {
                query: "   ".to_string(),
                top_k: 0,
                min_score: 1.5,
                keyword_weight: -0.1,
                recency_weight: f32::NAN,
                session_only: true,
                as_of: Some(chrono::Utc::now() + chrono::Duration::days(1)),
                ..SearchRequest::default()
            },
            Some(MAX_CONTEXT_TOKENS + 1),
        );
        assert_eq!(
            fields(&beyond),
            vec![
                "query",
                "top_k",
                "min_score",
                "keyword_weight",
                "recency_weight",
                "as_of",
                "session_only",
                "context_tokens"
            ]
        );
        let long_query = search(
            SearchRequest {
                query: "x".repeat(engram_core::limits::MAX_QUERY_BYTES + 1),
                top_k: engram_core::limits::MAX_TOP_K + 1,
                ..SearchRequest::default()
            },
            None,
        );
        assert_eq!(fields(&long_query), vec!["query", "top_k"]);
    }
}
