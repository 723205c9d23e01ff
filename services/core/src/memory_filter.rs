//! The one filter language of memories: an AND/OR/NOT tree of conditions on a memory's fields,
//! parsed from JSON with errors naming the bad node, and evaluated here in memory — the
//! reference the SQL (storage) and payload (index) translations are held to.

use crate::MemoryId;
use crate::limits::{
    MAX_CATEGORY_CHARS, MAX_EXTERNAL_ID_CHARS, MAX_FILTER_CONDITIONS, MAX_FILTER_DEPTH,
    MAX_FILTER_LIST_ITEMS, MAX_FILTER_MEMORY_IDS, MAX_FILTER_VALUE_BYTES, MAX_FILTER_VALUES,
};
use crate::memory::{Memory, MemoryKind, MemorySource};
use crate::validation::{ExternalId, FieldError};
use chrono::{DateTime, NaiveDate, NaiveDateTime, TimeZone, Utc};
use serde_json::{Value, json};

/// A tree of conditions on memories. `All(vec![])` matches every memory.
#[derive(Clone, Debug, PartialEq)]
pub enum MemoryFilter {
    /// Every child matches (AND).
    All(Vec<MemoryFilter>),
    /// At least one child matches (OR).
    Any(Vec<MemoryFilter>),
    /// The child does not match (NOT).
    Not(Box<MemoryFilter>),
    Condition(FilterCondition),
}

/// The subject fields a filter names; `AppId` is the `app_id` key of the metadata (Mem0's
/// fourth entity).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EntityField {
    UserId,
    AgentId,
    SessionId,
    AppId,
}

impl EntityField {
    pub const ALL: [EntityField; 4] = [Self::UserId, Self::AgentId, Self::SessionId, Self::AppId];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::UserId => "user_id",
            Self::AgentId => "agent_id",
            Self::SessionId => "session_id",
            Self::AppId => "app_id",
        }
    }

    /// The memory's value of this field (`app_id`: the metadata's, when it is text).
    pub fn value_of(self, memory: &Memory) -> Option<&str> {
        match self {
            Self::UserId => memory.user_id.as_ref().map(ExternalId::as_str),
            Self::AgentId => memory.agent_id.as_ref().map(ExternalId::as_str),
            Self::SessionId => memory.session_id.as_ref().map(ExternalId::as_str),
            Self::AppId => memory.metadata.get(APP_ID_METADATA_KEY)?.as_str(),
        }
    }
}

/// The metadata key that holds a memory's application (`app_id`).
pub const APP_ID_METADATA_KEY: &str = "app_id";

#[derive(Clone, Debug, PartialEq)]
pub enum EntityTest {
    /// The field holds one of these values (one value: equality).
    In(Vec<String>),
    /// The field holds any value (`"*"`).
    Present,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TimeField {
    CreatedAt,
    UpdatedAt,
    /// The time the memory is about (event time).
    OccurredAt,
}

impl TimeField {
    pub const ALL: [TimeField; 3] = [Self::CreatedAt, Self::UpdatedAt, Self::OccurredAt];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::CreatedAt => "created_at",
            Self::UpdatedAt => "updated_at",
            Self::OccurredAt => "occurred_at",
        }
    }

    pub fn value_of(self, memory: &Memory) -> DateTime<Utc> {
        match self {
            Self::CreatedAt => memory.created_at,
            Self::UpdatedAt => memory.updated_at,
            Self::OccurredAt => memory.occurred_at,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Comparison {
    Gt,
    Gte,
    Lt,
    Lte,
}

impl Comparison {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Gt => "gt",
            Self::Gte => "gte",
            Self::Lt => "lt",
            Self::Lte => "lte",
        }
    }

    pub fn holds<T: PartialOrd>(self, value: T, bound: T) -> bool {
        match self {
            Self::Gt => value > bound,
            Self::Gte => value >= bound,
            Self::Lt => value < bound,
            Self::Lte => value <= bound,
        }
    }
}

/// A metadata value a filter compares with: scalars only.
#[derive(Clone, Debug, PartialEq)]
pub enum ScalarValue {
    Text(String),
    Number(f64),
    Bool(bool),
}

impl ScalarValue {
    /// Numbers compare by value (`1` equals `1.0`), everything else by kind and value.
    pub fn equals(&self, value: &Value) -> bool {
        match (self, value) {
            (Self::Text(wanted), Value::String(found)) => wanted == found,
            (Self::Number(wanted), Value::Number(found)) => found.as_f64() == Some(*wanted),
            (Self::Bool(wanted), Value::Bool(found)) => wanted == found,
            _ => false,
        }
    }

