//! Evaluation runs: a set's labelled queries searched against the live project with one
//! retrieval profile (or two, compared case by case with confidence intervals), scored as
//! hit@k, recall@k, MRR and nDCG@k with latency, and flagged as a regression when a figure
//! fell by more than the set's threshold since the previous run of the same profile.

use crate::profiles::{DEFAULT_PROFILE, SearchTuning};
use crate::search::SearchRequest;
use crate::{EngineError, MemoryEngine};
use engram_core::NotFoundKind;
use engram_core::recall::{CaseOutcome, nearest_rank_percentile, paired_difference};
use engram_core::{ExternalId, MemoryKind, ProjectScope, SubjectFilter};
use engram_storage::recall_quality::{
    EvalCaseRecord, EvalRunOutcome, EvalRunRecord, EvalSetRecord,
};
use serde::Serialize;
use serde_json::{Value, json};
use std::time::Instant;

/// Who evaluation runs are billed to in usage: the project's evaluation, not a caller.
pub const EVALUATION_CREDENTIAL: &str = "system:evaluation";

/// How one labelled query fared.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CaseResult {
    pub case_id: String,
    pub query: String,
    /// 1-based rank of the first relevant result within k; `null` when none.
    pub first_relevant_rank: Option<usize>,
    pub hit: f64,
    pub recall: f64,
    pub reciprocal_rank: f64,
    pub ndcg: f64,
    pub latency_ms: f64,
}

/// One profile's figures over a set.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EvaluationMetrics {
    pub profile: String,
    pub k: usize,
    pub cases: usize,
    pub hit_at_1: f64,
    pub hit_at_k: f64,
    pub recall_at_k: f64,
    pub mrr: f64,
    pub ndcg_at_k: f64,
    pub latency_p50_ms: Option<f64>,
    pub latency_p95_ms: Option<f64>,
    pub per_case: Vec<CaseResult>,
}

/// The figures compared for regressions, by name.
pub const COMPARED_FIGURES: [&str; 4] = ["hit_at_k", "recall_at_k", "mrr", "ndcg_at_k"];

impl EvaluationMetrics {
    fn figure(&self, name: &str) -> f64 {
        match name {
            "hit_at_k" => self.hit_at_k,
            "recall_at_k" => self.recall_at_k,
            "mrr" => self.mrr,
            _ => self.ndcg_at_k,
        }
    }
}

