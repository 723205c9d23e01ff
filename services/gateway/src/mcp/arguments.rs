//! The MCP tools' arguments: their JSON Schemas (what a model reads in `tools/list`) and the
//! strict reading of a call. Each turns into the native API's body, whose parsing is shared.

use chrono::{DateTime, Utc};
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use uuid::Uuid;

/// `add_memory`.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AddMemoryArguments {
    /// What to remember, as one self-contained statement ("Prefers short answers",
    /// "Lives in Lyon since 2024"); at most 32 KiB.
    #[schemars(length(min = 1, max = 32768))]
    pub content: String,
    /// The end-user the memory is about. An end-user token always writes its own; with a
    /// project key, leave it out only for knowledge that belongs to no one person.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_id: Option<String>,
    /// The agent that learned it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    /// The conversation or session it came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// `semantic` (a fact; the default), `episodic` (an event), `procedural` (how to do
    /// something) or `preference`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["semantic", "episodic", "procedural", "preference"]))]
    pub kind: Option<String>,
    /// A stable name for a fact that can change (`home_city`): a new memory with the same
    /// key, end-user and agent replaces the old one, which stays in its history.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// A JSON object of at most 16 KiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
    /// Labels such as `diet` or `travel`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub categories: Option<Vec<String>>,
    /// `model_inferred` (the default: you concluded it) or `user_stated` (the user said it
    /// in so many words).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["model_inferred", "user_stated", "tool_result"]))]
    pub source: Option<String>,
    /// How sure you are, 0–1 (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0, max = 1.0))]
    pub confidence: Option<f64>,
    /// When the memory should be forgotten (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<DateTime<Utc>>,
    /// When what it describes happened (RFC 3339); default now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub occurred_at: Option<DateTime<Utc>>,
    /// `private` (only its agent reads it; needs `agent_id`) or `shared` (every agent of
    /// the project); default: the project's setting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["private", "shared"]))]
    pub visibility: Option<String>,
    /// Share it with one of the project's named teams of agents only (implies `shared`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared_with: Option<String>,
    /// The run (from `start_run`) this write belongs to.
    #[serde(default, skip_serializing)]
    pub run_id: Option<Uuid>,
}

/// Any JSON value, as a schema object: clients (the TypeScript SDK) refuse the boolean
/// schema `true` that schemars writes for a free value.
fn any_json(_: &mut SchemaGenerator) -> Schema {
    json_schema!({})
}

/// A JSON object (a filter tree).
fn json_object(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": "object"})
}

/// `search_memories`.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchMemoriesArguments {
    /// What to look for, in natural language (at most 8 KiB).
    #[schemars(length(min = 1, max = 8192))]
    pub query: String,
    /// Whose memories: an end-user token searches its own; with a project key, leave it out
    /// to search the whole project.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    /// Boosts this session's memories (a filter with `session_only: true`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_only: Option<bool>,
    /// Only these kinds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("items" = {"enum": ["semantic", "episodic", "procedural", "preference", "trajectory"]}))]
    pub kinds: Option<Vec<String>>,
    /// A filter tree: conditions such as `{"metadata.topic": "billing"}`,
    /// `{"categories": {"contains": "diet"}}`, `{"created_at": {"gte": "2026-01-01T00:00:00Z"}}`,
    /// combined with `{"AND": […]}`, `{"OR": […]}` and `{"NOT": …}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "json_object")]
    pub filters: Option<Value>,
    /// How many results, 1–100 (default 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100))]
    pub top_k: Option<i64>,
    /// Leave out results scoring below this, 0–1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0, max = 1.0))]
    pub min_score: Option<f64>,
    /// Rank what was true at this moment (RFC 3339, not in the future).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub as_of: Option<DateTime<Utc>>,
    /// With `agent_id`: that agent's memories and those shared with every agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_shared: Option<bool>,
    /// 0–1 (default 1): what a shared memory's score counts for beside the agent's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0, max = 1.0))]
    pub shared_weight: Option<f64>,
    /// The run (from `start_run`) this search belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<Uuid>,
}

/// `list_memories`.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListMemoriesArguments {
    /// Whose memories: an end-user token lists its own; with a project key, leave it out to
    /// list the whole project.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["semantic", "episodic", "procedural", "preference", "trajectory"]))]
    pub kind: Option<String>,
    /// `active` (default) or `superseded` (replaced by a newer memory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["active", "superseded"]))]
    pub state: Option<String>,
    /// Page size, 1–100 (default 20). Newest first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100))]
    pub limit: Option<i64>,
    /// The previous page's `next_cursor`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

