//! Shared application state handed to every handler, with `FromRef` sub-states so a handler
//! names only what it uses.

use axum::extract::FromRef;
use engram_engine::MemoryEngine;
use engram_engine::console_credentials::ConsoleSessionKeys;
use std::sync::Arc;
use std::time::Duration;

#[derive(Clone, Debug)]
pub struct GatewaySettings {
    pub request_timeout: Duration,
    /// Browser origins allowed to call the API cross-origin; empty means none.
    pub cors_allowed_origins: Vec<axum::http::HeaderValue>,
    /// The proxies whose `X-Forwarded-For` names the client; none by default.
    pub trusted_proxies: crate::client_address::TrustedProxies,
    /// The `Host` names the MCP door answers to (DNS-rebinding protection): the loopback
    /// names and the host of `ENGRAM_PUBLIC_URL` (or of the listen address).
    pub mcp_allowed_hosts: Vec<String>,
}

impl Default for GatewaySettings {
    fn default() -> Self {
        Self {
            request_timeout: crate::DEFAULT_REQUEST_TIMEOUT,
            cors_allowed_origins: Vec::new(),
            trusted_proxies: Default::default(),
            mcp_allowed_hosts: crate::mcp::LOOPBACK_HOSTS
                .iter()
                .map(|host| host.to_string())
                .collect(),
        }
    }
}

#[derive(Clone)]
pub struct AppState {
    pub engine: Arc<MemoryEngine>,
    pub credentials: CredentialVerifier,
    pub settings: GatewaySettings,
}

/// Everything needed to turn a presented credential into a principal: the engine
/// authenticates; the console's session keys and the per-end-user limit are the door's.
#[derive(Clone)]
pub struct CredentialVerifier {
    pub engine: Arc<MemoryEngine>,
    pub console_sessions: ConsoleSessionKeys,
    /// Per end-user request limits for end-user tokens; `None` for no limit.
    pub end_user_rate_limit: Option<Arc<crate::rate_limit::KeyedRateLimit>>,
    /// Per verified API key (its roll line) request limits; `None` for no limit.
    pub api_key_rate_limit: Option<Arc<crate::rate_limit::KeyedRateLimit>>,
    /// Per client address, spent by requests that fail to authenticate or present no
    /// credential; `None` for no limit.
    pub client_rate_limit: Option<Arc<crate::rate_limit::KeyedRateLimit>>,
}

impl CredentialVerifier {
    /// A verifier with the API's limits: per API key and per client address `api`, per
    /// end-user `end_user` (a 0 in either turns that limit off).
    pub fn new(
        engine: Arc<MemoryEngine>,
        console_sessions: ConsoleSessionKeys,
        api: crate::rate_limit::RateLimitSettings,
        end_user: crate::rate_limit::RateLimitSettings,
    ) -> Self {
        let limits = [
            crate::rate_limit::KeyedRateLimit::new(end_user),
            crate::rate_limit::KeyedRateLimit::new(api),
            crate::rate_limit::KeyedRateLimit::new(api),
        ];
        for limit in limits.iter().flatten() {
            limit.spawn_cleanup();
        }
        let [end_user_rate_limit, api_key_rate_limit, client_rate_limit] = limits;
        Self {
            engine,
            console_sessions,
            end_user_rate_limit,
            api_key_rate_limit,
            client_rate_limit,
        }
    }
}

impl FromRef<AppState> for CredentialVerifier {
    fn from_ref(state: &AppState) -> Self {
        state.credentials.clone()
    }
}

impl FromRef<AppState> for Arc<MemoryEngine> {
    fn from_ref(state: &AppState) -> Self {
        state.engine.clone()
    }
}