    pub fn to_json(&self) -> Value {
        match self {
            Self::Text(text) => Value::String(text.clone()),
            Self::Number(number) => json!(number),
            Self::Bool(flag) => Value::Bool(*flag),
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum MetadataTest {
    /// The key holds one of these values (one value: equality).
    In(Vec<ScalarValue>),
    /// The key holds text containing this (ASCII case folded) text.
    Contains(String),
}

/// One condition on one field of a memory.
#[derive(Clone, Debug, PartialEq)]
pub enum FilterCondition {
    Entity {
        field: EntityField,
        test: EntityTest,
    },
    /// The memory is of one of these kinds.
    Kind(Vec<MemoryKind>),
    /// The memory came from one of these sources.
    Source(Vec<MemorySource>),
    /// The memory carries at least one of these categories.
    CategoriesAny(Vec<String>),
    /// The memory carries every one of these categories.
    CategoriesAll(Vec<String>),
    /// One of the memory's categories contains this text (ASCII case folded).
    CategoryContains(String),
    Confidence {
        comparison: Comparison,
        value: f64,
    },
    Metadata {
        key: String,
        test: MetadataTest,
    },
    /// The memory is one of these.
    MemoryIds(Vec<MemoryId>),
    Time {
        field: TimeField,
        comparison: Comparison,
        at: DateTime<Utc>,
    },
    /// The content contains this text exactly (case-sensitive).
    TextContains(String),
    /// The content contains this text, ASCII letters compared case-insensitively (the text
    /// is kept folded).
    TextContainsFolded(String),
}

/// Lowercases ASCII letters only, the same way every evaluator does (SQL engines disagree on
/// Unicode case folding, so none of them is used for it).
pub fn fold_case(text: &str) -> String {
    text.to_ascii_lowercase()
}

impl Default for MemoryFilter {
    fn default() -> Self {
        Self::everything()
    }
}

impl MemoryFilter {
    /// The filter that lets every memory through.
    pub fn everything() -> Self {
        Self::All(Vec::new())
    }

    pub fn is_everything(&self) -> bool {
        matches!(self, Self::All(children) if children.is_empty())
    }

    /// Both this filter and `other`.
    pub fn and(self, other: MemoryFilter) -> Self {
        match (self, other) {
            (left, right) if left.is_everything() => right,
            (left, right) if right.is_everything() => left,
            (Self::All(mut children), right) => {
                children.push(right);
                Self::All(children)
            }
            (left, right) => Self::All(vec![left, right]),
        }
    }

    pub fn condition(condition: FilterCondition) -> Self {
        Self::Condition(condition)
    }

    /// `field` equals `value`.
    pub fn entity_equals(field: EntityField, value: &str) -> Self {
        Self::Condition(FilterCondition::Entity {
            field,
            test: EntityTest::In(vec![value.to_string()]),
        })
    }

    /// The filter that lets no memory through.
    pub fn nothing() -> Self {
        Self::Not(Box::default())
    }

    pub fn is_nothing(&self) -> bool {
        matches!(self, Self::Not(child) if child.is_everything())
    }

    /// The same filter without what cannot change its answer: conditions that are always
    /// true inside AND, always false inside OR, nested ANDs and ORs flattened, double NOT
    /// removed. A tree that matches everything is then `everything()` whatever its shape
    /// (`{"AND": [{}]}`), so a door can tell an empty filter apart.
    pub fn simplified(self) -> Self {
        match self {
            Self::All(children) => {
                let mut kept = Vec::with_capacity(children.len());
                for child in children {
                    let child = child.simplified();
                    if child.is_everything() {
                        continue;
                    }
                    if child.is_nothing() {
                        return Self::nothing();
                    }
                    match child {
                        Self::All(grandchildren) => kept.extend(grandchildren),
                        other => kept.push(other),
                    }
                }
                match kept.len() {
                    1 => kept.pop().unwrap_or_else(Self::everything),
                    _ => Self::All(kept),
                }
            }
            Self::Any(children) => {
                let mut kept = Vec::with_capacity(children.len());
                for child in children {
                    let child = child.simplified();
                    if child.is_everything() {
                        return Self::everything();
                    }
                    if child.is_nothing() {
                        continue;
                    }
                    match child {
                        Self::Any(grandchildren) => kept.extend(grandchildren),
                        other => kept.push(other),
                    }
                }
                match kept.len() {
                    0 => Self::nothing(),
                    1 => kept.pop().unwrap_or_else(Self::nothing),
                    _ => Self::Any(kept),
                }
            }
            Self::Not(child) => match child.simplified() {
                Self::Not(inner) => *inner,
                other => Self::Not(Box::new(other)),
            },
            condition @ Self::Condition(_) => condition,
        }
    }

    /// Whether the filter tests what only a reader of content may learn: the text, or the
    /// metadata (an application id included). Counting its matches would otherwise reveal
    /// content to a credential that may not read it.
    pub fn reads_content(&self) -> bool {
        self.conditions().into_iter().any(|condition| {
            matches!(
                condition,
                FilterCondition::TextContains(_)
                    | FilterCondition::TextContainsFolded(_)
                    | FilterCondition::Metadata { .. }
                    | FilterCondition::Entity {
                        field: EntityField::AppId,
                        ..
                    }
            )
        })
    }

    /// Does `memory` pass? The reference every other evaluation agrees with.
    pub fn matches(&self, memory: &Memory) -> bool {
        match self {
            Self::All(children) => children.iter().all(|child| child.matches(memory)),
            Self::Any(children) => children.iter().any(|child| child.matches(memory)),
            Self::Not(child) => !child.matches(memory),
            Self::Condition(condition) => condition.matches(memory),
        }
    }

    /// Every condition of the tree, depth first.
    pub fn conditions(&self) -> Vec<&FilterCondition> {
        let mut found = Vec::new();
        self.collect_conditions(&mut found);
        found
    }

    fn collect_conditions<'a>(&'a self, found: &mut Vec<&'a FilterCondition>) {
        match self {
            Self::All(children) | Self::Any(children) => {
                for child in children {
                    child.collect_conditions(found);
                }
            }
            Self::Not(child) => child.collect_conditions(found),
            Self::Condition(condition) => found.push(condition),
        }
    }

    /// The canonical JSON form; [`parse_memory_filter`] reads it back to an equal filter.
    pub fn to_json(&self) -> Value {
        match self {
            Self::All(children) if children.is_empty() => json!({}),
            Self::All(children) => {
                json!({"AND": children.iter().map(Self::to_json).collect::<Vec<_>>()})
            }
            Self::Any(children) => {
                json!({"OR": children.iter().map(Self::to_json).collect::<Vec<_>>()})
            }
            Self::Not(child) => json!({"NOT": child.to_json()}),
            Self::Condition(condition) => condition.to_json(),
        }
    }
}

impl FilterCondition {
    pub fn matches(&self, memory: &Memory) -> bool {
        match self {
            Self::Entity { field, test } => {
                let value = field.value_of(memory);
                match test {
                    EntityTest::Present => value.is_some(),
                    EntityTest::In(wanted) => {
                        value.is_some_and(|value| wanted.iter().any(|wanted| wanted == value))
                    }
                }
            }
            Self::Kind(kinds) => kinds.contains(&memory.kind),
            Self::Source(sources) => sources.contains(&memory.source),
            Self::CategoriesAny(wanted) => memory
                .categories
                .iter()
                .any(|category| wanted.contains(category)),
            Self::CategoriesAll(wanted) => wanted
                .iter()
                .all(|category| memory.categories.contains(category)),
            Self::CategoryContains(folded) => memory
                .categories
                .iter()
                .any(|category| fold_case(category).contains(folded.as_str())),
            Self::Confidence { comparison, value } => comparison.holds(memory.confidence, *value),
            Self::Metadata { key, test } => {
                let Some(found) = memory.metadata.get(key) else {
                    return false;
                };
                match test {
                    MetadataTest::In(wanted) => wanted.iter().any(|wanted| wanted.equals(found)),
                    MetadataTest::Contains(folded) => found
                        .as_str()
                        .is_some_and(|text| fold_case(text).contains(folded.as_str())),
                }
            }
            Self::MemoryIds(ids) => ids.contains(&memory.id),
            Self::Time {
                field,
                comparison,
                at,
            } => comparison.holds(field.value_of(memory), *at),
            Self::TextContains(text) => memory.content.contains(text.as_str()),
            Self::TextContainsFolded(folded) => {
                fold_case(&memory.content).contains(folded.as_str())
            }
        }
    }

    fn to_json(&self) -> Value {
        match self {
            Self::Entity { field, test } => {
                let value = match test {
                    EntityTest::Present => json!("*"),
                    EntityTest::In(values) => json!({"in": values}),
                };
                json!({ field.as_str(): value })
            }
            Self::Kind(kinds) => {
                json!({"kind": {"in": kinds.iter().map(MemoryKind::as_str).collect::<Vec<_>>()}})
            }
            Self::Source(sources) => json!({"source": {"in": sources
                .iter()
                .map(MemorySource::as_str)
                .collect::<Vec<_>>()}}),
            Self::CategoriesAny(categories) => json!({"categories": {"in": categories}}),
            Self::CategoriesAll(categories) => json!({"categories": {"all": categories}}),
            Self::CategoryContains(text) => json!({"categories": {"contains": text}}),
            Self::Confidence { comparison, value } => {
                json!({"confidence": { comparison.as_str(): value }})
            }
            Self::Metadata { key, test } => {
                let test = match test {
                    MetadataTest::In(values) => {
                        json!({"in": values.iter().map(ScalarValue::to_json).collect::<Vec<_>>()})
                    }
                    MetadataTest::Contains(text) => json!({"contains": text}),
                };
                json!({"metadata": { key: test }})
            }
            Self::MemoryIds(ids) => json!({"memory_ids": ids}),
            Self::Time {
                field,
                comparison,
                at,
            } => {
                json!({ field.as_str(): { comparison.as_str(): at.to_rfc3339_opts(chrono::SecondsFormat::Micros, true) } })
            }
            Self::TextContains(text) => json!({"text": {"contains": text}}),
            Self::TextContainsFolded(text) => json!({"text": {"icontains": text}}),
        }
    }
}

/// The field names a filter object may hold, for error messages.
pub const FILTER_FIELDS: &[&str] = &[
    "AND",
    "OR",
    "NOT",
    "user_id",
    "agent_id",
    "session_id",
    "app_id",
    "kind",
    "source",
    "categories",
    "confidence",
    "metadata",
    "memory_ids",
    "created_at",
    "updated_at",
    "occurred_at",
    "text",
    "created_after",
    "created_before",
];

/// Parse a filter from JSON; `path` names its place in the request (`filters`), and every
/// error names the bad node under it (`filters.AND[1].metadata.topic`). `null` is no filter.
pub fn parse_memory_filter(value: &Value, path: &str) -> Result<MemoryFilter, Vec<FieldError>> {
    let mut parser = FilterParser::default();
    let filter = match value {
        Value::Null => MemoryFilter::everything(),
        value => parser.node(value, path, 1),
    };
    if parser.nodes > MAX_FILTER_CONDITIONS {
        parser.errors.insert(
            0,
            FieldError::new(
                path,
                format!(
                    "holds {} conditions and operators; at most {MAX_FILTER_CONDITIONS}",
                    parser.nodes
                ),
            ),
        );
    }
    if parser.errors.is_empty() {
        Ok(filter.simplified())
    } else {
        parser.errors.truncate(MAX_REPORTED_ERRORS);
        Err(parser.errors)
    }
}

/// An invalid filter reports at most this many errors.
const MAX_REPORTED_ERRORS: usize = 20;

#[derive(Default)]
struct FilterParser {
    errors: Vec<FieldError>,
    nodes: usize,
    /// Values of every `in` / `all` list so far.
    values: usize,
}

impl FilterParser {
    fn fail(&mut self, path: &str, message: impl Into<String>) -> MemoryFilter {
        self.errors.push(FieldError::new(path, message));
        MemoryFilter::everything()
    }

    /// Stop descending once the tree is over its size: the error is already certain.
    fn too_large(&self) -> bool {
        self.nodes > MAX_FILTER_CONDITIONS || self.errors.len() >= MAX_REPORTED_ERRORS
    }

    fn count_node(&mut self) {
        self.nodes += 1;
    }

    /// A filter object: its keys are ANDed.
    fn node(&mut self, value: &Value, path: &str, depth: usize) -> MemoryFilter {
        if depth > MAX_FILTER_DEPTH {
            return self.fail(
                path,
                format!("AND, OR and NOT nest at most {MAX_FILTER_DEPTH} deep"),
            );
        }
        let Value::Object(fields) = value else {
            return self.fail(path, "must be an object of conditions");
        };
        // An empty object is no condition: it lets every memory through (and still counts
        // toward the size limit, so a list of them cannot grow without bound).
        if fields.is_empty() {
            self.count_node();
        }
        let mut parts = Vec::with_capacity(fields.len());
        for (key, value) in fields {
            if self.too_large() {
                break;
            }
            let field_path = format!("{path}.{key}");
            parts.push(self.field(key, value, &field_path, depth));
        }
        if parts.len() == 1 {
            parts.pop().unwrap_or_else(MemoryFilter::everything)
        } else {
            MemoryFilter::All(parts)
        }
    }

    fn field(&mut self, key: &str, value: &Value, path: &str, depth: usize) -> MemoryFilter {
        match key {
            "AND" | "OR" => {
                self.count_node();
                let Value::Array(children) = value else {
                    return self.fail(path, "must be an array of conditions");
                };
                if children.is_empty() || children.len() > MAX_FILTER_LIST_ITEMS {
                    return self.fail(
                        path,
                        format!("must hold 1–{MAX_FILTER_LIST_ITEMS} conditions"),
                    );
                }
                let mut parsed = Vec::with_capacity(children.len());
                for (position, child) in children.iter().enumerate() {
                    if self.too_large() {
                        break;
                    }
                    parsed.push(self.node(child, &format!("{path}[{position}]"), depth + 1));
                }
                if key == "AND" {
                    MemoryFilter::All(parsed)
                } else {
                    MemoryFilter::Any(parsed)
                }
            }
            "NOT" => {
                self.count_node();
                // One condition object; an array (as some clients send) is NOT of their AND.
                let inner = match value {
                    Value::Array(children)
                        if children.is_empty() || children.len() > MAX_FILTER_LIST_ITEMS =>
                    {
                        return self.fail(
                            path,
                            format!("must hold 1–{MAX_FILTER_LIST_ITEMS} conditions"),
                        );
                    }
                    Value::Array(children) => {
                        let mut parsed = Vec::with_capacity(children.len());
                        for (position, child) in children.iter().enumerate() {
                            if self.too_large() {
                                break;
                            }
                            parsed.push(self.node(
                                child,
                                &format!("{path}[{position}]"),
                                depth + 1,
                            ));
                        }
                        MemoryFilter::All(parsed)
                    }
                    Value::Object(_) => self.node(value, path, depth + 1),
                    _ => return self.fail(path, "must be one object of conditions"),
                };
                MemoryFilter::Not(Box::new(inner))
            }
            "user_id" => self.entity(EntityField::UserId, value, path),
            "agent_id" => self.entity(EntityField::AgentId, value, path),
            "session_id" => self.entity(EntityField::SessionId, value, path),
            "app_id" => self.entity(EntityField::AppId, value, path),
            "kind" => self.enumeration(value, path, FilterCondition::Kind),
            "source" => self.enumeration(value, path, FilterCondition::Source),
            "categories" => self.categories(value, path),
            "confidence" => self.confidence(value, path),
            "metadata" => self.metadata(value, path),
            "memory_ids" => self.memory_ids(value, path),
            "created_at" => self.time(TimeField::CreatedAt, value, path),
            "updated_at" => self.time(TimeField::UpdatedAt, value, path),
            "occurred_at" => self.time(TimeField::OccurredAt, value, path),
            // The flat search filters of earlier versions: at or after, and before.
            "created_after" => self.time_bound(TimeField::CreatedAt, Comparison::Gte, value, path),
            "created_before" => self.time_bound(TimeField::CreatedAt, Comparison::Lt, value, path),
            "text" => self.text(value, path),
            other => {
                self.count_node();
                self.fail(
                    path,
                    format!(
                        "unknown filter field {other:?}; expected one of: {}",
                        FILTER_FIELDS.join(", ")
                    ),
                )
            }
        }
    }

    /// The operators of a condition object, each checked against `allowed`; a bare value
    /// is `bare_as`.
    fn operators<'a>(
        &mut self,
        value: &'a Value,
        path: &str,
        allowed: &[&str],
        bare_as: Option<&'static str>,
    ) -> Vec<(String, &'a Value)> {
        match (value, bare_as) {
            (Value::Object(operators), _) => {
                if operators.is_empty() {
                    self.errors.push(FieldError::new(
                        path,
                        format!("must hold one of the operators {}", allowed.join(", ")),
                    ));
                    return Vec::new();
                }
                let mut found = Vec::new();
                for (operator, operand) in operators {
                    if allowed.contains(&operator.as_str()) {
                        found.push((operator.clone(), operand));
                    } else {
                        self.errors.push(FieldError::new(
                            format!("{path}.{operator}"),
                            format!(
                                "unknown operator {operator:?} here; expected one of: {}",
                                allowed.join(", ")
                            ),
                        ));
                    }
                }
                found
            }
            (_, Some(bare)) => vec![(bare.to_string(), value)],
            (_, None) => {
                self.errors.push(FieldError::new(
                    path,
                    format!("must be an object of operators ({})", allowed.join(", ")),
                ));
                Vec::new()
            }
        }
    }

    /// Combine the conditions of one field (several operators are ANDed).
    fn combine(parts: Vec<MemoryFilter>) -> MemoryFilter {
        match parts.len() {
            1 => parts
                .into_iter()
                .next()
                .unwrap_or_else(MemoryFilter::everything),
            _ => MemoryFilter::All(parts),
        }
    }

    fn text_value(&mut self, value: &Value, path: &str) -> Option<String> {
        match value {
            Value::String(text) if text.is_empty() => {
                self.errors.push(FieldError::new(path, "must not be empty"));
                None
            }
            Value::String(text) if text.len() > MAX_FILTER_VALUE_BYTES => {
                self.errors.push(FieldError::new(
                    path,
                    format!("must be at most {MAX_FILTER_VALUE_BYTES} bytes"),
                ));
                None
            }
            Value::String(text) => Some(text.clone()),
            _ => {
                self.errors.push(FieldError::new(path, "must be a string"));
                None
            }
        }
    }

    fn list<'a>(&mut self, value: &'a Value, path: &str, most: usize) -> Option<&'a [Value]> {
        match value {
            Value::Array(items) if !items.is_empty() && items.len() <= most => {
                self.values += items.len();
                if self.values > MAX_FILTER_VALUES {
                    self.errors.push(FieldError::new(
                        path,
                        format!("a filter holds at most {MAX_FILTER_VALUES} listed values in all"),
                    ));
                    return None;
                }
                Some(items)
            }
            Value::Array(_) => {
                self.errors
                    .push(FieldError::new(path, format!("must hold 1–{most} values")));
                None
            }
            _ => {
                self.errors.push(FieldError::new(path, "must be an array"));
                None
            }
        }
    }

    fn entity(&mut self, field: EntityField, value: &Value, path: &str) -> MemoryFilter {
        self.count_node();
        let parse_id = |parser: &mut Self, value: &Value, path: &str| -> Option<String> {
            let text = parser.text_value(value, path)?;
            if field == EntityField::AppId {
                return Some(text);
            }
            match ExternalId::parse(&text) {
                Ok(id) => Some(id.into_string()),
                Err(message) => {
                    parser.errors.push(FieldError::new(path, message));
                    None
                }
            }
        };
        if value.as_str() == Some("*") {
            return MemoryFilter::Condition(FilterCondition::Entity {
                field,
                test: EntityTest::Present,
            });
        }
        let mut parts = Vec::new();
        for (operator, operand) in self.operators(value, path, &["eq", "ne", "in"], Some("eq")) {
            let operand_path = if value.is_object() {
                format!("{path}.{operator}")
            } else {
                path.to_string()
            };
            let values = if operator == "in" {
                let Some(items) = self.list(operand, &operand_path, MAX_FILTER_LIST_ITEMS) else {
                    continue;
                };
                let mut values = Vec::with_capacity(items.len());
                for (position, item) in items.iter().enumerate() {
                    if let Some(id) = parse_id(self, item, &format!("{operand_path}[{position}]")) {
                        values.push(id);
                    }
                }
                values
            } else {
                match parse_id(self, operand, &operand_path) {
                    Some(id) => vec![id],
                    None => continue,
                }
            };
            let condition = MemoryFilter::Condition(FilterCondition::Entity {
                field,
                test: EntityTest::In(values),
            });
            parts.push(if operator == "ne" {
                MemoryFilter::Not(Box::new(condition))
            } else {
                condition
            });
        }
        Self::combine(parts)
    }

    fn enumeration<T: std::str::FromStr<Err = String>>(
        &mut self,
        value: &Value,
        path: &str,
        build: impl Fn(Vec<T>) -> FilterCondition,
    ) -> MemoryFilter {
        self.count_node();
        let mut parts = Vec::new();
        for (operator, operand) in self.operators(value, path, &["eq", "ne", "in"], Some("eq")) {
            let operand_path = if value.is_object() {
                format!("{path}.{operator}")
            } else {
                path.to_string()
            };
            let items: Vec<(String, &Value)> = if operator == "in" {
                let Some(items) = self.list(operand, &operand_path, MAX_FILTER_LIST_ITEMS) else {
                    continue;
                };
                items
                    .iter()
                    .enumerate()
                    .map(|(position, item)| (format!("{operand_path}[{position}]"), item))
                    .collect()
            } else {
                vec![(operand_path.clone(), operand)]
            };
            let mut values = Vec::with_capacity(items.len());
            for (item_path, item) in items {
                let Some(text) = item.as_str() else {
                    self.errors
                        .push(FieldError::new(item_path, "must be a string"));
                    continue;
                };
                match text.parse::<T>() {
                    Ok(parsed) => values.push(parsed),
                    Err(message) => self.errors.push(FieldError::new(item_path, message)),
                }
            }
            let condition = MemoryFilter::Condition(build(values));
            parts.push(if operator == "ne" {
                MemoryFilter::Not(Box::new(condition))
            } else {
                condition
            });
        }
        Self::combine(parts)
    }

    fn category_list(&mut self, value: &Value, path: &str) -> Vec<String> {
        let Some(items) = self.list(value, path, MAX_FILTER_LIST_ITEMS) else {
            return Vec::new();
        };
        let mut categories = Vec::with_capacity(items.len());
        for (position, item) in items.iter().enumerate() {
            let item_path = format!("{path}[{position}]");
            match item.as_str() {
                Some(text) if !text.is_empty() && text.chars().count() <= MAX_CATEGORY_CHARS => {
                    categories.push(text.to_string());
                }
                _ => self.errors.push(FieldError::new(
                    item_path,
                    format!("must be a category of 1–{MAX_CATEGORY_CHARS} characters"),
                )),
            }
        }
        categories
    }

    fn categories(&mut self, value: &Value, path: &str) -> MemoryFilter {
        self.count_node();
        if value.is_array() {
            let categories = self.category_list(value, path);
            return MemoryFilter::Condition(FilterCondition::CategoriesAny(categories));
        }
        let mut parts = Vec::new();
        for (operator, operand) in self.operators(value, path, &["in", "all", "contains"], None) {
            let operand_path = format!("{path}.{operator}");
            let condition = match operator.as_str() {
                "in" => FilterCondition::CategoriesAny(self.category_list(operand, &operand_path)),
                "all" => FilterCondition::CategoriesAll(self.category_list(operand, &operand_path)),
                _ => match self.text_value(operand, &operand_path) {
                    Some(text) => FilterCondition::CategoryContains(fold_case(&text)),
                    None => continue,
                },
            };
            parts.push(MemoryFilter::Condition(condition));
        }
        Self::combine(parts)
    }

    fn confidence(&mut self, value: &Value, path: &str) -> MemoryFilter {
        self.count_node();
        let mut parts = Vec::new();
        for (operator, operand) in self.operators(value, path, &["gt", "gte", "lt", "lte"], None) {
            let operand_path = format!("{path}.{operator}");
            let Some(bound) = operand.as_f64().filter(|bound| (0.0..=1.0).contains(bound)) else {
                self.errors.push(FieldError::new(
                    operand_path,
                    "must be a number from 0 to 1",
                ));
                continue;
            };
            parts.push(MemoryFilter::Condition(FilterCondition::Confidence {
                comparison: comparison_named(&operator),
                value: bound,
            }));
        }
        Self::combine(parts)
    }

    fn scalar(&mut self, value: &Value, path: &str) -> Option<ScalarValue> {
        match value {
            Value::String(_) => self.text_value(value, path).map(ScalarValue::Text),
            Value::Number(number) => number.as_f64().map(ScalarValue::Number),
            Value::Bool(flag) => Some(ScalarValue::Bool(*flag)),
            _ => {
                self.errors.push(FieldError::new(
                    path,
                    "must be a string, a number or a boolean (nested values and null cannot be compared)",
                ));
                None
            }
        }
    }

    fn metadata(&mut self, value: &Value, path: &str) -> MemoryFilter {
        let Value::Object(keys) = value else {
            self.count_node();
            return self.fail(path, "must be an object of metadata keys and conditions");
        };
        if keys.is_empty() {
            self.count_node();
            return self.fail(path, "must hold at least one metadata key");
        }
        let mut parts = Vec::new();
        for (key, condition) in keys {
            self.count_node();
            if self.too_large() {
                break;
            }
            let key_path = format!("{path}.{}", key.chars().take(64).collect::<String>());
            if key.is_empty() || key.chars().count() > MAX_EXTERNAL_ID_CHARS {
                self.errors.push(FieldError::new(
                    key_path,
                    format!("a metadata key has 1–{MAX_EXTERNAL_ID_CHARS} characters"),
                ));
                continue;
            }
            for (operator, operand) in self.operators(
                condition,
                &key_path,
                &["eq", "ne", "in", "contains"],
                Some("eq"),
            ) {
                let operand_path = if condition.is_object() {
                    format!("{key_path}.{operator}")
                } else {
                    key_path.clone()
                };
                let test = match operator.as_str() {
                    "in" => {
                        let Some(items) = self.list(operand, &operand_path, MAX_FILTER_LIST_ITEMS)
                        else {
                            continue;
                        };
                        let mut values = Vec::with_capacity(items.len());
                        for (position, item) in items.iter().enumerate() {
                            if let Some(scalar) =
                                self.scalar(item, &format!("{operand_path}[{position}]"))
                            {
                                values.push(scalar);
                            }
                        }
                        MetadataTest::In(values)
                    }
                    "contains" => match self.text_value(operand, &operand_path) {
                        Some(text) => MetadataTest::Contains(fold_case(&text)),
                        None => continue,
                    },
                    _ => match self.scalar(operand, &operand_path) {
                        Some(scalar) => MetadataTest::In(vec![scalar]),
                        None => continue,
                    },
                };
                let condition = MemoryFilter::Condition(FilterCondition::Metadata {
                    key: key.clone(),
                    test,
                });
                parts.push(if operator == "ne" {
                    MemoryFilter::Not(Box::new(condition))
                } else {
                    condition
                });
            }
        }
        Self::combine(parts)
    }

    fn memory_ids(&mut self, value: &Value, path: &str) -> MemoryFilter {
        self.count_node();
        let (items_value, items_path) = match value {
            Value::Object(operators) if operators.len() == 1 && operators.contains_key("in") => {
                (&operators["in"], format!("{path}.in"))
            }
            _ => (value, path.to_string()),
        };
        let Some(items) = self.list(items_value, &items_path, MAX_FILTER_MEMORY_IDS) else {
            return MemoryFilter::everything();
        };
        let mut ids = Vec::with_capacity(items.len());
        for (position, item) in items.iter().enumerate() {
            match item.as_str().map(str::parse::<MemoryId>) {
                Some(Ok(id)) => ids.push(id),
                _ => self.errors.push(FieldError::new(
                    format!("{items_path}[{position}]"),
                    "must be a memory id (a UUID)",
                )),
            }
        }
        MemoryFilter::Condition(FilterCondition::MemoryIds(ids))
    }

    fn time(&mut self, field: TimeField, value: &Value, path: &str) -> MemoryFilter {
        self.count_node();
        let mut parts = Vec::new();
        for (operator, operand) in self.operators(
            value,
            path,
            &["eq", "ne", "gt", "gte", "lt", "lte", "in"],
            Some("eq"),
        ) {
            let operand_path = if value.is_object() {
                format!("{path}.{operator}")
            } else {
                path.to_string()
            };
            if operator == "in" {
                let Some(items) = self.list(operand, &operand_path, MAX_FILTER_LIST_ITEMS) else {
                    continue;
                };
                let mut any = Vec::with_capacity(items.len());
                for (position, item) in items.iter().enumerate() {
                    if let Some(moment) = self.moment(item, &format!("{operand_path}[{position}]"))
                    {
                        any.push(moment.equal(field));
                    }
                }
                parts.push(MemoryFilter::Any(any));
                continue;
            }
            let Some(moment) = self.moment(operand, &operand_path) else {
                continue;
            };
            parts.push(match operator.as_str() {
                "eq" => moment.equal(field),
                "ne" => MemoryFilter::Not(Box::new(moment.equal(field))),
                other => moment.compared(field, comparison_named(other)),
            });
        }
        Self::combine(parts)
    }

    fn time_bound(
        &mut self,
        field: TimeField,
        comparison: Comparison,
        value: &Value,
        path: &str,
    ) -> MemoryFilter {
        self.count_node();
        match self.moment(value, path) {
            Some(moment) => moment.compared(field, comparison),
            None => MemoryFilter::everything(),
        }
    }

    fn moment(&mut self, value: &Value, path: &str) -> Option<Moment> {
        let Some(text) = value.as_str() else {
            self.errors.push(FieldError::new(
                path,
                "must be a date (YYYY-MM-DD) or an RFC 3339 time",
            ));
            return None;
        };
        match parse_moment(text) {
            Some(moment) => Some(moment),
            None => {
                self.errors.push(FieldError::new(
                    path,
                    format!("{text:?} is neither a date (YYYY-MM-DD) nor an RFC 3339 time"),
                ));
                None
            }
        }
    }

    fn text(&mut self, value: &Value, path: &str) -> MemoryFilter {
        self.count_node();
        let mut parts = Vec::new();
        for (operator, operand) in
            self.operators(value, path, &["contains", "icontains"], Some("icontains"))
        {
            let operand_path = if value.is_object() {
                format!("{path}.{operator}")
            } else {
                path.to_string()
            };
            let Some(text) = self.text_value(operand, &operand_path) else {
                continue;
            };
            parts.push(MemoryFilter::Condition(if operator == "contains" {
                FilterCondition::TextContains(text)
            } else {
                FilterCondition::TextContainsFolded(fold_case(&text))
            }));
        }
        Self::combine(parts)
    }
}

