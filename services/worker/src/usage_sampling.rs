//! The usage sampler: at start and every interval it counts each project's live memories
//! and stores the count as the day's `memory_days` sample (a later sample the same day
//! replaces it), so storage is billed per memory kept per day.

use chrono::{DateTime, Utc};
use engram_core::usage::UsageUnit;
use engram_storage::{Storage, StorageError};
use std::time::Duration;
use tokio::sync::watch;

/// Sample every project once for the day of `at`; returns how many projects were sampled.
pub async fn sample_memory_days(storage: &Storage, at: DateTime<Utc>) -> Result<u64, StorageError> {
    let mut sampled = 0;
    for scope in storage.all_project_scopes_for_maintenance().await? {
        let live_memories = storage.count_active_memories(&scope).await?;
        storage
            .set_daily_sample(
                &scope,
                UsageUnit::MemoryDays,
                at,
                i64::try_from(live_memories).unwrap_or(i64::MAX),
            )
            .await?;
        sampled += 1;
    }
    Ok(sampled)
}

pub async fn run_usage_sampler(
    storage: Storage,
    interval: Duration,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        match sample_memory_days(&storage, Utc::now()).await {
            Ok(projects) => tracing::debug!(projects, "memory-days sampled"),
            Err(error) => {
                tracing::warn!(%error, "memory-day sampling failed; retrying next period")
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(interval) => {}
            _ = shutdown.changed() => {}
        }
        if *shutdown.borrow() {
            break;
        }
    }
    tracing::info!("usage sampler stopped");
}
