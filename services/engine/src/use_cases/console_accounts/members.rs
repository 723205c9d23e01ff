//! The organization's console members and invitations: who is in, who is invited, and the
//! role changes a member's own role allows (never above it, never oneself, owners only by
//! owners; the last owner stays, which storage enforces inside its transaction).

use super::{ConsoleAccess, ConsoleMember, INVITATION_LIFETIME_DAYS};
use crate::EngineError;
use engram_core::NotFoundKind;
use engram_core::ids::ConsoleAccountId;
use engram_core::{ConsoleRole, InvalidInput, Operation};
use engram_storage::{ConsoleInvitationRecord, ConsoleMemberRecord, StorageError};

/// The members page: everyone in the organization, the pending invitations, and the roles
/// the caller may hand out.
#[derive(Clone, Debug)]
pub struct MemberListing {
    pub members: Vec<ConsoleMemberRecord>,
    pub invitations: Vec<ConsoleInvitationRecord>,
    pub assignable_roles: Vec<ConsoleRole>,
}

/// A member change refused by storage (the last owner, a taken e-mail) says why; a member
/// or invitation outside the organization is not found.
fn member_change_error(error: StorageError) -> EngineError {
    match error {
        StorageError::NotFound(_) => EngineError::NotFound(NotFoundKind::Member),
        StorageError::Refused(message) | StorageError::WriteConflict(message) => {
            EngineError::Conflict(message)
        }
        other => other.into(),
    }
}

impl ConsoleAccess {
    pub async fn list_members(&self, member: &ConsoleMember) -> Result<MemberListing, EngineError> {
        member.authorize(Operation::ListMembers)?;
        let organization_id = member.organization_id();
        let members = self.storage.list_console_members(organization_id).await?;
        let invitations = self
            .storage
            .list_pending_console_invitations(organization_id)
            .await?;
        Ok(MemberListing {
            members,
            invitations,
            assignable_roles: ConsoleRole::ALL
                .into_iter()
                .filter(|candidate| member.role().can_assign(*candidate))
                .collect(),
        })
    }

    /// A pending invitation of `email` as `role`, and the secret token of its link (shown
    /// once; stored only as a hash).
    pub async fn invite_member(
        &self,
        member: &ConsoleMember,
        email: &str,
        role: &str,
    ) -> Result<(ConsoleInvitationRecord, String), EngineError> {
        member.authorize(Operation::InviteMember)?;
        let email = email.trim();
        if !crate::console_credentials::looks_like_email(email) {
            return Err(engram_core::InvalidInput(vec![engram_core::FieldError::new(
                "email",
                "enter the e-mail address of the person to invite",
            )])
            .into());
        }
        let role = assignable_role(member, role)?;
        let token = super::new_secret_token();
        let invitation = self
            .storage
            .create_console_invitation(
                member.organization_id(),
                email,
                role,
                &token,
                chrono::Utc::now() + chrono::Duration::days(INVITATION_LIFETIME_DAYS),
                member.actor(),
                member.account_id(),
            )
            .await
            .map_err(member_change_error)?;
        Ok((invitation, token))
    }

    pub async fn revoke_invitation(
        &self,
        member: &ConsoleMember,
        invitation_id: &str,
    ) -> Result<(), EngineError> {
        member.authorize(Operation::RemoveMember)?;
        let invitation_id: uuid::Uuid = invitation_id
            .trim()
            .parse()
            .map_err(|_| EngineError::NotFound(NotFoundKind::Invitation))?;
        self.storage
            .revoke_console_invitation(member.organization_id(), invitation_id, member.actor())
            .await
            .map_err(member_change_error)
    }

    pub async fn change_member_role(
        &self,
        member: &ConsoleMember,
        member_id: &str,
        role: &str,
    ) -> Result<(), EngineError> {
        member.authorize(Operation::ChangeMemberRole)?;
        let new_role = assignable_role(member, role)?;
        let other = self.member_to_manage(member, member_id).await?;
        self.storage
            .change_console_member_role(member.organization_id(), other, new_role, member.actor())
            .await
            .map(|_| ())
            .map_err(member_change_error)
    }

    pub async fn remove_member(
        &self,
        member: &ConsoleMember,
        member_id: &str,
    ) -> Result<(), EngineError> {
        member.authorize(Operation::RemoveMember)?;
        let other = self.member_to_manage(member, member_id).await?;
        self.storage
            .remove_console_member(member.organization_id(), other, member.actor())
            .await
            .map_err(member_change_error)
    }

    /// Another member of the caller's organization whom its role may change or remove:
    /// never oneself, and owners only by owners.
    async fn member_to_manage(
        &self,
        member: &ConsoleMember,
        member_id: &str,
    ) -> Result<ConsoleAccountId, EngineError> {
        let member_id: ConsoleAccountId = member_id
            .trim()
            .parse()
            .map_err(|_| EngineError::NotFound(NotFoundKind::Member))?;
        let other = self
            .storage
            .console_account(member_id)
            .await?
            .filter(|other| other.organization_id == member.organization_id())
            .ok_or(EngineError::NotFound(NotFoundKind::Member))?;
        if other.id == member.account_id() {
            return Err(EngineError::Conflict(
                "you cannot change or remove your own membership; ask another owner or admin"
                    .to_string(),
            ));
        }
        if !member.role().can_assign(other.role) {
            return Err(EngineError::Forbidden(format!(
                "a {} cannot change or remove a {}",
                member.role().as_str(),
                other.role.as_str()
            )));
        }
        Ok(other.id)
    }
}

/// The role named `role` when `member` may hand it out.
fn assignable_role(member: &ConsoleMember, role: &str) -> Result<ConsoleRole, EngineError> {
    let wanted = ConsoleRole::parse(role.trim()).ok_or_else(|| {
        InvalidInput::single(
            "role",
            format!("unknown role {role:?}; one of owner, admin, compliance, analyst, developer"),
        )
    })?;
    if !member.role().can_assign(wanted) {
        return Err(EngineError::Forbidden(format!(
            "a {} cannot give the {} role",
            member.role().as_str(),
            wanted.as_str()
        )));
    }
    Ok(wanted)
}
