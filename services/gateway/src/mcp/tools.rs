//! The MCP tools: one table of names, descriptions, schemas and hints, and one dispatch in
//! which each tool reads its arguments and calls one use case as the caller's principal.

use super::arguments::{
    AddMemoryArguments, DEFAULT_LIST_PAGE, DeleteAllMemoriesArguments, DeleteMemoryArguments,
    EndRunArguments, GetContextArguments, GetStateArguments, ListMemoriesArguments, MAX_LIST_PAGE,
    MemoryIdArguments, RecordStepArguments, SearchMemoriesArguments, SetStateArguments,
    StartRunArguments, UpdateMemoryArguments,
};
use crate::auth::ProjectPrincipal;
use crate::problem::{ApiError, ProblemKind};
use crate::routes::memories::{ListFieldNames, ListMemoriesQuery, parse_memory_id};
use crate::routes::runs::{ContextBody, ContextView, RunStepView, RunView, parse_run_id};
use crate::routes::sessions::SessionStateView;
use crate::views::{EditMemoryBody, HistoryView, MemoryView, SearchResultView};
use axum::http::request::Parts;
use engram_core::audit::Channel;
use engram_core::memory_filter::{EntityField, MemoryFilter};
use engram_core::request_bodies::{AddMemoriesBody, NewMemoryBody, SearchBody};
use engram_core::runs::{EndRunBody, RunStepBody, StartRunBody};
use engram_core::{ExternalId, FieldError, Principal};
use engram_engine::{
    AddMemoriesRequest, AddOutcome, DeleteMatchingRequest, DeleteMemoryRequest, EditMemoryRequest,
    MemoryEngine, PutSessionStateRequest, SessionStateAddress,
};
use rmcp::handler::server::common::schema_for_input;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, JsonObject,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
    ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use std::sync::Arc;

/// What the server tells a model when it connects.
const INSTRUCTIONS: &str = "Long-term memory. Call search_memories before answering anything \
that depends on the user or earlier work; call add_memory when the user states a durable fact \
or preference, or when you learn something worth keeping.";

/// The header a static client configuration uses to name its end-user once (Codex's
/// `env_http_headers`, Claude Code's `--header`): the `user_id` of every tool that takes one
/// and was not given one. It chooses among what the credential may already read.
pub const DEFAULT_USER_HEADER: &str = "x-engram-user-id";

/// One tool as `tools/list` shows it.
pub struct ToolSpec {
    pub name: &'static str,
    title: &'static str,
    description: &'static str,
    schema: fn() -> Result<Arc<JsonObject>, String>,
    read_only: bool,
    destructive: bool,
    idempotent: bool,
    /// Takes its `user_id` from the `X-Engram-User-Id` header when the call names none. Never
    /// a destructive tool's: a bulk delete names whom it deletes in its own arguments.
    default_user: bool,
}

