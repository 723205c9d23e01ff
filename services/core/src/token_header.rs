//! The header of a signed token (a compact JWS: `header.claims.signature`), read before any
//! signature check to choose the verifying key: bounded, never panics, HS256 only.

use base64::Engine as _;
use serde::Deserialize;

/// Longest header segment read (a real one is under 100 bytes); longer is not a token of ours.
pub const MAX_HEADER_SEGMENT_BYTES: usize = 1_024;

/// What the header claims, unverified: only good for picking the key that then verifies it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClaimedKey {
    pub key_id: String,
}

#[derive(Deserialize)]
struct RawHeader {
    alg: String,
    kid: Option<String>,
}

/// The `kid` of an HS256 compact JWS; `None` for anything else (other algorithms, `none`, a
/// missing key id, a malformed or oversized header, the wrong number of segments).
pub fn claimed_hs256_key(token: &str) -> Option<ClaimedKey> {
    let mut segments = token.split('.');
    let (Some(header), Some(_claims), Some(_signature), None) = (
        segments.next(),
        segments.next(),
        segments.next(),
        segments.next(),
    ) else {
        return None;
    };
    if header.len() > MAX_HEADER_SEGMENT_BYTES {
        return None;
    }
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(header)
        .ok()?;
    let header: RawHeader = serde_json::from_slice(&bytes).ok()?;
    if header.alg != "HS256" {
        return None;
    }
    let key_id = header
        .kid
        .filter(|kid| !kid.is_empty() && kid.len() <= 256)?;
    Some(ClaimedKey { key_id })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn segment(json: &str) -> String {
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json)
    }

    #[test]
    fn only_an_hs256_header_with_a_key_id_names_a_key() {
        let token = |header: &str| format!("{}.e30.c2ln", segment(header));
        assert_eq!(
            claimed_hs256_key(&token(r#"{"alg":"HS256","typ":"JWT","kid":"p.3"}"#)),
            Some(ClaimedKey {
                key_id: "p.3".into()
            })
        );
        for header in [
            r#"{"alg":"none","kid":"p.3"}"#,
            r#"{"alg":"RS256","kid":"p.3"}"#,
            r#"{"alg":"HS256"}"#,
            r#"{"alg":"HS256","kid":""}"#,
            "not json",
        ] {
            assert_eq!(claimed_hs256_key(&token(header)), None, "{header}");
        }
        assert_eq!(claimed_hs256_key("a.b"), None);
        assert_eq!(claimed_hs256_key("a.b.c.d"), None);
        assert_eq!(
            claimed_hs256_key(&format!("{}.e30.x", "A".repeat(2_000))),
            None
        );
    }
}
