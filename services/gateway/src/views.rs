//! The JSON shapes of the public API (as in API.md) and their parsing into validated
//! engine inputs, collecting every field problem with its path.

use chrono::{DateTime, Utc};
use engram_core::api_keys::ApiKeyRecord;
use engram_core::audit::AuditEventRecord;
use engram_core::memory::HistoryEntry;
use engram_core::memory_limits::{MemoryLimitPolicy, MemoryLimits};
use engram_core::request_bodies::metadata_object;
use engram_core::usage::{
    DEFAULT_ALERT_THRESHOLDS, MAX_ALERT_THRESHOLDS, MonthlyBudget, RecallBudget, SpendLimits,
    UsageUnit,
};
use engram_core::{FieldError, Memory};
use engram_engine::MemoryEdit;
use std::collections::BTreeMap;

// The add and search bodies are engram-core's, where they are parsed (and fuzzed).
pub use engram_core::request_bodies::{AddMemoriesBody, NewMemoryBody, SearchBody};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// A memory as the API returns it.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct MemoryView {
    pub id: String,
    pub user_id: Option<String>,
    pub agent_id: Option<String>,
    pub session_id: Option<String>,
    /// `semantic | episodic | procedural | preference`
    pub kind: String,
    pub key: Option<String>,
    /// Absent when `content_omitted` is true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// Absent when `content_omitted` is true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<serde_json::Map<String, serde_json::Value>>,
    pub categories: Vec<String>,
    /// `user_stated | tool_result | model_inferred | manual | file`
    pub source: String,
    pub confidence: f64,
    /// `active | superseded`
    pub state: String,
    pub version: i64,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// When what the memory describes happened (event time): the write time unless the
    /// writer said otherwise.
    pub occurred_at: DateTime<Utc>,
    pub valid_from: DateTime<Utc>,
    pub valid_to: Option<DateTime<Utc>>,
    pub expires_at: Option<DateTime<Utc>>,
    /// Cannot be edited or deleted (subject erasure still removes it).
    pub immutable: bool,
    /// Cannot be edited, deleted, expired or erased until the hold is lifted.
    pub legal_hold: bool,
    /// Who among the project's agents reads it: `private` (its own agent, and credentials
    /// bound to no agent) or `shared` (every agent of the project).
    #[schema(example = "shared")]
    pub visibility: String,
    /// For a shared memory: the one team of agents (`agent_teams`) it is shared with; null:
    /// every agent.
    pub shared_with: Option<String>,
    /// When a reviewer or a supervisor verified it (`POST /v1/memories/{id}/verify`); null:
    /// unverified.
    pub verified_at: Option<DateTime<Utc>>,
    /// Who verified it: `console_account:<id>` or `api_key:<id>`.
    pub verified_by: Option<String>,
    /// The model its vector came from (`client-vectors-<dimension>` when the client sent it).
    pub embedding_model: String,
    /// True when `content` and `metadata` were left out because the credential may not read
    /// content (it lacks `memories:read`); absent otherwise.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub content_omitted: bool,
}

