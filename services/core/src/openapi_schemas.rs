//! The OpenAPI schemas of the values core parses (ids, kinds, modes), built from the parsers'
//! own limits and value lists, so the published document cannot drift from what is accepted.

use crate::limits::MAX_EXTERNAL_ID_CHARS;
use crate::memory::{MemoryKind, MemorySource};
use crate::search::{FusionMethod, RetrievalMode};
use utoipa::openapi::schema::{Object, ObjectBuilder, Type};

/// What `ExternalId::parse` accepts: 1–255 characters, none of them a control character.
pub fn external_id() -> Object {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .min_length(Some(1))
        .max_length(Some(MAX_EXTERNAL_ID_CHARS))
        .pattern(Some("^[^\\u0000-\\u001F\\u007F-\\u009F]+$"))
        .build()
}

/// A project's teams of agents: at most 32 team names, each with 1–64 agent ids.
pub fn agent_teams() -> Object {
    use crate::agent_teams::{MAX_AGENTS_PER_TEAM, MAX_TEAMS};
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .max_properties(Some(MAX_TEAMS))
        .property_names(Some(external_id()))
        .additional_properties(Some(
            utoipa::openapi::schema::ArrayBuilder::new()
                .items(external_id())
                .min_items(Some(1))
                .max_items(Some(MAX_AGENTS_PER_TEAM)),
        ))
        .build()
}

/// [`agent_teams`] or `null` (a change that leaves the teams as they are).
pub fn optional_agent_teams() -> Object {
    agent_teams().nullable()
}

/// Any JSON value: an object, array, string, number, boolean or null (a session-state
/// value is stored as sent).
pub fn any_json_value() -> Object {
    ObjectBuilder::new()
        .schema_type(utoipa::openapi::schema::SchemaType::AnyValue)
        .build()
}

/// A relevance floor as `RelevanceFloorSetting::parse` takes it: a number 0–1 or `"model"`.
pub fn relevance_floor_setting() -> utoipa::openapi::schema::Schema {
    relevance_floor_forms(false)
}

/// [`relevance_floor_setting`] or `null` (a change that leaves the floor as it is).
pub fn optional_relevance_floor_setting() -> utoipa::openapi::schema::Schema {
    relevance_floor_forms(true)
}

fn relevance_floor_forms(nullable: bool) -> utoipa::openapi::schema::Schema {
    let mut forms = utoipa::openapi::schema::OneOfBuilder::new()
        .item(
            ObjectBuilder::new()
                .schema_type(Type::Number)
                .minimum(Some(0.0))
                .maximum(Some(1.0)),
        )
        .item(one_of(["model"]));
    if nullable {
        forms = forms.item(ObjectBuilder::new().schema_type(Type::Null));
    }
    utoipa::openapi::schema::Schema::OneOf(forms.build())
}

/// A string that is one of `values`.
pub fn one_of<'a>(values: impl IntoIterator<Item = &'a str>) -> Object {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(values.into_iter().map(str::to_string)))
        .build()
}

pub fn memory_kind() -> Object {
    one_of(MemoryKind::ALL.iter().map(|kind| kind.as_str()))
}

pub fn memory_source() -> Object {
    one_of(MemorySource::ALL.iter().map(|source| source.as_str()))
}

pub fn retrieval_mode() -> Object {
    one_of(RetrievalMode::ALL.iter().map(|mode| mode.as_str()))
}

pub fn fusion_method() -> Object {
    one_of(FusionMethod::ALL.iter().map(|method| method.as_str()))
}

pub fn message_role() -> Object {
    one_of(
        crate::conversation::MessageRole::ALL
            .iter()
            .map(|role| role.as_str()),
    )
}

pub fn audit_action() -> Object {
    one_of(
        crate::audit::AuditAction::ALL
            .iter()
            .map(|action| action.as_str()),
    )
}

pub fn recall_event_capture() -> Object {
    use crate::recall::RecallEventCapture;
    one_of(
        [
            RecallEventCapture::Full,
            RecallEventCapture::NoText,
            RecallEventCapture::Off,
        ]
        .map(RecallEventCapture::as_str),
    )
}

