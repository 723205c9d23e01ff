//! The JSON bodies of the API's add and search requests and its evaluation cases (JSON and
//! JSONL), and their parsing into the use cases' requests: no IO, so the fuzzer reaches them.

use crate::MemoryFilter;
use crate::limits::MAX_QUERY_BYTES;
use crate::memory::{MemoryKind, MemorySource, NewMemory};
use crate::recall::NewEvalCase;
use crate::search::{SearchMemoriesRequest, SearchRequest, SearchTuning};
use crate::validation::{ExternalId, FieldError};
use chrono::{DateTime, Utc};
use serde::Deserialize;

/// One memory to add. Only `content` is required.
#[derive(Clone, Debug, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NewMemoryBody {
    /// 1 byte – 32 KiB of UTF-8.
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::openapi_schemas::memory_content))]
    pub content: String,
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::openapi_schemas::optional_external_id))]
    pub user_id: Option<String>,
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::openapi_schemas::optional_external_id))]
    pub agent_id: Option<String>,
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::openapi_schemas::optional_external_id))]
    pub session_id: Option<String>,
    /// Default `semantic`.
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::openapi_schemas::optional_memory_kind))]
    pub kind: Option<String>,
    /// A memory with a key supersedes the active memory with the same (user_id, agent_id, key).
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::openapi_schemas::optional_external_id))]
    pub key: Option<String>,
    /// A JSON object of at most 16 KiB.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub metadata: Option<serde_json::Value>,
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::openapi_schemas::optional_categories))]
    pub categories: Option<Vec<String>>,
    /// Default `user_stated`.
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::openapi_schemas::optional_memory_source))]
    pub source: Option<String>,
    /// 0–1, default 1.
    #[cfg_attr(feature = "openapi", schema(minimum = 0.0, maximum = 1.0))]
    pub confidence: Option<f64>,
    pub expires_at: Option<DateTime<Utc>>,
    /// When what the memory describes happened (RFC 3339; at most 5 minutes ahead of the
    /// server's clock). Default: the time it is written.
    pub occurred_at: Option<DateTime<Utc>>,
    /// Who among the project's agents reads it: `private` (its own agent only; needs an
    /// `agent_id`) or `shared` (every agent). Default: the project's `default_visibility`.
    #[cfg_attr(feature = "openapi", schema(example = "shared"))]
    pub visibility: Option<String>,
    /// Shares the memory with one of the project's teams of agents (`agent_teams`) rather
    /// than with every agent; implies `shared`.
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::openapi_schemas::optional_external_id))]
    pub shared_with: Option<String>,
    /// The memory's vector, for a project whose embedding source is `client` (required
    /// there, refused elsewhere): exactly the project's declared dimension, finite numbers,
    /// not all zero.
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::openapi_schemas::optional_client_vector))]
    pub embedding: Option<Vec<f32>>,
}

/// Validated memories to add, with the vectors the client sent (all or none).
pub struct ParsedMemories {
    pub memories: Vec<NewMemory>,
    pub client_vectors: Option<Vec<Vec<f32>>>,
    pub run_id: Option<uuid::Uuid>,
}

#[derive(Clone, Debug, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AddMemoriesBody {
    /// 1–100 memories.
    #[cfg_attr(feature = "openapi", schema(min_items = 1, max_items = 100))]
    #[serde(deserialize_with = "crate::json_objects::object_list")]
    pub memories: Vec<NewMemoryBody>,
    /// The agent run this write belongs to (`POST /v1/runs`); or the `Engram-Run-Id` header.
    pub run_id: Option<uuid::Uuid>,
}