impl From<&Memory> for MemoryView {
    fn from(memory: &Memory) -> Self {
        Self {
            id: memory.id.to_string(),
            user_id: memory.user_id.as_ref().map(ToString::to_string),
            agent_id: memory.agent_id.as_ref().map(ToString::to_string),
            session_id: memory.session_id.as_ref().map(ToString::to_string),
            kind: memory.kind.to_string(),
            key: memory.key.as_ref().map(ToString::to_string),
            content: (!memory.content_omitted).then(|| memory.content.clone()),
            metadata: (!memory.content_omitted).then(|| memory.metadata.clone()),
            categories: memory.categories.clone(),
            source: memory.source.to_string(),
            confidence: memory.confidence,
            state: memory.state.to_string(),
            version: memory.version,
            created_at: memory.created_at,
            updated_at: memory.updated_at,
            occurred_at: memory.occurred_at,
            valid_from: memory.valid_from,
            valid_to: memory.valid_to,
            expires_at: memory.expires_at,
            immutable: memory.immutable,
            legal_hold: memory.legal_hold,
            visibility: memory.visibility.as_str().to_string(),
            shared_with: memory
                .shared_with
                .as_ref()
                .map(|team| team.as_str().to_string()),
            verified_at: memory.verified_at,
            verified_by: memory.verified_by.clone(),
            embedding_model: memory.embedding_model.clone(),
            content_omitted: memory.content_omitted,
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct MemoriesEnvelope {
    pub memories: Vec<MemoryView>,
}

#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct MemoryListView {
    pub memories: Vec<MemoryView>,
    /// Pass as `cursor` for the next page; null at the end.
    pub next_cursor: Option<String>,
}

/// `POST /v1/memories/query`: list the memories a filter tree matches.
#[derive(Clone, Debug, Deserialize, ToSchema)]
pub struct QueryMemoriesBody {
    /// The filter tree (`MemoryFilter`); absent or null lists every active memory.
    #[schema(schema_with = engram_core::openapi_schemas::optional_memory_filter)]
    pub filters: Option<serde_json::Value>,
    /// 1–500, default 50.
    #[schema(minimum = 1, maximum = 500)]
    #[serde(
        default,
        deserialize_with = "engram_core::json_integers::optional_whole"
    )]
    pub limit: Option<i64>,
    /// The previous page's `next_cursor`.
    #[schema(format = Uuid)]
    pub cursor: Option<String>,
    /// Also answer `total`, how many memories match in all (one more count query).
    pub include_total: Option<bool>,
}

#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct QueriedMemoriesView {
    pub memories: Vec<MemoryView>,
    /// Pass as `cursor` for the next page; null at the end.
    pub next_cursor: Option<String>,
    /// How many memories match in all (with `include_total`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<u64>,
}

/// `POST /v1/memories/bulk-delete`: delete what a filter tree matches.
#[derive(Clone, Debug, Deserialize, ToSchema)]
pub struct BulkDeleteBody {
    /// The filter tree (`MemoryFilter`). An empty or absent filter is refused unless `all`
    /// is true.
    #[schema(schema_with = engram_core::openapi_schemas::optional_memory_filter)]
    pub filters: Option<serde_json::Value>,
    /// Confirms that an empty filter means every memory of the project (for an end-user
    /// token: of its end-user).
    pub all: Option<bool>,
    /// Kept in the audit log (at most 1,024 characters).
    #[schema(max_length = 1024)]
    pub reason: Option<String>,
    /// Count what would be deleted; delete nothing.
    pub dry_run: Option<bool>,
}

#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct BulkDeleteView {
    /// Memories the filter matched.
    pub matched: u64,
    /// Deleted by this call (0 on a dry run).
    pub deleted: u64,
    /// Immutable or under legal hold: skipped (on a dry run: would be).
    pub skipped_locked: u64,
    /// Still matching beyond this call's cap of 10,000: call again.
    pub remaining: u64,
    pub dry_run: bool,
}

#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct EntityView {
    /// `user | agent | session | app`
    #[serde(rename = "type")]
    pub entity_type: String,
    pub id: String,
    /// Active memories naming it.
    pub memories: u64,
}

#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct EntitiesView {
    pub entities: Vec<EntityView>,
    /// Pass as `cursor` for the next page; null at the end.
    pub next_cursor: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct HistoryEntryView {
    pub version: i64,
    /// `created | updated | superseded | verified | unverified` (and the other events a
    /// memory's history records)
    pub event: String,
    pub content: Option<String>,
    pub actor: String,
    pub reason: Option<String>,
    pub at: DateTime<Utc>,
}

