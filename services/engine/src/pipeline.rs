//! The write side of the engine: embed, store (memory + history + outbox in one
//! transaction), then wait a bounded time for the index so writes are readable at once.

use crate::EngineError;
use crate::embedding_spaces::{EmbeddingSpaces, ProjectSpace, RoutedVectorIndex};
use crate::indexing::IndexApplier;
use chrono::{DateTime, Utc};
use engram_core::{InvalidInput, Memory, MemoryId, MemoryScope, NewMemory, ProjectScope};
use engram_embed::Embedder;
use engram_index::VectorIndex;
use engram_storage::{IdempotencyClaim, InsertOutcome, MemoryDraft, MemoryPatch, Storage};
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::Duration;
use tracing::Instrument;

/// Tunables of the pipeline.
#[derive(Clone, Debug)]
pub struct EngineSettings {
    /// How long a write waits for the index before answering `202` instead of `201`.
    pub index_wait: Duration,
    /// Query embeddings kept in memory.
    pub query_cache_entries: usize,
    /// Where erasures are remembered outside the database, and the subject digest key.
    pub ledger: crate::governance::ErasureLedgerSettings,
    /// The LLM that extracts and reconciles memories from messages; `None`: messages
    /// become episodic memories verbatim.
    pub llm: Option<crate::llm::LlmSettings>,
}

impl Default for EngineSettings {
    fn default() -> Self {
        Self {
            index_wait: Duration::from_secs(5),
            query_cache_entries: 10_000,
            ledger: Default::default(),
            llm: None,
        }
    }
}

/// A validated change to one memory.
#[derive(Clone, Debug, Default)]
pub struct MemoryEdit {
    pub content: Option<String>,
    pub metadata: Option<serde_json::Map<String, serde_json::Value>>,
    pub categories: Option<Vec<String>>,
    pub expires_at: Option<Option<DateTime<Utc>>>,
    /// A new event time (see `Memory::occurred_at`).
    pub occurred_at: Option<DateTime<Utc>>,
    /// Who among the project's agents reads it (`private` needs the memory's `agent_id`).
    pub visibility: Option<engram_core::Visibility>,
    /// The team a shared memory is shared with (`Some(None)`: every agent again).
    pub shared_with: Option<Option<engram_core::ExternalId>>,
    pub reason: Option<String>,
    /// New metadata keeps the memory's `app_id` unless it names one (Mem0 keeps `app_id`
    /// beside the metadata, Engram inside it).
    pub keep_app_id: bool,
}

pub enum AddOutcome {
    /// Stored; `indexed` says whether the index applied them before the answer.
    Stored {
        memories: Vec<Memory>,
        indexed: bool,
        /// Tokens Engram embedded (0 when the client sent the vectors).
        tokens_embedded: u64,
    },
    /// A retry of an earlier request with the same idempotency key: its answer, verbatim.
    Replayed { status: u16, body: String },
    /// A retry whose first answer named a memory deleted since: nothing written or replayed.
    AnswerErased,
}

/// An edited memory and the tokens its new content cost to embed.
pub struct EditedMemory {
    pub memory: Memory,
    pub tokens_embedded: u64,
}

pub struct MemoryEngine {
    pub(crate) storage: Storage,
    /// Routes every call to the index of the project's embedding space.
    pub(crate) index: Arc<dyn VectorIndex>,
    pub(crate) spaces: Arc<EmbeddingSpaces>,
    /// The deployment's default embedder: token estimates for budgets and context packing.
    pub(crate) embedder: Arc<dyn Embedder>,
    pub(crate) applier: Arc<IndexApplier>,
    pub(crate) settings: EngineSettings,
    pub(crate) query_embeddings: crate::query_cache::QueryCache,
    pub(crate) governance: Arc<crate::governance::DataGovernance>,
    /// When each organization's audit chain was last recomputed from its first event.
    pub(crate) full_verifications: crate::use_cases::FullVerificationTimes,
    pub(crate) llm: Option<Arc<crate::llm::ChatModel>>,
    /// Where searches leave their recall events (written in the background).
    pub(crate) recall_events: Arc<crate::recall_events::RecallRecorder>,
    /// Billable units of what use cases did.
    pub(crate) meter: crate::metering::UsageMeter,
    /// Budgets, quotas and rate quotas per project, checked before use cases spend.
    pub(crate) spend_guard: Arc<crate::spend_guard::SpendGuard>,
    /// Mixed into API key hashes; `None` until `with_api_key_pepper` (key use cases then fail).
    pub(crate) api_key_pepper: Option<engram_storage::ApiKeyPepper>,
    /// Signs and verifies end-user tokens; `None` until `with_end_user_token_keys`.
    pub(crate) end_user_tokens: Option<crate::end_user_tokens::EndUserTokenKeys>,
    /// Keys verified in the last seconds: authentication without a database read.
    pub(crate) verified_api_keys: crate::api_key_cache::ApiKeyCache,
    /// One eviction at a time per project, so two writes at a limit do not both make room.
    pub(crate) evictions: crate::memory_limits::EvictionLocks,
}

