//! The usage meter: handlers record billable units after a request succeeded; a background
//! flusher writes the sums per project, attribution (credential, channel, end-user, agent),
//! unit and hour in one transaction every
//! second (or sooner after 1,000 records), so requests never wait on it. Units not yet
//! written stay visible to the spend guard, so limits see them at once. A clean shutdown
//! flushes everything; a crash loses at most the last second.

use chrono::{DateTime, Utc};
use engram_core::usage::{UsageAttribution, UsageUnit};
use engram_core::{ProjectId, ProjectScope};
use engram_storage::usage::{UsageIncrement, hour_start};
use engram_storage::{Storage, StorageError};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;

/// How often recorded usage is written.
pub const FLUSH_EVERY: Duration = Duration::from_secs(1);
/// Records that trigger a write before the second is up.
const FLUSH_AT_RECORDS: usize = 1_000;

type PendingKey = (ProjectId, DateTime<Utc>, UsageUnit, UsageAttribution);

/// Usage recorded but not yet written, shared by the meter's clones and its flusher.
#[derive(Debug, Default)]
struct PendingUsage {
    increments: Mutex<HashMap<PendingKey, UsageIncrement>>,
    records_since_flush: AtomicUsize,
    /// Counts successful flushes: what storage holds changes only when this does (for this
    /// gateway's usage), so readers can cache what they read from storage until then.
    flushes: AtomicU64,
    /// Set by [`UsageMeter::finish`]: the flusher writes what is left and ends.
    finishing: std::sync::atomic::AtomicBool,
    /// Held while a batch is written: two writers of the same pending sums would count
    /// them twice.
    writing: tokio::sync::Mutex<()>,
}

/// Cheap to clone; every clone feeds the same flusher. A meter without a flusher (tests that
/// build a gateway by hand) drops what it is given.
#[derive(Clone, Default)]
pub struct UsageMeter {
    pending: Arc<PendingUsage>,
    /// Where [`UsageMeter::flush_now`] writes (the flusher's storage).
    storage: Option<Storage>,
    /// Wakes the flusher early; the flusher ends once every clone (every sender) is gone.
    wake_flusher: Option<mpsc::Sender<()>>,
}

impl std::fmt::Debug for UsageMeter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UsageMeter")
            .field("pending", &self.pending)
            .field("writes", &self.storage.is_some())
            .finish_non_exhaustive()
    }
}

impl UsageMeter {
    /// A meter and its flusher task; the task ends (after a last flush) once every clone of
    /// the meter is dropped.
    pub fn start(storage: Storage) -> (Self, tokio::task::JoinHandle<()>) {
        let (wake_flusher, wake_receiver) = mpsc::channel(1);
        let pending = Arc::new(PendingUsage::default());
        let flusher = tokio::spawn(run_flusher(storage.clone(), pending.clone(), wake_receiver));
        (
            Self {
                pending,
                storage: Some(storage),
                wake_flusher: Some(wake_flusher),
            },
            flusher,
        )
    }

    /// Count `quantity` of `unit` for the project and attribution of a successful request.
    pub fn record(
        &self,
        scope: &ProjectScope,
        attribution: &UsageAttribution,
        unit: UsageUnit,
        quantity: u64,
    ) {
        if quantity == 0 {
            return;
        }
        let Some(wake_flusher) = &self.wake_flusher else {
            return;
        };
        if self.pending.finishing.load(Ordering::Acquire) {
            tracing::warn!(
                unit = unit.as_str(),
                quantity,
                "usage recorded after the meter finished; not written"
            );
            return;
        }
        let at = Utc::now();
        let quantity = i64::try_from(quantity).unwrap_or(i64::MAX);
        let key = (
            scope.project_id(),
            hour_start(at),
            unit,
            attribution.clone(),
        );
        match self.pending.increments.lock() {
            Ok(mut increments) => {
                increments
                    .entry(key)
                    .and_modify(|total| total.quantity = total.quantity.saturating_add(quantity))
                    .or_insert_with(|| UsageIncrement {
                        organization_id: scope.organization_id(),
                        project_id: scope.project_id(),
                        attribution: attribution.clone(),
                        unit,
                        at,
                        quantity,
                    });
            }
            Err(_) => {
                tracing::error!("usage meter lock poisoned; usage not recorded");
                return;
            }
        }
        let records = self
            .pending
            .records_since_flush
            .fetch_add(1, Ordering::Relaxed)
            + 1;
        if records >= FLUSH_AT_RECORDS {
            // A full channel means a wake-up is already on its way.
            let _ = wake_flusher.try_send(());
        }
    }