/// Every tool, in the order `tools/list` gives them.
pub const TOOLS: &[ToolSpec] = &[
    ToolSpec {
        name: "search_memories",
        title: "Search memories",
        description: "Find the stored memories that best match a question, best first, each with a 0–1 score. Call it before answering anything that depends on the user or earlier work.",
        schema: schema_for_input::<SearchMemoriesArguments>,
        read_only: true,
        destructive: false,
        idempotent: true,
        default_user: true,
    },
    ToolSpec {
        name: "add_memory",
        title: "Add a memory",
        description: "Remember one durable fact, preference, event or procedure. Give `key` for a fact that can change, so the new memory replaces the old one. Answers the stored memory with its id.",
        schema: schema_for_input::<AddMemoryArguments>,
        read_only: false,
        destructive: false,
        idempotent: false,
        default_user: true,
    },
    ToolSpec {
        name: "list_memories",
        title: "List memories",
        description: "List stored memories, newest first, a page at a time (pass `next_cursor` as `cursor` for the next page).",
        schema: schema_for_input::<ListMemoriesArguments>,
        read_only: true,
        destructive: false,
        idempotent: true,
        default_user: true,
    },
    ToolSpec {
        name: "get_memory",
        title: "Get a memory",
        description: "Read one memory by its id, with its version.",
        schema: schema_for_input::<MemoryIdArguments>,
        read_only: true,
        destructive: false,
        idempotent: true,
        default_user: false,
    },
    ToolSpec {
        name: "update_memory",
        title: "Correct a memory",
        description: "Correct a memory's text, metadata, categories or expiry. The old version stays in its history; give `expected_version` to change it only if nobody changed it since you read it.",
        schema: schema_for_input::<UpdateMemoryArguments>,
        read_only: false,
        destructive: false,
        idempotent: true,
        default_user: false,
    },
    ToolSpec {
        name: "delete_memory",
        title: "Delete a memory",
        description: "Delete one memory by its id, with its content and history.",
        schema: schema_for_input::<DeleteMemoryArguments>,
        read_only: false,
        destructive: true,
        idempotent: true,
        default_user: false,
    },
    ToolSpec {
        name: "memory_history",
        title: "A memory's history",
        description: "Every version of a memory, oldest first, with who changed it and why.",
        schema: schema_for_input::<MemoryIdArguments>,
        read_only: true,
        destructive: false,
        idempotent: true,
        default_user: false,
    },
    ToolSpec {
        name: "delete_all_memories",
        title: "Delete all memories of an end-user, agent or session",
        description: "Delete every memory of the given user_id, agent_id and/or session_id (at least one; all given must match). Needs `confirm: true`. Answers how many were deleted and how many remain (at most 10,000 per call).",
        schema: schema_for_input::<DeleteAllMemoriesArguments>,
        read_only: false,
        destructive: true,
        idempotent: true,
        default_user: false,
    },
    ToolSpec {
        name: "get_context",
        title: "Get the context for a step",
        description: "The text to put in your prompt for the next step, within a token budget: standing procedures, the session's saved state, the memories relevant to the query and recent messages, each line with where it came from.",
        schema: schema_for_input::<GetContextArguments>,
        read_only: true,
        destructive: false,
        idempotent: true,
        default_user: true,
    },
    ToolSpec {
        name: "start_run",
        title: "Start a run",
        description: "Open a run for a task, so its steps, searches and writes form one timeline. Pass the answered `run_id` to later calls.",
        schema: schema_for_input::<StartRunArguments>,
        read_only: false,
        destructive: false,
        idempotent: false,
        default_user: true,
    },
    ToolSpec {
        name: "record_step",
        title: "Record a run step",
        description: "Record a step of a run: a `note`, a `tool_call` with its arguments and result, or a `model_call` with the memories it was given.",
        schema: schema_for_input::<RecordStepArguments>,
        read_only: false,
        destructive: false,
        idempotent: false,
        default_user: false,
    },
    ToolSpec {
        name: "end_run",
        title: "End a run",
        description: "End a run with its outcome (`success`, `failure`, `abandoned`, …).",
        schema: schema_for_input::<EndRunArguments>,
        read_only: false,
        destructive: false,
        idempotent: false,
        default_user: false,
    },
    ToolSpec {
        name: "get_state",
        title: "Read saved state",
        description: "Read a session's saved working state (one key, or all), with each value's version: how a long task resumes where it stopped.",
        schema: schema_for_input::<GetStateArguments>,
        read_only: true,
        destructive: false,
        idempotent: true,
        default_user: true,
    },
    ToolSpec {
        name: "set_state",
        title: "Save state",
        description: "Save a JSON value under a key of a session (a plan, progress so far). Give `expected_version` to write only over the version you read.",
        schema: schema_for_input::<SetStateArguments>,
        read_only: false,
        destructive: false,
        idempotent: true,
        default_user: true,
    },
];

