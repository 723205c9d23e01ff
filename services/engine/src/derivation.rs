//! Memories from conversation: candidates drawn from a batch of messages (by the LLM when
//! one is configured, else each message verbatim as an episodic memory), compared with the
//! similar memories of the same end-user, reconciled, and applied with history and reasons.

use crate::EngineError;
use crate::llm::{ChatModel, LlmError, json_in_answer};
use crate::pipeline::{MemoryEdit, MemoryEngine};
use chrono::Utc;
use engram_core::audit::Actor;
use engram_core::conversation::{
    CandidateMemory, MessageRole, ProposedCandidate, ProposedDecision, RELATED_PER_CANDIDATE,
    RELATED_SIMILARITY, ReconcileAction, ReconcileDecision, RelatedMemory, reconcile_candidate,
};
use engram_core::memory::content_digest;
use engram_core::usage::{PlannedSpend, UsageUnit};
use engram_core::{ExternalId, Memory, MemoryId, MemoryKind, NewMemory, ProjectScope};
use engram_index::VectorQuery;
use engram_storage::conversations::{LlmCallRecord, SessionMessage};
use engram_storage::{IdempotencyClaim, InsertOutcome, MemoryDraft};
use serde::Serialize;
use std::collections::{BTreeMap, HashSet};
use uuid::Uuid;

/// What to derive from, and for whom.
pub struct DerivationInput<'a> {
    /// The new messages (one call's batch), oldest first.
    pub messages: &'a [SessionMessage],
    /// Earlier messages of the session, shown to the LLM as context only.
    pub earlier: &'a [SessionMessage],
    /// Who is billed for LLM calls: the requester's credential and channel, with the batch's
    /// end-user and agent.
    pub attribution: &'a engram_core::usage::UsageAttribution,
    /// The batch, so a retried derivation stores its memories once.
    pub batch_id: Uuid,
    /// Whether the credential that asked holds `memories:delete`: only then is an LLM's
    /// DELETE applied; otherwise it is recorded in the memory's history as a proposal.
    pub may_delete: bool,
    /// Kept on every memory written (the caller's own metadata; the derivation's keys win).
    pub metadata: &'a serde_json::Map<String, serde_json::Value>,
    /// Given to every memory written.
    pub categories: &'a [String],
    /// Every memory written expires then, unless the LLM set an earlier expiry.
    pub expires_at: Option<chrono::DateTime<Utc>>,
    /// Who among the project's agents reads what is derived; `None`: the project's default.
    pub visibility: Option<engram_core::Visibility>,
    /// The team of agents what is derived is shared with; `None`: as `visibility` says.
    pub shared_with: Option<ExternalId>,
}

/// What a derivation of `messages` messages may spend, admitted before it runs: a memory
/// per message, embedded tokens and, with an LLM, its tokens (known only after it answered:
/// a quota on them refuses once it is used up).
pub(crate) fn planned_derivation_spend(messages: usize, with_llm: bool) -> Vec<PlannedSpend> {
    let mut planned = vec![
        PlannedSpend {
            unit: UsageUnit::MemoriesWritten,
            quantity: messages as u64,
        },
        PlannedSpend {
            unit: UsageUnit::TokensEmbedded,
            quantity: 1,
        },
    ];
    if with_llm {
        planned.extend([
            PlannedSpend {
                unit: UsageUnit::LlmTokensIn,
                quantity: 1,
            },
            PlannedSpend {
                unit: UsageUnit::LlmTokensOut,
                quantity: 1,
            },
        ]);
    }
    planned
}

/// One applied decision, as the API reports it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DerivedChange {
    pub action: ReconcileAction,
    /// The memory written (ADD, SUPERSEDE) or changed (UPDATE, DELETE); for NOOP the memory
    /// that already says it, when there is one.
    pub memory_id: Option<MemoryId>,
    /// The memory superseded (SUPERSEDE).
    pub replaces: Option<MemoryId>,
    pub content: Option<String>,
    pub reason: String,
}

