//! The part of a memory filter the index answers from point payloads, before its top-k cut:
//! a backend-neutral tree each backend turns into its own filter. It lets through at least
//! every memory the filter matches; the engine checks the rest after hydration.

use engram_core::memory_filter::{
    APP_ID_METADATA_KEY, Comparison, EntityField, EntityTest, FilterCondition, MetadataTest,
    ScalarValue, TimeField,
};
use engram_core::{MemoryFilter, MemoryId};

/// Payload fields a filter can read (their names in the point payload).
pub const USER_ID_FIELD: &str = "user_id";
pub const AGENT_ID_FIELD: &str = "agent_id";
pub const SESSION_ID_FIELD: &str = "session_id";
pub const KIND_FIELD: &str = "kind";
pub const SOURCE_FIELD: &str = "source";
pub const CATEGORIES_FIELD: &str = "categories";
pub const CONFIDENCE_FIELD: &str = "confidence";
/// Times as microseconds since the epoch (numbers compare exactly, as the database does).
pub const CREATED_MICROS_FIELD: &str = "created_us";
pub const UPDATED_MICROS_FIELD: &str = "updated_us";
pub const OCCURRED_MICROS_FIELD: &str = "occurred_us";
/// The metadata's scalar values (text up to the filter language's longest value).
pub const METADATA_FIELD: &str = "metadata";

/// `private` or `shared` among the project's agents; absent on points written before it
/// existed, all of which are shared.
pub const VISIBILITY_FIELD: &str = "visibility";
/// `true` once a reviewer or a supervisor verified the memory.
pub const VERIFIED_FIELD: &str = "verified";

/// `filter` narrowed to what a scope bound to agents may see: a point of one of its agents,
/// or (unless the scope is for changes) one shared with every agent. Storage applies the same
/// rule when it hydrates the hits; here it keeps other agents' private points from taking
/// places in the top k.
pub fn within_agents(
    filter: Option<PayloadFilter>,
    scope: &engram_core::MemoryScope,
) -> Option<PayloadFilter> {
    let Some(agents) = scope.agents() else {
        return filter;
    };
    let seen = of_agents_or_shared(
        agents
            .agents()
            .iter()
            .map(|agent| agent.as_str().to_string())
            .collect(),
        agents.with_shared().then_some(agents.teams()),
    );
    Some(and_also(filter, seen))
}

/// The points verified, or (unverified) of `agents`: what a search takes when other agents'
/// conclusions count only once verified (no agents: verified ones only).
pub fn verified_or_of(agents: &[String]) -> PayloadFilter {
    let mut either = vec![PayloadFilter::BoolIs {
        field: VERIFIED_FIELD.to_string(),
        value: true,
    }];
    if !agents.is_empty() {
        either.push(PayloadFilter::KeywordIn {
            field: AGENT_ID_FIELD.to_string(),
            values: agents.to_vec(),
        });
    }
    PayloadFilter::Any(either)
}

/// `filter` and `more` (just `more` when there is no filter yet).
pub fn and_also(filter: Option<PayloadFilter>, more: PayloadFilter) -> PayloadFilter {
    match filter {
        Some(filter) => PayloadFilter::All(vec![filter, more]),
        None => more,
    }
}

/// The visibility a point carries: `private`, `shared`, or for a memory shared with one
/// team `team:<name>` (so one keyword answers who reads it).
pub fn visibility_keyword(
    visibility: Option<engram_core::Visibility>,
    shared_with: Option<&str>,
) -> Option<String> {
    match (visibility, shared_with) {
        (Some(engram_core::Visibility::Shared), Some(team)) => Some(format!("team:{team}")),
        (visibility, _) => visibility.map(|visibility| visibility.as_str().to_string()),
    }
}

