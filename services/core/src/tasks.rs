//! Background tasks as they are stored and reported: what kind of work a task is and where
//! it stands. The text of each value is what the database holds and the API shows.

text_enum!(
    /// The work a queued task does.
    TaskKind {
        SubjectErasure => "subject_erasure",
        OrganizationSubjectErasure => "organization_subject_erasure",
        Consolidation => "consolidation",
        EvaluationRun => "evaluation_run",
        FileIngest => "file_ingest",
        MessageDerivation => "message_derivation",
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
