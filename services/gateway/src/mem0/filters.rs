//! Mem0's filter grammar read into the engine's one filter tree: the same AND/OR/NOT shape
//! under Mem0's field names (`run_id`, `timestamp`, `keywords`), and Python-literal values.

use engram_core::{FieldError, MemoryFilter};
use serde_json::{Map, Value};

/// The field names Mem0 documents for `filters` (A4), for error messages.
const MEM0_FILTER_FIELDS: &[&str] = &[
    "AND",
    "OR",
    "NOT",
    "user_id",
    "agent_id",
    "app_id",
    "run_id",
    "created_at",
    "updated_at",
    "timestamp",
    "text",
    "categories",
    "metadata",
    "keywords_search",
    "memory_ids",
    "keywords",
];

/// The entity fields; one of them, outside any `NOT`, scopes a v3 search or list.
const ENTITY_FIELDS: [&str; 4] = ["user_id", "agent_id", "app_id", "run_id"];

/// A Mem0 filter as the engine's tree; errors name the bad node under `path`.
pub fn parse(value: &Value, path: &str) -> Result<MemoryFilter, Vec<FieldError>> {
    let mut errors = Vec::new();
    let mut budget = MAX_REWRITTEN_NODES;
    let native = rewrite(value, path, &mut errors, &mut budget);
    if !errors.is_empty() {
        return Err(errors);
    }
    engram_core::memory_filter::parse_memory_filter(&native, path)
}

/// Whether the filter names a user, agent, app or run outside every `NOT` (v3 search and
/// list need one: a request must say whose memories it means).
pub fn names_an_entity(value: &Value) -> bool {
    let Value::Object(fields) = value else {
        return false;
    };
    fields.iter().any(|(key, value)| match key.as_str() {
        "AND" | "OR" => value
            .as_array()
            .is_some_and(|children| children.iter().any(names_an_entity)),
        key => ENTITY_FIELDS.contains(&key) || key == "session_id",
    })
}

/// Most nodes read before the engine's parser applies its own limits (a bound on the work
/// and on the errors a huge tree could make), and most errors reported.
const MAX_REWRITTEN_NODES: usize = 4 * engram_core::limits::MAX_FILTER_CONDITIONS;
const MAX_REPORTED_ERRORS: usize = 20;

/// Mem0's names for the engine's (`run_id` is Engram's `session_id`, `timestamp` its
/// `occurred_at`, `keywords` a text condition); the rest of the grammar is the same.
fn rewrite(value: &Value, path: &str, errors: &mut Vec<FieldError>, budget: &mut usize) -> Value {
    if errors.len() >= MAX_REPORTED_ERRORS {
        return Value::Null;
    }
    if *budget == 0 {
        let too_large = format!(
            "the filter is too large: at most {} conditions",
            engram_core::limits::MAX_FILTER_CONDITIONS
        );
        if !errors.iter().any(|error| error.message == too_large) {
            errors.push(FieldError::new(path, too_large));
        }
        return Value::Null;
    }
    *budget = budget.saturating_sub(1);
    let Value::Object(fields) = value else {
        errors.push(FieldError::new(path, "must be an object of conditions"));
        return Value::Null;
    };
    if fields.contains_key("AND") && fields.contains_key("OR") {
        // Mem0's platform silently drops the OR here; refusing says so instead.
        errors.push(FieldError::new(
            path,
            "holds both AND and OR: nest one inside the other",
        ));
        return Value::Null;
    }
    let mut native = Map::new();
    for (key, value) in fields {
        if errors.len() >= MAX_REPORTED_ERRORS {
            break;
        }
        let field_path = format!("{path}.{key}");
        let (name, value) = match key.as_str() {
            "AND" | "OR" => {
                let Value::Array(children) = value else {
                    errors.push(FieldError::new(
                        field_path,
                        "must be an array of conditions",
                    ));
                    continue;
                };
                let children = children
                    .iter()
                    .enumerate()
                    .map(|(position, child)| {
                        rewrite(child, &format!("{field_path}[{position}]"), errors, budget)
                    })
                    .collect();
                (key.as_str(), Value::Array(children))
            }
            "NOT" => match value {
                Value::Array(children) => (
                    "NOT",
                    Value::Array(
                        children
                            .iter()
                            .enumerate()
                            .map(|(position, child)| {
                                rewrite(child, &format!("{field_path}[{position}]"), errors, budget)
                            })
                            .collect(),
                    ),
                ),
                other => ("NOT", rewrite(other, &field_path, errors, budget)),
            },
            "run_id" => ("session_id", value.clone()),
            "timestamp" => ("occurred_at", value.clone()),
            "keywords" | "keywords_search" | "text" => ("text", value.clone()),
            "user_id" | "agent_id" | "app_id" | "session_id" | "created_at" | "updated_at"
            | "categories" | "metadata" | "memory_ids" => (key.as_str(), value.clone()),
            "expiration_date" => {
                errors.push(FieldError::new(
                    field_path,
                    "Engram cannot filter on expiration_date; filter on created_at, updated_at or timestamp",
                ));
                continue;
            }
            other => {
                errors.push(FieldError::new(
                    field_path,
                    format!(
                        "unknown filter field {other:?}: a top-level key must be a logical operator or an allowed field: {}",
                        MEM0_FILTER_FIELDS.join(", ")
                    ),
                ));
                continue;
            }
        };
        native.insert(name.to_string(), value);
    }
    Value::Object(native)
}

