//! The optional LLM: any OpenAI-compatible `POST {base_url}/chat/completions` endpoint
//! (OpenAI, vLLM, Ollama, LiteLLM, …), asked for JSON, retried on overload, with the token
//! counts of every call so each one can be recorded and billed by model.

use backon::{ExponentialBuilder, Retryable};
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::time::{Duration, Instant};

/// The prompts the LLM is given. Each lives in a file: built in from
/// `services/engine/prompts/`, or read from a folder the operator names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LlmPrompts {
    /// Turns a conversation into candidate memories.
    pub extract_memories: String,
    /// Decides ADD / UPDATE / SUPERSEDE / DELETE / NOOP for candidates next to stored memories.
    pub reconcile_memories: String,
    /// Applies a natural-language correction (feedback) to one memory.
    pub correct_memory: String,
    /// Summarises old episodic memories (consolidation).
    pub compact_episodes: String,
    /// Summarises a session's messages (the `summary` part of an assembled context).
    pub summarize_session: String,
}

const EXTRACT_MEMORIES_FILE: &str = "extract_memories.md";
const RECONCILE_MEMORIES_FILE: &str = "reconcile_memories.md";
const CORRECT_MEMORY_FILE: &str = "correct_memory.md";
const COMPACT_EPISODES_FILE: &str = "compact_episodes.md";
const SUMMARIZE_SESSION_FILE: &str = "summarize_session.md";

impl Default for LlmPrompts {
    fn default() -> Self {
        Self {
            extract_memories: include_str!("../prompts/extract_memories.md").to_string(),
            reconcile_memories: include_str!("../prompts/reconcile_memories.md").to_string(),
            correct_memory: include_str!("../prompts/correct_memory.md").to_string(),
            compact_episodes: include_str!("../prompts/compact_episodes.md").to_string(),
            summarize_session: include_str!("../prompts/summarize_session.md").to_string(),
        }
    }
}

impl LlmPrompts {
    /// The built-in prompts, each replaced by the folder's file of the same name if present.
    pub fn from_folder(folder: &Path) -> std::io::Result<Self> {
        let mut prompts = Self::default();
        for (file_name, prompt) in [
            (EXTRACT_MEMORIES_FILE, &mut prompts.extract_memories),
            (RECONCILE_MEMORIES_FILE, &mut prompts.reconcile_memories),
            (CORRECT_MEMORY_FILE, &mut prompts.correct_memory),
            (COMPACT_EPISODES_FILE, &mut prompts.compact_episodes),
            (SUMMARIZE_SESSION_FILE, &mut prompts.summarize_session),
        ] {
            let path = folder.join(file_name);
            if path.exists() {
                *prompt = std::fs::read_to_string(&path)?;
            }
        }
        Ok(prompts)
    }
}

/// How to reach the chat endpoint.
#[derive(Clone)]
pub struct LlmSettings {
    /// e.g. `https://api.openai.com/v1`; `/chat/completions` is appended.
    pub base_url: String,
    pub model: String,
    /// Sent as `Authorization: Bearer …` when present.
    pub api_key: Option<String>,
    /// Deadline of one attempt.
    pub request_timeout: Duration,
    /// Attempts per call (429, 5xx and network failures are retried with backoff).
    pub max_attempts: usize,
    pub prompts: LlmPrompts,
}

// Hand-written so the API key never reaches a log through `{:?}`.
impl std::fmt::Debug for LlmSettings {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("LlmSettings")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("request_timeout", &self.request_timeout)
            .field("max_attempts", &self.max_attempts)
            .finish()
    }
}

#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum LlmError {
    /// Network failure, timeout, 429 or 5xx after every attempt.
    #[error("the LLM is unavailable: {0}")]
    Unavailable(String),
    /// The provider refused the request (4xx other than 429): retrying will not help.
    #[error("the LLM refused the request: {0}")]
    Refused(String),
    /// The answer was not the JSON asked for.
    #[error("the LLM answered something unreadable: {0}")]
    Malformed(String),
}

/// One completed call.
#[derive(Clone, Debug, PartialEq)]
pub struct ChatReply {
    pub text: String,
    pub tokens_in: u64,
    pub tokens_out: u64,
    pub duration: Duration,
}

#[derive(Serialize)]
struct ChatRequest<'request> {
    model: &'request str,
    messages: [ChatMessage<'request>; 2],
    temperature: f32,
    response_format: ResponseFormat,
}

#[derive(Serialize)]
struct ChatMessage<'request> {
    role: &'static str,
    content: &'request str,
}

#[derive(Serialize)]
struct ResponseFormat {
    #[serde(rename = "type")]
    kind: &'static str,
}

#[derive(Deserialize)]
struct ChatResponse {
    choices: Vec<ChatChoice>,
    #[serde(default)]
    usage: Option<ChatUsage>,
}

#[derive(Deserialize)]
struct ChatChoice {
    message: ChatChoiceMessage,
}

#[derive(Deserialize)]
struct ChatChoiceMessage {
    #[serde(default)]
    content: Option<String>,
}

#[derive(Deserialize)]
struct ChatUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
}

/// A rough count for providers that report no usage: about four characters a token.
fn estimated_tokens(text: &str) -> u64 {
    (text.chars().count() as u64).div_ceil(4)
}

