//! What a project holds of one end-user, before erasing or exporting it: how many records
//! each registered store holds, and which memories are under legal hold (those block an
//! erasure).

use crate::{EngineError, MemoryEngine};
use engram_core::{ExternalId, MemoryId, Operation, Principal};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SubjectSummary {
    pub memories: u64,
    pub held_memory_ids: Vec<MemoryId>,
    /// Every store of the registry of subject data, in its order, with how many records.
    pub stores: Vec<(&'static str, u64)>,
}

impl MemoryEngine {
    pub async fn summarize_subject_for(
        &self,
        principal: &Principal,
        user_id: &ExternalId,
    ) -> Result<SubjectSummary, EngineError> {
        principal.authorize(Operation::SummarizeSubject)?;
        let scope = principal.scope();
        let memories = self
            .storage
            .count_subject_memories(scope, user_id.as_str())
            .await?;
        let held_memory_ids = self
            .storage
            .held_memories_of_subject(scope, user_id.as_str())
            .await?;
        let stores = self
            .governance
            .subject_holdings(scope, user_id.as_str())
            .await?;
        Ok(SubjectSummary {
            memories,
            held_memory_ids,
            stores,
        })
    }
}