    /// Write what is left and end the flusher (at shutdown, once no request is in flight:
    /// the engine holds a clone, so the flusher cannot wait for every clone to be dropped).
    pub async fn finish(&self) {
        self.pending.finishing.store(true, Ordering::Release);
        if let Some(wake_flusher) = &self.wake_flusher {
            let _ = wake_flusher.send(()).await;
        }
    }

    /// Write what is pending now (before an erasure pseudonymizes the end-user's counters,
    /// so none naming them is written after it).
    pub async fn flush_now(&self) -> Result<(), engram_storage::StorageError> {
        match &self.storage {
            Some(storage) => flush(storage, &self.pending).await,
            None => Ok(()),
        }
    }

    /// How many flushes have been written so far.
    pub fn flushes(&self) -> u64 {
        self.pending.flushes.load(Ordering::Acquire)
    }

    /// Units of the project recorded but not yet written, per unit, for hours at or after
    /// `since` (the spend guard adds them to what storage knows).
    pub fn unflushed(
        &self,
        project_id: ProjectId,
        since: DateTime<Utc>,
    ) -> HashMap<UsageUnit, i64> {
        let mut per_unit = HashMap::new();
        if let Ok(increments) = self.pending.increments.lock() {
            for ((pending_project, hour, unit, _), increment) in increments.iter() {
                if *pending_project == project_id && *hour >= hour_start(since) {
                    *per_unit.entry(*unit).or_default() += increment.quantity;
                }
            }
        }
        per_unit
    }
}

async fn run_flusher(
    storage: Storage,
    pending: Arc<PendingUsage>,
    mut wake_receiver: mpsc::Receiver<()>,
) {
    let mut ticker = tokio::time::interval(FLUSH_EVERY);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let closed = tokio::select! {
            woken = wake_receiver.recv() => woken.is_none(),
            _ = ticker.tick() => false,
        };
        // A failure was logged; what failed stays pending for the next flush.
        let _ = flush(&storage, &pending).await;
        if closed || pending.finishing.load(Ordering::Acquire) {
            let left = pending.increments.lock().map(|map| map.len()).unwrap_or(0);
            if left > 0 {
                tracing::error!(records = left, "usage could not be written at shutdown");
            }
            tracing::info!("usage meter stopped");
            return;
        }
    }
}

/// Write what is pending; what was written is then taken out of the pending sums (records
/// that arrived meanwhile stay). The batch is one transaction, so a failed write counted
/// nothing and is retried with the next flush.
async fn flush(storage: &Storage, pending: &PendingUsage) -> Result<(), StorageError> {
    let _writing = pending.writing.lock().await;
    let batch: Vec<(PendingKey, UsageIncrement)> = match pending.increments.lock() {
        Ok(increments) => increments
            .iter()
            .map(|(key, increment)| (key.clone(), increment.clone()))
            .collect(),
        Err(_) => {
            return Err(StorageError::Internal(
                "usage meter lock poisoned".to_string(),
            ));
        }
    };
    if batch.is_empty() {
        return Ok(());
    }
    pending.records_since_flush.store(0, Ordering::Relaxed);
    let increments: Vec<UsageIncrement> = batch
        .iter()
        .map(|(_, increment)| increment.clone())
        .collect();
    if let Err(error) = storage.add_usage(&increments).await {
        tracing::warn!(%error, records = increments.len(), "usage flush failed; retrying");
        return Err(error);
    }
    // Counted before the written units leave the pending sums: a reader that sees the old
    // count afterwards knows it has seen them in one of the two places (see SpendGuard).
    pending.flushes.fetch_add(1, Ordering::AcqRel);
    if let Ok(mut current) = pending.increments.lock() {
        for (key, written) in batch {
            let emptied = match current.get_mut(&key) {
                Some(total) => {
                    total.quantity -= written.quantity;
                    total.quantity <= 0
                }
                None => false,
            };
            if emptied {
                current.remove(&key);
            }
        }
    }
    Ok(())
}
