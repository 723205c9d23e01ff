//! A subject's export as the API and the console both hand it out: NDJSON, one typed line
//! per record, in the shapes the API's own reads use.

use crate::routes::feedback::FeedbackView;
use crate::routes::files::FileView;
use crate::routes::messages::MessageView;
use crate::routes::recall_quality::RecallEventView;
use crate::routes::sessions::SessionStateView;
use crate::views::{HistoryEntryView, MemoryView};
use chrono::Utc;
use engram_engine::SubjectExport;
use serde::Serialize;
use serde_json::json;
use utoipa::ToSchema;

/// A subject export as NDJSON: one line per memory (with its history), message, state value,
/// file, feedback, recall, run (with its steps) and evaluation case, each with its `type`.
pub fn subject_export_ndjson(user_id: &str, exported: &SubjectExport) -> String {
    let mut lines = String::new();
    let mut line = |value: serde_json::Value| {
        lines.push_str(&value.to_string());
        lines.push('\n');
    };
    for item in &exported.memories {
        let view = ExportedMemoryView {
            memory: MemoryView::from(&item.memory),
            history: item
                .history
                .iter()
                .cloned()
                .map(HistoryEntryView::from)
                .collect(),
        };
        let mut value = serde_json::to_value(&view).unwrap_or_default();
        value["type"] = json!("memory");
        line(value);
    }
    let typed = |kind: &str, view: serde_json::Value| json!({ "type": kind, kind: view });
    for message in &exported.messages {
        line(typed("message", json!(MessageView::from(message.clone()))));
    }
    for entry in &exported.session_state {
        line(typed("state", json!(SessionStateView::from(entry.clone()))));
    }
    for file in &exported.files {
        line(typed("file", json!(FileView::from(file.clone()))));
    }
    for feedback in &exported.feedback {
        line(typed(
            "feedback",
            json!(FeedbackView::from(feedback.clone())),
        ));
    }
    for recall in &exported.recalls {
        line(typed(
            "recall",
            json!(RecallEventView::from(recall.clone())),
        ));
    }
    for (run, steps) in &exported.runs {
        let mut view = json!(crate::routes::runs::RunView::now(run.clone()));
        view["steps"] = json!(
            steps
                .iter()
                .cloned()
                .map(crate::routes::runs::RunStepView::from)
                .collect::<Vec<_>>()
        );
        line(typed("run", view));
    }
    for (set_id, case) in &exported.evaluation_cases {
        line(typed(
            "evaluation_case",
            json!({
                "id": case.id.to_string(),
                "set_id": set_id.to_string(),
                "query": case.case.query,
                "user_id": case.case.user_id,
                "agent_id": case.case.agent_id,
                "filters": case.case.filters,
                "expected_memory_ids": case.case.expected_memory_ids,
                "expected_contents": case.case.expected_contents,
            }),
        ));
    }
    for (run_id, result) in &exported.evaluation_results {
        let mut view = result.clone();
        view["run_id"] = json!(run_id.to_string());
        line(typed("evaluation_result", view));
    }
    let mut summary = exported.counts();
    summary.insert("user_id".to_string(), json!(user_id));
    summary.insert("exported_at".to_string(), json!(Utc::now()));
    line(json!({ "summary": summary }));
    lines
}

/// One exported memory: the memory and its full history.
#[derive(Debug, Serialize, ToSchema)]
pub struct ExportedMemoryView {
    pub memory: MemoryView,
    pub history: Vec<HistoryEntryView>,
}
