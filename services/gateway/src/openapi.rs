//! The OpenAPI 3.1 document generated from the handlers' annotations, and a plain HTML
//! rendering of it for `/docs` that needs no external scripts or fonts.

use crate::problem::ProblemDocument;
use crate::routes::{
    audit, end_user_tokens, feedback, files, governance, keys, memories, messages, prices,
    recall_quality, runs, sessions, usage,
};
use crate::views::{
    AddMemoriesBody, EditMemoryBody, HistoryEntryView, HistoryView, MemoriesEnvelope,
    MemoryListView, MemoryView, NewMemoryBody, SearchBody, SearchResponseView, SearchResultView,
};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme};
use utoipa::{Modify, OpenApi};

struct BearerApiKey;

impl Modify for BearerApiKey {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "api_key",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some("A project API key (`egk_live_…` or `egk_test_…`), or an end-user token (a JWT from `POST /v1/end-user-tokens`, confined to one user_id); each route names the scope it needs"))
                    .build(),
            ),
        );
    }
}

/// Each operation's required scopes, from the one permission table (engram_core::permissions):
/// what the handlers' annotations say about security is replaced by it.
struct PermissionTable;

/// The key scopes an operation needs, all of them (an export needs `admin` and
/// `memories:read`), each once, in the table's order.
fn published_scopes(operation: engram_core::Operation) -> Vec<&'static str> {
    let mut scopes: Vec<&'static str> = Vec::new();
    for permission in operation.required_permissions() {
        if let Some(scope) = permission.key_scope()
            && !scopes.contains(&scope.as_str())
        {
            scopes.push(scope.as_str());
        }
    }
    scopes
}

impl Modify for PermissionTable {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        for (path, item) in openapi.paths.paths.iter_mut() {
            let operations = [
                ("get", &mut item.get),
                ("put", &mut item.put),
                ("post", &mut item.post),
                ("delete", &mut item.delete),
                ("patch", &mut item.patch),
            ];
            for (method, operation) in operations {
                let Some(operation) = operation else {
                    continue;
                };
                let Some(row) = engram_core::Operation::for_http(method, path) else {
                    continue;
                };
                let scopes = published_scopes(row);
                operation.security = Some(vec![SecurityRequirement::new("api_key", scopes)]);
            }
        }
    }
}

/// The headers the extractors read (`crate::extract`) publish exactly what they accept.
struct HeaderSchemas;

impl HeaderSchemas {
    fn schema_of(name: &str) -> Option<utoipa::openapi::schema::Object> {
        use utoipa::openapi::schema::{ObjectBuilder, Type};
        let string = ObjectBuilder::new().schema_type(Type::String);
        match name {
            "If-Match" => Some(
                string
                    .pattern(Some(crate::extract::IF_MATCH_PATTERN))
                    .build(),
            ),
            "If-None-Match" => Some(string.enum_values(Some(["*"])).build()),
            "Engram-Run-Id" => Some(
                string
                    .format(Some(utoipa::openapi::schema::SchemaFormat::KnownFormat(
                        utoipa::openapi::schema::KnownFormat::Uuid,
                    )))
                    .build(),
            ),
            "Idempotency-Key" => Some(
                string
                    .min_length(Some(1))
                    .max_length(Some(engram_core::limits::MAX_EXTERNAL_ID_CHARS))
                    .pattern(Some(crate::extract::IDEMPOTENCY_KEY_PATTERN))
                    .build(),
            ),
            _ => None,
        }
    }
}

impl Modify for HeaderSchemas {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::path::ParameterIn;
        for item in openapi.paths.paths.values_mut() {
            let operations = [
                &mut item.get,
                &mut item.put,
                &mut item.post,
                &mut item.delete,
                &mut item.patch,
            ];
            for operation in operations.into_iter().flatten() {
                for parameter in operation.parameters.iter_mut().flatten() {
                    if parameter.parameter_in != ParameterIn::Header {
                        continue;
                    }
                    if let Some(schema) = Self::schema_of(&parameter.name) {
                        parameter.schema = Some(schema.into());
                    }
                }
            }
        }
    }
}

