//! End a run with its outcome. With `keep_trajectory` (or the project's `keep_trajectories`),
//! its tool steps become one `trajectory` memory — the task, the tools in order and the
//! outcome, with arguments and results only where they were kept as text — written through
//! the add use case, so it is validated, metered and audited like any write.

use crate::use_cases::AddMemoriesRequest;
use crate::{AddOutcome, EngineError, MemoryEngine};
use chrono::Utc;
use engram_core::runs::{EndRunRequest, RunRecord, RunStepRecord, RunStepType};
use engram_core::{ExternalId, MemoryKind, MemorySource, NewMemory, Operation, Principal};
use engram_storage::runs::RunEnded;

impl MemoryEngine {
    pub async fn end_run_for(
        &self,
        principal: &Principal,
        run_id: uuid::Uuid,
        request: EndRunRequest,
    ) -> Result<RunRecord, EngineError> {
        principal.authorize(Operation::EndRun)?;
        let run = self.changeable_run(principal, run_id).await?;
        let status = run.status_at(Utc::now());
        if status != engram_core::runs::RunStatus::Open {
            return Err(EngineError::Conflict(format!(
                "run {run_id} is {status} already"
            )));
        }
        let keep = match request.keep_trajectory {
            Some(keep) => keep,
            None => {
                self.run_settings(principal.scope())
                    .await?
                    .keep_trajectories
            }
        };
        // Ended first: of two ends at once, only the one that ended it keeps a trajectory.
        let mut run = match self
            .storage
            .end_run(
                principal.memory_scope(),
                run_id,
                &request.outcome,
                None,
                Utc::now(),
            )
            .await?
        {
            RunEnded::Ended(run) => *run,
            RunEnded::Closed(status) => {
                return Err(EngineError::Conflict(format!(
                    "run {run_id} is {status} already"
                )));
            }
        };
        if keep {
            let steps = self
                .storage
                .run_steps(principal.memory_scope(), run_id)
                .await?;
            if let Some(memory) = trajectory_of(&run, &steps, &request.outcome)
                && let Some(memory_id) = self.keep_trajectory(principal, memory).await?
            {
                self.storage
                    .set_run_trajectory(principal.memory_scope(), run_id, memory_id)
                    .await?;
                run.trajectory_memory_id = Some(memory_id);
            }
        }
        Ok(if principal.answers_without_content(Operation::EndRun) {
            run.without_content()
        } else {
            run
        })
    }

    async fn keep_trajectory(
        &self,
        principal: &Principal,
        memory: NewMemory,
    ) -> Result<Option<engram_core::MemoryId>, EngineError> {
        let outcome = self
            .add_memories_for(
                principal,
                AddMemoriesRequest {
                    memories: vec![memory],
                    client_vectors: None,
                    idempotency: None,
                    wait_for_index: false,
                    run_id: None,
                },
                |_| (201, String::new()),
            )
            .await?;
        Ok(match outcome {
            AddOutcome::Stored { memories, .. } => memories.first().map(|memory| memory.id),
            _ => None,
        })
    }
}

/// The trajectory memory of a run's tool steps; `None` for a run without one.
fn trajectory_of(run: &RunRecord, steps: &[RunStepRecord], outcome: &str) -> Option<NewMemory> {
    let tools: Vec<&RunStepRecord> = steps
        .iter()
        .filter(|step| step.step_type == RunStepType::ToolCall)
        .collect();
    if tools.is_empty() {
        return None;
    }
    let text = |step: &RunStepRecord, field: &str| {
        step.detail
            .get(field)
            .and_then(serde_json::Value::as_str)
            .map(str::to_string)
    };
    let names: Vec<String> = tools.iter().filter_map(|step| text(step, "tool")).collect();
    let mut content = format!(
        "Task: {}\nTools in order: {}\nOutcome: {outcome}",
        run.task,
        names.join(" → ")
    );
    for (position, step) in tools.iter().enumerate() {
        let arguments = text(step, "arguments");
        let result = text(step, "result");
        if arguments.is_none() && result.is_none() {
            continue;
        }
        content.push_str(&format!(
            "\n{}. {}({}) → {}",
            position + 1,
            text(step, "tool").unwrap_or_default(),
            arguments.unwrap_or_default(),
            result.unwrap_or_default()
        ));
    }
    // The memory holds at most what a memory may: the longest texts are cut at a boundary.
    let limit = engram_core::limits::MAX_CONTENT_BYTES;
    if content.len() > limit {
        let mut end = limit - 3;
        while !content.is_char_boundary(end) {
            end -= 1;
        }
        content.truncate(end);
        content.push('…');
    }
    let mut metadata = serde_json::Map::new();
    metadata.insert("run_id".into(), serde_json::json!(run.id.to_string()));
    metadata.insert("tools".into(), serde_json::json!(names));
    metadata.insert("outcome".into(), serde_json::json!(outcome));
    let id = |value: &Option<String>| value.as_deref().and_then(|id| ExternalId::parse(id).ok());
    Some(NewMemory {
        shared_with: None,
        user_id: id(&run.user_id),
        agent_id: id(&run.agent_id),
        session_id: id(&run.session_id),
        kind: MemoryKind::Trajectory,
        key: None,
        content,
        metadata,
        categories: Vec::new(),
        source: MemorySource::ToolResult,
        confidence: 1.0,
        expires_at: None,
        occurred_at: None,
        visibility: None,
    })
}
