//! Console sessions: created at login, looked up on every console request (so logout and
//! revocation take effect at once), and refreshed by rotating a refresh token stored only as
//! its SHA-256. Presenting an already-rotated refresh token revokes the session (it was
//! copied by someone else).

use crate::entities::console_sessions;
use crate::{Storage, StorageError};
use chrono::{DateTime, Utc};
use engram_core::OrganizationId;
use engram_core::ids::ConsoleAccountId;
use sea_orm::{ActiveValue::Set, ColumnTrait, Condition, EntityTrait, QueryFilter};
use sha2::{Digest, Sha256};
use uuid::Uuid;

/// The SHA-256 a refresh token is stored as (it has 256 random bits: no salt or stretching
/// is needed).
pub fn refresh_token_hash(refresh_token: &str) -> String {
    hex::encode(Sha256::digest(refresh_token.as_bytes()))
}

/// What a refresh attempt found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RefreshOutcome {
    /// The token was current: it is replaced by the new one.
    Rotated {
        session_id: Uuid,
        account_id: ConsoleAccountId,
    },
    /// The token was already rotated away: the session is now revoked.
    ReplayDetected,
    /// Unknown, expired or revoked.
    Refused,
}

impl Storage {
    pub async fn create_console_session(
        &self,
        account_id: ConsoleAccountId,
        organization_id: OrganizationId,
        refresh_token: &str,
        expires_at: DateTime<Utc>,
    ) -> Result<Uuid, StorageError> {
        let _permit = self.write_permit().await;
        let session_id = Uuid::now_v7();
        console_sessions::Entity::insert(console_sessions::ActiveModel {
            id: Set(session_id),
            account_id: Set(account_id.as_uuid()),
            organization_id: Set(organization_id.as_uuid()),
            refresh_hash: Set(refresh_token_hash(refresh_token)),
            previous_refresh_hash: Set(None),
            created_at: Set(Utc::now()),
            expires_at: Set(expires_at),
            revoked_at: Set(None),
        })
        .exec_without_returning(&self.connection)
        .await
        .map_err(StorageError::from_db)?;
        Ok(session_id)
    }

    /// Whether the session is live: not revoked and not expired.
    pub async fn console_session_is_live(&self, session_id: Uuid) -> Result<bool, StorageError> {
        let session = console_sessions::Entity::find_by_id(session_id)
            .one(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        Ok(session
            .is_some_and(|session| session.revoked_at.is_none() && session.expires_at > Utc::now()))
    }

    /// End a session (logout); unknown ids are ignored.
    pub async fn revoke_console_session(&self, session_id: Uuid) -> Result<(), StorageError> {
        let _permit = self.write_permit().await;
        console_sessions::Entity::update_many()
            .col_expr(
                console_sessions::Column::RevokedAt,
                sea_orm::sea_query::Expr::value(Utc::now()),
            )
            .filter(console_sessions::Column::Id.eq(session_id))
            .filter(console_sessions::Column::RevokedAt.is_null())
            .exec(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        Ok(())
    }

    /// Exchange `presented` for `replacement` if it is the session's current refresh token.
    pub async fn rotate_console_refresh_token(
        &self,
        presented: &str,
        replacement: &str,
    ) -> Result<RefreshOutcome, StorageError> {
        let _permit = self.write_permit().await;
        let presented_hash = refresh_token_hash(presented);
        let transaction = self.begin_write().await?;
        let found = console_sessions::Entity::find()
            .filter(
                Condition::any()
                    .add(console_sessions::Column::RefreshHash.eq(presented_hash.as_str()))
                    .add(console_sessions::Column::PreviousRefreshHash.eq(presented_hash.as_str())),
            )
            .one(&transaction)
            .await
            .map_err(StorageError::from_db)?;
        let Some(session) = found else {
            return Ok(RefreshOutcome::Refused);
        };
        let now = Utc::now();
        if session.revoked_at.is_some() || session.expires_at <= now {
            return Ok(RefreshOutcome::Refused);
        }
        if session.refresh_hash != presented_hash {
            // An old token came back: whoever holds the current one, one of them is not the
            // owner. End the session for both.
            console_sessions::Entity::update_many()
                .col_expr(
                    console_sessions::Column::RevokedAt,
                    sea_orm::sea_query::Expr::value(now),
                )
                .filter(console_sessions::Column::Id.eq(session.id))
                .exec(&transaction)
                .await
                .map_err(StorageError::from_db)?;
            transaction.commit().await.map_err(StorageError::from_db)?;
            tracing::warn!(session_id = %session.id, "replayed console refresh token: session revoked");
            return Ok(RefreshOutcome::ReplayDetected);
        }
        // The old hash guards the swap: a concurrent rotation of the same token loses.
        let swapped = console_sessions::Entity::update_many()
            .col_expr(
                console_sessions::Column::RefreshHash,
                sea_orm::sea_query::Expr::value(refresh_token_hash(replacement)),
            )
            .col_expr(
                console_sessions::Column::PreviousRefreshHash,
                sea_orm::sea_query::Expr::value(presented_hash.clone()),
            )
            .filter(console_sessions::Column::Id.eq(session.id))
            .filter(console_sessions::Column::RefreshHash.eq(presented_hash.as_str()))
            .exec(&transaction)
            .await
            .map_err(StorageError::from_db)?;
        if swapped.rows_affected != 1 {
            return Ok(RefreshOutcome::Refused);
        }
        transaction.commit().await.map_err(StorageError::from_db)?;
        Ok(RefreshOutcome::Rotated {
            session_id: session.id,
            account_id: ConsoleAccountId::from_uuid(session.account_id),
        })
    }
}
