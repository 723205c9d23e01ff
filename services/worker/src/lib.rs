//! Background loops run beside the gateway (in-process for `engram serve`): the outbox
//! indexer, which applies pending index changes and retries them with backoff.

use engram_engine::IndexApplier;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// Entries applied per batch; each batch ends with one index flush.
pub const INDEXER_BATCH_SIZE: u64 = 256;
const IDLE_POLL: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// Apply every pending outbox entry now; returns how many were applied. Used at start-up
/// (replay after a crash) and at shutdown.
pub async fn drain_outbox(applier: &IndexApplier) -> Result<usize, engram_engine::EngineError> {
    let mut total = 0;
    loop {
        let applied = applier.apply_oldest_pending(INDEXER_BATCH_SIZE).await?;
        total += applied;
        if applied == 0 {
            return Ok(total);
        }
    }
}

/// Run the indexer until `shutdown` turns true. Wakes on new work or once a second.
pub async fn run_indexer(applier: Arc<IndexApplier>, mut shutdown: watch::Receiver<bool>) {
    let mut backoff = Duration::from_millis(200);
    loop {
        if *shutdown.borrow() {
            break;
        }
        match drain_outbox(&applier).await {
            Ok(applied) => {
                if applied > 0 {
                    tracing::debug!(applied, "indexer applied outbox entries");
                }
                backoff = Duration::from_millis(200);
                tokio::select! {
                    _ = applier.work_available.notified() => {}
                    _ = tokio::time::sleep(IDLE_POLL) => {}
                    _ = shutdown.changed() => {}
                }
            }
            Err(error) => {
                tracing::warn!(%error, backoff_millis = backoff.as_millis() as u64, "indexer failed; retrying");
                tokio::select! {
                    _ = tokio::time::sleep(backoff) => {}
                    _ = shutdown.changed() => {}
                }
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
    }
    tracing::info!("indexer stopped");
}
