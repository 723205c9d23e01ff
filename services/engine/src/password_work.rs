//! Password hashing on a bounded pool: argon2 takes 19 MiB and tens of milliseconds of CPU
//! per hash, so a storm of sign-ins must cost bounded memory, not one hash per request.

use crate::EngineError;
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};

/// Waiting hashes per worker: a short queue, so a burst of real sign-ins waits a moment
/// while a storm is refused at once.
pub const QUEUED_PER_WORKER: usize = 4;
/// What a refused caller is told to wait.
pub const BUSY_RETRY_AFTER_SECONDS: u64 = 1;

type Job = Box<dyn FnOnce() + Send>;

/// `workers` long-lived threads hash, and `queue` more hashes may wait; any beyond is
/// refused with `EngineError::Busy` before it allocates anything. Dedicated threads (not
/// the runtime's blocking pool, which grows to hundreds) keep argon2's memory to one
/// allocator arena per worker.
#[derive(Clone, Debug)]
pub struct PasswordWork {
    jobs: SyncSender<Job>,
}

impl PasswordWork {
    pub fn new(workers: usize, queue: usize) -> Self {
        let (jobs, waiting) = std::sync::mpsc::sync_channel::<Job>(queue);
        let waiting = Arc::new(Mutex::new(waiting));
        for worker in 0..workers.max(1) {
            let waiting = waiting.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("password-work-{worker}"))
                .spawn(move || work_until_closed(&waiting));
            if let Err(error) = spawned {
                tracing::error!(%error, "cannot start a password hashing thread");
            }
        }
        Self { jobs }
    }

    /// One worker per core but one (the other cores keep answering the API), at least one.
    pub fn sized_for_this_machine() -> Self {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        let workers = cores.saturating_sub(1).max(1);
        Self::new(workers, workers * QUEUED_PER_WORKER)
    }

    /// Run `work` (a hash or a verification) once a worker is free; `Busy` at once when
    /// the queue is full.
    pub async fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, EngineError> {
        let (done, outcome) = tokio::sync::oneshot::channel();
        let job: Job = Box::new(move || {
            let _ = done.send(work());
        });
        match self.jobs.try_send(job) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => {
                tracing::warn!("password hashing queue full: refused");
                return Err(EngineError::Busy {
                    retry_after_seconds: BUSY_RETRY_AFTER_SECONDS,
                });
            }
            Err(TrySendError::Disconnected(_)) => {
                return Err(EngineError::Internal(
                    "the password hashing threads stopped".to_string(),
                ));
            }
        }
        outcome
            .await
            .map_err(|_| EngineError::Internal("a password hashing job was lost".to_string()))
    }
}

/// A worker's life: take the next job until every sender is gone.
fn work_until_closed(waiting: &Mutex<Receiver<Job>>) {
    loop {
        let next = match waiting.lock() {
            Ok(receiver) => receiver.recv(),
            Err(poisoned) => poisoned.into_inner().recv(),
        };
        match next {
            // A panicking job must not take the worker with it.
            Ok(job) => {
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
            }
            Err(_) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn beyond_the_queue_work_is_refused_and_never_more_than_the_workers_run() {
        let pool = PasswordWork::new(1, 2);
        let running = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let (started, first_started) = std::sync::mpsc::channel::<()>();
        let (release, released) = std::sync::mpsc::channel::<()>();
        let released = Arc::new(Mutex::new(released));
        let job = || {
            let (running, most, released) = (running.clone(), most.clone(), released.clone());
            let started = started.clone();
            move || {
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                let _ = started.send(());
                let _ = released.lock().map(|receiver| receiver.recv());
                running.fetch_sub(1, Ordering::SeqCst);
            }
        };
        // The first holds the one worker; the next two, polled once, wait in the queue.
        let first = tokio::spawn({
            let pool = pool.clone();
            let job = job();
            async move { pool.run(job).await }
        });
        first_started.recv().unwrap();
        let mut second = Box::pin(pool.run(job()));
        let mut third = Box::pin(pool.run(job()));
        let zero = std::time::Duration::ZERO;
        assert!(tokio::time::timeout(zero, &mut second).await.is_err());
        assert!(tokio::time::timeout(zero, &mut third).await.is_err());
        assert!(
            matches!(pool.run(|| ()).await, Err(EngineError::Busy { .. })),
            "a full queue refuses more work at once"
        );
        for _ in 0..3 {
            release.send(()).unwrap();
        }
        first.await.unwrap().unwrap();
        second.await.unwrap();
        third.await.unwrap();
        assert_eq!(
            most.load(Ordering::SeqCst),
            1,
            "one worker, one hash at a time"
        );
        pool.run(|| ()).await.unwrap();
    }
}
