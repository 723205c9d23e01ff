//! Cross-request batching: texts from concurrent callers gathered into shared forward passes.
//! Two lanes (queries before ingest), passes of similar lengths, a bounded queue, std workers,
//! and a query worker whose pass uses every core, so a lone search does not run on one.

use std::collections::VecDeque;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore, oneshot};

use crate::EmbedError;

/// Texts waiting for the model, by lane (`query`, `ingest`).
pub const EMBEDDING_QUEUE_DEPTH: &str = "engram_embedding_queue_depth";
pub const EMBEDDING_BATCH_DURATION_SECONDS: &str = "engram_embedding_batch_duration_seconds";
/// Texts per forward pass, by lane: how much batching across requests happens.
pub const EMBEDDING_BATCH_SIZE: &str = "engram_embedding_batch_size";
pub const EMBEDDED_TEXTS_TOTAL: &str = "engram_embedded_texts_total";

/// One text's vector and the tokens the model read for it (counted by the same tokenisation
/// that fed the model, so nothing tokenises a text twice).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Embedded {
    pub vector: Vec<f32>,
    pub tokens: u64,
}

/// One model instance a worker thread owns: runs a forward pass over a few texts.
pub(crate) trait ForwardPass: Send + 'static {
    fn embed_batch(&mut self, texts: &[&str]) -> Result<Vec<Embedded>, EmbedError>;
}

/// Which queue a text waits in. Queries are someone waiting on a search; ingest can wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lane {
    Query,
    Ingest,
}

impl Lane {
    fn label(self) -> &'static str {
        match self {
            Lane::Query => "query",
            Lane::Ingest => "ingest",
        }
    }
}

/// How passes are formed.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PassLimits {
    /// Texts per forward pass.
    pub max_texts: usize,
    /// Padded tokens per pass (texts × the longest): bounds how long a query that arrives
    /// just after a pass started waits for a worker.
    pub max_padded_tokens: usize,
    /// How long a worker holding fewer than `max_texts` ingest texts waits for more callers to
    /// join. Queries never wait: an idle worker runs one at once, and queries that arrive
    /// while every worker is busy pile up and share the next pass anyway.
    pub ingest_gather_window: Duration,
    /// The model's truncation, for estimating a text's tokens.
    pub max_sequence_tokens: usize,
}

struct QueuedText {
    text: String,
    estimated_tokens: usize,
    reply: oneshot::Sender<Result<Embedded, EmbedError>>,
    /// A place in the bounded queue, given back when a worker takes the text.
    _queue_place: OwnedSemaphorePermit,
}

#[derive(Default)]
struct Queues {
    query: VecDeque<QueuedText>,
    ingest: VecDeque<QueuedText>,
    /// The query worker is running a pass: the other workers take the queries that wait.
    query_worker_busy: bool,
    closed: bool,
}

struct Shared {
    queues: Mutex<Queues>,
    /// Wakes the workers that take any text.
    work_arrived: Condvar,
    /// Wakes the query worker alone: a signal meant for ingest must not be spent on it.
    query_arrived: Condvar,
    limits: PassLimits,
    /// A query worker runs queries; the others take one only while it is busy.
    has_query_worker: bool,
}

impl Shared {
    /// Queries an ingest worker should take now: every waiting one without a query worker,
    /// else only while the query worker is busy (queries of concurrent clients still run
    /// side by side).
    fn queries_for_ingest_worker(&self, queues: &Queues) -> bool {
        !queues.query.is_empty() && (!self.has_query_worker || queues.query_worker_busy)
    }
}

/// The callers' side: enqueue texts, await their vectors. Dropping it stops the workers once
/// the queue is empty.
pub(crate) struct BatchingQueue {
    shared: Arc<Shared>,
    /// Places in the queue, one per text: a full queue parks callers (backpressure).
    queue_places: Arc<Semaphore>,
}

