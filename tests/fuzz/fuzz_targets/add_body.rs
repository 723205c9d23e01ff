//! The JSON body of `POST /v1/memories`: parsing never panics, and what it accepts keeps
//! the documented limits (1–100 memories, content 1 byte – 32 KiB).
#![no_main]

use engram_core::limits::{MAX_MEMORIES_PER_ADD, MAX_CONTENT_BYTES};
use engram_core::request_bodies::parse_add_memories_json;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|body: &[u8]| {
    if let Ok(parsed) = parse_add_memories_json(body) {
        assert!((1..=MAX_MEMORIES_PER_ADD).contains(&parsed.memories.len()));
        for memory in &parsed.memories {
            assert!(!memory.content.is_empty());
            assert!(memory.content.len() <= MAX_CONTENT_BYTES);
        }
        if let Some(vectors) = &parsed.client_vectors {
            assert_eq!(vectors.len(), parsed.memories.len());
        }
    }
});
