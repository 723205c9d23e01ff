//! Signing a console member in and out, and renewing a session with its refresh token.

use super::{CONSOLE_SESSION_LIFETIME, ConsoleAccess, ConsoleMember, ConsoleSessionTokens};
use crate::EngineError;
use crate::console_credentials::verify_password;
use engram_core::audit::{Actor, AuditAction, AuditOutcome, NewAuditEvent};
use engram_storage::{ConsoleAccountRecord, RefreshOutcome};

/// Verifying against this when the e-mail is unknown keeps the answer time the same, so
/// timing does not reveal which accounts exist.
static UNKNOWN_ACCOUNT_HASH: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    crate::console_credentials::hash_password("no account has this password").unwrap_or_default()
});

impl ConsoleAccess {
    /// A new session for the account of `email` when `password` is its password.
    /// `WrongCredentials` does not say which of the two was wrong; an e-mail with too many
    /// recent failures is refused (`TooManyAttempts`) before its password is checked.
    pub async fn sign_in(
        &self,
        email: &str,
        password: String,
        origin: &Actor,
    ) -> Result<ConsoleSessionTokens, EngineError> {
        if let Some(remaining) = self.login_throttle.locked_for(email) {
            tracing::warn!("console sign-in refused: too many failed attempts");
            return Err(EngineError::TooManyAttempts {
                retry_after_seconds: remaining.as_secs().max(1),
            });
        }
        let account = self.storage.find_console_account(email.trim()).await?;
        let stored_hash = account
            .as_ref()
            .map_or(UNKNOWN_ACCOUNT_HASH.clone(), |account| {
                account.password_hash.clone()
            });
        // argon2 takes tens of milliseconds of CPU: keep it off the async workers.
        let password_matches =
            tokio::task::spawn_blocking(move || verify_password(&password, &stored_hash))
                .await
                .unwrap_or(false);
        let Some(account) = account else {
            // No organization to file it under; the log line and the throttle remain.
            tracing::info!("console sign-in failed: unknown account");
            self.login_throttle.record_failure(email);
            return Err(EngineError::WrongCredentials);
        };
        let member = ConsoleMember::new(account, origin);
        if !password_matches {
            tracing::info!(account_id = %member.account_id(), "console sign-in failed: wrong password");
            self.login_throttle.record_failure(email);
            self.audit_sign_in(
                &member,
                AuditAction::ConsoleLoginFailed,
                AuditOutcome::Failure,
            )
            .await?;
            return Err(EngineError::WrongCredentials);
        }
        tracing::info!(account_id = %member.account_id(), "console sign-in succeeded");
        self.login_throttle.record_success(email);
        self.audit_sign_in(&member, AuditAction::ConsoleLogin, AuditOutcome::Success)
            .await?;
        self.start_session(&member.account).await
    }

    /// Ends the session of `access_token` at once; an invalid token ends nothing.
    pub async fn sign_out(&self, access_token: &str) {
        let Some(claim) = self.sessions.verify(access_token) else {
            return;
        };
        if let Err(error) = self.storage.revoke_console_session(claim.session_id).await {
            tracing::error!(%error, "console sign-out could not revoke the session");
        }
    }

    /// New tokens for a current refresh token; `None` for an unknown, expired or already
    /// rotated one (a replayed token also revokes its session: someone copied it).
    pub async fn refresh_session(&self, refresh_token: &str) -> Option<ConsoleSessionTokens> {
        let replacement = super::new_secret_token();
        let outcome = self
            .storage
            .rotate_console_refresh_token(refresh_token, &replacement)
            .await
            .map_err(|error| tracing::error!(%error, "console refresh failed"))
            .ok()?;
        match outcome {
            RefreshOutcome::Rotated {
                session_id,
                account_id,
            } => {
                let access = self.sessions.issue(account_id, session_id).ok()?;
                Some(ConsoleSessionTokens {
                    access,
                    refresh: replacement,
                })
            }
            RefreshOutcome::ReplayDetected | RefreshOutcome::Refused => None,
        }
    }

    pub(super) async fn start_session(
        &self,
        account: &ConsoleAccountRecord,
    ) -> Result<ConsoleSessionTokens, EngineError> {
        let refresh = super::new_secret_token();
        let session_id = self
            .storage
            .create_console_session(
                account.id,
                account.organization_id,
                &refresh,
                chrono::Utc::now() + CONSOLE_SESSION_LIFETIME,
            )
            .await?;
        let access = self
            .sessions
            .issue(account.id, session_id)
            .map_err(EngineError::Internal)?;
        Ok(ConsoleSessionTokens { access, refresh })
    }

    async fn audit_sign_in(
        &self,
        member: &ConsoleMember,
        action: AuditAction,
        outcome: AuditOutcome,
    ) -> Result<(), EngineError> {
        let event = NewAuditEvent {
            action,
            outcome,
            target_ids: vec![member.account_id().to_string()],
            details: serde_json::json!({}),
        };
        self.storage
            .record_audit_event(member.organization_id(), None, member.actor(), &event)
            .await?;
        Ok(())
    }
}
