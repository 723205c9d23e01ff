//! The context to inject for one step of an agent: the `always` procedures, the session's
//! state, the memories relevant to the query (or task) and the recent messages, packed by
//! one packer into a token budget in that priority order, each line with its provenance. The
//! memories part is a recall like any search (profile, spend, recall budget, metering) and its
//! event records what was packed; a part that cannot be built is reported with why.

use crate::search::{ContextSection, ContextSource, memory_line, pack_sections};
use crate::use_cases::search_memories::{RecalledMemory, uses_of};
use crate::{EngineError, MemoryEngine, RetrievalMode, SearchRequest};
use engram_core::recall::RECALL_PURPOSE_CONTEXT;
use engram_core::runs::{
    ContextPart, MAX_CONTEXT_BUDGET_TOKENS, MAX_CONTEXT_MESSAGES, MAX_CONTEXT_STATE_VALUES,
    MemoryUseKind, RunStepType,
};
use engram_core::search::{SearchMemoriesRequest, SearchTuning};
use engram_core::{ExternalId, FieldError, InvalidInput, Operation, Principal, SubjectFilter};
use std::time::Instant;

/// What to assemble.
#[derive(Clone, Debug, Default)]
pub struct AssembleContextRequest {
    pub user_id: Option<ExternalId>,
    pub agent_id: Option<ExternalId>,
    pub session_id: Option<ExternalId>,
    /// What to recall memories for; the task when absent.
    pub query: Option<String>,
    pub task: Option<String>,
    pub token_budget: u64,
    pub run_id: Option<uuid::Uuid>,
    /// The parts wanted; `None`: every part that can be built.
    pub include: Option<Vec<ContextPart>>,
    pub trace_id: Option<String>,
}

/// One packed part and where each of its lines came from.
#[derive(Clone, Debug, PartialEq)]
pub struct AssembledPart {
    pub part: ContextPart,
    pub tokens: u64,
    pub sources: Vec<ContextSource>,
    /// Lines of this part that did not fit the budget.
    pub omitted: usize,
}

