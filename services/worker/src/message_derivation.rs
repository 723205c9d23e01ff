//! The message-derivation runner: claims `message_derivation` tasks, derives memories from
//! their batch of messages (LLM extraction and reconciliation, or verbatim without an LLM),
//! and bills what it wrote and embedded to whoever sent the messages. It needs the model
//! (and the LLM), so it runs where the engine does (serve and gateway).

use engram_engine::MemoryEngine;
use engram_engine::jobs::MESSAGE_DERIVATION_LEASE;
use std::sync::Arc;
use tokio::sync::watch;

pub async fn run_message_derivation_runner(
    engine: Arc<MemoryEngine>,
    shutdown: watch::Receiver<bool>,
) {
    crate::tasks::serve_tasks(
        engine.maintenance_store().clone(),
        engine.task_queued(),
        &[engram_core::TaskKind::MessageDerivation],
        MESSAGE_DERIVATION_LEASE,
        shutdown,
        |task| {
            let engine = engine.clone();
            async move { engine.run_message_derivation_task(&task).await }
        },
    )
    .await;
}