#[derive(Clone, Debug, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SearchBody {
    #[cfg_attr(
        feature = "openapi",
        schema(min_length = 1, max_length = 8192, pattern = "\\S")
    )]
    pub query: String,
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::openapi_schemas::optional_external_id))]
    pub user_id: Option<String>,
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::openapi_schemas::optional_external_id))]
    pub agent_id: Option<String>,
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::openapi_schemas::optional_external_id))]
    pub session_id: Option<String>,
    #[cfg_attr(feature = "openapi", schema(max_items = 5))]
    pub kinds: Option<Vec<String>>,
    /// A filter tree (AND/OR/NOT over conditions): see the engine's reference. Results are
    /// the best matches among the memories it lets through.
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::openapi_schemas::optional_memory_filter))]
    pub filters: Option<serde_json::Value>,
    /// 1–100, default 10.
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 100))]
    #[serde(default, deserialize_with = "crate::json_integers::optional_whole")]
    pub top_k: Option<i64>,
    /// 0–1, default 0.
    #[cfg_attr(feature = "openapi", schema(minimum = 0.0, maximum = 1.0))]
    pub min_score: Option<f64>,
    /// `hybrid` (default), `dense` or `keyword`.
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::openapi_schemas::optional_retrieval_mode))]
    pub retrieval: Option<String>,
    /// How hybrid mode combines its signals: `weighted` (default: the weighted sum of cosine
    /// and relative BM25) or `rrf` (reciprocal rank fusion, k = 60, scaled to 0–1).
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::openapi_schemas::optional_fusion_method))]
    pub fusion: Option<String>,
    /// `true` makes `session_id` a filter; by default it only boosts that session's memories.
    pub session_only: Option<bool>,
    /// Rank what was true at this moment (RFC 3339, not in the future): memories superseded
    /// since then are candidates, memories created after it are not.
    pub as_of: Option<DateTime<Utc>>,
    /// What time named in the query ("last month", "上个月", "in May 2023") is read
    /// against (RFC 3339; default: `as_of`, else the server's clock). Memories whose
    /// `occurred_at` lies in the window it names get a bonus of 0.1; `explain` says what was
    /// understood (`understood_time`).
    pub now: Option<DateTime<Utc>>,
    /// 0–1, default 0.5: share of the keyword (BM25) signal in the hybrid score.
    #[cfg_attr(feature = "openapi", schema(minimum = 0.0, maximum = 1.0))]
    pub keyword_weight: Option<f64>,
    /// 0–1, default 0.05: largest bonus for recency, halving every 30 days.
    #[cfg_attr(feature = "openapi", schema(minimum = 0.0, maximum = 1.0))]
    pub recency_weight: Option<f64>,
    /// 0–1, default 0.5: how far a result rises toward the best score among its neighbours
    /// — the memories of its session at most two writes away, when they are candidates too
    /// and score higher — so the turn that answers a question ranks near the turn that
    /// matches it.
    #[cfg_attr(feature = "openapi", schema(minimum = 0.0, maximum = 1.0))]
    pub neighbour_weight: Option<f64>,
    /// Default true: leave out results nearly identical to a better one.
    pub diversify: Option<bool>,
    /// Also return the procedural memories marked `"always": true` (at task start).
    pub include_always: Option<bool>,
    /// With `agent_id`: that agent's memories and those shared with every agent, instead
    /// of the agent's own only (default false).
    pub include_shared: Option<bool>,
    /// 0–1, default 1: what a shared memory's score counts for beside the agent's own, with
    /// `include_shared` (0.8: the agent's own first when they match about as well).
    #[cfg_attr(feature = "openapi", schema(minimum = 0.0, maximum = 1.0))]
    pub shared_weight: Option<f64>,
    /// `true`: verified memories only; `false`: verified or not, whatever the project's
    /// `verified_only_from_other_agents` says. Absent: as the project says.
    pub verified_only: Option<bool>,
    /// 1–8192: also return `context`, the results packed into this many tokens.
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 8192))]
    #[serde(default, deserialize_with = "crate::json_integers::optional_whole")]
    pub context_tokens: Option<i64>,
    /// Add `signals` to each result and `timings_ms` to the response.
    pub explain: Option<bool>,
    /// The query's vector, for a project whose embedding source is `client`: required there
    /// for `dense` and `hybrid` retrieval (`query` still feeds the keyword signal), refused
    /// elsewhere.
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::openapi_schemas::optional_client_vector))]
    pub query_vector: Option<Vec<f32>>,
    /// A retrieval profile of the project (`PUT /v1/retrieval-profiles/{name}`): its
    /// parameters apply where the request sets none. Without it (and without any of
    /// `retrieval`, `fusion`, `keyword_weight`, `recency_weight`, `neighbour_weight`, `diversify`,
    /// `min_score`),
    /// a profile with a traffic share may serve the search.
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::openapi_schemas::optional_profile_name))]
    pub profile: Option<String>,
    /// The agent run this search belongs to (`POST /v1/runs`); or the `Engram-Run-Id` header.
    pub run_id: Option<uuid::Uuid>,
}