/// The points of `agents`, and with `shared_with_teams` those shared with every agent or
/// with one of these teams (points written before visibility existed carry none, and are
/// all shared).
pub fn of_agents_or_shared(
    agents: Vec<String>,
    shared_with_teams: Option<&[String]>,
) -> PayloadFilter {
    let mut either = vec![PayloadFilter::KeywordIn {
        field: AGENT_ID_FIELD.to_string(),
        values: agents,
    }];
    if let Some(teams) = shared_with_teams {
        let mut readable = vec![engram_core::Visibility::Shared.as_str().to_string()];
        readable.extend(teams.iter().map(|team| format!("team:{team}")));
        either.push(PayloadFilter::KeywordIn {
            field: VISIBILITY_FIELD.to_string(),
            values: readable,
        });
        either.push(PayloadFilter::Not(Box::new(PayloadFilter::Present {
            field: VISIBILITY_FIELD.to_string(),
        })));
    }
    PayloadFilter::Any(either)
}

/// The point layout a payload was written with (see [`crate::POINT_LAYOUT`]).
pub const LAYOUT_FIELD: &str = "layout";

/// `filter`, or a point written before payloads carried what filters read: such a point is
/// let through (the check after hydration decides) until the reconciler rewrites it.
pub fn or_written_before_filters(filter: PayloadFilter) -> PayloadFilter {
    PayloadFilter::Any(vec![
        filter,
        PayloadFilter::Not(Box::new(PayloadFilter::Range {
            field: LAYOUT_FIELD.to_string(),
            comparison: Comparison::Gte,
            value: crate::POINT_LAYOUT as f64,
        })),
    ])
}

/// A condition on point payloads.
#[derive(Clone, Debug, PartialEq)]
pub enum PayloadFilter {
    All(Vec<PayloadFilter>),
    Any(Vec<PayloadFilter>),
    Not(Box<PayloadFilter>),
    /// The keyword field (or one element of a keyword array) is one of `values`.
    KeywordIn {
        field: String,
        values: Vec<String>,
    },
    /// The field holds a value (not null, not absent).
    Present {
        field: String,
    },
    /// The numeric field compares with `value`.
    Range {
        field: String,
        comparison: Comparison,
        value: f64,
    },
    /// The boolean field equals `value`.
    BoolIs {
        field: String,
        value: bool,
    },
    /// The point is one of these memories.
    Ids(Vec<MemoryId>),
}

/// What a translation could say about a (sub)filter: exactly these points, or it could not
/// narrow at all (every point), or nothing can match.
#[derive(Clone, Debug, PartialEq)]
pub enum PayloadBound {
    Everything,
    Nothing,
    Only(PayloadFilter),
}

/// The payload filter for `filter`: lets through at least every point whose memory matches
/// (a superset), and `exact` says whether it lets through no other.
#[derive(Clone, Debug, PartialEq)]
pub struct PayloadTranslation {
    pub bound: PayloadBound,
    pub exact: bool,
}

/// Translate `filter` for the index.
pub fn payload_filter_for(filter: &MemoryFilter) -> PayloadTranslation {
    let mut exact = true;
    let bound = bound_of(filter, Direction::Superset, &mut exact);
    PayloadTranslation { bound, exact }
}

/// Whether a translation may let more through (superset) or fewer (subset, under NOT).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Direction {
    Superset,
    Subset,
}

impl Direction {
    fn flipped(self) -> Self {
        match self {
            Self::Superset => Self::Subset,
            Self::Subset => Self::Superset,
        }
    }

    /// What an untranslatable condition becomes.
    fn unknown(self) -> PayloadBound {
        match self {
            Self::Superset => PayloadBound::Everything,
            Self::Subset => PayloadBound::Nothing,
        }
    }
}

fn bound_of(filter: &MemoryFilter, direction: Direction, exact: &mut bool) -> PayloadBound {
    match filter {
        MemoryFilter::All(children) => {
            let mut parts = Vec::with_capacity(children.len());
            for child in children {
                match bound_of(child, direction, exact) {
                    PayloadBound::Everything => {}
                    PayloadBound::Nothing => return PayloadBound::Nothing,
                    PayloadBound::Only(part) => parts.push(part),
                }
            }
            match parts.len() {
                0 => PayloadBound::Everything,
                1 => PayloadBound::Only(parts.remove(0)),
                _ => PayloadBound::Only(PayloadFilter::All(parts)),
            }
        }
        MemoryFilter::Any(children) => {
            let mut parts = Vec::with_capacity(children.len());
            for child in children {
                match bound_of(child, direction, exact) {
                    PayloadBound::Everything => return PayloadBound::Everything,
                    PayloadBound::Nothing => {}
                    PayloadBound::Only(part) => parts.push(part),
                }
            }
            match parts.len() {
                0 => PayloadBound::Nothing,
                1 => PayloadBound::Only(parts.remove(0)),
                _ => PayloadBound::Only(PayloadFilter::Any(parts)),
            }
        }
        MemoryFilter::Not(child) => match bound_of(child, direction.flipped(), exact) {
            PayloadBound::Everything => PayloadBound::Nothing,
            PayloadBound::Nothing => PayloadBound::Everything,
            PayloadBound::Only(inner) => PayloadBound::Only(PayloadFilter::Not(Box::new(inner))),
        },
        MemoryFilter::Condition(condition) if matches_nothing(condition) => PayloadBound::Nothing,
        MemoryFilter::Condition(condition) => match condition_filter(condition) {
            Some(translated) => PayloadBound::Only(translated),
            None => {
                *exact = false;
                direction.unknown()
            }
        },
    }
}

