//! Credentials: the `ProjectPrincipal` extractor that turns a bearer API key into the only
//! `ProjectScope` a handler can use, console password hashing (argon2id) and console
//! session tokens (HS256 JWT with every registered claim checked).

use crate::problem::{ApiError, ProblemKind};
use crate::state::CredentialVerifier;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::{Algorithm, Argon2, Params, Version};
use axum::extract::{FromRef, FromRequestParts};
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use chrono::Utc;
use engram_core::audit::{Actor, ActorKind};
use engram_core::ids::ConsoleAccountId;
use engram_core::permissions::PrincipalKind;
use engram_core::{ApiScope, ApiScopes};
use jsonwebtoken::{DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;

/// A request authenticated with a project API key or an end-user token: the engine's
/// principal, the only source of the project scope a handler can use; bodies and query
/// strings never choose the project.
#[derive(Clone, Debug)]
pub struct ProjectPrincipal {
    principal: engram_core::Principal,
}

/// Where a request came from, for the audit log.
#[derive(Clone, Debug, Default)]
pub struct RequestOrigin {
    pub ip: Option<String>,
    pub user_agent: Option<String>,
    pub request_id: Option<String>,
}

impl RequestOrigin {
    pub fn of(parts: &Parts) -> Self {
        let header = |name: &str| {
            parts
                .headers
                .get(name)
                .and_then(|value| value.to_str().ok())
                .map(|value| value.chars().take(256).collect::<String>())
        };
        Self {
            ip: parts
                .extensions
                .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
                .map(|axum::extract::ConnectInfo(address)| address.ip().to_string()),
            user_agent: header("user-agent"),
            request_id: header("x-request-id"),
        }
    }

    pub fn actor(&self, kind: ActorKind, id: String) -> Actor {
        Actor {
            kind,
            id,
            ip: self.ip.clone(),
            user_agent: self.user_agent.clone(),
            request_id: self.request_id.clone(),
        }
    }
}

impl ProjectPrincipal {
    /// The caller as the engine's use cases take it.
    pub fn principal(&self) -> &engram_core::Principal {
        &self.principal
    }

    /// The key scopes the credential holds (a token's are those it was minted with).
    pub fn scopes(&self) -> ApiScopes {
        match self.principal.kind() {
            PrincipalKind::ApiKey(scopes) | PrincipalKind::EndUserToken(scopes) => scopes.clone(),
            PrincipalKind::ConsoleMember(_) | PrincipalKind::Operator => ApiScopes::default(),
        }
    }

    /// `403 forbidden` naming the missing scope unless the credential holds `required`.
    pub fn require(&self, required: ApiScope) -> Result<(), ApiError> {
        let scopes = self.scopes();
        if scopes.contains(required) {
            return Ok(());
        }
        Err(ApiError::new(
            ProblemKind::Forbidden,
            format!(
                "this API key lacks the `{required}` scope; it holds: {}",
                scopes.names().join(", ")
            ),
        ))
    }
}

impl<S> FromRequestParts<S> for ProjectPrincipal
where
    CredentialVerifier: FromRef<S>,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let verifier = CredentialVerifier::from_ref(state);
        let Some(header_value) = parts.headers.get(AUTHORIZATION) else {
            return Err(ApiError::new(
                ProblemKind::Unauthorized,
                "missing Authorization header; send `Authorization: Bearer <project API key>`",
            ));
        };
        let presented = header_value
            .to_str()
            .ok()
            .and_then(|text| {
                text.strip_prefix("Bearer ")
                    .or_else(|| text.strip_prefix("bearer "))
            })
            .map(str::trim)
            .ok_or_else(|| {
                ApiError::new(
                    ProblemKind::Unauthorized,
                    "the Authorization header must be `Bearer <token>`",
                )
            })?;
        let origin = RequestOrigin::of(parts);
        let authenticated = verifier
            .engine
            .authenticate(presented, origin.actor(ActorKind::ApiKey, String::new()))
            .await?;
        let Some((principal, end_user)) = authenticated else {
            return Err(
                if presented.starts_with(engram_core::access::API_KEY_PREFIX) {
                    ApiError::new(
                        ProblemKind::Unauthorized,
                        "the API key is unknown, expired, revoked or malformed",
                    )
                } else {
                    ApiError::new(
                        ProblemKind::Unauthorized,
                        "the token is not a valid API key or end-user token (expired, revoked, or signed with another key)",
                    )
                },
            );
        };
        if let (Some(limiter), Some(end_user)) = (&verifier.end_user_rate_limit, &end_user)
            && let Err(retry_after_seconds) =
                limiter.check(&end_user.project_id.to_string(), &end_user.user_id)
        {
            let mut problem = ApiError::new(
                ProblemKind::RateLimited,
                format!("too many requests for this end-user; retry in {retry_after_seconds} s"),
            );
            problem.retry_after_seconds = Some(retry_after_seconds);
            return Err(problem);
        }
        // A bearer credential authenticates as a key or a token only.
        if !matches!(
            principal.kind(),
            PrincipalKind::ApiKey(_) | PrincipalKind::EndUserToken(_)
        ) {
            return Err(ApiError::new(
                ProblemKind::Unauthorized,
                "send a project API key or an end-user token",
            ));
        }
        Ok(ProjectPrincipal { principal })
    }
}

/// The permission a handler needs, named in its signature: `Authorized<MemoriesWrite>`
/// rejects a credential without that scope (403) before the handler runs.
pub trait Permission: Send + Sync + 'static {
    const SCOPE: ApiScope;
}

/// Read memories: get, list, history, search.
pub struct MemoriesRead;
/// Add and edit memories.
pub struct MemoriesWrite;
/// Delete memories.
pub struct MemoriesDelete;
/// Manage the project's API keys.
pub struct ProjectAdmin;

impl Permission for MemoriesRead {
    const SCOPE: ApiScope = ApiScope::MemoriesRead;
}
impl Permission for MemoriesWrite {
    const SCOPE: ApiScope = ApiScope::MemoriesWrite;
}
impl Permission for MemoriesDelete {
    const SCOPE: ApiScope = ApiScope::MemoriesDelete;
}
impl Permission for ProjectAdmin {
    const SCOPE: ApiScope = ApiScope::Admin;
}

/// A project principal holding permission `P`.
pub struct Authorized<P: Permission> {
    pub principal: ProjectPrincipal,
    _permission: std::marker::PhantomData<P>,
}

impl<P: Permission> std::ops::Deref for Authorized<P> {
    type Target = ProjectPrincipal;

    fn deref(&self) -> &ProjectPrincipal {
        &self.principal
    }
}

impl<S, P> FromRequestParts<S> for Authorized<P>
where
    CredentialVerifier: FromRef<S>,
    S: Send + Sync,
    P: Permission,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let principal = ProjectPrincipal::from_request_parts(parts, state).await?;
        principal.require(P::SCOPE)?;
        Ok(Self {
            principal,
            _permission: std::marker::PhantomData,
        })
    }
}

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
