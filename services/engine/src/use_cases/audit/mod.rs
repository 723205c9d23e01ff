//! The hash-chained audit log: read, export and verify. A project key sees its project's
//! events only; a console member also sees the organization's own events (members,
//! invitations), which belong to no project.

mod audit_names;
mod export_audit_events;
mod list_audit_events;
mod verify_audit_chain;

pub use audit_names::AuditNames;
pub use export_audit_events::MAX_EXPORT_EVENTS;
pub(crate) use verify_audit_chain::FullVerificationTimes;
pub use verify_audit_chain::{AuditChainReport, BrokenChainLink, FULL_VERIFICATION_INTERVAL};

use engram_core::audit::AuditAction;
use engram_core::principal::Credential;
use engram_core::{FieldError, Principal};
use engram_storage::AuditFilter;

/// Largest page of the audit log.
pub const MAX_AUDIT_PAGE: u64 = 500;

/// What is wrong with an audit filter, each field named with `field_prefix` before it (the
/// HTTP door's `query.`): a known action, a page of 1–[`MAX_AUDIT_PAGE`], ids of 1–255
/// characters, `since` before `until`. The audit use cases hold every door to it.
pub fn audit_filter_errors(filter: &AuditFilter, field_prefix: &str) -> Vec<FieldError> {
    let field = |name: &str| format!("{field_prefix}{name}");
    let mut errors = Vec::new();
    if let Some(action) = &filter.action
        && AuditAction::parse(action).is_none()
    {
        errors.push(FieldError::new(
            field("action"),
            format!(
                "unknown action; use one of {}",
                AuditAction::ALL.map(AuditAction::as_str).join(", ")
            ),
        ));
    }
    if !(1..=MAX_AUDIT_PAGE).contains(&filter.limit) {
        errors.push(FieldError::new(
            field("limit"),
            format!("must be 1–{MAX_AUDIT_PAGE}"),
        ));
    }
    for (name, value) in [
        ("actor_id", &filter.actor_id),
        ("target_id", &filter.target_id),
    ] {
        if value
            .as_ref()
            .is_some_and(|text| text.is_empty() || text.chars().count() > 255)
        {
            errors.push(FieldError::new(field(name), "must be 1–255 characters"));
        }
    }
    if let (Some(since), Some(until)) = (filter.since, filter.until)
        && since >= until
    {
        errors.push(FieldError::new(field("until"), "must be after `since`"));
    }
    errors
}

/// `Err` naming every problem of `filter`.
fn checked(filter: &AuditFilter) -> Result<(), crate::EngineError> {
    let errors = audit_filter_errors(filter, "");
    if errors.is_empty() {
        return Ok(());
    }
    Err(engram_core::InvalidInput(errors).into())
}

/// The filter as this caller may apply it.
fn confined(principal: &Principal, mut filter: AuditFilter) -> AuditFilter {
    if !matches!(principal.credential(), Credential::ConsoleAccount { .. }) {
        filter.include_organization_events = false;
    }
    filter
}
