//! End-user tokens: short-lived JWTs a project mints for one of its end-users, so a browser or
//! mobile app can call the API without holding a project key. HS256 with a per-project key
//! derived from the server secret and the project's key generation (the `kid`); every
//! registered claim is required and checked; rotating the generation voids old tokens.

use chrono::{DateTime, Utc};
use engram_core::ids::ApiKeyId;
use engram_core::{AgentRestriction, ApiScope, ApiScopes, ExternalId, ProjectId};
use hmac::{Hmac, Mac};
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use std::sync::Arc;
use std::time::Duration;

pub const END_USER_TOKEN_ISSUER: &str = "engram";
pub const END_USER_TOKEN_AUDIENCE: &str = "engram-api";
pub const END_USER_TOKEN_TYPE: &str = "end_user";
/// The longest lifetime a token may be minted with.
pub const MAX_END_USER_TOKEN_LIFETIME: Duration = Duration::from_secs(24 * 60 * 60);
pub const DEFAULT_END_USER_TOKEN_LIFETIME: Duration = Duration::from_secs(60 * 60);

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct EndUserClaims {
    pub iss: String,
    pub aud: String,
    /// The end-user id every call of the token is confined to.
    pub sub: String,
    pub typ: String,
    /// The project id (also in the `kid`; both must agree).
    pub pid: String,
    /// Space-separated scopes, a subset of the minting key's memory scopes.
    pub scp: String,
    /// The API key that minted the token: the token is refused once that key is revoked,
    /// expired or rolled past its overlap. Required (tokens minted before it existed, at
    /// most a day old, are refused).
    pub key: String,
    /// The agents the token is bound to (within the minting key's); absent for every agent
    /// the minting key may act as.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agents: Option<Vec<String>>,
    pub iat: i64,
    pub nbf: i64,
    pub exp: i64,
}

/// A verified token: its end-user and what it may do.
#[derive(Clone, Debug)]
pub struct VerifiedEndUser {
    pub user_id: ExternalId,
    pub scopes: ApiScopes,
    /// The API key that minted it; the caller checks that it is still in force.
    pub minted_by: ApiKeyId,
    /// The agents it is bound to; `None`: those of the key that minted it.
    pub agents: Option<AgentRestriction>,
}

/// What a token grants: its end-user, scopes and agents, and the key that minted it.
#[derive(Clone, Copy, Debug)]
pub struct EndUserGrant<'a> {
    pub user_id: &'a ExternalId,
    pub scopes: &'a ApiScopes,
    /// `None`: every agent the minting key may act as.
    pub agents: Option<&'a AgentRestriction>,
    pub minted_by: ApiKeyId,
}

/// Derives each project's signing key from one server-wide secret.
#[derive(Clone)]
pub struct EndUserTokenKeys {
    base_secret: Arc<Vec<u8>>,
}

impl std::fmt::Debug for EndUserTokenKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EndUserTokenKeys(***)")
    }
}

/// `<project id>.<generation>`: names the key that signed a token.
pub fn key_id(project_id: ProjectId, generation: i64) -> String {
    format!("{project_id}.{generation}")
}

/// The project and key generation a token claims to be signed with (unverified: only used to
/// choose the key that then verifies it). Anything but an HS256 JWT with such a kid is `None`.
pub fn claimed_key(token: &str) -> Option<(ProjectId, i64)> {
    let claimed = engram_core::token_header::claimed_hs256_key(token)?;
    let (project_id, generation) = claimed.key_id.split_once('.')?;
    Some((project_id.parse().ok()?, generation.parse().ok()?))
}

impl EndUserTokenKeys {
    pub fn new(base_secret: &[u8]) -> Self {
        Self {
            base_secret: Arc::new(base_secret.to_vec()),
        }
    }

