//! Record a client's step: a model call (its injected memories must be memories the caller
//! sees; each becomes a use at its current version), a tool call or a note. Texts are kept
//! only where the project's `run_capture` is `full`, SHA-256 digests otherwise.

use crate::{EngineError, MemoryEngine};
use chrono::Utc;
use engram_core::runs::{
    ClientStep, MemoryAtVersion, MemoryUseKind, NewMemoryUse, RunCapture, RunStepRecord,
    RunStepType, text_digest,
};
use engram_core::{FieldError, InvalidInput, Operation, Principal};

impl MemoryEngine {
    pub async fn add_run_step_for(
        &self,
        principal: &Principal,
        run_id: uuid::Uuid,
        step: ClientStep,
    ) -> Result<RunStepRecord, EngineError> {
        principal.authorize(Operation::AddRunStep)?;
        let run = self.changeable_run(principal, run_id).await?;
        let capture = self.run_settings(principal.scope()).await?.run_capture;
        let keep = |text: Option<String>| -> (Option<String>, Option<String>) {
            match text {
                None => (None, None),
                Some(text) => {
                    let digest = text_digest(&text);
                    let kept = (capture == RunCapture::Full).then_some(text);
                    (kept, Some(digest))
                }
            }
        };
        let (step_type, detail, uses) = match step {
            ClientStep::ModelCall {
                model,
                context_id,
                injected_memory_ids,
                tokens_in,
                tokens_out,
                prompt_digest,
                completion_digest,
                prompt,
                completion,
            } => {
                let found = self
                    .storage
                    .memories_by_id(principal.memory_scope(), &injected_memory_ids)
                    .await?;
                let missing: Vec<FieldError> = injected_memory_ids
                    .iter()
                    .enumerate()
                    .filter_map(|(position, id)| {
                        let field = format!("injected_memory_ids[{position}]");
                        match found.get(id) {
                            Some(memory) if memory.state != engram_core::MemoryState::Deleted => {
                                // A run is one end-user's: it is given that end-user's
                                // memories (and memories of no end-user) only.
                                let of_another = memory.user_id.is_some()
                                    && memory.user_id.as_ref().map(|id| id.as_str())
                                        != run.user_id.as_deref();
                                of_another.then(|| {
                                    FieldError::new(
                                        field,
                                        "is a memory of another end-user than the run's",
                                    )
                                })
                            }
                            _ => Some(FieldError::new(
                                field,
                                "no memory with this id in this project",
                            )),
                        }
                    })
                    .collect();
                if !missing.is_empty() {
                    return Err(InvalidInput(missing).into());
                }
                let injected: Vec<MemoryAtVersion> = injected_memory_ids
                    .iter()
                    .filter_map(|id| found.get(id))
                    .map(|memory| MemoryAtVersion {
                        memory_id: memory.id,
                        version: memory.version,
                    })
                    .collect();
                let now = Utc::now();
                let uses = injected
                    .iter()
                    .map(|memory| NewMemoryUse {
                        memory: *memory,
                        kind: MemoryUseKind::Injected,
                        used_at: now,
                        // The context is named in the step only: the client says which it
                        // used, and a use's recall must be one Engram recorded.
                        recall_id: None,
                        run_id: Some(run.id),
                        user_id: run.user_id.clone(),
                    })
                    .collect();
                let (prompt, prompt_text_digest) = keep(prompt);
                let (completion, completion_text_digest) = keep(completion);
                let detail = serde_json::json!({
                    "model": model,
                    "context_id": context_id.map(|id| id.to_string()),
                    "injected": injected.iter().map(|memory| memory.to_json()).collect::<Vec<_>>(),
                    "tokens_in": tokens_in,
                    "tokens_out": tokens_out,
                    "prompt_digest": prompt_digest.or(prompt_text_digest),
                    "completion_digest": completion_digest.or(completion_text_digest),
                    "prompt": prompt,
                    "completion": completion,
                });
                (RunStepType::ModelCall, detail, uses)
            }
            ClientStep::ToolCall {
                tool,
                arguments,
                result,
            } => {
                let (arguments, arguments_digest) = keep(arguments);
                let (result, result_digest) = keep(result);
                let detail = serde_json::json!({
                    "tool": tool,
                    "arguments": arguments,
                    "arguments_digest": arguments_digest,
                    "result": result,
                    "result_digest": result_digest,
                });
                (RunStepType::ToolCall, detail, Vec::new())
            }
            ClientStep::Note { text } => (
                RunStepType::Note,
                serde_json::json!({ "text": text }),
                Vec::new(),
            ),
        };
        self.append_step(principal, run.id, step_type, detail, uses)
            .await
    }
}
