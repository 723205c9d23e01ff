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
