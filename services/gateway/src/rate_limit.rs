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

/// Requests per end-user: a browser or mobile app holding an end-user token shares its
/// project's quota with every other end-user, so one user (or a stolen token) must not be
/// able to use it up. Checked after the token is verified, so a forged token cannot spend
/// someone else's allowance.
pub struct EndUserRateLimiter {
    limiter: governor::DefaultKeyedRateLimiter<String>,
}

impl std::fmt::Debug for EndUserRateLimiter {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("EndUserRateLimiter")
            .finish_non_exhaustive()
    }
}

impl EndUserRateLimiter {
    /// `None` when either number is 0 (no per-end-user limit).
    pub fn new(settings: RateLimitSettings) -> Option<Arc<Self>> {
        let burst = std::num::NonZeroU32::new(settings.burst)?;
        let per_second = std::num::NonZeroU32::new(settings.per_second)?;
        let quota = governor::Quota::per_second(per_second).allow_burst(burst);
        Some(Arc::new(Self {
            limiter: governor::RateLimiter::keyed(quota),
        }))
    }

    /// `Err(seconds to wait)` when this end-user of this project is over the limit.
    pub fn check(&self, project_id: &str, user_id: &str) -> Result<(), u64> {
        use governor::clock::{Clock, DefaultClock};
        let key = format!("{project_id}\u{0}{user_id}");
        self.limiter.check_key(&key).map_err(|not_until| {
            not_until
                .wait_time_from(DefaultClock::default().now())
                .as_secs()
                .max(1)
        })
    }

    /// Forget end-users not seen for a while, so memory stays bounded.
    pub fn spawn_cleanup(self: &Arc<Self>) {
        let limiter = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut ticker = tokio::time::interval(Duration::from_secs(60));
            loop {
                ticker.tick().await;
                let Some(limiter) = limiter.upgrade() else {
                    return;
                };
                limiter.limiter.retain_recent();
            }
        });
    }
}
