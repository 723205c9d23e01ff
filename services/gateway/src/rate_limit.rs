//! Request rate limits of the `/v1` API, spent by verified identity: a verified API key
//! spends its own bucket, a verified end-user token its end-user's, and only a request that
//! fails authentication (or presents none) spends its client address's — so a forged key id
//! escapes nothing and a stranger who knows a key's public id cannot push that key into
//! 429s. Answered with `429 rate-limited` problem+json and `Retry-After`. Token bucket:
//! `burst` requests at once, refilled at `per_second`.

use crate::problem::{ApiError, ProblemKind};
use axum::extract::{ConnectInfo, Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

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

/// The bucket of a request's client address: whoever fails to authenticate, or presents no
/// credential, spends it.
pub fn client_bucket(address: Option<&ConnectInfo<SocketAddr>>) -> String {
    match address {
        Some(ConnectInfo(address)) => format!("address:{}", address.ip()),
        None => "address:unknown".to_string(),
    }
}

/// `429 rate-limited` naming whose requests are over the limit.
pub fn rate_limited(whose: &str, retry_after_seconds: u64) -> ApiError {
    let mut problem = ApiError::new(
        ProblemKind::RateLimited,
        format!("too many requests for this {whose}; retry in {retry_after_seconds} s"),
    );
    problem.retry_after_seconds = Some(retry_after_seconds);
    problem
}

/// Requests that present no credential spend their client address's bucket here; requests
/// with one are limited once it is verified (or found wrong) by authentication.
pub async fn limit_requests_without_a_credential(
    State(limits): State<Option<Arc<KeyedRateLimit>>>,
    request: Request,
    next: Next,
) -> Response {
    if let Some(limits) = &limits
        && !request.headers().contains_key(header::AUTHORIZATION)
    {
        let bucket = client_bucket(request.extensions().get::<ConnectInfo<SocketAddr>>());
        if let Err(retry_after_seconds) = limits.check(&bucket) {
            return rate_limited("client address", retry_after_seconds).into_response();
        }
    }
    next.run(request).await
}

/// One token bucket per key (a verified API key's roll line, an end-user of a project, a
/// client address), forgetting keys idle long enough that their bucket is full again.
pub struct KeyedRateLimit {
    limiter: governor::DefaultKeyedRateLimiter<String>,
}

impl std::fmt::Debug for KeyedRateLimit {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("KeyedRateLimit")
            .finish_non_exhaustive()
    }
}

impl KeyedRateLimit {
    /// `None` when either number is 0 (no limit).
    pub fn new(settings: RateLimitSettings) -> Option<Arc<Self>> {
        let burst = std::num::NonZeroU32::new(settings.burst)?;
        let per_second = std::num::NonZeroU32::new(settings.per_second)?;
        let quota = governor::Quota::per_second(per_second).allow_burst(burst);
        Some(Arc::new(Self {
            limiter: governor::RateLimiter::keyed(quota),
        }))
    }

    /// `Err(seconds to wait)` when `key` is over the limit; otherwise one request spent.
    pub fn check(&self, key: &str) -> Result<(), u64> {
        use governor::clock::{Clock, DefaultClock};
        self.limiter
            .check_key(&key.to_string())
            .map_err(|not_until| {
                not_until
                    .wait_time_from(DefaultClock::default().now())
                    .as_secs()
                    .max(1)
            })
    }

    /// Forget keys not seen for a while, so memory stays bounded.
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
