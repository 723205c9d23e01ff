//! Page through a session's messages, oldest first, in the caller's end-user namespace.

use crate::{EngineError, MemoryEngine};
use engram_core::{ExternalId, Operation, Principal};
use engram_storage::conversations::SessionMessage;

pub struct ListMessagesRequest {
    pub session_id: ExternalId,
    pub user_id: Option<ExternalId>,
    /// Exclusive: the page starts after this message.
    pub after: Option<uuid::Uuid>,
    pub limit: u64,
}

impl MemoryEngine {
    /// A page and the cursor of the next one.
    pub async fn list_messages_for(
        &self,
        principal: &Principal,
        request: ListMessagesRequest,
    ) -> Result<(Vec<SessionMessage>, Option<uuid::Uuid>), EngineError> {
        principal.authorize(Operation::ListMessages)?;
        let limit_errors = engram_core::conversation::message_page_errors(request.limit);
        if !limit_errors.is_empty() {
            return Err(engram_core::InvalidInput(limit_errors).into());
        }
        let end_user = principal.end_user_subject(request.user_id, "user_id")?;
        Ok(self
            .storage
            .session_messages(
                principal.memory_scope(),
                request.session_id.as_str(),
                end_user.as_ref().map(ExternalId::as_str),
                request.after,
                request.limit,
            )
            .await?)
    }
}
