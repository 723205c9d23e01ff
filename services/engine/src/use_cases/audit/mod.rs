//! The hash-chained audit log: read, export and verify. A project key sees its project's
//! events only; a console member also sees the organization's own events (members,
//! invitations), which belong to no project.

mod export_audit_events;
mod list_audit_events;
mod verify_audit_chain;

pub use export_audit_events::MAX_EXPORT_EVENTS;
pub(crate) use verify_audit_chain::FullVerificationTimes;
pub use verify_audit_chain::{
    AuditChainReport, BrokenChainLink, FULL_VERIFICATION_INTERVAL, VerificationStart,
};

use engram_core::Principal;
use engram_core::principal::Credential;
use engram_storage::AuditFilter;

/// The filter as this caller may apply it.
fn confined(principal: &Principal, mut filter: AuditFilter) -> AuditFilter {
    if !matches!(principal.credential(), Credential::ConsoleAccount { .. }) {
        filter.include_organization_events = false;
    }
    filter
}