/// Everything a derivation did and spent.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct MessageDerivation {
    /// `llm` or `verbatim`.
    pub method: String,
    pub changes: Vec<DerivedChange>,
    /// Candidates the LLM proposed that were dropped, with why.
    pub dropped: Vec<String>,
    pub llm_calls: u32,
    pub llm_tokens_in: u64,
    pub llm_tokens_out: u64,
    pub memories_written: u64,
    pub tokens_embedded: u64,
}

/// A message in the transcript the LLM reads.
fn transcript_line(message: &SessionMessage, earlier: bool) -> String {
    let speaker = match &message.name {
        Some(name) => format!("{} ({name})", message.role),
        None => message.role.clone(),
    };
    format!(
        "{}[{}] {speaker}: {}",
        if earlier { "earlier " } else { "" },
        message.sent_at.format("%Y-%m-%d %H:%M UTC"),
        message.content
    )
}

fn external(value: Option<&str>) -> Option<ExternalId> {
    value.and_then(|text| ExternalId::parse(text).ok())
}

impl MemoryEngine {
    /// Derive memories from a batch of messages and apply the decisions.
    pub(crate) async fn derive_memories(
        &self,
        scope: &ProjectScope,
        input: DerivationInput<'_>,
        actor: &Actor,
    ) -> Result<MessageDerivation, EngineError> {
        let Some(first) = input.messages.first() else {
            return Ok(MessageDerivation::default());
        };
        let user_id = first.user_id.clone();
        let agent_id = first.agent_id.clone();
        // What is derived is as visible as asked (shared with a team the project names, when
        // it names one), else as the project's default; a memory of no agent is shared
        // (private is an agent's). Storage keeps a replacement of a private memory private.
        if let Some(team) = &input.shared_with {
            let settings = self.spaces.settings_cache().of(scope).await?;
            if let Some(message) =
                crate::pipeline::team_error(team, input.visibility, &settings.settings.agent_teams)
            {
                return Err(engram_core::InvalidInput(vec![engram_core::FieldError::new(
                    "shared_with",
                    message,
                )])
                .into());
            }
        }
        let visibility = match (input.visibility, &agent_id) {
            _ if input.shared_with.is_some() => engram_core::Visibility::Shared,
            (_, None) => engram_core::Visibility::Shared,
            (Some(visibility), Some(_)) => visibility,
            (None, Some(_)) => {
                self.spaces
                    .settings_cache()
                    .of(scope)
                    .await?
                    .settings
                    .default_visibility
            }
        };
        // Before any LLM spend: a project that sends its own vectors cannot be embedded for.
        let (space, embedder) = self.project_embedder(scope).await?;
        let mut derivation = MessageDerivation::default();
        let llm = self.llm.clone();
        let candidates: Vec<(CandidateMemory, Option<&SessionMessage>)> = match &llm {
            Some(llm) => {
                derivation.method = "llm".to_string();
                self.extract_candidates(scope, llm, &input, &mut derivation)
                    .await?
                    .into_iter()
                    .map(|candidate| (candidate, None))
                    .collect()
            }
            None => {
                derivation.method = "verbatim".to_string();
                input
                    .messages
                    .iter()
                    .filter(|message| message.role != MessageRole::System.as_str())
                    .map(|message| {
                        let role = message
                            .role
                            .parse::<MessageRole>()
                            .unwrap_or(MessageRole::User);
                        (
                            CandidateMemory {
                                kind: MemoryKind::Episodic,
                                content: message.content.clone(),
                                key: message.memory_key.clone(),
                                confidence: 1.0,
                                expires_at: None,
                                source: role.verbatim_source(),
                            },
                            Some(message),
                        )
                    })
                    .collect()
            }
        };
        if candidates.is_empty() {
            return Ok(derivation);
        }
        let mut contents: Vec<String> = candidates
            .iter()
            .map(|(candidate, _)| candidate.content.clone())
            .collect();
        self.governance
            .redact_personal_data(scope, &mut contents, |index| {
                format!("candidates[{index}].content")
            })
            .await?;
        let counted = embedder.embed_counted(contents.clone()).await?;
        if counted.len() != contents.len() {
            return Err(EngineError::Internal(
                "embedder returned a different number of vectors".to_string(),
            ));
        }
        derivation.tokens_embedded += counted.iter().map(|(_, tokens)| tokens).sum::<u64>();
        let vectors: Vec<Vec<f32>> = counted.into_iter().map(|(vector, _)| vector).collect();
        let candidates: Vec<(CandidateMemory, Option<&SessionMessage>)> = candidates
            .into_iter()
            .zip(&contents)
            .map(|((mut candidate, message), content)| {
                candidate.content.clone_from(content);
                (candidate, message)
            })
            .collect();

        // The stored memories each candidate resembles, labelled once across the batch.
        let mut labels: BTreeMap<MemoryId, String> = BTreeMap::new();
        let mut related_per_candidate: Vec<Vec<RelatedMemory>> = Vec::new();
        for vector in &vectors {
            let related = self
                .related_memories(scope, user_id.as_deref(), agent_id.as_deref(), vector)
                .await?;
            let labelled = related
                .into_iter()
                .map(|(memory, similarity)| {
                    let next = labels.len() + 1;
                    let label = labels
                        .entry(memory.id)
                        .or_insert_with(|| format!("m{next}"))
                        .clone();
                    RelatedMemory {
                        label,
                        memory_id: memory.id,
                        content: memory.content,
                        key: memory.key.map(ExternalId::into_string),
                        similarity,
                        locked: memory.immutable || memory.legal_hold,
                    }
                })
                .collect();
            related_per_candidate.push(labelled);
        }

        let proposals = match &llm {
            Some(llm) => {
                self.propose_decisions(
                    scope,
                    llm,
                    &input,
                    &candidates,
                    &related_per_candidate,
                    &mut derivation,
                )
                .await
            }
            None => BTreeMap::new(),
        };

        // Decide, then apply: inserts together (one transaction, once per batch however
        // often the task is retried), updates and deletes one by one.
        let mut drafts: Vec<MemoryDraft> = Vec::new();
        let mut draft_change_index: Vec<usize> = Vec::new();
        let mut seen_in_batch: HashSet<String> = HashSet::new();
        for (index, ((candidate, message), vector)) in candidates.iter().zip(vectors).enumerate() {
            let digest = content_digest(candidate.content.trim());
            let decision = if seen_in_batch.insert(digest) {
                reconcile_candidate(
                    candidate,
                    &related_per_candidate[index],
                    proposals.get(&index),
                )
            } else {
                ReconcileDecision {
                    action: ReconcileAction::Noop,
                    target: None,
                    content: None,
                    reason: "said twice in the same messages".to_string(),
                }
            };
            match decision.action {
                ReconcileAction::Add | ReconcileAction::Supersede => {
                    let mut metadata = input.metadata.clone();
                    metadata.insert("derived_from".into(), "messages".into());
                    metadata.insert("batch_id".into(), input.batch_id.to_string().into());
                    if let Some(message) = message {
                        metadata.insert("message_id".into(), message.id.to_string().into());
                        metadata.insert("role".into(), message.role.clone().into());
                        metadata.insert("sent_at".into(), message.sent_at.to_rfc3339().into());
                    }
                    let new_memory = NewMemory {
                        user_id: external(user_id.as_deref()),
                        agent_id: external(agent_id.as_deref()),
                        session_id: external(Some(first.session_id.as_str())),
                        kind: candidate.kind,
                        key: candidate
                            .key
                            .as_deref()
                            .and_then(|key| ExternalId::parse(key).ok()),
                        content: decision
                            .content
                            .clone()
                            .unwrap_or_else(|| candidate.content.clone()),
                        metadata,
                        categories: input.categories.to_vec(),
                        source: candidate.source,
                        confidence: candidate.confidence,
                        expires_at: match (candidate.expires_at, input.expires_at) {
                            (Some(own), Some(asked)) => Some(own.min(asked)),
                            (own, asked) => own.or(asked),
                        },
                        // What was said happened when it was said (never later than now).
                        occurred_at: message.map(|message| message.sent_at.min(chrono::Utc::now())),
                        visibility: Some(visibility),
                        shared_with: input.shared_with.clone(),
                    };
                    drafts.push(MemoryDraft {
                        memory: new_memory,
                        embedding: vector,
                        embedding_model: space.model_id.clone(),
                        embedding_generation: space.generation,
                        supersedes: decision.target,
                        reason: Some(decision.reason.clone()),
                    });
                    draft_change_index.push(derivation.changes.len());
                    derivation.changes.push(DerivedChange {
                        action: decision.action,
                        memory_id: None,
                        replaces: decision.target,
                        content: decision.content,
                        reason: decision.reason,
                    });
                }
                ReconcileAction::Update => {
                    let target = decision.target.ok_or_else(|| {
                        EngineError::Internal("an update without a target".to_string())
                    })?;
                    let change = self
                        .apply_update(scope, target, &decision, actor, &mut derivation)
                        .await?;
                    derivation.changes.push(change);
                }
                ReconcileAction::Delete => {
                    let target = decision.target.ok_or_else(|| {
                        EngineError::Internal("a delete without a target".to_string())
                    })?;
                    if !input.may_delete {
                        derivation.changes.push(
                            self.propose_deletion(scope, target, &decision.reason, actor)
                                .await?,
                        );
                        continue;
                    }
                    let outcome = self
                        .delete_memory_with_reason(scope, target, Some(&decision.reason), actor)
                        .await;
                    derivation.changes.push(match outcome {
                        Ok(()) | Err(EngineError::NotFound(_)) => DerivedChange {
                            action: ReconcileAction::Delete,
                            memory_id: Some(target),
                            replaces: None,
                            content: None,
                            reason: decision.reason,
                        },
                        Err(EngineError::Locked(why)) => DerivedChange {
                            action: ReconcileAction::Noop,
                            memory_id: Some(target),
                            replaces: None,
                            content: None,
                            reason: format!("not deleted: {why}"),
                        },
                        Err(other) => return Err(other),
                    });
                }
                ReconcileAction::Noop => derivation.changes.push(DerivedChange {
                    action: ReconcileAction::Noop,
                    memory_id: decision.target,
                    replaces: None,
                    content: None,
                    reason: decision.reason,
                }),
            }
        }
        if drafts.is_empty() {
            return Ok(derivation);
        }
        let claim = IdempotencyClaim {
            key: format!("derive:{}", input.batch_id),
            // The batch alone: a retry whose LLM answered differently still replays the first.
            request_fingerprint: content_digest(&input.batch_id.to_string()),
        };
        let render = |memories: &[Memory]| {
            let ids: Vec<String> = memories
                .iter()
                .map(|memory| memory.id.to_string())
                .collect();
            (201, serde_json::json!(ids).to_string())
        };
        // Derived memories count against the memory limits like written ones; one that
        // replaces another adds nothing.
        let adding: Vec<engram_core::NewMemory> = drafts
            .iter()
            .filter(|draft| draft.supersedes.is_none())
            .map(|draft| draft.memory.clone())
            .collect();
        self.admit_under_memory_limits(scope, &adding, Some(&claim))
            .await?;
        let stored_ids: Vec<Option<MemoryId>> = match self
            .storage
            .insert_memories(scope, drafts, actor, Some(claim), render)
            .await
            .map_err(|error| self.after_write_error(scope, error))?
        {
            InsertOutcome::Inserted { memories, touched } => {
                derivation.memories_written += memories.len() as u64;
                self.evict_over_memory_limits(
                    scope,
                    &crate::pipeline::written_subjects(&memories),
                    actor,
                )
                .await;
                self.index_after_write(scope, &touched, true).await;
                memories.into_iter().map(|memory| Some(memory.id)).collect()
            }
            // Stored once and deleted since: nothing to point at.
            InsertOutcome::AnswerErased => Vec::new(),
            InsertOutcome::Replayed { body, .. } => serde_json::from_str::<Vec<String>>(&body)
                .unwrap_or_default()
                .iter()
                .map(|id| id.parse().ok())
                .collect(),
        };
        for (change_index, memory_id) in draft_change_index.into_iter().zip(stored_ids) {
            derivation.changes[change_index].memory_id = memory_id;
        }
        Ok(derivation)
    }

