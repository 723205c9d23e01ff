//! Shared application state handed to every handler, with `FromRef` sub-states so a handler
//! names only what it uses.

use crate::auth::ConsoleSessionKeys;
use axum::extract::FromRef;
use engram_engine::MemoryEngine;
use engram_storage::{ApiKeyPepper, Storage};
use std::sync::Arc;
use std::time::Duration;

#[derive(Clone, Debug)]
pub struct GatewaySettings {
    pub request_timeout: Duration,
}

impl Default for GatewaySettings {
    fn default() -> Self {
        Self {
            request_timeout: crate::DEFAULT_REQUEST_TIMEOUT,
        }
    }
}

#[derive(Clone)]
pub struct AppState {
    pub engine: Arc<MemoryEngine>,
    pub credentials: CredentialVerifier,
    pub settings: GatewaySettings,
}

/// Everything needed to turn a presented credential into a scope.
#[derive(Clone)]
pub struct CredentialVerifier {
    pub storage: Storage,
    pub api_key_pepper: ApiKeyPepper,
    pub console_sessions: ConsoleSessionKeys,
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
