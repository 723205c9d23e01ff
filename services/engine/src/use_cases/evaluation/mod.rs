//! Evaluation sets and runs: labelled queries replayed against a retrieval profile, with
//! hit@k, MRR and regressions. A case is a probe of memory content (with expected texts,
//! or its own query against expected ids, hit@k tells whether a text is stored), so
//! writing, listing or seeing per-case results of cases needs `ReadMemories` too.

mod create_evaluation_set;
mod evaluation_cases;
mod evaluation_runs;

pub use create_evaluation_set::{
    CreateEvaluationSetRequest, MAX_CASES_PER_SET, MAX_SCHEDULE_SECS, MIN_SCHEDULE_SECS,
};
pub use evaluation_runs::StartEvaluationRunRequest;

use crate::profiles::DEFAULT_PROFILE;
use crate::{EngineError, MemoryEngine};
use engram_core::NotFoundKind;
use engram_core::{FieldError, InvalidInput, Operation, Principal};
use engram_storage::recall_quality::EvalSetRecord;

/// Per-case results are content (each quotes its query): left out for a caller without
/// `ReadMemories`, from the run's figures and from its comparison's second profile alike.
pub(crate) fn without_per_case_results_unless_readable(
    principal: &Principal,
    run: &mut engram_storage::recall_quality::EvalRunRecord,
) {
    if !principal.answers_without_content(Operation::GetEvaluationRun) {
        return;
    }
    for figures in [run.metrics.as_mut(), run.comparison.as_mut()]
        .into_iter()
        .flatten()
    {
        crate::use_cases::strip_content_fields(figures);
    }
}

impl MemoryEngine {
    /// The set, if it exists in the caller's project.
    async fn evaluation_set(
        &self,
        principal: &Principal,
        set_id: uuid::Uuid,
    ) -> Result<EvalSetRecord, EngineError> {
        self.storage
            .eval_set(principal.scope(), set_id)
            .await?
            .ok_or(EngineError::NotFound(NotFoundKind::EvaluationSet))
    }

    /// `field` names a profile of the project (or `default`).
    async fn check_profile_exists(
        &self,
        principal: &Principal,
        profile: &str,
        field: &str,
    ) -> Result<(), EngineError> {
        if profile == DEFAULT_PROFILE {
            return Ok(());
        }
        if self
            .storage
            .retrieval_profile(principal.scope(), profile)
            .await?
            .is_none()
        {
            return Err(InvalidInput(vec![FieldError::new(
                field,
                format!("no retrieval profile named {profile:?} in this project"),
            )])
            .into());
        }
        Ok(())
    }

    pub async fn list_evaluation_sets_for(
        &self,
        principal: &Principal,
    ) -> Result<Vec<EvalSetRecord>, EngineError> {
        principal.authorize(Operation::ListEvaluationSets)?;
        Ok(self.storage.eval_sets(principal.scope()).await?)
    }

    pub async fn get_evaluation_set_for(
        &self,
        principal: &Principal,
        set_id: uuid::Uuid,
    ) -> Result<EvalSetRecord, EngineError> {
        principal.authorize(Operation::GetEvaluationSet)?;
        self.evaluation_set(principal, set_id).await
    }
}
