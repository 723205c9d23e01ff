//! The deployment's own administration, the operator's at the command line: organizations,
//! projects, console accounts and the price book. Each use case takes a `DeploymentOperator`
//! and checks the permission table first, like every other use case.

mod create_member;
mod create_organization;
mod create_project;
mod set_price;

pub use create_member::{CreateMemberRequest, CreatedMember};
pub use create_organization::{CreateOrganizationRequest, CreatedOrganization, MAX_NEW_PROJECTS};
pub use create_project::{CreateProjectRequest, CreatedProject, MAX_PROJECT_NAME_CHARS};
pub use set_price::SetPriceRequest;

use crate::EngineError;
use engram_storage::{ApiKeyPepper, Storage, StorageError};
use std::future::Future;
use std::time::Duration;

/// The operator's use cases over the deployment's database. A command run beside a serving
/// process waits up to `lock_patience` for SQLite's write lock, retrying, before it gives up
/// with [`EngineError::DatabaseLocked`] having changed nothing.
pub struct DeploymentAdmin {
    storage: Storage,
    pepper: ApiKeyPepper,
    lock_patience: Duration,
}

impl DeploymentAdmin {
    pub fn new(storage: Storage, pepper: ApiKeyPepper, lock_patience: Duration) -> Self {
        Self {
            storage,
            pepper,
            lock_patience,
        }
    }

    /// `write` again while another process holds the database's write lock, until the
    /// patience runs out.
    async fn while_locked<T, Attempt>(
        &self,
        what: &str,
        write: impl FnMut() -> Attempt,
    ) -> Result<T, EngineError>
    where
        Attempt: Future<Output = Result<T, StorageError>>,
    {
        match engram_storage::retry_while_busy(what, self.lock_patience, write).await {
            Err(StorageError::Busy(message)) => Err(EngineError::DatabaseLocked(format!(
                "{what}: the database stayed locked by another process for {} s ({message})",
                self.lock_patience.as_secs()
            ))),
            outcome => outcome.map_err(EngineError::from),
        }
    }

    /// The organization `id_or_name` names, or the one made at bootstrap when it names none.
    async fn organization(
        &self,
        id_or_name: Option<&str>,
        field: &str,
    ) -> Result<engram_core::OrganizationId, EngineError> {
        let named = match id_or_name {
            Some(id_or_name) => self.storage.organization_named(id_or_name).await?,
            None => self.storage.first_organization_id().await?.ok_or_else(|| {
                "there is no organization yet: start `engram serve` once first".to_string()
            }),
        };
        named.map_err(|reason| {
            engram_core::InvalidInput(vec![engram_core::FieldError::new(field, reason)]).into()
        })
    }
}

/// A console account's initial password: 20 random alphanumerics (about 119 bits), shown
/// once. The first start's bootstrap account gets one too.
pub fn new_console_password() -> String {
    use rand::Rng;
    rand::thread_rng()
        .sample_iter(&rand::distributions::Alphanumeric)
        .take(20)
        .map(char::from)
        .collect()
}

/// The argon2 hash of a new account's password, computed off the async threads.
async fn hash_new_password(password: &str) -> Result<String, EngineError> {
    let password = password.to_string();
    tokio::task::spawn_blocking(move || crate::console_credentials::hash_password(&password))
        .await
        .map_err(|error| EngineError::Internal(error.to_string()))?
        .map_err(EngineError::Internal)
}

/// The e-mail a console account signs in with, as stored, or why it is not one.
fn account_email(email: &str, field: &str) -> Result<String, EngineError> {
    let email = email.trim().to_lowercase();
    if crate::console_credentials::looks_like_email(&email) {
        return Ok(email);
    }
    Err(engram_core::InvalidInput(vec![engram_core::FieldError::new(
        field,
        "must be an e-mail address",
    )])
    .into())
}
