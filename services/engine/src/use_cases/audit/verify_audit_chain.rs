//! Verify the audit chain against its anchor, from the last verified checkpoint or from the
//! start. A project key learns only about its own project: its events' count, and where a
//! break is when it is in one of them (a break elsewhere is reported without naming the
//! event), never the organization's sequence numbers. A console member sees the
//! organization's chain. Recomputing from the first event re-hashes every project's events:
//! it is the organization's (owners, admins, compliance), at most once a minute each.

use crate::{EngineError, MemoryEngine};
use engram_core::principal::Credential;
use engram_core::{Operation, OrganizationId, Principal};
use engram_storage::VerificationStart;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Fewest seconds between two verifications of one organization's chain from its first
/// event, per process.
pub const FULL_VERIFICATION_INTERVAL: Duration = Duration::from_secs(60);

/// When each organization's chain was last recomputed from its first event.
#[derive(Default)]
pub(crate) struct FullVerificationTimes(Mutex<HashMap<OrganizationId, Instant>>);

impl FullVerificationTimes {
    /// `Ok` and noted when the organization's last full verification is
    /// [`FULL_VERIFICATION_INTERVAL`] old; otherwise the seconds to wait.
    fn admit(&self, organization: OrganizationId) -> Result<(), u64> {
        let mut times = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let now = Instant::now();
        if let Some(last) = times.get(&organization) {
            let since = now.duration_since(*last);
            if since < FULL_VERIFICATION_INTERVAL {
                return Err(FULL_VERIFICATION_INTERVAL
                    .saturating_sub(since)
                    .as_secs()
                    .max(1));
            }
        }
        times.insert(organization, now);
        Ok(())
    }
}

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
    /// last verified checkpoint). Sequences are the organization's: `None` for a project key.
    pub recomputed_from_sequence: Option<i64>,
    /// The newest sequence of the organization's chain named by the anchor outside the
    /// database (`None` when verification failed, no anchor is configured, or for a project
    /// key, whom it would tell other projects' activity).
    pub anchored_sequence: Option<i64>,
    /// The first event with a keyed hash (events before it predate the keyed chain); `None`
    /// for a project key.
    pub keyed_since: Option<i64>,
}

impl MemoryEngine {
    pub async fn verify_audit_chain_for(
        &self,
        principal: &Principal,
        start: VerificationStart,
    ) -> Result<AuditChainReport, EngineError> {
        principal.authorize(Operation::VerifyAuditChain)?;
        if matches!(start, VerificationStart::Genesis) {
            principal.authorize(Operation::VerifyWholeAuditChain)?;
            self.full_verifications
                .admit(principal.scope().organization_id())
                .map_err(|retry_after_seconds| EngineError::TooManyAttempts {
                    retry_after_seconds,
                })?;
        }
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
                sequence: organization_wide.then_some(broken.sequence),
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
            // The organization's sequence numbers tell how busy its other projects are.
            recomputed_from_sequence: organization_wide
                .then_some(verification.recomputed_from_sequence),
            anchored_sequence: verification.anchored_sequence.filter(|_| organization_wide),
            keyed_since: verification.keyed_since.filter(|_| organization_wide),
        })
    }
}