/// A condition over an empty list matches no memory (the parser refuses empty lists; an
/// empty OR would match every point in a backend).
fn matches_nothing(condition: &FilterCondition) -> bool {
    match condition {
        FilterCondition::Entity {
            test: EntityTest::In(values),
            ..
        } => values.is_empty(),
        FilterCondition::Kind(kinds) => kinds.is_empty(),
        FilterCondition::Source(sources) => sources.is_empty(),
        FilterCondition::CategoriesAny(categories) => categories.is_empty(),
        FilterCondition::MemoryIds(ids) => ids.is_empty(),
        FilterCondition::Metadata {
            test: MetadataTest::In(values),
            ..
        } => values.is_empty(),
        _ => false,
    }
}

/// The payload filter of one condition; `None` when payloads cannot answer it.
fn condition_filter(condition: &FilterCondition) -> Option<PayloadFilter> {
    let keyword_in = |field: &str, values: Vec<String>| PayloadFilter::KeywordIn {
        field: field.to_string(),
        values,
    };
    match condition {
        FilterCondition::Entity { field, test } => {
            let payload_field = match field {
                EntityField::UserId => USER_ID_FIELD.to_string(),
                EntityField::AgentId => AGENT_ID_FIELD.to_string(),
                EntityField::SessionId => SESSION_ID_FIELD.to_string(),
                EntityField::AppId => format!("{METADATA_FIELD}.{APP_ID_METADATA_KEY}"),
            };
            match test {
                EntityTest::In(values) => Some(keyword_in(&payload_field, values.clone())),
                // An application is a text value only: "set" is not something payloads tell.
                EntityTest::Present if *field == EntityField::AppId => None,
                EntityTest::Present => Some(PayloadFilter::Present {
                    field: payload_field,
                }),
            }
        }
        FilterCondition::Kind(kinds) => Some(keyword_in(
            KIND_FIELD,
            kinds.iter().map(|kind| kind.as_str().to_string()).collect(),
        )),
        FilterCondition::Source(sources) => Some(keyword_in(
            SOURCE_FIELD,
            sources
                .iter()
                .map(|source| source.as_str().to_string())
                .collect(),
        )),
        FilterCondition::CategoriesAny(categories) => {
            Some(keyword_in(CATEGORIES_FIELD, categories.clone()))
        }
        FilterCondition::CategoriesAll(categories) => Some(PayloadFilter::All(
            categories
                .iter()
                .map(|category| keyword_in(CATEGORIES_FIELD, vec![category.clone()]))
                .collect(),
        )),
        FilterCondition::Confidence { comparison, value } => Some(PayloadFilter::Range {
            field: CONFIDENCE_FIELD.to_string(),
            comparison: *comparison,
            value: *value,
        }),
        FilterCondition::Metadata {
            key,
            test: MetadataTest::In(values),
        } if is_plain_key(key) => {
            let field = format!("{METADATA_FIELD}.{key}");
            let mut any: Vec<PayloadFilter> = values
                .iter()
                .map(|value| match value {
                    ScalarValue::Text(text) => keyword_in(&field, vec![text.clone()]),
                    ScalarValue::Number(number) => PayloadFilter::All(vec![
                        PayloadFilter::Range {
                            field: field.clone(),
                            comparison: Comparison::Gte,
                            value: *number,
                        },
                        PayloadFilter::Range {
                            field: field.clone(),
                            comparison: Comparison::Lte,
                            value: *number,
                        },
                    ]),
                    ScalarValue::Bool(flag) => PayloadFilter::BoolIs {
                        field: field.clone(),
                        value: *flag,
                    },
                })
                .collect();
            Some(if any.len() == 1 {
                any.remove(0)
            } else {
                PayloadFilter::Any(any)
            })
        }
        FilterCondition::MemoryIds(ids) => Some(PayloadFilter::Ids(ids.clone())),
        FilterCondition::Time {
            field,
            comparison,
            at,
        } => Some(PayloadFilter::Range {
            field: match field {
                TimeField::CreatedAt => CREATED_MICROS_FIELD,
                TimeField::UpdatedAt => UPDATED_MICROS_FIELD,
                TimeField::OccurredAt => OCCURRED_MICROS_FIELD,
            }
            .to_string(),
            comparison: *comparison,
            value: at.timestamp_micros() as f64,
        }),
        // Substrings (of text, categories, metadata) and keys a payload path cannot spell are
        // checked after hydration.
        FilterCondition::Metadata { .. }
        | FilterCondition::CategoryContains(_)
        | FilterCondition::TextContains(_)
        | FilterCondition::TextContainsFolded(_) => None,
    }
}

