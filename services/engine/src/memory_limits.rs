//! Bounded memory per subject at write time: before a write, one that would take an end-user
//! or an agent past the project's memory limits is refused (or refused when no room can be
//! made); after it, the `evict_*` policies delete what passes the limits through the bulk delete.
//!
//! Every write path that adds memories calls both: the add use case (and through it Mem0's add
//! and MCP's `add_memory`), file ingestion and derivation from messages.

use crate::{EngineError, MemoryEngine};
use chrono::Utc;
use engram_core::ProjectScope;
use engram_core::audit::Actor;
use engram_core::memory_limits::{LimitedSubject, MemoryLimitPolicy, MemoryLimits};
use engram_core::usage::{UsageAttribution, UsageUnit};
use engram_storage::governance::Eviction;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

/// Most memories one write evicts: a limit lowered below what subjects hold drains over the
/// next writes instead of in one request.
pub const MAX_EVICTIONS_PER_WRITE: u64 = 1_000;

/// One lock per project, held while a write's evictions are counted, chosen and deleted.
#[derive(Debug, Default)]
pub(crate) struct EvictionLocks(
    Mutex<HashMap<engram_core::ProjectId, Arc<tokio::sync::Mutex<()>>>>,
);

impl EvictionLocks {
    fn of(&self, project: engram_core::ProjectId) -> Arc<tokio::sync::Mutex<()>> {
        match self.0.lock() {
            Ok(mut locks) => locks.entry(project).or_default().clone(),
            // A panic elsewhere while holding the map leaves evictions unserialised, not stopped.
            Err(_) => Arc::default(),
        }
    }
}

impl MemoryEngine {
    /// What `memories` add per subject: a keyed memory that replaces an active one adds
    /// nothing.
    async fn memories_added(
        &self,
        scope: &ProjectScope,
        memories: &[engram_core::NewMemory],
    ) -> Result<BTreeMap<LimitedSubject, u64>, EngineError> {
        let mut added = BTreeMap::new();
        for memory in memories {
            let user_id = memory.user_id.as_ref().map(|id| id.as_str());
            let agent_id = memory.agent_id.as_ref().map(|id| id.as_str());
            if let Some(key) = &memory.key
                && self
                    .storage
                    .replaces_keyed_memory(scope, user_id, agent_id, key.as_str())
                    .await?
            {
                continue;
            }
            for subject in LimitedSubject::of_memory(user_id, agent_id) {
                *added.entry(subject).or_default() += 1;
            }
        }
        Ok(added)
    }

    async fn memory_limits(
        &self,
        scope: &ProjectScope,
    ) -> Result<Option<MemoryLimits>, EngineError> {
        Ok(self
            .spaces
            .settings_cache()
            .of(scope)
            .await?
            .spend_limits
            .memory_limits
            .clone())
    }

    /// Refuse a write of `memories` (`409 memory-limit-reached`) that would take a subject
    /// past its limit when the policy refuses, when the write alone is more than the limit,
    /// or when the subject's immutable and held memories leave no room to evict. A retry of
    /// an answered write (its idempotency `claim` used) replays its answer: it is let through.
    pub(crate) async fn admit_under_memory_limits(
        &self,
        scope: &ProjectScope,
        memories: &[engram_core::NewMemory],
        claim: Option<&engram_storage::IdempotencyClaim>,
    ) -> Result<(), EngineError> {
        let Some(limits) = self.memory_limits(scope).await? else {
            return Ok(());
        };
        if let Some(claim) = claim
            && self.storage.idempotency_key_used(scope, &claim.key).await?
        {
            return Ok(());
        }
        let added = self.memories_added(scope, memories).await?;
        for (subject, adding) in &added {
            let Some(maximum) = limits.of(subject) else {
                continue;
            };
            let maximum = u64::from(maximum);
            let name = subject.limit_name();
            let who = subject.describe();
            if *adding > maximum {
                return Err(EngineError::MemoryLimitReached(format!(
                    "this write adds {adding} memories of {who}, more than {name} ({maximum})"
                )));
            }
            let held = self.storage.subject_memory_count(scope, subject).await?;
            let after = held.live + adding;
            if after <= maximum {
                continue;
            }
            // The messages give no counts: the subject's memories span agents and end-users
            // the writer may not read.
            if limits.policy == MemoryLimitPolicy::Refuse {
                return Err(EngineError::MemoryLimitReached(format!(
                    "{who} is at {name} ({maximum}; policy refuse): delete some of its memories, or ask an admin to raise the limit"
                )));
            }
            let needed = after - maximum;
            let evictable = held.live - held.locked;
            if needed > evictable {
                return Err(EngineError::MemoryLimitReached(format!(
                    "{who} is at {name} ({maximum}) and the memories that could make room are immutable or under legal hold, which are never evicted"
                )));
            }
        }
        Ok(())
    }

