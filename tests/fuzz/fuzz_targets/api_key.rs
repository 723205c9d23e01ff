//! A presented API key (`Authorization: Bearer …`): parsing never panics, and what it
//! accepts is exactly the text it was given, split at its separators.
#![no_main]

use engram_core::access::{api_key_public_id, parse_api_key};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|presented: &str| {
    let public_id = api_key_public_id(presented);
    if let Some(parsed) = parse_api_key(presented) {
        assert!(presented.contains(parsed.public_id));
        assert!(presented.contains(parsed.secret));
        assert_eq!(public_id, Some(parsed.public_id));
    }
});
