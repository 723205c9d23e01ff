//! Credentials at the HTTP door: the `ProjectPrincipal` extractor that turns a bearer API
//! key or end-user token into the engine's principal, and the per-handler permission types.

use crate::problem::{ApiError, ProblemKind};
use crate::state::CredentialVerifier;
use axum::extract::{FromRef, FromRequestParts};
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use engram_core::audit::{Actor, ActorKind, Channel};
use engram_core::permissions::PrincipalKind;
use engram_core::{ApiScope, ApiScopes};

/// A request authenticated with a project API key or an end-user token: the engine's
/// principal, the only source of the project scope a handler can use; bodies and query
/// strings never choose the project.
#[derive(Clone, Debug)]
pub struct ProjectPrincipal {
    principal: engram_core::Principal,
}

/// Where a request came from, for the audit log, usage and recall events.
#[derive(Clone, Debug)]
pub struct RequestOrigin {
    pub ip: Option<String>,
    pub user_agent: Option<String>,
    pub request_id: Option<String>,
    /// `http`, unless the router the request came through says otherwise with a `Channel`
    /// extension (the Mem0-compatible routes, the MCP server).
    pub channel: Channel,
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
            channel: parts
                .extensions
                .get::<Channel>()
                .cloned()
                .unwrap_or(Channel::Http),
        }
    }

    pub fn actor(&self, kind: ActorKind, id: String) -> Actor {
        Actor {
            kind,
            id,
            ip: self.ip.clone(),
            user_agent: self.user_agent.clone(),
            request_id: self.request_id.clone(),
            channel: self.channel.clone(),
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
        let bucket = crate::rate_limit::client_bucket(
            parts
                .extensions
                .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>(),
        );
        let spend_client_bucket = || -> Result<(), ApiError> {
            match verifier
                .client_rate_limit
                .as_ref()
                .map(|limit| limit.check(&bucket))
            {
                Some(Err(retry_after_seconds)) => Err(crate::rate_limit::rate_limited(
                    "client address",
                    retry_after_seconds,
                )),
                _ => Ok(()),
            }
        };
        // A credential that does not verify spends its client address's bucket (a request
        // without one already did, in `limit_requests_without_a_credential`).
        let refused = |problem: ApiError| -> ApiError {
            match spend_client_bucket() {
                Err(limited) => limited,
                Ok(()) => problem,
            }
        };
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
                refused(ApiError::new(
                    ProblemKind::Unauthorized,
                    "the Authorization header must be `Bearer <token>`",
                ))
            })?;
        // A key of an id this process never verified costs a database lookup: its client
        // pays for it before the lookup, so a flood of forged keys (valid checksums, made-up
        // ids) is throttled before it reaches the database. A refusal then spends nothing
        // more. (Guesses at a real key's id are looked up and then spend the guesser's
        // bucket, as before: they never take the real key's budget.)
        let looked_up = presented.starts_with(engram_core::access::API_KEY_PREFIX)
            && !verifier.engine.knows_api_key(presented).await;
        if looked_up {
            spend_client_bucket()?;
        }
        let origin = RequestOrigin::of(parts);
        let authenticated = verifier
            .engine
            .authenticate(presented, origin.actor(ActorKind::ApiKey, String::new()))
            .await?;
        let Some((principal, end_user)) = authenticated else {
            let refused = |problem: ApiError| if looked_up { problem } else { refused(problem) };
            return Err(refused(
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
            ));
        };
        // The verified identity spends its own bucket: an end-user's (a browser app's users
        // share their project's quota, so one must not use it up), or the key's roll line.
        match (&end_user, principal.credential()) {
            (Some(end_user), _) => {
                if let Some(limiter) = &verifier.end_user_rate_limit
                    && let Err(retry_after_seconds) =
                        limiter.check(&format!("{}\u{0}{}", end_user.project_id, end_user.user_id))
                {
                    return Err(crate::rate_limit::rate_limited(
                        "end-user",
                        retry_after_seconds,
                    ));
                }
            }
            (None, engram_core::principal::Credential::ApiKey { lineage_id, .. }) => {
                if let Some(limiter) = &verifier.api_key_rate_limit
                    && let Err(retry_after_seconds) = limiter.check(&format!("key:{lineage_id}"))
                {
                    return Err(crate::rate_limit::rate_limited(
                        "API key",
                        retry_after_seconds,
                    ));
                }
            }
            (None, _) => {}
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
/// Verify memories (or withdraw a verification).
pub struct MemoriesVerify;
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
impl Permission for MemoriesVerify {
    const SCOPE: ApiScope = ApiScope::MemoriesVerify;
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
