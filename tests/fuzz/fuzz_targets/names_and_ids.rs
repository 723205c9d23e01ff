//! The identifiers and names a request carries (`user_id`, `key`, file names, formats,
//! report days): parsing never panics, and what is accepted keeps its documented limits.
#![no_main]

use engram_core::ExternalId;
use engram_core::files::{FileFormat, FileName};
use engram_core::limits::MAX_EXTERNAL_ID_CHARS;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: (&str, &str)| {
    let (text, media_type) = input;
    if let Ok(id) = ExternalId::parse(text) {
        assert!(id.as_str().chars().count() <= MAX_EXTERNAL_ID_CHARS);
        assert!(!id.as_str().chars().any(char::is_control));
    }
    if let Ok(name) = FileName::parse(text) {
        assert!(!name.as_str().contains(['/', '\\']));
        let _ = FileFormat::detect(media_type, &name);
    }
    let _ = FileFormat::parse(text);
    if let Ok(day) = chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d") {
        let _ = engram_core::validation::check_report_day("from", day);
    }
});