/// A metadata key a payload path names unambiguously.
fn is_plain_key(key: &str) -> bool {
    !key.is_empty()
        && key
            .chars()
            .all(|character| character.is_ascii_alphanumeric() || character == '_')
}

/// The metadata kept in a point's payload: the scalar values a filter can compare with
/// (text no longer than a filter value can be, numbers, booleans) under plain keys.
pub fn payload_metadata(
    metadata: &serde_json::Map<String, serde_json::Value>,
) -> serde_json::Map<String, serde_json::Value> {
    metadata
        .iter()
        .filter(|(key, value)| {
            is_plain_key(key)
                && match value {
                    serde_json::Value::String(text) => {
                        text.len() <= engram_core::limits::MAX_FILTER_VALUE_BYTES
                    }
                    serde_json::Value::Number(_) | serde_json::Value::Bool(_) => true,
                    _ => false,
                }
        })
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use engram_core::memory_filter::parse_memory_filter;
    use serde_json::json;

    fn translated(filter: serde_json::Value) -> PayloadTranslation {
        payload_filter_for(&parse_memory_filter(&filter, "filters").expect("a valid filter"))
    }

    #[test]
    fn payload_conditions_translate_exactly() {
        let translation = translated(json!({"OR": [{"user_id": "a"}, {"metadata": {"n": 2}}]}));
        assert!(translation.exact);
        assert!(matches!(
            translation.bound,
            PayloadBound::Only(PayloadFilter::Any(_))
        ));
    }

    #[test]
    fn a_substring_widens_under_and_and_narrows_under_not() {
        let widened = translated(json!({"user_id": "a", "text": "tea"}));
        assert!(!widened.exact);
        assert_eq!(
            widened.bound,
            PayloadBound::Only(PayloadFilter::KeywordIn {
                field: USER_ID_FIELD.to_string(),
                values: vec!["a".to_string()]
            })
        );
        // NOT(text contains) cannot be narrowed: it lets everything through.
        assert_eq!(
            translated(json!({"NOT": {"text": "tea"}})).bound,
            PayloadBound::Everything
        );
        // OR with an unknown branch cannot be narrowed either.
        assert_eq!(
            translated(json!({"OR": [{"user_id": "a"}, {"text": "tea"}]})).bound,
            PayloadBound::Everything
        );
        // NOT(a AND text): at least everything but a's memories.
        assert_eq!(
            translated(json!({"NOT": {"user_id": "a", "text": "tea"}})).bound,
            PayloadBound::Everything
        );
        assert_eq!(
            translated(json!({"NOT": {"OR": [{"user_id": "a"}, {"text": "tea"}]}})).bound,
            PayloadBound::Only(PayloadFilter::Not(Box::new(PayloadFilter::KeywordIn {
                field: USER_ID_FIELD.to_string(),
                values: vec!["a".to_string()]
            })))
        );
    }
}
