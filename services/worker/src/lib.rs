//! Background loops of `engram worker` (in-process for `engram serve`): the outbox indexer,
//! which applies pending index changes with backoff, the reconciler and the tombstone purge.

pub mod consolidation;
pub mod evaluation;
pub mod file_ingest;
pub mod message_derivation;
pub mod periodic;
pub mod reembedding;
pub mod retention;
pub mod statements;
pub mod tasks;
pub mod usage_sampling;

use crate::periodic::{FirstRun, Schedule, run_periodic};
use engram_engine::IndexApplier;
use engram_engine::consolidation::ConsolidationLimits;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// Entries applied per batch; each batch ends with one index flush.
pub const INDEXER_BATCH_SIZE: u64 = 256;
const IDLE_POLL: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// Outbox entries waiting for the index: how far search lags behind acknowledged writes.
pub const OUTBOX_BACKLOG: &str = "engram_outbox_backlog";
pub const OUTBOX_APPLIED_TOTAL: &str = "engram_outbox_applied_total";
pub const INDEXER_FAILURES_TOTAL: &str = "engram_indexer_failures_total";

async fn record_outbox_backlog(applier: &IndexApplier) {
    match applier.outbox_backlog().await {
        Ok(backlog) => metrics::gauge!(OUTBOX_BACKLOG).set(backlog as f64),
        Err(error) => tracing::debug!(%error, "outbox backlog unavailable for metrics"),
    }
}

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
    // Exported from the start at zero, so dashboards and rate() see the series before the
    // first entry is applied or the first failure happens.
    metrics::counter!(OUTBOX_APPLIED_TOTAL).increment(0);
    metrics::counter!(INDEXER_FAILURES_TOTAL).increment(0);
    let mut backoff = Duration::from_millis(200);
    loop {
        if *shutdown.borrow() {
            break;
        }
        match drain_outbox(&applier).await {
            Ok(applied) => {
                if applied > 0 {
                    metrics::counter!(OUTBOX_APPLIED_TOTAL).increment(applied as u64);
                }
                record_outbox_backlog(&applier).await;
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
                metrics::counter!(INDEXER_FAILURES_TOTAL).increment(1);
                record_outbox_backlog(&applier).await;
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

/// How often each periodic job runs and what the sweeps keep: the part of the deployment's
/// configuration this crate consumes.
#[derive(Clone, Debug)]
pub struct JobSettings {
    /// Between two reconciliations of what changed.
    pub reconcile_interval: Duration,
    /// Between two reconciliations of everything.
    pub full_reconcile_interval: Duration,
    pub tombstone_retention: Duration,
    /// How long a stored idempotency answer is kept; the purge removes older ones.
    pub idempotency_ttl: Duration,
    pub retention_sweep_interval: Duration,
    pub usage_sample_interval: Duration,
    /// `None`: no scheduled consolidation.
    pub consolidation_interval: Option<Duration>,
    /// How often scheduled evaluations are looked for (and expired recall events purged).
    pub evaluation_check_interval: Duration,
    pub consolidation_limits: ConsolidationLimits,
}

/// When the reconciler compares the index with the database.
#[derive(Clone, Copy, Debug)]
pub struct ReconcileSchedule {
    /// Between two passes over the memories changed since the previous pass.
    pub changes_every: Duration,
    /// Between two passes over every memory.
    pub full_every: Duration,
    /// The process already compared everything before starting the job. If not, the job's
    /// first pass runs at once and is a full one; until a full pass succeeds, every pass is.
    pub full_pass_done_at_start: bool,
}

/// How far before the previous pass's start a pass over changes looks: a row is stamped
/// before its transaction commits, and processes' clocks differ a little, so a change
/// committed during the previous pass may carry an earlier time than that pass's start.
const CHANGES_OVERLAP: Duration = Duration::from_secs(300);

/// Reconcile the index with the database until `shutdown`: every `changes_every`, the
/// memories changed since the previous pass (its cost follows the writes, not the projects'
/// size); every `full_every`, every memory, which also finds what no change in the database
/// describes (an index restored from an old backup, points lost by the index itself) and sets
/// the drift gauge.
pub async fn run_reconciler(
    applier: Arc<IndexApplier>,
    schedule: ReconcileSchedule,
    shutdown: watch::Receiver<bool>,
) {
    let periodic = Schedule {
        name: "reconciler",
        interval: schedule.changes_every,
        first_run: if schedule.full_pass_done_at_start {
            FirstRun::AfterInterval
        } else {
            FirstRun::AtStart
        },
    };
    let state = std::sync::Mutex::new(ReconcilerState {
        changes_since: chrono::Utc::now(),
        last_full_pass: schedule
            .full_pass_done_at_start
            .then(std::time::Instant::now),
    });
    let (applier, state) = (&applier, &state);
    run_periodic(periodic, shutdown, move || async move {
        let started = chrono::Utc::now();
        let (changes_since, full_due) = {
            let state = state
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            (
                state.changes_since,
                state
                    .last_full_pass
                    .is_none_or(|last| last.elapsed() >= schedule.full_every),
            )
        };
        let outcome = if full_due {
            applier.reconcile_all_projects(|_, _| {}).await
        } else {
            let overlap = chrono::Duration::from_std(CHANGES_OVERLAP).unwrap_or_default();
            applier
                .reconcile_changed_since(changes_since - overlap)
                .await
        };
        let pass = if full_due { "full" } else { "changes" };
        match outcome {
            Ok(report) => {
                let mut state = state
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                state.changes_since = started;
                if full_due {
                    state.last_full_pass = Some(std::time::Instant::now());
                }
                if report.drift() > 0 {
                    tracing::warn!(
                        pass,
                        missing = report.points_missing,
                        stale = report.points_stale,
                        orphaned = report.points_orphaned,
                        "periodic reconciliation repaired index drift"
                    );
                } else {
                    tracing::debug!(
                        pass,
                        memories = report.memories_checked,
                        "periodic reconciliation found no drift"
                    );
                }
            }
            // The next pass looks from the same point again.
            Err(error) => tracing::warn!(
                pass,
                %error,
                "periodic reconciliation failed; retrying next period"
            ),
        }
    })
    .await;
}

struct ReconcilerState {
    /// Where the next pass over changes starts looking (less the overlap).
    changes_since: chrono::DateTime<chrono::Utc>,
    /// None until a full pass of this job (or the process's, before it) succeeded.
    last_full_pass: Option<std::time::Instant>,
}

pub const TOMBSTONES_PURGED_TOTAL: &str = "engram_tombstones_purged_total";
pub const IDEMPOTENCY_ANSWERS_EXPIRED_TOTAL: &str = "engram_idempotency_answers_expired_total";

/// Drop idempotency answers stored more than `ttl` ago (a retry after that writes anew);
/// returns how many went.
pub async fn purge_expired_idempotency_answers(
    storage: &engram_storage::MaintenanceStore,
    ttl: Duration,
) -> Result<u64, engram_storage::StorageError> {
    let ttl = chrono::Duration::from_std(ttl).unwrap_or(chrono::Duration::MAX);
    let cutoff = chrono::Utc::now()
        .checked_sub_signed(ttl)
        .unwrap_or(chrono::DateTime::<chrono::Utc>::MIN_UTC);
    let purged = storage
        .purge_idempotency_answers_stored_before(cutoff)
        .await?;
    metrics::counter!(IDEMPOTENCY_ANSWERS_EXPIRED_TOTAL).increment(purged);
    Ok(purged)
}

/// Drop tombstones older than `retention`; returns how many went.
pub async fn purge_expired_tombstones(
    storage: &engram_storage::MaintenanceStore,
    retention: Duration,
) -> Result<u64, engram_storage::StorageError> {
    let retention = chrono::Duration::from_std(retention).unwrap_or(chrono::Duration::MAX);
    let cutoff = chrono::Utc::now()
        .checked_sub_signed(retention)
        .unwrap_or(chrono::DateTime::<chrono::Utc>::MIN_UTC);
    let purged = storage.purge_tombstones_deleted_before(cutoff).await?;
    metrics::counter!(TOMBSTONES_PURGED_TOTAL).increment(purged);
    Ok(purged)
}

/// Purge expired tombstones and idempotency answers every `interval` until `shutdown`.
/// Every worker may run it: each purge is a series of idempotent DELETEs.
pub async fn run_tombstone_purge(
    storage: engram_storage::MaintenanceStore,
    retention: Duration,
    idempotency_ttl: Duration,
    interval: Duration,
    shutdown: watch::Receiver<bool>,
) {
    metrics::counter!(TOMBSTONES_PURGED_TOTAL).increment(0);
    metrics::counter!(IDEMPOTENCY_ANSWERS_EXPIRED_TOTAL).increment(0);
    let schedule = Schedule {
        name: "tombstone purge",
        interval,
        first_run: FirstRun::AtStart,
    };
    let storage = &storage;
    run_periodic(schedule, shutdown, move || async move {
        match purge_expired_tombstones(storage, retention).await {
            Ok(0) => {}
            Ok(purged) => tracing::info!(purged, "purged expired tombstones"),
            Err(error) => tracing::warn!(%error, "tombstone purge failed; retrying next period"),
        }
        match purge_expired_idempotency_answers(storage, idempotency_ttl).await {
            Ok(0) => {}
            Ok(purged) => tracing::info!(purged, "purged expired idempotency answers"),
            Err(error) => {
                tracing::warn!(%error, "idempotency answer purge failed; retrying next period")
            }
        }
    })
    .await;
}
