//! What a client hands back or presents before anything is verified: paging cursors and a
//! signed token's header. Parsing never panics; only an HS256 header names a key.
#![no_main]

use engram_core::cursors::{parse_audit_cursor, parse_memory_cursor, parse_message_cursor};
use engram_core::token_header::{MAX_HEADER_SEGMENT_BYTES, claimed_hs256_key};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    if let Ok(id) = parse_memory_cursor(text, "cursor") {
        assert_eq!(parse_memory_cursor(&id.to_string(), "cursor").ok(), Some(id));
    }
    let _ = parse_message_cursor(text, "after");
    if let Ok(sequence) = parse_audit_cursor(text, "cursor") {
        assert!(sequence >= 0);
    }
    if let Some(claimed) = claimed_hs256_key(text) {
        assert!(!claimed.key_id.is_empty());
        assert!(text.split('.').next().is_some_and(|header| header.len() <= MAX_HEADER_SEGMENT_BYTES));
        assert_eq!(text.split('.').count(), 3);
    }
});
