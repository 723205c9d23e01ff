//! The personal-data detector on any text: never a panic, findings in order, apart and on
//! character boundaries, and masking replaces exactly them.
#![no_main]

use engram_core::pii::{find_pii, mask_pii};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let findings = find_pii(text);
    for finding in &findings {
        assert!(finding.start < finding.end && finding.end <= text.len());
        assert!(text.is_char_boundary(finding.start) && text.is_char_boundary(finding.end));
    }
    for pair in findings.windows(2) {
        assert!(pair[0].end <= pair[1].start);
    }
    let (masked, masked_findings) = mask_pii(text);
    assert_eq!(masked_findings, findings);
    if findings.is_empty() {
        assert_eq!(masked, text);
    }
});