    /// Apply a natural-language correction to one memory with the LLM (`None` without an
    /// LLM: the feedback is only kept). The model may rewrite the memory, delete it, or
    /// leave it; its reason goes into the history, prefixed so a reviewer sees where it
    /// came from. Returns the change and the tokens it embedded.
    pub(crate) async fn correct_memory(
        &self,
        scope: &ProjectScope,
        memory: &Memory,
        correction: &str,
        attribution: &engram_core::usage::UsageAttribution,
        may_delete: bool,
        actor: &Actor,
    ) -> Result<Option<(DerivedChange, u64)>, EngineError> {
        let Some(llm) = self.llm.clone() else {
            return Ok(None);
        };
        let mut spent = MessageDerivation::default();
        let prompt = format!(
            "Stored memory: {}\n\nCorrection: {correction}",
            memory.content
        );
        let reply = self
            .call_llm(
                scope,
                &llm,
                "correction",
                &llm.prompts().correct_memory,
                &prompt,
                attribution,
                &mut spent,
            )
            .await?;
        let answer = json_in_answer(&reply).map_err(llm_problem)?;
        let text_of = |field: &str| {
            answer[field]
                .as_str()
                .map(str::trim)
                .filter(|text| !text.is_empty())
                .map(str::to_string)
        };
        let reason = format!(
            "correction from feedback: {}",
            text_of("reason").unwrap_or_else(|| "no reason given".to_string())
        );
        let action = text_of("action").unwrap_or_default().to_ascii_uppercase();
        let change = match (action.as_str(), text_of("content")) {
            ("UPDATE", Some(content)) if content != memory.content => {
                let decision = ReconcileDecision {
                    action: ReconcileAction::Update,
                    target: Some(memory.id),
                    content: Some(content),
                    reason,
                };
                self.apply_update(scope, memory.id, &decision, actor, &mut spent)
                    .await?
            }
            ("DELETE", _) if !may_delete => {
                self.propose_deletion(scope, memory.id, &reason, actor)
                    .await?
            }
            ("DELETE", _) => {
                match self
                    .delete_memory_with_reason(scope, memory.id, Some(&reason), actor)
                    .await
                {
                    Ok(()) => DerivedChange {
                        action: ReconcileAction::Delete,
                        memory_id: Some(memory.id),
                        replaces: None,
                        content: None,
                        reason,
                    },
                    Err(EngineError::Locked(why)) => DerivedChange {
                        action: ReconcileAction::Noop,
                        memory_id: Some(memory.id),
                        replaces: None,
                        content: None,
                        reason: format!("not deleted: {why}"),
                    },
                    Err(other) => return Err(other),
                }
            }
            _ => DerivedChange {
                action: ReconcileAction::Noop,
                memory_id: Some(memory.id),
                replaces: None,
                content: None,
                reason,
            },
        };
        Ok(Some((change, spent.tokens_embedded)))
    }