/// The metadata as an object (`null` or absent: empty); anything else is refused.
pub fn metadata_object(
    metadata: Option<serde_json::Value>,
    field: &str,
    errors: &mut Vec<FieldError>,
) -> serde_json::Map<String, serde_json::Value> {
    match metadata {
        None | Some(serde_json::Value::Null) => serde_json::Map::new(),
        Some(serde_json::Value::Object(map)) => map,
        Some(_) => {
            errors.push(FieldError::new(field, "must be a JSON object"));
            serde_json::Map::new()
        }
    }
}

fn parse_enum<T: std::str::FromStr<Err = String>>(
    text: Option<&str>,
    default: T,
    field: &str,
    errors: &mut Vec<FieldError>,
) -> T {
    match text {
        None => default,
        Some(text) => text.parse().unwrap_or_else(|message| {
            errors.push(FieldError::new(field, message));
            default
        }),
    }
}

impl AddMemoriesBody {
    pub fn into_new_memories(self) -> Result<ParsedMemories, Vec<FieldError>> {
        let mut errors = Vec::new();
        // A wrong count is refused before any memory is parsed (the body may be large).
        if let Some(error) = NewMemory::batch_size_error(self.memories.len()) {
            return Err(vec![error]);
        }
        let with_vectors = self
            .memories
            .iter()
            .filter(|memory| memory.embedding.is_some())
            .count();
        if with_vectors != 0
            && with_vectors != self.memories.len()
            && let Some(position) = self
                .memories
                .iter()
                .position(|memory| memory.embedding.is_none())
        {
            errors.push(FieldError::new(
                format!("memories[{position}].embedding"),
                "either every memory of a request carries an embedding or none does",
            ));
        }
        let mut client_vectors = Vec::with_capacity(with_vectors);
        let mut parsed = Vec::with_capacity(self.memories.len());
        for (position, mut body) in self.memories.into_iter().enumerate() {
            let path = |name: &str| format!("memories[{position}].{name}");
            if let Some(vector) = body.embedding.take() {
                client_vectors.push(vector);
            }
            let confidence = body.confidence.unwrap_or(1.0);
            parsed.push(NewMemory {
                user_id: ExternalId::parse_field(
                    body.user_id.as_deref(),
                    &path("user_id"),
                    &mut errors,
                ),
                agent_id: ExternalId::parse_field(
                    body.agent_id.as_deref(),
                    &path("agent_id"),
                    &mut errors,
                ),
                session_id: ExternalId::parse_field(
                    body.session_id.as_deref(),
                    &path("session_id"),
                    &mut errors,
                ),
                kind: parse_enum(
                    body.kind.as_deref(),
                    MemoryKind::Semantic,
                    &path("kind"),
                    &mut errors,
                ),
                key: ExternalId::parse_field(body.key.as_deref(), &path("key"), &mut errors),
                metadata: metadata_object(body.metadata, &path("metadata"), &mut errors),
                categories: body.categories.unwrap_or_default(),
                source: parse_enum(
                    body.source.as_deref(),
                    MemorySource::UserStated,
                    &path("source"),
                    &mut errors,
                ),
                confidence,
                expires_at: body.expires_at,
                occurred_at: body.occurred_at,
                content: body.content,
                visibility: body
                    .visibility
                    .as_deref()
                    .map(|text| {
                        text.parse().map_err(|message| {
                            errors.push(FieldError::new(path("visibility"), message))
                        })
                    })
                    .and_then(Result::ok),
                shared_with: ExternalId::parse_field(
                    body.shared_with.as_deref(),
                    &path("shared_with"),
                    &mut errors,
                ),
            });
        }
        // The limits are the add use case's; reported here with the parse errors in one answer.
        errors.extend(NewMemory::batch_limit_errors(&parsed));
        if errors.is_empty() {
            Ok(ParsedMemories {
                memories: parsed,
                client_vectors: (with_vectors > 0).then_some(client_vectors),
                run_id: self.run_id,
            })
        } else {
            Err(errors)
        }
    }
}

/// A parsed search: the engine's request, and whether to explain the ranking.
pub struct ParsedSearch {
    pub search: SearchMemoriesRequest,
    pub explain: bool,
}