/// Query parameters a handler reads as optional only to explain their absence itself.
pub const REQUIRED_QUERY_PARAMETERS: &[(&str, &str, &str)] = &[("post", "/v1/files", "name")];

struct RequiredQueryParameters;

impl Modify for RequiredQueryParameters {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        for (method, path, name) in REQUIRED_QUERY_PARAMETERS {
            let Some(item) = openapi.paths.paths.get_mut(*path) else {
                continue;
            };
            let operation = match *method {
                "post" => item.post.as_mut(),
                "get" => item.get.as_mut(),
                _ => None,
            };
            for parameter in operation
                .and_then(|operation| operation.parameters.as_mut())
                .into_iter()
                .flatten()
            {
                if parameter.name == *name {
                    parameter.required = utoipa::openapi::Required::True;
                }
            }
        }
    }
}

/// Rules between fields that one property's schema cannot say, added to the components.
struct CrossFieldRules;

impl Modify for CrossFieldRules {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::schema::ObjectBuilder;
        let Some(components) = openapi.components.as_mut() else {
            return;
        };
        // (A case naming at least one expected memory id or content is said in its
        // description, not as `allOf`/`anyOf`: schemathesis 4.32.5's coverage phase crashes
        // on negative items of such an array. The gate allows 422 for those operations.)
        // A project's embedding: `client` declares its dimension, the other sources none
        // (`ProjectEmbedding::parse`).
        if components.schemas.contains_key("ProjectEmbeddingBody") {
            use engram_core::openapi_schemas::{integer_between, one_of};
            let client = ObjectBuilder::new()
                .property("source", one_of(["client"]))
                .property(
                    "dimension",
                    integer_between(
                        1,
                        u64::from(engram_core::embedding::MAX_CLIENT_VECTOR_DIMENSION),
                    ),
                )
                .required("source")
                .required("dimension")
                .additional_properties(Some(utoipa::openapi::schema::AdditionalProperties::<
                    utoipa::openapi::Schema,
                >::FreeForm(false)))
                .build();
            let deployment_or_provider = ObjectBuilder::new()
                .property("source", one_of(["deployment", "provider"]))
                .required("source")
                .additional_properties(Some(utoipa::openapi::schema::AdditionalProperties::<
                    utoipa::openapi::Schema,
                >::FreeForm(false)))
                .build();
            let local = ObjectBuilder::new()
                .property("source", one_of(["local"]))
                .property(
                    "model",
                    engram_core::openapi_schemas::optional_local_model(),
                )
                .required("source")
                .additional_properties(Some(utoipa::openapi::schema::AdditionalProperties::<
                    utoipa::openapi::Schema,
                >::FreeForm(false)))
                .build();
            let embedding = utoipa::openapi::schema::OneOfBuilder::new()
                .item(client)
                .item(deployment_or_provider)
                .item(local)
                .description(Some(
                    "`{\"source\": \"client\", \"dimension\": 1–4096}`, `{\"source\": \"deployment\" | \"provider\"}` or `{\"source\": \"local\", \"model\": \"minilm\" (default) | \"multilingual\"}`",
                ))
                .build();
            components.schemas.insert(
                "ProjectEmbeddingBody".to_string(),
                utoipa::openapi::RefOr::T(utoipa::openapi::Schema::OneOf(embedding)),
            );
        }
    }
}

/// The problem responses every operation can give, added where a handler's annotation does
/// not already describe them: the published statuses are then every status the server sends
/// (the `make schemathesis` gate checks it). What each one means is in API.md's error table.
struct CommonProblemResponses;

