//! Signing a console member in and out, and renewing a session with its refresh token.

use super::{CONSOLE_SESSION_LIFETIME, ConsoleAccess, ConsoleMember, ConsoleSessionTokens};
use crate::EngineError;
use crate::console_credentials::verify_password;
use crate::login_throttle::SignInClient;
use engram_core::audit::{Actor, AuditAction, AuditOutcome, NewAuditEvent};
use engram_storage::{ConsoleAccountRecord, RefreshOutcome};
use std::time::Instant;

/// Verifying against this when the e-mail is unknown keeps the answer time the same, so
/// timing does not reveal which accounts exist. Computed on the password pool at first use.
static UNKNOWN_ACCOUNT_HASH: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    crate::console_credentials::hash_password("no account has this password").unwrap_or_default()
});

impl ConsoleAccess {
    /// A new session for the account of `email` when `password` is its password, with a
    /// device token for the browser to keep. `WrongCredentials` does not say which of the
    /// two was wrong. Before any hashing: the client address's budget for unauthenticated
    /// console routes (not for a browser with a valid device token of the account), then the
    /// wait its earlier failures earned (`TooManyAttempts`) — per
    /// account and client, the client being the browser's device when `device_token` is a
    /// valid one of this account, so strangers' failures never slow a known browser; then
    /// the hash waits for a place on the bounded password pool (`Busy` when it is full).
    pub async fn sign_in(
        &self,
        email: &str,
        password: String,
        device_token: Option<&str>,
        origin: &Actor,
    ) -> Result<ConsoleSessionTokens, EngineError> {
        // Oversized input is refused before it reaches the (deliberately slow) password hash.
        let email = email.trim();
        if email.is_empty()
            || password.is_empty()
            || email.len() > crate::console_credentials::MAX_EMAIL_BYTES
            || password.len() > crate::console_credentials::MAX_PASSWORD_BYTES
        {
            return Err(EngineError::WrongCredentials);
        }
        // A browser presenting a valid device token (a signature check, no database work)
        // skips the address's budget: behind an ingress every member shares one address, and
        // a stranger spending its budget must not lock them out.
        let presented_device = device_token.and_then(|token| self.sessions.verify_device(token));
        if presented_device.is_none() {
            self.admit_unauthenticated(origin)?;
        }
        let account = self.storage.find_console_account(email.trim()).await?;
        let device = presented_device
            .as_ref()
            .filter(|(device_account, _)| {
                account
                    .as_ref()
                    .is_some_and(|account| account.id == *device_account)
            })
            .map(|(_, device_id)| device_id.clone());
        // A device of another account is no known browser here: it pays the address budget.
        if presented_device.is_some() && device.is_none() {
            self.admit_unauthenticated(origin)?;
        }
        let client = match &device {
            Some(device_id) => SignInClient::TrustedDevice(device_id),
            None => SignInClient::Address(origin.ip.as_deref()),
        };
        if let Some(wait) = self
            .login_throttle
            .wait_before_attempt(email, client, Instant::now())
        {
            tracing::warn!(
                trusted_device = device.is_some(),
                "console sign-in refused: too many failed attempts from this client"
            );
            return Err(EngineError::TooManyAttempts {
                retry_after_seconds: wait.as_secs().max(1),
            });
        }
        // Charged before hashing and given back on success: parallel guesses cannot all
        // pass one check.
        self.login_throttle
            .record_failure(email, client, Instant::now());
        let stored_hash = account
            .as_ref()
            .map(|account| account.password_hash.clone());
        // A known browser hashes on a pool of its own: a storm of strangers' sign-ins cannot
        // keep its owner out.
        let pool = match client {
            SignInClient::TrustedDevice(_) => &self.password_work_known_devices,
            SignInClient::Address(_) => &self.password_work,
        };
        let password_matches = match pool
            .run(move || {
                let stored_hash = stored_hash.as_deref().unwrap_or(&UNKNOWN_ACCOUNT_HASH);
                verify_password(&password, stored_hash)
            })
            .await
        {
            Ok(matches) => matches,
            Err(error) => {
                self.login_throttle.refund(email, client);
                return Err(error);
            }
        };
        let Some(account) = account else {
            // No organization to file it under; the log line and the throttle remain.
            tracing::info!("console sign-in failed: unknown account");
            return Err(EngineError::WrongCredentials);
        };
        let member = ConsoleMember::new(account, origin);
        if !password_matches {
            tracing::info!(account_id = %member.account_id(), "console sign-in failed: wrong password");
            self.audit_sign_in(
                &member,
                AuditAction::ConsoleLoginFailed,
                AuditOutcome::Failure,
            )
            .await?;
            return Err(EngineError::WrongCredentials);
        }
        tracing::info!(account_id = %member.account_id(), "console sign-in succeeded");
        self.login_throttle.record_success(email, client);
        self.audit_sign_in(&member, AuditAction::ConsoleLogin, AuditOutcome::Success)
            .await?;
        self.start_session(&member.account).await
    }

    /// `TooManyAttempts` once the request's address has used its budget for the console's
    /// unauthenticated routes (sign-in, invitations): checked before any database or hashing
    /// work, with no global limit one stranger could use to lock everyone out.
    pub(super) fn admit_unauthenticated(&self, origin: &Actor) -> Result<(), EngineError> {
        self.login_throttle
            .admit_address(origin.ip.as_deref())
            .map_err(|wait| {
                tracing::warn!("console request refused: this address's budget is used up");
                EngineError::TooManyAttempts {
                    retry_after_seconds: wait.as_secs().max(1),
                }
            })
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
                    device: None,
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
        // Whoever signs in (or accepts an invitation) has proved the password: the browser
        // becomes a known device of the account.
        let device = self
            .sessions
            .issue_device(account.id)
            .map_err(EngineError::Internal)?;
        Ok(ConsoleSessionTokens {
            access,
            refresh,
            device: Some(device),
        })
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
