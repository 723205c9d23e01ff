//! The console's own account domain: signing members in and out, their sessions, the
//! organization's members and invitations, and which projects a member may open.
//!
//! [`ConsoleAccess`] is to the console what [`crate::MemoryEngine::authenticate`] is to the
//! HTTP API: a session token becomes a [`ConsoleMember`], and a member opening a project
//! becomes the [`Principal`] every memory use case takes. Nothing outside the engine can
//! build either, so a console door cannot pick a project of another organization.

mod invitations;
mod language;
mod members;
mod organization;
mod prices;
mod sign_in;
mod statement;

pub use invitations::InvitationOffer;
pub use members::MemberListing;
pub use organization::ProjectMonthCost;

use crate::EngineError;
use crate::console_credentials::ConsoleSessionKeys;
use crate::login_throttle::LoginThrottle;
use crate::password_work::PasswordWork;
use engram_core::NotFoundKind;
use engram_core::audit::{Actor, ActorKind};
use engram_core::ids::ConsoleAccountId;
use engram_core::permissions::PrincipalKind;
use engram_core::{ConsoleRole, Operation, OrganizationId, Principal, ProjectId};
use engram_storage::{ConsoleAccountRecord, Storage};

/// How long a console session lasts without a new sign-in (its refresh token keeps being
/// rotated within it; the access token lives as long as the session keys say).
pub const CONSOLE_SESSION_LIFETIME: chrono::Duration = chrono::Duration::hours(12);
/// How long an invitation link stays valid.
pub const INVITATION_LIFETIME_DAYS: i64 = 7;

/// An access token (short-lived JWT) and the refresh token that renews it.
#[derive(Clone, PartialEq, Eq)]
pub struct ConsoleSessionTokens {
    pub access: String,
    pub refresh: String,
    /// A device token for the browser to keep (after a sign-in or an accepted invitation).
    pub device: Option<String>,
}

impl std::fmt::Debug for ConsoleSessionTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ConsoleSessionTokens { .. }")
    }
}

/// A signed-in console member, as only [`ConsoleAccess::authenticate_member`] (or a
/// sign-in) builds it: the account, its organization and role, and where the request came
/// from (for the audit log).
#[derive(Clone)]
pub struct ConsoleMember {
    account: ConsoleAccountRecord,
    actor: Actor,
}

impl std::fmt::Debug for ConsoleMember {
    // The account record carries the password hash: never printed.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConsoleMember")
            .field("account_id", &self.account.id)
            .field("organization_id", &self.account.organization_id)
            .field("role", &self.account.role)
            .finish_non_exhaustive()
    }
}

impl ConsoleMember {
    fn new(account: ConsoleAccountRecord, origin: &Actor) -> Self {
        let actor = Actor {
            kind: ActorKind::ConsoleAccount,
            id: account.id.to_string(),
            ..origin.clone()
        };
        Self { account, actor }
    }

    pub fn account_id(&self) -> ConsoleAccountId {
        self.account.id
    }

    pub fn organization_id(&self) -> OrganizationId {
        self.account.organization_id
    }

    pub fn email(&self) -> &str {
        &self.account.email
    }

    pub fn role(&self) -> ConsoleRole {
        self.account.role
    }

    /// The member as the audit log names it.
    pub fn actor(&self) -> &Actor {
        &self.actor
    }

    /// Whether the member's role may perform `operation` (for optional parts of a page).
    pub fn may(&self, operation: Operation) -> bool {
        self.authorize(operation).is_ok()
    }

    /// `Forbidden` unless the permission table lets this member's role perform `operation`.
    pub fn authorize(&self, operation: Operation) -> Result<(), EngineError> {
        engram_core::permissions::authorize(
            &PrincipalKind::ConsoleMember(self.account.role),
            operation,
        )
        .map_err(EngineError::from)
    }
}

/// Sign-in, sessions, members and invitations of console accounts, over the deployment's
/// storage and console session keys. One per server: its sign-in throttle is in memory.
pub struct ConsoleAccess {
    storage: Storage,
    sessions: ConsoleSessionKeys,
    login_throttle: LoginThrottle,
    password_work: PasswordWork,
    /// For browsers holding a valid device token of the account they sign in to.
    password_work_known_devices: PasswordWork,
}

impl ConsoleAccess {
    pub fn new(storage: Storage, sessions: ConsoleSessionKeys) -> Self {
        Self {
            storage,
            sessions,
            login_throttle: LoginThrottle::default(),
            password_work: PasswordWork::sized_for_this_machine(),
            password_work_known_devices: PasswordWork::sized_for_this_machine(),
        }
    }

    /// The member a console access token speaks for, while its session is live (logout or
    /// a detected refresh replay ends it at once); `Unauthenticated` otherwise.
    pub async fn authenticate_member(
        &self,
        access_token: &str,
        origin: &Actor,
    ) -> Result<ConsoleMember, EngineError> {
        let signed_out = || EngineError::Unauthenticated("you are not signed in".to_string());
        let claim = self.sessions.verify(access_token).ok_or_else(signed_out)?;
        if !self
            .storage
            .console_session_is_live(claim.session_id)
            .await?
        {
            return Err(signed_out());
        }
        let account = self
            .storage
            .console_account(claim.account_id)
            .await?
            .ok_or_else(signed_out)?;
        Ok(ConsoleMember::new(account, origin))
    }

    /// The member at work in `project_id`, as the memory use cases take a caller: `NotFound`
    /// unless the project belongs to the member's organization (malformed ids included).
    pub async fn principal_in_project(
        &self,
        member: &ConsoleMember,
        project_id: &str,
    ) -> Result<Principal, EngineError> {
        let project_id: ProjectId = project_id
            .trim()
            .parse()
            .map_err(|_| EngineError::NotFound(NotFoundKind::Project))?;
        let scope = self
            .storage
            .project_scope_for_console_account(&member.account, project_id)
            .await?
            .ok_or(EngineError::NotFound(NotFoundKind::Project))?;
        Ok(Principal::console_member(
            scope,
            member.account.role,
            member.account.id.to_string(),
            member.actor.clone(),
        ))
    }
}

/// 256 random bits, hex: cookie- and link-safe, and stored only as a SHA-256.
fn new_secret_token() -> String {
    use rand::RngCore;
    let mut bytes = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut bytes);
    hex::encode(bytes)
}

impl crate::MemoryEngine {
    /// The console account domain over this engine's storage, signing sessions with
    /// `sessions`.
    pub fn console_access(&self, sessions: ConsoleSessionKeys) -> ConsoleAccess {
        ConsoleAccess::new(self.storage.clone(), sessions)
    }
}
