//! Consolidation: within one project, memories of the same end-user, agent and kind that say
//! the same thing (embeddings nearly identical) are merged into the newest one; with an LLM,
//! old episodic memories of one session are compacted into a summary. What is merged or
//! compacted becomes `superseded`, with the reason in its history. Work per run is bounded.

use crate::EngineError;
use crate::derivation::MessageDerivation;
use crate::llm::json_in_answer;
use crate::pipeline::MemoryEngine;
use crate::search::cosine_similarity;
use chrono::Utc;
use engram_core::audit::Actor;
use engram_core::{
    ExternalId, Memory, MemoryId, MemoryKind, MemorySource, NewMemory, ProjectScope,
};
use engram_storage::recall::MemoryWithEmbedding;
use engram_storage::{InsertOutcome, MemoryDraft};
use serde::Serialize;
use std::collections::{BTreeMap, HashSet};

/// Two memories at least this similar (cosine of the embeddings) say the same thing.
pub const DUPLICATE_SIMILARITY: f32 = 0.95;

/// How much one run may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConsolidationLimits {
    /// Newest active memories examined.
    pub max_memories: usize,
    /// Groups of duplicates merged.
    pub max_merges: usize,
    /// Episodic memories valid for longer than this are compacted (with an LLM).
    pub compact_after: chrono::Duration,
    /// A session needs at least this many old episodes to be compacted.
    pub min_episodes: usize,
    /// Episodes per summary (a longer session gets several).
    pub max_episodes_per_summary: usize,
    /// Summaries (LLM calls) per run.
    pub max_summaries: usize,
}

impl Default for ConsolidationLimits {
    fn default() -> Self {
        Self {
            max_memories: 5_000,
            max_merges: 500,
            compact_after: chrono::Duration::days(30),
            min_episodes: 4,
            max_episodes_per_summary: 30,
            max_summaries: 20,
        }
    }
}

/// One compaction: `summary` replaced `replaced`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CompactedEpisodes {
    pub summary: MemoryId,
    pub replaced: Vec<MemoryId>,
    pub content: String,
    pub reason: String,
}

/// One merge: `kept` stays active, `merged` were superseded by it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MergedDuplicates {
    pub kept: MemoryId,
    pub merged: Vec<MemoryId>,
    /// Lowest similarity between `kept` and one of `merged`.
    pub similarity: f32,
}

/// What one run did.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ConsolidationReport {
    pub examined: usize,
    pub merges: Vec<MergedDuplicates>,
    pub memories_superseded: usize,
    /// With an LLM configured; empty without one.
    pub compactions: Vec<CompactedEpisodes>,
    pub llm_calls: u32,
    pub llm_tokens_in: u64,
    pub llm_tokens_out: u64,
    /// Memories written (summaries) and tokens embedded, for billing.
    pub memories_written: u64,
    pub tokens_embedded: u64,
    /// The run stopped at a limit; the next run continues.
    pub limit_reached: bool,
}

const PAGE_SIZE: u64 = 500;

