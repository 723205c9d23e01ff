//! Console sign-in throttling that a stranger cannot turn against an account's owner, and the
//! per-address budget of the unauthenticated console routes (sign-in, invitations).
//!
//! Failures count per (account e-mail, client): the client is the browser's device — when it
//! presents a valid device cookie for this account, earned by signing in before — or else
//! its address. After `FREE_FAILURES` each further failure doubles the wait, up to
//! `MAX_DELAY`. Failures from clients without a device also count per account, so guessing
//! from many addresses slows down as well; a trusted device is only ever slowed by its own
//! failures. Kept in memory and bounded: a restart forgets it, which costs an attacker a
//! restart of our server, not a bypass.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Failures per (account, client) before waits begin.
pub const FREE_FAILURES: u32 = 5;
/// Failures per account from clients without a device cookie before waits begin for them.
pub const ACCOUNT_FREE_FAILURES: u32 = 50;
/// The first wait; each further failure doubles it.
pub const FIRST_DELAY: Duration = Duration::from_secs(1);
/// The longest wait.
pub const MAX_DELAY: Duration = Duration::from_secs(15 * 60);
/// A client's failures are forgotten this long after its last one: much longer than the
/// longest wait, so waiting out a wait never hands back the free attempts.
pub const WINDOW: Duration = Duration::from_secs(24 * 3_600);
/// Requests one address may make to the unauthenticated console routes at once…
pub const ADDRESS_BURST: u32 = 60;
/// …and per minute after that.
pub const ADDRESS_PER_MINUTE: u32 = 60;
/// Clients tracked at most; beyond it the stalest entries are dropped.
const MAX_TRACKED: usize = 10_000;