/// Each written memory with the subjects the memory limits count it against.
pub(crate) fn written_subjects(
    memories: &[Memory],
) -> Vec<(engram_core::MemoryId, Option<&str>, Option<&str>)> {
    memories
        .iter()
        .map(|memory| {
            (
                memory.id,
                memory.user_id.as_ref().map(|id| id.as_str()),
                memory.agent_id.as_ref().map(|id| id.as_str()),
            )
        })
        .collect()
}

/// Checked before paying for an embedding; storage checks again inside its transaction.
fn refuse_locked_memory(memory: &Memory) -> Result<(), EngineError> {
    if memory.legal_hold {
        return Err(EngineError::Locked(
            "the memory is under legal hold: lift the hold before changing or deleting it"
                .to_string(),
        ));
    }
    if memory.immutable {
        return Err(EngineError::Locked(
            "the memory is immutable: it cannot be changed or deleted".to_string(),
        ));
    }
    Ok(())
}

impl MemoryEngine {
    /// An engine with one embedding space: `embedder` for every project, points in `index`.
    pub fn new(
        storage: Storage,
        index: Arc<dyn VectorIndex>,
        embedder: Arc<dyn Embedder>,
        settings: EngineSettings,
    ) -> Self {
        let spaces = Arc::new(EmbeddingSpaces::single(
            storage.clone(),
            index,
            embedder.clone(),
        ));
        Self::with_embedding_spaces(storage, spaces, embedder, settings)
    }

    /// The engine; an LLM whose HTTP client cannot be built is reported and left out.
    /// `embedder` is the deployment's default model (token estimates, the default space).
    pub fn with_embedding_spaces(
        storage: Storage,
        spaces: Arc<EmbeddingSpaces>,
        embedder: Arc<dyn Embedder>,
        settings: EngineSettings,
    ) -> Self {
        let index: Arc<dyn VectorIndex> = Arc::new(RoutedVectorIndex::new(spaces.clone()));
        let llm = settings.llm.clone().and_then(|llm_settings| {
            crate::llm::ChatModel::new(llm_settings)
                .map_err(|error| tracing::error!(%error, "the LLM cannot be used"))
                .ok()
                .map(Arc::new)
        });
        let applier = Arc::new(IndexApplier::new(storage.clone(), index.clone()));
        let capacity =
            NonZeroUsize::new(settings.query_cache_entries.max(1)).unwrap_or(NonZeroUsize::MIN);
        let query_embeddings = crate::query_cache::QueryCache::new(capacity);
        let recall_events = Arc::new(crate::recall_events::RecallRecorder::start(
            storage.clone(),
            spaces.settings_cache().clone(),
        ));
        let governance = Arc::new(
            crate::governance::DataGovernance::new(
                storage.clone(),
                index.clone(),
                applier.clone(),
                settings.ledger.clone(),
            )
            .with_query_cache(query_embeddings.clone())
            .with_recall_recorder(recall_events.clone()),
        );
        // Without a flusher the meter drops what it is given: `with_usage_meter` wires one.
        let meter = crate::metering::UsageMeter::default();
        let spend_guard = crate::spend_guard::SpendGuard::new(
            storage.clone(),
            meter.clone(),
            spaces.settings_cache().clone(),
        );
        Self {
            storage,
            index,
            spaces,
            embedder,
            applier,
            settings,
            query_embeddings,
            governance,
            llm,
            recall_events,
            meter,
            spend_guard,
            api_key_pepper: None,
            end_user_tokens: None,
            verified_api_keys: Default::default(),
            evictions: Default::default(),
            full_verifications: Default::default(),
        }
    }