impl MemoryEngine {
    /// Merge near-duplicate memories of `scope`'s project (see the module docs).
    pub(crate) async fn consolidate_project(
        &self,
        scope: &ProjectScope,
        limits: ConsolidationLimits,
        actor: &Actor,
    ) -> Result<ConsolidationReport, EngineError> {
        let mut report = ConsolidationReport::default();
        let mut memories: Vec<MemoryWithEmbedding> = Vec::new();
        let mut after = None;
        while memories.len() < limits.max_memories {
            let page_size = PAGE_SIZE.min((limits.max_memories - memories.len()) as u64);
            let page = self
                .storage
                .active_memories_with_embeddings_page(scope, after, page_size)
                .await?;
            let Some(last) = page.last() else { break };
            after = Some(last.memory.id);
            let full_page = page.len() as u64 == page_size;
            memories.extend(page);
            if !full_page {
                break;
            }
        }
        report.examined = memories.len();
        report.limit_reached = memories.len() >= limits.max_memories;
        let plan = plan_merges(&memories, limits.max_merges);
        if plan.len() >= limits.max_merges {
            report.limit_reached = true;
        }
        let mut touched = Vec::new();
        let mut merged_away: HashSet<MemoryId> = HashSet::new();
        for group in plan {
            let reason = format!(
                "merged into {} by consolidation: the same content (similarity {:.3})",
                group.kept, group.similarity
            );
            let superseded = self
                .storage
                .supersede_memories_by(scope, group.kept, &group.merged, &reason, actor)
                .await?;
            if !superseded.is_empty() {
                report.memories_superseded += superseded.len();
                touched.extend(superseded.iter().copied());
                merged_away.extend(superseded.iter().copied());
                report.merges.push(MergedDuplicates {
                    kept: group.kept,
                    merged: superseded,
                    similarity: group.similarity,
                });
            }
        }
        if !touched.is_empty() {
            self.index_after_write(scope, &touched, true).await;
        }
        if self.llm.is_some() {
            let remaining: Vec<&Memory> = memories
                .iter()
                .map(|found| &found.memory)
                .filter(|memory| !merged_away.contains(&memory.id))
                .collect();
            self.compact_old_episodes(scope, &remaining, &limits, actor, &mut report)
                .await?;
        }
        tracing::info!(
            project_id = %scope.project_id(),
            examined = report.examined,
            merges = report.merges.len(),
            superseded = report.memories_superseded,
            "consolidation finished"
        );
        Ok(report)
    }
}