/// A chat model reached over HTTP.
pub struct ChatModel {
    http_client: reqwest::Client,
    completions_url: String,
    settings: LlmSettings,
}

impl ChatModel {
    pub fn new(settings: LlmSettings) -> Result<Self, LlmError> {
        let http_client = reqwest::Client::builder()
            .timeout(settings.request_timeout)
            .build()
            .map_err(|error| {
                LlmError::Unavailable(format!("cannot build the HTTP client: {error}"))
            })?;
        let completions_url = format!(
            "{}/chat/completions",
            settings.base_url.trim_end_matches('/')
        );
        Ok(Self {
            http_client,
            completions_url,
            settings,
        })
    }

    pub fn model(&self) -> &str {
        &self.settings.model
    }

    pub fn prompts(&self) -> &LlmPrompts {
        &self.settings.prompts
    }

    /// Ask for a JSON object. Token counts come from the provider's `usage` (estimated
    /// from the text when it reports none).
    pub async fn complete_json(&self, system: &str, user: &str) -> Result<ChatReply, LlmError> {
        let started = Instant::now();
        let attempt = || async { self.attempt(system, user).await };
        let text_and_usage = attempt
            .retry(
                ExponentialBuilder::default()
                    .with_min_delay(Duration::from_millis(200))
                    .with_max_delay(Duration::from_secs(5))
                    .with_max_times(self.settings.max_attempts.saturating_sub(1)),
            )
            .when(|error| matches!(error, LlmError::Unavailable(_)))
            .notify(|error, delay| {
                tracing::warn!(%error, delay_ms = delay.as_millis() as u64, "llm call failed; retrying");
            })
            .await?;
        let (text, usage) = text_and_usage;
        let (tokens_in, tokens_out) = match usage {
            Some(usage) => (usage.prompt_tokens, usage.completion_tokens),
            None => (
                estimated_tokens(system) + estimated_tokens(user),
                estimated_tokens(&text),
            ),
        };
        Ok(ChatReply {
            text,
            tokens_in,
            tokens_out,
            duration: started.elapsed(),
        })
    }

    async fn attempt(
        &self,
        system: &str,
        user: &str,
    ) -> Result<(String, Option<ChatUsage>), LlmError> {
        let mut request = self
            .http_client
            .post(&self.completions_url)
            .json(&ChatRequest {
                model: &self.settings.model,
                messages: [
                    ChatMessage {
                        role: "system",
                        content: system,
                    },
                    ChatMessage {
                        role: "user",
                        content: user,
                    },
                ],
                temperature: 0.0,
                response_format: ResponseFormat {
                    kind: "json_object",
                },
            });
        if let Some(api_key) = &self.settings.api_key {
            request = request.bearer_auth(api_key);
        }
        let response = request
            .send()
            .await
            .map_err(|error| LlmError::Unavailable(error.to_string()))?;
        let status = response.status();
        if status.as_u16() == 429 || status.is_server_error() {
            return Err(LlmError::Unavailable(format!("HTTP {status}")));
        }
        if !status.is_success() {
            let body = response.text().await.unwrap_or_default();
            return Err(LlmError::Refused(format!(
                "HTTP {status}: {}",
                body.chars().take(300).collect::<String>()
            )));
        }
        let answer: ChatResponse = response
            .json()
            .await
            .map_err(|error| LlmError::Malformed(error.to_string()))?;
        let text = answer
            .choices
            .into_iter()
            .next()
            .and_then(|choice| choice.message.content)
            .ok_or_else(|| LlmError::Malformed("no message in the answer".to_string()))?;
        Ok((text, answer.usage))
    }
}

/// The JSON object in a model's answer, tolerating a Markdown code fence around it.
pub fn json_in_answer(text: &str) -> Result<serde_json::Value, LlmError> {
    let trimmed = text.trim();
    let start = trimmed.find('{');
    let end = trimmed.rfind('}');
    let object_text = match (start, end) {
        (Some(start), Some(end)) if start < end => &trimmed[start..=end],
        _ => trimmed,
    };
    serde_json::from_str(object_text).map_err(|error| LlmError::Malformed(error.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_is_found_inside_a_code_fence() {
        let value = json_in_answer("```json\n{\"memories\": []}\n```").unwrap();
        assert_eq!(value, serde_json::json!({"memories": []}));
        assert!(json_in_answer("no json here").is_err());
    }

    #[test]
    fn the_built_in_prompts_are_not_empty_and_a_folder_overrides_one() {
        let built_in = LlmPrompts::default();
        assert!(built_in.extract_memories.contains("\"memories\""));
        assert!(built_in.reconcile_memories.contains("\"decisions\""));
        let folder = std::env::temp_dir().join(format!("engram-prompts-{}", std::process::id()));
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::write(folder.join(EXTRACT_MEMORIES_FILE), "custom").unwrap();
        let loaded = LlmPrompts::from_folder(&folder).unwrap();
        assert_eq!(loaded.extract_memories, "custom");
        assert_eq!(loaded.reconcile_memories, built_in.reconcile_memories);
        std::fs::remove_dir_all(&folder).unwrap();
    }
}
