//! The filter language in SQL: the one translation of a `MemoryFilter` into a condition on the
//! memories table, for SQLite and PostgreSQL (their JSON and string functions differ).

use crate::entities::memories;
use engram_core::MemoryFilter;
use engram_core::memory_filter::{
    APP_ID_METADATA_KEY, Comparison, EntityField, EntityTest, FilterCondition, MetadataTest,
    ScalarValue, TimeField,
};
use sea_orm::sea_query::{Expr, SimpleExpr};
use sea_orm::{ColumnTrait, Condition, DbBackend, Value};

/// ASCII upper- and lowercase letters: PostgreSQL's `lower()` folds by locale, SQLite's by
/// ASCII only; the filter language folds ASCII only, so PostgreSQL is given the same table.
const ASCII_UPPER: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZ";
const ASCII_LOWER: &str = "abcdefghijklmnopqrstuvwxyz";

/// The memories `filter` lets through, as a condition on `memories`.
pub(crate) fn memory_filter_condition(filter: &MemoryFilter, backend: DbBackend) -> Condition {
    match filter {
        MemoryFilter::All(children) if children.is_empty() => Condition::all().add(always_true()),
        MemoryFilter::All(children) => children.iter().fold(Condition::all(), |all, child| {
            all.add(memory_filter_condition(child, backend))
        }),
        MemoryFilter::Any(children) => children.iter().fold(Condition::any(), |any, child| {
            any.add(memory_filter_condition(child, backend))
        }),
        MemoryFilter::Not(child) => Condition::all()
            .add(memory_filter_condition(child, backend))
            .not(),
        MemoryFilter::Condition(condition) => {
            Condition::all().add(condition_expression(condition, backend))
        }
    }
}

fn always_true() -> SimpleExpr {
    Expr::cust("1 = 1")
}

fn condition_expression(condition: &FilterCondition, backend: DbBackend) -> SimpleExpr {
    match condition {
        FilterCondition::Entity { field, test } => entity_expression(*field, test, backend),
        FilterCondition::Kind(kinds) => {
            memories::Column::Kind.is_in(kinds.iter().map(|kind| kind.as_str()))
        }
        FilterCondition::Source(sources) => {
            memories::Column::Source.is_in(sources.iter().map(|source| source.as_str()))
        }
        FilterCondition::CategoriesAny(categories) => categories_any(categories, backend),
        FilterCondition::CategoriesAll(categories) => categories
            .iter()
            .map(|category| categories_any(std::slice::from_ref(category), backend))
            .reduce(SimpleExpr::and)
            .unwrap_or_else(always_true),
        FilterCondition::CategoryContains(folded) => {
            let sql = match backend {
                DbBackend::Postgres => format!(
                    "EXISTS (SELECT 1 FROM json_array_elements_text(\"memories\".\"categories\") AS c(v) \
                     WHERE strpos(translate(c.v, '{ASCII_UPPER}', '{ASCII_LOWER}'), ?) > 0)"
                ),
                _ => "EXISTS (SELECT 1 FROM json_each(\"memories\".\"categories\") AS c \
                      WHERE instr(lower(c.value), ?) > 0)"
                    .to_string(),
            };
            custom(backend, sql, [folded.clone()])
        }
        FilterCondition::Confidence { comparison, value } => {
            compare(memories::Column::Confidence, *comparison, *value)
        }
        FilterCondition::Metadata { key, test } => metadata_expression(key, test, backend),
        FilterCondition::MemoryIds(ids) => {
            memories::Column::Id.is_in(ids.iter().map(|id| id.as_uuid()))
        }
        FilterCondition::Time {
            field,
            comparison,
            at,
        } => {
            let column = match field {
                TimeField::CreatedAt => memories::Column::CreatedAt,
                TimeField::UpdatedAt => memories::Column::UpdatedAt,
                TimeField::OccurredAt => memories::Column::OccurredAt,
            };
            compare(column, *comparison, *at)
        }
        FilterCondition::TextContains(text) => {
            let sql = match backend {
                DbBackend::Postgres => "strpos(\"memories\".\"content\", ?) > 0",
                _ => "instr(\"memories\".\"content\", ?) > 0",
            };
            custom(backend, sql, [text.clone()])
        }
        FilterCondition::TextContainsFolded(folded) => {
            let sql = match backend {
                DbBackend::Postgres => format!(
                    "strpos(translate(\"memories\".\"content\", '{ASCII_UPPER}', '{ASCII_LOWER}'), ?) > 0"
                ),
                _ => "instr(lower(\"memories\".\"content\"), ?) > 0".to_string(),
            };
            custom(backend, sql, [folded.clone()])
        }
    }
}

