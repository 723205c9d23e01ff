//! Memories from one call's messages, as Mem0's `add` asks for them: each message kept
//! verbatim, or read by the configured LLM (extraction and reconciliation) when asked to infer.

use crate::derivation::{DerivationInput, DerivedChange};
use crate::pipeline::AddOutcome;
use crate::use_cases::AddMemoriesRequest;
use crate::{EngineError, MemoryEngine};
use chrono::{DateTime, Utc};
use engram_core::conversation::{MessageRole, SessionMessage};
use engram_core::memory::content_digest;
use engram_core::usage::UsageUnit;
use engram_core::{ExternalId, FieldError, InvalidInput, Memory, NewMemory, Operation, Principal};
use std::collections::HashSet;

/// Most messages one call may carry.
pub const MAX_REMEMBERED_MESSAGES: usize = 100;

/// One message of the call.
#[derive(Clone, Debug)]
pub struct RememberedMessage {
    pub role: MessageRole,
    pub content: String,
}

/// What to remember, and for whom.
#[derive(Clone, Debug, Default)]
pub struct RememberMessagesRequest {
    pub messages: Vec<RememberedMessage>,
    pub user_id: Option<ExternalId>,
    pub agent_id: Option<ExternalId>,
    pub session_id: Option<ExternalId>,
    /// Kept on every memory written.
    pub metadata: serde_json::Map<String, serde_json::Value>,
    pub categories: Vec<String>,
    pub expires_at: Option<DateTime<Utc>>,
    /// When what the messages describe happened; `None`: now.
    pub occurred_at: Option<DateTime<Utc>>,
    /// Read the messages with the LLM (when one is configured) instead of keeping them as
    /// they are.
    pub infer: bool,
    /// Who among the project's agents reads the memories; `None`: the project's default.
    pub visibility: Option<engram_core::Visibility>,
    /// The team of agents the memories are shared with; `None`: as `visibility` says.
    pub shared_with: Option<engram_core::ExternalId>,
}

/// How the messages were remembered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RememberMethod {
    /// Each user, assistant and tool message is one memory, as written.
    Verbatim,
    /// The LLM extracted facts and reconciled them with what was already stored.
    Llm,
}

impl RememberMethod {
    pub const fn as_str(self) -> &'static str {
        match self {
            RememberMethod::Verbatim => "verbatim",
            RememberMethod::Llm => "llm",
        }
    }
}

/// What one call remembered.
pub struct RememberedMessages {
    pub method: RememberMethod,
    /// Why the method differs from what was asked (inference asked, no LLM configured).
    pub note: Option<String>,
    /// The memories written (both methods); content-free for a caller that may not read.
    pub memories: Vec<Memory>,
    /// The LLM's decisions (ADD, UPDATE, SUPERSEDE, DELETE, NOOP); empty when verbatim.
    pub changes: Vec<DerivedChange>,
}

impl RememberMessagesRequest {
    /// `message` kept as it was said, with what the request names for every memory.
    fn new_memory(&self, message: &RememberedMessage) -> NewMemory {
        NewMemory {
            user_id: self.user_id.clone(),
            agent_id: self.agent_id.clone(),
            session_id: self.session_id.clone(),
            kind: engram_core::MemoryKind::Semantic,
            key: None,
            content: message.content.clone(),
            metadata: self.metadata.clone(),
            categories: self.categories.clone(),
            source: message.role.verbatim_source(),
            confidence: 1.0,
            expires_at: self.expires_at,
            occurred_at: self.occurred_at,
            visibility: self.visibility,
            shared_with: self.shared_with.clone(),
        }
    }
}