impl From<HistoryEntry> for HistoryEntryView {
    fn from(entry: HistoryEntry) -> Self {
        Self {
            version: entry.version,
            event: entry.event,
            content: entry.content,
            actor: entry.actor,
            reason: entry.reason,
            at: entry.at,
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct HistoryView {
    pub history: Vec<HistoryEntryView>,
}

#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct SearchResultView {
    pub memory: MemoryView,
    /// Relevance in [0, 1], higher is better: the weighted sum of cosine similarity and BM25
    /// (relative to the best keyword match) in hybrid mode, plus recency and session bonuses.
    pub score: f32,
    /// 0–1 on one scale for every query (the score's keyword part is relative to the
    /// query's best match; this is not): what the project's relevance floor compares.
    /// Absent without a cosine (keyword retrieval).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relevance: Option<f32>,
    /// Why it ranks here (with `explain: true`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signals: Option<RankingSignalsView>,
}

/// The signals behind one result's score.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct RankingSignalsView {
    /// Cosine similarity of query and memory; absent in keyword mode.
    pub dense_similarity: Option<f32>,
    /// BM25 score; absent when the memory holds no query term (or in dense mode).
    pub keyword_score: Option<f32>,
    pub recency_bonus: f32,
    pub session_bonus: f32,
    /// 0.1 when the memory's `occurred_at` lies in the window of time the query names.
    pub time_bonus: f32,
    /// `neighbour_weight` times how much higher the best fused score among the memories of
    /// its session at most two writes away (that were candidates too) is than its own.
    pub neighbour_bonus: f32,
}

impl From<&engram_engine::RankingSignals> for RankingSignalsView {
    fn from(signals: &engram_engine::RankingSignals) -> Self {
        Self {
            dense_similarity: signals.dense_similarity,
            keyword_score: signals.keyword_score,
            recency_bonus: signals.recency_bonus,
            session_bonus: signals.session_bonus,
            time_bonus: signals.time_bonus,
            neighbour_bonus: signals.neighbour_bonus,
        }
    }
}

/// Where one search's time went, in milliseconds (with `explain: true`). The dense and keyword
/// searches run side by side (the keyword search beside an embedding provider's call too), so
/// the phases may add up to more than `total`.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct SearchTimingsView {
    pub embed: f64,
    pub dense: f64,
    pub keyword: f64,
    pub hydrate: f64,
    pub rank: f64,
    /// Inside the engine, from the first stage to the last.
    pub total: f64,
}

impl From<&engram_engine::SearchTimings> for SearchTimingsView {
    fn from(timings: &engram_engine::SearchTimings) -> Self {
        let millis = |micros: u64| micros as f64 / 1_000.0;
        Self {
            embed: millis(timings.embed_micros),
            dense: millis(timings.dense_micros),
            keyword: millis(timings.keyword_micros),
            hydrate: millis(timings.hydrate_micros),
            rank: millis(timings.rank_micros),
            total: millis(timings.total_micros),
        }
    }
}

/// Memories packed into a ready-to-inject text within a token budget (`context_tokens`).
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct SearchContextView {
    /// One line per memory: content, then kind, source, date and id (its provenance).
    /// `always` procedures come first, then results best first.
    pub text: String,
    /// Tokens of `text`, counted by the embedding model's tokenizer.
    pub tokens: u64,
    pub memory_ids: Vec<String>,
    /// Memories that did not fit the budget.
    pub omitted: usize,
}

