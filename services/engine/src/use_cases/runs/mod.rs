//! Agent runs: open a run for a task, record its steps (model calls with the memories they
//! were given, tool calls, notes), link the memory operations that name it, end it, and read
//! its timeline with every memory hydrated from what exists now.

mod add_run_step;
mod end_run;
mod get_run;
mod list_runs;
mod start_run;

pub use get_run::RunTimeline;
pub use list_runs::ListRunsRequest;

use crate::{EngineError, MemoryEngine};
use chrono::Utc;
use engram_core::runs::{MAX_RUN_STEPS, NewMemoryUse, RunRecord, RunStatus, RunStepType};
use engram_core::{NotFoundKind, Principal};
use engram_storage::runs::StepAppended;

impl MemoryEngine {
    /// The open run a linked call names, checked before the call changes anything: another
    /// project's or end-user's is missing; an ended, expired or full one is a conflict.
    ///
    /// A run is one end-user's (or no end-user's): every end-user the call is about
    /// (`subjects`, `None` for data of no end-user) must be the run's, so a timeline never
    /// names another end-user's memories, messages or state, and erasing an end-user erases
    /// every step about them.
    pub(crate) async fn run_to_link(
        &self,
        principal: &Principal,
        run_id: Option<uuid::Uuid>,
        subjects: &[Option<&str>],
    ) -> Result<Option<RunRecord>, EngineError> {
        let Some(run_id) = run_id else {
            return Ok(None);
        };
        let run = self.changeable_run(principal, run_id).await?;
        open_for_steps(&run)?;
        if subjects
            .iter()
            .any(|subject| *subject != run.user_id.as_deref())
        {
            return Err(engram_core::InvalidInput(vec![engram_core::FieldError::new(
                "run_id",
                match &run.user_id {
                    Some(_) => "is the run of another end-user than this call is about: a run links only calls about its own end-user",
                    None => "is a run of no end-user: it links only calls about no end-user",
                },
            )])
            .into());
        }
        Ok(Some(run))
    }

    /// The project's settings for runs (capture, trajectories), from the shared cache.
    pub(crate) async fn run_settings(
        &self,
        scope: &engram_core::ProjectScope,
    ) -> Result<engram_core::governance::ProjectSettings, EngineError> {
        Ok(self
            .spaces
            .settings_cache()
            .of(scope)
            .await?
            .settings
            .clone())
    }

    /// A run `principal` may see.
    pub(crate) async fn visible_run(
        &self,
        principal: &Principal,
        run_id: uuid::Uuid,
    ) -> Result<RunRecord, EngineError> {
        self.storage
            .run(principal.memory_scope(), run_id)
            .await?
            .ok_or(EngineError::NotFound(NotFoundKind::Run))
    }

    /// A run the caller may add steps to or end: one it sees, and for a credential bound to
    /// agents one of its agents' (a run of no agent is read by every agent, run by none).
    pub(crate) async fn changeable_run(
        &self,
        principal: &Principal,
        run_id: uuid::Uuid,
    ) -> Result<RunRecord, EngineError> {
        let run = self.visible_run(principal, run_id).await?;
        crate::use_cases::refuse_other_agents_row(
            principal,
            run.agent_id.as_deref(),
            &format!("run {run_id}"),
        )?;
        Ok(run)
    }

    /// Append a step to a run; a refusal says why.
    pub(crate) async fn append_step(
        &self,
        principal: &Principal,
        run_id: uuid::Uuid,
        step_type: RunStepType,
        detail: serde_json::Value,
        uses: Vec<NewMemoryUse>,
    ) -> Result<engram_core::runs::RunStepRecord, EngineError> {
        let appended = self
            .storage
            .append_run_step(
                &principal.memory_scope().for_changes(),
                run_id,
                step_type,
                detail,
                &uses,
                Utc::now(),
            )
            .await?;
        match appended {
            StepAppended::Appended(step) => Ok(*step),
            StepAppended::Closed(status) => Err(closed(run_id, status)),
            StepAppended::Full => Err(full(run_id)),
        }
    }

    /// Record the step a linked call (write, search, context, feedback) made in its run. The
    /// call's own work is done and acknowledged by then, so a run that closed in between
    /// loses the step (logged), never the work.
    pub(crate) async fn record_linked_step(
        &self,
        principal: &Principal,
        run: &RunRecord,
        step_type: RunStepType,
        detail: serde_json::Value,
        uses: Vec<NewMemoryUse>,
    ) {
        if let Err(error) = self
            .append_step(principal, run.id, step_type, detail, uses)
            .await
        {
            tracing::warn!(run_id = %run.id, step = step_type.as_str(), %error, "linked step not recorded");
        }
    }
}

/// A run that takes steps: open, not expired, not full.
fn open_for_steps(run: &RunRecord) -> Result<(), EngineError> {
    let status = run.status_at(Utc::now());
    if status != RunStatus::Open {
        return Err(closed(run.id, status));
    }
    if run.step_count >= MAX_RUN_STEPS {
        return Err(full(run.id));
    }
    Ok(())
}

fn closed(run_id: uuid::Uuid, status: RunStatus) -> EngineError {
    EngineError::Conflict(format!(
        "run {run_id} is {status}: it takes no more steps (a run expires after {} hours without one)",
        engram_core::runs::RUN_IDLE_EXPIRY_HOURS
    ))
}

fn full(run_id: uuid::Uuid) -> EngineError {
    EngineError::Conflict(format!(
        "run {run_id} holds {MAX_RUN_STEPS} steps, the most a run takes; start another run"
    ))
}
