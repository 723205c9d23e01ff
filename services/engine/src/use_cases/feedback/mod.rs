//! Feedback on recall: a rating (`relevant`, `not_relevant`, `wrong`) of a memory or of a
//! search answer, with optional words; a `wrong` rating with a correction in words is
//! applied by the LLM when one is configured. Feedback is about what the caller may see: a
//! memory or recall of another end-user does not exist for an end-user token.

mod give_memory_feedback;
mod give_recall_feedback;
mod list_memory_feedback;
mod list_recall_feedback;

use crate::{EngineError, MemoryEngine};
use engram_core::NotFoundKind;
use engram_core::limits::MAX_REASON_CHARS;
use engram_core::usage::{PlannedSpend, UsageUnit};
use engram_core::{FieldError, InvalidInput, Memory, MemoryId, Operation, Principal};
use engram_storage::feedback::{FeedbackRecord, NewFeedback};
use engram_storage::recall_quality::RecallEventRecord;

pub const FEEDBACK_RATINGS: [&str; 3] = ["relevant", "not_relevant", "wrong"];

/// A rating and its words, as the caller sent them.
#[derive(Clone, Debug)]
pub struct FeedbackRequest {
    pub rating: String,
    pub text: Option<String>,
    /// The agent run the feedback belongs to: it appears in the run's timeline.
    pub run_id: Option<uuid::Uuid>,
}

impl FeedbackRequest {
    /// The words trimmed (none when blank), or every field error.
    fn parse(self, errors: &mut Vec<FieldError>) -> (String, Option<String>) {
        if !FEEDBACK_RATINGS.contains(&self.rating.as_str()) {
            errors.push(FieldError::new(
                "rating",
                format!("must be one of: {}", FEEDBACK_RATINGS.join(", ")),
            ));
        }
        let text = self
            .text
            .map(|text| text.trim().to_string())
            .filter(|text| !text.is_empty());
        if let Some(text) = &text
            && text.chars().count() > MAX_REASON_CHARS
        {
            errors.push(FieldError::new(
                "text",
                format!("at most {MAX_REASON_CHARS} characters"),
            ));
        }
        (self.rating, text)
    }
}

fn refuse_if_any(errors: Vec<FieldError>) -> Result<(), EngineError> {
    if errors.is_empty() {
        Ok(())
    } else {
        Err(InvalidInput(errors).into())
    }
}

impl MemoryEngine {
    /// The memory, if this caller may see it; `NotFound(Memory)` otherwise.
    async fn feedback_memory(
        &self,
        principal: &Principal,
        memory_id: MemoryId,
    ) -> Result<Memory, EngineError> {
        self.visible_memory(principal, memory_id).await
    }

    /// The recall event, if the project records them (`None` when it does not) and this
    /// caller may see it; `NotFound(Recall)` otherwise.
    async fn known_recall(
        &self,
        principal: &Principal,
        recall_id: uuid::Uuid,
    ) -> Result<Option<RecallEventRecord>, EngineError> {
        let scope = principal.scope();
        let settings = self.recall_events.settings_of(scope).await;
        if settings.capture == engram_core::recall::RecallEventCapture::Off {
            return Ok(None);
        }
        let memory_scope = principal.memory_scope();
        let mut found = self.storage.recall_event(memory_scope, recall_id).await?;
        if found.is_none() {
            // Feedback may follow its search faster than the event is written.
            self.recall_events.flush().await;
            found = self.storage.recall_event(memory_scope, recall_id).await?;
        }
        let event = found.ok_or(EngineError::NotFound(NotFoundKind::Recall))?;
        Ok(Some(event))
    }