#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct SearchResponseView {
    pub results: Vec<SearchResultView>,
    pub recall_id: String,
    /// Procedural memories marked `"always": true` (with `include_always: true`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub always: Option<Vec<MemoryView>>,
    /// With `context_tokens`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<SearchContextView>,
    /// With `explain: true`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timings_ms: Option<SearchTimingsView>,
    /// Present when the project's recall budget cut the results short.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recall_budget: Option<RecallBudgetView>,
    /// The project's relevance floor, when it applied (no `min_score` was given, and the
    /// search had a cosine): results less relevant than this were left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relevance_floor: Option<f32>,
    /// `true` when the floor left out everything the search would have returned: nothing
    /// relevant is known. An empty answer with `false` had nothing to consider.
    #[serde(default)]
    pub abstained: bool,
    /// With `explain: true`, when the query names a time: what was understood.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub understood_time: Option<UnderstoodTimeView>,
    /// With `explain: true`, when the query names someone or something (a capitalised word
    /// inside a sentence) that no memory within reach mentions: those names, lowercased. The
    /// project's floor for such queries applied (`relevance_floor` says which).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unmentioned_names: Option<Vec<String>>,
}

/// The window of event time a query names ("last month", "上个月"), read against `now`.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct UnderstoodTimeView {
    /// The words that named it.
    pub phrase: String,
    /// RFC 3339, included.
    pub from: String,
    /// RFC 3339, excluded.
    pub to: String,
    /// `boost`: memories whose `occurred_at` lies in the window rank higher (0.1); none are
    /// left out.
    pub applied: String,
}

impl From<&engram_core::query_time::TimeInQuery> for UnderstoodTimeView {
    fn from(time: &engram_core::query_time::TimeInQuery) -> Self {
        Self {
            phrase: time.phrase.clone(),
            from: time.from.to_rfc3339(),
            to: time.to.to_rfc3339(),
            applied: "boost".to_string(),
        }
    }
}

/// The project's recall budget as applied to one search.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct RecallBudgetView {
    /// Most memories a search returns.
    pub max_results: Option<u32>,
    /// Most tokens of memory content a search returns, counted by the embedding model's
    /// tokenizer.
    pub max_tokens: Option<u32>,
    /// Memories found but left out to stay within `max_tokens` (`max_results` is applied
    /// before the search, as a lower `top_k`).
    pub omitted: u32,
}

#[derive(Clone, Debug, Deserialize, ToSchema)]
pub struct EditMemoryBody {
    #[schema(schema_with = engram_core::openapi_schemas::optional_memory_content)]
    pub content: Option<String>,
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<serde_json::Value>,
    #[schema(schema_with = engram_core::openapi_schemas::optional_categories)]
    pub categories: Option<Vec<String>>,
    /// Set to null to clear the expiry.
    #[serde(default, deserialize_with = "present_or_null")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub expires_at: Option<Option<DateTime<Utc>>>,
    /// A new event time: when what the memory describes happened (RFC 3339; at most 5
    /// minutes ahead of the server's clock).
    pub occurred_at: Option<DateTime<Utc>>,
    /// Why the memory was changed; kept in its history (at most 1,024 characters).
    #[schema(max_length = 1024)]
    pub reason: Option<String>,
    /// Who among the project's agents reads it: `private` (its own agent; the memory needs
    /// an `agent_id`) or `shared` (every agent).
    #[schema(example = "private")]
    pub visibility: Option<String>,
    /// Shares the memory with one of the project's teams of agents (`agent_teams`) only;
    /// null shares it with every agent again.
    #[serde(default, deserialize_with = "present_or_null_text")]
    #[schema(schema_with = engram_core::openapi_schemas::optional_external_id)]
    pub shared_with: Option<Option<String>>,
    /// The new content's vector, for a project whose embedding source is `client`.
    #[schema(schema_with = engram_core::openapi_schemas::optional_client_vector)]
    pub embedding: Option<Vec<f32>>,
}

fn present_or_null<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Option<DateTime<Utc>>>, D::Error> {
    Option::<DateTime<Utc>>::deserialize(deserializer).map(Some)
}

fn present_or_null_text<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Option<String>>, D::Error> {
    Option::<String>::deserialize(deserializer).map(Some)
}

