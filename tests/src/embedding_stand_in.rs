//! TEST DOUBLE for a third-party embedding provider (OpenAI, TEI, vLLM, DashScope): a local
//! HTTP server speaking the OpenAI-compatible `POST /v1/embeddings`. Its vectors are a hashed
//! bag of lowercase words (so texts sharing words are similar), and it counts what it embeds.

use axum::extract::State;
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// A running stand-in; dropped with the test.
pub struct EmbeddingStandIn {
    /// `http://127.0.0.1:<port>/v1`: pass as `ENGRAM_EMBEDDING_BASE_URL`.
    pub base_url: String,
    pub dimension: usize,
    /// `dimension` as the environment takes it.
    dimension_text: String,
    texts_embedded: Arc<AtomicUsize>,
    held: tokio::sync::watch::Sender<bool>,
    failing: Arc<AtomicBool>,
    server: tokio::task::JoinHandle<()>,
}

#[derive(Clone)]
struct StandInState {
    dimension: usize,
    texts_embedded: Arc<AtomicUsize>,
    /// While true, requests wait (a provider that is slow, for as long as a test needs).
    held: tokio::sync::watch::Receiver<bool>,
    /// While true, requests fail with 503 (a provider that is down).
    failing: Arc<AtomicBool>,
}

impl EmbeddingStandIn {
    pub async fn start(dimension: usize) -> anyhow::Result<Self> {
        let texts_embedded = Arc::new(AtomicUsize::new(0));
        let (held, held_receiver) = tokio::sync::watch::channel(false);
        let failing = Arc::new(AtomicBool::new(false));
        let router = Router::new()
            .route("/v1/embeddings", post(embed))
            .with_state(StandInState {
                dimension,
                texts_embedded: texts_embedded.clone(),
                held: held_receiver,
                failing: failing.clone(),
            });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?;
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        Ok(Self {
            base_url: format!("http://{address}/v1"),
            dimension,
            dimension_text: dimension.to_string(),
            texts_embedded,
            held,
            failing,
            server,
        })
    }

    /// The environment that makes a server's deployment model this stand-in
    /// (`stand-in-bag-of-words`). Its timeout is long: a test may hold requests for as long as
    /// it looks, and only the timeout could end them.
    pub fn deployment_environment(&self) -> [(&'static str, &str); 4] {
        [
            ("ENGRAM_EMBEDDING_BASE_URL", self.base_url.as_str()),
            ("ENGRAM_EMBEDDING_MODEL", "stand-in-bag-of-words"),
            ("ENGRAM_EMBEDDING_DIMENSION", self.dimension_text.as_str()),
            ("ENGRAM_EMBEDDING_TIMEOUT_SECS", "600"),
        ]
    }

    /// Requests wait from now until [`Self::release`].
    pub fn hold(&self) {
        self.held.send_replace(true);
    }

    /// Waiting requests are answered, and new ones at once.
    pub fn release(&self) {
        self.held.send_replace(false);
    }

    /// Requests fail with 503 from now on (`false`: they succeed again).
    pub fn fail(&self, failing: bool) {
        self.failing.store(failing, Ordering::SeqCst);
    }

    /// Texts embedded so far (writes and queries).
    pub fn texts_embedded(&self) -> usize {
        self.texts_embedded.load(Ordering::SeqCst)
    }
}

impl Drop for EmbeddingStandIn {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// Each word adds 1 to a slot picked by its hash; one slot is always set, so no vector is
/// zero.
pub fn bag_of_words_vector(text: &str, dimension: usize) -> Vec<f32> {
    let mut vector = vec![0.0_f32; dimension];
    vector[0] = 0.1;
    for word in text
        .split(|character: char| !character.is_alphanumeric())
        .filter(|word| !word.is_empty())
    {
        let hash = word
            .to_lowercase()
            .bytes()
            .fold(1_469_598_103_934_665_603_u64, |hash, byte| {
                (hash ^ u64::from(byte)).wrapping_mul(1_099_511_628_211)
            });
        vector[1 + (hash % (dimension as u64 - 1)) as usize] += 1.0;
    }
    vector
}

async fn embed(
    State(mut state): State<StandInState>,
    Json(body): Json<Value>,
) -> Result<Json<Value>, axum::http::StatusCode> {
    // The sender lives as long as the stand-in: a closed channel only ends the wait.
    let _ = state.held.wait_for(|held| !held).await;
    if state.failing.load(Ordering::SeqCst) {
        return Err(axum::http::StatusCode::SERVICE_UNAVAILABLE);
    }
    let texts: Vec<String> = match &body["input"] {
        Value::String(text) => vec![text.clone()],
        Value::Array(items) => items
            .iter()
            .map(|item| item.as_str().unwrap_or_default().to_string())
            .collect(),
        _ => Vec::new(),
    };
    state
        .texts_embedded
        .fetch_add(texts.len(), Ordering::SeqCst);
    let data: Vec<Value> = texts
        .iter()
        .enumerate()
        .map(|(index, text)| {
            json!({"object": "embedding", "index": index, "embedding": bag_of_words_vector(text, state.dimension)})
        })
        .collect();
    Ok(Json(json!({
        "object": "list",
        "data": data,
        "model": body["model"],
        "usage": {"prompt_tokens": 0, "total_tokens": 0},
    })))
}
