//! A remote embedder for any OpenAI-compatible `POST {base_url}/embeddings` endpoint
//! (OpenAI, vLLM, Ollama, LiteLLM, …), with batching, ordering by `index` and normalisation.

use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::{EmbedError, Embedder};

/// How to reach the endpoint and what it returns.
#[derive(Clone)]
pub struct OpenAiCompatibleOptions {
    /// e.g. `https://api.openai.com/v1`; `/embeddings` is appended.
    pub base_url: String,
    /// Sent as `Authorization: Bearer …` when present (local servers often need none).
    pub api_key: Option<String>,
    /// Model name sent in the request and reported as `model_id()`.
    pub model: String,
    /// Expected vector length; a response of another length is an error, not silently stored.
    pub dimension: usize,
    /// Maximum texts per request; larger calls are split.
    pub max_batch: usize,
    /// Whole-request timeout.
    pub request_timeout: Duration,
}

// Hand-written so the API key never ends up in logs through `{:?}`.
impl std::fmt::Debug for OpenAiCompatibleOptions {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("OpenAiCompatibleOptions")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("model", &self.model)
            .field("dimension", &self.dimension)
            .field("max_batch", &self.max_batch)
            .field("request_timeout", &self.request_timeout)
            .finish()
    }
}

impl OpenAiCompatibleOptions {
    /// Options with a batch of 128 texts and a 30 s timeout.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>, dimension: usize) -> Self {
        Self {
            base_url: base_url.into(),
            api_key: None,
            model: model.into(),
            dimension,
            max_batch: 128,
            request_timeout: Duration::from_secs(30),
        }
    }
}

/// Embedder backed by an OpenAI-compatible HTTP API.
pub struct OpenAiCompatibleEmbedder {
    http_client: reqwest::Client,
    embeddings_url: String,
    options: OpenAiCompatibleOptions,
}

#[derive(Serialize)]
struct EmbeddingsRequest<'request> {
    model: &'request str,
    input: &'request [String],
}

#[derive(Deserialize)]
struct EmbeddingsResponse {
    data: Vec<EmbeddingsResponseItem>,
}

#[derive(Deserialize)]
struct EmbeddingsResponseItem {
    embedding: Vec<f32>,
    index: usize,
}

/// Error bodies are echoed into messages; cap them so a huge HTML page does not flood logs.
const MAX_ERROR_BODY_CHARS: usize = 500;

impl OpenAiCompatibleEmbedder {
    pub fn new(options: OpenAiCompatibleOptions) -> Result<Self, EmbedError> {
        if options.dimension == 0 {
            return Err(EmbedError::ModelInvalid(
                "openai-compatible embedder needs a non-zero dimension".to_string(),
            ));
        }
        let http_client = reqwest::Client::builder()
            .timeout(options.request_timeout)
            .build()
            .map_err(|build_error| {
                EmbedError::Unavailable(format!("cannot build http client: {build_error}"))
            })?;
        let embeddings_url = format!("{}/embeddings", options.base_url.trim_end_matches('/'));
        Ok(Self {
            http_client,
            embeddings_url,
            options: OpenAiCompatibleOptions {
                max_batch: options.max_batch.max(1),
                ..options
            },
        })
    }

    async fn embed_batch(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut request = self
            .http_client
            .post(&self.embeddings_url)
            .json(&EmbeddingsRequest {
                model: &self.options.model,
                input: texts,
            });
        if let Some(api_key) = &self.options.api_key {
            request = request.bearer_auth(api_key);
        }
        let response = request.send().await.map_err(|send_error| {
            EmbedError::Unavailable(format!(
                "request to {} failed: {send_error}",
                self.embeddings_url
            ))
        })?;

        let status = response.status();
        if !status.is_success() {
            let error_body: String = response
                .text()
                .await
                .unwrap_or_default()
                .chars()
                .take(MAX_ERROR_BODY_CHARS)
                .collect();
            let message = format!("{} returned {status}: {error_body}", self.embeddings_url);
            // Rate limits and server errors are transient; other 4xx mean our request is wrong.
            return Err(
                if status.is_server_error() || status == reqwest::StatusCode::TOO_MANY_REQUESTS {
                    EmbedError::Unavailable(message)
                } else {
                    EmbedError::Failed(message)
                },
            );
        }

        let parsed: EmbeddingsResponse = response.json().await.map_err(|parse_error| {
            EmbedError::Failed(format!(
                "{} returned an unreadable embeddings response: {parse_error}",
                self.embeddings_url
            ))
        })?;
        order_and_normalise(parsed.data, texts.len(), self.options.dimension)
    }
}

/// Places each vector at its `index`, checks completeness and length, and L2-normalises
/// (OpenAI already normalises, but other compatible servers may not).
fn order_and_normalise(
    items: Vec<EmbeddingsResponseItem>,
    expected_count: usize,
    expected_dimension: usize,
) -> Result<Vec<Vec<f32>>, EmbedError> {
    if items.len() != expected_count {
        return Err(EmbedError::Failed(format!(
            "embeddings response has {} vectors for {expected_count} texts",
            items.len()
        )));
    }
    let mut ordered: Vec<Option<Vec<f32>>> = vec![None; expected_count];
    for item in items {
        if item.embedding.len() != expected_dimension {
            return Err(EmbedError::Failed(format!(
                "embeddings response has a vector of length {}, expected {expected_dimension}",
                item.embedding.len()
            )));
        }
        match ordered.get_mut(item.index) {
            Some(slot @ None) => *slot = Some(normalise(item.embedding)),
            Some(Some(_)) => {
                return Err(EmbedError::Failed(format!(
                    "embeddings response repeats index {}",
                    item.index
                )));
            }
            None => {
                return Err(EmbedError::Failed(format!(
                    "embeddings response has index {} for {expected_count} texts",
                    item.index
                )));
            }
        }
    }
    // Count matched and no index repeated or out of range, so every slot is filled.
    Ok(ordered.into_iter().flatten().collect())
}

fn normalise(mut vector: Vec<f32>) -> Vec<f32> {
    crate::l2_normalise(&mut vector);
    vector
}

#[async_trait]
impl Embedder for OpenAiCompatibleEmbedder {
    fn model_id(&self) -> &str {
        &self.options.model
    }

    fn dimension(&self) -> usize {
        self.options.dimension
    }

    async fn embed(&self, texts: Vec<String>) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut vectors = Vec::with_capacity(texts.len());
        for batch_texts in texts.chunks(self.options.max_batch) {
            let started_at = std::time::Instant::now();
            let batch_vectors = self.embed_batch(batch_texts).await?;
            tracing::debug!(
                model = %self.options.model,
                batch_size = batch_texts.len(),
                elapsed_ms = started_at.elapsed().as_millis() as u64,
                "remote embedding batch done"
            );
            vectors.extend(batch_vectors);
        }
        Ok(vectors)
    }
}