fn compare<V: Into<Value>>(
    column: memories::Column,
    comparison: Comparison,
    value: V,
) -> SimpleExpr {
    match comparison {
        Comparison::Gt => column.gt(value),
        Comparison::Gte => column.gte(value),
        Comparison::Lt => column.lt(value),
        Comparison::Lte => column.lte(value),
    }
}

fn entity_expression(field: EntityField, test: &EntityTest, backend: DbBackend) -> SimpleExpr {
    let column = match field {
        EntityField::UserId => memories::Column::UserId,
        EntityField::AgentId => memories::Column::AgentId,
        EntityField::SessionId => memories::Column::SessionId,
        EntityField::AppId => {
            // The application is the metadata's `app_id`, when it is text.
            return match test {
                EntityTest::Present => metadata_is_text(APP_ID_METADATA_KEY, backend),
                EntityTest::In(values) => metadata_expression(
                    APP_ID_METADATA_KEY,
                    &MetadataTest::In(values.iter().cloned().map(ScalarValue::Text).collect()),
                    backend,
                ),
            };
        }
    };
    match test {
        EntityTest::Present => column.is_not_null(),
        // Never NULL (a memory without the field simply does not match), so NOT of it
        // matches that memory, as the reference says.
        EntityTest::In(values) => column
            .is_not_null()
            .and(column.is_in(values.iter().map(String::as_str))),
    }
}

/// `FALSE` where PostgreSQL's JSON operators yield NULL (an absent key): three-valued logic
/// would otherwise make `NOT` of the condition NULL too, and drop the memory.
fn never_null(sql: String) -> String {
    format!("COALESCE(({sql}), FALSE)")
}

/// Any of `categories` is among the memory's (a JSON array of strings).
fn categories_any(categories: &[String], backend: DbBackend) -> SimpleExpr {
    let placeholders = vec!["?"; categories.len()].join(", ");
    let sql = match backend {
        DbBackend::Postgres => format!(
            "EXISTS (SELECT 1 FROM json_array_elements_text(\"memories\".\"categories\") AS c(v) \
             WHERE c.v IN ({placeholders}))"
        ),
        _ => format!(
            "EXISTS (SELECT 1 FROM json_each(\"memories\".\"categories\") AS c \
             WHERE c.value IN ({placeholders}))"
        ),
    };
    custom(backend, sql, categories.iter().cloned())
}

fn metadata_is_text(key: &str, backend: DbBackend) -> SimpleExpr {
    let sql = match backend {
        DbBackend::Postgres => never_null(
            "jsonb_typeof((\"memories\".\"metadata\")::jsonb -> ?) = 'string'".to_string(),
        ),
        _ => "EXISTS (SELECT 1 FROM json_each(\"memories\".\"metadata\") AS m \
              WHERE m.key = ? AND m.type = 'text')"
            .to_string(),
    };
    custom(backend, sql, [key.to_string()])
}

/// A condition on one top-level metadata key. Numbers compare by value, text and booleans by
/// kind and value (as `ScalarValue::equals`).
fn metadata_expression(key: &str, test: &MetadataTest, backend: DbBackend) -> SimpleExpr {
    let values: Vec<&ScalarValue> = match test {
        MetadataTest::In(values) => values.iter().collect(),
        MetadataTest::Contains(folded) => {
            let sql = match backend {
                DbBackend::Postgres => never_null(format!(
                    "jsonb_typeof((\"memories\".\"metadata\")::jsonb -> ?) = 'string' AND \
                     strpos(translate((\"memories\".\"metadata\")::jsonb ->> ?, '{ASCII_UPPER}', '{ASCII_LOWER}'), ?) > 0"
                )),
                _ => "EXISTS (SELECT 1 FROM json_each(\"memories\".\"metadata\") AS m \
                      WHERE m.key = ? AND m.type = 'text' AND instr(lower(m.value), ?) > 0)"
                    .to_string(),
            };
            let parameters: Vec<Value> = match backend {
                DbBackend::Postgres => vec![key.into(), key.into(), folded.as_str().into()],
                _ => vec![key.into(), folded.as_str().into()],
            };
            return custom(backend, sql, parameters);
        }
    };
    if backend == DbBackend::Postgres {
        return values
            .into_iter()
            .map(|value| metadata_equals_on_postgres(key, value))
            .reduce(SimpleExpr::or)
            .unwrap_or_else(|| Expr::cust("1 = 0"));
    }
    // SQLite: one pass over the object's keys for every value of the list.
    let mut tests = Vec::with_capacity(values.len());
    let mut parameters: Vec<Value> = vec![key.into()];
    for value in values {
        match value {
            ScalarValue::Text(text) => {
                tests.push("(m.type = 'text' AND m.value = ?)");
                parameters.push(text.as_str().into());
            }
            // Compared as doubles, as the reference and PostgreSQL do (SQLite would compare
            // an integer beyond 2^53 with a real exactly).
            ScalarValue::Number(number) => {
                tests.push("(m.type IN ('integer', 'real') AND CAST(m.value AS REAL) = ?)");
                parameters.push((*number).into());
            }
            ScalarValue::Bool(true) => tests.push("m.type = 'true'"),
            ScalarValue::Bool(false) => tests.push("m.type = 'false'"),
        }
    }
    if tests.is_empty() {
        return Expr::cust("1 = 0");
    }
    custom(
        backend,
        format!(
            "EXISTS (SELECT 1 FROM json_each(\"memories\".\"metadata\") AS m \
             WHERE m.key = ? AND ({}))",
            tests.join(" OR ")
        ),
        parameters,
    )
}

