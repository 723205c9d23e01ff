//! The seam between the console and the rest of Engram: the gateway implements
//! [`ConsoleBackend`] and hands it to [`crate::console_router`]; the console never touches storage.

use crate::model::{
    AuditListing, AuditQuery, ConsoleAccount, ConsoleError, KeyListing, MemoryListQuery,
    MemoryPage, NewKeyRequest, NewKeySecret, ProjectSummary, SessionTokens,
};

/// Everything the console needs from the service, keyed by the opaque session token that
/// [`ConsoleBackend::login`] issued and the console keeps in the `engram_console` cookie.
///
/// Implementations own authentication, tenant scoping and auditing (every call of
/// `list_memories` is a console read of memory content).
#[async_trait::async_trait]
pub trait ConsoleBackend: Send + Sync + 'static {
    /// Verify e-mail + password; on success a new session's access and refresh tokens.
    ///
    /// Tokens must consist of cookie-safe characters (e.g. hex or base64url); anything
    /// else is refused with [`ConsoleError::Internal`] rather than written into a header.
    async fn login(&self, email: String, password: String) -> Result<SessionTokens, ConsoleError>;

    /// End the session of this access token at once; unknown or expired tokens are ignored.
    async fn logout(&self, session_token: String);

    /// Exchange a refresh token for a new pair (the old one stops working). `None` when it
    /// is unknown, expired, revoked, or was already used (which also ends its session).
    async fn refresh(&self, refresh_token: &str) -> Option<SessionTokens>;

    /// The account behind a live session, `None` when the token is unknown or expired.
    async fn current_account(&self, session_token: &str) -> Option<ConsoleAccount>;

    /// Projects visible to the session's account, in display order (the first one is the
    /// console's default). [`ConsoleError::Unauthorized`] when the session is not live.
    async fn list_projects(&self, session_token: &str)
    -> Result<Vec<ProjectSummary>, ConsoleError>;

    /// Memories of one project matching the query, newest first, at most `query.limit`.
    /// [`ConsoleError::NotFound`] for a project the account cannot see.
    async fn list_memories(
        &self,
        session_token: &str,
        query: MemoryListQuery,
    ) -> Result<MemoryPage, ConsoleError>;

    /// The project's audit events (and the organization's own, such as console logins),
    /// newest first, with the verification of the organization's hash chain.
    async fn audit_log(
        &self,
        session_token: &str,
        query: AuditQuery,
    ) -> Result<AuditListing, ConsoleError>;

    /// Every audit event of the project as CSV, for download.
    async fn export_audit_csv(
        &self,
        session_token: &str,
        project_id: &str,
    ) -> Result<String, ConsoleError>;

    /// The project's API keys (owners, admins and developers).
    async fn list_keys(
        &self,
        session_token: &str,
        project_id: &str,
    ) -> Result<KeyListing, ConsoleError>;

    /// Create a key; its secret is in the answer only.
    async fn create_key(
        &self,
        session_token: &str,
        request: NewKeyRequest,
    ) -> Result<NewKeySecret, ConsoleError>;

    /// Revoke a key at once.
    async fn revoke_key(
        &self,
        session_token: &str,
        project_id: &str,
        key_id: &str,
    ) -> Result<(), ConsoleError>;

    /// Replace a key; the old one keeps working for a day.
    async fn roll_key(
        &self,
        session_token: &str,
        project_id: &str,
        key_id: &str,
    ) -> Result<NewKeySecret, ConsoleError>;
}