fn normalized(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

/// Ranks of the relevant results (a result is relevant when its id is expected or its
/// content contains an expected text, ignoring case and spacing) and how many targets the
/// case names.
pub fn case_outcome(case: &EvalCaseRecord, results: &[(String, String)]) -> CaseOutcome {
    let expected_contents: Vec<String> = case
        .case
        .expected_contents
        .iter()
        .map(|text| normalized(text))
        .collect();
    let relevant_ranks = results
        .iter()
        .enumerate()
        .filter(|(_, (id, content))| {
            let content = normalized(content);
            case.case.expected_memory_ids.contains(id)
                || expected_contents
                    .iter()
                    .any(|expected| content.contains(expected.as_str()))
        })
        .map(|(position, _)| position + 1)
        .collect();
    CaseOutcome {
        relevant_ranks,
        relevant_total: case.case.expected_memory_ids.len() + case.case.expected_contents.len(),
    }
}

fn search_request(
    case: &EvalCaseRecord,
    k: usize,
    tuning: &SearchTuning,
) -> Result<SearchRequest, EngineError> {
    let filters = &case.case.filters;
    let parse_id = |value: Option<&str>, field: &str| -> Result<Option<ExternalId>, EngineError> {
        value
            .map(|text| {
                ExternalId::parse(text)
                    .map_err(|message| engram_core::InvalidInput::single(field, message).into())
            })
            .transpose()
    };
    let kinds = filters["kinds"]
        .as_array()
        .map(|kinds| {
            kinds
                .iter()
                .filter_map(|kind| kind.as_str()?.parse::<MemoryKind>().ok())
                .collect()
        })
        .unwrap_or_default();
    let session_id = parse_id(filters["session_id"].as_str(), "filters.session_id")?;
    let mut request = SearchRequest {
        query: case.case.query.clone(),
        subject: SubjectFilter {
            user_id: parse_id(case.case.user_id.as_deref(), "user_id")?,
            agent_id: parse_id(case.case.agent_id.as_deref(), "agent_id")?,
            session_id: session_id.clone(),
        },
        session_only: session_id.is_some(),
        kinds,
        filters: engram_core::request_bodies::eval_case_memory_filter(filters, "filters")
            .map_err(engram_core::InvalidInput)?,
        top_k: k,
        query_vector: case.case.query_vector.clone(),
        ..SearchRequest::default()
    };
    tuning.apply(&mut request);
    Ok(request)
}

impl MemoryEngine {
    /// The tuning a profile name stands for (`default`: none).
    pub(crate) async fn profile_tuning(
        &self,
        scope: &ProjectScope,
        profile: &str,
    ) -> Result<SearchTuning, EngineError> {
        if profile == DEFAULT_PROFILE {
            return Ok(SearchTuning::default());
        }
        let stored = self
            .storage
            .retrieval_profile(scope, profile)
            .await?
            .ok_or_else(|| {
                engram_core::InvalidInput::single(
                    "profile",
                    format!("no retrieval profile named {profile:?} in this project"),
                )
            })?;
        SearchTuning::parse(&stored.parameters, "parameters")
            .map_err(|errors| engram_core::InvalidInput(errors).into())
    }

    /// Search every case of a set with one profile and score the answers.
    pub(crate) async fn evaluate_profile(
        &self,
        scope: &ProjectScope,
        set: &EvalSetRecord,
        cases: &[EvalCaseRecord],
        profile: &str,
        mut progress: impl FnMut(usize),
    ) -> Result<EvaluationMetrics, EngineError> {
        let tuning = self.profile_tuning(scope, profile).await?;
        // The floors every door's search gets, unless the profile asks for a cut-off: an
        // evaluation measures the search agents get.
        let (relevance_floor, unmentioned_name_floor) = match tuning.min_score {
            Some(_) => (0.0, 0.0),
            None => self.relevance_floors_of(scope).await?,
        };
        let k = set.k.max(1) as usize;
        let mut per_case = Vec::with_capacity(cases.len());
        let mut latencies_micros = Vec::with_capacity(cases.len());
        let mut outcomes = Vec::with_capacity(cases.len());
        let evaluation_attribution =
            engram_core::usage::UsageAttribution::engine(EVALUATION_CREDENTIAL);
        for (position, case) in cases.iter().enumerate() {
            let mut request = search_request(case, k, &tuning)?;
            request.relevance_floor = relevance_floor;
            request.unmentioned_name_floor = unmentioned_name_floor;
            let started = Instant::now();
            let outcome = self
                .search(&engram_core::MemoryScope::project_wide(*scope), request)
                .await?;
            let micros = started.elapsed().as_micros() as u64;
            self.meter.record(
                scope,
                &evaluation_attribution,
                engram_core::usage::UsageUnit::Searches,
                1,
            );
            self.meter.record(
                scope,
                &evaluation_attribution,
                engram_core::usage::UsageUnit::TokensEmbedded,
                outcome.tokens_embedded,
            );
            latencies_micros.push(micros);
            let results: Vec<(String, String)> = outcome
                .results
                .iter()
                .map(|hit| (hit.memory.id.to_string(), hit.memory.content.clone()))
                .collect();
            let case_outcome = case_outcome(case, &results);
            per_case.push(CaseResult {
                case_id: case.id.to_string(),
                query: case.case.query.clone(),
                first_relevant_rank: case_outcome
                    .relevant_ranks
                    .iter()
                    .copied()
                    .filter(|rank| *rank <= k)
                    .min(),
                hit: case_outcome.hit_at(k),
                recall: case_outcome.recall_at(k).min(1.0),
                reciprocal_rank: case_outcome.reciprocal_rank(k),
                ndcg: case_outcome.ndcg_at(k).min(1.0),
                latency_ms: micros as f64 / 1000.0,
            });
            outcomes.push(case_outcome);
            progress(position + 1);
        }
        let count = cases.len().max(1) as f64;
        let mean =
            |value: &dyn Fn(&CaseResult) -> f64| per_case.iter().map(value).sum::<f64>() / count;
        latencies_micros.sort_unstable();
        let percentile = |p: f64| {
            nearest_rank_percentile(&latencies_micros, p).map(|micros| micros as f64 / 1000.0)
        };
        Ok(EvaluationMetrics {
            profile: profile.to_string(),
            k,
            cases: cases.len(),
            hit_at_1: outcomes
                .iter()
                .map(|outcome| outcome.hit_at(1))
                .sum::<f64>()
                / count,
            hit_at_k: mean(&|case| case.hit),
            recall_at_k: mean(&|case| case.recall),
            mrr: mean(&|case| case.reciprocal_rank),
            ndcg_at_k: mean(&|case| case.ndcg),
            latency_p50_ms: percentile(50.0),
            latency_p95_ms: percentile(95.0),
            per_case,
        })
    }

    /// Run a queued evaluation: its profile (and the one it is compared with), the
    /// comparison, and the regression check against the previous run of the profile.
    pub(crate) async fn run_evaluation(
        &self,
        scope: &ProjectScope,
        run: &EvalRunRecord,
        mut progress: impl FnMut(usize, usize),
    ) -> Result<EvalRunOutcome, EngineError> {
        let set = self
            .storage
            .eval_set(scope, run.set_id)
            .await?
            .ok_or(EngineError::NotFound(NotFoundKind::EvaluationSet))?;
        let cases = self.storage.eval_cases(scope, run.set_id).await?;
        if cases.is_empty() {
            return Err(
                engram_core::InvalidInput::single("cases", "the set has no cases to run").into(),
            );
        }
        let profiles = 1 + usize::from(run.compare_profile.is_some());
        let total = cases.len() * profiles;
        // Every case is a search like any other: admitted against the project's limits
        // before the run, metered as it goes (a scheduled run has no caller to refuse, so
        // it fails naming the limit).
        self.spend_guard
            .admit(
                scope,
                &[
                    engram_core::usage::PlannedSpend {
                        unit: engram_core::usage::UsageUnit::Searches,
                        quantity: total as u64,
                    },
                    engram_core::usage::PlannedSpend {
                        unit: engram_core::usage::UsageUnit::TokensEmbedded,
                        quantity: 1,
                    },
                ],
            )
            .await?;
        let primary = self
            .evaluate_profile(scope, &set, &cases, &run.profile, |done| {
                progress(done, total)
            })
            .await?;
        let comparison = match &run.compare_profile {
            Some(other) => {
                let compared = self
                    .evaluate_profile(scope, &set, &cases, other, |done| {
                        progress(cases.len() + done, total)
                    })
                    .await?;
                Some(compare(&primary, &compared))
            }
            None => None,
        };
        let previous = self
            .storage
            .previous_succeeded_eval_run(scope, run.set_id, &run.profile, run.id)
            .await?;
        let mut regression_reasons = Vec::new();
        if let Some(previous_metrics) = previous.as_ref().and_then(|run| run.metrics.as_ref()) {
            for figure in COMPARED_FIGURES {
                let Some(before) = previous_metrics[figure].as_f64() else {
                    continue;
                };
                let now = primary.figure(figure);
                if before - now > set.regression_threshold {
                    regression_reasons.push(format!(
                        "{figure} fell from {before:.3} to {now:.3} (threshold {:.3})",
                        set.regression_threshold
                    ));
                }
            }
        }
        let mut metrics = serde_json::to_value(&primary)
            .map_err(|error| EngineError::Internal(error.to_string()))?;
        if let Some(previous) = &previous {
            metrics["baseline_run_id"] = json!(previous.id.to_string());
        }
        Ok(EvalRunOutcome {
            metrics,
            comparison,
            regression: !regression_reasons.is_empty(),
            regression_reasons,
        })
    }
}

/// Two profiles over the same cases: each figure's mean difference (second − first) with
/// its 95 % confidence interval over the paired cases.
pub fn compare(first: &EvaluationMetrics, second: &EvaluationMetrics) -> Value {
    let per_case = |metrics: &EvaluationMetrics, pick: fn(&CaseResult) -> f64| -> Vec<f64> {
        metrics.per_case.iter().map(pick).collect()
    };
    type Figure = (&'static str, fn(&CaseResult) -> f64);
    let figures: [Figure; 4] = [
        ("hit_at_k", |case| case.hit),
        ("recall_at_k", |case| case.recall),
        ("mrr", |case| case.reciprocal_rank),
        ("ndcg_at_k", |case| case.ndcg),
    ];
    let mut differences = serde_json::Map::new();
    for (name, pick) in figures {
        if let Some(difference) = paired_difference(&per_case(first, pick), &per_case(second, pick))
        {
            differences.insert(
                name.to_string(),
                json!({
                    "first": first.figure(name),
                    "second": second.figure(name),
                    "difference": difference.mean,
                    "ci95_low": difference.low,
                    "ci95_high": difference.high,
                    // An interval that excludes zero: the difference is unlikely to be noise.
                    "significant": difference.low > 0.0 || difference.high < 0.0,
                }),
            );
        }
    }
    json!({
        "first_profile": first.profile,
        "second_profile": second.profile,
        "cases": first.cases,
        "second_metrics": second,
        "differences": differences,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use engram_storage::recall_quality::NewEvalCase;

    fn case(ids: &[&str], contents: &[&str]) -> EvalCaseRecord {
        EvalCaseRecord {
            id: uuid::Uuid::now_v7(),
            case: NewEvalCase {
                query: "q".into(),
                user_id: None,
                agent_id: None,
                filters: json!({}),
                expected_memory_ids: ids.iter().map(|id| id.to_string()).collect(),
                expected_contents: contents.iter().map(|text| text.to_string()).collect(),
                query_vector: None,
            },
        }
    }

    #[test]
    fn results_match_by_id_or_by_contained_text() {
        let results = vec![
            ("m1".to_string(), "Lena drinks green tea".to_string()),
            ("m2".to_string(), "Lena   rides a BLUE bicycle".to_string()),
        ];
        let outcome = case_outcome(&case(&[], &["blue bicycle"]), &results);
        assert_eq!(outcome.relevant_ranks, vec![2]);
        let outcome = case_outcome(&case(&["m1"], &[]), &results);
        assert_eq!(outcome.relevant_ranks, vec![1]);
        assert_eq!(
            case_outcome(&case(&["m9"], &[]), &results).relevant_ranks,
            Vec::<usize>::new()
        );
    }
}
