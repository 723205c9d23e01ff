//! Upload a file: cut once to refuse an oversized one and to admit the spend before
//! anything is stored (the runner cuts again with the same pure function), confined to the
//! token's end-user, refused for a project that sends its own vectors (Engram embeds the
//! chunks), then queued for ingest.

use crate::{EngineError, MemoryEngine};
use engram_core::files::{
    CHUNK_TARGET_CHARS, FileFormat, FileName, MAX_CHUNKS_PER_FILE, MAX_FILE_BYTES, chunk_file,
};
use engram_core::usage::{PlannedSpend, UsageUnit};
use engram_core::{ExternalId, FieldError, InvalidInput, MemoryKind, Operation, Principal};
use engram_storage::files::{FileRecord, NewFile};
use engram_storage::tasks::TaskRecord;

pub struct UploadFileRequest {
    pub name: FileName,
    pub format: FileFormat,
    pub text: String,
    /// Its size as uploaded.
    pub bytes: usize,
    pub user_id: Option<ExternalId>,
    pub agent_id: Option<ExternalId>,
    pub session_id: Option<ExternalId>,
    pub kind: MemoryKind,
}

impl MemoryEngine {
    /// The file and its ingest task.
    pub async fn upload_file_for(
        &self,
        principal: &Principal,
        request: UploadFileRequest,
    ) -> Result<(FileRecord, TaskRecord), EngineError> {
        principal.authorize(Operation::UploadFile)?;
        // A door refuses to read a larger body (413); the rule is held here for every door.
        if request.bytes > MAX_FILE_BYTES || request.text.len() > MAX_FILE_BYTES {
            return Err(InvalidInput(vec![FieldError::new(
                "body",
                format!("a file holds at most {MAX_FILE_BYTES} bytes"),
            )])
            .into());
        }
        if request.text.trim().is_empty() {
            return Err(InvalidInput(vec![FieldError::new("body", "the file is empty")]).into());
        }
        // Up to 4 MiB of text: chunked on a blocking thread, not an async worker.
        let (format, text) = (request.format, request.text);
        let (text, chunk_count) = tokio::task::spawn_blocking(move || {
            let chunk_count = chunk_file(format, &text, CHUNK_TARGET_CHARS).len();
            (text, chunk_count)
        })
        .await
        .map_err(|error| EngineError::Internal(error.to_string()))?;
        let request = UploadFileRequest { text, ..request };
        if chunk_count > MAX_CHUNKS_PER_FILE {
            return Err(InvalidInput(vec![FieldError::new(
                "body",
                format!(
                    "the file would become {chunk_count} chunks; at most {MAX_CHUNKS_PER_FILE}"
                ),
            )])
            .into());
        }
        let mut request = request;
        let user_id = principal.end_user_subject(request.user_id.take(), "user_id")?;
        request.agent_id = principal.agent_subject(request.agent_id.take(), "agent_id")?;
        let scope = principal.scope();
        self.project_embedder(scope).await?;
        self.spend_guard
            .admit(
                scope,
                &[
                    PlannedSpend {
                        unit: UsageUnit::FileBytes,
                        quantity: request.bytes as u64,
                    },
                    PlannedSpend {
                        unit: UsageUnit::MemoriesWritten,
                        quantity: chunk_count as u64,
                    },
                    PlannedSpend {
                        unit: UsageUnit::TokensEmbedded,
                        quantity: 1,
                    },
                ],
            )
            .await?;
        let (file, task) = self
            .storage
            .create_file(
                scope,
                NewFile {
                    name: request.name,
                    format: request.format,
                    text: request.text,
                    user_id,
                    agent_id: request.agent_id,
                    session_id: request.session_id,
                    kind: request.kind,
                    credential: principal.usage_attribution().billing_label(),
                },
                principal.actor().request_id.as_deref(),
            )
            .await?;
        self.governance.task_queued.notify_waiters();
        Ok((file, task))
    }
}
