//! Files ingested as memories in the background: upload, status, delete. A file of another
//! end-user does not exist for an end-user token.

mod delete_file;
mod get_file;
mod upload_file;

pub use upload_file::UploadFileRequest;

use crate::{EngineError, MemoryEngine};
use engram_core::NotFoundKind;
use engram_core::Principal;
use engram_storage::files::FileRecord;

impl MemoryEngine {
    /// The file, if it exists for this caller.
    async fn visible_file(
        &self,
        principal: &Principal,
        file_id: uuid::Uuid,
    ) -> Result<FileRecord, EngineError> {
        let file = self
            .storage
            .file(principal.memory_scope(), file_id)
            .await?
            .ok_or(EngineError::NotFound(NotFoundKind::File))?;
        Ok(file)
    }
}