impl EditMemoryBody {
    /// The wire body as the engine's edit: only the shape is checked here (metadata must be
    /// an object); the limits are the edit use case's, reported with it in one answer.
    pub fn into_edit(self) -> Result<(MemoryEdit, Option<Vec<f32>>), Vec<FieldError>> {
        let mut errors = Vec::new();
        let metadata = self
            .metadata
            .map(|value| metadata_object(Some(value), "metadata", &mut errors));
        let visibility = self.visibility.as_deref().and_then(|text| {
            text.parse()
                .map_err(|message| errors.push(FieldError::new("visibility", message)))
                .ok()
        });
        let shared_with = self.shared_with.map(|team| {
            team.and_then(|team| {
                engram_core::ExternalId::parse(&team)
                    .map_err(|message| errors.push(FieldError::new("shared_with", message)))
                    .ok()
            })
        });
        let edit = MemoryEdit {
            content: self.content,
            metadata,
            categories: self.categories,
            expires_at: self.expires_at,
            occurred_at: self.occurred_at,
            visibility,
            shared_with,
            reason: self.reason,
            keep_app_id: false,
        };
        errors.extend(edit.limit_errors());
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok((edit, self.embedding))
    }
}

/// A background task (erasure, file ingest, derivation, evaluation, re-embedding) and its
/// progress.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct TaskView {
    pub id: String,
    /// `subject_erasure`, `organization_subject_erasure`, `consolidation`, `evaluation_run`,
    /// `file_ingest`, `message_derivation` or `reembedding`
    pub kind: String,
    /// `queued | running | succeeded | failed`
    pub status: String,
    pub progress: TaskProgressView,
    /// For a finished erasure: the receipt (counts per store, times, verification, digest).
    #[schema(value_type = Option<Object>)]
    pub result: Option<serde_json::Value>,
    pub error: Option<String>,
    pub request_id: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct TaskProgressView {
    pub done: i64,
    pub total: i64,
}

impl From<engram_core::tasks::TaskRecord> for TaskView {
    fn from(task: engram_core::tasks::TaskRecord) -> Self {
        Self {
            id: task.id.to_string(),
            kind: task.kind.as_str().to_string(),
            status: task.status.as_str().to_string(),
            progress: TaskProgressView {
                done: task.progress_done,
                total: task.progress_total,
            },
            result: task.result,
            error: task.error,
            request_id: task.request_id,
            created_at: task.created_at,
            updated_at: task.updated_at,
        }
    }
}

/// An API key as the API shows it (never its secret).
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct ApiKeyView {
    pub id: String,
    pub label: String,
    /// The public start of the key, `egk_<environment>_<public id>_`, to recognise it.
    pub prefix: String,
    /// `live | test`
    pub environment: String,
    /// Of `memories:read`, `memories:write`, `memories:delete`, `admin`.
    pub scopes: Vec<String>,
    /// `active | expired | revoked`
    pub state: String,
    pub created_at: DateTime<Utc>,
    pub expires_at: Option<DateTime<Utc>>,
    pub last_used_at: Option<DateTime<Utc>>,
    pub revoked_at: Option<DateTime<Utc>>,
    /// Who made it: `console_account:<id>`, `api_key:<id>` or `system:<command>`; a rolled
    /// key keeps its line's maker. Null for keys made before makers were recorded.
    pub created_by: Option<String>,
    /// The agents the key is bound to: it writes only as them and reads their memories and
    /// what is shared with them. Null: every agent.
    #[schema(example = json!(["support"]))]
    pub agents: Option<Vec<String>>,
}

impl From<&ApiKeyRecord> for ApiKeyView {
    fn from(record: &ApiKeyRecord) -> Self {
        let state = record.state_at(Utc::now());
        Self {
            id: record.id.to_string(),
            label: record.label.clone(),
            prefix: format!("egk_{}_{}_", record.environment.as_str(), record.public_id),
            environment: record.environment.as_str().to_string(),
            scopes: record.scopes.names(),
            state: state.to_string(),
            created_at: record.created_at,
            expires_at: record.expires_at,
            last_used_at: record.last_used_at,
            revoked_at: record.revoked_at,
            created_by: record.created_by.clone(),
            agents: record.agents.as_ref().map(agent_names),
        }
    }
}

