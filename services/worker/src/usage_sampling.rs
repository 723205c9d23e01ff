//! The usage sampler: at start and every interval it counts each project's live memories
//! and stores the count as the day's `memory_days` sample (a later sample the same day
//! replaces it), so storage is billed per memory kept per day.

use crate::periodic::{FirstRun, Schedule, run_periodic};
use chrono::{DateTime, Utc};
use engram_core::usage::UsageUnit;
use engram_storage::{MaintenanceStore, StorageError};
use std::time::Duration;
use tokio::sync::watch;

/// Sample every project once for the day of `at`; returns how many projects were sampled.
pub async fn sample_memory_days(
    storage: &MaintenanceStore,
    at: DateTime<Utc>,
) -> Result<u64, StorageError> {
    let mut sampled = 0;
    for scope in storage.all_project_scopes().await? {
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
    storage: MaintenanceStore,
    interval: Duration,
    shutdown: watch::Receiver<bool>,
) {
    let schedule = Schedule {
        name: "usage sampler",
        interval,
        first_run: FirstRun::AtStart,
    };
    let storage = &storage;
    run_periodic(schedule, shutdown, move || async move {
        match sample_memory_days(storage, Utc::now()).await {
            Ok(projects) => tracing::debug!(projects, "memory-days sampled"),
            Err(error) => {
                tracing::warn!(%error, "memory-day sampling failed; retrying next period")
            }
        }
    })
    .await;
}
