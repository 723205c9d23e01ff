//! The process's cache of query embeddings, keyed by project, model and the project's
//! erasure epoch: searches answer from it, and erasure empties it and counts what is left.

use std::sync::Arc;

/// Query text → embedding, shared by the search path and erasure (which empties it: cached
/// query text may be about the erased end-user). Entries are keyed by the project's erasure
/// epoch; the cache remembers the newest epoch it has seen of each project, so an entry is
/// never stored or found under an older one — whether the newer epoch came from this
/// process's erasure or from another process's, read with the project's settings.
#[derive(Clone)]
pub struct QueryCache {
    inner: Arc<std::sync::Mutex<QueryEmbeddings>>,
}

struct QueryEmbeddings {
    entries: lru::LruCache<String, Arc<Vec<f32>>>,
    /// The newest erasure epoch seen of each project.
    epochs: std::collections::HashMap<engram_core::ProjectId, i64>,
}

impl QueryCache {
    pub fn new(capacity: std::num::NonZeroUsize) -> Self {
        Self {
            inner: Arc::new(std::sync::Mutex::new(QueryEmbeddings {
                entries: lru::LruCache::new(capacity),
                epochs: std::collections::HashMap::new(),
            })),
        }
    }

    /// The embedding of `query` in `model` cached for `project`, whose settings said
    /// `epoch` (a settings read may be older than an erasure this process already saw: the
    /// newer epoch counts).
    pub(crate) fn get(
        &self,
        project: engram_core::ProjectId,
        epoch: i64,
        model: &str,
        query: &str,
    ) -> Option<Arc<Vec<f32>>> {
        let mut cache = self.lock();
        let epoch = cache.advance_to(project, epoch);
        cache
            .entries
            .get(&query_cache_key(project, epoch, model, query))
            .cloned()
    }

    /// Keep `vector` as the embedding of `query`, unless an erasure raised the project's
    /// epoch past `epoch` meanwhile: the search may have been asked before the erasure, and
    /// what it stored would outlive it (it is answered, just not kept).
    pub(crate) fn put(
        &self,
        project: engram_core::ProjectId,
        epoch: i64,
        model: &str,
        query: &str,
        vector: Arc<Vec<f32>>,
    ) {
        let mut cache = self.lock();
        if cache.advance_to(project, epoch) > epoch {
            return;
        }
        cache
            .entries
            .put(query_cache_key(project, epoch, model, query), vector);
    }

    /// An erasure raised `project`'s epoch to `epoch`: every entry of the project goes.
    /// Returns how many went.
    pub(crate) fn erase_project(&self, project: engram_core::ProjectId, epoch: i64) -> u64 {
        let mut cache = self.lock();
        let raised = cache.epochs.entry(project).or_insert(epoch);
        *raised = (*raised).max(epoch);
        cache.drop_project(project, None)
    }

    /// How many of `project`'s entries are of an epoch before `epoch`.
    pub(crate) fn count_before(&self, project: engram_core::ProjectId, epoch: i64) -> u64 {
        self.lock()
            .entries
            .iter()
            .filter(|(key, _)| epoch_of_key(key, project).is_some_and(|stored| stored < epoch))
            .count() as u64
    }

    /// Benches: forget every entry, to time cold queries.
    pub(crate) fn clear(&self) {
        self.lock().entries.clear();
    }

    /// The cache, even after a panic elsewhere held its lock: an erasure must still empty it
    /// and count what is left (every change to it leaves it consistent).
    fn lock(&self) -> std::sync::MutexGuard<'_, QueryEmbeddings> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl QueryEmbeddings {
    /// The epoch to key `project`'s entries by, given a settings read that said `epoch`: the
    /// newest seen. A newer one than seen before means an erasure somewhere: the project's
    /// older entries go.
    fn advance_to(&mut self, project: engram_core::ProjectId, epoch: i64) -> i64 {
        let seen = self.epochs.entry(project).or_insert(epoch);
        if epoch <= *seen {
            return *seen;
        }
        *seen = epoch;
        self.drop_project(project, Some(epoch));
        epoch
    }