/// One audit event. Never memory content: ids, versions and SHA-256 digests.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct AuditEventView {
    pub id: i64,
    /// Position in the organization's chain.
    pub sequence: i64,
    pub at: DateTime<Utc>,
    /// `api_key | console_account | system`
    pub actor_type: String,
    pub actor_id: String,
    /// Such as `memory.created`, `memory.deleted`, `api_key.rolled`, `console.login_failed`.
    pub action: String,
    pub target_type: String,
    pub target_ids: Vec<String>,
    /// `success | failure`
    pub outcome: String,
    pub ip: Option<String>,
    pub user_agent: Option<String>,
    pub request_id: Option<String>,
    #[schema(value_type = Object)]
    pub details: serde_json::Value,
    /// SHA-256 chaining this event to the previous one.
    pub hash: String,
}

impl From<AuditEventRecord> for AuditEventView {
    fn from(record: AuditEventRecord) -> Self {
        Self {
            id: record.id,
            sequence: record.sequence,
            at: record.at,
            actor_type: record.actor_type,
            actor_id: record.actor_id,
            action: record.action,
            target_type: record.target_type,
            target_ids: record.target_ids,
            outcome: record.outcome,
            ip: record.ip,
            user_agent: record.user_agent,
            request_id: record.request_id,
            details: record.details,
            hash: record.hash,
        }
    }
}

/// Audit events as CSV, one row per event (see [`crate::csv_export`]).
pub(crate) fn events_as_csv(events: &[AuditEventView]) -> String {
    let header = [
        "id",
        "sequence",
        "at",
        "actor_type",
        "actor_id",
        "action",
        "target_type",
        "target_ids",
        "outcome",
        "ip",
        "user_agent",
        "request_id",
        "details",
        "hash",
    ];
    let rows = events.iter().map(|event| {
        [
            event.id.to_string(),
            event.sequence.to_string(),
            event.at.to_rfc3339(),
            event.actor_type.clone(),
            event.actor_id.clone(),
            event.action.clone(),
            event.target_type.clone(),
            event.target_ids.join(" "),
            event.outcome.clone(),
            event.ip.clone().unwrap_or_default(),
            event.user_agent.clone().unwrap_or_default(),
            event.request_id.clone().unwrap_or_default(),
            event.details.to_string(),
            event.hash.clone(),
        ]
    });
    crate::csv_export::csv_text(&header, rows)
}

/// The recall budget in the limits document.
#[derive(Debug, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RecallBudgetBody {
    /// Most memories one search returns (1–100).
    #[schema(minimum = 1, maximum = 100)]
    #[serde(
        default,
        deserialize_with = "engram_core::json_integers::optional_whole"
    )]
    pub max_results: Option<u32>,
    /// Most tokens of memory content one search returns (1–100,000).
    #[schema(minimum = 1, maximum = 100000)]
    #[serde(
        default,
        deserialize_with = "engram_core::json_integers::optional_whole"
    )]
    pub max_tokens: Option<u32>,
}

/// A monthly budget in the limits document.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MonthlyBudgetBody {
    /// The budget in millionths of `currency` (`250000000` is 250.00).
    #[serde(deserialize_with = "engram_core::json_integers::whole")]
    #[schema(minimum = 0)]
    pub amount_micros: i64,
    /// ISO 4217, e.g. `USD` (any case); only prices in this currency count against the
    /// budget.
    #[schema(pattern = "^[A-Za-z]{3}$")]
    pub currency: String,
    /// At most 10 percentages (1–255) at which an alert is recorded once a month; default
    /// `[80, 100]`.
    #[schema(schema_with = alert_thresholds_schema)]
    #[serde(
        default,
        deserialize_with = "engram_core::json_integers::optional_whole_list"
    )]
    pub alert_thresholds_percent: Option<Vec<u16>>,
    /// Refuse requests with `402 budget-exceeded` once the month's cost reaches the budget.
    #[serde(default)]
    pub hard_cap: bool,
}

