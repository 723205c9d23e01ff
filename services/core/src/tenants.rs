//! Who belongs to an organization: its projects and the console's staff (members and open
//! invitations), as readers see them.

use crate::access::ConsoleRole;
use crate::ids::ConsoleAccountId;
use crate::{OrganizationId, ProjectId};
use chrono::{DateTime, Utc};
use uuid::Uuid;

/// A console member as the members page shows it (never the password hash).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConsoleMemberRecord {
    pub id: ConsoleAccountId,
    pub email: String,
    pub role: ConsoleRole,
    pub created_at: DateTime<Utc>,
}

/// An invitation that has not been accepted, revoked or let expire.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConsoleInvitationRecord {
    pub id: Uuid,
    pub email: String,
    pub role: ConsoleRole,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProjectRecord {
    pub id: ProjectId,
    pub organization_id: OrganizationId,
    pub name: String,
}