/// `tools/list`'s answer: every tool of [`TOOLS`].
fn tool_list() -> Result<Vec<Tool>, McpError> {
    TOOLS
        .iter()
        .map(|spec| {
            let schema = (spec.schema)().map_err(|problem| {
                McpError::internal_error(
                    format!("the schema of {} is invalid: {problem}", spec.name),
                    None,
                )
            })?;
            let annotations = ToolAnnotations::with_title(spec.title)
                .read_only(spec.read_only)
                .destructive(spec.destructive)
                .idempotent(spec.idempotent)
                .open_world(false);
            Ok(Tool::new(spec.name, spec.description, schema)
                .with_title(spec.title)
                .with_annotations(annotations))
        })
        .collect()
}

/// The MCP server's handler: stateless, one per request.
#[derive(Clone)]
pub struct EngramTools {
    engine: Arc<MemoryEngine>,
}

impl EngramTools {
    pub fn new(engine: Arc<MemoryEngine>) -> Self {
        Self { engine }
    }
}

impl ServerHandler for EngramTools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("engram", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(tool_list()?))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let Some(spec) = TOOLS.iter().find(|spec| spec.name == request.name) else {
            return Err(McpError::invalid_params(
                format!(
                    "unknown tool {:?}; tools/list names the tools",
                    request.name.chars().take(128).collect::<String>()
                ),
                None,
            ));
        };
        // The door's authentication put the caller on the request; without it nothing runs.
        let parts = context.extensions.get::<Parts>();
        let Some(caller) = parts.and_then(|parts| parts.extensions.get::<ProjectPrincipal>())
        else {
            return Err(McpError::internal_error(
                "the request carries no authenticated caller",
                None,
            ));
        };
        let principal = caller.principal().clone().through(Channel::Mcp {
            tool: spec.name.to_string(),
        });
        let mut arguments = request.arguments.unwrap_or_default();
        let answer = match parts.map(default_user).unwrap_or(Ok(None)) {
            Err(problem) => Err(problem),
            Ok(default) => {
                if let Some(user_id) = default
                    && spec.default_user
                    && arguments.get("user_id").is_none_or(Value::is_null)
                {
                    arguments.insert("user_id".to_string(), Value::String(user_id));
                }
                self.call(spec.name, &principal, arguments).await
            }
        };
        Ok(match answer {
            Ok(value) => CallToolResult::structured(value),
            Err(problem) if problem.kind.status().is_server_error() => {
                let data = refusal(problem);
                let message = data["detail"].as_str().unwrap_or_default().to_string();
                return Err(McpError::internal_error(message, Some(data)));
            }
            Err(problem) => CallToolResult::structured_error(refusal(problem)),
        }
        .into())
    }
}

/// The `X-Engram-User-Id` header's end-user, when the client sends one. One that cannot be
/// read is refused, never ignored: the header is what confines a static configuration's
/// calls to one end-user.
fn default_user(parts: &Parts) -> Result<Option<String>, ApiError> {
    let Some(value) = parts.headers.get(DEFAULT_USER_HEADER) else {
        return Ok(None);
    };
    let refused = |message: &str| {
        ApiError::invalid(vec![FieldError::new(
            "header.X-Engram-User-Id",
            message.to_string(),
        )])
    };
    let text = value
        .to_str()
        .map_err(|_| refused("must be visible ASCII"))?;
    ExternalId::parse(text.trim())
        .map(|user_id| Some(user_id.into_string()))
        .map_err(|message| refused(&message))
}

/// A refused call as the model reads it: the problem's fields, and when to retry.
fn refusal(problem: ApiError) -> Value {
    let mut detail = problem.detail;
    if let Some(seconds) = problem.retry_after_seconds {
        detail.push_str(&format!(" (retry after {seconds} s)"));
    }
    let mut answer = json!({
        "error": problem.code.unwrap_or_else(|| problem.kind.slug().to_string()),
        "status": problem.kind.status().as_u16(),
        "detail": detail,
    });
    if !problem.errors.is_empty() {
        answer["errors"] = json!(problem.errors);
    }
    if let Some(seconds) = problem.retry_after_seconds {
        answer["retry_after_seconds"] = json!(seconds);
    }
    answer
}

