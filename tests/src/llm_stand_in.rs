//! TEST DOUBLE for a third-party LLM provider (the only kind of double these suites use):
//! a local HTTP server speaking the OpenAI-compatible `POST /v1/chat/completions`, answering
//! from a script the test writes and recording every request it was sent.

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};

/// One request the stand-in received.
#[derive(Clone, Debug)]
pub struct SeenChatRequest {
    pub model: String,
    pub system_prompt: String,
    pub user_prompt: String,
    pub authorization: Option<String>,
}

impl SeenChatRequest {
    /// Engram's extraction prompt (as opposed to reconciliation).
    pub fn is_extraction(&self) -> bool {
        self.system_prompt.contains("You extract")
    }

    /// The label (`m1`, …) the reconciliation prompt gives the stored memory `content`.
    pub fn label_of(&self, content: &str) -> Option<String> {
        self.user_prompt.lines().find_map(|line| {
            let (label, text) = line.split_once(": ")?;
            (label.starts_with('m') && text == content).then(|| label.to_string())
        })
    }
}

/// What the script answers with.
pub enum ScriptedReply {
    /// A JSON object as the message content, with the usage the provider reports.
    Json {
        content: Value,
        prompt_tokens: u64,
        completion_tokens: u64,
    },
    /// An HTTP error status (e.g. 503 for an outage).
    Status(u16),
}

type Script = dyn Fn(&SeenChatRequest) -> ScriptedReply + Send + Sync;

#[derive(Clone)]
struct StandInState {
    script: Arc<Script>,
    seen: Arc<Mutex<Vec<SeenChatRequest>>>,
}

/// A running stand-in; dropped with the test.
pub struct LlmStandIn {
    /// `http://127.0.0.1:<port>/v1`: pass as `ENGRAM_LLM_BASE_URL`.
    pub base_url: String,
    seen: Arc<Mutex<Vec<SeenChatRequest>>>,
    server: tokio::task::JoinHandle<()>,
}

impl LlmStandIn {
    pub async fn start(
        script: impl Fn(&SeenChatRequest) -> ScriptedReply + Send + Sync + 'static,
    ) -> anyhow::Result<Self> {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let state = StandInState {
            script: Arc::new(script),
            seen: seen.clone(),
        };
        let router = Router::new()
            .route("/v1/chat/completions", post(answer))
            .with_state(state);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?;
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        Ok(Self {
            base_url: format!("http://{address}/v1"),
            seen,
            server,
        })
    }

    /// Every request so far, in order.
    pub fn requests(&self) -> Vec<SeenChatRequest> {
        self.seen
            .lock()
            .map(|seen| seen.clone())
            .unwrap_or_default()
    }
}

impl Drop for LlmStandIn {
    fn drop(&mut self) {
        self.server.abort();
    }
}

async fn answer(
    State(state): State<StandInState>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    let message = |role: &str| {
        body["messages"]
            .as_array()
            .and_then(|messages| messages.iter().find(|message| message["role"] == role))
            .and_then(|message| message["content"].as_str())
            .unwrap_or_default()
            .to_string()
    };
    let seen = SeenChatRequest {
        model: body["model"].as_str().unwrap_or_default().to_string(),
        system_prompt: message("system"),
        user_prompt: message("user"),
        authorization: headers
            .get("authorization")
            .and_then(|value| value.to_str().ok())
            .map(str::to_string),
    };
    let reply = (state.script)(&seen);
    if let Ok(mut all) = state.seen.lock() {
        all.push(seen);
    }
    match reply {
        ScriptedReply::Status(status) => (
            StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            Json(json!({"error": {"message": "scripted failure"}})),
        )
            .into_response(),
        ScriptedReply::Json {
            content,
            prompt_tokens,
            completion_tokens,
        } => Json(json!({
            "id": "chatcmpl-stand-in",
            "object": "chat.completion",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content.to_string()}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens, "total_tokens": prompt_tokens + completion_tokens},
        }))
        .into_response(),
    }
}