pub fn pii_redaction() -> Object {
    use crate::pii::PiiRedaction;
    one_of([PiiRedaction::Off, PiiRedaction::Mask, PiiRedaction::Reject].map(PiiRedaction::as_str))
}

/// What `ProjectEmbedding::parse` takes as a source.
pub fn embedding_source() -> Object {
    one_of(["deployment", "local", "provider", "client"])
}

/// The local model a project picks (`ProjectEmbedding::parse`), or none.
pub fn optional_local_model() -> Object {
    one_of(["minilm", "multilingual"]).nullable()
}

/// An integer from `minimum` to `maximum`.
pub fn integer_between(minimum: u64, maximum: u64) -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::Integer)
        .minimum(Some(minimum))
        .maximum(Some(maximum))
}

/// An object keyed by memory kind (`semantic`, …), each value a schema of its own.
pub fn per_memory_kind(value: ObjectBuilder) -> Object {
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .property_names(Some(memory_kind()))
        .additional_properties(Some(value))
        .build()
}

/// Retention per kind: 1–`maximum_days` days, or `null` for no limit.
pub fn retention_days_per_kind(maximum_days: u64) -> Object {
    use utoipa::openapi::schema::SchemaType;
    per_memory_kind(
        integer_between(1, maximum_days)
            .schema_type(SchemaType::Array(vec![Type::Integer, Type::Null])),
    )
}

/// What `SearchTuning::parse` takes: the listed parameters only, each of its own type.
pub fn search_tuning() -> Object {
    let share = || {
        ObjectBuilder::new()
            .schema_type(Type::Number)
            .minimum(Some(0.0))
            .maximum(Some(1.0))
    };
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .property("retrieval", retrieval_mode())
        .property("fusion", fusion_method())
        .property("keyword_weight", share())
        .property("recency_weight", share())
        .property("neighbour_weight", share())
        .property("min_score", share())
        .property("diversify", ObjectBuilder::new().schema_type(Type::Boolean))
        .additional_properties(Some(
            utoipa::openapi::schema::AdditionalProperties::FreeForm(false),
        ))
        .build()
}

/// The characters Rust's `str::trim` removes (Unicode `White_Space`), spelled out so Python's
/// and ECMAScript's regex engines read the class alike.
const WHITE_SPACE_CLASS: &str =
    "\\u0009-\\u000D\\u0020\\u0085\\u00A0\\u1680\\u2000-\\u200A\\u2028\\u2029\\u202F\\u205F\\u3000";

/// Text that is not only white space, of at most `max_length` characters (the server counts
/// bytes; ASCII text is the same either way).
pub fn non_blank_text(max_length: usize) -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .min_length(Some(1))
        .max_length(Some(max_length))
        .pattern(Some(format!("[^{WHITE_SPACE_CLASS}]")))
}

/// A query or expected content of an evaluation case: 1 byte – 8 KiB, not blank.
pub fn eval_case_text() -> Object {
    non_blank_text(crate::limits::MAX_QUERY_BYTES).build()
}

/// `filters` of an evaluation case, as `parse_case` takes them.
pub fn eval_case_filters() -> Object {
    use utoipa::openapi::schema::{AdditionalProperties, ArrayBuilder};
    let mut filter_fields = memory_filter_schema().properties;
    let mut builder = ObjectBuilder::new()
        .schema_type(Type::Object)
        .property("kinds", ArrayBuilder::new().items(memory_kind()))
        .property("session_id", external_id());
    // Metadata and categories are read by the filter language.
    for field in ["metadata", "categories"] {
        if let Some(schema) = filter_fields.remove(field) {
            builder = builder.property(field, schema);
        }
    }
    builder
        .additional_properties(Some(
            AdditionalProperties::<utoipa::openapi::Schema>::FreeForm(false),
        ))
        .build()
}