impl MemoryEngine {
    /// Summarise each session's old episodes (oldest first, in chunks) with the LLM, store
    /// the summary and supersede what it replaced.
    async fn compact_old_episodes(
        &self,
        scope: &ProjectScope,
        memories: &[&Memory],
        limits: &ConsolidationLimits,
        actor: &Actor,
        report: &mut ConsolidationReport,
    ) -> Result<(), EngineError> {
        let Some(llm) = self.llm.clone() else {
            return Ok(());
        };
        // A summary needs a vector, and a project that sends its own cannot get one here.
        if self
            .spaces
            .space_for(scope)
            .await?
            .client_dimension()
            .is_some()
        {
            return Ok(());
        }
        let cutoff = Utc::now() - limits.compact_after;
        // By visibility and team too: a private episode is never summarised into a shared
        // summary, nor one team's into another's.
        type Session = (
            Option<ExternalId>,
            Option<ExternalId>,
            Option<ExternalId>,
            engram_core::Visibility,
            Option<ExternalId>,
        );
        let mut by_session: BTreeMap<Session, Vec<&Memory>> = BTreeMap::new();
        for memory in memories {
            let compactable = memory.kind == MemoryKind::Episodic
                && memory.valid_from < cutoff
                && !memory.immutable
                && !memory.legal_hold
                // A summary is not summarised again.
                && !memory.metadata.contains_key(COMPACTED_FROM_KEY);
            if compactable {
                by_session
                    .entry((
                        memory.user_id.clone(),
                        memory.agent_id.clone(),
                        memory.session_id.clone(),
                        memory.visibility,
                        memory.shared_with.clone(),
                    ))
                    .or_default()
                    .push(memory);
            }
        }
        // Tallies what `call_llm` spends (its LLM fields only).
        let mut llm_spend = MessageDerivation::default();
        'sessions: for ((user_id, agent_id, session_id, _, _), mut episodes) in by_session {
            if episodes.len() < limits.min_episodes {
                continue;
            }
            episodes.sort_by_key(|memory| (memory.valid_from, memory.id));
            for chunk in episodes.chunks(limits.max_episodes_per_summary.max(2)) {
                if chunk.len() < limits.min_episodes {
                    continue;
                }
                if report.compactions.len() >= limits.max_summaries {
                    report.limit_reached = true;
                    break 'sessions;
                }
                let listing: Vec<String> = chunk
                    .iter()
                    .enumerate()
                    .map(|(position, memory)| {
                        format!(
                            "e{}: [{}] {}",
                            position + 1,
                            memory.valid_from.format("%Y-%m-%d"),
                            memory.content.replace('\n', " ")
                        )
                    })
                    .collect();
                let reply = self
                    .call_llm(
                        scope,
                        &llm,
                        "compaction",
                        &llm.prompts().compact_episodes,
                        &listing.join("\n"),
                        &engram_core::usage::UsageAttribution::engine(CONSOLIDATION_CREDENTIAL),
                        &mut llm_spend,
                    )
                    .await?;
                let answer = json_in_answer(&reply)
                    .map_err(|error| EngineError::LlmUnavailable(error.to_string()))?;
                let summary = answer["summary"]
                    .as_str()
                    .unwrap_or_default()
                    .trim()
                    .to_string();
                let reason = answer["reason"]
                    .as_str()
                    .unwrap_or("compacted old episodes")
                    .trim()
                    .to_string();
                if summary.is_empty() || summary.len() > engram_core::limits::MAX_CONTENT_BYTES {
                    continue;
                }
                let replaced: Vec<MemoryId> = chunk.iter().map(|memory| memory.id).collect();
                let Some(summary_id) = self
                    .store_summary(
                        scope,
                        &summary,
                        &replaced,
                        chunk,
                        [&user_id, &agent_id, &session_id],
                        actor,
                        report,
                    )
                    .await?
                else {
                    continue;
                };
                let superseded = self
                    .storage
                    .supersede_memories_by(
                        scope,
                        summary_id,
                        &replaced,
                        &format!("compacted into summary {summary_id} by consolidation: {reason}"),
                        actor,
                    )
                    .await?;
                report.memories_superseded += superseded.len();
                self.index_after_write(scope, &superseded, true).await;
                report.compactions.push(CompactedEpisodes {
                    summary: summary_id,
                    replaced: superseded,
                    content: summary,
                    reason,
                });
            }
        }
        report.llm_calls += llm_spend.llm_calls;
        report.llm_tokens_in += llm_spend.llm_tokens_in;
        report.llm_tokens_out += llm_spend.llm_tokens_out;
        Ok(())
    }

    /// Store one summary as an episodic memory of the same end-user, agent and session, its
    /// sources in metadata. Returns its id.
    #[allow(clippy::too_many_arguments)]
    async fn store_summary(
        &self,
        scope: &ProjectScope,
        summary: &str,
        replaced: &[MemoryId],
        episodes: &[&Memory],
        [user_id, agent_id, session_id]: [&Option<ExternalId>; 3],
        actor: &Actor,
        report: &mut ConsolidationReport,
    ) -> Result<Option<MemoryId>, EngineError> {
        let (space, embedder) = self.project_embedder(scope).await?;
        let counted = embedder.embed_counted(vec![summary.to_string()]).await?;
        let Some((vector, tokens)) = counted.into_iter().next() else {
            return Ok(None);
        };
        report.tokens_embedded += tokens;
        let mut metadata = serde_json::Map::new();
        metadata.insert(
            COMPACTED_FROM_KEY.into(),
            replaced
                .iter()
                .map(|id| id.to_string())
                .collect::<Vec<_>>()
                .into(),
        );
        if let (Some(first), Some(last)) = (episodes.first(), episodes.last()) {
            metadata.insert("from".into(), first.valid_from.to_rfc3339().into());
            metadata.insert("to".into(), last.valid_from.to_rfc3339().into());
        }
        // Episodes are grouped by visibility and team: the summary is as visible as they are.
        let (summary_visibility, summary_team) = episodes
            .first()
            .map(|episode| (episode.visibility, episode.shared_with.clone()))
            .unwrap_or((engram_core::Visibility::Private, None));
        let draft = MemoryDraft {
            memory: NewMemory {
                user_id: user_id.clone(),
                agent_id: agent_id.clone(),
                session_id: session_id.clone(),
                kind: MemoryKind::Episodic,
                key: None,
                content: summary.to_string(),
                metadata,
                categories: Vec::new(),
                source: MemorySource::ModelInferred,
                confidence: 0.9,
                expires_at: None,
                // The summary is about the newest episode's time at the latest.
                occurred_at: episodes.iter().map(|episode| episode.occurred_at).max(),
                visibility: Some(summary_visibility),
                shared_with: summary_team,
            },
            embedding: vector,
            embedding_model: space.model_id.clone(),
            embedding_generation: space.generation,
            supersedes: None,
            reason: Some("summary of older episodes (consolidation)".to_string()),
        };
        let render = |_: &[Memory]| (201, String::new());
        match self
            .storage
            .insert_memories(scope, vec![draft], actor, None, render)
            .await
            .map_err(|error| self.after_write_error(scope, error))?
        {
            InsertOutcome::Inserted { memories, touched } => {
                report.memories_written += memories.len() as u64;
                self.index_after_write(scope, &touched, true).await;
                Ok(memories.first().map(|memory| memory.id))
            }
            InsertOutcome::Replayed { .. } | InsertOutcome::AnswerErased => Ok(None),
        }
    }
}

