//! `POST /v1/eval-sets/{id}/cases/import`: JSONL evaluation cases. Parsing never panics,
//! and an accepted import keeps the documented limits.
#![no_main]

use engram_core::request_bodies::{MAX_CASES_PER_REQUEST, MAX_EXPECTED_PER_CASE, parse_jsonl_cases};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    if let Ok(cases) = parse_jsonl_cases(text) {
        assert!((1..=MAX_CASES_PER_REQUEST).contains(&cases.len()));
        for case in &cases {
            assert!(!case.query.trim().is_empty());
            assert!(!case.expected_memory_ids.is_empty() || !case.expected_contents.is_empty());
            assert!(case.expected_memory_ids.len() <= MAX_EXPECTED_PER_CASE);
        }
    }
});