/// A query-string value that carries a dict: JSON, or what Python's `str()` writes for one
/// (`{'user_id': 'alice'}`: single quotes, `True`, `False`, `None`), as Mem0's client sends
/// `delete_all(filters=…)` and `metadata=…`.
pub fn query_object(text: &str, field: &str) -> Result<Value, FieldError> {
    if let Ok(value) = serde_json::from_str::<Value>(text) {
        return Ok(value);
    }
    let mut reader = PythonLiteral {
        text: text.as_bytes(),
        at: 0,
    };
    let parsed = reader.value(0).and_then(|value| {
        reader.skip_space();
        (reader.at == reader.text.len()).then_some(value)
    });
    parsed.ok_or_else(|| {
        FieldError::new(
            field,
            "must be a JSON object or a Python dict literal ({'user_id': 'alice'})",
        )
    })
}

/// A reader of Python literals: dicts, lists, tuples, strings, numbers, True/False/None.
struct PythonLiteral<'a> {
    text: &'a [u8],
    at: usize,
}

/// Deeper nesting than a filter can hold is refused, not recursed into.
const MAX_LITERAL_DEPTH: usize = 16;

impl PythonLiteral<'_> {
    fn skip_space(&mut self) {
        while self.at < self.text.len() && self.text[self.at].is_ascii_whitespace() {
            self.at += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.skip_space();
        self.text.get(self.at).copied()
    }

    fn eat(&mut self, expected: u8) -> bool {
        if self.peek() == Some(expected) {
            self.at += 1;
            return true;
        }
        false
    }

    fn value(&mut self, depth: usize) -> Option<Value> {
        if depth > MAX_LITERAL_DEPTH {
            return None;
        }
        match self.peek()? {
            b'{' => {
                self.at += 1;
                let mut object = Map::new();
                if self.eat(b'}') {
                    return Some(Value::Object(object));
                }
                loop {
                    let Value::String(key) = self.value(depth + 1)? else {
                        return None;
                    };
                    if !self.eat(b':') {
                        return None;
                    }
                    let value = self.value(depth + 1)?;
                    object.insert(key, value);
                    if self.eat(b',') {
                        if self.eat(b'}') {
                            return Some(Value::Object(object));
                        }
                        continue;
                    }
                    return self.eat(b'}').then_some(Value::Object(object));
                }
            }
            open @ (b'[' | b'(') => {
                self.at += 1;
                let close = if open == b'[' { b']' } else { b')' };
                let mut items = Vec::new();
                if self.eat(close) {
                    return Some(Value::Array(items));
                }
                loop {
                    items.push(self.value(depth + 1)?);
                    if self.eat(b',') {
                        if self.eat(close) {
                            return Some(Value::Array(items));
                        }
                        continue;
                    }
                    return self.eat(close).then_some(Value::Array(items));
                }
            }
            quote @ (b'\'' | b'"') => {
                self.at += 1;
                let mut bytes = Vec::new();
                while let Some(&byte) = self.text.get(self.at) {
                    self.at += 1;
                    match byte {
                        b'\\' => {
                            let escaped = *self.text.get(self.at)?;
                            self.at += 1;
                            bytes.push(match escaped {
                                b'n' => b'\n',
                                b't' => b'\t',
                                b'r' => b'\r',
                                other => other,
                            });
                        }
                        byte if byte == quote => {
                            return String::from_utf8(bytes).ok().map(Value::String);
                        }
                        byte => bytes.push(byte),
                    }
                }
                None
            }
            _ => {
                let start = self.at;
                while self.at < self.text.len()
                    && (self.text[self.at].is_ascii_alphanumeric()
                        || matches!(self.text[self.at], b'.' | b'-' | b'+' | b'_'))
                {
                    self.at += 1;
                }
                let word = std::str::from_utf8(&self.text[start..self.at]).ok()?;
                match word {
                    "True" => Some(Value::Bool(true)),
                    "False" => Some(Value::Bool(false)),
                    "None" => Some(Value::Null),
                    number => serde_json::from_str::<serde_json::Number>(number)
                        .ok()
                        .map(Value::Number),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn python_dict_literals_from_the_query_string_read_as_json() {
        assert_eq!(
            query_object("{'user_id': 'alice'}", "filters").ok(),
            Some(json!({"user_id": "alice"}))
        );
        assert_eq!(
            query_object(
                "{'AND': [{'user_id': 'a\\'b'}, {'x': (1, 2.5)}], 'ok': True, 'n': None}",
                "filters"
            )
            .ok(),
            Some(json!({"AND": [{"user_id": "a'b"}, {"x": [1, 2.5]}], "ok": true, "n": null}))
        );
        assert_eq!(
            query_object(r#"{"k": "v"}"#, "metadata").ok(),
            Some(json!({"k": "v"}))
        );
        for bad in [
            "{'a': }",
            "{'a' 1}",
            "[[[[[[[[[[[[[[[[[[[(1,)]]]]]]]]]]]]]]]]]]]",
            "os.system",
        ] {
            assert!(query_object(bad, "filters").is_err(), "{bad}");
        }
    }

    #[test]
    fn mem0_names_become_the_engines_and_unknown_fields_are_refused() {
        let filter = parse(
            &json!({"OR": [{"run_id": "s1"}, {"AND": [{"user_id": "u"}, {"timestamp": {"gte": "2024-07-01"}}]}]}),
            "filters",
        )
        .ok();
        assert!(filter.is_some());
        let errors = parse(&json!({"AND": [{"user": "u"}]}), "filters").err();
        assert!(errors.is_some_and(|errors| errors[0].field == "filters.AND[0].user"));
        assert!(parse(&json!({"AND": [], "OR": []}), "filters").is_err());
        assert!(names_an_entity(
            &json!({"AND": [{"created_at": {"gte": "2024-01-01"}}, {"run_id": "s"}]})
        ));
        assert!(!names_an_entity(&json!({"NOT": {"user_id": "u"}})));
    }

    #[test]
    fn a_huge_filter_is_refused_with_a_bounded_list_of_errors() {
        let unknown: Vec<Value> = (0..10_000).map(|n| json!({ format!("x{n}"): 0 })).collect();
        let errors = parse(&json!({ "AND": unknown }), "filters")
            .err()
            .unwrap_or_default();
        assert!(
            !errors.is_empty() && errors.len() <= MAX_REPORTED_ERRORS,
            "{}",
            errors.len()
        );
        let deep: Vec<Value> = (0..10_000).map(|_| json!({"user_id": "u"})).collect();
        let errors = parse(&json!({ "AND": deep }), "filters")
            .err()
            .unwrap_or_default();
        assert!(
            errors
                .iter()
                .any(|error| error.message.contains("too large")),
            "{errors:?}"
        );
    }
}