impl CommonProblemResponses {
    fn problem(description: &str, with_retry_after: bool) -> utoipa::openapi::Response {
        use utoipa::openapi::{ContentBuilder, Ref, ResponseBuilder, header::HeaderBuilder};
        let mut response = ResponseBuilder::new().description(description).content(
            "application/problem+json",
            ContentBuilder::new()
                .schema(Some(Ref::from_schema_name("ProblemDocument")))
                .build(),
        );
        if with_retry_after {
            response = response.header(
                "Retry-After",
                HeaderBuilder::new()
                    .schema(utoipa::openapi::schema::Object::with_type(
                        utoipa::openapi::schema::Type::Integer,
                    ))
                    .description(Some("Seconds to wait before trying again"))
                    .build(),
            );
        }
        response.build()
    }
}

impl Modify for CommonProblemResponses {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        for (path, item) in openapi.paths.paths.iter_mut() {
            let operations = [
                &mut item.get,
                &mut item.put,
                &mut item.post,
                &mut item.delete,
                &mut item.patch,
            ];
            for operation in operations.into_iter().flatten() {
                let has_path_parameters = path.contains('{');
                let has_body = operation.request_body.is_some();
                let has_input = has_body
                    || has_path_parameters
                    || operation
                        .parameters
                        .as_ref()
                        .is_some_and(|parameters| !parameters.is_empty());
                let mut statuses: Vec<(&str, &str, bool)> = vec![
                    (
                        "401",
                        "No credential, or an unknown, expired or revoked one",
                        false,
                    ),
                    (
                        "403",
                        "The credential lacks the scope this operation needs, or an end-user token reaches past its user",
                        false,
                    ),
                    (
                        "408",
                        "The request took longer than the server's request timeout",
                        false,
                    ),
                    (
                        "429",
                        "A rate limit or quota was reached; `Retry-After` says when to try again",
                        true,
                    ),
                    (
                        "503",
                        "The server is busy or a dependency (database, index) is unavailable; `Retry-After` says when to try again",
                        true,
                    ),
                ];
                if has_input {
                    statuses.push(("400", "The request could not be read (malformed JSON, a query string or header of the wrong shape)", false));
                    statuses.push((
                        "422",
                        "A field is invalid: `errors` names each field and what is wrong",
                        false,
                    ));
                }
                if has_path_parameters {
                    statuses.push((
                        "404",
                        "Nothing with this id in the credential's project (or end-user)",
                        false,
                    ));
                }
                if has_body {
                    statuses.push(("413", "The body is larger than the documented limit", false));
                    statuses.push((
                        "415",
                        "The body is not of the documented content type",
                        false,
                    ));
                }
                for (status, description, with_retry_after) in statuses {
                    operation
                        .responses
                        .responses
                        .entry(status.to_string())
                        .or_insert_with(|| Self::problem(description, with_retry_after).into());
                }
            }
        }
    }
}

