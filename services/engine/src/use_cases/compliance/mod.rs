//! Compliance work on a project: memory flags (immutable, legal hold), subject erasure and
//! export, the status of the tasks they queue, retention previews and consolidation.

mod bulk_delete_memories;
mod export_subject;
mod find_subjects;
mod get_task;
mod preview_retention;
mod record_content_view;
mod request_consolidation;
mod request_organization_subject_erasure;
mod request_subject_erasure;
mod set_memory_flags;
mod summarize_subject;
mod sweep_retention;

/// A person's confirmation of an erasure, where their door asks for one (the console: "type
/// the end-user id again"); `None` where it does not (the API). A confirmation that does not
/// repeat the id refuses the erasure.
fn check_erasure_confirmation(
    user_id: &engram_core::ExternalId,
    confirmation: Option<&str>,
) -> Result<(), crate::EngineError> {
    match confirmation {
        Some(typed) if typed.trim() != user_id.as_str() => {
            Err(engram_core::InvalidInput(vec![engram_core::FieldError::new(
                "confirm",
                "type the end-user id again to confirm the erasure",
            )])
            .into())
        }
        _ => Ok(()),
    }
}

pub use bulk_delete_memories::{
    BulkDeleteOutcome, BulkDeletePreview, DeleteMatchingOutcome, DeleteMatchingRequest,
    MAX_BULK_DELETE,
};
pub use find_subjects::{FindSubjectsRequest, MAX_SUBJECT_MATCHES, SubjectMatch};
pub use preview_retention::RetentionPreview;
pub use set_memory_flags::{MAX_FLAG_REASON_CHARS, SetMemoryFlagsRequest};
pub use summarize_subject::{PastErasure, SubjectSummary};