type ToolAnswer = Result<Value, ApiError>;

/// The arguments as the tool's type: unknown fields and wrong types are refused, naming the
/// argument.
fn read<T: DeserializeOwned>(arguments: JsonObject) -> Result<T, ApiError> {
    serde_path_to_error::deserialize(Value::Object(arguments)).map_err(|error| {
        let path = error.path().to_string();
        let field = if path == "." {
            "arguments".to_string()
        } else {
            path
        };
        ApiError::invalid(vec![FieldError::new(field, error.inner().to_string())])
    })
}

/// The arguments as the native API's body of the same use case, whose parsing they share.
fn native<B: DeserializeOwned>(arguments: &impl Serialize) -> Result<B, ApiError> {
    match serde_json::to_value(arguments) {
        Ok(Value::Object(object)) => read(object),
        _ => Err(ApiError::new(
            ProblemKind::Internal,
            "the arguments could not be read",
        )),
    }
}

fn answer(view: impl Serialize) -> ToolAnswer {
    serde_json::to_value(view).map_err(|error| {
        tracing::error!(%error, "an mcp answer did not serialise");
        ApiError::new(ProblemKind::Internal, "the answer could not be written")
    })
}

fn external_id(
    text: Option<&str>,
    field: &str,
    errors: &mut Vec<FieldError>,
) -> Option<ExternalId> {
    ExternalId::parse_field(text, field, errors)
}

/// Field errors of a one-memory batch, named as the tool names its arguments.
fn unbatched(errors: Vec<FieldError>) -> ApiError {
    ApiError::invalid(
        errors
            .into_iter()
            .map(|mut error| {
                if let Some(field) = error.field.strip_prefix("memories[0].") {
                    error.field = field.to_string();
                }
                error
            })
            .collect(),
    )
}

impl EngramTools {
    async fn call(&self, tool: &str, principal: &Principal, arguments: JsonObject) -> ToolAnswer {
        match tool {
            "search_memories" => self.search_memories(principal, read(arguments)?).await,
            "add_memory" => self.add_memory(principal, read(arguments)?).await,
            "list_memories" => self.list_memories(principal, read(arguments)?).await,
            "get_memory" => {
                let arguments: MemoryIdArguments = read(arguments)?;
                let memory = self
                    .engine
                    .get_memory_for(principal, parse_memory_id(&arguments.id)?)
                    .await?;
                answer(MemoryView::from(&memory))
            }
            "update_memory" => self.update_memory(principal, read(arguments)?).await,
            "delete_memory" => {
                let arguments: DeleteMemoryArguments = read(arguments)?;
                let request = DeleteMemoryRequest {
                    memory_id: parse_memory_id(&arguments.id)?,
                    reason: arguments.reason,
                };
                self.engine.delete_memory_for(principal, request).await?;
                Ok(json!({ "deleted": arguments.id }))
            }
            "memory_history" => {
                let arguments: MemoryIdArguments = read(arguments)?;
                let history = self
                    .engine
                    .memory_history_for(principal, parse_memory_id(&arguments.id)?)
                    .await?;
                answer(HistoryView {
                    history: history.into_iter().map(Into::into).collect(),
                })
            }
            "delete_all_memories" => self.delete_all_memories(principal, read(arguments)?).await,
            "get_context" => {
                let arguments: GetContextArguments = read(arguments)?;
                let body: ContextBody = native(&arguments)?;
                let request = body.into_request().map_err(ApiError::invalid)?;
                let context = self.engine.assemble_context_for(principal, request).await?;
                answer(ContextView::of(context, false))
            }
            "start_run" => {
                let arguments: StartRunArguments = read(arguments)?;
                let body: StartRunBody = native(&arguments)?;
                let run = self
                    .engine
                    .start_run_for(principal, body.into_request()?)
                    .await?;
                answer(RunView::now(run))
            }
            "record_step" => {
                let arguments: RecordStepArguments = read(arguments)?;
                let run = parse_run_id(&arguments.run_id)?;
                let body: RunStepBody = native(&arguments)?;
                let step = self
                    .engine
                    .add_run_step_for(principal, run, body.into_step()?)
                    .await?;
                answer(RunStepView::from(step))
            }
            "end_run" => {
                let arguments: EndRunArguments = read(arguments)?;
                let run = parse_run_id(&arguments.run_id)?;
                let body: EndRunBody = native(&arguments)?;
                let run = self
                    .engine
                    .end_run_for(principal, run, body.into_request()?)
                    .await?;
                answer(RunView::now(run))
            }
            "get_state" => self.get_state(principal, read(arguments)?).await,
            "set_state" => self.set_state(principal, read(arguments)?).await,
            _ => Err(ApiError::new(ProblemKind::NotFound, "no such tool")),
        }
    }

