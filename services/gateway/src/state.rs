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
    /// Per API key (or client address) limits of the `/v1` API.
    pub rate_limit: crate::rate_limit::RateLimitSettings,
    /// Browser origins allowed to call the API cross-origin; empty means none.
    pub cors_allowed_origins: Vec<axum::http::HeaderValue>,
}

impl Default for GatewaySettings {
    fn default() -> Self {
        Self {
            request_timeout: crate::DEFAULT_REQUEST_TIMEOUT,
            rate_limit: crate::rate_limit::RateLimitSettings::default(),
            cors_allowed_origins: Vec::new(),
        }
    }
}

#[derive(Clone)]
pub struct AppState {
    pub engine: Arc<MemoryEngine>,
    pub credentials: CredentialVerifier,
    pub settings: GatewaySettings,
}

/// The engine's spend guard, for the routes not yet behind a use case.
impl FromRef<AppState> for Arc<engram_engine::SpendGuard> {
    fn from_ref(state: &AppState) -> Self {
        state.engine.spend_guard().clone()
    }
}

/// The engine's meter, for the routes not yet behind a use case.
impl FromRef<AppState> for engram_engine::UsageMeter {
    fn from_ref(state: &AppState) -> Self {
        state.engine.meter().clone()
    }
}

/// Everything needed to turn a presented credential into a principal: the engine
/// authenticates; the console's session keys and the per-end-user limit are the door's.
#[derive(Clone)]
pub struct CredentialVerifier {
    pub engine: Arc<MemoryEngine>,
    pub console_sessions: ConsoleSessionKeys,
    /// Per end-user request limits for end-user tokens; `None` for no limit.
    pub end_user_rate_limit: Option<Arc<crate::rate_limit::EndUserRateLimiter>>,
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
