//! Agent runs: one task of an agent with its timeline of steps (model calls, tool calls,
//! notes, and the memory operations linked to it), and the uses of memories that tie a
//! memory to the recalls, contexts and runs it reached. The wire bodies parse here.

use crate::validation::{ExternalId, FieldError};
use crate::{InvalidInput, MemoryId};
use chrono::{DateTime, Utc};
use serde::Deserialize;
use sha2::{Digest, Sha256};

text_enum!(
    /// Whether run steps keep texts (prompts, completions, tool arguments and results) or
    /// only their SHA-256 digests. A project setting, `digests` by default.
    RunCapture {
        Digests => "digests",
        Full => "full",
    }
);

text_enum!(
    /// Where a run stands. `expired` is an open run idle longer than [`RUN_IDLE_EXPIRY_HOURS`].
    RunStatus {
        Open => "open",
        Ended => "ended",
        Expired => "expired",
    }
);

text_enum!(
    /// What a step of a run's timeline records: the client's own (`model_call`, `tool_call`,
    /// `note`) and the memory operations linked to the run by Engram.
    RunStepType {
        ModelCall => "model_call",
        ToolCall => "tool_call",
        Note => "note",
        MemoryWrite => "memory_write",
        Search => "search",
        Context => "context",
        Feedback => "feedback",
        Trajectory => "trajectory",
    }
);

text_enum!(
    /// How a memory was used: returned by a search, packed into an assembled context, or
    /// injected into a model call of a run.
    MemoryUseKind {
        Returned => "returned",
        Packed => "packed",
        Injected => "injected",
    }
);

text_enum!(
    /// One part of an assembled context, in the order the token budget is spent on them.
    ContextPart {
        Procedures => "procedures",
        State => "state",
        Memories => "memories",
        RecentMessages => "recent_messages",
        Summary => "summary",
    }
);

/// An open run idle this long (no step, no linked call) is `expired`: it takes no more
/// steps and cannot be ended.
pub const RUN_IDLE_EXPIRY_HOURS: i64 = 24;
/// Longest task description.
pub const MAX_RUN_TASK_CHARS: usize = 2_000;
/// Longest outcome (`success`, `failed: timeout`, …).
pub const MAX_RUN_OUTCOME_CHARS: usize = 64;
/// Most steps one run takes, linked memory operations included.
pub const MAX_RUN_STEPS: u32 = 1_000;
/// Largest prompt, completion, tool arguments or result kept (as text, or digested).
pub const MAX_STEP_TEXT_BYTES: usize = 64 * 1024;
/// Longest note.
pub const MAX_NOTE_CHARS: usize = 8_000;
/// Most memory ids one model call names as injected.
pub const MAX_INJECTED_MEMORY_IDS: usize = 100;
/// Longest model or tool name, and longest digest a client sends.
pub const MAX_STEP_NAME_CHARS: usize = 200;
/// Most runs, recalls or uses one page lists.
pub const MAX_RUN_PAGE: u64 = 200;
/// Default page of runs, recalls and uses.
pub const DEFAULT_RUN_PAGE: u64 = 50;
/// Largest token budget of an assembled context.
pub const MAX_CONTEXT_BUDGET_TOKENS: u64 = 32_768;
/// Most recent messages a context considers.
pub const MAX_CONTEXT_MESSAGES: u64 = 50;
/// Most session values a context considers.
pub const MAX_CONTEXT_STATE_VALUES: usize = 100;

/// The SHA-256 of a text, as `sha256:<hex>`: what a run keeps of a text when capture is off.
pub fn text_digest(text: &str) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(text.as_bytes())))
}

/// A new run, as `POST /v1/runs` takes it.
#[derive(Clone, Debug, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct StartRunBody {
    /// What the agent is asked to do: 1–2,000 characters.
    #[cfg_attr(
        feature = "openapi",
        schema(min_length = 1, max_length = 2000, pattern = "\\S")
    )]
    pub task: String,
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::openapi_schemas::optional_external_id))]
    pub user_id: Option<String>,
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::openapi_schemas::optional_external_id))]
    pub agent_id: Option<String>,
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::openapi_schemas::optional_external_id))]
    pub session_id: Option<String>,
    /// The run this one is a sub-task of (same project and end-user).
    pub parent_run_id: Option<uuid::Uuid>,
    /// A JSON object of at most 16 KiB.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub metadata: Option<serde_json::Value>,
}

