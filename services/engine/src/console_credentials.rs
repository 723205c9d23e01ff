//! Console credentials: password hashing (argon2id) and console session tokens (HS256 JWTs
//! naming a server-side session, every registered claim checked, keys rotated by version).

use argon2::password_hash::{Output, ParamsString, PasswordHash, SaltString};
use argon2::{Algorithm, Argon2, Block, Params, Version};
use chrono::Utc;
use engram_core::ids::ConsoleAccountId;
use jsonwebtoken::{DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};
use std::cell::RefCell;
use std::sync::Arc;
use std::time::Duration;

/// Shortest password a console account may choose, in characters.
pub const MIN_PASSWORD_CHARS: usize = 12;
/// Longest password (and e-mail address) a console sign-in reads: anything longer is refused
/// before it reaches the deliberately slow hash.
pub const MAX_PASSWORD_BYTES: usize = 1024;
pub const MAX_EMAIL_BYTES: usize = 320;
/// Longest invitation token a link can carry; a longer one is unknown.
pub const MAX_INVITATION_TOKEN_BYTES: usize = 128;

/// What is wrong with a password a person chose for a new account.
pub fn new_password_errors(password: &str) -> Vec<engram_core::FieldError> {
    if password.chars().count() >= MIN_PASSWORD_CHARS && password.len() <= MAX_PASSWORD_BYTES {
        return Vec::new();
    }
    vec![engram_core::FieldError::new(
        "password",
        format!(
            "choose a password of at least {MIN_PASSWORD_CHARS} characters (at most {MAX_PASSWORD_BYTES} bytes)"
        ),
    )]
}

/// Enough of an e-mail address to catch typing mistakes; whether it works shows when the
/// invitee follows the link.
pub fn looks_like_email(email: &str) -> bool {
    email.len() <= MAX_EMAIL_BYTES
        && !email.chars().any(char::is_whitespace)
        && email
            .split_once('@')
            .is_some_and(|(local, domain)| !local.is_empty() && domain.contains('.'))
}

/// argon2id with the OWASP-recommended minimum (19 MiB, 2 passes, 1 lane).
const MEMORY_KIB: u32 = 19 * 1024;
const PASSES: u32 = 2;
const LANES: u32 = 1;
/// The most memory a stored hash may ask for when it is verified: a planted hash with a
/// huge cost must not make a sign-in allocate gigabytes.
const MAX_VERIFY_MEMORY_KIB: u32 = 64 * 1024;
/// …nor tie up a password worker for minutes.
const MAX_VERIFY_PASSES: u32 = 10;
const MAX_VERIFY_LANES: u32 = 4;

fn password_params() -> Params {
    Params::new(MEMORY_KIB, PASSES, LANES, None).unwrap_or_default()
}

thread_local! {
    /// argon2's working memory, allocated once per hashing thread and reused by every hash
    /// on it: the process holds one block per password worker, however many sign-ins come
    /// (argon2's own allocation per hash fragments the heap and grows it with each one).
    static WORKING_MEMORY: RefCell<Vec<Block>> = const { RefCell::new(Vec::new()) };
}

/// `hasher`'s hash of `password` with `salt` into `output`, in this thread's memory.
fn hash_into(
    hasher: &Argon2<'_>,
    password: &[u8],
    salt: &[u8],
    output: &mut [u8],
) -> Result<(), argon2::Error> {
    WORKING_MEMORY.with(|memory| {
        let mut memory = memory.borrow_mut();
        let needed = hasher.params().block_count();
        if memory.len() < needed {
            memory.resize(needed, Block::new());
        }
        hasher.hash_password_into_with_memory(password, salt, output, &mut memory[..needed])
    })
}

pub fn hash_password(password: &str) -> Result<String, String> {
    let fail = |error: &dyn std::fmt::Display| format!("password hashing failed: {error}");
    let salt = SaltString::generate(&mut rand::rngs::OsRng);
    let mut salt_bytes = [0u8; 64];
    let raw_salt = salt
        .as_salt()
        .decode_b64(&mut salt_bytes)
        .map_err(|error| fail(&error))?;
    let params = password_params();
    let hasher = Argon2::new(Algorithm::Argon2id, Version::V0x13, params.clone());
    let mut output = [0u8; Params::DEFAULT_OUTPUT_LEN];
    hash_into(&hasher, password.as_bytes(), raw_salt, &mut output).map_err(|error| fail(&error))?;
    let phc = PasswordHash {
        algorithm: Algorithm::Argon2id.ident(),
        version: Some(Version::V0x13.into()),
        params: ParamsString::try_from(&params).map_err(|error| fail(&error))?,
        salt: Some(salt.as_salt()),
        hash: Some(Output::new(&output).map_err(|error| fail(&error))?),
    };
    Ok(phc.to_string())
}