/// Budget, quotas and recall budget of the project. `PUT` replaces the whole document;
/// an absent part means no limit.
#[derive(Debug, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SpendLimitsBody {
    #[serde(
        default,
        deserialize_with = "engram_core::json_objects::optional_object"
    )]
    pub monthly_budget: Option<MonthlyBudgetBody>,
    /// Most writes and searches per minute for the whole project (1–1,000,000).
    #[schema(minimum = 1, maximum = 1000000)]
    #[serde(
        default,
        deserialize_with = "engram_core::json_integers::optional_whole"
    )]
    pub requests_per_minute: Option<u32>,
    /// Most units per calendar month (UTC): `memories_written`, `searches`,
    /// `tokens_embedded`, `file_bytes`.
    #[schema(schema_with = monthly_quotas_schema)]
    #[serde(default, deserialize_with = "engram_core::json_integers::whole_map")]
    pub monthly_quotas: BTreeMap<String, u64>,
    #[serde(default, deserialize_with = "engram_core::json_objects::object")]
    pub recall: RecallBudgetBody,
    /// Most live memories per end-user and per agent, and what a write past them does;
    /// absent: no memory limits.
    #[serde(
        default,
        deserialize_with = "engram_core::json_objects::optional_object"
    )]
    pub memory_limits: Option<MemoryLimitsBody>,
}

/// Bounded memory per subject in the limits document: `refuse` answers a write that would
/// pass a limit with `409 memory-limit-reached`; `evict_oldest` and `evict_least_important`
/// delete the subject's oldest or least important memories to make room (never immutable or
/// held ones), audited as deletes by whoever set the limits.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryLimitsBody {
    /// Most live memories of one end-user, all agents together (1–100,000).
    #[schema(minimum = 1, maximum = 100000)]
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "engram_core::json_integers::optional_whole"
    )]
    pub per_end_user: Option<u32>,
    /// Most live memories of one agent, all end-users together (1–100,000).
    #[schema(minimum = 1, maximum = 100000)]
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "engram_core::json_integers::optional_whole"
    )]
    pub per_agent: Option<u32>,
    /// `refuse`, `evict_oldest` or `evict_least_important`.
    #[schema(schema_with = memory_limit_policy_schema)]
    pub policy: MemoryLimitPolicy,
}

fn memory_limit_policy_schema() -> utoipa::openapi::schema::Object {
    engram_core::openapi_schemas::one_of(
        MemoryLimitPolicy::ALL.iter().map(|policy| policy.as_str()),
    )
}

/// The units a quota may cap (all but `memory_days`, which is sampled daily, and
/// `memories_evicted`, which follows from the memory limits), each a count.
fn monthly_quotas_schema() -> utoipa::openapi::schema::Object {
    use utoipa::openapi::schema::{ObjectBuilder, Type};
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .property_names(Some(engram_core::openapi_schemas::one_of(
            UsageUnit::ALL
                .iter()
                .filter(|unit| !matches!(unit, UsageUnit::MemoryDays | UsageUnit::MemoriesEvicted))
                .map(|unit| unit.as_str()),
        )))
        .additional_properties(Some(
            ObjectBuilder::new()
                .schema_type(Type::Integer)
                .minimum(Some(0))
                .maximum(Some(u64::MAX)),
        ))
        .build()
}

/// (For an `Option` field: `null` is the default thresholds.)
fn alert_thresholds_schema() -> utoipa::openapi::schema::Array {
    use engram_core::openapi_schemas::Nullable;
    utoipa::openapi::schema::ArrayBuilder::new()
        .items(engram_core::openapi_schemas::integer_between(1, 255))
        .max_items(Some(MAX_ALERT_THRESHOLDS))
        .build()
        .nullable()
}

