//! An invitation link seen by someone not yet signed in: what it invites to, and accepting
//! it with a new password (which creates the account and signs it in).

use super::{ConsoleAccess, ConsoleSessionTokens};
use crate::EngineError;
use engram_core::ConsoleRole;
use engram_core::NotFoundKind;
use engram_core::audit::{Actor, ActorKind};
use engram_storage::StorageError;

/// What a pending invitation offers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InvitationOffer {
    pub email: String,
    pub organization_name: String,
    pub role: ConsoleRole,
}

impl ConsoleAccess {
    /// The pending invitation of `token`; `Missing` when it is unknown, used, revoked or
    /// expired.
    pub async fn preview_invitation(&self, token: &str) -> Result<InvitationOffer, EngineError> {
        let token = token.trim();
        if token.len() > crate::console_credentials::MAX_INVITATION_TOKEN_BYTES {
            return Err(EngineError::NotFound(NotFoundKind::Invitation));
        }
        let (invitation, organization_id) =
            self.storage
                .pending_console_invitation(token)
                .await?
                .ok_or(EngineError::NotFound(NotFoundKind::Invitation))?;
        let organization_name = self
            .storage
            .organization_name(organization_id)
            .await?
            .unwrap_or_default();
        Ok(InvitationOffer {
            email: invitation.email,
            organization_name,
            role: invitation.role,
        })
    }

    /// The new account of the invitation of `token`, signed in. The address's budget for
    /// the console's unauthenticated routes and then the token are checked before the
    /// password is hashed (on the bounded password pool), so a stranger's guess costs no
    /// hashing.
    pub async fn accept_invitation(
        &self,
        token: &str,
        password: String,
        origin: &Actor,
    ) -> Result<ConsoleSessionTokens, EngineError> {
        self.admit_unauthenticated(origin)?;
        let token = token.trim();
        if token.len() > crate::console_credentials::MAX_INVITATION_TOKEN_BYTES {
            return Err(EngineError::NotFound(NotFoundKind::Invitation));
        }
        let password_errors = crate::console_credentials::new_password_errors(&password);
        if !password_errors.is_empty() {
            return Err(engram_core::InvalidInput(password_errors).into());
        }
        if self
            .storage
            .pending_console_invitation(token)
            .await?
            .is_none()
        {
            return Err(EngineError::NotFound(NotFoundKind::Invitation));
        }
        let password_hash = self
            .password_work
            .run(move || crate::console_credentials::hash_password(&password))
            .await?
            .map_err(EngineError::Internal)?;
        let origin = Actor {
            kind: ActorKind::ConsoleAccount,
            id: String::new(),
            ..origin.clone()
        };
        let account = self
            .storage
            .accept_console_invitation(token, &password_hash, &origin)
            .await
            .map_err(|error| match error {
                StorageError::NotFound(_) => EngineError::NotFound(NotFoundKind::Invitation),
                StorageError::WriteConflict(message) => EngineError::Conflict(message),
                other => other.into(),
            })?;
        tracing::info!(account_id = %account.id, "console invitation accepted");
        self.start_session(&account).await
    }
}
