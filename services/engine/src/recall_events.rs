//! Recall events off the hot path: a search hands its event to a bounded queue and returns;
//! one writer stores the queue in batches. `flush` waits until everything queued before it is
//! stored (erasure calls it, so no event of an erased end-user lands after the erasure).

use crate::project_settings_cache::ProjectSettingsCache;
use engram_core::ProjectScope;
use engram_core::recall::RecallEventCapture;
use engram_storage::Storage;
use engram_storage::recall_quality::NewRecallEvent;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// Events waiting to be written at most; beyond it new events are dropped (and counted),
/// never waited for.
pub const RECALL_EVENT_QUEUE: usize = 10_000;
/// Events written per statement at most.
const BATCH: usize = 256;
/// How long the writer gathers events before writing them.
const LINGER: Duration = Duration::from_millis(250);

/// Recall events stored.
pub const RECALL_EVENTS_RECORDED: &str = "engram_recall_events_recorded_total";
/// Recall events dropped because the queue was full or the database refused them.
pub const RECALL_EVENTS_DROPPED: &str = "engram_recall_events_dropped_total";

enum Message {
    Event(Box<(ProjectScope, NewRecallEvent)>),
    Flush(oneshot::Sender<()>),
}

/// What a project's searches need to know of its recall settings, read together.
#[derive(Clone, Debug, Default)]
pub struct RecallSettings {
    pub capture: RecallEventCapture,
    /// Profiles that take a share of the searches naming none: (name, tuning, share).
    pub traffic: Vec<(String, crate::profiles::SearchTuning, f64)>,
}

pub struct RecallRecorder {
    queue: mpsc::Sender<Message>,
    /// The project settings cache the whole engine shares.
    settings: Arc<ProjectSettingsCache>,
}

impl RecallRecorder {
    /// The recorder and its writer, which runs until every sender is gone.
    pub fn start(storage: Storage, settings: Arc<ProjectSettingsCache>) -> Self {
        let (queue, receiver) = mpsc::channel(RECALL_EVENT_QUEUE);
        tokio::spawn(write_events(storage, receiver));
        Self { queue, settings }
    }

    /// What `scope`'s project records of each search and which profiles share its traffic,
    /// from the project's cached settings. Unreadable settings record nothing and split
    /// nothing.
    pub async fn settings_of(&self, scope: &ProjectScope) -> Arc<RecallSettings> {
        let configuration = match self.settings.of(scope).await {
            Ok(configuration) => configuration,
            Err(error) => {
                tracing::warn!(%error, "cannot read the project's recall settings; recording nothing");
                return Arc::new(RecallSettings {
                    capture: RecallEventCapture::Off,
                    traffic: Vec::new(),
                });
            }
        };
        Arc::new(RecallSettings {
            capture: configuration.settings.recall_events,
            traffic: configuration.traffic.clone(),
        })
    }

    /// Queue one event without waiting; a full queue drops it (counted).
    pub fn record(&self, scope: &ProjectScope, event: NewRecallEvent) {
        if self
            .queue
            .try_send(Message::Event(Box::new((*scope, event))))
            .is_err()
        {
            metrics::counter!(RECALL_EVENTS_DROPPED).increment(1);
        }
    }

    /// Wait until every event queued before this call is stored.
    pub async fn flush(&self) {
        let (done, stored) = oneshot::channel();
        if self.queue.send(Message::Flush(done)).await.is_ok() {
            let _ = stored.await;
        }
    }
}

async fn write_events(storage: Storage, mut receiver: mpsc::Receiver<Message>) {
    let mut batch: Vec<(ProjectScope, NewRecallEvent)> = Vec::with_capacity(BATCH);
    let mut waiting: Vec<oneshot::Sender<()>> = Vec::new();
    while let Some(first) = receiver.recv().await {
        // Gather for up to LINGER after the first event (one transaction for many events
        // costs the searches far less than one each); a full batch or a flush ends it early.
        let deadline = tokio::time::Instant::now() + LINGER;
        let mut next = Some(first);
        loop {
            match next.take() {
                Some(Message::Event(event)) => batch.push(*event),
                Some(Message::Flush(done)) => {
                    waiting.push(done);
                    break;
                }
                None => break,
            }
            if batch.len() >= BATCH {
                break;
            }
            // A timeout ends the batch like a closed channel does.
            next = tokio::time::timeout_at(deadline, receiver.recv())
                .await
                .unwrap_or_default();
        }
        store(&storage, &mut batch).await;
        for done in waiting.drain(..) {
            let _ = done.send(());
        }
    }
    store(&storage, &mut batch).await;
    tracing::debug!("recall event writer stopped");
}

async fn store(storage: &Storage, batch: &mut Vec<(ProjectScope, NewRecallEvent)>) {
    if batch.is_empty() {
        return;
    }
    let events = std::mem::take(batch);
    let count = events.len() as u64;
    match storage.insert_recall_events(events).await {
        Ok(()) => metrics::counter!(RECALL_EVENTS_RECORDED).increment(count),
        Err(error) => {
            tracing::warn!(%error, events = count, "recall events not stored");
            metrics::counter!(RECALL_EVENTS_DROPPED).increment(count);
        }
    }
}