    async fn search_memories(
        &self,
        principal: &Principal,
        arguments: SearchMemoriesArguments,
    ) -> ToolAnswer {
        let body: SearchBody = native(&arguments)?;
        let parsed = body.into_request().map_err(ApiError::invalid)?;
        let found = self
            .engine
            .search_memories_for(principal, parsed.search)
            .await?;
        let outcome = &found.outcome;
        answer(json!({
            "results": outcome
                .results
                .iter()
                .map(|hit| SearchResultView {
                    memory: MemoryView::from(&hit.memory),
                    score: hit.score,
                    relevance: hit.relevance,
                    signals: None,
                })
                .collect::<Vec<_>>(),
            "recall_id": outcome.recall_id.to_string(),
            // The model can tell "nothing relevant is known" from "nothing to search".
            "abstained": outcome.abstained,
            // Present when the project's recall budget cut the results: the model can tell.
            "recall_budget": found.recall_budget.map(|cut| crate::views::RecallBudgetView {
                max_results: cut.max_results,
                max_tokens: cut.max_tokens,
                omitted: cut.omitted,
            }),
        }))
    }

    async fn add_memory(
        &self,
        principal: &Principal,
        mut arguments: AddMemoryArguments,
    ) -> ToolAnswer {
        // A model writes what it concluded unless it says the user stated it (null included:
        // strict function calling sends every optional argument).
        arguments
            .source
            .get_or_insert_with(|| "model_inferred".to_string());
        let memory: NewMemoryBody = native(&arguments)?;
        let body = AddMemoriesBody {
            memories: vec![memory],
            run_id: arguments.run_id,
        };
        let parsed = body.into_new_memories().map_err(unbatched)?;
        let request = AddMemoriesRequest {
            memories: parsed.memories,
            client_vectors: parsed.client_vectors,
            idempotency: None,
            // A model searches right after it writes: answer once the memory is findable.
            wait_for_index: true,
            run_id: parsed.run_id,
        };
        // Without an idempotency key nothing is replayed, so the stored answer is unused.
        let outcome = self
            .engine
            .add_memories_for(principal, request, |_| (201, String::new()))
            .await?;
        match outcome {
            AddOutcome::Stored { memories, .. } => match memories.first() {
                Some(memory) => answer(MemoryView::from(memory)),
                None => Err(ApiError::new(
                    ProblemKind::Internal,
                    "the memory was not stored",
                )),
            },
            AddOutcome::Replayed { .. } | AddOutcome::AnswerErased => Err(ApiError::new(
                ProblemKind::Internal,
                "an add without an idempotency key was answered as a replay",
            )),
        }
    }

    async fn list_memories(
        &self,
        principal: &Principal,
        mut arguments: ListMemoriesArguments,
    ) -> ToolAnswer {
        let limit = *arguments.limit.get_or_insert(DEFAULT_LIST_PAGE);
        if !(1..=MAX_LIST_PAGE).contains(&limit) {
            return Err(ApiError::invalid(vec![FieldError::new(
                "limit",
                format!("must be between 1 and {MAX_LIST_PAGE}, got {limit}"),
            )]));
        }
        let query: ListMemoriesQuery = native(&arguments)?;
        let request = query
            .into_request(ListFieldNames {
                user_id: "user_id",
                agent_id: "agent_id",
                session_id: "session_id",
                kind: "kind",
                state: "state",
                limit: "limit",
                cursor: "cursor",
            })
            .map_err(ApiError::invalid)?;
        let page = self.engine.list_memories_for(principal, request).await?;
        answer(json!({
            "memories": page.memories.iter().map(MemoryView::from).collect::<Vec<_>>(),
            "next_cursor": page.next_cursor.map(|cursor| cursor.to_string()),
        }))
    }