/// A new run, parsed.
#[derive(Clone, Debug)]
pub struct StartRunRequest {
    pub task: String,
    pub user_id: Option<ExternalId>,
    pub agent_id: Option<ExternalId>,
    pub session_id: Option<ExternalId>,
    pub parent_run_id: Option<uuid::Uuid>,
    pub metadata: serde_json::Map<String, serde_json::Value>,
}

impl StartRunBody {
    pub fn into_request(self) -> Result<StartRunRequest, InvalidInput> {
        let mut errors = Vec::new();
        let task = self.task.trim().to_string();
        let characters = task.chars().count();
        if characters == 0 {
            errors.push(FieldError::new("task", "must not be empty"));
        } else if characters > MAX_RUN_TASK_CHARS {
            errors.push(FieldError::new(
                "task",
                format!("must be at most {MAX_RUN_TASK_CHARS} characters, got {characters}"),
            ));
        }
        let user_id = ExternalId::parse_field(self.user_id.as_deref(), "user_id", &mut errors);
        let agent_id = ExternalId::parse_field(self.agent_id.as_deref(), "agent_id", &mut errors);
        let session_id =
            ExternalId::parse_field(self.session_id.as_deref(), "session_id", &mut errors);
        let metadata =
            crate::request_bodies::metadata_object(self.metadata, "metadata", &mut errors);
        errors.extend(crate::memory::metadata_errors("metadata", &metadata));
        if !errors.is_empty() {
            return Err(InvalidInput(errors));
        }
        Ok(StartRunRequest {
            task,
            user_id,
            agent_id,
            session_id,
            parent_run_id: self.parent_run_id,
            metadata,
        })
    }
}

/// One step a client records, as `POST /v1/runs/{id}/steps` takes it.
#[derive(Clone, Debug, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum RunStepBody {
    /// A call to a model: which memories were injected into its prompt, and its tokens.
    ModelCall {
        /// 1–200 characters.
        model: String,
        /// The `context_id` of the assembled context the prompt used.
        context_id: Option<uuid::Uuid>,
        /// The memories injected into the prompt (at most 100), each of this project.
        #[cfg_attr(feature = "openapi", schema(max_items = 100))]
        injected_memory_ids: Option<Vec<String>>,
        #[cfg_attr(feature = "openapi", schema(minimum = 0))]
        tokens_in: Option<u64>,
        #[cfg_attr(feature = "openapi", schema(minimum = 0))]
        tokens_out: Option<u64>,
        /// The client's digest of the prompt (at most 200 characters).
        prompt_digest: Option<String>,
        completion_digest: Option<String>,
        /// The prompt text (at most 64 KiB): kept where the project's `run_capture` is
        /// `full`, otherwise replaced by its SHA-256 digest.
        prompt: Option<String>,
        completion: Option<String>,
    },
    /// A call to a tool, with its arguments and result (kept as text where the project's
    /// `run_capture` is `full`, otherwise as SHA-256 digests).
    ToolCall {
        /// 1–200 characters.
        tool: String,
        arguments: Option<serde_json::Value>,
        result: Option<serde_json::Value>,
    },
    /// A note (1–8,000 characters), always kept.
    Note { text: String },
}

/// A step as a client recorded it, checked.
#[derive(Clone, Debug, PartialEq)]
pub enum ClientStep {
    ModelCall {
        model: String,
        context_id: Option<uuid::Uuid>,
        injected_memory_ids: Vec<MemoryId>,
        tokens_in: Option<u64>,
        tokens_out: Option<u64>,
        prompt_digest: Option<String>,
        completion_digest: Option<String>,
        prompt: Option<String>,
        completion: Option<String>,
    },
    ToolCall {
        tool: String,
        arguments: Option<String>,
        result: Option<String>,
    },
    Note {
        text: String,
    },
}