/// Whether `password` is the one `stored_hash` (a PHC string) was made from, compared in
/// constant time. Hashes made with other parameters (older, or stronger) still verify.
pub fn verify_password(password: &str, stored_hash: &str) -> bool {
    let Ok(parsed) = PasswordHash::new(stored_hash) else {
        return false;
    };
    let (Ok(algorithm), Some(expected), Some(salt)) = (
        Algorithm::try_from(parsed.algorithm),
        parsed.hash,
        parsed.salt,
    ) else {
        return false;
    };
    let version = match parsed.version.map(Version::try_from).transpose() {
        Ok(version) => version.unwrap_or_default(),
        Err(_) => return false,
    };
    let Ok(params) = Params::try_from(&parsed) else {
        return false;
    };
    if params.m_cost() > MAX_VERIFY_MEMORY_KIB
        || params.t_cost() > MAX_VERIFY_PASSES
        || params.p_cost() > MAX_VERIFY_LANES
    {
        return false;
    }
    let mut salt_bytes = [0u8; 64];
    let Ok(raw_salt) = salt.decode_b64(&mut salt_bytes) else {
        return false;
    };
    let hasher = Argon2::new(algorithm, version, params);
    let mut computed = vec![0u8; expected.len()];
    if hash_into(&hasher, password.as_bytes(), raw_salt, &mut computed).is_err() {
        return false;
    }
    // `Output`'s equality is constant time.
    Output::new(&computed).is_ok_and(|computed| computed == expected)
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
        let kid = engram_core::token_header::claimed_hs256_key(token)?.key_id;
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

    /// A device token for `account_id`: held by a browser that signed in, so its sign-ins
    /// are throttled only by its own failures. Signed like session tokens, with its own
    /// audience and type, so neither can stand in for the other.
    pub fn issue_device(&self, account_id: ConsoleAccountId) -> Result<String, String> {
        let now = Utc::now().timestamp();
        let claims = ConsoleDeviceClaims {
            iss: CONSOLE_TOKEN_ISSUER.to_string(),
            aud: CONSOLE_DEVICE_AUDIENCE.to_string(),
            sub: account_id.to_string(),
            typ: CONSOLE_DEVICE_TYPE.to_string(),
            did: uuid::Uuid::now_v7().to_string(),
            iat: now,
            nbf: now,
            exp: now + CONSOLE_DEVICE_LIFETIME.as_secs() as i64,
        };
        let mut header = Header::new(jsonwebtoken::Algorithm::HS256);
        header.kid = Some(self.signing_key_id.clone());
        jsonwebtoken::encode(&header, &claims, &self.encoding)
            .map_err(|error| format!("cannot sign a device token: {error}"))
    }

    /// The account and device id of a valid, unexpired device token; `None` otherwise.
    pub fn verify_device(&self, token: &str) -> Option<(ConsoleAccountId, String)> {
        let kid = engram_core::token_header::claimed_hs256_key(token)?.key_id;
        let (_, decoding_key) = self.decoding.iter().find(|(key_id, _)| *key_id == kid)?;
        let mut validation = Validation::new(jsonwebtoken::Algorithm::HS256);
        validation.set_issuer(&[CONSOLE_TOKEN_ISSUER]);
        validation.set_audience(&[CONSOLE_DEVICE_AUDIENCE]);
        validation.set_required_spec_claims(&["iss", "aud", "sub", "exp", "nbf"]);
        validation.validate_nbf = true;
        let decoded =
            jsonwebtoken::decode::<ConsoleDeviceClaims>(token, decoding_key, &validation).ok()?;
        if decoded.claims.typ != CONSOLE_DEVICE_TYPE {
            return None;
        }
        Some((decoded.claims.sub.parse().ok()?, decoded.claims.did))
    }
}

const CONSOLE_DEVICE_AUDIENCE: &str = "engram-console-device";
const CONSOLE_DEVICE_TYPE: &str = "console_device";
/// How long a browser stays a known device of an account without signing in again.
pub const CONSOLE_DEVICE_LIFETIME: Duration = Duration::from_secs(180 * 24 * 3_600);

#[derive(Debug, Serialize, Deserialize)]
struct ConsoleDeviceClaims {
    iss: String,
    aud: String,
    sub: String,
    typ: String,
    /// The device: one per successful sign-in of a browser.
    did: String,
    iat: i64,
    nbf: i64,
    exp: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_device_token_is_not_a_session_token_and_names_its_account() {
        let keys = ConsoleSessionKeys::new(b"device test secret", Duration::from_secs(60));
        let account = ConsoleAccountId::generate();
        let device = keys.issue_device(account).unwrap();
        let (verified_account, device_id) = keys.verify_device(&device).unwrap();
        assert_eq!(verified_account, account);
        assert!(!device_id.is_empty());
        assert!(
            keys.verify(&device).is_none(),
            "a device token opens no session"
        );
        let session = keys.issue(account, uuid::Uuid::now_v7()).unwrap();
        assert!(keys.verify_device(&session).is_none());
        let other_keys = ConsoleSessionKeys::new(b"another secret", Duration::from_secs(60));
        assert!(other_keys.verify_device(&device).is_none());
    }

    #[test]
    fn password_round_trip() {
        let hash = hash_password("correct horse").unwrap();
        assert!(hash.starts_with("$argon2id$"));
        assert!(verify_password("correct horse", &hash));
        assert!(!verify_password("wrong horse", &hash));
    }

    #[test]
    fn hashes_of_the_argon2_crate_and_ours_verify_each_other() {
        use argon2::password_hash::{PasswordHasher, PasswordVerifier};
        let stock = Argon2::new(Algorithm::Argon2id, Version::V0x13, password_params());
        let salt = SaltString::generate(&mut rand::rngs::OsRng);
        let stored_before = stock
            .hash_password(b"correct horse", &salt)
            .unwrap()
            .to_string();
        assert!(verify_password("correct horse", &stored_before));
        assert!(!verify_password("correct horsf", &stored_before));
        let ours = hash_password("correct horse").unwrap();
        assert!(
            stock
                .verify_password(b"correct horse", &PasswordHash::new(&ours).unwrap())
                .is_ok()
        );
        // A planted hash asking for 1 GiB is refused, not computed.
        for (ours_part, greedy_part) in [("m=19456", "m=1048576"), ("t=2", "t=100000")] {
            let greedy = ours.replace(ours_part, greedy_part);
            assert_ne!(greedy, ours);
            assert!(!verify_password("correct horse", &greedy), "{greedy_part}");
        }
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
