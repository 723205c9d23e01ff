//! The documented input limits of the public API (see API.md, "Limits"). One place, so the
//! validation code, the OpenAPI document and the README agree.

/// Largest accepted request body, in bytes.
pub const MAX_REQUEST_BODY_BYTES: usize = 1024 * 1024;
/// Largest memory `content`, in bytes of UTF-8.
pub const MAX_CONTENT_BYTES: usize = 32 * 1024;
/// Largest `metadata` object, serialized as JSON, in bytes.
pub const MAX_METADATA_BYTES: usize = 16 * 1024;
/// Longest external id (`user_id`, `agent_id`, `session_id`, `key`), in characters.
pub const MAX_EXTERNAL_ID_CHARS: usize = 255;
/// Memories accepted in one add call.
pub const MAX_MEMORIES_PER_ADD: usize = 100;
/// Largest `top_k` for search.
pub const MAX_TOP_K: usize = 100;
/// Default `top_k` for search.
pub const DEFAULT_TOP_K: usize = 10;
/// Largest list page.
pub const MAX_LIST_LIMIT: u64 = 500;
/// Default list page.
pub const DEFAULT_LIST_LIMIT: u64 = 50;
/// Most categories on one memory.
pub const MAX_CATEGORIES: usize = 32;
/// Longest category, in characters.
pub const MAX_CATEGORY_CHARS: usize = 64;
/// Longest search query, in bytes.
pub const MAX_QUERY_BYTES: usize = 8 * 1024;
/// Longest change reason, in characters.
pub const MAX_REASON_CHARS: usize = 1024;
/// Most nodes (conditions and AND/OR/NOT operators) in one memory filter.
pub const MAX_FILTER_CONDITIONS: usize = 64;
/// Longest text value in a memory filter (an id, a category, a metadata value, a text
/// to look for), in bytes.
pub const MAX_FILTER_VALUE_BYTES: usize = 1024;
/// Deepest nesting of AND/OR/NOT in one memory filter.
pub const MAX_FILTER_DEPTH: usize = 8;
/// Most values in one `in` / `all` list of a memory filter.
pub const MAX_FILTER_LIST_ITEMS: usize = 100;
/// How far in the future a memory's `occurred_at` may lie (clock skew), in seconds.
pub const MAX_OCCURRED_AT_SKEW_SECONDS: i64 = 300;
/// Most values of every `in` / `all` list of one memory filter together.
pub const MAX_FILTER_VALUES: usize = 1_000;
/// Most ids in one filter's `memory_ids`.
pub const MAX_FILTER_MEMORY_IDS: usize = 1_000;

/// The first day a report (usage, costs, recall metrics) may be asked about.
pub const EARLIEST_REPORT_DAY: (i32, u32, u32) = (1970, 1, 1);
/// The last day a report may be asked about.
pub const LATEST_REPORT_DAY: (i32, u32, u32) = (9999, 12, 31);

/// Evaluation cases accepted in one request.
pub const MAX_CASES_PER_REQUEST: usize = 1_000;
/// Expected ids or texts of one evaluation case, each.
pub const MAX_EXPECTED_PER_CASE: usize = 100;

/// A list page of 1..=[`MAX_LIST_LIMIT`] memories, `field` named as the caller's door names
/// it. The list use case holds every door to it.
pub fn list_limit_errors(field: &str, limit: i64) -> Vec<crate::FieldError> {
    if (1..=MAX_LIST_LIMIT as i64).contains(&limit) {
        return Vec::new();
    }
    vec![crate::FieldError::new(
        field,
        format!("must be between 1 and {MAX_LIST_LIMIT}, got {limit}"),
    )]
}