#[derive(OpenApi)]
#[openapi(
    info(title = "Engram memory API", description = "Multi-tenant memory for AI agents. See API.md for the contract."),
    paths(
        memories::add_memories,
        memories::list_memories,
        memories::get_memory,
        memories::edit_memory,
        memories::delete_memory,
        memories::memory_history,
        memories::search_memories,
        memories::query_memories,
        memories::bulk_delete_memories,
        memories::list_entities,
        keys::list_keys,
        keys::create_key,
        keys::revoke_key,
        keys::roll_key,
        audit::list_audit_events,
        audit::verify_audit_chain,
        audit::export_audit_events,
        end_user_tokens::mint_end_user_token,
        end_user_tokens::rotate_signing_key,
        governance::get_project_settings,
        governance::update_project_settings,
        governance::set_memory_flags,
        memories::verify_memory,
        governance::request_subject_erasure,
        governance::request_organization_subject_erasure,
        governance::request_consolidation,
        governance::get_task,
        governance::export_subject,
        governance::retention_preview,
        usage::project_usage,
        usage::project_costs,
        usage::get_spend_limits,
        usage::put_spend_limits,
        prices::project_prices,
        prices::project_statement,
        files::upload_file,
        files::get_file,
        files::delete_file,
        sessions::get_session_state,
        sessions::list_session_state,
        sessions::put_session_state,
        sessions::delete_session_state,
        messages::add_messages,
        messages::list_messages,
        feedback::give_memory_feedback,
        feedback::give_recall_feedback,
        feedback::list_memory_feedback,
        feedback::list_recall_feedback,
        recall_quality::get_recall_event,
        recall_quality::get_recall_metrics,
        recall_quality::list_profiles,
        recall_quality::get_profile,
        recall_quality::put_profile,
        recall_quality::delete_profile,
        recall_quality::create_eval_set,
        recall_quality::list_eval_sets,
        recall_quality::get_eval_set,
        recall_quality::add_eval_cases,
        recall_quality::import_eval_cases,
        recall_quality::list_eval_cases,
        recall_quality::start_eval_run,
        recall_quality::list_eval_runs,
        recall_quality::get_eval_run,
        runs::assemble_context,
        runs::start_run,
        runs::list_runs,
        runs::get_run,
        runs::add_run_step,
        runs::end_run,
        runs::memory_impact,
        runs::list_recalls,
    ),
    components(schemas(
        recall_quality::RecallEventView, recall_quality::RetrievalProfileView, recall_quality::RetrievalProfileListView, recall_quality::PutProfileBody,
        recall_quality::EvalCaseBody, recall_quality::CreateEvalSetBody, recall_quality::EvalSetView, recall_quality::EvalSetListView, recall_quality::AddEvalCasesBody,
        recall_quality::EvalCaseView, recall_quality::EvalCaseListView, recall_quality::StartEvalRunBody, recall_quality::EvalRunView, recall_quality::EvalRunStartedView, recall_quality::EvalRunListView,
        MemoryView, MemoriesEnvelope, MemoryListView, HistoryView, HistoryEntryView, SearchResultView, SearchResponseView, crate::views::RankingSignalsView, crate::views::SearchTimingsView, crate::views::SearchContextView, crate::views::UnderstoodTimeView,
        NewMemoryBody, AddMemoriesBody, EditMemoryBody, memories::VerifyMemoryBody, SearchBody, engram_core::openapi_schemas::MemoryFilterSchema, ProblemDocument,
        crate::views::ApiKeyView, keys::ApiKeyListView, keys::CreatedApiKeyView, keys::CreateApiKeyBody, keys::RollApiKeyBody,
        crate::views::AuditEventView, audit::AuditPageView, audit::AuditVerificationView, audit::BrokenLinkView,
        end_user_tokens::MintEndUserTokenBody, end_user_tokens::EndUserTokenView, end_user_tokens::SigningKeyView,
        governance::ProjectSettingsView, governance::ProjectEmbeddingView, governance::EmbeddingChangeView, governance::ProjectEmbeddingBody, governance::UpdateProjectSettingsBody, governance::MemoryFlagsBody,
        crate::views::TaskView, crate::views::TaskProgressView, governance::RetentionPreviewView, governance::StoreRetentionPreviewView, crate::subject_export::ExportedMemoryView,
        usage::UsageView, usage::UsageRowView, usage::CostsView, usage::CostRowView,
        crate::views::SpendLimitsBody, crate::views::MonthlyBudgetBody, crate::views::RecallBudgetBody, crate::views::MemoryLimitsBody, usage::SpendLimitsView,
        usage::MonthToDateView, usage::BudgetAlertView, prices::PricesView, prices::UnitPricesView, prices::PriceView,
        engram_core::statements::Statement, engram_core::statements::StatementParty, engram_core::statements::StatementLine,
        engram_core::statements::StatementTotal, engram_core::statements::StatementBudget, engram_core::statements::StatementAlert,
        engram_core::statements::StatementBreakdownLine, crate::views::RecallBudgetView, crate::problem::LimitProblem,
        files::FileView, files::UploadedFileView,
        sessions::SessionStateView, sessions::SessionStateListView, sessions::PutSessionStateBody,
        messages::AddMessagesBody, messages::MessageBody, messages::MessageView, messages::AddedMessagesView,
        messages::MessagePageView, usage::LlmModelUsageView,
        feedback::MemoryFeedbackBody, feedback::RecallFeedbackBody, feedback::FeedbackView,
        feedback::FeedbackListView, feedback::CorrectionView,
        runs::ContextBody, runs::ContextView, runs::ContextPartView, runs::OmittedPartView,
        runs::RunView, runs::RunStepView, runs::RunTimelineView, runs::RunPageView,
        runs::MemoryUseView, runs::ImpactCountsView, runs::MemoryImpactView, runs::RecallPageView,
        engram_core::runs::StartRunBody, engram_core::runs::RunStepBody, engram_core::runs::EndRunBody
    )),
    modifiers(&BearerApiKey, &PermissionTable, &HeaderSchemas, &RequiredQueryParameters, &CrossFieldRules, &CommonProblemResponses),
    tags((name = "memories", description = "Store, edit, delete and recall memories"),
        (name = "keys", description = "The project's API keys: scopes, expiry, revoke, roll (needs the `admin` scope)"),
        (name = "audit", description = "The hash-chained audit log: events, verification, export (needs the `admin` scope)"),
        (name = "end-user tokens", description = "Short-lived tokens confined to one end-user, for browser and mobile apps"),
        (name = "sessions", description = "Conversation history that becomes memories, and session state: versioned JSON values per session and key, for checkpoints"),
        (name = "files", description = "Plain-text and Markdown files ingested as memories in the background"),
        (name = "usage", description = "Metered units, costs, monthly statements, budgets and quotas per project (the `admin` scope; prices: any project key)"),
        (name = "runs", description = "Agent runs: the context to inject, run records linking a task to what the model was given, and a memory's impact"),
        (name = "compliance", description = "PII redaction, retention, legal hold, subject erasure and export (needs the `admin` scope)"))
)]
pub struct ApiDocument;

