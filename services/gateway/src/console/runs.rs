//! The console's Runs and Recalls pages and a memory's impact: each calls the same use case
//! as the API (`list_runs_for`, `get_run_for`, `list_recall_events_for`, `memory_impact_for`)
//! and shapes its answer for the page.

use super::{GatewayConsoleBackend, engine_error};
use engram_console::model::{
    IMPACT_DAYS, IMPACT_USES_SHOWN, ImpactUseRow, MemoryImpactSummary, RecallListQuery,
    RecallListing, RecallRow, RunListing, RunRow, RunStepRow, RunTimelineDetail, StepMemory,
};
use engram_console::{ConsoleCaller, ConsoleError};
use engram_core::runs::{DEFAULT_RUN_PAGE, RecallFilter, RunFilter, RunRecord, RunStatus};
use engram_core::{ExternalId, MemoryId, Operation, Principal};
use engram_engine::{ListRecallEventsRequest, ListRunsRequest, MemoryImpactRequest};

const TIME: &str = "%Y-%m-%d %H:%M:%S UTC";

fn invalid(field: &str, problem: impl std::fmt::Display) -> ConsoleError {
    ConsoleError::InvalidInput(format!("{field}: {problem}"))
}

fn external_id(text: Option<String>, field: &str) -> Result<Option<ExternalId>, ConsoleError> {
    text.map(|text| ExternalId::parse(&text).map_err(|problem| invalid(field, problem)))
        .transpose()
}

fn uuid(text: Option<String>, field: &str) -> Result<Option<uuid::Uuid>, ConsoleError> {
    text.map(|text| {
        text.parse()
            .map_err(|_| invalid(field, "expected an id as the API gives it"))
    })
    .transpose()
}

fn run_row(run: RunRecord) -> RunRow {
    let status = run.status_at(chrono::Utc::now());
    RunRow {
        run_id: run.id.to_string(),
        task: run.task,
        user_id: run.user_id,
        agent_id: run.agent_id,
        session_id: run.session_id,
        status: status.as_str().to_string(),
        outcome: run.outcome,
        created_at: run.created_at.format(TIME).to_string(),
        step_count: run.step_count,
        trajectory_memory_id: run.trajectory_memory_id.map(|id| id.to_string()),
    }
}

/// Every hydrated `{memory_id, version, …}` in a step's detail.
fn memories_in(value: &serde_json::Value, found: &mut Vec<StepMemory>) {
    match value {
        serde_json::Value::Object(fields) => {
            if let (Some(id), Some(version)) = (
                fields.get("memory_id").and_then(serde_json::Value::as_str),
                fields.get("version").and_then(serde_json::Value::as_i64),
            ) {
                let now = fields.get("now");
                found.push(StepMemory {
                    memory_id: id.to_string(),
                    version,
                    content_then: fields
                        .get("content_then")
                        .and_then(serde_json::Value::as_str)
                        .map(str::to_string),
                    now_version: now
                        .and_then(|now| now.get("version"))
                        .and_then(serde_json::Value::as_i64),
                    now_state: now
                        .and_then(|now| now.get("state"))
                        .and_then(serde_json::Value::as_str)
                        .map(str::to_string),
                    deleted: fields.get("deleted") == Some(&serde_json::Value::Bool(true)),
                });
                return;
            }
            fields.values().for_each(|item| memories_in(item, found));
        }
        serde_json::Value::Array(items) => items.iter().for_each(|item| memories_in(item, found)),
        _ => {}
    }
}

/// One line on what a step did, from its detail.
fn step_summary(step_type: &str, detail: &serde_json::Value) -> String {
    let text = |field: &str| detail.get(field).and_then(serde_json::Value::as_str);
    let number = |field: &str| detail.get(field).and_then(serde_json::Value::as_u64);
    match step_type {
        "model_call" => format!(
            "{} · {} tokens in, {} out",
            text("model").unwrap_or("model"),
            number("tokens_in").map_or("?".to_string(), |n| n.to_string()),
            number("tokens_out").map_or("?".to_string(), |n| n.to_string()),
        ),
        "tool_call" => text("tool").unwrap_or("tool").to_string(),
        "context" => format!(
            "{} of {} tokens",
            number("tokens").unwrap_or(0),
            number("token_budget").unwrap_or(0)
        ),
        "search" => format!(
            "{} results",
            detail
                .get("results")
                .and_then(serde_json::Value::as_array)
                .map_or(0, Vec::len)
        ),
        "feedback" => format!("rated {}", text("rating").unwrap_or("?")),
        "memory_write" => format!(
            "{} memories written",
            detail
                .get("memories")
                .and_then(serde_json::Value::as_array)
                .map_or(0, Vec::len)
        ),
        _ => String::new(),
    }
}

impl GatewayConsoleBackend {
    pub(super) async fn build_run_list(
        &self,
        caller: &ConsoleCaller,
        project_id: &str,
        user_id: Option<String>,
        status: Option<String>,
        before: Option<String>,
    ) -> Result<RunListing, ConsoleError> {
        let (_, principal) = self
            .authorized_project(caller, project_id, Operation::ListRuns)
            .await?;
        let status = status
            .map(|status| {
                status
                    .parse::<RunStatus>()
                    .map_err(|problem| invalid("status", problem))
            })
            .transpose()?;
        let (runs, next) = self
            .engine()?
            .list_runs_for(
                &principal,
                ListRunsRequest {
                    filter: RunFilter {
                        status,
                        ..RunFilter::default()
                    },
                    user_id: external_id(user_id, "user_id")?,
                    before: uuid(before, "before")?,
                    limit: DEFAULT_RUN_PAGE,
                },
            )
            .await
            .map_err(engine_error)?;
        Ok(RunListing {
            project_id: Some(project_id.to_string()),
            runs: runs.into_iter().map(run_row).collect(),
            next_cursor: next.map(|id| id.to_string()),
        })
    }