/// The page `list_memories` gives by default, and its largest: a page is read into a model's
/// context.
pub const DEFAULT_LIST_PAGE: i64 = 20;
pub const MAX_LIST_PAGE: i64 = 100;

/// `get_memory`, `delete_memory` and `memory_history`: one memory.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryIdArguments {
    /// The memory's `id`, as search, list and add answer it.
    pub id: String,
}

/// `delete_memory`.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeleteMemoryArguments {
    /// The memory's `id`.
    pub id: String,
    /// Why it is deleted (kept in the audit log; at most 1,024 characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// `update_memory`.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateMemoryArguments {
    /// The memory's `id`.
    #[serde(skip_serializing)]
    pub id: String,
    /// The corrected text (the old one stays in its history).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 32768))]
    pub content: Option<String>,
    /// Replaces the metadata: a JSON object of at most 16 KiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub categories: Option<Vec<String>>,
    /// A new expiry (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<DateTime<Utc>>,
    /// Why it changed (kept in its history).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Change it only if it is still at this version (as get_memory answered it).
    #[serde(default, skip_serializing)]
    pub expected_version: Option<i64>,
}

/// `delete_all_memories`.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeleteAllMemoriesArguments {
    /// Delete this end-user's memories (at least one of `user_id`, `agent_id`, `session_id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// Must be `true`: this deletes every memory that matches, for good.
    pub confirm: bool,
    /// Why (kept in the audit log).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// `get_context`.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GetContextArguments {
    /// What the next step is about; memories are recalled for it (at most 8 KiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
    /// The task at hand, when the query is not given (at most 8 KiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    /// How many tokens the context may take, 1–32,768.
    #[schemars(range(min = 1, max = 32768))]
    pub token_budget: i64,
    /// Whose context: an end-user token's own; with a project key, the end-user to recall for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    /// The session whose saved state and recent messages to include.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// The parts to build; default all that can be built.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("items" = {"enum": ["procedures", "state", "memories", "recent_messages", "summary"]}))]
    pub include: Option<Vec<String>>,
    /// The run (from `start_run`) this step belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<Uuid>,
}

/// `start_run`.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StartRunArguments {
    /// What you are asked to do, 1–2,000 characters.
    #[schemars(length(min = 1, max = 2000))]
    pub task: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// The run this one is a sub-task of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_run_id: Option<Uuid>,
    /// A JSON object of at most 16 KiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
}

/// `record_step`.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RecordStepArguments {
    /// The run's `run_id`, as `start_run` answered it.
    #[serde(skip_serializing)]
    pub run_id: String,
    /// `note` (with `text`), `tool_call` (with `tool`, `arguments`, `result`) or
    /// `model_call` (with `model` and the memories you were given).
    #[serde(rename = "type")]
    #[schemars(extend("enum" = ["note", "tool_call", "model_call"]))]
    pub step_type: String,
    /// A note's text, 1–8,000 characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// The tool called.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "any_json")]
    pub arguments: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "any_json")]
    pub result: Option<Value>,
    /// The model called.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The `context_id` of the `get_context` answer the model was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_id: Option<Uuid>,
    /// The ids of the memories put in the model's prompt (at most 100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub injected_memory_ids: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_in: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_out: Option<u64>,
}

/// `end_run`.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EndRunArguments {
    /// The run's `run_id`.
    #[serde(skip_serializing)]
    pub run_id: String,
    /// `success`, `failure`, `abandoned`, or a word of your own (1–64 characters).
    pub outcome: String,
    /// Keep the run's tool steps as one `trajectory` memory (default: the project's setting).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_trajectory: Option<bool>,
}

/// `get_state`.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GetStateArguments {
    /// The session (task, conversation) whose working state to read.
    pub session_id: String,
    /// One value's key; leave it out to read every value of the session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// Whose namespace: an end-user token's own; with a project key, the end-user's (or none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_id: Option<String>,
}

/// `set_state`.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SetStateArguments {
    /// The session (task, conversation) the value belongs to.
    pub session_id: String,
    /// The value's name (`plan`, `progress`).
    pub key: String,
    /// Any JSON value, at most 64 KiB as JSON text.
    #[schemars(schema_with = "any_json")]
    pub value: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_id: Option<String>,
    /// The agent writing (its credential bound to one agent writes as it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    /// Write only over this version (as get_state answered it), so two workers do not
    /// overwrite each other; leave it out to write unconditionally.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_version: Option<i64>,
    /// Write only if there is no value yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub create_only: Option<bool>,
}
