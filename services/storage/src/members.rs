//! Console members of an organization and the invitations that add them: list, invite,
//! accept, change a role, remove. Every change is audited in its own transaction, and an
//! organization always keeps at least one owner.

use crate::console_sessions::refresh_token_hash;
use crate::entities::{console_accounts, console_invitations, console_sessions};
use crate::{ConsoleAccountRecord, Storage, StorageError};
use chrono::{DateTime, Utc};
use engram_core::NotFoundKind;
use engram_core::audit::{Actor, AuditAction, NewAuditEvent};
use engram_core::ids::ConsoleAccountId;
pub use engram_core::tenants::{ConsoleInvitationRecord, ConsoleMemberRecord};
use engram_core::{ConsoleRole, OrganizationId};
use sea_orm::{
    ActiveValue::Set, ColumnTrait, ConnectionTrait, EntityTrait, PaginatorTrait, QueryFilter,
    QueryOrder, QuerySelect,
};
use uuid::Uuid;

impl Storage {
    /// The organization's console members, oldest first.
    pub async fn list_console_members(
        &self,
        organization_id: OrganizationId,
    ) -> Result<Vec<ConsoleMemberRecord>, StorageError> {
        let found = console_accounts::Entity::find()
            .filter(console_accounts::Column::OrganizationId.eq(organization_id.as_uuid()))
            .order_by_asc(console_accounts::Column::CreatedAt)
            .order_by_asc(console_accounts::Column::Email)
            .all(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        Ok(found
            .into_iter()
            .map(|model| ConsoleMemberRecord {
                id: ConsoleAccountId::from_uuid(model.id),
                email: model.email,
                role: ConsoleRole::from_stored(&model.role),
                created_at: model.created_at,
            })
            .collect())
    }

    /// The organization's invitations that can still be accepted, newest first.
    pub async fn list_pending_console_invitations(
        &self,
        organization_id: OrganizationId,
    ) -> Result<Vec<ConsoleInvitationRecord>, StorageError> {
        let found = console_invitations::Entity::find()
            .filter(console_invitations::Column::OrganizationId.eq(organization_id.as_uuid()))
            .filter(console_invitations::Column::AcceptedAt.is_null())
            .filter(console_invitations::Column::RevokedAt.is_null())
            .filter(console_invitations::Column::ExpiresAt.gt(Utc::now()))
            .order_by_desc(console_invitations::Column::CreatedAt)
            .all(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        Ok(found.into_iter().map(invitation_record).collect())
    }

    /// Invite `email` into the organization with `role`. `token` (random, chosen by the
    /// caller and sent to the invitee) is stored only as its SHA-256. An e-mail that already
    /// has an account is `WriteConflict`; a pending invitation for it is replaced.
    #[allow(clippy::too_many_arguments)] // each is a distinct fact of the invitation
    pub async fn create_console_invitation(
        &self,
        organization_id: OrganizationId,
        email: &str,
        role: ConsoleRole,
        token: &str,
        expires_at: DateTime<Utc>,
        invited_by: &Actor,
        inviter_id: ConsoleAccountId,
    ) -> Result<ConsoleInvitationRecord, StorageError> {
        let email = email.trim().to_lowercase();
        let _permit = self.write_permit().await;
        let transaction = self.begin_write().await?;
        let taken = console_accounts::Entity::find()
            .filter(console_accounts::Column::Email.eq(email.clone()))
            .count(&transaction)
            .await
            .map_err(StorageError::from_db)?;
        if taken > 0 {
            return Err(StorageError::WriteConflict(format!(
                "{email} already has a console account"
            )));
        }
        let now = Utc::now();
        // One live invitation per address: a new one replaces the old link.
        console_invitations::Entity::update_many()
            .col_expr(
                console_invitations::Column::RevokedAt,
                sea_orm::sea_query::Expr::value(now),
            )
            .filter(console_invitations::Column::OrganizationId.eq(organization_id.as_uuid()))
            .filter(console_invitations::Column::Email.eq(email.clone()))
            .filter(console_invitations::Column::AcceptedAt.is_null())
            .filter(console_invitations::Column::RevokedAt.is_null())
            .exec(&transaction)
            .await
            .map_err(StorageError::from_db)?;
        let invitation_id = Uuid::now_v7();
        let model = console_invitations::ActiveModel {
            id: Set(invitation_id),
            organization_id: Set(organization_id.as_uuid()),
            email: Set(email.clone()),
            role: Set(role.as_str().to_string()),
            token_hash: Set(refresh_token_hash(token)),
            invited_by: Set(inviter_id.as_uuid()),
            created_at: Set(now),
            expires_at: Set(expires_at),
            accepted_at: Set(None),
            revoked_at: Set(None),
        };
        console_invitations::Entity::insert(model)
            .exec_without_returning(&transaction)
            .await
            .map_err(StorageError::from_db)?;
        // The e-mail address is personal data: the audit log names the invitation only.
        crate::audit::append_audit_event(
            &transaction,
            organization_id,
            None,
            invited_by,
            &NewAuditEvent::success(
                AuditAction::ConsoleMemberInvited,
                vec![invitation_id.to_string()],
                serde_json::json!({ "role": role.as_str() }),
            ),
        )
        .await?;
        transaction.commit().await.map_err(StorageError::from_db)?;
        Ok(ConsoleInvitationRecord {
            id: invitation_id,
            email,
            role,
            created_at: now,
            expires_at,
        })
    }

    /// The pending invitation a token belongs to (to greet the invitee), `None` when the
    /// token is unknown, used, revoked or expired.
    pub async fn pending_console_invitation(
        &self,
        token: &str,
    ) -> Result<Option<(ConsoleInvitationRecord, OrganizationId)>, StorageError> {
        let found = pending_invitation_by_token(&self.connection, token).await?;
        Ok(found.map(|model| {
            let organization_id = OrganizationId::from_uuid(model.organization_id);
            (invitation_record(model), organization_id)
        }))
    }

    /// Turn a pending invitation into a console account with the invited role and
    /// `password_hash`. `NotFound` when the token is unknown, used, revoked or expired.
    pub async fn accept_console_invitation(
        &self,
        token: &str,
        password_hash: &str,
        origin: &Actor,
    ) -> Result<ConsoleAccountRecord, StorageError> {
        let _permit = self.write_permit().await;
        let transaction = self.begin_write().await?;
        let Some(invitation) = pending_invitation_by_token(&transaction, token).await? else {
            return Err(StorageError::NotFound(NotFoundKind::Invitation));
        };
        let now = Utc::now();
        // Marked used first and only if still pending, so two concurrent acceptances of one
        // link cannot both create an account.
        let claimed = console_invitations::Entity::update_many()
            .col_expr(
                console_invitations::Column::AcceptedAt,
                sea_orm::sea_query::Expr::value(now),
            )
            .filter(console_invitations::Column::Id.eq(invitation.id))
            .filter(console_invitations::Column::AcceptedAt.is_null())
            .exec(&transaction)
            .await
            .map_err(StorageError::from_db)?;
        if claimed.rows_affected != 1 {
            return Err(StorageError::NotFound(NotFoundKind::Invitation));
        }
        let account_id = ConsoleAccountId::generate();
        console_accounts::Entity::insert(console_accounts::ActiveModel {
            id: Set(account_id.as_uuid()),
            organization_id: Set(invitation.organization_id),
            email: Set(invitation.email.clone()),
            password_hash: Set(password_hash.to_string()),
            role: Set(invitation.role.clone()),
            created_at: Set(now),
            language: Set(None),
        })
        .exec_without_returning(&transaction)
        .await
        .map_err(|error| {
            if crate::error::is_unique_violation(&error) {
                StorageError::WriteConflict(format!(
                    "{} already has a console account",
                    invitation.email
                ))
            } else {
                StorageError::from_db(error)
            }
        })?;
        let organization_id = OrganizationId::from_uuid(invitation.organization_id);
        let actor = Actor {
            kind: engram_core::audit::ActorKind::ConsoleAccount,
            id: account_id.to_string(),
            ..origin.clone()
        };
        crate::audit::append_audit_event(
            &transaction,
            organization_id,
            None,
            &actor,
            &NewAuditEvent::success(
                AuditAction::ConsoleInvitationAccepted,
                vec![account_id.to_string(), invitation.id.to_string()],
                serde_json::json!({ "role": invitation.role }),
            ),
        )
        .await?;
        transaction.commit().await.map_err(StorageError::from_db)?;
        Ok(ConsoleAccountRecord {
            id: account_id,
            organization_id,
            email: invitation.email,
            password_hash: password_hash.to_string(),
            role: ConsoleRole::from_stored(&invitation.role),
            language: None,
        })
    }

    /// Withdraw a pending invitation of the organization; `NotFound` when there is none.
    pub async fn revoke_console_invitation(
        &self,
        organization_id: OrganizationId,
        invitation_id: Uuid,
        actor: &Actor,
    ) -> Result<(), StorageError> {
        let _permit = self.write_permit().await;
        let transaction = self.begin_write().await?;
        let revoked = console_invitations::Entity::update_many()
            .col_expr(
                console_invitations::Column::RevokedAt,
                sea_orm::sea_query::Expr::value(Utc::now()),
            )
            .filter(console_invitations::Column::Id.eq(invitation_id))
            .filter(console_invitations::Column::OrganizationId.eq(organization_id.as_uuid()))
            .filter(console_invitations::Column::AcceptedAt.is_null())
            .filter(console_invitations::Column::RevokedAt.is_null())
            .exec(&transaction)
            .await
            .map_err(StorageError::from_db)?;
        if revoked.rows_affected == 0 {
            return Err(StorageError::NotFound(NotFoundKind::Invitation));
        }
        crate::audit::append_audit_event(
            &transaction,
            organization_id,
            None,
            actor,
            &NewAuditEvent::success(
                AuditAction::ConsoleInvitationRevoked,
                vec![invitation_id.to_string()],
                serde_json::json!({}),
            ),
        )
        .await?;
        transaction.commit().await.map_err(StorageError::from_db)
    }

    /// Give a member of the organization a new role. Taking the owner role from the last
    /// owner is `Refused`; a member of another organization is `NotFound`.
    pub async fn change_console_member_role(
        &self,
        organization_id: OrganizationId,
        member_id: ConsoleAccountId,
        new_role: ConsoleRole,
        actor: &Actor,
    ) -> Result<ConsoleMemberRecord, StorageError> {
        let _permit = self.write_permit().await;
        let transaction = self.begin_write().await?;
        let member = member_in_organization(&transaction, organization_id, member_id).await?;
        let old_role = ConsoleRole::from_stored(&member.role);
        if old_role == ConsoleRole::Owner && new_role != ConsoleRole::Owner {
            refuse_if_last_owner(&transaction, organization_id).await?;
        }
        console_accounts::Entity::update_many()
            .col_expr(
                console_accounts::Column::Role,
                sea_orm::sea_query::Expr::value(new_role.as_str()),
            )
            .filter(console_accounts::Column::Id.eq(member.id))
            .exec(&transaction)
            .await
            .map_err(StorageError::from_db)?;
        crate::audit::append_audit_event(
            &transaction,
            organization_id,
            None,
            actor,
            &NewAuditEvent::success(
                AuditAction::ConsoleMemberRoleChanged,
                vec![member_id.to_string()],
                serde_json::json!({ "from": old_role.as_str(), "to": new_role.as_str() }),
            ),
        )
        .await?;
        transaction.commit().await.map_err(StorageError::from_db)?;
        Ok(ConsoleMemberRecord {
            id: member_id,
            email: member.email,
            role: new_role,
            created_at: member.created_at,
        })
    }

    /// Remove a member of the organization and end every session of theirs at once. The
    /// last owner cannot be removed (`Refused`).
    pub async fn remove_console_member(
        &self,
        organization_id: OrganizationId,
        member_id: ConsoleAccountId,
        actor: &Actor,
    ) -> Result<(), StorageError> {
        let _permit = self.write_permit().await;
        let transaction = self.begin_write().await?;
        let member = member_in_organization(&transaction, organization_id, member_id).await?;
        if ConsoleRole::from_stored(&member.role) == ConsoleRole::Owner {
            refuse_if_last_owner(&transaction, organization_id).await?;
        }
        console_sessions::Entity::update_many()
            .col_expr(
                console_sessions::Column::RevokedAt,
                sea_orm::sea_query::Expr::value(Utc::now()),
            )
            .filter(console_sessions::Column::AccountId.eq(member.id))
            .filter(console_sessions::Column::RevokedAt.is_null())
            .exec(&transaction)
            .await
            .map_err(StorageError::from_db)?;
        console_accounts::Entity::delete_by_id(member.id)
            .exec(&transaction)
            .await
            .map_err(StorageError::from_db)?;
        crate::audit::append_audit_event(
            &transaction,
            organization_id,
            None,
            actor,
            &NewAuditEvent::success(
                AuditAction::ConsoleMemberRemoved,
                vec![member_id.to_string()],
                serde_json::json!({ "role": member.role }),
            ),
        )
        .await?;
        transaction.commit().await.map_err(StorageError::from_db)
    }
}

async fn pending_invitation_by_token<C: ConnectionTrait>(
    connection: &C,
    token: &str,
) -> Result<Option<console_invitations::Model>, StorageError> {
    console_invitations::Entity::find()
        .filter(console_invitations::Column::TokenHash.eq(refresh_token_hash(token)))
        .filter(console_invitations::Column::AcceptedAt.is_null())
        .filter(console_invitations::Column::RevokedAt.is_null())
        .filter(console_invitations::Column::ExpiresAt.gt(Utc::now()))
        .one(connection)
        .await
        .map_err(StorageError::from_db)
}

async fn member_in_organization<C: ConnectionTrait>(
    connection: &C,
    organization_id: OrganizationId,
    member_id: ConsoleAccountId,
) -> Result<console_accounts::Model, StorageError> {
    console_accounts::Entity::find_by_id(member_id.as_uuid())
        .filter(console_accounts::Column::OrganizationId.eq(organization_id.as_uuid()))
        .one(connection)
        .await
        .map_err(StorageError::from_db)?
        .ok_or(StorageError::NotFound(NotFoundKind::Member))
}

async fn refuse_if_last_owner<C: ConnectionTrait>(
    connection: &C,
    organization_id: OrganizationId,
) -> Result<(), StorageError> {
    let mut owners_query = console_accounts::Entity::find()
        .filter(console_accounts::Column::OrganizationId.eq(organization_id.as_uuid()))
        .filter(console_accounts::Column::Role.eq(ConsoleRole::Owner.as_str()));
    // Two owners demoting each other at once must not both succeed: on PostgreSQL the owner
    // rows are locked until commit (SQLite has one writer at a time).
    if connection.get_database_backend() == sea_orm::DbBackend::Postgres {
        owners_query = owners_query.lock_exclusive();
    }
    let owners = owners_query
        .all(connection)
        .await
        .map_err(StorageError::from_db)?
        .len();
    if owners <= 1 {
        return Err(StorageError::Refused(
            "an organization keeps at least one owner: make someone else owner first".to_string(),
        ));
    }
    Ok(())
}

fn invitation_record(model: console_invitations::Model) -> ConsoleInvitationRecord {
    ConsoleInvitationRecord {
        id: model.id,
        email: model.email,
        role: ConsoleRole::from_stored(&model.role),
        created_at: model.created_at,
        expires_at: model.expires_at,
    }
}
