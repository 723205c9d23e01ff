//! Conversation history that becomes memories: add a session's messages (masked before
//! anything is stored or sent to an LLM, derived into memories in the background) and page
//! through them. Each end-user of a session sees only their own messages.

mod add_messages;
mod list_messages;

pub use add_messages::{AddMessagesRequest, DERIVATION_WAIT};
pub use list_messages::ListMessagesRequest;
