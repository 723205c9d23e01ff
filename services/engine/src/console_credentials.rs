//! Console credentials: password hashing (argon2id) and console session tokens (HS256 JWTs
//! naming a server-side session, every registered claim checked, keys rotated by version).

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::{Algorithm, Argon2, Params, Version};
use chrono::Utc;
use engram_core::ids::ConsoleAccountId;
use jsonwebtoken::{DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;

/// argon2id with the OWASP-recommended minimum (19 MiB, 2 passes, 1 lane).
fn password_hasher() -> Argon2<'static> {
    let params = Params::new(19 * 1024, 2, 1, None).unwrap_or_default();
    Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
}

pub fn hash_password(password: &str) -> Result<String, String> {
    let salt = SaltString::generate(&mut rand::rngs::OsRng);
    password_hasher()
        .hash_password(password.as_bytes(), &salt)
        .map(|hash| hash.to_string())
        .map_err(|error| format!("password hashing failed: {error}"))
}

pub fn verify_password(password: &str, stored_hash: &str) -> bool {
    match PasswordHash::new(stored_hash) {
        Ok(parsed) => password_hasher()
            .verify_password(password.as_bytes(), &parsed)
            .is_ok(),
        Err(_) => false,
    }
}

const CONSOLE_TOKEN_ISSUER: &str = "engram";
const CONSOLE_TOKEN_AUDIENCE: &str = "engram-console";
const CONSOLE_TOKEN_TYPE: &str = "console_session";

#[derive(Debug, Serialize, Deserialize)]
struct ConsoleSessionClaims {
    iss: String,
    aud: String,
    sub: String,
    typ: String,
    /// The server-side session: looked up on every request, so logout ends it at once.
    sid: String,
    iat: i64,
    nbf: i64,
    exp: i64,
}

/// The key id of version `version` of the console session signing key (`console-v1`, …);
/// tokens carrying an id this server does not know are refused.
fn console_key_id(version: u32) -> String {
    format!("console-v{version}")
}

/// Signs console access tokens (short-lived JWTs naming a server-side session) with the
/// current key and verifies them with the current or the previous one, each bound to its
/// key id: rotating the key does not sign anyone out.
#[derive(Clone)]
pub struct ConsoleSessionKeys {
    signing_key_id: String,
    encoding: Arc<EncodingKey>,
    /// (key id, key): the current key first, then the previous one during a rotation.
    decoding: Arc<Vec<(String, DecodingKey)>>,
    lifetime: Duration,
}

impl std::fmt::Debug for ConsoleSessionKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConsoleSessionKeys")
            .field("signing_key_id", &self.signing_key_id)
            .field("lifetime", &self.lifetime)
            .finish_non_exhaustive()
    }
}

/// A verified console access token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConsoleSessionClaim {
    pub account_id: ConsoleAccountId,
    pub session_id: uuid::Uuid,
}

impl ConsoleSessionKeys {
    /// Version 1 only. `lifetime` is the access token's: the session itself lasts as long as
    /// its refresh token keeps being rotated within the session's expiry.
    pub fn new(secret: &[u8], lifetime: Duration) -> Self {
        Self::rotating(1, secret, None, lifetime)
    }

    /// Signs with key `version` (`secret`); also accepts tokens of `version - 1` signed with
    /// `previous_secret`, for the minutes they have left.
    pub fn rotating(
        version: u32,
        secret: &[u8],
        previous_secret: Option<&[u8]>,
        lifetime: Duration,
    ) -> Self {
        let mut decoding = vec![(console_key_id(version), DecodingKey::from_secret(secret))];
        if let Some(previous_secret) = previous_secret
            && version > 1
        {
            decoding.push((
                console_key_id(version - 1),
                DecodingKey::from_secret(previous_secret),
            ));
        }
        Self {
            signing_key_id: console_key_id(version),
            encoding: Arc::new(EncodingKey::from_secret(secret)),
            decoding: Arc::new(decoding),
            lifetime,
        }
    }

    pub fn issue(
        &self,
        account_id: ConsoleAccountId,
        session_id: uuid::Uuid,
    ) -> Result<String, String> {
        let now = Utc::now().timestamp();
        let claims = ConsoleSessionClaims {
            iss: CONSOLE_TOKEN_ISSUER.to_string(),
            aud: CONSOLE_TOKEN_AUDIENCE.to_string(),
            sub: account_id.to_string(),
            typ: CONSOLE_TOKEN_TYPE.to_string(),
            sid: session_id.to_string(),
            iat: now,
            nbf: now,
            exp: now + self.lifetime.as_secs() as i64,
        };
        let mut header = Header::new(jsonwebtoken::Algorithm::HS256);
        header.kid = Some(self.signing_key_id.clone());
        jsonwebtoken::encode(&header, &claims, &self.encoding)
            .map_err(|error| format!("cannot sign console session: {error}"))
    }

