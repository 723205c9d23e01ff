//! Add 1–100 memories: each end-user token writes only its own end-user's memories, an
//! expiry already past needs what deleting needs, the spend is admitted before anything is
//! embedded, and only what was stored is metered (a replay stored nothing).

use crate::{AddOutcome, EngineError, MemoryEngine};
use chrono::Utc;
use engram_core::usage::{PlannedSpend, UsageAttribution, UsageUnit};
use engram_core::{FieldError, InvalidInput, Memory, NewMemory, Operation, Principal};
use engram_storage::IdempotencyClaim;

/// A client's `Idempotency-Key` and the fingerprint of the request it came with.
#[derive(Clone, Debug)]
pub struct ClientIdempotencyKey {
    pub key: String,
    pub request_fingerprint: String,
}

pub struct AddMemoriesRequest {
    pub memories: Vec<NewMemory>,
    /// One vector per memory, in order, for a project that sends its own.
    pub client_vectors: Option<Vec<Vec<f32>>>,
    pub idempotency: Option<ClientIdempotencyKey>,
    /// Wait until the memories are searchable before answering.
    pub wait_for_index: bool,
    /// The agent run the write belongs to: it appears in the run's timeline.
    pub run_id: Option<uuid::Uuid>,
}

impl MemoryEngine {
    /// `render_response` produces the answer stored for an idempotent replay.
    pub async fn add_memories_for(
        &self,
        principal: &Principal,
        request: AddMemoriesRequest,
        render_response: impl Fn(&[Memory]) -> (u16, String) + Send + Sync,
    ) -> Result<AddOutcome, EngineError> {
        principal.authorize(Operation::AddMemories)?;
        let limit_errors = NewMemory::batch_limit_errors(&request.memories);
        if !limit_errors.is_empty() {
            return Err(InvalidInput(limit_errors).into());
        }
        let mut memories = request.memories;
        // An expiry already past asks for the memory to be deleted at the next sweep: a
        // deletion, so it needs what deleting needs. (Deletes by project policy — retention —
        // are the policy setter's, not the writer's.)
        if !principal.may(Operation::DeleteMemory) {
            let now = Utc::now();
            let errors: Vec<FieldError> = memories
                .iter()
                .enumerate()
                .filter(|(_, memory)| memory.expires_at.is_some_and(|expires_at| expires_at <= now))
                .map(|(position, _)| {
                    FieldError::new(
                        format!("memories[{position}].expires_at"),
                        "is in the past, which would delete the memory: that needs the `memories:delete` scope",
                    )
                })
                .collect();
            if !errors.is_empty() {
                return Err(InvalidInput(errors).into());
            }
        }
        for (position, memory) in memories.iter_mut().enumerate() {
            memory.user_id = principal.end_user_subject(
                memory.user_id.take(),
                &format!("memories[{position}].user_id"),
            )?;
            memory.agent_id = principal.agent_subject(
                memory.agent_id.take(),
                &format!("memories[{position}].agent_id"),
            )?;
        }
        // A run that cannot take the step refuses the write before anything is stored.
        let subjects: Vec<Option<&str>> = memories
            .iter()
            .map(|memory| memory.user_id.as_ref().map(|id| id.as_str()))
            .collect();
        let run = self
            .run_to_link(principal, request.run_id, &subjects)
            .await?;
        self.spend_guard
            .admit(
                principal.scope(),
                &[
                    PlannedSpend {
                        unit: UsageUnit::MemoriesWritten,
                        quantity: memories.len() as u64,
                    },
                    // At least one token is embedded: refused once the token quota is used up.
                    PlannedSpend {
                        unit: UsageUnit::TokensEmbedded,
                        quantity: 1,
                    },
                ],
            )
            .await?;
        let claim = request.idempotency.map(|client| IdempotencyClaim {
            key: principal.idempotency_key(&client.key),
            request_fingerprint: client.request_fingerprint,
        });
        // The answer (and the copy kept for a replay) is content-free for a writer that may
        // not read: a write key learns ids, never what a supersede or redaction made of text.
        let shown = |memories: &[Memory]| -> Vec<Memory> {
            memories
                .iter()
                .map(|memory| principal.shown(Operation::AddMemories, memory.clone()))
                .collect()
        };
        let outcome = self
            .add_memories_with_vectors(
                principal.scope(),
                memories,
                request.client_vectors,
                principal.actor(),
                claim,
                request.wait_for_index,
                |memories: &[Memory]| render_response(&shown(memories)),
            )
            .await?;
        if matches!(outcome, AddOutcome::AnswerErased) {
            return Err(EngineError::IdempotentResultErased);
        }
        if let (
            Some(run),
            AddOutcome::Stored {
                memories: stored, ..
            },
        ) = (&run, &outcome)
        {
            let written: Vec<serde_json::Value> = stored
                .iter()
                .map(|memory| {
                    serde_json::json!({
                        "memory_id": memory.id.to_string(),
                        "version": memory.version,
                        "kind": memory.kind.as_str(),
                    })
                })
                .collect();
            self.record_linked_step(
                principal,
                run,
                engram_core::runs::RunStepType::MemoryWrite,
                serde_json::json!({ "memories": written }),
                Vec::new(),
            )
            .await;
        }
        if let AddOutcome::Stored {
            memories,
            tokens_embedded,
            ..
        } = &outcome
        {
            // Each memory is billed to its end-user and agent; the batch's embedding too,
            // when they are the same for every memory (else to no end-user or agent).
            let caller = principal.usage_attribution();
            let mut per_subject: std::collections::BTreeMap<UsageAttribution, u64> =
                std::collections::BTreeMap::new();
            for memory in memories {
                let attribution = caller.clone().for_subject(
                    memory.user_id.as_ref().map(|id| id.as_str()),
                    memory.agent_id.as_ref().map(|id| id.as_str()),
                );
                *per_subject.entry(attribution).or_default() += 1;
            }
            let embedding_attribution = match per_subject.keys().collect::<Vec<_>>()[..] {
                [only] => only.clone(),
                _ => caller,
            };
            for (attribution, written) in &per_subject {
                self.meter.record(
                    principal.scope(),
                    attribution,
                    UsageUnit::MemoriesWritten,
                    *written,
                );
            }
            // What the project's model embedded (after PII masking); nothing for client
            // vectors.
            self.meter.record(
                principal.scope(),
                &embedding_attribution,
                UsageUnit::TokensEmbedded,
                *tokens_embedded,
            );
        }
        Ok(match outcome {
            AddOutcome::Stored {
                memories,
                indexed,
                tokens_embedded,
            } => AddOutcome::Stored {
                memories: shown(&memories),
                indexed,
                tokens_embedded,
            },
            other => other,
        })
    }
}
