//! The console's recall-quality page: the project's recall metrics over a date range, its
//! evaluation history, and one recall event with what became of its results. Query texts and
//! memory contents are shown only to roles that may read memory content.

use super::{GatewayConsoleBackend, engine_error};
use chrono::{Duration, NaiveDate, Utc};
use engram_console::model::NewEvaluationSetForm;
use engram_console::model::{
    ComparisonRow, EmptyQueryRow, EvaluationHistory, EvaluationPoint, ProfileComparison,
    ProfileRow, RecallBucket, RecallDashboard, RecallEventDetail, RecallTotals, RecalledMemoryRow,
};
use engram_console::{ConsoleCaller, ConsoleError};
use engram_core::MemoryId;
use engram_engine::recall_metrics::{MetricsBucket, MetricsWindow};

/// Runs per evaluation set drawn.
const RUNS_CHARTED: u64 = 60;

fn parse_day(text: &str, field: &str) -> Result<Option<NaiveDate>, ConsoleError> {
    if text.trim().is_empty() {
        return Ok(None);
    }
    let day = NaiveDate::parse_from_str(text.trim(), "%Y-%m-%d").map_err(|_| {
        ConsoleError::InvalidInput(format!("{field}: expected a day as YYYY-MM-DD"))
    })?;
    engram_core::validation::check_report_day(field, day)
        .map_err(|error| ConsoleError::InvalidInput(format!("{field}: {}", error.message)))?;
    Ok(Some(day))
}

impl GatewayConsoleBackend {
    /// A new evaluation set from the console's form: the same checks as the API's
    /// `POST /v1/eval-sets` and JSONL import.
    pub(super) async fn store_evaluation_set(
        &self,
        caller: &ConsoleCaller,
        form: NewEvaluationSetForm,
    ) -> Result<(), ConsoleError> {
        let (_, principal) = self
            .authorized_project(
                caller,
                &form.project_id,
                engram_core::Operation::CreateEvaluationSet,
            )
            .await?;
        // Syntax only: the name's length, `k`'s range and the schedule's bounds are the
        // use case's rules, the same for every door.
        let name = form.name.trim().to_string();
        let k = match form.k.trim() {
            "" => None,
            text => Some(text.parse::<i64>().map_err(|_| {
                ConsoleError::InvalidInput("k: a whole number, such as 10".to_string())
            })?),
        };
        let schedule_interval_secs = match form.schedule_hours.trim() {
            "" => None,
            text => Some(
                text.parse::<u64>()
                    .ok()
                    .and_then(|hours| hours.checked_mul(3600))
                    .ok_or_else(|| {
                        ConsoleError::InvalidInput(
                            "schedule: whole hours, or empty for on request only".to_string(),
                        )
                    })?,
            ),
        };
        let cases = engram_core::request_bodies::parse_jsonl_cases(&form.cases_jsonl).map_err(
            |errors| {
                ConsoleError::InvalidInput(
                    errors
                        .iter()
                        .map(|error| format!("{}: {}", error.field, error.message))
                        .collect::<Vec<_>>()
                        .join("; "),
                )
            },
        )?;
        let request = engram_engine::CreateEvaluationSetRequest {
            name,
            k,
            regression_threshold: None,
            schedule_interval_secs,
            profile: None,
            cases,
        };
        self.engine()?
            .create_evaluation_set_for(&principal, request)
            .await
            .map_err(engine_error)?;
        Ok(())
    }

    /// Queue a run of a set now, with the set's own profile.
    pub(super) async fn queue_evaluation_run(
        &self,
        caller: &ConsoleCaller,
        project_id: &str,
        set_id: &str,
    ) -> Result<(), ConsoleError> {
        let (_, principal) = self
            .authorized_project(
                caller,
                project_id,
                engram_core::Operation::StartEvaluationRun,
            )
            .await?;
        let set_id: uuid::Uuid = set_id.parse().map_err(|_| ConsoleError::NotFound)?;
        // The set's own profile; the same refusals as the API (no cases, unknown profile).
        self.engine()?
            .start_evaluation_run_for(&principal, set_id, Default::default())
            .await
            .map(|_| ())
            .map_err(engine_error)
    }

