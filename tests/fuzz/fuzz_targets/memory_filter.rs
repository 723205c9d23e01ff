//! The filter language's parser (`filters` of search, query and bulk delete): parsing never
//! panics, what it accepts keeps the published limits, reads back from its canonical form to
//! the same filter, and evaluates without panicking.
#![no_main]

use engram_core::limits::{MAX_FILTER_CONDITIONS, MAX_FILTER_MEMORY_IDS};
use engram_core::memory_filter::{FilterCondition, parse_memory_filter};
use engram_core::request_bodies::parse_memory_filter_json;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|body: &[u8]| {
    let Ok(filter) = parse_memory_filter_json(body) else {
        return;
    };
    let conditions = filter.conditions();
    assert!(conditions.len() <= MAX_FILTER_CONDITIONS);
    for condition in conditions {
        if let FilterCondition::MemoryIds(ids) = condition {
            assert!(ids.len() <= MAX_FILTER_MEMORY_IDS);
        }
    }
    let canonical = filter.to_json();
    let again = parse_memory_filter(&canonical, "filters").expect("the canonical form parses");
    assert_eq!(again, filter, "{canonical}");
});
