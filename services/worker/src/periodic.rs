//! The one runner of every periodic background job: a named pass, run every interval until
//! shutdown, either at once or after a first interval. Each job's pass logs its own outcome.

use std::future::Future;
use std::time::Duration;
use tokio::sync::watch;

/// When a periodic job runs first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FirstRun {
    /// At start, then every interval (sweeps whose backlog should not wait).
    AtStart,
    /// One interval after start (schedulers; the reconciler when start-up did the work).
    AfterInterval,
}

/// A periodic job as a role lists it: its name (in logs), its interval and its first run.
#[derive(Clone, Copy, Debug)]
pub struct Schedule {
    pub name: &'static str,
    pub interval: Duration,
    pub first_run: FirstRun,
}

/// Runs `pass` on `schedule` until `shutdown` turns true; a pass in progress is finished.
pub async fn run_periodic<Pass, Passing>(
    schedule: Schedule,
    mut shutdown: watch::Receiver<bool>,
    mut pass: Pass,
) where
    Pass: FnMut() -> Passing,
    Passing: Future<Output = ()>,
{
    let mut waits_first = schedule.first_run == FirstRun::AfterInterval;
    loop {
        if waits_first {
            tokio::select! {
                _ = tokio::time::sleep(schedule.interval) => {}
                changed = shutdown.changed() => {
                    // The sender is gone: nobody can ask for the stop any more; stop now.
                    if changed.is_err() {
                        break;
                    }
                }
            }
        }
        waits_first = true;
        if *shutdown.borrow() {
            break;
        }
        pass().await;
    }
    tracing::info!(job = schedule.name, "periodic job stopped");
}
