//! Session state (run memory): versioned JSON values per session and key, so a long task
//! resumes from its last checkpoint and two writers never silently overwrite. Each
//! end-user of a session has a namespace of its own: an end-user token addresses its
//! user's, a project key the `user_id` it names, and without one the values of no end-user.

mod delete_session_state;
mod get_session_state;
mod list_session_state;
mod put_session_state;

pub use put_session_state::{MAX_STATE_VALUE_BYTES, PutSessionStateRequest};

use crate::EngineError;
use engram_core::{ExternalId, Principal};

/// One value's address as the caller gave it: the session, the key, and the end-user
/// namespace it asked for (an end-user token may only name its own).
#[derive(Clone, Debug)]
pub struct SessionStateAddress {
    pub session_id: ExternalId,
    pub key: ExternalId,
    pub user_id: Option<ExternalId>,
}

/// The namespace the caller may address: for an end-user token only (and always) its own.
fn namespace(
    principal: &Principal,
    requested: Option<ExternalId>,
) -> Result<Option<ExternalId>, EngineError> {
    Ok(principal.end_user_subject(requested, "user_id")?)
}
