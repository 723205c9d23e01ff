//! Background tasks as they are stored and reported: what kind of work a task is and where
//! it stands. The text of each value is what the database holds and the API shows.
use chrono::{DateTime, Utc};
use uuid::Uuid;

text_enum!(
    /// The work a queued task does.
    TaskKind {
        SubjectErasure => "subject_erasure",
        OrganizationSubjectErasure => "organization_subject_erasure",
        Consolidation => "consolidation",
        EvaluationRun => "evaluation_run",
        FileIngest => "file_ingest",
        MessageDerivation => "message_derivation",
        Reembedding => "reembedding",
    }
);

text_enum!(
    /// Where a task (or an evaluation run) stands.
    TaskStatus {
        Queued => "queued",
        Running => "running",
        Succeeded => "succeeded",
        Failed => "failed",
    }
);

impl TaskStatus {
    /// Queued or running: the work is still to be done.
    pub fn is_open(self) -> bool {
        matches!(self, TaskStatus::Queued | TaskStatus::Running)
    }

    /// Succeeded or failed: nothing more will happen.
    pub fn is_finished(self) -> bool {
        !self.is_open()
    }
}

/// A task as the API shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskRecord {
    pub id: Uuid,
    pub kind: TaskKind,
    pub status: TaskStatus,
    pub progress_done: i64,
    pub progress_total: i64,
    pub result: Option<serde_json::Value>,
    pub error: Option<String>,
    pub request_id: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}
