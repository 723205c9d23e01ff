//! A file's status and the memories it became.

use crate::{EngineError, MemoryEngine};
use engram_core::{Operation, Principal};
use engram_storage::files::FileRecord;

impl MemoryEngine {
    pub async fn get_file_for(
        &self,
        principal: &Principal,
        file_id: uuid::Uuid,
    ) -> Result<FileRecord, EngineError> {
        principal.authorize(Operation::GetFile)?;
        self.visible_file(principal, file_id).await
    }
}