impl SearchBody {
    /// The wire body as the engine's request. Only what the wire format itself decides is
    /// checked here (names of kinds, modes and ids); the limits are the search use case's
    /// (`SearchMemoriesRequest::limit_errors`), reported with these in one answer.
    pub fn into_request(self) -> Result<ParsedSearch, Vec<FieldError>> {
        let mut errors = Vec::new();
        let top_k = self.top_k.unwrap_or(crate::limits::DEFAULT_TOP_K as i64);
        let mut kinds = Vec::new();
        for (position, kind) in self.kinds.unwrap_or_default().iter().enumerate() {
            match kind.parse::<MemoryKind>() {
                Ok(kind) => kinds.push(kind),
                Err(message) => errors.push(FieldError::new(format!("kinds[{position}]"), message)),
            }
        }
        let subject = crate::SubjectFilter {
            user_id: ExternalId::parse_field(self.user_id.as_deref(), "user_id", &mut errors),
            agent_id: ExternalId::parse_field(self.agent_id.as_deref(), "agent_id", &mut errors),
            session_id: ExternalId::parse_field(
                self.session_id.as_deref(),
                "session_id",
                &mut errors,
            ),
        };
        let filters = match self.filters {
            None => MemoryFilter::everything(),
            Some(value) => crate::memory_filter::parse_memory_filter(&value, "filters")
                .unwrap_or_else(|filter_errors| {
                    errors.extend(filter_errors);
                    MemoryFilter::everything()
                }),
        };
        let retrieval = parse_enum(
            self.retrieval.as_deref(),
            crate::search::RetrievalMode::default(),
            "retrieval",
            &mut errors,
        );
        let fusion = parse_enum(
            self.fusion.as_deref(),
            crate::search::FusionMethod::default(),
            "fusion",
            &mut errors,
        );
        let keyword_weight = self
            .keyword_weight
            .map_or(crate::search::DEFAULT_KEYWORD_WEIGHT, |weight| {
                weight as f32
            });
        let recency_weight = self
            .recency_weight
            .map_or(crate::search::DEFAULT_RECENCY_WEIGHT, |weight| {
                weight as f32
            });
        let neighbour_weight = self
            .neighbour_weight
            .map_or(crate::search::DEFAULT_NEIGHBOUR_WEIGHT, |weight| {
                weight as f32
            });
        let min_score = self.min_score.map_or(0.0, |score| score as f32);
        let caller_tuning = SearchTuning {
            retrieval: self.retrieval.is_some().then_some(retrieval),
            fusion: self.fusion.is_some().then_some(fusion),
            keyword_weight: self.keyword_weight.is_some().then_some(keyword_weight),
            recency_weight: self.recency_weight.is_some().then_some(recency_weight),
            neighbour_weight: self.neighbour_weight.is_some().then_some(neighbour_weight),
            diversify: self.diversify,
            min_score: self.min_score.is_some().then_some(min_score),
        };
        let search = SearchMemoriesRequest {
            request: SearchRequest {
                query: self.query,
                subject,
                session_only: self.session_only.unwrap_or(false),
                kinds,
                filters,
                // Out of range (negative included) is the use case's to name: 0 is refused.
                top_k: usize::try_from(top_k).unwrap_or(0),
                min_score,
                // The project's floor: the use case sets it when no cut-off was asked for.
                relevance_floor: 0.0,
                unmentioned_name_floor: 0.0,
                retrieval,
                fusion,
                keyword_weight,
                recency_weight,
                neighbour_weight,
                as_of: self.as_of,
                diversify: self.diversify.unwrap_or(true),
                include_always: self.include_always.unwrap_or(false),
                query_vector: self.query_vector,
                now: self.now,
                include_shared: self.include_shared.unwrap_or(false),
                shared_weight: self.shared_weight.map_or(1.0, |weight| weight as f32),
                verified_only: self.verified_only,
                // The use case resolves it with the project's setting.
                verification: crate::search::VerificationRule::Any,
                for_agent: None,
            },
            caller_tuning,
            profile: self.profile,
            context_tokens: self
                .context_tokens
                .map(|tokens| u64::try_from(tokens).unwrap_or(0)),
            trace_id: None,
            run_id: self.run_id,
        };
        errors.extend(search.limit_errors());
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok(ParsedSearch {
            search,
            explain: self.explain.unwrap_or(false),
        })
    }
}