/// Memory ids a case expects: at most 100.
pub fn expected_memory_ids() -> utoipa::openapi::schema::Array {
    utoipa::openapi::schema::ArrayBuilder::new()
        .items(ObjectBuilder::new().schema_type(Type::String).format(Some(
            utoipa::openapi::SchemaFormat::KnownFormat(utoipa::openapi::KnownFormat::Uuid),
        )))
        .max_items(Some(crate::limits::MAX_EXPECTED_PER_CASE))
        .build()
}

/// Contents a case expects: at most 100 non-blank texts.
pub fn expected_contents() -> utoipa::openapi::schema::Array {
    utoipa::openapi::schema::ArrayBuilder::new()
        .items(non_blank_text(crate::limits::MAX_QUERY_BYTES))
        .max_items(Some(crate::limits::MAX_EXPECTED_PER_CASE))
        .build()
}

/// What `FileName::parse` takes: a name without directories or control characters, not only
/// white space, not `.` or `..` (surrounding white space is trimmed; at most 255 characters).
pub fn file_name() -> Object {
    let allowed = "[^/\\\\\\u0000-\\u001F\\u007F-\\u009F]";
    let visible = format!("[^/\\\\\\u0000-\\u001F\\u007F-\\u009F{WHITE_SPACE_CLASS}]");
    let space = format!("[{WHITE_SPACE_CLASS}]");
    ObjectBuilder::new()
        .schema_type(Type::String)
        .min_length(Some(1))
        .max_length(Some(255))
        .pattern(Some(format!(
            "^(?!{space}*\\.\\.?{space}*$){allowed}*{visible}{allowed}*$"
        )))
        .build()
}

/// Memory content: 1 byte – 32 KiB, not only white space.
pub fn memory_content() -> Object {
    non_blank_text(crate::limits::MAX_CONTENT_BYTES).build()
}

/// Categories of a memory: at most 32, each 1–64 characters.
pub fn categories() -> utoipa::openapi::schema::Array {
    utoipa::openapi::schema::ArrayBuilder::new()
        .items(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .min_length(Some(1))
                .max_length(Some(crate::limits::MAX_CATEGORY_CHARS)),
        )
        .max_items(Some(crate::limits::MAX_CATEGORIES))
        .build()
}

/// A retrieval profile's name: 1–64 of `[A-Za-z0-9._-]`.
pub fn profile_name() -> Object {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .pattern(Some("^[A-Za-z0-9._-]{1,64}$"))
        .build()
}

/// An id the server issued (a UUID, as it writes them).
pub fn issued_id() -> Object {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .format(Some(utoipa::openapi::SchemaFormat::KnownFormat(
            utoipa::openapi::KnownFormat::Uuid,
        )))
        .pattern(Some(
            "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$",
        ))
        .build()
}

/// A vector a client sends: 1–4,096 numbers.
pub fn client_vector() -> utoipa::openapi::schema::Array {
    utoipa::openapi::schema::ArrayBuilder::new()
        .items(ObjectBuilder::new().schema_type(Type::Number))
        .min_items(Some(1))
        .max_items(Some(crate::embedding::MAX_CLIENT_VECTOR_DIMENSION as usize))
        .build()
}

/// Scopes of an API key: at least one of `memories:read`, `memories:write`,
/// `memories:delete`, `memories:verify`, `admin`, each once.
pub fn key_scopes() -> utoipa::openapi::schema::Array {
    use crate::access::ApiScope;
    utoipa::openapi::schema::ArrayBuilder::new()
        .items(one_of(ApiScope::ALL.iter().map(|scope| scope.as_str())))
        .unique_items(true)
        .min_items(Some(1))
        .max_items(Some(ApiScope::ALL.len()))
        .build()
}