    /// A DELETE the caller may not apply: recorded in the memory's history (`delete_proposed`,
    /// with the reason) and reported as a change that did not happen.
    async fn propose_deletion(
        &self,
        scope: &ProjectScope,
        memory_id: MemoryId,
        reason: &str,
        actor: &Actor,
    ) -> Result<DerivedChange, EngineError> {
        let proposal = format!(
            "delete proposed, not applied (the credential lacks memories:delete): {reason}"
        );
        match self
            .storage
            .record_delete_proposal(scope, memory_id, &proposal, actor)
            .await
        {
            Ok(()) | Err(engram_storage::StorageError::NotFound(_)) => Ok(DerivedChange {
                action: ReconcileAction::Noop,
                memory_id: Some(memory_id),
                replaces: None,
                content: None,
                reason: proposal,
            }),
            Err(other) => Err(other.into()),
        }
    }

    async fn apply_update(
        &self,
        scope: &ProjectScope,
        target: MemoryId,
        decision: &ReconcileDecision,
        actor: &Actor,
        derivation: &mut MessageDerivation,
    ) -> Result<DerivedChange, EngineError> {
        let content = decision.content.clone().unwrap_or_default();
        let edit = MemoryEdit {
            content: Some(content.clone()),
            reason: Some(decision.reason.clone()),
            ..Default::default()
        };
        match self
            .edit_memory_with_vector(scope, target, edit, None, None, actor)
            .await
        {
            Ok(edited) => {
                derivation.tokens_embedded += edited.tokens_embedded;
                Ok(DerivedChange {
                    action: ReconcileAction::Update,
                    memory_id: Some(target),
                    replaces: None,
                    content: Some(content),
                    reason: decision.reason.clone(),
                })
            }
            Err(EngineError::Locked(why)) => Ok(DerivedChange {
                action: ReconcileAction::Noop,
                memory_id: Some(target),
                replaces: None,
                content: None,
                reason: format!("not updated: {why}"),
            }),
            Err(EngineError::NotFound(_)) => Ok(DerivedChange {
                action: ReconcileAction::Noop,
                memory_id: Some(target),
                replaces: None,
                content: None,
                reason: "not updated: the memory was deleted meanwhile".to_string(),
            }),
            Err(other) => Err(other),
        }
    }