fn comparison_named(operator: &str) -> Comparison {
    match operator {
        "gt" => Comparison::Gt,
        "gte" => Comparison::Gte,
        "lt" => Comparison::Lt,
        _ => Comparison::Lte,
    }
}

/// A time a filter names: an instant, or a whole UTC day.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Moment {
    Instant(DateTime<Utc>),
    /// From the first instant of the day (inclusive) to the next day's (exclusive).
    Day {
        start: DateTime<Utc>,
        next: DateTime<Utc>,
    },
}

impl Moment {
    fn condition(field: TimeField, comparison: Comparison, at: DateTime<Utc>) -> MemoryFilter {
        MemoryFilter::Condition(FilterCondition::Time {
            field,
            comparison,
            at,
        })
    }

    /// At this instant, or within this day.
    fn equal(self, field: TimeField) -> MemoryFilter {
        let (from, to_comparison, to) = match self {
            Moment::Instant(at) => (at, Comparison::Lte, at),
            Moment::Day { start, next } => (start, Comparison::Lt, next),
        };
        MemoryFilter::All(vec![
            Self::condition(field, Comparison::Gte, from),
            Self::condition(field, to_comparison, to),
        ])
    }

    /// A day compares as a whole: after it is from the next day on, up to it includes it.
    fn compared(self, field: TimeField, comparison: Comparison) -> MemoryFilter {
        match self {
            Moment::Instant(at) => Self::condition(field, comparison, at),
            Moment::Day { start, next } => match comparison {
                Comparison::Gt => Self::condition(field, Comparison::Gte, next),
                Comparison::Gte => Self::condition(field, Comparison::Gte, start),
                Comparison::Lt => Self::condition(field, Comparison::Lt, start),
                Comparison::Lte => Self::condition(field, Comparison::Lt, next),
            },
        }
    }
}