/// Scopes of an end-user token: at least one, each once, never `admin` or
/// `memories:verify`.
pub fn end_user_token_scopes() -> utoipa::openapi::schema::Array {
    use crate::access::ApiScope;
    let for_tokens = || {
        ApiScope::ALL
            .into_iter()
            .filter(|scope| !matches!(scope, ApiScope::Admin | ApiScope::MemoriesVerify))
    };
    utoipa::openapi::schema::ArrayBuilder::new()
        .items(one_of(for_tokens().map(|scope| scope.as_str())))
        .unique_items(true)
        .min_items(Some(1))
        .max_items(Some(for_tokens().count()))
        .build()
}

/// A calendar date as RFC 3339 writes it (`full-date`): exactly the dates that exist.
pub const RFC3339_DATE: &str = "(?:[0-9]{4}-(?:(?:0[1-9]|1[0-2])-(?:0[1-9]|1[0-9]|2[0-8])|(?:0[13-9]|1[0-2])-(?:29|30)|(?:0[13578]|1[02])-31)|(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00)-02-29)";

/// An RFC 3339 `date-time` (`T` and `Z` upper case; 1–9 digits of fraction; offsets within
/// a day). OpenAPI 3.1's `format` only annotates: this pattern is what generators and
/// validators can check.
pub fn rfc3339_date_time_pattern() -> String {
    format!(
        "^{RFC3339_DATE}T(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\\.[0-9]{{1,9}})?(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])$"
    )
}

/// A report day (`from`, `to` of usage, costs and recall metrics): 1970-01-01 – 9999-12-31.
pub const REPORT_DAY_PATTERN: &str = "^(?:(?:19[7-9][0-9]|[2-9][0-9]{3})-(?:(?:0[1-9]|1[0-2])-(?:0[1-9]|1[0-9]|2[0-8])|(?:0[13-9]|1[0-2])-(?:29|30)|(?:0[13578]|1[02])-31)|(?:19(?:7[26]|8[048]|9[26])|[2-9][0-9](?:0[48]|[2468][048]|[13579][26])|(?:[2468][048]|[3579][26])00)-02-29)$";

/// A schema that also takes `null`: serde reads `null` as `None` for a field of type
/// `Option`, so what such a field publishes must say so.
pub trait Nullable {
    fn nullable(self) -> Self;
}

fn with_null(
    schema_type: utoipa::openapi::schema::SchemaType,
) -> utoipa::openapi::schema::SchemaType {
    use utoipa::openapi::schema::SchemaType;
    match schema_type {
        SchemaType::Type(single) => SchemaType::Array(vec![single, Type::Null]),
        SchemaType::Array(mut types) => {
            if !types.contains(&Type::Null) {
                types.push(Type::Null);
            }
            SchemaType::Array(types)
        }
        SchemaType::AnyValue => SchemaType::AnyValue,
    }
}

impl Nullable for Object {
    fn nullable(mut self) -> Self {
        self.schema_type = with_null(self.schema_type);
        if let Some(values) = &mut self.enum_values
            && !values.contains(&serde_json::Value::Null)
        {
            values.push(serde_json::Value::Null);
        }
        self
    }
}

impl Nullable for utoipa::openapi::schema::Array {
    fn nullable(mut self) -> Self {
        self.schema_type = with_null(self.schema_type);
        self
    }
}

/// `optional_<name>()`: the schema of `<name>()` for an `Option` field.
macro_rules! optional_schemas {
    ($($optional:ident: $schema:ty = $base:ident),+ $(,)?) => {
        $(pub fn $optional() -> $schema {
            $base().nullable()
        })+
    };
}

optional_schemas!(
    optional_external_id: Object = external_id,
    optional_memory_kind: Object = memory_kind,
    optional_memory_source: Object = memory_source,
    optional_retrieval_mode: Object = retrieval_mode,
    optional_fusion_method: Object = fusion_method,
    optional_profile_name: Object = profile_name,
    optional_issued_id: Object = issued_id,
    optional_memory_content: Object = memory_content,
    optional_pii_redaction: Object = pii_redaction,
    optional_recall_event_capture: Object = recall_event_capture,
    optional_eval_case_filters: Object = eval_case_filters,
    optional_categories: utoipa::openapi::schema::Array = categories,
    optional_client_vector: utoipa::openapi::schema::Array = client_vector,
    optional_expected_contents: utoipa::openapi::schema::Array = expected_contents,
    optional_expected_memory_ids: utoipa::openapi::schema::Array = expected_memory_ids,
    optional_end_user_token_scopes: utoipa::openapi::schema::Array = end_user_token_scopes,
);

