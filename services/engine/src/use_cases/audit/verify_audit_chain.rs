//! Verify the audit chain against its anchor, from the last verified checkpoint or from the
//! start. A project key learns only about its own project: its events' count, and where a
//! break is when it is in one of them (a break elsewhere is reported without naming the
//! event). A console member sees the organization's chain.

use crate::{EngineError, MemoryEngine};
use engram_core::principal::Credential;
use engram_core::{Operation, Principal};
pub use engram_storage::VerificationStart;

pub struct BrokenChainLink {
    /// `None` when the break is outside what the caller may see, or the newest event was
    /// removed (there is no event to name).
    pub event_id: Option<i64>,
    pub sequence: Option<i64>,
    pub reason: String,
}

pub struct AuditChainReport {
    pub verified: bool,
    /// The caller's events checked: the project's for a key, the organization's for a
    /// console member.
    pub events_checked: u64,
    pub first_broken: Option<BrokenChainLink>,
    /// Where this run started recomputing (1: from the start; later: it continued from the
    /// last verified checkpoint).
    pub recomputed_from_sequence: i64,
    /// The newest sequence of the organization's chain named by the anchor outside the
    /// database (`None` when verification failed or no anchor is configured).
    pub anchored_sequence: Option<i64>,
    /// The first event with a keyed hash (events before it predate the keyed chain).
    pub keyed_since: Option<i64>,
}

impl MemoryEngine {
    pub async fn verify_audit_chain_for(
        &self,
        principal: &Principal,
        start: VerificationStart,
    ) -> Result<AuditChainReport, EngineError> {
        principal.authorize(Operation::VerifyAuditChain)?;
        let verification = self
            .storage
            .verify_audit_chain(principal.scope(), start)
            .await?;
        let organization_wide = matches!(principal.credential(), Credential::ConsoleAccount { .. });
        let own_project = principal.scope().project_id().to_string();
        let first_broken = verification.first_broken.map(|broken| {
            // A removed newest event (event id 0) belongs to no project: say what happened.
            let visible = organization_wide
                || broken.project_id.as_deref() == Some(own_project.as_str())
                || broken.event_id == 0;
            BrokenChainLink {
                event_id: visible.then_some(broken.event_id).filter(|id| *id > 0),
                sequence: visible.then_some(broken.sequence),
                reason: if visible {
                    broken.reason
                } else {
                    "the chain is broken at an event outside this project".to_string()
                },
            }
        });
        Ok(AuditChainReport {
            verified: first_broken.is_none(),
            // Other projects' volume stays private to a key.
            events_checked: if organization_wide {
                verification.events_checked
            } else {
                verification.project_events_checked
            },
            first_broken,
            recomputed_from_sequence: verification.recomputed_from_sequence,
            anchored_sequence: verification.anchored_sequence,
            keyed_since: verification.keyed_since,
        })
    }
}