    /// Active memories of the same end-user and agent that resemble `vector`, most similar
    /// first, down to [`RELATED_SIMILARITY`].
    async fn related_memories(
        &self,
        scope: &ProjectScope,
        user_id: Option<&str>,
        agent_id: Option<&str>,
        vector: &[f32],
    ) -> Result<Vec<(Memory, f32)>, EngineError> {
        let hits = self
            .index
            .search(
                scope,
                VectorQuery {
                    vector: vector.to_vec(),
                    limit: RELATED_PER_CANDIDATE * 2,
                    user_id: user_id.map(str::to_string),
                    agent_id: agent_id.map(str::to_string),
                    session_id: None,
                    kinds: Vec::new(),
                    filter: None,
                },
            )
            .await?;
        let ids: Vec<MemoryId> = hits.iter().map(|hit| hit.memory_id).collect();
        let mut active = self.storage.active_memories_by_id(scope, &ids).await?;
        let mut related = Vec::new();
        for hit in hits {
            // The index filters on the user when one is given; a batch without one sees
            // only memories without one, never another end-user's.
            let Some(memory) = active.remove(&hit.memory_id) else {
                continue;
            };
            let similarity =
                engram_core::embedding::comparable_similarity(&memory.embedding_model, hit.score);
            if similarity < RELATED_SIMILARITY {
                continue;
            }
            if user_id.is_none() && memory.user_id.is_some() {
                continue;
            }
            related.push((memory, similarity.clamp(0.0, 1.0)));
            if related.len() == RELATED_PER_CANDIDATE {
                break;
            }
        }
        Ok(related)
    }