    /// Store the feedback; a `wrong` rating of a memory with words is first applied by the
    /// LLM (paid for like any LLM call, and deleting only with what deleting needs). It
    /// belongs to the memory's end-user, else the rated search's (`recall_user`), else the
    /// token's, so export and erasure find it with the person.
    #[allow(clippy::too_many_arguments)]
    async fn record_feedback(
        &self,
        principal: &Principal,
        memory: Option<Memory>,
        recall_id: Option<uuid::Uuid>,
        recall_user: Option<String>,
        rating: String,
        text: Option<String>,
        run_id: Option<uuid::Uuid>,
    ) -> Result<FeedbackRecord, EngineError> {
        let scope = principal.scope();
        let feedback_user = memory
            .as_ref()
            .and_then(|memory| memory.user_id.as_ref())
            .map(|user_id| user_id.as_str().to_string())
            .or(recall_user.clone())
            .or_else(|| principal.end_user().map(|user| user.as_str().to_string()));
        // A run that cannot take the step refuses the feedback before anything changes.
        let run = self
            .run_to_link(principal, run_id, &[feedback_user.as_deref()])
            .await?;
        let attribution = principal.usage_attribution().for_subject(
            memory
                .as_ref()
                .and_then(|memory| memory.user_id.as_ref())
                .map(|id| id.as_str())
                .or(recall_user.as_deref()),
            memory
                .as_ref()
                .and_then(|memory| memory.agent_id.as_ref())
                .map(|id| id.as_str()),
        );
        let mut correction = None;
        // A correction changes the memory: only for a caller that may change it (a credential
        // bound to agents rates another agent's shared memory without correcting it).
        let may_correct = memory.as_ref().is_some_and(|memory| {
            principal.may_change_agents_row(memory.agent_id.as_ref().map(|id| id.as_str()))
        });
        if let (Some(memory), Some(text), "wrong", true, true) = (
            &memory,
            &text,
            rating.as_str(),
            self.llm_model().is_some(),
            may_correct,
        ) {
            self.spend_guard
                .admit(
                    scope,
                    &[
                        PlannedSpend {
                            unit: UsageUnit::LlmTokensIn,
                            quantity: 1,
                        },
                        PlannedSpend {
                            unit: UsageUnit::TokensEmbedded,
                            quantity: 1,
                        },
                    ],
                )
                .await?;
            if let Some((change, tokens_embedded)) = self
                .correct_memory(
                    scope,
                    memory,
                    text,
                    &attribution,
                    principal.may(Operation::DeleteMemory),
                    principal.actor(),
                )
                .await?
            {
                self.meter.record(
                    scope,
                    &attribution,
                    UsageUnit::TokensEmbedded,
                    tokens_embedded,
                );
                correction = Some(serde_json::json!({
                    "action": change.action.as_str(),
                    "memory_id": change.memory_id.map(|id| id.to_string()),
                    "content": change.content,
                    "reason": change.reason,
                }));
            }
        }
        let mut recorded = self
            .storage
            .record_feedback(
                scope,
                NewFeedback {
                    memory_id: memory.as_ref().map(|memory| memory.id),
                    recall_id,
                    user_id: memory
                        .as_ref()
                        .and_then(|memory| memory.user_id.as_ref())
                        .map(|user_id| user_id.as_str().to_string())
                        .or(recall_user)
                        .or_else(|| principal.end_user().map(|user| user.as_str().to_string())),
                    rating,
                    text,
                    credential: attribution.credential.clone(),
                    correction,
                    agent_id: principal
                        .acting_agent()
                        .map(|agent| agent.as_str().to_string()),
                },
            )
            .await?;
        if let Some(run) = &run {
            self.record_linked_step(
                principal,
                run,
                engram_core::runs::RunStepType::Feedback,
                serde_json::json!({
                    "feedback_id": recorded.id.to_string(),
                    "memory_id": recorded.memory_id.map(|id| id.to_string()),
                    "recall_id": recorded.recall_id.map(|id| id.to_string()),
                    "rating": recorded.rating,
                }),
                Vec::new(),
            )
            .await;
        }
        // The correction says what the memory now holds: content, for readers only.
        if principal.answers_without_content(Operation::GiveMemoryFeedback)
            && let Some(correction) = recorded.correction.as_mut()
        {
            crate::use_cases::strip_content_fields(correction);
        }
        Ok(recorded)
    }
}
