//! Text embedders: the `Embedder` trait the engine uses, its local model backend
//! (all-MiniLM-L6-v2 or multilingual-e5-small on ONNX Runtime, batched across requests) and
//! an OpenAI-compatible client.

use async_trait::async_trait;

#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    #[error("embedding model not found: {0}")]
    ModelMissing(String),
    #[error("embedding model could not be loaded: {0}")]
    ModelInvalid(String),
    #[error("embedding failed: {0}")]
    Failed(String),
    #[error("embedding service unavailable: {0}")]
    Unavailable(String),
}

#[async_trait]
pub trait Embedder: Send + Sync + 'static {
    /// Stable id of the model, stored with every memory (e.g. `all-MiniLM-L6-v2`).
    fn model_id(&self) -> &str;
    /// Length of every vector returned.
    fn dimension(&self) -> usize;
    /// One L2-normalised vector per text, in order.
    async fn embed(&self, texts: Vec<String>) -> Result<Vec<Vec<f32>>, EmbedError>;

    /// The vector of a search query. Someone is waiting on it, so the local model runs it
    /// ahead of queued ingest; other backends embed it like any text.
    async fn embed_query(&self, query: String) -> Result<Vec<f32>, EmbedError> {
        self.embed(vec![query]).await?.pop().ok_or_else(|| {
            EmbedError::Failed("the embedder returned no vector for the query".to_string())
        })
    }

    /// The query's vector and the tokens the model read for it. The local model counts them
    /// from the tokenisation that fed it; the default counts them apart.
    async fn embed_query_counted(&self, query: String) -> Result<(Vec<f32>, u64), EmbedError> {
        let tokens = self.count_tokens(&query);
        Ok((self.embed_query(query).await?, tokens))
    }

    /// One vector per text with the tokens the model read for it, in order.
    async fn embed_counted(&self, texts: Vec<String>) -> Result<Vec<(Vec<f32>, u64)>, EmbedError> {
        let tokens: Vec<u64> = texts.iter().map(|text| self.count_tokens(text)).collect();
        Ok(self.embed(texts).await?.into_iter().zip(tokens).collect())
    }

    /// Whether embedding runs on this machine's cores (the local model) rather than at a
    /// provider: a search then keeps other work off the cores while its query is embedded.
    fn embeds_on_this_machine(&self) -> bool {
        false
    }

    /// Tokens the model reads for `text` (what usage metering bills as tokens embedded and
    /// what recall budgets count). The default estimates four characters per token, for
    /// providers whose tokenizer is not available here; the local model counts exactly.
    fn count_tokens(&self, text: &str) -> u64 {
        estimate_tokens(text)
    }
}

/// Scales `vector` to unit length, with torch.nn.functional.normalize's 1e-12 floor on the norm
/// (sentence-transformers' `normalize_embeddings=True`), so a zero vector stays zero.
pub(crate) fn l2_normalise(vector: &mut [f32]) {
    let norm = vector
        .iter()
        .map(|component| component * component)
        .sum::<f32>()
        .sqrt()
        .max(1e-12);
    vector.iter_mut().for_each(|component| *component /= norm);
}

/// About four characters per token, at least one for a non-empty text.
pub fn estimate_tokens(text: &str) -> u64 {
    (text.chars().count() as u64).div_ceil(4)
}

mod batching;
pub mod local_model;
pub mod onnx_runtime;
pub mod openai_compatible;

pub use local_model::{
    DEFAULT_MODEL_SUBDIR, DEFAULT_MULTILINGUAL_MODEL_SUBDIR, LocalEncoder, LocalModelOptions,
    LocalModelSpec, MINILM, MINILM_DIMENSION, MINILM_MODEL_ID, MODEL_DIR_ENV_VAR,
    MULTILINGUAL_E5_SMALL, MULTILINGUAL_MODEL_DIR_ENV_VAR, MULTILINGUAL_MODEL_ID, available_cores,
    resolve_model_dir, resolve_multilingual_model_dir,
};
pub use onnx_runtime::{DEFAULT_RUNTIME_SUBPATH, RUNTIME_PATH_ENV_VAR, resolve_runtime_library};
pub use openai_compatible::{OpenAiCompatibleEmbedder, OpenAiCompatibleOptions};