impl SpendLimitsBody {
    pub(crate) fn from_limits(limits: &SpendLimits) -> Self {
        Self {
            monthly_budget: limits
                .monthly_budget
                .as_ref()
                .map(|budget| MonthlyBudgetBody {
                    amount_micros: budget.amount_micros,
                    currency: budget.currency.clone(),
                    alert_thresholds_percent: Some(
                        budget
                            .alert_thresholds_percent
                            .iter()
                            .map(|percent| u16::from(*percent))
                            .collect(),
                    ),
                    hard_cap: budget.hard_cap,
                }),
            requests_per_minute: limits.requests_per_minute,
            monthly_quotas: limits
                .monthly_quotas
                .iter()
                .map(|(unit, quota)| (unit.as_str().to_string(), *quota))
                .collect(),
            recall: RecallBudgetBody {
                max_results: limits.recall.max_results,
                max_tokens: limits.recall.max_tokens,
            },
            memory_limits: limits
                .memory_limits
                .as_ref()
                .map(|memory_limits| MemoryLimitsBody {
                    per_end_user: memory_limits.per_end_user,
                    per_agent: memory_limits.per_agent,
                    policy: memory_limits.policy,
                }),
        }
    }

    /// The limits as typed, or every problem: what could not be read (a threshold beyond 255,
    /// a unit no quota knows) and, beside it so one answer names them all, what the use case
    /// would refuse (`SpendLimits::limit_errors`, which it checks again).
    pub(crate) fn into_limits(self) -> Result<SpendLimits, Vec<FieldError>> {
        let mut errors = Vec::new();
        let monthly_budget = self.monthly_budget.map(|budget| {
            let given = budget.alert_thresholds_percent.unwrap_or_else(|| {
                DEFAULT_ALERT_THRESHOLDS
                    .iter()
                    .map(|p| u16::from(*p))
                    .collect()
            });
            let mut thresholds: Vec<u8> = Vec::new();
            for (position, percent) in given.iter().enumerate() {
                match u8::try_from(*percent) {
                    Ok(percent) => thresholds.push(percent),
                    Err(_) => errors.push(FieldError::new(
                        format!("monthly_budget.alert_thresholds_percent[{position}]"),
                        "must be between 1 and 255",
                    )),
                }
            }
            MonthlyBudget {
                amount_micros: budget.amount_micros,
                currency: budget.currency.to_ascii_uppercase(),
                alert_thresholds_percent: thresholds,
                hard_cap: budget.hard_cap,
            }
        });
        let mut monthly_quotas = BTreeMap::new();
        for (unit_name, quota) in self.monthly_quotas {
            match UsageUnit::parse(&unit_name) {
                Some(unit) => {
                    monthly_quotas.insert(unit, quota);
                }
                None => errors.push(FieldError::new(
                    format!("monthly_quotas.{unit_name}"),
                    "unknown unit; expected memories_written, searches, tokens_embedded or file_bytes",
                )),
            }
        }
        let limits = SpendLimits {
            monthly_budget,
            requests_per_minute: self.requests_per_minute,
            monthly_quotas,
            recall: RecallBudget {
                max_results: self.recall.max_results,
                max_tokens: self.recall.max_tokens,
            },
            // Who sets them is the use case's to record.
            memory_limits: self.memory_limits.map(|memory_limits| MemoryLimits {
                per_end_user: memory_limits.per_end_user,
                per_agent: memory_limits.per_agent,
                policy: memory_limits.policy,
                set_by: None,
            }),
        };
        errors.extend(limits.limit_errors());
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok(limits)
    }
}

/// A credential's agents as the API lists them.
pub fn agent_names(agents: &engram_core::AgentRestriction) -> Vec<String> {
    agents
        .agents()
        .iter()
        .map(|agent| agent.as_str().to_string())
        .collect()
}
