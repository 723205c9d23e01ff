//! Create an evaluation set, optionally with its first cases.

use crate::{EngineError, MemoryEngine};
use engram_core::limits::MAX_TOP_K;
use engram_core::{FieldError, InvalidInput, Operation, Principal};
use engram_storage::recall_quality::{EvalSetRecord, NewEvalCase, NewEvalSet};

/// Cases a set holds at most.
pub const MAX_CASES_PER_SET: u64 = 10_000;
/// Shortest schedule of an evaluation set (5 minutes) and longest (30 days).
pub const MIN_SCHEDULE_SECS: u64 = 300;
pub const MAX_SCHEDULE_SECS: u64 = 30 * 24 * 3600;
/// Evaluation sets a project holds at most, and how many of them may run on a schedule:
/// one admin cannot make the shared workers search without end for one project.
pub const MAX_SETS_PER_PROJECT: usize = 1_000;
pub const MAX_SCHEDULED_SETS_PER_PROJECT: usize = 5;

pub struct CreateEvaluationSetRequest {
    pub name: String,
    /// 1–[`MAX_TOP_K`]; default 10.
    pub k: Option<i64>,
    /// 0–1; default 0.05.
    pub regression_threshold: Option<f64>,
    pub schedule_interval_secs: Option<u64>,
    pub profile: Option<String>,
    /// Parsed by the door from its wire format.
    pub cases: Vec<NewEvalCase>,
}

impl MemoryEngine {
    pub async fn create_evaluation_set_for(
        &self,
        principal: &Principal,
        request: CreateEvaluationSetRequest,
    ) -> Result<EvalSetRecord, EngineError> {
        principal.authorize(Operation::CreateEvaluationSet)?;
        let mut errors = Vec::new();
        // Counted as sent (the published `maxLength`), before surrounding space is trimmed.
        let too_long = request.name.chars().count() > 128;
        let name = request.name.trim().to_string();
        if name.is_empty() || too_long {
            errors.push(FieldError::new("name", "must be 1–128 characters"));
        }
        let k = request.k.unwrap_or(10);
        if !(1..=MAX_TOP_K as i64).contains(&k) {
            errors.push(FieldError::new("k", format!("must be 1–{MAX_TOP_K}")));
        }
        let threshold = request.regression_threshold.unwrap_or(0.05);
        if !(0.0..=1.0).contains(&threshold) {
            errors.push(FieldError::new(
                "regression_threshold",
                "must be between 0 and 1",
            ));
        }
        if let Some(seconds) = request.schedule_interval_secs
            && !(MIN_SCHEDULE_SECS..=MAX_SCHEDULE_SECS).contains(&seconds)
        {
            errors.push(FieldError::new(
                "schedule_interval_secs",
                format!("must be {MIN_SCHEDULE_SECS}–{MAX_SCHEDULE_SECS} seconds"),
            ));
        }
        if request.cases.len() as u64 > MAX_CASES_PER_SET {
            errors.push(FieldError::new(
                "cases",
                format!("a set holds at most {MAX_CASES_PER_SET} cases"),
            ));
        }
        if !errors.is_empty() {
            return Err(InvalidInput(errors).into());
        }
        let existing = self.storage.eval_sets(principal.scope()).await?;
        if existing.len() >= MAX_SETS_PER_PROJECT {
            return Err(InvalidInput(vec![FieldError::new(
                "name",
                format!("a project holds at most {MAX_SETS_PER_PROJECT} evaluation sets"),
            )])
            .into());
        }
        let scheduled = existing
            .iter()
            .filter(|set| set.schedule_interval_secs.is_some())
            .count();
        if request.schedule_interval_secs.is_some() && scheduled >= MAX_SCHEDULED_SETS_PER_PROJECT {
            return Err(InvalidInput(vec![FieldError::new(
                "schedule_interval_secs",
                format!(
                    "a project runs at most {MAX_SCHEDULED_SETS_PER_PROJECT} evaluation sets on a schedule"
                ),
            )])
            .into());
        }
        if !request.cases.is_empty() {
            // Cases probe content: creating a set with them needs what adding them needs.
            principal.authorize(Operation::AddEvaluationCases)?;
        }
        if let Some(profile) = &request.profile {
            self.check_profile_exists(principal, profile, "profile")
                .await?;
        }
        self.storage
            .create_eval_set(
                principal.scope(),
                NewEvalSet {
                    name,
                    k: k as u32,
                    regression_threshold: threshold,
                    schedule_interval_secs: request.schedule_interval_secs,
                    profile: request.profile,
                },
                request.cases,
            )
            .await
            .map_err(crate::use_cases::conflict_on_refusal)
    }
}