    /// Ask the LLM for candidates; a call that fails is recorded and fails the derivation
    /// (the task is retried or reported), a candidate that fails its checks is dropped.
    async fn extract_candidates(
        &self,
        scope: &ProjectScope,
        llm: &ChatModel,
        input: &DerivationInput<'_>,
        derivation: &mut MessageDerivation,
    ) -> Result<Vec<CandidateMemory>, EngineError> {
        let mut transcript = String::new();
        for message in input.earlier {
            transcript.push_str(&transcript_line(message, true));
            transcript.push('\n');
        }
        for message in input.messages {
            transcript.push_str(&transcript_line(message, false));
            transcript.push('\n');
        }
        let user_prompt = format!(
            "Today is {}.\n\nConversation:\n{transcript}",
            Utc::now().format("%Y-%m-%d")
        );
        let reply = self
            .call_llm(
                scope,
                llm,
                "extraction",
                &llm.prompts().extract_memories,
                &user_prompt,
                input.attribution,
                derivation,
            )
            .await?;
        let value = json_in_answer(&reply).map_err(llm_problem)?;
        let proposed: Vec<ProposedCandidate> = value
            .get("memories")
            .cloned()
            .map(serde_json::from_value)
            .transpose()
            .map_err(|error| llm_problem(LlmError::Malformed(error.to_string())))?
            .unwrap_or_default();
        let now = Utc::now();
        let mut candidates = Vec::new();
        for (index, proposal) in proposed.into_iter().enumerate() {
            match proposal.check(now) {
                Ok(candidate) => candidates.push(candidate),
                Err(why) => derivation.dropped.push(format!("memories[{index}]: {why}")),
            }
        }
        Ok(candidates)
    }