    /// The keys that sign and verify end-user tokens.
    pub fn with_end_user_token_keys(
        mut self,
        keys: crate::end_user_tokens::EndUserTokenKeys,
    ) -> Self {
        self.end_user_tokens = Some(keys);
        self
    }

    /// The server secret mixed into API key hashes, for the key use cases.
    pub fn with_api_key_pepper(mut self, pepper: engram_storage::ApiKeyPepper) -> Self {
        self.api_key_pepper = Some(pepper);
        self
    }

    pub(crate) fn api_key_pepper(&self) -> Result<&engram_storage::ApiKeyPepper, EngineError> {
        self.api_key_pepper
            .as_ref()
            .ok_or_else(|| EngineError::Internal("no API key pepper configured".to_string()))
    }

    /// Meter use cases with `meter` (whose flusher writes the usage), and check spend limits
    /// against what it has not written yet.
    pub fn with_usage_meter(mut self, meter: crate::metering::UsageMeter) -> Self {
        self.spend_guard = crate::spend_guard::SpendGuard::new(
            self.storage.clone(),
            meter.clone(),
            self.spaces.settings_cache().clone(),
        );
        self.governance
            .flush_usage_meter_before_erasure(meter.clone());
        self.meter = meter;
        self
    }

    /// Whether the database and the vector index answer: each `Err` says why not.
    pub async fn readiness(&self) -> (Result<(), String>, Result<(), String>) {
        let database = self
            .storage
            .check_ready()
            .await
            .map_err(|error| error.to_string());
        let index = self
            .index
            .check_ready()
            .await
            .map_err(|error| error.to_string());
        (database, index)
    }

    /// The configured LLM's model name, if any.
    pub(crate) fn llm_model(&self) -> Option<&str> {
        self.llm.as_deref().map(crate::llm::ChatModel::model)
    }

    /// Forget what this process read of the project's settings, spend limits and retrieval
    /// profiles: every use case that changes one of them calls it, so the change applies
    /// here at once (other processes see it within the cache's TTL).
    pub(crate) fn forget_project_settings(&self, project_id: engram_core::ProjectId) {
        self.spaces.settings_cache().forget(project_id);
    }

    /// A write refused because the project switched embedding spaces under it: this process
    /// read the old space, so it forgets the settings, and a retry embeds in the new one.
    pub(crate) fn after_write_error(
        &self,
        scope: &ProjectScope,
        error: engram_storage::StorageError,
    ) -> EngineError {
        if matches!(error, engram_storage::StorageError::EmbeddingSpaceChanged) {
            self.forget_project_settings(scope.project_id());
        }
        error.into()
    }

    /// The project's embedder, or why Engram cannot embed for it (client vectors).
    pub(crate) async fn project_embedder(
        &self,
        scope: &ProjectScope,
    ) -> Result<(ProjectSpace, Arc<dyn Embedder>), EngineError> {
        let space = self.spaces.space_for(scope).await?;
        let embedder = space.embedder().await?;
        Ok((space, embedder))
    }

    /// Store memories. `render_response` produces the answer stored for idempotent replay.
    pub(crate) async fn add_memories(
        &self,
        scope: &ProjectScope,
        new_memories: Vec<NewMemory>,
        actor: &engram_core::audit::Actor,
        idempotency: Option<IdempotencyClaim>,
        wait_for_index: bool,
        render_response: impl Fn(&[Memory]) -> (u16, String) + Send + Sync,
    ) -> Result<AddOutcome, EngineError> {
        self.add_memories_with_vectors(
            scope,
            new_memories,
            None,
            actor,
            idempotency,
            wait_for_index,
            render_response,
        )
        .await
    }

