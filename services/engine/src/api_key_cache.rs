//! Verified API keys remembered for a few seconds, so authenticating a request is a memory
//! lookup rather than a database read: forgotten at once in this process when a key is rolled
//! or revoked, and within [`API_KEY_CACHE_TTL`] when another replica does it.

use chrono::Utc;
use engram_core::ids::ApiKeyId;
use engram_storage::VerifiedApiKey;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a verified key is trusted without reading the database again: the longest a
/// revoke or roll made by another replica takes to apply here.
pub const API_KEY_CACHE_TTL: Duration = Duration::from_secs(5);
/// Keys remembered at most; beyond it the cache starts over.
const MAX_CACHED_KEYS: usize = 10_000;

struct CachedKey {
    verified: VerifiedApiKey,
    cached_at: Instant,
}

/// Keyed by the peppered hash of the whole presented key (never the key itself), so only the
/// exact secret finds an entry; wrong secrets are never cached and always reach the
/// constant-time check in storage.
#[derive(Default)]
pub struct ApiKeyCache {
    entries: Mutex<HashMap<String, CachedKey>>,
    /// Raised by every `forget`: a verification read before a forget is not remembered
    /// after it (it may have read the key before the revoke committed).
    generation: std::sync::atomic::AtomicU64,
}

impl ApiKeyCache {
    /// The verified key of `presented_hash`, while fresh and not expired.
    pub fn get(&self, presented_hash: &str) -> Option<VerifiedApiKey> {
        let mut entries = self
            .entries
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        let entry = entries.get(presented_hash)?;
        let expired = entry
            .verified
            .expires_at
            .is_some_and(|expires_at| expires_at <= Utc::now());
        if expired || entry.cached_at.elapsed() >= API_KEY_CACHE_TTL {
            entries.remove(presented_hash);
            return None;
        }
        Some(entry.verified.clone())
    }

    /// Where forgetting stands now: read before verifying in the database, and handed to
    /// [`Self::remember`].
    pub fn generation(&self) -> u64 {
        self.generation.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Remember `verified` unless a key was forgotten since `read_at` (its generation).
    pub fn remember(&self, presented_hash: String, verified: VerifiedApiKey, read_at: u64) {
        let mut entries = self
            .entries
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        if self.generation() != read_at {
            return;
        }
        if entries.len() >= MAX_CACHED_KEYS {
            entries.retain(|_, entry| entry.cached_at.elapsed() < API_KEY_CACHE_TTL);
            if entries.len() >= MAX_CACHED_KEYS {
                entries.clear();
            }
        }
        entries.insert(
            presented_hash,
            CachedKey {
                verified,
                cached_at: Instant::now(),
            },
        );
    }

    /// Forget `key_id` (rolled or revoked here): its next use reads the database.
    pub fn forget(&self, key_id: ApiKeyId) {
        let mut entries = self
            .entries
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        self.generation
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        entries.retain(|_, entry| entry.verified.key_id != key_id);
    }
}