/// The filter language's schema, published as the component `MemoryFilter` (AND, OR and NOT
/// refer to it again): the fields and operators `memory_filter::parse_memory_filter` takes.
pub struct MemoryFilterSchema;

impl utoipa::ToSchema for MemoryFilterSchema {
    fn name() -> std::borrow::Cow<'static, str> {
        std::borrow::Cow::Borrowed("MemoryFilter")
    }
}

impl utoipa::PartialSchema for MemoryFilterSchema {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        memory_filter_schema().into()
    }
}

/// The component `name`, or null: an optional field that is present as `null`.
pub fn component_or_null(name: &str) -> utoipa::openapi::schema::Schema {
    utoipa::openapi::schema::Schema::OneOf(
        utoipa::openapi::schema::OneOfBuilder::new()
            .item(utoipa::openapi::Ref::from_schema_name(name))
            .item(ObjectBuilder::new().schema_type(Type::Null))
            .build(),
    )
}

/// `filters` of a search, query or bulk delete: the `MemoryFilter` component, or null.
pub fn optional_memory_filter() -> utoipa::openapi::schema::Schema {
    component_or_null("MemoryFilter")
}

fn memory_filter_schema() -> Object {
    use crate::limits::{
        MAX_CATEGORY_CHARS, MAX_FILTER_LIST_ITEMS, MAX_FILTER_MEMORY_IDS, MAX_FILTER_VALUE_BYTES,
    };
    use utoipa::openapi::schema::{AdditionalProperties, ArrayBuilder, OneOfBuilder, Schema};
    use utoipa::openapi::{KnownFormat, Ref, RefOr, SchemaFormat};
    let closed = |builder: ObjectBuilder| -> Object {
        builder
            .schema_type(Type::Object)
            .min_properties(Some(1))
            .additional_properties(Some(AdditionalProperties::<Schema>::FreeForm(false)))
            .build()
    };
    let list = |item: RefOr<Schema>, most: usize| -> RefOr<Schema> {
        ArrayBuilder::new()
            .items(item)
            .min_items(Some(1))
            .max_items(Some(most))
            .build()
            .into()
    };
    let text = || -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .min_length(Some(1))
            .max_length(Some(MAX_FILTER_VALUE_BYTES))
            .build()
            .into()
    };
    let one_of = |items: Vec<RefOr<Schema>>| -> RefOr<Schema> {
        let mut builder = OneOfBuilder::new();
        for item in items {
            builder = builder.item(item);
        }
        RefOr::T(Schema::OneOf(builder.build()))
    };
    // A value, or an object of `eq`, `ne` and `in` over such values.
    let equality = |value: RefOr<Schema>| -> RefOr<Schema> {
        one_of(vec![
            value.clone(),
            closed(
                ObjectBuilder::new()
                    .property("eq", value.clone())
                    .property("ne", value.clone())
                    .property("in", list(value, MAX_FILTER_LIST_ITEMS)),
            )
            .into(),
        ])
    };
    let id: RefOr<Schema> = external_id().into();
    let moment: RefOr<Schema> = RefOr::T(Schema::OneOf(
        OneOfBuilder::new()
            .item(
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .format(Some(SchemaFormat::KnownFormat(KnownFormat::Date))),
            )
            .item(
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .format(Some(SchemaFormat::KnownFormat(KnownFormat::DateTime))),
            )
            .build(),
    ));
    let time = one_of(vec![
        moment.clone(),
        closed(
            ["eq", "ne", "gt", "gte", "lt", "lte"]
                .into_iter()
                .fold(ObjectBuilder::new(), |builder, operator| {
                    builder.property(operator, moment.clone())
                })
                .property("in", list(moment.clone(), MAX_FILTER_LIST_ITEMS)),
        )
        .into(),
    ]);
    let category: RefOr<Schema> = ObjectBuilder::new()
        .schema_type(Type::String)
        .min_length(Some(1))
        .max_length(Some(MAX_CATEGORY_CHARS))
        .build()
        .into();
    let scalar = one_of(vec![
        text(),
        ObjectBuilder::new()
            .schema_type(Type::Number)
            .build()
            .into(),
        ObjectBuilder::new()
            .schema_type(Type::Boolean)
            .build()
            .into(),
    ]);
    let metadata_condition = one_of(vec![
        scalar.clone(),
        closed(
            ObjectBuilder::new()
                .property("eq", scalar.clone())
                .property("ne", scalar.clone())
                .property("in", list(scalar, MAX_FILTER_LIST_ITEMS))
                .property("contains", text()),
        )
        .into(),
    ]);
    let confidence_bound: RefOr<Schema> = ObjectBuilder::new()
        .schema_type(Type::Number)
        .minimum(Some(0.0))
        .maximum(Some(1.0))
        .build()
        .into();
    let node: RefOr<Schema> = Ref::from_schema_name("MemoryFilter").into();
    let present_or_equal = |value: RefOr<Schema>| equality(value);
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .description(Some(
            "A tree of conditions: sibling keys are ANDed; AND and OR take 1–100 filters, NOT \
             one. At most 8 levels of AND/OR/NOT and 64 conditions and operators in all. A \
             bare value is equality; \"*\" on user_id, agent_id, session_id or app_id means \
             the field is set. Dates (YYYY-MM-DD) compare as whole UTC days.",
        ))
        .property("AND", list(node.clone(), MAX_FILTER_LIST_ITEMS))
        .property("OR", list(node.clone(), MAX_FILTER_LIST_ITEMS))
        .property("NOT", node)
        .property("user_id", present_or_equal(id.clone()))
        .property("agent_id", present_or_equal(id.clone()))
        .property("session_id", present_or_equal(id))
        .property("app_id", present_or_equal(text()))
        .property("kind", equality(memory_kind().into()))
        .property("source", equality(memory_source().into()))
        .property(
            "categories",
            one_of(vec![
                list(category.clone(), MAX_FILTER_LIST_ITEMS),
                closed(
                    ObjectBuilder::new()
                        .property("in", list(category.clone(), MAX_FILTER_LIST_ITEMS))
                        .property("all", list(category, MAX_FILTER_LIST_ITEMS))
                        .property("contains", text()),
                )
                .into(),
            ]),
        )
        .property(
            "confidence",
            closed(
                ["gt", "gte", "lt", "lte"]
                    .into_iter()
                    .fold(ObjectBuilder::new(), |builder, operator| {
                        builder.property(operator, confidence_bound.clone())
                    }),
            ),
        )
        .property(
            "metadata",
            ObjectBuilder::new()
                .schema_type(Type::Object)
                .min_properties(Some(1))
                .property_names(Some(
                    ObjectBuilder::new()
                        .schema_type(Type::String)
                        .min_length(Some(1))
                        .max_length(Some(MAX_EXTERNAL_ID_CHARS)),
                ))
                .additional_properties(Some(metadata_condition)),
        )
        .property(
            "memory_ids",
            list(
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .format(Some(SchemaFormat::KnownFormat(KnownFormat::Uuid)))
                    .build()
                    .into(),
                MAX_FILTER_MEMORY_IDS,
            ),
        )
        .property("created_at", time.clone())
        .property("updated_at", time.clone())
        .property("occurred_at", time)
        .property(
            "text",
            one_of(vec![
                text(),
                closed(
                    ObjectBuilder::new()
                        .property("contains", text())
                        .property("icontains", text()),
                )
                .into(),
            ]),
        )
        .property("created_after", moment.clone())
        .property("created_before", moment)
        .additional_properties(Some(AdditionalProperties::<Schema>::FreeForm(false)))
        .build()
}