    /// [`Self::add_memories`], with the vectors a client-vector project sends (one per memory,
    /// in order). Required for such a project, refused for any other.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn add_memories_with_vectors(
        &self,
        scope: &ProjectScope,
        new_memories: Vec<NewMemory>,
        client_vectors: Option<Vec<Vec<f32>>>,
        actor: &engram_core::audit::Actor,
        idempotency: Option<IdempotencyClaim>,
        wait_for_index: bool,
        render_response: impl Fn(&[Memory]) -> (u16, String) + Send + Sync,
    ) -> Result<AddOutcome, EngineError> {
        let space = self.spaces.space_for(scope).await?;
        check_vectors_match_space(
            &space,
            client_vectors.as_deref(),
            new_memories.len(),
            |position| format!("memories[{position}].embedding"),
        )?;
        let mut new_memories = new_memories;
        let settings = self.spaces.settings_cache().of(scope).await?;
        resolve_visibility(
            &mut new_memories,
            settings.settings.default_visibility,
            &settings.settings.agent_teams,
        )?;
        // Before anything is embedded: a write the memory limits refuse costs nothing (a
        // retry of an answered write replays its answer instead).
        self.admit_under_memory_limits(scope, &new_memories, idempotency.as_ref())
            .await?;
        let mut contents: Vec<String> = new_memories
            .iter()
            .map(|memory| memory.content.clone())
            .collect();
        // Before anything is embedded or stored: masked text is all the stores ever see.
        self.governance
            .redact_personal_data(scope, &mut contents, |index| {
                format!("memories[{index}].content")
            })
            .await?;
        for (memory, content) in new_memories.iter_mut().zip(&contents) {
            memory.content.clone_from(content);
        }
        let (embeddings, tokens_embedded) = match client_vectors {
            Some(vectors) => (vectors, 0),
            None => {
                let embedder = space.embedder().await?;
                // Counted by the tokenisation that fed the model (the local one), not again.
                let counted = embedder
                    .embed_counted(contents)
                    .instrument(tracing::info_span!("embed", texts = new_memories.len()))
                    .await?;
                let tokens: u64 = counted.iter().map(|(_, tokens)| tokens).sum();
                let embeddings = counted.into_iter().map(|(vector, _)| vector).collect();
                (embeddings, tokens)
            }
        };
        if embeddings.len() != new_memories.len() {
            return Err(EngineError::Internal(
                "embedder returned a different number of vectors".to_string(),
            ));
        }
        let model_id = space.model_id.clone();
        let drafts = new_memories
            .into_iter()
            .zip(embeddings)
            .map(|(memory, embedding)| MemoryDraft {
                memory,
                embedding,
                embedding_model: model_id.clone(),
                embedding_generation: space.generation,
                supersedes: None,
                reason: None,
            })
            .collect();
        let outcome = self
            .storage
            .insert_memories(scope, drafts, actor, idempotency, render_response)
            .instrument(tracing::info_span!("db.insert_memories"))
            .await
            .map_err(|error| self.after_write_error(scope, error))?;
        match outcome {
            InsertOutcome::Replayed { status, body } => Ok(AddOutcome::Replayed { status, body }),
            InsertOutcome::AnswerErased => Ok(AddOutcome::AnswerErased),
            InsertOutcome::Inserted { memories, touched } => {
                self.evict_over_memory_limits(scope, &written_subjects(&memories), actor)
                    .await;
                let indexed = self
                    .index_after_write(scope, &touched, wait_for_index)
                    .await;
                Ok(AddOutcome::Stored {
                    memories,
                    indexed,
                    tokens_embedded,
                })
            }
        }
    }

    /// Make the index reflect `touched` before answering, within `index_wait`; otherwise
    /// leave it to the background indexer. Returns whether the index is up to date.
    pub(crate) async fn index_after_write(
        &self,
        scope: &ProjectScope,
        touched: &[MemoryId],
        wait_for_index: bool,
    ) -> bool {
        if !wait_for_index {
            self.applier.work_available.notify_one();
            return false;
        }
        let applier = self.applier.clone();
        let scope_copy = *scope;
        let touched_copy = touched.to_vec();
        // Spawned so that a client hanging up cannot cancel an apply halfway.
        let apply =
            tokio::spawn(
                async move { applier.apply_pending_for(&scope_copy, &touched_copy).await },
            );
        match tokio::time::timeout(self.settings.index_wait, apply)
            .instrument(tracing::info_span!("index.apply", memories = touched.len()))
            .await
        {
            Ok(Ok(Ok(_))) => true,
            Ok(Ok(Err(error))) => {
                tracing::warn!(%error, "index apply after write failed; background indexer will retry");
                self.applier.work_available.notify_one();
                false
            }
            Ok(Err(join_error)) => {
                tracing::error!(%join_error, "index apply task failed");
                self.applier.work_available.notify_one();
                false
            }
            Err(_elapsed) => {
                tracing::info!("index slower than the write wait budget; answering 202");
                false
            }
        }
    }

    /// [`Self::edit_memory`]; new content of a client-vector project comes with its vector.
    pub(crate) async fn edit_memory_with_vector(
        &self,
        scope: &ProjectScope,
        memory_id: MemoryId,
        edit: MemoryEdit,
        client_vector: Option<Vec<f32>>,
        expected_version: Option<i64>,
        actor: &engram_core::audit::Actor,
    ) -> Result<EditedMemory, EngineError> {
        let space = self.spaces.space_for(scope).await?;
        if edit.content.is_none() && client_vector.is_some() {
            return Err(InvalidInput::single(
                "embedding",
                "only new content comes with a new embedding",
            )
            .into());
        }
        if edit.content.is_some() {
            check_vectors_match_space(
                &space,
                client_vector.as_ref().map(std::slice::from_ref),
                1,
                |_| "embedding".to_string(),
            )?;
        }
        // Check existence and version before paying for an embedding. The use case checked
        // the caller may see the memory; this is the engine's own read of the whole project.
        let current = self
            .storage
            .get_memory(&MemoryScope::project_wide(*scope), memory_id)
            .await?;
        if let Some(expected) = expected_version
            && expected != current.version
        {
            return Err(EngineError::VersionConflict {
                current_version: current.version,
            });
        }
        refuse_locked_memory(&current)?;
        let mut tokens_embedded = 0;
        let content = match edit.content {
            Some(content) => {
                let mut redacted = [content];
                self.governance
                    .redact_personal_data(scope, &mut redacted, |_| "content".to_string())
                    .await?;
                let [content] = redacted;
                let vector = match client_vector {
                    Some(vector) => vector,
                    None => {
                        let embedder = space.embedder().await?;
                        let (vector, tokens) = embedder
                            .embed_counted(vec![content.clone()])
                            .await?
                            .pop()
                            .ok_or_else(|| {
                                EngineError::Internal("embedder returned no vector".to_string())
                            })?;
                        tokens_embedded = tokens;
                        vector
                    }
                };
                Some((content, vector))
            }
            None => None,
        };
        let patch = MemoryPatch {
            content,
            embedding_generation: space.generation,
            metadata: edit.metadata,
            categories: edit.categories,
            expires_at: edit.expires_at,
            occurred_at: edit.occurred_at,
            visibility: edit.visibility,
            shared_with: edit.shared_with,
            reason: edit.reason,
        };
        let (updated, _) = self
            .storage
            .update_memory(scope, memory_id, patch, expected_version, actor)
            .await
            .map_err(|error| self.after_write_error(scope, error))?;
        self.index_after_write(scope, &[memory_id], true).await;
        Ok(EditedMemory {
            memory: updated,
            tokens_embedded,
        })
    }

    pub(crate) async fn delete_memory(
        &self,
        scope: &ProjectScope,
        memory_id: MemoryId,
        actor: &engram_core::audit::Actor,
    ) -> Result<(), EngineError> {
        self.delete_memory_with_reason(scope, memory_id, None, actor)
            .await
    }

    /// Delete with the reason a person gave (the console asks for one).
    pub(crate) async fn delete_memory_with_reason(
        &self,
        scope: &ProjectScope,
        memory_id: MemoryId,
        reason: Option<&str>,
        actor: &engram_core::audit::Actor,
    ) -> Result<(), EngineError> {
        self.storage
            .delete_memory_with_reason(scope, memory_id, reason, actor)
            .await?;
        self.index_after_write(scope, &[memory_id], true).await;
        Ok(())
    }

    /// The query's vector in the project's space, embedded by `embedder` (the space's own),
    /// and the tokens embedding it took (0 when it came from the cache).
    pub(crate) async fn embed_query(
        &self,
        scope: &ProjectScope,
        space: &ProjectSpace,
        embedder: &dyn Embedder,
        query: &str,
    ) -> Result<(Arc<Vec<f32>>, u64), EngineError> {
        // Keyed by project, erasure epoch and model (see `QueryCache`): an erasure anywhere
        // raises the epoch, and the project's older entries are never answered from.
        let epoch = self
            .spaces
            .settings_cache()
            .of(scope)
            .await?
            .query_cache_epoch;
        if let Some(vector) =
            self.query_embeddings
                .get(scope.project_id(), epoch, &space.model_id, query)
        {
            return Ok((vector, 0));
        }
        // The query lane: a search runs ahead of queued ingest in the local model, which
        // counts the tokens from the same tokenisation.
        let (vector, tokens) = embedder
            .embed_query_counted(query.to_string())
            .instrument(tracing::info_span!("embed", texts = 1))
            .await?;
        let vector = Arc::new(vector);
        self.query_embeddings.put(
            scope.project_id(),
            epoch,
            &space.model_id,
            query,
            vector.clone(),
        );
        Ok((vector, tokens))
    }
}

