//! The JSON body of `POST /v1/memories/search`:
//! parsing never panics, and what it accepts keeps the documented limits.
#![no_main]

use engram_core::limits::{MAX_FILTER_CONDITIONS, MAX_QUERY_BYTES, MAX_TOP_K};
use engram_core::request_bodies::parse_search_json;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|body: &[u8]| {
    if let Ok(parsed) = parse_search_json(body) {
        let request = &parsed.search.request;
        assert!(!request.query.trim().is_empty() && request.query.len() <= MAX_QUERY_BYTES);
        assert!((1..=MAX_TOP_K).contains(&request.top_k));
        assert!((0.0..=1.0).contains(&request.min_score));
        assert!(request.filters.conditions().len() <= MAX_FILTER_CONDITIONS);
    }
});