fn name_field(text: &str, field: &str, errors: &mut Vec<FieldError>) -> String {
    let characters = text.chars().count();
    if text.trim().is_empty() {
        errors.push(FieldError::new(field, "must not be empty"));
    } else if characters > MAX_STEP_NAME_CHARS {
        errors.push(FieldError::new(
            field,
            format!("must be at most {MAX_STEP_NAME_CHARS} characters, got {characters}"),
        ));
    } else if text.chars().any(char::is_control) {
        errors.push(FieldError::new(
            field,
            "must not contain control characters",
        ));
    }
    text.to_string()
}

fn optional_name(
    text: Option<String>,
    field: &str,
    errors: &mut Vec<FieldError>,
) -> Option<String> {
    text.map(|text| name_field(&text, field, errors))
}

fn bounded_text(text: Option<String>, field: &str, errors: &mut Vec<FieldError>) -> Option<String> {
    let text = text?;
    if text.len() > MAX_STEP_TEXT_BYTES {
        errors.push(FieldError::new(
            field,
            format!(
                "must be at most {MAX_STEP_TEXT_BYTES} bytes, got {}",
                text.len()
            ),
        ));
    }
    Some(text)
}

/// A tool's arguments or result as text: a string as it is, anything else as compact JSON.
fn json_text(value: Option<serde_json::Value>) -> Option<String> {
    match value? {
        serde_json::Value::Null => None,
        serde_json::Value::String(text) => Some(text),
        other => Some(other.to_string()),
    }
}

impl RunStepBody {
    pub fn into_step(self) -> Result<ClientStep, InvalidInput> {
        let mut errors = Vec::new();
        let step = match self {
            RunStepBody::ModelCall {
                model,
                context_id,
                injected_memory_ids,
                tokens_in,
                tokens_out,
                prompt_digest,
                completion_digest,
                prompt,
                completion,
            } => {
                let mut ids = injected_memory_ids.unwrap_or_default();
                if ids.len() > MAX_INJECTED_MEMORY_IDS {
                    errors.push(FieldError::new(
                        "injected_memory_ids",
                        format!("at most {MAX_INJECTED_MEMORY_IDS} ids, got {}", ids.len()),
                    ));
                    // Refused anyway: the rest is not read (its size is the body's).
                    ids.clear();
                }
                let mut injected = Vec::with_capacity(ids.len());
                for (position, id) in ids.iter().enumerate() {
                    match id.parse::<MemoryId>() {
                        Ok(id) if !injected.contains(&id) => injected.push(id),
                        Ok(_) => {}
                        Err(_) => errors.push(FieldError::new(
                            format!("injected_memory_ids[{position}]"),
                            "must be a memory id (a UUID)",
                        )),
                    }
                }
                ClientStep::ModelCall {
                    model: name_field(&model, "model", &mut errors),
                    context_id,
                    injected_memory_ids: injected,
                    tokens_in,
                    tokens_out,
                    prompt_digest: optional_name(prompt_digest, "prompt_digest", &mut errors),
                    completion_digest: optional_name(
                        completion_digest,
                        "completion_digest",
                        &mut errors,
                    ),
                    prompt: bounded_text(prompt, "prompt", &mut errors),
                    completion: bounded_text(completion, "completion", &mut errors),
                }
            }
            RunStepBody::ToolCall {
                tool,
                arguments,
                result,
            } => ClientStep::ToolCall {
                tool: name_field(&tool, "tool", &mut errors),
                arguments: bounded_text(json_text(arguments), "arguments", &mut errors),
                result: bounded_text(json_text(result), "result", &mut errors),
            },
            RunStepBody::Note { text } => {
                let characters = text.chars().count();
                if text.trim().is_empty() {
                    errors.push(FieldError::new("text", "must not be empty"));
                } else if characters > MAX_NOTE_CHARS {
                    errors.push(FieldError::new(
                        "text",
                        format!("must be at most {MAX_NOTE_CHARS} characters, got {characters}"),
                    ));
                }
                ClientStep::Note { text }
            }
        };
        if errors.is_empty() {
            Ok(step)
        } else {
            Err(InvalidInput(errors))
        }
    }
}