/// Client vectors are required exactly when the project sends its own, one per item, of its
/// declared dimension; `field` names item `position` in errors.
pub(crate) fn check_vectors_match_space(
    space: &ProjectSpace,
    vectors: Option<&[Vec<f32>]>,
    items: usize,
    field: impl Fn(usize) -> String,
) -> Result<(), EngineError> {
    match (space.client_dimension(), vectors) {
        (None, None) => Ok(()),
        (None, Some(_)) => Err(InvalidInput::single(
            field(0),
            format!(
                "this project is embedded by Engram ({}); to send your own vectors, set the project's embedding to {{\"source\": \"client\", \"dimension\": N}} while it has no memories",
                space.model_id
            ),
        )
        .into()),
        (Some(dimension), None) => Err(InvalidInput::single(
            field(0),
            format!("required: this project sends its own vectors ({dimension} numbers each)"),
        )
        .into()),
        (Some(dimension), Some(vectors)) => {
            let mut errors = Vec::new();
            if vectors.len() != items {
                errors.push(engram_core::FieldError::new(
                    field(0),
                    format!("one vector per item: {items} items, {} vectors", vectors.len()),
                ));
            }
            for (position, vector) in vectors.iter().enumerate() {
                if let Err(error) =
                    engram_core::embedding::check_client_vector(vector, dimension, &field(position))
                {
                    errors.push(error);
                }
            }
            if errors.is_empty() {
                Ok(())
            } else {
                Err(InvalidInput(errors).into())
            }
        }
    }
}