    async fn update_memory(
        &self,
        principal: &Principal,
        arguments: UpdateMemoryArguments,
    ) -> ToolAnswer {
        let memory_id = parse_memory_id(&arguments.id)?;
        let body: EditMemoryBody = native(&arguments)?;
        let (edit, client_vector) = body.into_edit().map_err(ApiError::invalid)?;
        let request = EditMemoryRequest {
            memory_id,
            edit,
            client_vector,
            expected_version: arguments.expected_version,
        };
        let edited = match self.engine.edit_memory_for(principal, request).await {
            Err(engram_engine::EngineError::VersionConflict { current_version }) => {
                return Err(ApiError::new(
                    ProblemKind::VersionConflict,
                    format!(
                        "the memory is at version {current_version}: read it again (get_memory) and pass expected_version {current_version}"
                    ),
                ));
            }
            edited => edited?,
        };
        answer(MemoryView::from(&edited.memory))
    }

    async fn delete_all_memories(
        &self,
        principal: &Principal,
        arguments: DeleteAllMemoriesArguments,
    ) -> ToolAnswer {
        let mut errors = Vec::new();
        if !arguments.confirm {
            errors.push(FieldError::new(
                "confirm",
                "must be true: this deletes every memory that matches, for good",
            ));
        }
        let subject = [
            (EntityField::UserId, arguments.user_id.as_deref(), "user_id"),
            (
                EntityField::AgentId,
                arguments.agent_id.as_deref(),
                "agent_id",
            ),
            (
                EntityField::SessionId,
                arguments.session_id.as_deref(),
                "session_id",
            ),
        ];
        let mut filter = MemoryFilter::everything();
        for (field, value, name) in subject {
            if let Some(id) = external_id(value, name, &mut errors) {
                filter = filter.and(MemoryFilter::entity_equals(field, id.as_str()));
            }
        }
        if filter.is_everything() {
            errors.push(FieldError::new(
                "user_id",
                "name at least one of user_id, agent_id or session_id",
            ));
        }
        if !errors.is_empty() {
            return Err(ApiError::invalid(errors));
        }
        let request = DeleteMatchingRequest {
            filter,
            all: false,
            reason: arguments.reason,
            dry_run: false,
        };
        let outcome = self
            .engine
            .delete_memories_matching_for(principal, request)
            .await?;
        Ok(json!({
            "matched": outcome.matched,
            "deleted": outcome.deleted,
            "skipped_locked": outcome.skipped_locked,
            "remaining": outcome.remaining,
        }))
    }

    async fn get_state(&self, principal: &Principal, arguments: GetStateArguments) -> ToolAnswer {
        let mut errors = Vec::new();
        let session_id = external_id(Some(&arguments.session_id), "session_id", &mut errors);
        let key = external_id(arguments.key.as_deref(), "key", &mut errors);
        let user_id = external_id(arguments.user_id.as_deref(), "user_id", &mut errors);
        let Some(session_id) = session_id.filter(|_| errors.is_empty()) else {
            return Err(ApiError::invalid(errors));
        };
        match key {
            Some(key) => {
                let address = SessionStateAddress {
                    session_id,
                    key,
                    user_id,
                };
                let entry = self
                    .engine
                    .get_session_state_for(principal, address)
                    .await?;
                answer(SessionStateView::from(entry))
            }
            None => {
                let entries = self
                    .engine
                    .list_session_state_for(principal, session_id, user_id)
                    .await?;
                answer(json!({
                    "state": entries
                        .into_iter()
                        .map(SessionStateView::from)
                        .collect::<Vec<_>>(),
                }))
            }
        }
    }

