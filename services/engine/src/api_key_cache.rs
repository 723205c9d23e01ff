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
    /// Public ids of the deployment's keys, read at most every [`KNOWN_IDS_TTL`] (and added
    /// to as keys verify here): a presented key naming one is a real key's id, whose lookup
    /// its client need not pay for up front.
    known_public_ids: Mutex<(std::collections::HashSet<String>, Option<Instant>)>,
    /// Held by the one request that reads the key ids again: the others meanwhile treat an
    /// id as unknown instead of reading the table too.
    pub(crate) reloading_public_ids: tokio::sync::Mutex<()>,
}

/// How long the list of real key ids is used before it is read again: a key made by another
/// replica meanwhile is looked up as an unknown id (its client pays for the lookup first).
pub const KNOWN_IDS_TTL: Duration = Duration::from_secs(30);

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

    /// Note that a key with this public id verified here.
    pub fn know_public_id(&self, public_id: &str) {
        self.known_public_ids
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .0
            .insert(public_id.to_string());
    }

    /// Whether `public_id` is a real key's, `None` when the list is due to be read again.
    pub fn knows_public_id(&self, public_id: &str) -> Option<bool> {
        let known = self
            .known_public_ids
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        let fresh = known
            .1
            .is_some_and(|read_at| read_at.elapsed() < KNOWN_IDS_TTL);
        fresh.then(|| known.0.contains(public_id))
    }

    /// Replace the list of real key ids with what the database holds now.
    pub fn replace_public_ids(&self, public_ids: Vec<String>) {
        let mut known = self
            .known_public_ids
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        *known = (public_ids.into_iter().collect(), Some(Instant::now()));
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