pub fn document_json() -> serde_json::Value {
    let mut document = serde_json::to_value(ApiDocument::openapi()).unwrap_or_default();
    add_format_patterns(&mut document);
    publish_path_parameter_rules(&mut document);
    publish_edit_needs_a_change(&mut document);
    document
}

/// What each path parameter's parser takes, by its name: an id the server issued is a UUID
/// (anything else is simply not found), an id the client chose is an `ExternalId` (1–255
/// characters, no control character), a profile is named by `[A-Za-z0-9._-]{1,64}`. A test
/// fails on a path parameter this table does not know.
pub const PATH_PARAMETER_RULES: &[(&str, PathParameterRule)] = &[
    ("memory_id", PathParameterRule::IssuedId),
    ("recall_id", PathParameterRule::IssuedId),
    ("file_id", PathParameterRule::IssuedId),
    ("set_id", PathParameterRule::IssuedId),
    ("run_id", PathParameterRule::IssuedId),
    ("agent_run_id", PathParameterRule::IssuedId),
    ("task_id", PathParameterRule::IssuedId),
    ("key_id", PathParameterRule::IssuedId),
    ("session_id", PathParameterRule::ExternalId),
    ("key", PathParameterRule::ExternalId),
    ("user_id", PathParameterRule::ExternalId),
    ("name", PathParameterRule::ProfileName),
];

#[derive(Clone, Copy, Debug)]
pub enum PathParameterRule {
    IssuedId,
    ExternalId,
    ProfileName,
}