    async fn set_state(&self, principal: &Principal, arguments: SetStateArguments) -> ToolAnswer {
        let mut errors = Vec::new();
        let session_id = external_id(Some(&arguments.session_id), "session_id", &mut errors);
        let key = external_id(Some(&arguments.key), "key", &mut errors);
        let user_id = external_id(arguments.user_id.as_deref(), "user_id", &mut errors);
        let agent_id = external_id(arguments.agent_id.as_deref(), "agent_id", &mut errors);
        let (Some(session_id), Some(key)) = (session_id, key) else {
            return Err(ApiError::invalid(errors));
        };
        if !errors.is_empty() {
            return Err(ApiError::invalid(errors));
        }
        let request = PutSessionStateRequest {
            address: SessionStateAddress {
                session_id,
                key,
                user_id,
            },
            value: arguments.value,
            expected: arguments.expected_version,
            create_only: arguments.create_only.unwrap_or(false),
            agent_id,
        };
        let (entry, created) = self
            .engine
            .put_session_state_for(principal, request)
            .await?
            .map_err(state_write_refused)?;
        let mut view = answer(SessionStateView::from(entry))?;
        view["created"] = json!(created);
        Ok(view)
    }
}

/// A refused state write, named as the tool's arguments name it.
fn state_write_refused(refusal: engram_core::session_state::StateWriteRefused) -> ApiError {
    use engram_core::session_state::StateWriteRefused;
    match refusal {
        StateWriteRefused::VersionMismatch {
            current: Some(version),
        } => ApiError::new(
            ProblemKind::VersionConflict,
            format!(
                "the value is at version {version}: read it again (get_state) and pass expected_version {version}"
            ),
        ),
        StateWriteRefused::VersionMismatch { current: None } => ApiError::new(
            ProblemKind::VersionConflict,
            "there is no value with this key: write without expected_version (and create_only) to create it",
        ),
        StateWriteRefused::TooManyKeys => ApiError::invalid(vec![FieldError::new(
            "key",
            format!(
                "a session holds at most {} keys",
                engram_core::session_state::MAX_KEYS_PER_SESSION
            ),
        )]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use engram_core::permissions::{Door, OPERATIONS};
    use std::collections::BTreeSet;

    /// The permission table names exactly the tools the server lists: a tool without a row
    /// would run unchecked by the table's tests, a row without a tool is a promise not kept.
    #[test]
    fn the_permission_table_and_the_tool_list_agree() {
        let in_table: BTreeSet<&str> = OPERATIONS
            .iter()
            .flat_map(|rule| rule.doors.iter())
            .filter_map(|door| match door {
                Door::Mcp(tool) => Some(*tool),
                _ => None,
            })
            .collect();
        let listed: BTreeSet<&str> = TOOLS.iter().map(|spec| spec.name).collect();
        assert_eq!(in_table, listed);
        assert_eq!(listed.len(), TOOLS.len(), "a tool is listed twice");
    }

    /// Every schema is an object schema a client accepts, and names its required arguments.
    #[test]
    fn every_tool_has_an_object_schema_with_its_required_arguments() {
        let tools = tool_list().expect("schemas");
        for tool in &tools {
            assert_eq!(
                tool.input_schema.get("type"),
                Some(&json!("object")),
                "{}",
                tool.name
            );
        }
        let required = |name: &str| {
            tools
                .iter()
                .find(|tool| tool.name == name)
                .and_then(|tool| tool.input_schema.get("required").cloned())
        };
        assert_eq!(required("search_memories"), Some(json!(["query"])));
        assert_eq!(required("add_memory"), Some(json!(["content"])));
        assert_eq!(
            required("delete_all_memories"),
            Some(json!(["confirm"])),
            "the scope ids are checked by the tool, the confirmation by the schema too"
        );
    }
}