/// Each memory's visibility: the one it names, else the project's default. A private memory
/// is its agent's, so one of no agent asking for it is refused; the project's default of
/// `private` leaves a memory of no agent shared (no agent could read it otherwise). A memory
/// shared with a team is shared, with a team the project names.
fn resolve_visibility(
    memories: &mut [NewMemory],
    default_visibility: engram_core::Visibility,
    teams: &engram_core::agent_teams::AgentTeams,
) -> Result<(), InvalidInput> {
    let mut errors = Vec::new();
    for (position, memory) in memories.iter_mut().enumerate() {
        if let Some(team) = &memory.shared_with {
            if let Some(message) = team_error(team, memory.visibility, teams) {
                errors.push(engram_core::FieldError::new(
                    format!("memories[{position}].shared_with"),
                    message,
                ));
            }
            memory.visibility = Some(engram_core::Visibility::Shared);
            continue;
        }
        memory.visibility = Some(match (memory.visibility, &memory.agent_id) {
            (Some(engram_core::Visibility::Private), None) => {
                errors.push(engram_core::FieldError::new(
                    format!("memories[{position}].visibility"),
                    "`private` needs an `agent_id`: a private memory is one agent's",
                ));
                engram_core::Visibility::Private
            }
            (Some(visibility), _) => visibility,
            (None, None) => engram_core::Visibility::Shared,
            (None, Some(_)) => default_visibility,
        });
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(InvalidInput(errors))
    }
}

/// Why a memory cannot be shared with `team`: it is not one of the project's, or the memory
/// is asked to be private.
pub(crate) fn team_error(
    team: &engram_core::ExternalId,
    visibility: Option<engram_core::Visibility>,
    teams: &engram_core::agent_teams::AgentTeams,
) -> Option<String> {
    if visibility == Some(engram_core::Visibility::Private) {
        return Some(
            "a private memory is shared with no team: leave out one of the two".to_string(),
        );
    }
    if !teams.contains(team.as_str()) {
        return Some(format!(
            "the project has no team {:?} (an admin names teams with PATCH /v1/project/settings {{\"agent_teams\": …}})",
            team.as_str()
        ));
    }
    None
}
