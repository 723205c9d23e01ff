//! The file-ingest runner: claims `file_ingest` tasks, cuts each file into chunks and stores
//! them as memories (`source = file`) in idempotent batches, so a runner that dies midway
//! is continued by the next claim without storing a chunk twice; bills what it ingested.
//! It needs the embedding model, so it runs where the engine does (serve and gateway).

use engram_engine::MemoryEngine;
use engram_engine::jobs::FILE_INGEST_LEASE;
use std::sync::Arc;
use tokio::sync::watch;

pub async fn run_file_ingest_runner(engine: Arc<MemoryEngine>, shutdown: watch::Receiver<bool>) {
    crate::tasks::serve_tasks(
        engine.maintenance_store().clone(),
        engine.task_queued(),
        &[engram_core::TaskKind::FileIngest],
        FILE_INGEST_LEASE,
        shutdown,
        |task| {
            let engine = engine.clone();
            async move { engine.run_file_ingest_task(&task).await }
        },
    )
    .await;
}
