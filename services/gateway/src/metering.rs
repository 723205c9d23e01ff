//! The usage meter: handlers record billable units after a request succeeded; a background
//! flusher sums them per project, credential, unit and hour and writes them in one
//! transaction every second (or every 1,000 records), so requests never wait on it.
//! A clean shutdown flushes everything; a crash loses at most the last second.

use chrono::Utc;
use engram_core::ProjectScope;
use engram_core::usage::UsageUnit;
use engram_storage::Storage;
use engram_storage::usage::{UsageIncrement, hour_start};
use std::collections::HashMap;
use std::time::Duration;
use tokio::sync::mpsc;

/// How often recorded usage is written.
pub const FLUSH_EVERY: Duration = Duration::from_secs(1);
/// Records that trigger a write before the second is up.
const FLUSH_AT_RECORDS: usize = 1_000;

/// Cheap to clone; every clone feeds the same flusher. A meter without a flusher (tests that
/// build a gateway by hand) drops what it is given.
#[derive(Clone, Debug, Default)]
pub struct UsageMeter {
    sender: Option<mpsc::UnboundedSender<UsageIncrement>>,
}

impl UsageMeter {
    /// A meter and its flusher task; the task ends (after a last flush) once every clone of
    /// the meter is dropped.
    pub fn start(storage: Storage) -> (Self, tokio::task::JoinHandle<()>) {
        let (sender, receiver) = mpsc::unbounded_channel();
        let flusher = tokio::spawn(run_flusher(storage, receiver));
        (
            Self {
                sender: Some(sender),
            },
            flusher,
        )
    }

    /// Count `quantity` of `unit` for the project and credential of a successful request.
    pub fn record(&self, scope: &ProjectScope, credential: &str, unit: UsageUnit, quantity: u64) {
        if quantity == 0 {
            return;
        }
        let Some(sender) = &self.sender else {
            return;
        };
        let increment = UsageIncrement {
            organization_id: scope.organization_id(),
            project_id: scope.project_id(),
            credential: credential.to_string(),
            unit,
            at: Utc::now(),
            quantity: i64::try_from(quantity).unwrap_or(i64::MAX),
        };
        if sender.send(increment).is_err() {
            tracing::error!("usage meter flusher is gone; usage not recorded");
        }
    }
}

async fn run_flusher(storage: Storage, mut receiver: mpsc::UnboundedReceiver<UsageIncrement>) {
    let mut pending: HashMap<
        (
            engram_core::ProjectId,
            chrono::DateTime<Utc>,
            UsageUnit,
            String,
        ),
        UsageIncrement,
    > = HashMap::new();
    let mut received_since_flush = 0usize;
    let mut ticker = tokio::time::interval(FLUSH_EVERY);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let closed = tokio::select! {
            received = receiver.recv() => match received {
                Some(increment) => {
                    received_since_flush += 1;
                    let key = (
                        increment.project_id,
                        hour_start(increment.at),
                        increment.unit,
                        increment.credential.clone(),
                    );
                    pending
                        .entry(key)
                        .and_modify(|total| total.quantity += increment.quantity)
                        .or_insert(increment);
                    if received_since_flush < FLUSH_AT_RECORDS {
                        continue;
                    }
                    false
                }
                None => true,
            },
            _ = ticker.tick() => false,
        };
        if !pending.is_empty() {
            let batch: Vec<UsageIncrement> = pending.values().cloned().collect();
            match storage.add_usage(&batch).await {
                Ok(()) => {
                    pending.clear();
                    received_since_flush = 0;
                }
                // Kept and retried with the next flush: the batch is one transaction, so a
                // failed write counted nothing.
                Err(error) => {
                    tracing::warn!(%error, records = batch.len(), "usage flush failed; retrying")
                }
            }
        }
        if closed {
            if !pending.is_empty() {
                tracing::error!(
                    records = pending.len(),
                    "usage could not be written at shutdown"
                );
            }
            tracing::info!("usage meter stopped");
            return;
        }
    }
}