impl PathParameterRule {
    fn schema(self) -> serde_json::Value {
        use engram_core::openapi_schemas::{external_id, issued_id, profile_name};
        let object = match self {
            PathParameterRule::IssuedId => issued_id(),
            PathParameterRule::ExternalId => external_id(),
            PathParameterRule::ProfileName => profile_name(),
        };
        serde_json::to_value(object).unwrap_or_default()
    }
}

fn publish_path_parameter_rules(document: &mut serde_json::Value) {
    use serde_json::Value;
    let Some(paths) = document.get_mut("paths").and_then(Value::as_object_mut) else {
        return;
    };
    for operations in paths.values_mut() {
        let Some(operations) = operations.as_object_mut() else {
            continue;
        };
        for operation in operations.values_mut() {
            let Some(parameters) = operation
                .get_mut("parameters")
                .and_then(Value::as_array_mut)
            else {
                continue;
            };
            for parameter in parameters
                .iter_mut()
                .filter(|parameter| parameter["in"] == "path")
            {
                let rule = PATH_PARAMETER_RULES
                    .iter()
                    .find(|(name, _)| parameter["name"] == *name);
                if let Some((_, rule)) = rule {
                    parameter["schema"] = rule.schema();
                }
            }
        }
    }
}

/// An edit changes at least one of content, metadata, categories, expiry or event time
/// (`MemoryEdit::limit_errors`): a body of only `reason` or `embedding` is refused. `null`
/// clears an expiry, so it counts; for the others the value must be there.
fn publish_edit_needs_a_change(document: &mut serde_json::Value) {
    use serde_json::json;
    let Some(schema) = document.pointer_mut("/components/schemas/EditMemoryBody") else {
        return;
    };
    schema["anyOf"] = json!([
        {"required": ["content"], "properties": {"content": {"type": "string"}}},
        {"required": ["metadata"], "properties": {"metadata": {"type": "object"}}},
        {"required": ["categories"], "properties": {"categories": {"type": "array"}}},
        {"required": ["expires_at"]},
        {"required": ["occurred_at"], "properties": {"occurred_at": {"type": "string"}}},
    ]);
}

/// The report windows' days (usage and costs take dates, recall metrics date-times).
const REPORT_DAY_PARAMETERS: &[(&str, &str)] = &[
    ("/v1/usage", "from"),
    ("/v1/usage", "to"),
    ("/v1/costs", "from"),
    ("/v1/costs", "to"),
    ("/v1/recall-metrics", "from"),
    ("/v1/recall-metrics", "to"),
];