fn metadata_equals_on_postgres(key: &str, value: &ScalarValue) -> SimpleExpr {
    let backend = DbBackend::Postgres;
    let field = "(\"memories\".\"metadata\")::jsonb";
    match value {
        ScalarValue::Text(text) => custom(
            backend,
            never_null(format!(
                "jsonb_typeof({field} -> ?) = 'string' AND ({field} ->> ?) = ?"
            )),
            [key.to_string(), key.to_string(), text.clone()],
        ),
        ScalarValue::Number(number) => custom(
            backend,
            // CASE, not AND: PostgreSQL may evaluate either side of an AND first, and the
            // cast fails on text.
            never_null(format!(
                "CASE WHEN jsonb_typeof({field} -> ?) = 'number' \
                 THEN ({field} ->> ?)::float8 = ? ELSE FALSE END"
            )),
            [Value::from(key), Value::from(key), Value::from(*number)],
        ),
        ScalarValue::Bool(flag) => custom(
            backend,
            never_null(format!("({field} -> ?) = '{flag}'::jsonb")),
            [key.to_string()],
        ),
    }
}

/// A custom SQL expression written with `?` for each bound value, in order. sea-query reads
/// placeholders as the backend writes them (PostgreSQL: `$1`, `$2`, … numbered within the
/// expression), so they are numbered here for PostgreSQL.
pub(crate) fn custom<V: Into<Value>>(
    backend: DbBackend,
    sql: impl AsRef<str>,
    values: impl IntoIterator<Item = V>,
) -> SimpleExpr {
    let sql = sql.as_ref();
    let sql = match backend {
        DbBackend::Postgres => {
            let mut numbered = String::with_capacity(sql.len() + 8);
            let mut position = 0;
            for character in sql.chars() {
                if character == '?' {
                    position += 1;
                    numbered.push_str(&format!("${position}"));
                } else {
                    numbered.push(character);
                }
            }
            numbered
        }
        _ => sql.to_string(),
    };
    Expr::cust_with_values(sql, values.into_iter().map(Into::into))
}

#[cfg(test)]
mod tests {
    use super::*;
    use sea_orm::sea_query::{PostgresQueryBuilder, Query, SqliteQueryBuilder};

    fn rendered(filter: serde_json::Value, backend: DbBackend) -> String {
        let filter = engram_core::memory_filter::parse_memory_filter(&filter, "filters")
            .expect("a valid filter");
        let statement = Query::select()
            .expr(Expr::val(1))
            .from(memories::Entity)
            .cond_where(memory_filter_condition(&filter, backend))
            .to_owned();
        match backend {
            DbBackend::Postgres => statement.to_string(PostgresQueryBuilder),
            _ => statement.to_string(SqliteQueryBuilder),
        }
    }

    /// Every bound value reaches the statement on both backends (PostgreSQL numbers its
    /// placeholders; a `?` left in would be a syntax error there).
    #[test]
    fn bound_values_reach_the_statement_on_both_backends() {
        let filter = serde_json::json!({
            "text": "Oolong",
            "categories": {"in": ["food", "travel"], "contains": "FIN"},
            "metadata": {"topic": {"in": ["tea", 2, true]}, "note": {"contains": "x"}},
            "app_id": "web"
        });
        for backend in [DbBackend::Postgres, DbBackend::Sqlite] {
            let sql = rendered(filter.clone(), backend);
            assert!(!sql.contains('?'), "{sql}");
            assert!(!sql.contains('$'), "{sql}");
            for value in [
                "'oolong'", "'food'", "'travel'", "'fin'", "'tea'", "'topic'", "'web'", "'app_id'",
            ] {
                assert!(sql.contains(value), "{value} missing from {sql}");
            }
        }
    }
}