/// The assembled context.
#[derive(Clone, Debug)]
pub struct AssembledContext {
    /// Names this assembly in a run's model-call step (`context_id`) and, when the project
    /// records recall events, its recall event.
    pub context_id: uuid::Uuid,
    pub text: String,
    pub tokens: u64,
    pub token_budget: u64,
    pub parts: Vec<AssembledPart>,
    /// Parts asked for (or wanted by default) that could not be built, with why.
    pub omitted_parts: Vec<(ContextPart, String)>,
    /// Microseconds by stage: `procedures`, `state`, `memories`, `recent_messages`, `pack`,
    /// `total`.
    pub timings: Vec<(&'static str, u64)>,
    pub profile: Option<String>,
}

impl AssembleContextRequest {
    /// What is wrong against the documented limits, one error per field.
    pub fn limit_errors(&self) -> Vec<FieldError> {
        let mut errors = Vec::new();
        if !(1..=MAX_CONTEXT_BUDGET_TOKENS).contains(&self.token_budget) {
            errors.push(FieldError::new(
                "token_budget",
                format!(
                    "must be 1–{MAX_CONTEXT_BUDGET_TOKENS}, got {}",
                    self.token_budget
                ),
            ));
        }
        for (field, text) in [("query", &self.query), ("task", &self.task)] {
            if let Some(text) = text {
                if text.trim().is_empty() {
                    errors.push(FieldError::new(field, "must not be blank"));
                } else if text.len() > engram_core::limits::MAX_QUERY_BYTES {
                    errors.push(FieldError::new(
                        field,
                        format!(
                            "must be at most {} bytes, got {}",
                            engram_core::limits::MAX_QUERY_BYTES,
                            text.len()
                        ),
                    ));
                }
            }
        }
        if let Some(include) = &self.include
            && include.is_empty()
        {
            errors.push(FieldError::new(
                "include",
                format!(
                    "names at least one part of {}",
                    ContextPart::allowed_values()
                ),
            ));
        }
        errors
    }
}

impl MemoryEngine {
    pub async fn assemble_context_for(
        &self,
        principal: &Principal,
        request: AssembleContextRequest,
    ) -> Result<AssembledContext, EngineError> {
        principal.authorize(Operation::AssembleContext)?;
        let errors = request.limit_errors();
        if !errors.is_empty() {
            return Err(InvalidInput(errors).into());
        }
        let started = Instant::now();
        let mut request = request;
        request.user_id = principal.end_user_subject(request.user_id.take(), "user_id")?;
        let run = self
            .run_to_link(
                principal,
                request.run_id,
                &[request.user_id.as_ref().map(ExternalId::as_str)],
            )
            .await?;
        let wanted = |part: ContextPart| {
            request
                .include
                .as_ref()
                .is_none_or(|include| include.contains(&part))
        };
        let mut sections = Vec::new();
        let mut omitted_parts = Vec::new();
        let mut timings = Vec::new();
        let mut context_id = uuid::Uuid::now_v7();
        let mut profile = None;
        let mut pending = None;
        let mut procedure_ids = Vec::new();

        if wanted(ContextPart::Procedures) {
            let stage = Instant::now();
            let procedures = self
                .storage
                .always_procedures(
                    principal.memory_scope(),
                    request.user_id.as_ref(),
                    request.agent_id.as_ref(),
                    crate::MAX_ALWAYS_PROCEDURES,
                )
                .await?;
            procedure_ids = procedures.iter().map(|memory| memory.id).collect();
            sections.push(ContextSection {
                part: ContextPart::Procedures,
                header: "Procedures (always follow):".to_string(),
                lines: procedures
                    .iter()
                    .map(|memory| {
                        (
                            memory_line(memory, true),
                            ContextSource::Memory {
                                memory_id: memory.id,
                                version: memory.version,
                                score: None,
                            },
                        )
                    })
                    .collect(),
                reversed: false,
                header_always: false,
            });
            timings.push(("procedures", stage.elapsed().as_micros() as u64));
        }

        if wanted(ContextPart::State) {
            let stage = Instant::now();
            match &request.session_id {
                None => omitted_parts.push((ContextPart::State, "needs a session_id".to_string())),
                Some(session_id) => {
                    let entries = self
                        .storage
                        .session_state_entries(
                            principal.memory_scope(),
                            session_id.as_str(),
                            request.user_id.as_ref().map(ExternalId::as_str),
                        )
                        .await?;
                    sections.push(ContextSection {
                        part: ContextPart::State,
                        header: "Session state:".to_string(),
                        lines: entries
                            .into_iter()
                            .take(MAX_CONTEXT_STATE_VALUES)
                            .map(|entry| {
                                (
                                    format!("- {}: {}", entry.key, entry.value),
                                    ContextSource::State {
                                        key: entry.key,
                                        version: entry.version,
                                    },
                                )
                            })
                            .collect(),
                        reversed: false,
                        header_always: false,
                    });
                }
            }
            timings.push(("state", stage.elapsed().as_micros() as u64));
        }

        if wanted(ContextPart::Memories) {
            let stage = Instant::now();
            match request.query.clone().or_else(|| request.task.clone()) {
                None => omitted_parts.push((
                    ContextPart::Memories,
                    "needs a query or a task to recall memories for".to_string(),
                )),
                Some(query) => {
                    let search = SearchMemoriesRequest {
                        request: SearchRequest {
                            query,
                            // The end-user's memories of every agent: what one agent learnt
                            // serves the next (procedures are the agent's own, above); the
                            // session only boosts.
                            subject: SubjectFilter {
                                user_id: request.user_id.clone(),
                                agent_id: None,
                                session_id: request.session_id.clone(),
                            },
                            retrieval: RetrievalMode::default(),
                            top_k: engram_core::limits::MAX_TOP_K,
                            // Its own memories count as its own under the project's rule
                            // on other agents' unverified conclusions.
                            for_agent: request.agent_id.clone(),
                            ..SearchRequest::default()
                        },
                        caller_tuning: SearchTuning::default(),
                        profile: None,
                        context_tokens: None,
                        trace_id: request.trace_id.clone(),
                        run_id: request.run_id,
                    };
                    let (answer, recall) = self.recall(principal, search).await?;
                    context_id = answer.outcome.recall_id;
                    profile = Some(answer.profile.clone());
                    pending = recall;
                    sections.push(ContextSection {
                        part: ContextPart::Memories,
                        header: "Memories (most relevant first):".to_string(),
                        lines: answer
                            .outcome
                            .results
                            .iter()
                            .filter(|hit| !procedure_ids.contains(&hit.memory.id))
                            .map(|hit| {
                                (
                                    memory_line(&hit.memory, false),
                                    ContextSource::Memory {
                                        memory_id: hit.memory.id,
                                        version: hit.memory.version,
                                        score: Some(hit.score),
                                    },
                                )
                            })
                            .collect(),
                        reversed: false,
                        header_always: false,
                    });
                }
            }
            timings.push(("memories", stage.elapsed().as_micros() as u64));
        }

        if wanted(ContextPart::RecentMessages) {
            let stage = Instant::now();
            match &request.session_id {
                None => omitted_parts.push((
                    ContextPart::RecentMessages,
                    "needs a session_id".to_string(),
                )),
                Some(session_id) => {
                    let messages = self
                        .storage
                        .latest_session_messages(
                            principal.memory_scope(),
                            session_id.as_str(),
                            request.user_id.as_ref().map(ExternalId::as_str),
                            MAX_CONTEXT_MESSAGES,
                        )
                        .await?;
                    sections.push(ContextSection {
                        part: ContextPart::RecentMessages,
                        header: "Recent messages (oldest first):".to_string(),
                        lines: messages
                            .into_iter()
                            .map(|message| {
                                (
                                    format!(
                                        "- {}: {}",
                                        message.role,
                                        message.content.replace('\n', " ")
                                    ),
                                    ContextSource::Message {
                                        message_id: message.id,
                                    },
                                )
                            })
                            .collect(),
                        reversed: true,
                        header_always: false,
                    });
                }
            }
            timings.push(("recent_messages", stage.elapsed().as_micros() as u64));
        }

        if wanted(ContextPart::Summary) {
            let stage = Instant::now();
            match (&self.llm, &request.session_id) {
                (None, _) => omitted_parts.push((
                    ContextPart::Summary,
                    "needs an LLM to summarise the session; none is configured".to_string(),
                )),
                (Some(_), None) => {
                    omitted_parts.push((ContextPart::Summary, "needs a session_id".to_string()))
                }
                (Some(llm), Some(session_id)) => {
                    match self
                        .summarize_session(principal, llm, session_id, request.user_id.as_ref())
                        .await?
                    {
                        Ok(summary) => sections.push(ContextSection {
                            part: ContextPart::Summary,
                            header: "Session summary:".to_string(),
                            lines: vec![(
                                format!("- {}", summary.replace('\n', " ")),
                                ContextSource::Summary,
                            )],
                            reversed: false,
                            header_always: false,
                        }),
                        Err(reason) => omitted_parts.push((ContextPart::Summary, reason)),
                    }
                }
            }
            timings.push(("summary", stage.elapsed().as_micros() as u64));
        }

        let stage = Instant::now();
        let packed = pack_sections(sections, request.token_budget, |text| {
            self.embedder.count_tokens(text)
        });
        timings.push(("pack", stage.elapsed().as_micros() as u64));
        let parts: Vec<AssembledPart> = packed
            .sections
            .into_iter()
            .map(|section| AssembledPart {
                part: section.part,
                tokens: section.tokens,
                sources: section.sources,
                omitted: section.omitted,
            })
            .collect();
        let packed_memories: Vec<RecalledMemory> = parts
            .iter()
            .filter(|part| part.part == ContextPart::Memories)
            .flat_map(|part| part.sources.iter())
            .filter_map(|source| match source {
                ContextSource::Memory {
                    memory_id,
                    version,
                    score,
                } => Some(RecalledMemory {
                    memory_id: *memory_id,
                    version: *version,
                    score: *score,
                }),
                _ => None,
            })
            .collect();
        timings.push(("total", started.elapsed().as_micros() as u64));
        let recorded = match pending {
            Some(pending) => {
                let search_timings = crate::SearchTimings {
                    total_micros: started.elapsed().as_micros() as u64,
                    ..Default::default()
                };
                let event = pending.into_event(
                    context_id,
                    &packed_memories,
                    &search_timings,
                    RECALL_PURPOSE_CONTEXT,
                );
                self.recall_events.record(principal.scope(), event);
                true
            }
            None => false,
        };
        let assembled = AssembledContext {
            context_id,
            text: packed.text,
            tokens: packed.tokens,
            token_budget: request.token_budget,
            parts,
            omitted_parts,
            timings,
            profile,
        };
        if let Some(run) = &run {
            let uses = if recorded {
                Vec::new()
            } else {
                uses_of(&packed_memories, MemoryUseKind::Packed, context_id, run)
            };
            self.record_linked_step(
                principal,
                run,
                RunStepType::Context,
                context_step_detail(&assembled),
                uses,
            )
            .await;
        }
        Ok(assembled)
    }
}

/// Messages of a session a summary reads at most (the newest).
const MAX_SUMMARISED_MESSAGES: u64 = 200;

impl MemoryEngine {
    /// The LLM's summary of the session's newest messages in the end-user's namespace, or why
    /// there is none (no messages, a spend limit reached: the rest of the context is still
    /// built). The call is admitted against the project's spend limits, recorded and billed
    /// like every LLM call.
    async fn summarize_session(
        &self,
        principal: &Principal,
        llm: &crate::llm::ChatModel,
        session_id: &ExternalId,
        user_id: Option<&ExternalId>,
    ) -> Result<Result<String, String>, EngineError> {
        let mut messages = self
            .storage
            .latest_session_messages(
                principal.memory_scope(),
                session_id.as_str(),
                user_id.map(ExternalId::as_str),
                MAX_SUMMARISED_MESSAGES,
            )
            .await?;
        if messages.is_empty() {
            return Ok(Err("the session has no messages to summarise".to_string()));
        }
        messages.reverse();
        let scope = principal.scope();
        let admitted = self
            .spend_guard
            .admit(
                scope,
                &[engram_core::usage::PlannedSpend {
                    unit: engram_core::usage::UsageUnit::LlmTokensIn,
                    quantity: 1,
                }],
            )
            .await;
        if let Err(EngineError::LimitReached { reached, .. }) = &admitted {
            return Ok(Err(format!(
                "the project's {} is reached: no LLM call was made",
                reached.limit
            )));
        }
        admitted?;
        let conversation: Vec<String> = messages
            .iter()
            .map(|message| format!("{}: {}", message.role, message.content.replace('\n', " ")))
            .collect();
        let attribution = principal
            .usage_attribution()
            .for_subject(user_id.map(ExternalId::as_str), None);
        let mut spent = crate::derivation::MessageDerivation::default();
        let answer = self
            .call_llm(
                scope,
                llm,
                "summarize_session",
                &llm.prompts().summarize_session,
                &conversation.join("\n"),
                &attribution,
                &mut spent,
            )
            .await?;
        let summary = crate::llm::json_in_answer(&answer)
            .ok()
            .and_then(|value| value.get("summary")?.as_str().map(str::to_string))
            .map(|summary| summary.trim().to_string())
            .filter(|summary| !summary.is_empty())
            .ok_or_else(|| "the LLM found nothing in the session worth summarising".to_string());
        Ok(summary)
    }
}

/// What a run keeps of a context: ids, versions, keys and token counts, never text.
fn context_step_detail(context: &AssembledContext) -> serde_json::Value {
    let parts: Vec<serde_json::Value> = context
        .parts
        .iter()
        .map(|part| {
            serde_json::json!({
                "part": part.part.as_str(),
                "tokens": part.tokens,
                "omitted": part.omitted,
                "items": part.sources.iter().map(source_json).collect::<Vec<_>>(),
            })
        })
        .collect();
    serde_json::json!({
        "context_id": context.context_id.to_string(),
        "tokens": context.tokens,
        "token_budget": context.token_budget,
        "parts": parts,
    })
}

/// A line's provenance as the API and a run's step show it.
pub fn source_json(source: &ContextSource) -> serde_json::Value {
    match source {
        ContextSource::Memory {
            memory_id,
            version,
            score,
        } => {
            let mut value = serde_json::json!({
                "memory_id": memory_id.to_string(),
                "version": version,
            });
            if let Some(score) = score {
                value["score"] = serde_json::json!(score);
            }
            value
        }
        ContextSource::Message { message_id } => {
            serde_json::json!({ "message_id": message_id.to_string() })
        }
        ContextSource::State { key, version } => {
            serde_json::json!({ "key": key, "version": version })
        }
        ContextSource::Summary => serde_json::json!({ "summary": true }),
    }
}