impl MemoryEngine {
    pub async fn remember_messages_for(
        &self,
        principal: &Principal,
        request: RememberMessagesRequest,
    ) -> Result<RememberedMessages, EngineError> {
        principal.authorize(Operation::AddMemories)?;
        let mut errors = Vec::new();
        if request.messages.is_empty() || request.messages.len() > MAX_REMEMBERED_MESSAGES {
            errors.push(FieldError::new(
                "messages",
                format!("must hold 1–{MAX_REMEMBERED_MESSAGES} messages"),
            ));
        }
        let contents: Vec<&str> = request
            .messages
            .iter()
            .map(|message| message.content.as_str())
            .collect();
        errors.extend(engram_core::conversation::message_batch_errors(&contents));
        // An end-user token writes as its own end-user, named or not.
        let mut request = request;
        request.user_id = principal.end_user_subject(request.user_id.take(), "user_id")?;
        // A credential bound to agents writes as one of them.
        request.agent_id = principal.agent_subject(request.agent_id.take(), "agent_id")?;
        if request.user_id.is_none()
            && request.agent_id.is_none()
            && request.session_id.is_none()
            && !request
                .metadata
                .contains_key(engram_core::memory_filter::APP_ID_METADATA_KEY)
        {
            errors.push(FieldError::new(
                "user_id",
                "name at least one of user_id, agent_id, app_id or run_id: a memory belongs to someone",
            ));
        }
        if !errors.is_empty() {
            return Err(InvalidInput(errors).into());
        }
        // What rides along on every memory is held to the add use case's rules on both
        // paths, before any LLM is paid: sizes of metadata and categories, and an expiry
        // already past (a deletion) only for a credential that may delete.
        let probe: Vec<NewMemory> = request
            .messages
            .iter()
            .filter(|message| message.role != MessageRole::System)
            .map(|message| request.new_memory(message))
            .collect();
        let mut errors = NewMemory::batch_limit_errors(&probe);
        if request
            .expires_at
            .is_some_and(|expires_at| expires_at <= Utc::now())
            && !principal.may(Operation::DeleteMemory)
        {
            errors.push(FieldError::new(
                "expires_at",
                "is in the past, which would delete the memory: that needs the `memories:delete` scope",
            ));
        }
        if !errors.is_empty() {
            return Err(InvalidInput(errors).into());
        }
        let settings = self.governance.project_settings(principal.scope()).await?;
        let client_vectors = settings.embedding.client_dimension().is_some();
        if request.infer && self.llm_model().is_some() && !client_vectors {
            return self.remember_with_llm(principal, request).await;
        }
        let note = request.infer.then(|| {
            if client_vectors {
                "stored verbatim: this project sends its own vectors, so Engram cannot embed what an LLM would extract".to_string()
            } else {
                "stored verbatim: no LLM is configured on this server (ENGRAM_LLM_*), so nothing was inferred".to_string()
            }
        });
        let memories = self.remember_verbatim(principal, request).await?;
        Ok(RememberedMessages {
            method: RememberMethod::Verbatim,
            note,
            memories,
            changes: Vec::new(),
        })
    }

    /// Each non-system message one memory; a message said twice in the call is kept once.
    async fn remember_verbatim(
        &self,
        principal: &Principal,
        request: RememberMessagesRequest,
    ) -> Result<Vec<Memory>, EngineError> {
        let mut seen = HashSet::new();
        let memories: Vec<NewMemory> = request
            .messages
            .iter()
            .filter(|message| message.role != MessageRole::System)
            .filter(|message| seen.insert(content_digest(message.content.trim())))
            .map(|message| request.new_memory(message))
            .collect();
        if memories.is_empty() {
            return Err(InvalidInput::single(
                "messages",
                "holds only system messages: there is nothing to remember",
            )
            .into());
        }
        let outcome = self
            .add_memories_for(
                principal,
                AddMemoriesRequest {
                    memories,
                    client_vectors: None,
                    idempotency: None,
                    wait_for_index: true,
                    run_id: None,
                },
                |_| (201, String::new()),
            )
            .await?;
        match outcome {
            AddOutcome::Stored { memories, .. } => Ok(memories),
            // Without an idempotency key there is nothing to replay.
            AddOutcome::Replayed { .. } | AddOutcome::AnswerErased => Err(EngineError::Internal(
                "a write without a key was replayed".to_string(),
            )),
        }
    }