/// An add request's JSON body, parsed and checked as the add use case receives it.
pub fn parse_add_memories_json(body: &[u8]) -> Result<ParsedMemories, Vec<FieldError>> {
    let body: AddMemoriesBody = serde_json::from_slice(body)
        .map_err(|error| vec![FieldError::new("body", error.to_string())])?;
    body.into_new_memories()
}

/// A search request's JSON body, parsed and checked as the search use case receives it.
pub fn parse_search_json(body: &[u8]) -> Result<ParsedSearch, Vec<FieldError>> {
    let body: SearchBody = serde_json::from_slice(body)
        .map_err(|error| vec![FieldError::new("body", error.to_string())])?;
    body.into_request()
}

/// A filter tree alone (as `POST /v1/memories/query`, bulk deletes and the fuzzer take it).
pub fn parse_memory_filter_json(body: &[u8]) -> Result<MemoryFilter, Vec<FieldError>> {
    let value: serde_json::Value = serde_json::from_slice(body)
        .map_err(|error| vec![FieldError::new("filters", error.to_string())])?;
    crate::memory_filter::parse_memory_filter(&value, "filters")
}

/// The metadata and category conditions of an evaluation case's `filters` (its `kinds` and
/// `session_id` are search fields of their own).
pub fn eval_case_memory_filter(
    filters: &serde_json::Value,
    path: &str,
) -> Result<MemoryFilter, Vec<FieldError>> {
    let mut tree = serde_json::Map::new();
    for key in ["metadata", "categories"] {
        if let Some(value) = filters.get(key) {
            tree.insert(key.to_string(), value.clone());
        }
    }
    crate::memory_filter::parse_memory_filter(&serde_json::Value::Object(tree), path)
}

// --- evaluation cases (JSON and JSONL) ---

pub use crate::limits::{MAX_CASES_PER_REQUEST, MAX_EXPECTED_PER_CASE};

/// One labelled query.
#[derive(Clone, Debug, serde::Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct EvalCaseBody {
    /// 1 byte – 8 KiB.
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::openapi_schemas::eval_case_text))]
    pub query: String,
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::openapi_schemas::optional_external_id))]
    pub user_id: Option<String>,
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::openapi_schemas::optional_external_id))]
    pub agent_id: Option<String>,
    /// `{kinds?, session_id?, metadata?, categories?}`, as a search takes them.
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::openapi_schemas::optional_eval_case_filters))]
    pub filters: Option<serde_json::Value>,
    /// Memories a good answer returns (at most 100). A case names at least one expected
    /// memory id or content.
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::openapi_schemas::optional_expected_memory_ids))]
    pub expected_memory_ids: Option<Vec<String>>,
    /// Texts a good answer's memories contain, ignoring case and spacing (at most 100).
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::openapi_schemas::optional_expected_contents))]
    pub expected_contents: Option<Vec<String>>,
    /// For a project that sends its own vectors.
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::openapi_schemas::optional_client_vector))]
    pub query_vector: Option<Vec<f32>>,
}

