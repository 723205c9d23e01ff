//! Add cases to a set (at most [`MAX_CASES_PER_SET`] in all) and list them.

use super::MAX_CASES_PER_SET;
use crate::{EngineError, MemoryEngine};
use engram_core::{FieldError, InvalidInput, Operation, Principal};
use engram_storage::recall_quality::{EvalCaseRecord, EvalSetRecord, NewEvalCase};

impl MemoryEngine {
    pub async fn add_evaluation_cases_for(
        &self,
        principal: &Principal,
        set_id: uuid::Uuid,
        cases: Vec<NewEvalCase>,
    ) -> Result<EvalSetRecord, EngineError> {
        principal.authorize(Operation::AddEvaluationCases)?;
        let set = self.evaluation_set(principal, set_id).await?;
        if set.cases + cases.len() as u64 > MAX_CASES_PER_SET {
            return Err(InvalidInput(vec![FieldError::new(
                "cases",
                format!(
                    "a set holds at most {MAX_CASES_PER_SET} cases; it has {}",
                    set.cases
                ),
            )])
            .into());
        }
        self.storage
            .add_eval_cases(principal.scope(), set.id, cases)
            .await
            .map_err(crate::use_cases::conflict_on_refusal)
    }

    pub async fn list_evaluation_cases_for(
        &self,
        principal: &Principal,
        set_id: uuid::Uuid,
    ) -> Result<Vec<EvalCaseRecord>, EngineError> {
        principal.authorize(Operation::ListEvaluationCases)?;
        let set = self.evaluation_set(principal, set_id).await?;
        Ok(self.storage.eval_cases(principal.scope(), set.id).await?)
    }
}