impl BatchingQueue {
    /// Starts one std thread per forward pass, and one for `query_pass` if given: it runs
    /// only queries, and goes first for them.
    pub(crate) fn start(
        passes: Vec<Box<dyn ForwardPass>>,
        query_pass: Option<Box<dyn ForwardPass>>,
        limits: PassLimits,
        queue_capacity: usize,
    ) -> Result<Self, EmbedError> {
        let shared = Arc::new(Shared {
            queues: Mutex::new(Queues::default()),
            work_arrived: Condvar::new(),
            query_arrived: Condvar::new(),
            limits,
            has_query_worker: query_pass.is_some(),
        });
        let spawn = |name: String, run: Box<dyn FnOnce() + Send>| {
            std::thread::Builder::new()
                .name(name)
                .spawn(run)
                .map(|_| ())
                .map_err(|spawn_error| {
                    EmbedError::Unavailable(format!(
                        "could not start embedding worker thread: {spawn_error}"
                    ))
                })
        };
        for (worker_index, pass) in passes.into_iter().enumerate() {
            let worker_shared = Arc::clone(&shared);
            spawn(
                format!("minilm-embed-{worker_index}"),
                Box::new(move || {
                    run_worker(worker_index, pass, &worker_shared, Role::AnyText);
                }),
            )?;
        }
        if let Some(pass) = query_pass {
            let worker_shared = Arc::clone(&shared);
            spawn(
                "minilm-query".to_string(),
                Box::new(move || run_worker(usize::MAX, pass, &worker_shared, Role::QueriesOnly)),
            )?;
        }
        Ok(Self {
            shared,
            queue_places: Arc::new(Semaphore::new(queue_capacity.max(1))),
        })
    }

    /// One vector per text, in order; texts may share passes with other callers' texts.
    pub(crate) async fn embed(
        &self,
        texts: Vec<String>,
        lane: Lane,
    ) -> Result<Vec<Embedded>, EmbedError> {
        let mut pending_vectors = Vec::with_capacity(texts.len());
        for text in texts {
            // Awaiting here is the backpressure: a full queue parks the caller, nothing is spawned.
            let queue_place = Arc::clone(&self.queue_places)
                .acquire_owned()
                .await
                .map_err(|_| EmbedError::Unavailable("embedding queue closed".to_string()))?;
            let (reply, vector) = oneshot::channel();
            let queued = QueuedText {
                estimated_tokens: estimate_tokens(&text, self.shared.limits.max_sequence_tokens),
                text,
                reply,
                _queue_place: queue_place,
            };
            {
                let mut queues = lock(&self.shared.queues);
                if queues.closed {
                    return Err(EmbedError::Unavailable(
                        "embedding workers have stopped".to_string(),
                    ));
                }
                match lane {
                    Lane::Query => queues.query.push_back(queued),
                    Lane::Ingest => queues.ingest.push_back(queued),
                }
            }
            metrics::gauge!(EMBEDDING_QUEUE_DEPTH, "lane" => lane.label()).increment(1.0);
            if lane == Lane::Query {
                self.shared.query_arrived.notify_one();
            }
            // For a query too: another worker takes it if the query worker is busy.
            self.shared.work_arrived.notify_one();
            pending_vectors.push(vector);
        }
        let mut vectors = Vec::with_capacity(pending_vectors.len());
        for pending_vector in pending_vectors {
            vectors.push(pending_vector.await.map_err(|_| {
                EmbedError::Unavailable("embedding worker exited before replying".to_string())
            })??);
        }
        Ok(vectors)
    }
}

impl Drop for BatchingQueue {
    fn drop(&mut self) {
        lock(&self.shared.queues).closed = true;
        self.shared.work_arrived.notify_all();
        self.shared.query_arrived.notify_all();
    }
}

/// A poisoned lock only means a worker panicked while holding it; the queues stay consistent
/// because every change to them is a single push or remove.
fn lock(queues: &Mutex<Queues>) -> MutexGuard<'_, Queues> {
    queues
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Word pieces run about four characters; plus the two special tokens, capped at truncation.
fn estimate_tokens(text: &str, max_sequence_tokens: usize) -> usize {
    (text.len().div_ceil(4) + 2).min(max_sequence_tokens)
}