    pub(super) async fn build_recall_dashboard(
        &self,
        caller: &ConsoleCaller,
        project_id: &str,
        from: &str,
        to: &str,
    ) -> Result<RecallDashboard, ConsoleError> {
        let (member, principal) = self
            .authorized_project(caller, project_id, engram_core::Operation::GetRecallMetrics)
            .await?;
        let shows_content = principal.may(engram_core::Operation::GetMemory);
        let today = Utc::now().date_naive();
        let last_day = parse_day(to, "to")?.unwrap_or(today);
        let first_day = parse_day(from, "from")?.unwrap_or(last_day - Duration::days(6));
        let start = |day: NaiveDate| day.and_hms_opt(0, 0, 0).map(|at| at.and_utc());
        let (Some(window_from), Some(window_to)) =
            (start(first_day), start(last_day + Duration::days(1)))
        else {
            return Err(ConsoleError::InvalidInput(
                "from: not a valid day".to_string(),
            ));
        };
        let bucket = MetricsBucket::fitting(window_from, window_to);
        let engine = self.engine()?;
        let metrics = engine
            .recall_metrics_for(
                &principal,
                &MetricsWindow {
                    from: window_from,
                    to: window_to,
                    bucket,
                    profile: None,
                },
            )
            .await
            .map_err(engine_error)?;
        let label_format = match bucket {
            MetricsBucket::Hour => "%Y-%m-%d %H:00",
            MetricsBucket::Day => "%Y-%m-%d",
        };
        let buckets = metrics
            .buckets
            .iter()
            .map(|bucket| RecallBucket {
                label: bucket.start.format(label_format).to_string(),
                searches: bucket.figures.searches,
                empty_rate: bucket.figures.empty_rate,
                p50_ms: bucket.figures.latency.p50_ms,
                p95_ms: bucket.figures.latency.p95_ms,
                p99_ms: bucket.figures.latency.p99_ms,
                precision: bucket.precision,
            })
            .collect();
        let shown_query_recalls: Vec<String> = metrics
            .empty_queries
            .iter()
            .filter(|query| shows_content && query.query.is_some())
            .map(|query| query.last_recall_id.to_string())
            .collect();
        if !shown_query_recalls.is_empty() {
            engine
                .record_content_view_for(&principal, shown_query_recalls, "recall")
                .await
                .map_err(engine_error)?;
        }
        let empty_queries = metrics
            .empty_queries
            .iter()
            .map(|query| EmptyQueryRow {
                query: query.query.clone().filter(|_| shows_content),
                count: query.count,
                last_seen: query.last_seen.format("%Y-%m-%d %H:%M").to_string(),
                recall_id: query.last_recall_id.to_string(),
            })
            .collect();
        let profiles = metrics
            .profiles
            .iter()
            .map(|profile| ProfileRow {
                profile: profile.profile.clone(),
                searches: profile.figures.searches,
                empty_rate: profile.figures.empty_rate,
                p95_ms: profile.figures.latency.p95_ms,
                mean_top_score: profile.figures.mean_top_score,
                precision: profile.precision,
            })
            .collect();
        let mut evaluations = Vec::new();
        let sets = engine
            .list_evaluation_sets_for(&principal)
            .await
            .map_err(engine_error)?;
        for set in sets {
            let mut runs = engine
                .list_evaluation_runs_for(&principal, set.id)
                .await
                .map_err(engine_error)?;
            runs.truncate(RUNS_CHARTED as usize);
            // Newest first as read: the first run with a comparison is the newest one.
            let comparison = runs.iter().find_map(|run| {
                let comparison = run.comparison.as_ref()?;
                let rows = ["hit_at_k", "recall_at_k", "mrr", "ndcg_at_k"]
                    .iter()
                    .filter_map(|figure| {
                        let difference = &comparison["differences"][*figure];
                        Some(ComparisonRow {
                            figure: figure.to_string(),
                            first: difference["first"].as_f64()?,
                            second: difference["second"].as_f64()?,
                            difference: difference["difference"].as_f64()?,
                            low: difference["ci95_low"].as_f64()?,
                            high: difference["ci95_high"].as_f64()?,
                            significant: difference["significant"].as_bool().unwrap_or(false),
                        })
                    })
                    .collect();
                Some(ProfileComparison {
                    run_at: run.created_at.format("%Y-%m-%d %H:%M").to_string(),
                    first_profile: comparison["first_profile"].as_str()?.to_string(),
                    second_profile: comparison["second_profile"].as_str()?.to_string(),
                    rows,
                })
            });
            runs.reverse();
            let points = runs
                .into_iter()
                .filter(|run| run.status == engram_core::TaskStatus::Succeeded)
                .filter_map(|run| {
                    let metrics = run.metrics.as_ref()?;
                    Some(EvaluationPoint {
                        run_id: run.id.to_string(),
                        at: run.created_at.format("%Y-%m-%d %H:%M").to_string(),
                        profile: run.profile.clone(),
                        trigger: run.trigger.as_str().to_string(),
                        hit_at_k: metrics["hit_at_k"].as_f64()?,
                        mrr: metrics["mrr"].as_f64()?,
                        ndcg_at_k: metrics["ndcg_at_k"].as_f64()?,
                        regression: run.regression,
                        regression_reasons: run.regression_reasons.clone(),
                    })
                })
                .collect();
            evaluations.push(EvaluationHistory {
                set_id: set.id.to_string(),
                name: set.name,
                k: set.k,
                cases: set.cases,
                runs: points,
                comparison,
            });
        }
        let project_name = self
            .access
            .organization_projects(&member)
            .await
            .map_err(engine_error)?
            .into_iter()
            .find(|project| project.id == principal.scope().project_id())
            .map(|project| project.name)
            .unwrap_or_default();
        let totals = &metrics.totals;
        Ok(RecallDashboard {
            project_id: principal.scope().project_id().to_string(),
            project_name,
            from: first_day.to_string(),
            to: last_day.to_string(),
            bucket: match bucket {
                MetricsBucket::Hour => "hour".to_string(),
                MetricsBucket::Day => "day".to_string(),
            },
            totals: RecallTotals {
                searches: totals.searches,
                empty: totals.empty,
                empty_rate: totals.empty_rate,
                p50_ms: totals.latency.p50_ms,
                p95_ms: totals.latency.p95_ms,
                p99_ms: totals.latency.p99_ms,
                mean_top_score: totals.mean_top_score,
                ratings: metrics.feedback.ratings,
                precision: metrics.feedback.precision,
                recalled_memories: metrics.recalled_memories.distinct,
                superseded_or_corrected: metrics.recalled_memories.superseded_or_corrected,
                corrected_share: metrics.recalled_memories.share,
            },
            buckets,
            top_score_bins: metrics.top_score_histogram.bins.clone(),
            empty_queries,
            profiles,
            evaluations,
            shows_content,
            truncated: metrics.truncated,
        })
    }