pub fn parse_case(body: EvalCaseBody, field: &str, errors: &mut Vec<FieldError>) -> NewEvalCase {
    let path = |name: &str| format!("{field}.{name}");
    if body.query.trim().is_empty() || body.query.len() > MAX_QUERY_BYTES {
        errors.push(FieldError::new(
            path("query"),
            format!("must be 1–{MAX_QUERY_BYTES} bytes"),
        ));
    }
    for (name, value) in [("user_id", &body.user_id), ("agent_id", &body.agent_id)] {
        if let Some(value) = value
            && let Err(message) = ExternalId::parse(value)
        {
            errors.push(FieldError::new(path(name), message));
        }
    }
    let filters = body.filters.unwrap_or_else(|| serde_json::json!({}));
    match filters.as_object() {
        None => errors.push(FieldError::new(path("filters"), "must be a JSON object")),
        Some(object) => {
            for (key, value) in object {
                let ok = match key.as_str() {
                    "kinds" => value.as_array().is_some_and(|kinds| {
                        kinds.iter().all(|kind| {
                            kind.as_str()
                                .is_some_and(|kind| kind.parse::<MemoryKind>().is_ok())
                        })
                    }),
                    "session_id" => value
                        .as_str()
                        .is_some_and(|id| ExternalId::parse(id).is_ok()),
                    // Checked below with the filter language's own errors.
                    "metadata" | "categories" => true,
                    _ => false,
                };
                if !ok {
                    errors.push(FieldError::new(
                        format!("{field}.filters.{key}"),
                        "expected kinds (list of kinds), session_id, metadata (object) or categories (list of strings)",
                    ));
                }
            }
            if let Err(filter_errors) = eval_case_memory_filter(&filters, &path("filters")) {
                errors.extend(filter_errors);
            }
        }
    }
    let expected_memory_ids = body.expected_memory_ids.unwrap_or_default();
    let expected_contents = body.expected_contents.unwrap_or_default();
    if expected_memory_ids.is_empty() && expected_contents.is_empty() {
        errors.push(FieldError::new(
            path("expected_memory_ids"),
            "a case names at least one expected memory id or content",
        ));
    }
    if expected_memory_ids.len() > MAX_EXPECTED_PER_CASE
        || expected_contents.len() > MAX_EXPECTED_PER_CASE
    {
        errors.push(FieldError::new(
            path("expected_memory_ids"),
            format!("at most {MAX_EXPECTED_PER_CASE} expected ids and {MAX_EXPECTED_PER_CASE} expected contents"),
        ));
    }
    for (position, id) in expected_memory_ids.iter().enumerate() {
        if id.parse::<crate::MemoryId>().is_err() {
            errors.push(FieldError::new(
                format!("{field}.expected_memory_ids[{position}]"),
                "not a memory id",
            ));
        }
    }
    for (position, text) in expected_contents.iter().enumerate() {
        if text.trim().is_empty() || text.len() > MAX_QUERY_BYTES {
            errors.push(FieldError::new(
                format!("{field}.expected_contents[{position}]"),
                format!("must be 1–{MAX_QUERY_BYTES} bytes"),
            ));
        }
    }
    if let Some(vector) = &body.query_vector
        && (vector.is_empty()
            || vector.len() > crate::embedding::MAX_CLIENT_VECTOR_DIMENSION as usize
            || vector.iter().any(|value| !value.is_finite()))
    {
        errors.push(FieldError::new(
            path("query_vector"),
            "must hold 1–4096 finite numbers",
        ));
    }
    NewEvalCase {
        query: body.query,
        user_id: body.user_id,
        agent_id: body.agent_id,
        filters,
        expected_memory_ids,
        expected_contents,
        query_vector: body.query_vector,
    }
}

pub fn parse_cases(bodies: Vec<EvalCaseBody>, errors: &mut Vec<FieldError>) -> Vec<NewEvalCase> {
    if bodies.len() > MAX_CASES_PER_REQUEST {
        errors.push(FieldError::new(
            "cases",
            format!("at most {MAX_CASES_PER_REQUEST} cases per request"),
        ));
        return Vec::new();
    }
    bodies
        .into_iter()
        .enumerate()
        .map(|(position, body)| parse_case(body, &format!("cases[{position}]"), errors))
        .collect()
}

/// Cases of a JSONL text, one object per line (blank lines skipped); errors name `line N`.
pub fn parse_jsonl_cases(text: &str) -> Result<Vec<NewEvalCase>, Vec<FieldError>> {
    let mut errors = Vec::new();
    let mut bodies = Vec::new();
    for (number, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        if !line.trim_start().starts_with('{') {
            errors.push(FieldError::new(
                format!("line {}", number + 1),
                "must be a JSON object",
            ));
            continue;
        }
        match serde_json::from_str::<EvalCaseBody>(line) {
            Ok(case) => bodies.push((number + 1, case)),
            Err(error) => errors.push(FieldError::new(
                format!("line {}", number + 1),
                error.to_string(),
            )),
        }
    }
    if bodies.len() > MAX_CASES_PER_REQUEST {
        errors.push(FieldError::new(
            "body",
            format!("at most {MAX_CASES_PER_REQUEST} cases per import"),
        ));
    }
    if bodies.is_empty() && errors.is_empty() {
        errors.push(FieldError::new(
            "body",
            "no cases: one JSON object per line",
        ));
    }
    let cases: Vec<NewEvalCase> = bodies
        .into_iter()
        .map(|(line, case)| parse_case(case, &format!("line {line}"), &mut errors))
        .collect();
    if errors.is_empty() {
        Ok(cases)
    } else {
        Err(errors)
    }
}