    async fn remember_with_llm(
        &self,
        principal: &Principal,
        request: RememberMessagesRequest,
    ) -> Result<RememberedMessages, EngineError> {
        let scope = principal.scope();
        // Already the token's own end-user (`remember_messages_for` confined it).
        let user_id = request.user_id.clone();
        // Masked (or refused) before anything is sent to the LLM.
        let mut contents: Vec<String> = request
            .messages
            .iter()
            .map(|message| message.content.clone())
            .collect();
        self.governance
            .redact_personal_data(scope, &mut contents, |index| {
                format!("messages[{index}].content")
            })
            .await?;
        self.spend_guard
            .admit(
                scope,
                &crate::derivation::planned_derivation_spend(request.messages.len(), true),
            )
            .await?;
        let batch_id = uuid::Uuid::now_v7();
        let now = Utc::now();
        let sent_at = request.occurred_at.unwrap_or(now).min(now);
        // Read, not stored: Mem0's add keeps what is learned, not the conversation.
        let messages: Vec<SessionMessage> = request
            .messages
            .iter()
            .zip(contents)
            .map(|(message, content)| SessionMessage {
                id: uuid::Uuid::now_v7(),
                session_id: request
                    .session_id
                    .as_ref()
                    .map(|id| id.as_str().to_string())
                    .unwrap_or_default(),
                user_id: user_id.as_ref().map(|id| id.as_str().to_string()),
                agent_id: request.agent_id.as_ref().map(|id| id.as_str().to_string()),
                role: message.role.as_str().to_string(),
                name: None,
                content,
                memory_key: None,
                sent_at,
                created_at: now,
                batch_id,
            })
            .collect();
        let attribution = principal.usage_attribution().for_subject(
            user_id.as_ref().map(ExternalId::as_str),
            request.agent_id.as_ref().map(ExternalId::as_str),
        );
        let derivation = self
            .derive_memories(
                scope,
                DerivationInput {
                    messages: &messages,
                    earlier: &[],
                    attribution: &attribution,
                    batch_id,
                    may_delete: principal.may(Operation::DeleteMemory),
                    metadata: &request.metadata,
                    categories: &request.categories,
                    expires_at: request.expires_at,
                    visibility: request.visibility,
                    shared_with: request.shared_with.clone(),
                },
                principal.actor(),
            )
            .await?;
        // LLM tokens were billed with each call's record; what was written and embedded
        // here, through the meter (never failing the answer once the memories are stored).
        for (unit, quantity) in [
            (UsageUnit::MemoriesWritten, derivation.memories_written),
            (UsageUnit::TokensEmbedded, derivation.tokens_embedded),
        ] {
            self.meter.record(scope, &attribution, unit, quantity);
        }
        // What the changes wrote or changed, as it now stands (a deleted one is gone).
        let written: Vec<engram_core::MemoryId> = derivation
            .changes
            .iter()
            .filter_map(|change| change.memory_id)
            .collect();
        let mut found = self
            .storage
            .memories_by_id(principal.memory_scope(), &written)
            .await?;
        let mut memories: Vec<Memory> = written
            .iter()
            .filter_map(|memory_id| found.remove(memory_id))
            .filter(|memory| memory.state != engram_core::MemoryState::Deleted)
            .collect();
        let mut changes = derivation.changes;
        if principal.answers_without_content(Operation::AddMemories) {
            memories = memories.into_iter().map(Memory::without_content).collect();
            // The LLM's reasons may quote the memories it compared with.
            for change in &mut changes {
                change.content = None;
                change.reason = String::new();
            }
        }
        Ok(RememberedMessages {
            method: RememberMethod::Llm,
            note: None,
            memories,
            changes,
        })
    }
}
