//! A project's governance settings (redaction, retention, derivation, embedding, recall
//! capture), a memory's protection flags, and a memory as a subject export carries it.

use crate::memory::HistoryEntry;
use crate::pii::PiiRedaction;
use crate::subject_stores::{StoreRetention, SubjectStore};
use crate::{Memory, MemoryKind};
use std::collections::BTreeMap;

/// A project's governance settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProjectSettings {
    pub pii_redaction: PiiRedaction,
    /// Days a memory of a kind is kept after it was created; absent kinds are kept until
    /// deleted (or their own `expires_at`).
    pub retention_days: BTreeMap<MemoryKind, u32>,
    /// Whether conversation ingest turns stored messages into memories when the request
    /// does not say.
    pub derive_memories: bool,
    /// Where the project's vectors come from; changed only while it holds no memories.
    pub embedding: crate::ProjectEmbedding,
    /// What each search records (recall events).
    pub recall_events: crate::recall::RecallEventCapture,
    /// Days recall events are kept.
    pub recall_event_retention_days: u32,
    /// Days the other swept stores (messages, session state, feedback, files) keep a
    /// record; a store not named keeps its records until deleted or erased.
    pub store_retention_days: BTreeMap<SubjectStore, u32>,
    /// Whether run steps keep prompts, tool arguments and results as text or as digests.
    pub run_capture: crate::runs::RunCapture,
    /// Whether every ended run's tool steps become a `trajectory` memory unless the end
    /// says otherwise.
    pub keep_trajectories: bool,
    /// What searches that set no `min_score` leave out as not relevant.
    pub relevance_floor: crate::search::RelevanceFloorSetting,
    /// The visibility among the project's agents of a new memory that names none.
    pub default_visibility: crate::Visibility,
    /// Whether an agent's searches take other agents' memories only once verified.
    pub verified_only_from_other_agents: bool,
    /// Named teams of agents a memory can be shared with.
    pub agent_teams: crate::agent_teams::AgentTeams,
    /// Raised at every switch of the embedding of a project with memories; a memory
    /// embedded in another generation is not written.
    pub embedding_generation: i64,
    /// The move to another embedding under way, if any.
    pub embedding_change: Option<EmbeddingChange>,
}

/// A project with memories moving to another embedding: a task embeds every memory into the
/// new space while searches keep using the old one, then switches at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EmbeddingChange {
    pub to: crate::ProjectEmbedding,
    pub task_id: uuid::Uuid,
}

/// Why another embedding change is refused while one is under way: what to do instead.
pub fn move_under_way(target_source: &str, task_id: uuid::Uuid) -> String {
    format!(
        "the project is already moving to the {target_source} embedding (task {task_id}): wait for that task, or change the embedding back to the one in use to cancel it"
    )
}

impl ProjectSettings {
    /// Days these settings keep `store`'s records; `None`: until deleted or erased, or the
    /// store is not swept by age.
    pub fn retention_days_of(&self, store: SubjectStore) -> Option<u32> {
        match store.declaration().retention {
            StoreRetention::ProjectDays { .. } if store == SubjectStore::RecallEvents => {
                Some(self.recall_event_retention_days)
            }
            StoreRetention::ProjectDays { .. } => self.store_retention_days.get(&store).copied(),
            StoreRetention::MemoryKinds
            | StoreRetention::WithItsSource(_)
            | StoreRetention::UntilDeleted(_) => None,
        }
    }
}

impl Default for ProjectSettings {
    fn default() -> Self {
        Self {
            pii_redaction: PiiRedaction::default(),
            retention_days: BTreeMap::new(),
            derive_memories: true,
            embedding: crate::ProjectEmbedding::default(),
            recall_events: crate::recall::RecallEventCapture::default(),
            recall_event_retention_days: crate::recall::DEFAULT_RECALL_EVENT_RETENTION_DAYS,
            store_retention_days: BTreeMap::new(),
            run_capture: crate::runs::RunCapture::Digests,
            keep_trajectories: false,
            relevance_floor: crate::search::RelevanceFloorSetting::Model,
            default_visibility: crate::Visibility::Shared,
            verified_only_from_other_agents: false,
            agent_teams: crate::agent_teams::AgentTeams::default(),
            embedding_generation: 0,
            embedding_change: None,
        }
    }
}

/// The governance flags of one memory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryFlags {
    /// Cannot be edited or deleted (subject erasure still removes it).
    pub immutable: bool,
    /// Cannot be edited, deleted, expired or erased until the hold is lifted.
    pub legal_hold: bool,
}

/// A memory with its full version history, for subject export.
#[derive(Clone, Debug)]
pub struct ExportedMemory {
    pub memory: Memory,
    pub flags: MemoryFlags,
    pub history: Vec<HistoryEntry>,
}