    pub(super) async fn build_run_timeline(
        &self,
        caller: &ConsoleCaller,
        project_id: &str,
        run_id: &str,
    ) -> Result<RunTimelineDetail, ConsoleError> {
        let (_, principal) = self
            .authorized_project(caller, project_id, Operation::GetRun)
            .await?;
        let run_id: uuid::Uuid = run_id.parse().map_err(|_| ConsoleError::NotFound)?;
        let timeline = self
            .engine()?
            .get_run_for(&principal, run_id)
            .await
            .map_err(engine_error)?;
        let steps = timeline
            .steps
            .into_iter()
            .map(|step| {
                let step_type = step.step_type.as_str().to_string();
                let mut memories = Vec::new();
                memories_in(&step.detail, &mut memories);
                let texts = ["prompt", "completion", "arguments", "result", "text"]
                    .into_iter()
                    .filter_map(|field| {
                        step.detail
                            .get(field)
                            .and_then(serde_json::Value::as_str)
                            .map(|text| (field.to_string(), text.to_string()))
                    })
                    .collect();
                let recall_id = ["recall_id", "context_id"].into_iter().find_map(|field| {
                    step.detail
                        .get(field)
                        .and_then(serde_json::Value::as_str)
                        .map(str::to_string)
                });
                RunStepRow {
                    seq: step.seq,
                    summary: step_summary(&step_type, &step.detail),
                    step_type,
                    at: step.created_at.format(TIME).to_string(),
                    texts,
                    memories,
                    recall_id,
                }
            })
            .collect();
        let mut run = run_row(timeline.run);
        run.status = timeline.status.as_str().to_string();
        Ok(RunTimelineDetail { run, steps })
    }

    pub(super) async fn build_recall_list(
        &self,
        caller: &ConsoleCaller,
        query: RecallListQuery,
    ) -> Result<RecallListing, ConsoleError> {
        let (_, principal) = self
            .authorized_project(caller, &query.project_id, Operation::ListRecallEvents)
            .await?;
        let memory_id = query
            .memory_id
            .map(|text| {
                text.parse::<MemoryId>()
                    .map_err(|_| invalid("memory_id", "expected a memory id"))
            })
            .transpose()?;
        let engine = self.engine()?;
        let (recalls, next) = engine
            .list_recall_events_for(
                &principal,
                ListRecallEventsRequest {
                    filter: RecallFilter {
                        session_id: query.session_id,
                        memory_id,
                        run_id: uuid(query.run_id, "run_id")?,
                        ..RecallFilter::default()
                    },
                    user_id: external_id(query.user_id, "user_id")?,
                    before: uuid(query.before, "before")?,
                    limit: DEFAULT_RUN_PAGE,
                },
            )
            .await
            .map_err(engine_error)?;
        // Query texts are content: who saw them is logged before they are shown.
        let shown: Vec<String> = recalls
            .iter()
            .filter(|recall| recall.query_text.is_some())
            .map(|recall| recall.id.to_string())
            .collect();
        engine
            .record_content_view_for(&principal, shown, "recalls")
            .await
            .map_err(engine_error)?;
        Ok(RecallListing {
            project_id: Some(query.project_id),
            recalls: recalls
                .into_iter()
                .map(|recall| RecallRow {
                    recall_id: recall.id.to_string(),
                    at: recall.created_at.format(TIME).to_string(),
                    user_id: recall.user_id,
                    session_id: recall.session_id,
                    purpose: recall.purpose,
                    profile: recall.profile,
                    result_count: recall.result_count,
                    top_score: recall.top_score,
                    run_id: recall.run_id.map(|id| id.to_string()),
                    query: recall.query_text,
                })
                .collect(),
            next_cursor: next.map(|id| id.to_string()),
        })
    }

    /// The memory page's impact: counts over the last [`IMPACT_DAYS`] days and the latest uses.
    pub(super) async fn memory_impact_summary(
        &self,
        principal: &Principal,
        memory_id: MemoryId,
    ) -> Result<MemoryImpactSummary, ConsoleError> {
        let impact = self
            .engine()?
            .memory_impact_for(
                principal,
                MemoryImpactRequest {
                    memory_id,
                    since: Some(chrono::Utc::now() - chrono::Duration::days(IMPACT_DAYS)),
                    before: None,
                    limit: IMPACT_USES_SHOWN,
                },
            )
            .await
            .map_err(engine_error)?;
        Ok(MemoryImpactSummary {
            recalls: impact.counts.recalls,
            contexts: impact.counts.contexts,
            runs: impact.counts.runs,
            uses: impact
                .uses
                .into_iter()
                .map(|used| ImpactUseRow {
                    kind: used.kind.as_str().to_string(),
                    version: used.version,
                    at: used.used_at.format(TIME).to_string(),
                    recall_id: used.recall_id.map(|id| id.to_string()),
                    run_id: used.run_id.map(|id| id.to_string()),
                    user_id: used.user_id,
                })
                .collect(),
        })
    }
}