/// Microseconds are what every store keeps (storage truncates what it writes to them); finer
/// digits would compare differently.
pub fn to_micros(at: DateTime<Utc>) -> DateTime<Utc> {
    let micros = at.timestamp_micros();
    DateTime::from_timestamp_micros(micros).unwrap_or(at)
}

/// Years every store and RFC 3339 can write (four digits).
fn writable(at: DateTime<Utc>) -> Option<DateTime<Utc>> {
    use chrono::Datelike;
    (1..=9999).contains(&at.year()).then_some(at)
}

fn parse_moment(text: &str) -> Option<Moment> {
    let moment = parse_any_moment(text)?;
    match moment {
        Moment::Instant(at) => writable(at).map(Moment::Instant),
        Moment::Day { start, next } => Some(Moment::Day {
            start: writable(start)?,
            next: writable(next)?,
        }),
    }
}

fn parse_any_moment(text: &str) -> Option<Moment> {
    if let Ok(day) = NaiveDate::parse_from_str(text, "%Y-%m-%d") {
        let start = Utc.from_utc_datetime(&day.and_hms_opt(0, 0, 0)?);
        let next = Utc.from_utc_datetime(&day.succ_opt()?.and_hms_opt(0, 0, 0)?);
        return Some(Moment::Day { start, next });
    }
    if let Ok(at) = DateTime::parse_from_rfc3339(text) {
        return Some(Moment::Instant(to_micros(at.with_timezone(&Utc))));
    }
    // An ISO time without a zone is UTC.
    for format in [
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%dT%H:%M:%S",
        "%Y-%m-%d %H:%M:%S",
    ] {
        if let Ok(at) = NaiveDateTime::parse_from_str(text, format) {
            return Some(Moment::Instant(to_micros(Utc.from_utc_datetime(&at))));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{OrganizationId, ProjectId};
    use crate::memory::MemoryState;

    fn memory() -> Memory {
        let at = Utc.with_ymd_and_hms(2024, 7, 15, 12, 0, 0).unwrap();
        Memory {
            id: MemoryId::generate(),
            organization_id: OrganizationId::generate(),
            project_id: ProjectId::generate(),
            user_id: ExternalId::parse("alice").ok(),
            agent_id: None,
            session_id: ExternalId::parse("s1").ok(),
            kind: MemoryKind::Preference,
            key: None,
            content: "Alice drinks Oolong tea".to_string(),
            metadata: json!({"topic": "drinks", "priority": 2, "app_id": "support"})
                .as_object()
                .cloned()
                .unwrap(),
            categories: vec!["food".to_string(), "Finance".to_string()],
            source: MemorySource::UserStated,
            confidence: 0.8,
            state: MemoryState::Active,
            version: 1,
            created_at: at,
            updated_at: at,
            occurred_at: Utc.with_ymd_and_hms(2024, 7, 1, 9, 0, 0).unwrap(),
            valid_from: at,
            valid_to: None,
            expires_at: None,
            embedding_model: "m".to_string(),
            content_hash: String::new(),
            immutable: false,
            legal_hold: false,
            visibility: crate::Visibility::Shared,
            shared_with: None,
            verified_at: None,
            verified_by: None,
            content_omitted: false,
        }
    }

    fn parsed(value: Value) -> MemoryFilter {
        parse_memory_filter(&value, "filters").unwrap_or_else(|errors| panic!("{errors:?}"))
    }

    fn error_fields(value: Value) -> Vec<String> {
        parse_memory_filter(&value, "filters")
            .expect_err("the filter should be refused")
            .into_iter()
            .map(|error| error.field)
            .collect()
    }

    #[test]
    fn the_mem0_forms_parse_and_match_as_documented() {
        let memory = memory();
        let passing = [
            json!({"user_id": "alice"}),
            json!({"user_id": {"in": ["bob", "alice"]}}),
            json!({"user_id": "*"}),
            json!({"agent_id": {"ne": "planner"}}),
            json!({"NOT": {"agent_id": "*"}}),
            json!({"NOT": [{"user_id": "bob"}]}),
            json!({"AND": [{"user_id": "alice"}, {"OR": [{"agent_id": "x"}, {"metadata": {"topic": "drinks"}}]}]}),
            json!({"metadata": {"priority": 2.0}}),
            json!({"metadata": {"topic": {"ne": "work"}}}),
            json!({"metadata": {"topic": {"contains": "RIN"}}}),
            json!({"app_id": "support"}),
            json!({"categories": ["food", "travel"]}),
            json!({"categories": {"all": ["food", "Finance"]}}),
            json!({"categories": {"contains": "fin"}}),
            json!({"occurred_at": {"gte": "2024-07-01", "lte": "2024-07-01"}}),
            json!({"occurred_at": "2024-07-01"}),
            json!({"created_at": {"gt": "2024-07-14", "lt": "2024-07-16T00:00:00Z"}}),
            json!({"created_after": "2024-07-15T12:00:00Z"}),
            json!({"confidence": {"gte": 0.8}}),
            json!({"kind": {"in": ["preference", "semantic"]}, "source": "user_stated"}),
            json!({"text": "oolong"}),
            json!({"text": {"contains": "Oolong"}}),
            json!({}),
        ];
        for filter in passing {
            assert!(
                parsed(filter.clone()).matches(&memory),
                "{filter} should match"
            );
        }
        let failing = [
            json!({"user_id": "bob"}),
            json!({"agent_id": "*"}),
            json!({"metadata": {"priority": "2"}}),
            json!({"categories": {"all": ["food", "travel"]}}),
            json!({"occurred_at": {"gt": "2024-07-01"}}),
            json!({"created_before": "2024-07-15T12:00:00Z"}),
            json!({"confidence": {"gt": 0.8}}),
            json!({"text": {"contains": "oolong"}}),
            json!({"memory_ids": [MemoryId::generate().to_string()]}),
            json!({"OR": [{"user_id": "bob"}, {"kind": {"ne": "preference"}}]}),
        ];
        for filter in failing {
            assert!(
                !parsed(filter.clone()).matches(&memory),
                "{filter} should not match"
            );
        }
    }

    #[test]
    fn errors_name_the_path_of_the_bad_node() {
        assert_eq!(
            error_fields(json!({"AND": [{"user_id": "a"}, {"metadata": {"topic": {"gt": 1}}}]})),
            vec!["filters.AND[1].metadata.topic.gt"]
        );
        assert_eq!(
            error_fields(json!({"colour": "red"})),
            vec!["filters.colour"]
        );
        assert_eq!(
            error_fields(json!({"OR": [{"created_at": {"gte": "last week"}}]})),
            vec!["filters.OR[0].created_at.gte"]
        );
        assert_eq!(
            error_fields(json!({"metadata": {"tags": ["a"]}})),
            vec!["filters.metadata.tags"]
        );
        assert_eq!(error_fields(json!({"OR": []})), vec!["filters.OR"]);
        assert_eq!(error_fields(json!({"NOT": "x"})), vec!["filters.NOT"]);
        assert_eq!(
            error_fields(json!({"created_at": {">=": "2024-01-01"}})),
            vec!["filters.created_at.>="]
        );
        assert_eq!(
            error_fields(json!({"memory_ids": ["nope"]})),
            vec!["filters.memory_ids[0]"]
        );
        assert_eq!(error_fields(json!([1])), vec!["filters"]);
    }

    #[test]
    fn the_published_limits_hold() {
        let mut deep = json!({"user_id": "a"});
        for _ in 0..MAX_FILTER_DEPTH {
            deep = json!({"NOT": deep});
        }
        assert!(!error_fields(deep).is_empty());
        let wide: Vec<Value> = (0..MAX_FILTER_CONDITIONS)
            .map(|n| json!({"user_id": format!("u{n}")}))
            .collect();
        assert_eq!(error_fields(json!({"OR": wide})), vec!["filters"]);
        let long: Vec<String> = (0..=MAX_FILTER_LIST_ITEMS)
            .map(|n| format!("u{n}"))
            .collect();
        assert_eq!(
            error_fields(json!({"user_id": {"in": long}})),
            vec!["filters.user_id.in"]
        );
        let big = "x".repeat(MAX_FILTER_VALUE_BYTES + 1);
        assert_eq!(error_fields(json!({"text": big})), vec!["filters.text"]);
    }

    #[test]
    fn a_tree_that_cannot_narrow_is_no_filter_whatever_its_shape() {
        for tree in [
            json!({}),
            json!({"AND": [{}]}),
            json!({"OR": [{}, {"user_id": "a"}]}),
            json!({"NOT": {"NOT": {}}}),
        ] {
            assert!(parsed(tree.clone()).is_everything(), "{tree}");
        }
        assert!(parsed(json!({"NOT": {}})).is_nothing());
        assert!(parsed(json!({"user_id": "a", "OR": [{"NOT": {}}]})).is_nothing());
        let many_empty: Vec<Value> = (0..100_000).map(|_| json!({})).collect();
        assert_eq!(
            error_fields(json!({"NOT": many_empty.clone()})),
            vec!["filters.NOT"]
        );
        assert_eq!(error_fields(json!({"OR": many_empty})), vec!["filters.OR"]);
        let wide: Vec<Value> = (0..MAX_FILTER_LIST_ITEMS).map(|_| json!({})).collect();
        assert_eq!(error_fields(json!({"AND": wide})), vec!["filters"]);
    }

    #[test]
    fn text_and_metadata_conditions_read_content() {
        assert!(parsed(json!({"NOT": {"text": "x"}})).reads_content());
        assert!(parsed(json!({"metadata": {"k": 1}})).reads_content());
        assert!(parsed(json!({"app_id": "web"})).reads_content());
        assert!(!parsed(json!({"user_id": "a", "categories": ["c"]})).reads_content());
    }

    #[test]
    fn the_canonical_form_reads_back_to_the_same_filter() {
        let filter = parsed(json!({
            "AND": [
                {"user_id": {"in": ["a", "b"]}, "agent_id": "*"},
                {"NOT": {"metadata": {"topic": {"in": ["x", 2, true]}}}},
                {"occurred_at": "2024-07-01", "confidence": {"lt": 0.5}},
                {"categories": {"contains": "Fin", "all": ["a"]}, "text": {"contains": "T"}},
                {"memory_ids": [MemoryId::generate().to_string()], "kind": "semantic", "source": {"ne": "file"}}
            ]
        }));
        assert_eq!(parsed(filter.to_json()), filter);
    }
}