/// OpenAPI 3.1's `format` only annotates (JSON Schema 2020-12), so `""` is a valid
/// `date-time` to a generator or validator: every date and date-time also gets the pattern of
/// what the server parses, and a report day the range it takes.
fn add_format_patterns(document: &mut serde_json::Value) {
    use engram_core::openapi_schemas::{
        REPORT_DAY_PATTERN, RFC3339_DATE, rfc3339_date_time_pattern,
    };
    use serde_json::Value;
    for (path, name) in REPORT_DAY_PARAMETERS {
        let pointer = format!("/paths/{}/get/parameters", path.replace('/', "~1"));
        let Some(parameters) = document.pointer_mut(&pointer).and_then(Value::as_array_mut) else {
            continue;
        };
        for parameter in parameters {
            if parameter["name"] != *name {
                continue;
            }
            let schema = &mut parameter["schema"];
            let pattern = if schema["format"] == "date-time" {
                // The day's pattern with the time of day of an RFC 3339 date-time.
                rfc3339_date_time_pattern().replacen(
                    &format!("^{RFC3339_DATE}"),
                    REPORT_DAY_PATTERN.trim_end_matches('$'),
                    1,
                )
            } else {
                REPORT_DAY_PATTERN.to_string()
            };
            schema["pattern"] = Value::from(pattern);
        }
    }
    fn walk(value: &mut Value, date_time: &str, date: &str) {
        match value {
            Value::Object(fields) => {
                let pattern = match fields.get("format").and_then(Value::as_str) {
                    Some("date-time") => Some(date_time),
                    Some("date") => Some(date),
                    _ => None,
                };
                if let Some(pattern) = pattern
                    && !fields.contains_key("pattern")
                {
                    fields.insert("pattern".to_string(), Value::from(pattern));
                }
                fields
                    .values_mut()
                    .for_each(|field| walk(field, date_time, date));
            }
            Value::Array(items) => items
                .iter_mut()
                .for_each(|item| walk(item, date_time, date)),
            _ => {}
        }
    }
    walk(
        document,
        &rfc3339_date_time_pattern(),
        &format!("^{RFC3339_DATE}$"),
    );
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A compact reference page: every operation with its parameters, body and responses.
pub fn render_docs_html() -> String {
    let document = document_json();
    let mut body = String::new();
    let empty = serde_json::Map::new();
    let paths = document
        .get("paths")
        .and_then(|paths| paths.as_object())
        .unwrap_or(&empty);
    for (path, item) in paths {
        let Some(operations) = item.as_object() else {
            continue;
        };
        for (method, operation) in operations {
            let summary = operation
                .get("summary")
                .and_then(|value| value.as_str())
                .unwrap_or("");
            body.push_str(&format!(
                "<section class=\"op\"><h2><span class=\"method {m}\">{M}</span> <code>{p}</code></h2><p>{s}</p>",
                m = escape(method),
                M = escape(&method.to_uppercase()),
                p = escape(path),
                s = escape(summary)
            ));
            if let Some(parameters) = operation
                .get("parameters")
                .and_then(|value| value.as_array())
            {
                body.push_str("<h3>Parameters</h3><ul>");
                for parameter in parameters {
                    let name = parameter
                        .get("name")
                        .and_then(|value| value.as_str())
                        .unwrap_or("");
                    let location = parameter
                        .get("in")
                        .and_then(|value| value.as_str())
                        .unwrap_or("");
                    let description = parameter
                        .get("description")
                        .and_then(|value| value.as_str())
                        .unwrap_or("");
                    body.push_str(&format!(
                        "<li><code>{}</code> <em>{}</em> {}</li>",
                        escape(name),
                        escape(location),
                        escape(description)
                    ));
                }
                body.push_str("</ul>");
            }
            if let Some(schema_ref) = operation
                .pointer("/requestBody/content/application~1json/schema/$ref")
                .and_then(|value| value.as_str())
            {
                let name = schema_ref.rsplit('/').next().unwrap_or(schema_ref);
                body.push_str(&format!(
                    "<h3>Body</h3><p><a href=\"#schema-{0}\">{0}</a></p>",
                    escape(name)
                ));
            }
            if let Some(responses) = operation
                .get("responses")
                .and_then(|value| value.as_object())
            {
                body.push_str("<h3>Responses</h3><ul>");
                for (status, response) in responses {
                    let description = response
                        .get("description")
                        .and_then(|value| value.as_str())
                        .unwrap_or("");
                    body.push_str(&format!(
                        "<li><b>{}</b> {}</li>",
                        escape(status),
                        escape(description)
                    ));
                }
                body.push_str("</ul>");
            }
            body.push_str("</section>");
        }
    }
    body.push_str("<h2>Schemas</h2>");
    if let Some(schemas) = document
        .pointer("/components/schemas")
        .and_then(|value| value.as_object())
    {
        for (name, schema) in schemas {
            let pretty = serde_json::to_string_pretty(schema).unwrap_or_default();
            body.push_str(&format!(
                "<section id=\"schema-{0}\" class=\"schema\"><h3>{0}</h3><pre>{1}</pre></section>",
                escape(name),
                escape(&pretty)
            ));
        }
    }
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Engram API</title>\
         <style>body{{font-family:system-ui,sans-serif;max-width:960px;margin:2rem auto;padding:0 1rem;color:#1d2430}}\
         .op{{border:1px solid #d8dee8;border-radius:6px;padding:0.5rem 1rem;margin:1rem 0}}\
         .method{{display:inline-block;min-width:4.5rem;text-align:center;border-radius:4px;color:#fff;background:#4a5568;font-size:0.8em;padding:2px 6px}}\
         .post{{background:#2f855a}}.get{{background:#2b6cb0}}.patch{{background:#b7791f}}.delete{{background:#c53030}}\
         pre{{background:#f5f7fa;padding:0.5rem;overflow:auto;font-size:0.8em}}</style></head>\
         <body><h1>Engram memory API</h1><p>Machine-readable: <a href=\"/openapi.json\">/openapi.json</a>. \
         Authenticate with <code>Authorization: Bearer egk_…</code>. Errors are <code>application/problem+json</code>.</p>{body}</body></html>"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use engram_core::permissions::{Door, OPERATIONS, RESERVED_HTTP_OPERATIONS};

    /// Every path parameter publishes what its parser takes: a new parameter name fails here
    /// until `PATH_PARAMETER_RULES` says which rule it follows.
    #[test]
    fn every_path_parameter_publishes_its_parsers_rule() {
        let document = document_json();
        let mut seen = 0;
        for (path, item) in document["paths"].as_object().into_iter().flatten() {
            for (method, operation) in item.as_object().into_iter().flatten() {
                for parameter in operation["parameters"].as_array().into_iter().flatten() {
                    if parameter["in"] != "path" {
                        continue;
                    }
                    seen += 1;
                    let schema = &parameter["schema"];
                    assert!(
                        schema["pattern"].is_string(),
                        "{method} {path}: path parameter {} publishes no rule",
                        parameter["name"]
                    );
                }
            }
        }
        assert!(seen > 30, "the document's path parameters ({seen})");
        let edit = &document["components"]["schemas"]["EditMemoryBody"];
        assert_eq!(edit["anyOf"].as_array().map(Vec::len), Some(5), "{edit}");
        let delete = &document["paths"]["/v1/memories/{memory_id}"]["delete"]["responses"];
        assert!(
            delete["409"].is_object(),
            "a locked memory's 409 is published: {delete}"
        );
    }

    /// The published document and the permission table agree both ways: every operation
    /// served is in the table and publishes the scope the table requires, and every HTTP row
    /// of the table (but the reserved ones) is served.
    #[test]
    fn every_operation_publishes_the_scope_of_the_permission_table() {
        let document = document_json();
        let paths = document["paths"].as_object().cloned().unwrap_or_default();
        let mut published = Vec::new();
        for (path, item) in &paths {
            for (method, operation) in item.as_object().into_iter().flatten() {
                let row = engram_core::Operation::for_http(method, path);
                assert!(
                    row.is_some(),
                    "{method} {path} is not in the permission table"
                );
                let expected: Vec<String> = row
                    .map(published_scopes)
                    .unwrap_or_default()
                    .into_iter()
                    .map(str::to_string)
                    .collect();
                let scopes: Vec<String> = operation["security"][0]["api_key"]
                    .as_array()
                    .map(|scopes| {
                        scopes
                            .iter()
                            .filter_map(|scope| scope.as_str().map(str::to_string))
                            .collect()
                    })
                    .unwrap_or_else(|| vec!["<no security>".to_string()]);
                assert_eq!(scopes, expected, "{method} {path}");
                published.push((method.clone(), path.clone()));
            }
        }
        for rule in OPERATIONS {
            if RESERVED_HTTP_OPERATIONS.contains(&rule.operation) {
                continue;
            }
            for door in rule.doors {
                if let Door::Http { method, path } = door {
                    assert!(
                        published.contains(&(method.to_string(), path.to_string())),
                        "{method} {path} ({:?}) is in the table but not in the document",
                        rule.operation
                    );
                }
            }
        }
    }
}
