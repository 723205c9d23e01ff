//! Add messages to a session; with derivation on, the spend is admitted first and the
//! caller may wait (bounded) for the derived memories.

use crate::{EngineError, MemoryEngine};
use engram_core::{ExternalId, Operation, Principal};
use engram_storage::conversations::{DerivationRequest, MessageBatch, NewMessage, SessionMessage};
use engram_storage::tasks::TaskRecord;
use std::time::Duration;

/// Longest a caller waits for the derived memories before the answer says "in progress".
pub const DERIVATION_WAIT: Duration = Duration::from_secs(20);
const DERIVATION_POLL: Duration = Duration::from_millis(20);

pub struct AddMessagesRequest {
    pub session_id: ExternalId,
    pub user_id: Option<ExternalId>,
    pub agent_id: Option<ExternalId>,
    pub messages: Vec<NewMessage>,
    /// `None`: the project's setting.
    pub derive_memories: Option<bool>,
    /// Wait (up to [`DERIVATION_WAIT`]) for the derivation to finish.
    pub wait: bool,
}

impl MemoryEngine {
    /// The stored messages and the derivation task, if one was queued (as it stands when
    /// the wait ended).
    pub async fn add_messages_for(
        &self,
        principal: &Principal,
        request: AddMessagesRequest,
    ) -> Result<(Vec<SessionMessage>, Option<TaskRecord>), EngineError> {
        principal.authorize(Operation::AddMessages)?;
        let contents: Vec<&str> = request
            .messages
            .iter()
            .map(|message| message.content.as_str())
            .collect();
        let limit_errors = engram_core::conversation::message_batch_errors(&contents);
        if !limit_errors.is_empty() {
            return Err(engram_core::InvalidInput(limit_errors).into());
        }
        let scope = principal.scope();
        let mut request = request;
        let user_id = principal.end_user_subject(request.user_id.take(), "user_id")?;
        request.agent_id = principal.agent_subject(request.agent_id.take(), "agent_id")?;
        let mut messages = request.messages;
        // Masked (or refused) before anything is stored or sent to an LLM.
        let mut contents: Vec<String> = messages
            .iter()
            .map(|message| message.content.clone())
            .collect();
        self.governance
            .redact_personal_data(scope, &mut contents, |index| {
                format!("messages[{index}].content")
            })
            .await?;
        for (message, content) in messages.iter_mut().zip(contents) {
            message.content = content;
        }
        // A project that sends its own vectors cannot have memories derived here (they need
        // an embedding): its messages are only stored, and asking for derivation is refused.
        let settings = self.governance.project_settings(scope).await?;
        let client_vectors = settings.embedding.client_dimension().is_some();
        let derive = match request.derive_memories {
            Some(true) if client_vectors => {
                return Err(EngineError::EmbeddingUnavailable(
                    "this project sends its own vectors: Engram cannot embed memories derived from messages; store the messages with derive_memories: false and add memories with their vectors".to_string(),
                ));
            }
            Some(derive) => derive,
            None => settings.derive_memories && !client_vectors,
        };
        if derive {
            let planned = crate::derivation::planned_derivation_spend(
                messages.len(),
                self.llm_model().is_some(),
            );
            self.spend_guard.admit(scope, &planned).await?;
        }
        // The derivation keeps who pays as a label; the end-user and agent come back from
        // the batch's messages.
        let billing_label = principal.usage_attribution().billing_label();
        let (stored, task) = self
            .storage
            .append_session_messages(
                scope,
                MessageBatch {
                    session_id: request.session_id,
                    user_id,
                    agent_id: request.agent_id,
                    messages,
                },
                derive.then_some(DerivationRequest {
                    credential: billing_label.as_str(),
                    may_delete: principal.may(Operation::DeleteMemory),
                }),
                principal.actor().request_id.as_deref(),
            )
            .await?;
        let mut task = task;
        if let Some(queued) = &task {
            self.governance.task_queued.notify_waiters();
            if request.wait {
                task = Some(self.wait_for_derivation(principal, queued.id).await?);
            }
        }
        // The derivation's result holds what the memories now say (merged with what was
        // stored before): content, for readers only.
        if principal.answers_without_content(Operation::AddMessages)
            && let Some(result) = task.as_mut().and_then(|task| task.result.as_mut())
        {
            crate::use_cases::strip_content_fields(result);
        }
        Ok((stored, task))
    }

    async fn wait_for_derivation(
        &self,
        principal: &Principal,
        task_id: uuid::Uuid,
    ) -> Result<TaskRecord, EngineError> {
        let deadline = tokio::time::Instant::now() + DERIVATION_WAIT;
        loop {
            let task = self
                .storage
                .task(principal.scope(), task_id)
                .await?
                .ok_or_else(|| EngineError::Internal("the derivation task vanished".to_string()))?;
            let finished = task.status.is_finished();
            if finished || tokio::time::Instant::now() >= deadline {
                return Ok(task);
            }
            tokio::time::sleep(DERIVATION_POLL).await;
        }
    }
}