/// Metadata of a summary: the ids of the episodes it replaced.
pub const COMPACTED_FROM_KEY: &str = "compacted_from";
/// LLM calls of consolidation are billed to this credential.
pub(crate) const CONSOLIDATION_CREDENTIAL: &str = "consolidation";

/// Groups of duplicates among `memories` (newest first): within each (user, agent, kind),
/// each memory not yet merged keeps every older one at least [`DUPLICATE_SIMILARITY`]
/// similar to it. Immutable and held memories are never merged away (they may be kept).
fn plan_merges(memories: &[MemoryWithEmbedding], max_merges: usize) -> Vec<MergedDuplicates> {
    // By visibility, team and verification too: a private memory never merges into a shared
    // one, one team's into another's or every agent's, nor a verified one into an unverified.
    type Subject = (
        Option<ExternalId>,
        Option<ExternalId>,
        MemoryKind,
        engram_core::Visibility,
        Option<ExternalId>,
        bool,
    );
    let mut by_subject: BTreeMap<Subject, Vec<&MemoryWithEmbedding>> = BTreeMap::new();
    for found in memories {
        let memory = &found.memory;
        by_subject
            .entry((
                memory.user_id.clone(),
                memory.agent_id.clone(),
                memory.kind,
                memory.visibility,
                memory.shared_with.clone(),
                memory.verified_at.is_some(),
            ))
            .or_default()
            .push(found);
    }
    let mut plan = Vec::new();
    for group in by_subject.values() {
        let mut merged_away = vec![false; group.len()];
        for newer in 0..group.len() {
            if merged_away[newer] {
                continue;
            }
            let mut merged = Vec::new();
            let mut lowest_similarity = 1.0_f32;
            for older in newer + 1..group.len() {
                let candidate = &group[older].memory;
                if merged_away[older] || candidate.immutable || candidate.legal_hold {
                    continue;
                }
                let similarity = engram_core::embedding::comparable_similarity(
                    &candidate.embedding_model,
                    cosine_similarity(&group[newer].embedding, &group[older].embedding),
                );
                if similarity >= DUPLICATE_SIMILARITY {
                    merged_away[older] = true;
                    merged.push(candidate.id);
                    lowest_similarity = lowest_similarity.min(similarity);
                }
            }
            if !merged.is_empty() {
                plan.push(MergedDuplicates {
                    kept: group[newer].memory.id,
                    merged,
                    similarity: lowest_similarity,
                });
                if plan.len() >= max_merges {
                    return plan;
                }
            }
        }
    }
    plan
}
