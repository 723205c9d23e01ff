//! Recall quality: the recorded search events, their metrics, and the retrieval profiles
//! searches run with (each change makes the recorder reread the project's profiles).

mod get_recall_event;
mod inspect_recall_event;
mod list_recall_events;
mod recall_metrics;
mod retrieval_profiles;

pub use inspect_recall_event::RecallInspection;
pub use list_recall_events::ListRecallEventsRequest;
pub use retrieval_profiles::PutRetrievalProfileRequest;
