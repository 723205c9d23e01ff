//! Start a run of a set (refused for a set without cases, or naming a profile the project
//! does not have) and read runs; per-case results only with `ReadMemories`.

use super::without_per_case_results_unless_readable;
use crate::profiles::DEFAULT_PROFILE;
use crate::{EngineError, MemoryEngine};
use engram_core::NotFoundKind;
use engram_core::recall::EvalTrigger;
use engram_core::{FieldError, InvalidInput, Operation, Principal};
use engram_storage::recall_quality::EvalRunRecord;
use engram_storage::tasks::TaskRecord;

/// Runs listed at most.
const MAX_RUNS_LISTED: u64 = 200;

#[derive(Clone, Debug, Default)]
pub struct StartEvaluationRunRequest {
    /// Default: the set's own profile, else `default`.
    pub profile: Option<String>,
    /// Run this profile too and compare.
    pub compare_profile: Option<String>,
}

impl MemoryEngine {
    pub async fn start_evaluation_run_for(
        &self,
        principal: &Principal,
        set_id: uuid::Uuid,
        request: StartEvaluationRunRequest,
    ) -> Result<(EvalRunRecord, TaskRecord), EngineError> {
        principal.authorize(Operation::StartEvaluationRun)?;
        let set = self.evaluation_set(principal, set_id).await?;
        if set.cases == 0 {
            return Err(InvalidInput(vec![FieldError::new(
                "cases",
                "the set has no cases to run",
            )])
            .into());
        }
        let profile = request
            .profile
            .or(set.profile.clone())
            .unwrap_or_else(|| DEFAULT_PROFILE.to_string());
        self.check_profile_exists(principal, &profile, "profile")
            .await?;
        if let Some(other) = &request.compare_profile {
            self.check_profile_exists(principal, other, "compare_profile")
                .await?;
        }
        let scope = principal.scope();
        // Refused at once when the project's limits would refuse the run's searches (the
        // runner admits them again when it starts, for runs the scheduler queues).
        let profiles = 1 + u64::from(request.compare_profile.is_some());
        self.spend_guard
            .admit(
                scope,
                &[
                    engram_core::usage::PlannedSpend {
                        unit: engram_core::usage::UsageUnit::Searches,
                        quantity: set.cases * profiles,
                    },
                    engram_core::usage::PlannedSpend {
                        unit: engram_core::usage::UsageUnit::TokensEmbedded,
                        quantity: 1,
                    },
                ],
            )
            .await?;
        let run = self
            .storage
            .queue_eval_run(
                scope,
                set.id,
                &profile,
                request.compare_profile.as_deref(),
                EvalTrigger::Manual,
                engram_core::TaskKind::EvaluationRun,
                principal.actor().request_id.as_deref(),
            )
            .await
            .map_err(crate::use_cases::conflict_on_refusal)?;
        self.governance.task_queued.notify_one();
        let task = self
            .storage
            .task(scope, run.task_id)
            .await?
            .ok_or(EngineError::NotFound(NotFoundKind::Task))?;
        Ok((run, task))
    }

    pub async fn list_evaluation_runs_for(
        &self,
        principal: &Principal,
        set_id: uuid::Uuid,
    ) -> Result<Vec<EvalRunRecord>, EngineError> {
        principal.authorize(Operation::ListEvaluationRuns)?;
        let set = self.evaluation_set(principal, set_id).await?;
        let mut runs = self
            .storage
            .eval_runs(principal.scope(), set.id, MAX_RUNS_LISTED)
            .await?;
        for run in &mut runs {
            without_per_case_results_unless_readable(principal, run);
        }
        Ok(runs)
    }

    pub async fn get_evaluation_run_for(
        &self,
        principal: &Principal,
        set_id: uuid::Uuid,
        run_id: uuid::Uuid,
    ) -> Result<EvalRunRecord, EngineError> {
        principal.authorize(Operation::GetEvaluationRun)?;
        let set = self.evaluation_set(principal, set_id).await?;
        let mut run = self
            .storage
            .eval_run(principal.scope(), run_id)
            .await?
            .filter(|run| run.set_id == set.id)
            .ok_or(EngineError::NotFound(NotFoundKind::EvaluationRun))?;
        without_per_case_results_unless_readable(principal, &mut run);
        Ok(run)
    }
}