    /// Ask the LLM to reconcile the candidates that resemble stored memories. Its failure
    /// is not fatal: the rules still apply and new facts are added.
    async fn propose_decisions(
        &self,
        scope: &ProjectScope,
        llm: &ChatModel,
        input: &DerivationInput<'_>,
        candidates: &[(CandidateMemory, Option<&SessionMessage>)],
        related_per_candidate: &[Vec<RelatedMemory>],
        derivation: &mut MessageDerivation,
    ) -> BTreeMap<usize, ProposedDecision> {
        let contested: Vec<usize> = related_per_candidate
            .iter()
            .enumerate()
            .filter(|(index, related)| !related.is_empty() && candidates[*index].0.key.is_none())
            .map(|(index, _)| index)
            .collect();
        if contested.is_empty() {
            return BTreeMap::new();
        }
        let mut prompt = String::from("Candidates:\n");
        for index in &contested {
            prompt.push_str(&format!("{index}. {}\n", candidates[*index].0.content));
        }
        prompt.push_str("\nStored memories:\n");
        let mut shown: BTreeMap<&str, &RelatedMemory> = BTreeMap::new();
        for index in &contested {
            for related in &related_per_candidate[*index] {
                shown.insert(related.label.as_str(), related);
            }
        }
        let mut shown: Vec<&RelatedMemory> = shown.into_values().collect();
        shown.sort_by_key(|related| related.label[1..].parse::<usize>().unwrap_or(usize::MAX));
        for related in shown {
            prompt.push_str(&format!("{}: {}\n", related.label, related.content));
        }
        let reply = match self
            .call_llm(
                scope,
                llm,
                "reconciliation",
                &llm.prompts().reconcile_memories,
                &prompt,
                input.attribution,
                derivation,
            )
            .await
        {
            Ok(reply) => reply,
            Err(error) => {
                tracing::warn!(%error, "reconciliation call failed; applying the rules alone");
                return BTreeMap::new();
            }
        };
        let decisions: Vec<ProposedDecision> = json_in_answer(&reply)
            .ok()
            .and_then(|value| value.get("decisions").cloned())
            .and_then(|decisions| serde_json::from_value(decisions).ok())
            .unwrap_or_default();
        decisions
            .into_iter()
            .filter(|decision| contested.contains(&decision.candidate))
            .map(|decision| (decision.candidate, decision))
            .collect()
    }

    /// One LLM call, recorded (model, purpose, tokens) and billed whether or not it worked.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn call_llm(
        &self,
        scope: &ProjectScope,
        llm: &ChatModel,
        purpose: &str,
        system_prompt: &str,
        user_prompt: &str,
        attribution: &engram_core::usage::UsageAttribution,
        derivation: &mut MessageDerivation,
    ) -> Result<String, EngineError> {
        let started = std::time::Instant::now();
        let outcome = llm.complete_json(system_prompt, user_prompt).await;
        let (tokens_in, tokens_out, succeeded) = match &outcome {
            Ok(reply) => (reply.tokens_in, reply.tokens_out, true),
            Err(_) => (0, 0, false),
        };
        derivation.llm_calls += 1;
        derivation.llm_tokens_in += tokens_in;
        derivation.llm_tokens_out += tokens_out;
        metrics::counter!(LLM_CALLS_TOTAL, "purpose" => purpose.to_string(), "outcome" => if succeeded { "ok" } else { "failed" })
            .increment(1);
        self.storage
            .record_llm_call(
                scope,
                &LlmCallRecord {
                    attribution: attribution.clone(),
                    model: llm.model().to_string(),
                    purpose: purpose.to_string(),
                    tokens_in: i64::try_from(tokens_in).unwrap_or(i64::MAX),
                    tokens_out: i64::try_from(tokens_out).unwrap_or(i64::MAX),
                    duration_ms: i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX),
                    succeeded,
                    at: Utc::now(),
                },
            )
            .await?;
        outcome.map(|reply| reply.text).map_err(llm_problem)
    }
}

/// LLM calls by purpose and outcome.
pub const LLM_CALLS_TOTAL: &str = "engram_llm_calls_total";

fn llm_problem(error: LlmError) -> EngineError {
    EngineError::LlmUnavailable(error.to_string())
}