    /// After a write: delete, as the limits' setter, what takes each subject the write touched
    /// past its limit, never the written memories themselves. A failure here leaves the
    /// subject over its limit until the next write (the write itself stands), and is logged.
    pub(crate) async fn evict_over_memory_limits(
        &self,
        scope: &ProjectScope,
        written: &[(engram_core::MemoryId, Option<&str>, Option<&str>)],
        writer: &Actor,
    ) {
        if let Err(error) = self.try_evict(scope, written, writer).await {
            tracing::warn!(%error, project_id = %scope.project_id(), "eviction under the memory limits failed; the next write retries");
        }
    }

    async fn try_evict(
        &self,
        scope: &ProjectScope,
        written: &[(engram_core::MemoryId, Option<&str>, Option<&str>)],
        writer: &Actor,
    ) -> Result<(), EngineError> {
        let Some(limits) = self.memory_limits(scope).await? else {
            return Ok(());
        };
        let policy = limits.policy;
        if policy == MemoryLimitPolicy::Refuse {
            return Ok(());
        }
        let setter = limits
            .set_by
            .as_deref()
            .and_then(|label| {
                Actor::from_label(label, writer.channel.clone(), writer.request_id.clone())
            })
            .unwrap_or_else(|| Actor::system("memory_limits"));
        let lock = self.evictions.of(scope.project_id());
        let _one_at_a_time = lock.lock().await;
        let keep: Vec<engram_core::MemoryId> = written.iter().map(|(id, _, _)| *id).collect();
        let mut subjects: Vec<LimitedSubject> = written
            .iter()
            .flat_map(|(_, user_id, agent_id)| LimitedSubject::of_memory(*user_id, *agent_id))
            .collect();
        subjects.sort();
        subjects.dedup();
        for subject in subjects {
            let Some(maximum) = limits.of(&subject) else {
                continue;
            };
            let held = self.storage.subject_memory_count(scope, &subject).await?;
            let excess = held
                .live
                .saturating_sub(u64::from(maximum))
                .min(MAX_EVICTIONS_PER_WRITE);
            if excess == 0 {
                continue;
            }
            let candidates = self
                .storage
                .eviction_candidates(scope, &subject, policy, &keep, excess, Utc::now())
                .await?;
            let eviction = Eviction {
                limit_name: subject.limit_name(),
                maximum,
                policy: policy.as_str(),
                // The audit log names an end-user by the subject digest, never by the raw
                // id (personal data that would outlive an erasure there).
                subject: match &subject {
                    LimitedSubject::EndUser(user_id) => format!(
                        "end-user {}",
                        self.governance.subject_digest(scope, user_id)
                    ),
                    LimitedSubject::Agent(_) => subject.describe(),
                },
                made_room_for: writer.label(),
            };
            let evicted = self
                .governance
                .evict_memories(scope, &candidates, &eviction, &setter)
                .await?;
            if evicted == 0 {
                continue;
            }
            tracing::info!(project_id = %scope.project_id(), limit = eviction.limit_name, policy = eviction.policy, evicted, "memories evicted under the memory limits");
            metrics::counter!("engram_memories_evicted_total", "policy" => policy.as_str())
                .increment(evicted);
            let (user_id, agent_id) = match &subject {
                LimitedSubject::EndUser(user_id) => (Some(user_id.as_str()), None),
                LimitedSubject::Agent(agent_id) => (None, Some(agent_id.as_str())),
            };
            self.meter.record(
                scope,
                &UsageAttribution::engine("memory_limits").for_subject(user_id, agent_id),
                UsageUnit::MemoriesEvicted,
                evicted,
            );
        }
        Ok(())
    }
}
