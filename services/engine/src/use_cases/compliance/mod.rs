//! Compliance work on a project: memory flags (immutable, legal hold), subject erasure and
//! export, the status of the tasks they queue, retention previews and consolidation.

mod export_subject;
mod get_task;
mod preview_retention;
mod request_consolidation;
mod request_subject_erasure;
mod set_memory_flags;

pub use set_memory_flags::{MAX_FLAG_REASON_CHARS, SetMemoryFlagsRequest};
