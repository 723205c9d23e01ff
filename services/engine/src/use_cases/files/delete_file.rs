//! Delete a file with the memories it became; refused while it is still being ingested.

use crate::{EngineError, MemoryEngine};
use engram_core::{Operation, Principal};

impl MemoryEngine {
    pub async fn delete_file_for(
        &self,
        principal: &Principal,
        file_id: uuid::Uuid,
    ) -> Result<(), EngineError> {
        principal.authorize(Operation::DeleteFile)?;
        let file = self.visible_file(principal, file_id).await?;
        // A credential bound to agents deletes its agents' files (and the memories they
        // became) only: one of no agent is read by every agent, deleted by none of them.
        crate::use_cases::refuse_other_agents_row(
            principal,
            file.agent_id.as_deref(),
            &format!("file {file_id}"),
        )?;
        if file.status.is_in_progress() {
            return Err(EngineError::InProgress(
                "the file is still being ingested; delete it once its task has finished"
                    .to_string(),
            ));
        }
        for memory_id in &file.memory_ids {
            match self
                .delete_memory(principal.scope(), *memory_id, principal.actor())
                .await
            {
                Ok(()) | Err(EngineError::NotFound(_)) => {}
                Err(error) => return Err(error),
            }
        }
        self.storage
            .delete_file_record(principal.scope(), file.id)
            .await?;
        Ok(())
    }
}
