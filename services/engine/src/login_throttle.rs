//! Console sign-in throttling: after `MAX_FAILURES` wrong passwords for one e-mail within
//! `WINDOW`, that e-mail is locked for `LOCKOUT`, right password or not. Kept in memory:
//! a restart forgets it, which costs an attacker a restart of our server, not a bypass.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub const MAX_FAILURES: u32 = 5;
pub const WINDOW: Duration = Duration::from_secs(15 * 60);
pub const LOCKOUT: Duration = Duration::from_secs(15 * 60);
/// E-mails tracked at most; beyond it the stalest entries are dropped.
const MAX_TRACKED: usize = 10_000;

#[derive(Clone, Copy, Debug)]
struct FailureRecord {
    failures: u32,
    window_started: Instant,
    locked_until: Option<Instant>,
}

impl FailureRecord {
    fn starting_at(now: Instant) -> Self {
        Self {
            failures: 0,
            window_started: now,
            locked_until: None,
        }
    }
}

#[derive(Default)]
pub struct LoginThrottle {
    records: Mutex<HashMap<String, FailureRecord>>,
}

fn normalized(email: &str) -> String {
    email.trim().to_lowercase()
}

impl LoginThrottle {
    /// `Some(remaining)` while `email` is locked out.
    pub fn locked_for(&self, email: &str) -> Option<Duration> {
        let records = self
            .records
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        let locked_until = records.get(&normalized(email))?.locked_until?;
        locked_until.checked_duration_since(Instant::now())
    }

    pub fn record_failure(&self, email: &str) {
        let now = Instant::now();
        let mut records = self
            .records
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        if records.len() >= MAX_TRACKED {
            records.retain(|_, record| now.duration_since(record.window_started) < WINDOW);
        }
        let record = records
            .entry(normalized(email))
            .or_insert(FailureRecord::starting_at(now));
        if now.duration_since(record.window_started) >= WINDOW {
            *record = FailureRecord::starting_at(now);
        }
        record.failures += 1;
        if record.failures >= MAX_FAILURES {
            record.locked_until = Some(now + LOCKOUT);
        }
    }

    pub fn record_success(&self, email: &str) {
        let mut records = self
            .records
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        records.remove(&normalized(email));
    }
}
