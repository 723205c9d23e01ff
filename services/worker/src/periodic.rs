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
    /// One interval after start (schedulers, the reconciler: start-up did the work).
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Runs a job whose interval never elapses during the test, stops it, and returns how
    /// many passes ran: only the first-run rule can account for a pass.
    async fn passes_before_stop(first_run: FirstRun, stop_after_first_pass: bool) -> usize {
        let passes = Arc::new(AtomicUsize::new(0));
        let (stop, shutdown) = watch::channel(false);
        let first_pass = Arc::new(tokio::sync::Notify::new());
        let schedule = Schedule {
            name: "test job",
            interval: Duration::from_secs(3600),
            first_run,
        };
        let job = tokio::spawn({
            let passes = passes.clone();
            let first_pass = first_pass.clone();
            run_periodic(schedule, shutdown, move || {
                let passes = passes.clone();
                let first_pass = first_pass.clone();
                async move {
                    passes.fetch_add(1, Ordering::SeqCst);
                    first_pass.notify_one();
                }
            })
        });
        if stop_after_first_pass {
            first_pass.notified().await;
        }
        stop.send(true).unwrap();
        job.await.unwrap();
        passes.load(Ordering::SeqCst)
    }

    #[tokio::test]
    async fn a_job_due_at_start_runs_once_at_once_and_stops_on_shutdown() {
        assert_eq!(passes_before_stop(FirstRun::AtStart, true).await, 1);
    }

    #[tokio::test]
    async fn a_job_due_after_its_interval_does_not_run_before_it() {
        assert_eq!(passes_before_stop(FirstRun::AfterInterval, false).await, 0);
    }

    #[tokio::test]
    async fn a_job_whose_stop_signal_is_gone_stops_instead_of_spinning() {
        let (stop, shutdown) = watch::channel(false);
        drop(stop);
        let schedule = Schedule {
            name: "orphaned job",
            interval: Duration::from_secs(3600),
            first_run: FirstRun::AfterInterval,
        };
        // Finishes (rather than hanging for an hour or looping) once the sender is gone.
        run_periodic(schedule, shutdown, || async {}).await;
    }
}