/// Who is signing in, for counting failures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SignInClient<'a> {
    /// A browser holding a valid device cookie of this account (its device id).
    TrustedDevice(&'a str),
    /// Anyone else, by address (`None` when the address is unknown).
    Address(Option<&'a str>),
}

#[derive(Clone, Copy, Debug)]
struct FailureRecord {
    failures: u32,
    last_failure: Instant,
    blocked_until: Option<Instant>,
}

pub struct LoginThrottle {
    records: Mutex<HashMap<String, FailureRecord>>,
    addresses: governor::DefaultKeyedRateLimiter<String>,
}

impl Default for LoginThrottle {
    fn default() -> Self {
        let per_minute = NonZeroU32::new(ADDRESS_PER_MINUTE).unwrap_or(NonZeroU32::MIN);
        let burst = NonZeroU32::new(ADDRESS_BURST).unwrap_or(NonZeroU32::MIN);
        Self {
            records: Mutex::new(HashMap::new()),
            addresses: governor::RateLimiter::keyed(
                governor::Quota::per_minute(per_minute).allow_burst(burst),
            ),
        }
    }
}

fn normalized(email: &str) -> String {
    email.trim().to_lowercase()
}

fn client_key(email: &str, client: SignInClient<'_>) -> String {
    match client {
        SignInClient::TrustedDevice(device) => format!("{}\u{0}device:{device}", normalized(email)),
        SignInClient::Address(address) => {
            format!(
                "{}\u{0}address:{}",
                normalized(email),
                address.unwrap_or("-")
            )
        }
    }
}

fn account_key(email: &str) -> String {
    format!("{}\u{0}untrusted", normalized(email))
}

/// The wait after `failures` failures when `free` of them cost nothing.
fn delay_after(failures: u32, free: u32) -> Option<Duration> {
    let beyond = failures.checked_sub(free).filter(|beyond| *beyond > 0)?;
    let doublings = (beyond - 1).min(20);
    Some(FIRST_DELAY.saturating_mul(1 << doublings).min(MAX_DELAY))
}

impl LoginThrottle {
    /// `Err(wait)` when `address` has used its budget for the unauthenticated console routes.
    pub fn admit_address(&self, address: Option<&str>) -> Result<(), Duration> {
        use governor::clock::{Clock, DefaultClock};
        if self.addresses.len() >= MAX_TRACKED {
            // Addresses whose budget is full again need no entry: bounded memory.
            self.addresses.retain_recent();
        }
        let key = address.unwrap_or("-").to_string();
        self.addresses.check_key(&key).map_err(|not_until| {
            not_until
                .wait_time_from(DefaultClock::default().now())
                .max(Duration::from_secs(1))
        })
    }

    /// `Some(wait)` while `client` must wait before trying `email` again.
    pub fn wait_before_attempt(
        &self,
        email: &str,
        client: SignInClient<'_>,
        now: Instant,
    ) -> Option<Duration> {
        let records = self
            .records
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        let remaining = |key: &str| -> Option<Duration> {
            let record = records.get(key)?;
            if now.duration_since(record.last_failure) >= WINDOW {
                return None;
            }
            record.blocked_until?.checked_duration_since(now)
        };
        let own = remaining(&client_key(email, client));
        let account = match client {
            SignInClient::TrustedDevice(_) => None,
            SignInClient::Address(_) => remaining(&account_key(email)),
        };
        own.max(account).filter(|wait| !wait.is_zero())
    }

    pub fn record_failure(&self, email: &str, client: SignInClient<'_>, now: Instant) {
        let mut records = self
            .records
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        if records.len() >= MAX_TRACKED {
            records.retain(|_, record| now.duration_since(record.last_failure) < WINDOW);
            if records.len() >= MAX_TRACKED {
                // Still full of fresh entries: make room by dropping half, those with the
                // fewest failures first (so junk e-mails cannot flush a target's count).
                let mut weights: Vec<(String, u32, Instant)> = records
                    .iter()
                    .map(|(key, record)| (key.clone(), record.failures, record.last_failure))
                    .collect();
                weights.sort_by_key(|(_, failures, last_failure)| (*failures, *last_failure));
                for (key, _, _) in weights.into_iter().take(MAX_TRACKED / 2) {
                    records.remove(&key);
                }
            }
        }
        let mut count = |key: String, free: u32| {
            let record = records.entry(key).or_insert(FailureRecord {
                failures: 0,
                last_failure: now,
                blocked_until: None,
            });
            if now.duration_since(record.last_failure) >= WINDOW {
                record.failures = 0;
                record.blocked_until = None;
            }
            record.failures = record.failures.saturating_add(1);
            record.last_failure = now;
            record.blocked_until = delay_after(record.failures, free).map(|delay| now + delay);
        };
        count(client_key(email, client), FREE_FAILURES);
        if matches!(client, SignInClient::Address(_)) {
            count(account_key(email), ACCOUNT_FREE_FAILURES);
        }
    }

    /// Give back an attempt charged in advance that was never checked (the password pool
    /// was full): a busy server must not count against anyone.
    pub fn refund(&self, email: &str, client: SignInClient<'_>) {
        let mut records = self
            .records
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        let mut give_back = |key: String, free: u32| {
            if let Some(record) = records.get_mut(&key) {
                record.failures = record.failures.saturating_sub(1);
                record.blocked_until =
                    delay_after(record.failures, free).map(|delay| record.last_failure + delay);
            }
        };
        give_back(client_key(email, client), FREE_FAILURES);
        if matches!(client, SignInClient::Address(_)) {
            give_back(account_key(email), ACCOUNT_FREE_FAILURES);
        }
    }

    /// A right password clears this client's failures (not other clients' of the account)
    /// and gives back the attempt it was charged in advance (see [`Self::record_failure`]:
    /// sign-ins charge before hashing, so parallel guesses cannot slip past one check).
    pub fn record_success(&self, email: &str, client: SignInClient<'_>) {
        let mut records = self
            .records
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        records.remove(&client_key(email, client));
        if matches!(client, SignInClient::Address(_))
            && let Some(account) = records.get_mut(&account_key(email))
        {
            account.failures = account.failures.saturating_sub(1);
            if account.failures <= ACCOUNT_FREE_FAILURES {
                account.blocked_until = None;
            }
        }
    }

    #[cfg(test)]
    fn tracked(&self) -> usize {
        self.records
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OWNER: &str = "owner@example.com";

    #[test]
    fn waits_begin_after_the_free_failures_and_double() {
        let throttle = LoginThrottle::default();
        let stranger = SignInClient::Address(Some("203.0.113.9"));
        let start = Instant::now();
        let mut waits = Vec::new();
        for attempt in 0..(FREE_FAILURES + 4) {
            let now = start + Duration::from_secs(u64::from(attempt) * 3_600 / 100);
            throttle.record_failure(OWNER, stranger, now);
            waits.push(throttle.wait_before_attempt(OWNER, stranger, now));
        }
        let free = FREE_FAILURES as usize;
        assert!(waits[..free].iter().all(Option::is_none), "{waits:?}");
        assert_eq!(
            waits[free..].to_vec(),
            [1, 2, 4, 8]
                .map(|seconds| Some(Duration::from_secs(seconds)))
                .to_vec()
        );
    }

    #[test]
    fn a_strangers_failures_never_slow_the_owners_device_or_address() {
        let throttle = LoginThrottle::default();
        let now = Instant::now();
        for address in 0..200 {
            let address = format!("198.51.100.{address}");
            for _ in 0..FREE_FAILURES + 3 {
                throttle.record_failure(OWNER, SignInClient::Address(Some(&address)), now);
            }
        }
        assert!(
            throttle
                .wait_before_attempt(OWNER, SignInClient::TrustedDevice("owner-laptop"), now)
                .is_none(),
            "the owner's device signs in whatever strangers did"
        );
        assert!(
            throttle
                .wait_before_attempt(OWNER, SignInClient::Address(Some("192.0.2.1")), now)
                .is_some(),
            "guessing from many addresses slows every untrusted client of the account"
        );
        assert!(
            throttle
                .wait_before_attempt(
                    "someone-else@example.com",
                    SignInClient::Address(Some("192.0.2.1")),
                    now
                )
                .is_none(),
            "other accounts are untouched"
        );
    }

    #[test]
    fn failures_are_forgotten_after_the_window_and_the_state_stays_bounded() {
        let throttle = LoginThrottle::default();
        let client = SignInClient::Address(Some("203.0.113.9"));
        let start = Instant::now();
        for _ in 0..FREE_FAILURES + 1 {
            throttle.record_failure(OWNER, client, start);
        }
        assert!(throttle.wait_before_attempt(OWNER, client, start).is_some());
        let later = start + WINDOW;
        assert!(throttle.wait_before_attempt(OWNER, client, later).is_none());

        for account in 0..(MAX_TRACKED * 2) {
            throttle.record_failure(&format!("user{account}@example.com"), client, later);
        }
        assert!(throttle.tracked() <= MAX_TRACKED, "{}", throttle.tracked());
    }

    #[test]
    fn a_flood_of_junk_e_mails_does_not_flush_a_targets_count_and_refunds_give_back() {
        let throttle = LoginThrottle::default();
        let client = SignInClient::Address(Some("203.0.113.9"));
        let now = Instant::now();
        for _ in 0..FREE_FAILURES + 3 {
            throttle.record_failure(OWNER, client, now);
        }
        for junk in 0..MAX_TRACKED * 2 {
            throttle.record_failure(
                &format!("junk{junk}@example.com"),
                SignInClient::Address(Some("198.51.100.1")),
                now,
            );
        }
        assert!(throttle.wait_before_attempt(OWNER, client, now).is_some());

        // An attempt charged in advance and never checked (a busy pool) is given back.
        let other = "other@example.com";
        for _ in 0..FREE_FAILURES {
            throttle.record_failure(other, client, now);
        }
        throttle.record_failure(other, client, now);
        assert!(throttle.wait_before_attempt(other, client, now).is_some());
        throttle.refund(other, client);
        assert!(throttle.wait_before_attempt(other, client, now).is_none());
    }

    #[test]
    fn an_address_has_a_budget_for_the_unauthenticated_routes() {
        let throttle = LoginThrottle::default();
        for _ in 0..ADDRESS_BURST {
            throttle.admit_address(Some("203.0.113.9")).unwrap();
        }
        assert!(throttle.admit_address(Some("203.0.113.9")).is_err());
        assert!(throttle.admit_address(Some("203.0.113.10")).is_ok());
    }
}
