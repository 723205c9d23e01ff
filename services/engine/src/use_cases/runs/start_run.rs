//! Open a run for a task: an end-user token opens runs of its own end-user only; a parent run
//! must be one the caller sees.

use crate::{EngineError, MemoryEngine};
use chrono::Utc;
use engram_core::runs::{RunRecord, StartRunRequest};
use engram_core::{Operation, Principal};
use engram_storage::runs::RunOpener;

impl MemoryEngine {
    pub async fn start_run_for(
        &self,
        principal: &Principal,
        request: StartRunRequest,
    ) -> Result<RunRecord, EngineError> {
        principal.authorize(Operation::StartRun)?;
        let mut request = request;
        request.user_id = principal.end_user_subject(request.user_id.take(), "user_id")?;
        request.agent_id = principal.agent_subject(request.agent_id.take(), "agent_id")?;
        if let Some(parent) = request.parent_run_id {
            let parent = self.visible_run(principal, parent).await?;
            if parent.user_id.as_deref() != request.user_id.as_ref().map(|id| id.as_str()) {
                return Err(engram_core::InvalidInput(vec![engram_core::FieldError::new(
                    "parent_run_id",
                    "is a run of another end-user: a sub-task's run is its parent's end-user's",
                )])
                .into());
            }
        }
        let attribution = principal.usage_attribution();
        let opener = RunOpener {
            credential: attribution.credential,
            channel: attribution.channel,
        };
        let run = self
            .storage
            .insert_run(principal.scope(), &request, &opener, Utc::now())
            .await?;
        Ok(if principal.answers_without_content(Operation::StartRun) {
            run.without_content()
        } else {
            run
        })
    }
}