    /// Drop `project`'s entries of an epoch before `before` (every one with `None`);
    /// returns how many went.
    fn drop_project(&mut self, project: engram_core::ProjectId, before: Option<i64>) -> u64 {
        let stale: Vec<String> = self
            .entries
            .iter()
            .filter(|(key, _)| {
                epoch_of_key(key, project)
                    .is_some_and(|epoch| before.is_none_or(|before| epoch < before))
            })
            .map(|(key, _)| key.clone())
            .collect();
        for key in &stale {
            self.entries.pop(key);
        }
        stale.len() as u64
    }
}

/// The key of a cached query embedding: by project (a hit bills no tokens, so a shared entry
/// would tell one tenant what another searched), the project's erasure epoch, and the model
/// (two spaces embed a text differently).
fn query_cache_key(
    project: engram_core::ProjectId,
    epoch: i64,
    model: &str,
    query: &str,
) -> String {
    format!("{project}\u{0}{epoch}\u{0}{model}\u{0}{query}")
}

/// The epoch a cache key was stored under, when it is `project`'s.
fn epoch_of_key(key: &str, project: engram_core::ProjectId) -> Option<i64> {
    let rest = key.strip_prefix(&format!("{project}\u{0}"))?;
    rest.split('\u{0}').next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query_cache() -> QueryCache {
        QueryCache::new(std::num::NonZeroUsize::new(16).unwrap())
    }

    /// A search that read the project's epoch before this process's erasure raised it (its
    /// settings are cached for a few seconds) caches nothing: the erasure's verification
    /// finds nothing left from before it, and nothing of the search outlives the erasure.
    #[test]
    fn a_search_racing_an_erasure_keeps_nothing() {
        let cache = query_cache();
        let project = engram_core::ProjectId::generate();
        let other = engram_core::ProjectId::generate();
        let vector = Arc::new(vec![1.0, 0.0]);
        cache.put(project, 0, "model", "where does ines live", vector.clone());
        cache.put(other, 0, "model", "where does ines live", vector.clone());
        assert_eq!(
            cache.erase_project(project, 1),
            1,
            "the project's one entry"
        );
        assert_eq!(cache.count_before(project, 1), 0);
        assert!(
            cache
                .get(project, 0, "model", "where does ines live")
                .is_none()
        );
        assert!(
            cache
                .get(other, 0, "model", "where does ines live")
                .is_some(),
            "another project's entry stays"
        );

        // A search asked before the erasure, or one still holding epoch 0 from its cached
        // settings, keeps nothing: what it was asked may be about the erased person.
        cache.put(project, 0, "model", "what does ines eat", vector.clone());
        assert_eq!(
            cache.count_before(project, 1),
            0,
            "the erasure's verification finds nothing from before it"
        );
        for epoch in [0, 1] {
            assert!(
                cache
                    .get(project, epoch, "model", "what does ines eat")
                    .is_none(),
                "nothing kept from the late search (read at epoch {epoch})"
            );
        }
        // A search that read the raised epoch caches as before.
        cache.put(project, 1, "model", "what does ines eat", vector.clone());
        assert_eq!(
            cache.get(project, 1, "model", "what does ines eat"),
            Some(vector.clone())
        );
    }

    /// Another process's erasure is seen when a settings read brings the raised epoch: the
    /// project's older entries go, and are not answered from again.
    #[test]
    fn a_newer_epoch_from_the_settings_drops_the_older_entries() {
        let cache = query_cache();
        let project = engram_core::ProjectId::generate();
        let vector = Arc::new(vec![0.5]);
        cache.put(project, 3, "model", "q", vector.clone());
        assert_eq!(cache.get(project, 3, "model", "q"), Some(vector.clone()));
        assert!(cache.get(project, 4, "model", "q").is_none());
        assert!(
            cache.get(project, 3, "model", "q").is_none(),
            "an older settings read does not bring the entry back"
        );
        assert_eq!(cache.count_before(project, 4), 0);
    }
}