    /// The account and session of a valid, unexpired console access token; `None` otherwise
    /// (the caller still checks that the session is live).
    pub fn verify(&self, token: &str) -> Option<ConsoleSessionClaim> {
        let header = jsonwebtoken::decode_header(token).ok()?;
        let kid = header.kid?;
        let (_, decoding_key) = self.decoding.iter().find(|(key_id, _)| *key_id == kid)?;
        // The algorithm is pinned: a token claiming any other `alg` (or `none`) is rejected.
        let mut validation = Validation::new(jsonwebtoken::Algorithm::HS256);
        validation.set_issuer(&[CONSOLE_TOKEN_ISSUER]);
        validation.set_audience(&[CONSOLE_TOKEN_AUDIENCE]);
        validation.set_required_spec_claims(&["iss", "aud", "sub", "exp", "nbf"]);
        validation.validate_nbf = true;
        validation.leeway = 5;
        let decoded =
            jsonwebtoken::decode::<ConsoleSessionClaims>(token, decoding_key, &validation).ok()?;
        if decoded.claims.typ != CONSOLE_TOKEN_TYPE {
            return None;
        }
        Some(ConsoleSessionClaim {
            account_id: decoded.claims.sub.parse().ok()?,
            session_id: decoded.claims.sid.parse().ok()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn password_round_trip() {
        let hash = hash_password("correct horse").unwrap();
        assert!(hash.starts_with("$argon2id$"));
        assert!(verify_password("correct horse", &hash));
        assert!(!verify_password("wrong horse", &hash));
    }

    #[test]
    fn console_tokens_verify_only_with_the_same_key() {
        let keys = ConsoleSessionKeys::new(b"first secret", Duration::from_secs(60));
        let other = ConsoleSessionKeys::new(b"other secret", Duration::from_secs(60));
        let account = ConsoleAccountId::generate();
        let session = uuid::Uuid::now_v7();
        let token = keys.issue(account, session).unwrap();
        assert_eq!(
            keys.verify(&token),
            Some(ConsoleSessionClaim {
                account_id: account,
                session_id: session
            })
        );
        assert_eq!(other.verify(&token), None);
        assert_eq!(keys.verify("not.a.token"), None);
    }

    #[test]
    fn a_rotated_key_accepts_the_previous_version_only() {
        let lifetime = Duration::from_secs(60);
        let version_one = ConsoleSessionKeys::new(b"key one", lifetime);
        let version_two = ConsoleSessionKeys::rotating(2, b"key two", Some(b"key one"), lifetime);
        let version_three =
            ConsoleSessionKeys::rotating(3, b"key three", Some(b"key two"), lifetime);
        let account = ConsoleAccountId::generate();
        let session = uuid::Uuid::now_v7();
        let old_token = version_one.issue(account, session).unwrap();
        let new_token = version_two.issue(account, session).unwrap();
        assert!(
            version_two.verify(&old_token).is_some(),
            "previous key still verifies"
        );
        assert!(version_two.verify(&new_token).is_some());
        assert!(version_three.verify(&new_token).is_some());
        assert_eq!(
            version_three.verify(&old_token),
            None,
            "two versions back is refused"
        );
        assert_eq!(version_one.verify(&new_token), None, "unknown kid");
        // A token signed with key one but naming kid console-v2 fails: ids are bound to keys.
        let mut header = Header::new(jsonwebtoken::Algorithm::HS256);
        header.kid = Some("console-v2".to_string());
        let now = Utc::now().timestamp();
        let claims = ConsoleSessionClaims {
            iss: CONSOLE_TOKEN_ISSUER.to_string(),
            aud: CONSOLE_TOKEN_AUDIENCE.to_string(),
            sub: account.to_string(),
            typ: CONSOLE_TOKEN_TYPE.to_string(),
            sid: session.to_string(),
            iat: now,
            nbf: now,
            exp: now + 60,
        };
        let mislabeled =
            jsonwebtoken::encode(&header, &claims, &EncodingKey::from_secret(b"key one")).unwrap();
        assert_eq!(version_two.verify(&mislabeled), None);
    }

    #[test]
    fn unsigned_tokens_are_rejected() {
        let keys = ConsoleSessionKeys::new(b"secret", Duration::from_secs(60));
        let now = Utc::now().timestamp();
        let payload = serde_json::json!({"iss":"engram","aud":"engram-console","sub":ConsoleAccountId::generate().to_string(),
            "typ":"console_session","sid":uuid::Uuid::now_v7().to_string(),"iat":now,"nbf":now,"exp":now+60});
        use base64_like::encode;
        let unsigned = format!(
            "{}.{}.",
            encode(br#"{"alg":"none","typ":"JWT"}"#),
            encode(payload.to_string().as_bytes())
        );
        assert_eq!(keys.verify(&unsigned), None);
    }

    mod base64_like {
        /// URL-safe base64 without padding, enough to forge a test token.
        pub fn encode(bytes: &[u8]) -> String {
            const ALPHABET: &[u8; 64] =
                b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
            let mut out = String::new();
            for chunk in bytes.chunks(3) {
                let b = [
                    chunk[0],
                    *chunk.get(1).unwrap_or(&0),
                    *chunk.get(2).unwrap_or(&0),
                ];
                let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
                let chars = chunk.len() + 1;
                for i in 0..chars {
                    out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
                }
            }
            out
        }
    }
}