/// How a run ends, as `POST /v1/runs/{id}/end` takes it.
#[derive(Clone, Debug, Default, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct EndRunBody {
    /// 1–64 characters: `success`, `failure`, `abandoned`, or the client's own word.
    #[cfg_attr(feature = "openapi", schema(min_length = 1, max_length = 64))]
    pub outcome: String,
    /// Keep the run's tool steps as one memory of kind `trajectory`; default: the project's
    /// `keep_trajectories` setting.
    pub keep_trajectory: Option<bool>,
}

/// A run's end, checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndRunRequest {
    pub outcome: String,
    pub keep_trajectory: Option<bool>,
}

impl EndRunBody {
    pub fn into_request(self) -> Result<EndRunRequest, InvalidInput> {
        let outcome = self.outcome.trim().to_string();
        let characters = outcome.chars().count();
        let problem = if characters == 0 {
            Some("must not be empty".to_string())
        } else if characters > MAX_RUN_OUTCOME_CHARS {
            Some(format!(
                "must be at most {MAX_RUN_OUTCOME_CHARS} characters, got {characters}"
            ))
        } else if outcome.chars().any(char::is_control) {
            Some("must not contain control characters".to_string())
        } else {
            None
        };
        if let Some(problem) = problem {
            return Err(InvalidInput(vec![FieldError::new("outcome", problem)]));
        }
        Ok(EndRunRequest {
            outcome,
            keep_trajectory: self.keep_trajectory,
        })
    }
}

/// A run as stored.
#[derive(Clone, Debug, PartialEq)]
pub struct RunRecord {
    pub id: uuid::Uuid,
    pub user_id: Option<String>,
    pub agent_id: Option<String>,
    pub session_id: Option<String>,
    pub parent_run_id: Option<uuid::Uuid>,
    pub task: String,
    pub metadata: serde_json::Value,
    /// `open` or `ended` as stored; [`RunRecord::status_at`] tells `expired`.
    pub status: RunStatus,
    pub outcome: Option<String>,
    pub created_at: DateTime<Utc>,
    pub last_activity_at: DateTime<Utc>,
    pub ended_at: Option<DateTime<Utc>>,
    pub step_count: u32,
    pub credential: String,
    pub channel: String,
    pub trajectory_memory_id: Option<MemoryId>,
}

impl RunRecord {
    /// The content-free form for a caller that may not read content: the task, metadata
    /// and outcome are the agent's words.
    pub fn without_content(mut self) -> RunRecord {
        self.task = String::new();
        self.metadata = serde_json::json!({});
        self.outcome = None;
        self
    }

    /// The status at `now`: an open run idle past the expiry is `expired`.
    pub fn status_at(&self, now: DateTime<Utc>) -> RunStatus {
        if self.status == RunStatus::Open
            && now - self.last_activity_at > chrono::Duration::hours(RUN_IDLE_EXPIRY_HOURS)
        {
            RunStatus::Expired
        } else {
            self.status
        }
    }
}

/// One step of a run's timeline as stored: what it records is in `detail` (ids, versions,
/// digests, and texts only where capture was on).
#[derive(Clone, Debug, PartialEq)]
pub struct RunStepRecord {
    pub id: uuid::Uuid,
    pub run_id: uuid::Uuid,
    pub seq: u32,
    pub step_type: RunStepType,
    pub created_at: DateTime<Utc>,
    pub detail: serde_json::Value,
}

/// A memory at a version, as a step or a use names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MemoryAtVersion {
    pub memory_id: MemoryId,
    pub version: i64,
}

impl MemoryAtVersion {
    pub fn to_json(self) -> serde_json::Value {
        serde_json::json!({"memory_id": self.memory_id.to_string(), "version": self.version})
    }
}

/// One use of a memory to store.
#[derive(Clone, Debug, PartialEq)]
pub struct NewMemoryUse {
    pub memory: MemoryAtVersion,
    pub kind: MemoryUseKind,
    pub used_at: DateTime<Utc>,
    pub recall_id: Option<uuid::Uuid>,
    pub run_id: Option<uuid::Uuid>,
    pub user_id: Option<String>,
}

/// One use of a memory as stored.
#[derive(Clone, Debug, PartialEq)]
pub struct MemoryUseRecord {
    pub id: uuid::Uuid,
    pub memory_id: MemoryId,
    pub version: i64,
    pub kind: MemoryUseKind,
    pub used_at: DateTime<Utc>,
    pub recall_id: Option<uuid::Uuid>,
    pub run_id: Option<uuid::Uuid>,
    pub user_id: Option<String>,
}