    pub(super) async fn build_recall_event(
        &self,
        caller: &ConsoleCaller,
        project_id: &str,
        recall_id: &str,
    ) -> Result<RecallEventDetail, ConsoleError> {
        let (_, principal) = self
            .authorized_project(
                caller,
                project_id,
                engram_core::Operation::InspectRecallEvent,
            )
            .await?;
        let recall_id: uuid::Uuid = recall_id.parse().map_err(|_| ConsoleError::NotFound)?;
        let inspection = self
            .engine()?
            .inspect_recall_event_for(&principal, recall_id)
            .await
            .map_err(engine_error)?;
        let event = inspection.event;
        let mut results = Vec::new();
        for (position, result) in event
            .results
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .enumerate()
        {
            let Some(memory_id) = result["memory_id"].as_str() else {
                continue;
            };
            let id: Option<MemoryId> = memory_id.parse().ok();
            let fate = id.and_then(|id| inspection.fates.get(&id));
            let content = id.and_then(|id| inspection.contents.get(&id).cloned());
            results.push(RecalledMemoryRow {
                rank: result["rank"].as_u64().unwrap_or(position as u64 + 1) as u32,
                score: result["score"].as_f64().unwrap_or_default(),
                memory_id: memory_id.to_string(),
                content,
                state: fate.map_or_else(|| "gone".to_string(), |fate| fate.state.to_string()),
            });
        }
        let stages = ["embed", "dense", "keyword", "hydrate", "rank"]
            .iter()
            .map(|stage| {
                let micros = event.timings[format!("{stage}_micros")]
                    .as_u64()
                    .unwrap_or(0);
                (stage.to_string(), micros as f64 / 1000.0)
            })
            .collect();
        Ok(RecallEventDetail {
            project_id: principal.scope().project_id().to_string(),
            recall_id: event.id.to_string(),
            created_at: event.created_at.format("%Y-%m-%d %H:%M:%S").to_string(),
            query: event.query_text,
            user_id: event.user_id,
            agent_id: event.agent_id,
            session_id: event.session_id,
            profile: event.profile,
            retrieval: event.retrieval,
            filters: serde_json::to_string_pretty(&event.filters).unwrap_or_default(),
            results,
            total_ms: event.total_micros as f64 / 1000.0,
            stages,
            trace_id: event.trace_id,
            shows_content: inspection.shows_content,
        })
    }
}
