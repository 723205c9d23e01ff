//! What a project holds of one end-user, before erasing or exporting it: how many records
//! each registered store holds, which memories are under legal hold (those block an
//! erasure), and the erasures already done, each with its receipt.

use crate::{EngineError, MemoryEngine};
use engram_core::audit::{AuditAction, AuditFilter};
use engram_core::{ExternalId, MemoryId, Operation, Principal};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SubjectSummary {
    pub memories: u64,
    pub held_memory_ids: Vec<MemoryId>,
    /// Every store of the registry of subject data, in its order, with how many records.
    pub stores: Vec<(&'static str, u64)>,
    /// Erasures of this end-user in the project, newest first (the log names them by the
    /// subject's digest, never by the id).
    pub erasures: Vec<PastErasure>,
}

/// One finished erasure: when, and its receipt as recorded in the audit log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PastErasure {
    pub erased_at: chrono::DateTime<chrono::Utc>,
    pub receipt: serde_json::Value,
}

/// How many past erasures a summary lists.
const ERASURES_SHOWN: u64 = 20;

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
        let erasures = self
            .storage
            .audit_events(
                scope,
                &AuditFilter {
                    action: Some(AuditAction::SubjectErased.as_str().to_string()),
                    target_id: Some(self.governance.subject_digest(scope, user_id.as_str())),
                    newest_first: true,
                    limit: ERASURES_SHOWN,
                    ..AuditFilter::default()
                },
            )
            .await?
            .into_iter()
            .map(|event| PastErasure {
                erased_at: event.at,
                receipt: event.details,
            })
            .collect();
        Ok(SubjectSummary {
            memories,
            held_memory_ids,
            stores,
            erasures,
        })
    }
}