/// How often a memory was used since a moment: recalls that returned it, contexts that
/// packed it, and distinct runs it reached (injected, or through a linked recall).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryImpactCounts {
    pub recalls: u64,
    pub contexts: u64,
    pub runs: u64,
}

/// What lists of runs filter on.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunFilter {
    pub user_id: Option<String>,
    pub agent_id: Option<String>,
    pub session_id: Option<String>,
    /// `open`, `ended` or `expired`.
    pub status: Option<RunStatus>,
    pub from: Option<DateTime<Utc>>,
    pub to: Option<DateTime<Utc>>,
}

/// What lists of recall events filter on.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecallFilter {
    pub user_id: Option<String>,
    pub session_id: Option<String>,
    pub memory_id: Option<MemoryId>,
    pub run_id: Option<uuid::Uuid>,
    pub profile: Option<String>,
    pub from: Option<DateTime<Utc>>,
    pub to: Option<DateTime<Utc>>,
}

/// A page size in 1–[`MAX_RUN_PAGE`] (default [`DEFAULT_RUN_PAGE`]).
pub fn run_page_errors(limit: u64) -> Vec<FieldError> {
    if (1..=MAX_RUN_PAGE).contains(&limit) {
        Vec::new()
    } else {
        vec![FieldError::new(
            "limit",
            format!("must be 1–{MAX_RUN_PAGE}, got {limit}"),
        )]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(json: serde_json::Value) -> Result<ClientStep, Vec<String>> {
        let body: RunStepBody = serde_json::from_value(json).map_err(|e| vec![e.to_string()])?;
        body.into_step()
            .map_err(|InvalidInput(errors)| errors.into_iter().map(|e| e.field).collect())
    }

    #[test]
    fn a_model_call_names_each_bad_field_and_drops_repeated_ids() {
        let id = MemoryId::generate();
        let parsed = step(serde_json::json!({
            "type": "model_call", "model": "gpt", "injected_memory_ids": [id.to_string(), id.to_string()]
        }))
        .unwrap();
        let ClientStep::ModelCall {
            injected_memory_ids,
            ..
        } = parsed
        else {
            panic!("a model call parses as one");
        };
        assert_eq!(injected_memory_ids, vec![id]);
        let fields = step(serde_json::json!({
            "type": "model_call", "model": " ", "injected_memory_ids": ["nope"],
            "prompt": "x".repeat(MAX_STEP_TEXT_BYTES + 1)
        }))
        .unwrap_err();
        assert_eq!(fields, vec!["injected_memory_ids[0]", "model", "prompt"]);
    }

    #[test]
    fn tool_arguments_keep_strings_and_compact_other_json() {
        let parsed = step(serde_json::json!({
            "type": "tool_call", "tool": "weather", "arguments": {"city": "Oslo"}, "result": "rain"
        }))
        .unwrap();
        assert_eq!(
            parsed,
            ClientStep::ToolCall {
                tool: "weather".into(),
                arguments: Some("{\"city\":\"Oslo\"}".into()),
                result: Some("rain".into()),
            }
        );
        assert!(step(serde_json::json!({"type": "dance"})).is_err());
    }

    #[test]
    fn an_open_run_idle_past_the_expiry_is_expired() {
        let now = Utc::now();
        let run = RunRecord {
            id: uuid::Uuid::now_v7(),
            user_id: None,
            agent_id: None,
            session_id: None,
            parent_run_id: None,
            task: "t".into(),
            metadata: serde_json::json!({}),
            status: RunStatus::Open,
            outcome: None,
            created_at: now,
            last_activity_at: now - chrono::Duration::hours(RUN_IDLE_EXPIRY_HOURS + 1),
            ended_at: None,
            step_count: 0,
            credential: "key".into(),
            channel: "http".into(),
            trajectory_memory_id: None,
        };
        assert_eq!(run.status_at(now), RunStatus::Expired);
        let recent = RunRecord {
            last_activity_at: now,
            ..run
        };
        assert_eq!(recent.status_at(now), RunStatus::Open);
    }
}
