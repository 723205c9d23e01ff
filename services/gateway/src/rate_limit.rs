//! Request rate limits per API key (per client IP for requests without one), answered with
//! `429 rate-limited` problem+json and `Retry-After`. Token bucket: `burst` requests at
//! once, refilled at `per_second`.

use crate::problem::{ApiError, ProblemKind};
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{Request, Response, header};
use axum::response::IntoResponse;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tower_governor::GovernorError;
use tower_governor::governor::{GovernorConfig, GovernorConfigBuilder};
use tower_governor::key_extractor::KeyExtractor;

/// Limits for the public API.
#[derive(Clone, Copy, Debug)]
pub struct RateLimitSettings {
    /// Requests a client may make at once.
    pub burst: u32,
    /// Sustained requests per second per client.
    pub per_second: u32,
}

impl Default for RateLimitSettings {
    fn default() -> Self {
        Self {
            burst: 200,
            per_second: 100,
        }
    }
}

/// Keys the bucket by the API key's public id (`egk_live_<public id>_…`, never its secret), or
/// by the peer address for requests that present no API key.
#[derive(Clone, Copy, Debug)]
pub struct ApiKeyOrPeerAddress;

impl KeyExtractor for ApiKeyOrPeerAddress {
    type Key = String;

    fn extract<T>(&self, request: &Request<T>) -> Result<Self::Key, GovernorError> {
        let public_id = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.strip_prefix("Bearer "))
            .and_then(engram_core::access::api_key_public_id);
        if let Some(public_id) = public_id {
            return Ok(format!("key:{public_id}"));
        }
        request
            .extensions()
            .get::<ConnectInfo<SocketAddr>>()
            .map(|ConnectInfo(address)| format!("ip:{}", address.ip()))
            .ok_or(GovernorError::UnableToExtractKey)
    }
}

pub type ApiRateLimitConfig =
    GovernorConfig<ApiKeyOrPeerAddress, governor::middleware::NoOpMiddleware>;

/// The shared limiter configuration; `None` when a limit of 0 was configured (no limit).
pub fn api_rate_limit_config(settings: RateLimitSettings) -> Option<Arc<ApiRateLimitConfig>> {
    if settings.burst == 0 || settings.per_second == 0 {
        return None;
    }
    let replenish_every = Duration::from_nanos(1_000_000_000 / u64::from(settings.per_second));
    let config = GovernorConfigBuilder::default()
        .period(replenish_every)
        .burst_size(settings.burst)
        .key_extractor(ApiKeyOrPeerAddress)
        .finish()?;
    Some(Arc::new(config))
}

/// Forget clients that have not been seen for a while, so the limiter's memory stays bounded.
pub fn spawn_limiter_cleanup(config: Arc<ApiRateLimitConfig>) {
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(Duration::from_secs(60));
        loop {
            ticker.tick().await;
            config.limiter().retain_recent();
        }
    });
}

/// The limiter's refusals as problems.
pub fn rate_limit_problem(error: GovernorError) -> Response<Body> {
    match error {
        GovernorError::TooManyRequests { wait_time, .. } => {
            let mut problem = ApiError::new(
                ProblemKind::RateLimited,
                format!(
                    "too many requests for this API key; retry in {} s",
                    wait_time.max(1)
                ),
            );
            problem.retry_after_seconds = Some(wait_time.max(1));
            problem.into_response()
        }
        GovernorError::UnableToExtractKey => ApiError::new(
            ProblemKind::Internal,
            "the client of this request could not be identified for rate limiting",
        )
        .into_response(),
        GovernorError::Other { code, msg, .. } => ApiError::new(
            ProblemKind::for_status(code),
            msg.unwrap_or_else(|| "request refused".to_string()),
        )
        .into_response(),
    }
}
