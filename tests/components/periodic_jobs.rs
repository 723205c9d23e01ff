//! The one periodic runner of the workers: a job due at start runs at once, one due after
//! its interval does not run before it, and every job stops on shutdown, even when the stop
//! signal's sender is gone. Intervals are an hour, so only the first-run rule can account
//! for a pass: no timing is asserted.

use engram_worker::periodic::{FirstRun, Schedule, run_periodic};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::sync::watch;

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
    tokio::time::timeout(engram_tests::patience(), job)
        .await
        .expect("the job stops on shutdown")
        .unwrap();
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
    // Finishes (rather than waiting an hour or looping) once the sender is gone; a
    // regression fails here instead of hanging the suite.
    tokio::time::timeout(
        engram_tests::patience(),
        run_periodic(schedule, shutdown, || async {}),
    )
    .await
    .expect("the job stops when its stop signal is gone");
}
