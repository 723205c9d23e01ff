//! The re-embedding runner: claims `reembedding` tasks, each moving one project's memories to
//! the embedding model it changes to while searches keep the old one, then switching at once.
//! It embeds, so it runs where the engine does (serve and gateway).

use engram_engine::MemoryEngine;
use engram_engine::jobs::REEMBEDDING_LEASE;
use std::sync::Arc;
use tokio::sync::watch;

pub async fn run_reembedding_runner(engine: Arc<MemoryEngine>, shutdown: watch::Receiver<bool>) {
    crate::tasks::serve_tasks(
        engine.maintenance_store().clone(),
        engine.task_queued(),
        &[engram_core::TaskKind::Reembedding],
        REEMBEDDING_LEASE,
        shutdown,
        |task| {
            let engine = engine.clone();
            async move { engine.run_reembedding_task(&task).await }
        },
    )
    .await;
}