/// Length band of an estimated token count: texts of one band pad each other little.
fn length_band(estimated_tokens: usize) -> u32 {
    usize::BITS - estimated_tokens.max(1).leading_zeros()
}

/// What a worker takes from the queues.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    /// Ingest, and queries when no query worker is free for them.
    AnyText,
    /// Queries only, first: the pass that uses every core.
    QueriesOnly,
}

/// Worker loop: forms a pass from the queues, runs it, replies; until the queue closes.
fn run_worker(worker_index: usize, mut pass: Box<dyn ForwardPass>, shared: &Shared, role: Role) {
    loop {
        let next = match role {
            Role::AnyText => next_pass(shared),
            Role::QueriesOnly => next_query_pass(shared),
        };
        let Some((lane, texts)) = next else {
            tracing::debug!(worker_index, "embedding worker stopping, queue closed");
            return;
        };
        let batch_size = texts.len();
        let started_at = Instant::now();
        let text_refs: Vec<&str> = texts.iter().map(|queued| queued.text.as_str()).collect();
        // A panic inside ONNX Runtime's wrapper or the tokenizer must not take the worker down.
        let batch_result =
            std::panic::catch_unwind(AssertUnwindSafe(|| pass.embed_batch(&text_refs)))
                .unwrap_or_else(|_| {
                    Err(EmbedError::Failed(
                        "embedding worker panicked while running the model".to_string(),
                    ))
                });
        let elapsed = started_at.elapsed();
        metrics::histogram!(EMBEDDING_BATCH_DURATION_SECONDS).record(elapsed.as_secs_f64());
        metrics::histogram!(EMBEDDING_BATCH_SIZE, "lane" => lane.label()).record(batch_size as f64);
        metrics::counter!(EMBEDDED_TEXTS_TOTAL).increment(batch_size as u64);
        match batch_result {
            Ok(vectors) if vectors.len() == batch_size => {
                tracing::debug!(
                    worker_index,
                    lane = lane.label(),
                    batch_size,
                    elapsed_ms = elapsed.as_millis() as u64,
                    "embedded batch"
                );
                for (queued, vector) in texts.into_iter().zip(vectors) {
                    // The caller may have given up meanwhile; then the vector is discarded.
                    let _ = queued.reply.send(Ok(vector));
                }
            }
            Ok(vectors) => {
                let message = format!(
                    "model returned {} vectors for {batch_size} texts",
                    vectors.len()
                );
                for queued in texts {
                    let _ = queued.reply.send(Err(EmbedError::Failed(message.clone())));
                }
            }
            Err(embed_error) => {
                tracing::warn!(worker_index, batch_size, error = %embed_error, "embedding batch failed");
                let message = embed_error.to_string();
                for queued in texts {
                    let _ = queued.reply.send(Err(EmbedError::Failed(message.clone())));
                }
            }
        }
        if role == Role::QueriesOnly {
            lock(&shared.queues).query_worker_busy = false;
        }
    }
}

/// The query worker's next pass: the waiting queries (up to the limits), nothing else. While
/// it runs, the other workers take the queries that arrive.
fn next_query_pass(shared: &Shared) -> Option<(Lane, Vec<QueuedText>)> {
    let mut queues = lock(&shared.queues);
    loop {
        drop_abandoned(&mut queues);
        if !queues.query.is_empty() {
            let texts = take_pass(&mut queues.query, shared.limits, Lane::Query);
            queues.query_worker_busy = true;
            if !queues.query.is_empty() {
                shared.work_arrived.notify_all();
            }
            return Some((Lane::Query, texts));
        }
        if queues.closed {
            return None;
        }
        queues = shared
            .query_arrived
            .wait(queues)
            .unwrap_or_else(|poisoned| poisoned.into_inner());
    }
}