    /// The HS256 key of `project_id` at `generation` (server-side only).
    pub fn signing_secret(&self, project_id: ProjectId, generation: i64) -> Vec<u8> {
        // HMAC accepts keys of any length, so this cannot fail.
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.base_secret)
            .unwrap_or_else(|_| unreachable!());
        mac.update(format!("end-user token key:{project_id}:{generation}").as_bytes());
        mac.finalize().into_bytes().to_vec()
    }

    /// Sign a token of `grant` for the project.
    pub fn mint(
        &self,
        project_id: ProjectId,
        generation: i64,
        grant: &EndUserGrant<'_>,
        lifetime: Duration,
    ) -> Result<(String, DateTime<Utc>), String> {
        let EndUserGrant {
            user_id,
            scopes,
            agents,
            minted_by,
        } = *grant;
        let now = Utc::now().timestamp();
        let expires_at = now + lifetime.as_secs() as i64;
        let claims = EndUserClaims {
            iss: END_USER_TOKEN_ISSUER.to_string(),
            aud: END_USER_TOKEN_AUDIENCE.to_string(),
            sub: user_id.as_str().to_string(),
            typ: END_USER_TOKEN_TYPE.to_string(),
            pid: project_id.to_string(),
            scp: scopes.to_stored_text(),
            key: minted_by.to_string(),
            agents: agents.map(|agents| {
                agents
                    .agents()
                    .iter()
                    .map(|agent| agent.as_str().to_string())
                    .collect()
            }),
            iat: now,
            nbf: now,
            exp: expires_at,
        };
        let mut header = Header::new(Algorithm::HS256);
        header.kid = Some(key_id(project_id, generation));
        let token = jsonwebtoken::encode(
            &header,
            &claims,
            &EncodingKey::from_secret(&self.signing_secret(project_id, generation)),
        )
        .map_err(|error| format!("cannot sign an end-user token: {error}"))?;
        let expires_at = DateTime::from_timestamp(expires_at, 0).unwrap_or_else(Utc::now);
        Ok((token, expires_at))
    }

    /// Verify a token against the key of `project_id` at `generation`: HS256 only, signature,
    /// issuer, audience, type, expiry and not-before (5 s leeway), subject, the project claim
    /// agreeing with the key, and memory scopes only.
    pub fn verify(
        &self,
        token: &str,
        project_id: ProjectId,
        generation: i64,
    ) -> Option<VerifiedEndUser> {
        let mut validation = Validation::new(Algorithm::HS256);
        validation.set_issuer(&[END_USER_TOKEN_ISSUER]);
        validation.set_audience(&[END_USER_TOKEN_AUDIENCE]);
        validation.set_required_spec_claims(&["iss", "aud", "sub", "exp", "nbf"]);
        validation.validate_nbf = true;
        validation.leeway = 5;
        let decoded = jsonwebtoken::decode::<EndUserClaims>(
            token,
            &DecodingKey::from_secret(&self.signing_secret(project_id, generation)),
            &validation,
        )
        .ok()?;
        let claims = decoded.claims;
        if claims.typ != END_USER_TOKEN_TYPE || claims.pid != project_id.to_string() {
            return None;
        }
        let scopes = ApiScopes::from_stored_text(&claims.scp);
        if scopes.contains(ApiScope::Admin)
            || scopes.contains(ApiScope::MemoriesVerify)
            || scopes.is_empty()
        {
            return None;
        }
        // A claim of agents that does not parse proves nothing (never every agent).
        let agents = match claims.agents {
            None => None,
            Some(agents) => Some(
                AgentRestriction::new(
                    agents
                        .iter()
                        .map(|agent| ExternalId::parse(agent))
                        .collect::<Result<Vec<_>, _>>()
                        .ok()?,
                )
                .ok()?,
            ),
        };
        Some(VerifiedEndUser {
            user_id: ExternalId::parse(&claims.sub).ok()?,
            scopes,
            minted_by: claims.key.parse().ok()?,
            agents,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_verifies_only_with_its_project_and_generation() {
        let keys = EndUserTokenKeys::new(b"server secret");
        let project_id = ProjectId::generate();
        let alice = ExternalId::parse("alice").unwrap();
        let scopes = ApiScopes::from_scopes([ApiScope::MemoriesRead]);
        let minted_by = ApiKeyId::generate();
        let (token, _) = keys
            .mint(
                project_id,
                3,
                &EndUserGrant {
                    user_id: &alice,
                    scopes: &scopes,
                    agents: None,
                    minted_by,
                },
                Duration::from_secs(60),
            )
            .unwrap();
        assert_eq!(claimed_key(&token), Some((project_id, 3)));
        let verified = keys.verify(&token, project_id, 3).unwrap();
        assert_eq!(verified.user_id, alice);
        assert_eq!(verified.scopes, scopes);
        assert_eq!(verified.minted_by, minted_by);
        assert!(keys.verify(&token, project_id, 4).is_none(), "rotated");
        assert!(keys.verify(&token, ProjectId::generate(), 3).is_none());
        assert!(
            EndUserTokenKeys::new(b"another secret")
                .verify(&token, project_id, 3)
                .is_none()
        );
    }
}