/// Waits for work and takes the next pass of a worker that takes any text: the waiting
/// queries (up to the limits) that the query worker leaves to it (all of them without one,
/// see [`Shared::queries_for_ingest_worker`]) before any ingest; for ingest, the oldest text
/// and the waiting texts of its length band.
fn next_pass(shared: &Shared) -> Option<(Lane, Vec<QueuedText>)> {
    let limits = shared.limits;
    let mut queues = lock(&shared.queues);
    loop {
        drop_abandoned(&mut queues);
        if shared.queries_for_ingest_worker(&queues) {
            let texts = take_pass(&mut queues.query, limits, Lane::Query);
            return Some((Lane::Query, texts));
        }
        if !queues.ingest.is_empty() {
            if queues.ingest.len() < limits.max_texts && !limits.ingest_gather_window.is_zero() {
                // Give concurrent writers a moment to join this pass; a query arriving
                // meanwhile wakes us and goes first.
                let deadline = Instant::now() + limits.ingest_gather_window;
                while queues.ingest.len() < limits.max_texts
                    && !shared.queries_for_ingest_worker(&queues)
                {
                    let now = Instant::now();
                    if now >= deadline || queues.closed {
                        break;
                    }
                    queues = shared
                        .work_arrived
                        .wait_timeout(queues, deadline - now)
                        .map(|(guard, _)| guard)
                        .unwrap_or_else(|poisoned| poisoned.into_inner().0);
                }
                if shared.queries_for_ingest_worker(&queues) {
                    continue;
                }
            }
            if queues.ingest.is_empty() {
                continue;
            }
            let texts = take_pass(&mut queues.ingest, limits, Lane::Ingest);
            return Some((Lane::Ingest, texts));
        }
        if queues.closed {
            return None;
        }
        queues = shared
            .work_arrived
            .wait(queues)
            .unwrap_or_else(|poisoned| poisoned.into_inner());
    }
}

/// Callers whose future was dropped (a client hung up) need no vector: skip their texts.
fn drop_abandoned(queues: &mut Queues) {
    for (lane, queue) in [
        (Lane::Query, &mut queues.query),
        (Lane::Ingest, &mut queues.ingest),
    ] {
        let before = queue.len();
        queue.retain(|queued| !queued.reply.is_closed());
        let dropped = before - queue.len();
        if dropped > 0 {
            metrics::gauge!(EMBEDDING_QUEUE_DEPTH, "lane" => lane.label())
                .decrement(dropped as f64);
        }
    }
}

/// How far past the oldest text a pass looks for texts of its length band.
const BAND_LOOKAHEAD: usize = 512;

/// Takes the oldest text and, within the limits, more texts: for queries the next ones in
/// order, for ingest the waiting texts in the oldest one's length band.
fn take_pass(queue: &mut VecDeque<QueuedText>, limits: PassLimits, lane: Lane) -> Vec<QueuedText> {
    let by_length_band = lane == Lane::Ingest;
    let Some(oldest) = queue.pop_front() else {
        return Vec::new();
    };
    let band = length_band(oldest.estimated_tokens);
    let mut longest = oldest.estimated_tokens;
    let mut pass = vec![oldest];
    let mut position = 0;
    while pass.len() < limits.max_texts && position < queue.len().min(BAND_LOOKAHEAD) {
        let candidate_tokens = queue[position].estimated_tokens;
        let fits_band = !by_length_band || length_band(candidate_tokens) == band;
        let padded_tokens = (pass.len() + 1) * longest.max(candidate_tokens);
        if fits_band && padded_tokens <= limits.max_padded_tokens {
            if let Some(taken) = queue.remove(position) {
                longest = longest.max(taken.estimated_tokens);
                pass.push(taken);
            }
            continue;
        }
        if !by_length_band {
            // Queries keep their order: stop at the first that does not fit.
            break;
        }
        position += 1;
    }
    metrics::gauge!(EMBEDDING_QUEUE_DEPTH, "lane" => lane.label()).decrement(pass.len() as f64);
    pass
}
