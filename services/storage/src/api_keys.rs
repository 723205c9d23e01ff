//! Project API keys: minting (the secret is returned once and stored only as a peppered
//! HMAC), verification with scopes, expiry and revocation, listing, revoking and rolling
//! with an overlap window. Every management call is confined to one project's scope.

use crate::audit::append_audit_event;
use crate::entities::api_keys;
use crate::{Storage, StorageError};
use chrono::{DateTime, Utc};
use engram_core::NotFoundKind;
use engram_core::access::{
    API_KEY_PUBLIC_ID_LENGTH, API_KEY_SECRET_LENGTH, format_api_key, parse_api_key,
};
pub use engram_core::api_keys::ApiKeyRecord;
use engram_core::audit::{Actor, AuditAction, NewAuditEvent};
use engram_core::ids::ApiKeyId;
use engram_core::{
    AgentRestriction, ApiScopes, KeyEnvironment, OrganizationId, ProjectId, ProjectScope,
};
use hmac::{Hmac, Mac};
use rand::Rng;
use rand::distributions::Alphanumeric;
use sea_orm::{ActiveValue::Set, ColumnTrait, EntityTrait, QueryFilter, QueryOrder, QuerySelect};
use sha2::Sha256;
use subtle::ConstantTimeEq;

/// Server-side secret mixed into API key hashes (HMAC-SHA-256), so a leaked database alone
/// does not allow offline guessing of key secrets.
#[derive(Clone)]
pub struct ApiKeyPepper(Vec<u8>);

impl ApiKeyPepper {
    pub fn new(secret_bytes: Vec<u8>) -> Self {
        Self(secret_bytes)
    }

    /// HMAC-SHA-256 of `secret` with the pepper, hex: what the database keeps of a key's
    /// secret, and what the engine's cache of verified keys is keyed by.
    pub fn hash_secret(&self, secret: &str) -> String {
        // HMAC accepts keys of any length, so this cannot fail.
        let mut mac =
            <Hmac<Sha256> as Mac>::new_from_slice(&self.0).unwrap_or_else(|_| unreachable!());
        mac.update(secret.as_bytes());
        hex::encode(mac.finalize().into_bytes())
    }
}

impl std::fmt::Debug for ApiKeyPepper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiKeyPepper(***)")
    }
}

/// `last_used_at` is written at most this often per key, so authentication stays a read.
const LAST_USED_RESOLUTION: chrono::Duration = chrono::Duration::seconds(60);

/// A presented key that verified: its project and what it may do.
#[derive(Clone, Debug)]
pub struct VerifiedApiKey {
    pub scope: ProjectScope,
    pub key_id: ApiKeyId,
    /// The first key of its roll line (its own id unless it replaced another by a roll):
    /// stable across rolls, so per-credential state such as idempotency answers follows it.
    pub lineage_id: ApiKeyId,
    pub scopes: ApiScopes,
    pub environment: KeyEnvironment,
    /// When the key stops working (a rolled key's overlap end, a minted key's expiry).
    pub expires_at: Option<DateTime<Utc>>,
    /// The agents the key is bound to; `None` for every agent.
    pub agents: Option<AgentRestriction>,
}

/// A key to mint.
#[derive(Clone, Debug)]
pub struct NewApiKey {
    pub label: String,
    pub scopes: ApiScopes,
    pub environment: KeyEnvironment,
    pub expires_at: Option<DateTime<Utc>>,
    /// The agents the key is bound to; `None` for every agent.
    pub agents: Option<AgentRestriction>,
}

/// The agents of a stored key. A stored list that no longer parses binds the key to no agent
/// it could name, rather than to every agent: it fails closed.
pub(crate) fn stored_agents(text: Option<&str>) -> Result<Option<AgentRestriction>, StorageError> {
    text.map(|text| {
        AgentRestriction::from_stored_text(text).ok_or_else(|| {
            StorageError::Internal(format!("stored key agents are invalid: {text:?}"))
        })
    })
    .transpose()
}

fn random_text(length: usize) -> String {
    rand::thread_rng()
        .sample_iter(&Alphanumeric)
        .take(length)
        .map(char::from)
        .collect()
}

fn record_from_model(model: api_keys::Model) -> ApiKeyRecord {
    ApiKeyRecord {
        id: ApiKeyId::from_uuid(model.id),
        label: model.label,
        public_id: model.public_id,
        environment: KeyEnvironment::parse(&model.environment).unwrap_or(KeyEnvironment::Live),
        scopes: ApiScopes::from_stored_text(&model.scopes),
        created_at: model.created_at,
        expires_at: model.expires_at,
        last_used_at: model.last_used_at,
        revoked_at: model.revoked_at,
        created_by: model.created_by,
        agents: model
            .agents
            .as_deref()
            .and_then(AgentRestriction::from_stored_text),
    }
}

/// Insert a new key of `scope`'s project; returns its record and the presented text.
pub(crate) async fn insert_api_key<C: sea_orm::ConnectionTrait>(
    connection: &C,
    scope: &ProjectScope,
    new_key: &NewApiKey,
    lineage_id: Option<uuid::Uuid>,
    created_by: Option<String>,
    pepper: &ApiKeyPepper,
) -> Result<(ApiKeyRecord, String), StorageError> {
    let public_id = random_text(API_KEY_PUBLIC_ID_LENGTH).to_lowercase();
    let secret = random_text(API_KEY_SECRET_LENGTH);
    let presented = format_api_key(new_key.environment, &public_id, &secret);
    let model = api_keys::ActiveModel {
        id: Set(uuid::Uuid::now_v7()),
        organization_id: Set(scope.organization_id().as_uuid()),
        project_id: Set(scope.project_id().as_uuid()),
        public_id: Set(public_id),
        secret_hash: Set(pepper.hash_secret(&secret)),
        label: Set(new_key.label.clone()),
        created_at: Set(Utc::now()),
        revoked_at: Set(None),
        scopes: Set(new_key.scopes.to_stored_text()),
        environment: Set(new_key.environment.as_str().to_string()),
        expires_at: Set(new_key.expires_at),
        last_used_at: Set(None),
        lineage_id: Set(lineage_id),
        created_by: Set(created_by),
        agents: Set(new_key
            .agents
            .as_ref()
            .map(AgentRestriction::to_stored_text)),
    };
    let inserted = api_keys::Entity::insert(model)
        .exec_with_returning(connection)
        .await
        .map_err(StorageError::from_db)?;
    Ok((record_from_model(inserted), presented))
}

fn keys_of(scope: &ProjectScope) -> sea_orm::Select<api_keys::Entity> {
    api_keys::Entity::find().filter(crate::tenancy::in_project::<api_keys::Entity>(scope))
}

impl Storage {
    /// Verify a presented API key: well-formed with a valid checksum, known, the right
    /// secret (constant-time), not revoked and not expired. Unknown ids and wrong secrets are
    /// indistinguishable to the caller.
    pub async fn verify_api_key(
        &self,
        presented: &str,
        pepper: &ApiKeyPepper,
    ) -> Result<Option<VerifiedApiKey>, StorageError> {
        let Some(parsed) = parse_api_key(presented) else {
            return Ok(None);
        };
        let stored = api_keys::Entity::find()
            .filter(api_keys::Column::PublicId.eq(parsed.public_id))
            .one(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        let presented_hash = pepper.hash_secret(parsed.secret);
        let Some(stored) = stored else {
            return Ok(None);
        };
        let hashes_match: bool = stored
            .secret_hash
            .as_bytes()
            .ct_eq(presented_hash.as_bytes())
            .into();
        let now = Utc::now();
        let expired = stored
            .expires_at
            .is_some_and(|expires_at| expires_at <= now);
        let environment_matches = stored.environment == parsed.environment.as_str();
        if !hashes_match || stored.revoked_at.is_some() || expired || !environment_matches {
            return Ok(None);
        }
        let stale_last_use = stored
            .last_used_at
            .is_none_or(|last_used_at| now - last_used_at >= LAST_USED_RESOLUTION);
        if stale_last_use {
            // Best effort: a failure to record the time must not fail the request.
            let recorded = api_keys::Entity::update_many()
                .col_expr(
                    api_keys::Column::LastUsedAt,
                    sea_orm::sea_query::Expr::value(now),
                )
                .filter(api_keys::Column::Id.eq(stored.id))
                .exec(&self.connection)
                .await;
            if let Err(error) = recorded {
                tracing::debug!(%error, "could not record an API key's last use");
            }
        }
        Ok(Some(VerifiedApiKey {
            scope: ProjectScope::from_verified_credential(
                OrganizationId::from_uuid(stored.organization_id),
                ProjectId::from_uuid(stored.project_id),
            ),
            key_id: ApiKeyId::from_uuid(stored.id),
            lineage_id: ApiKeyId::from_uuid(stored.lineage_id.unwrap_or(stored.id)),
            scopes: ApiScopes::from_stored_text(&stored.scopes),
            environment: parsed.environment,
            expires_at: stored.expires_at,
            agents: stored_agents(stored.agents.as_deref())?,
        }))
    }

    /// Mint a key for `scope`'s project. The presented text is returned only here.
    pub async fn create_api_key(
        &self,
        scope: &ProjectScope,
        new_key: &NewApiKey,
        pepper: &ApiKeyPepper,
        actor: &Actor,
    ) -> Result<(ApiKeyRecord, String), StorageError> {
        let _permit = self.write_permit().await;
        let transaction = self.begin_write().await?;
        let (record, presented) = insert_api_key(
            &transaction,
            scope,
            new_key,
            None,
            Some(actor.label()),
            pepper,
        )
        .await?;
        append_audit_event(
            &transaction,
            scope.organization_id(),
            Some(scope),
            actor,
            &NewAuditEvent::success(
                AuditAction::ApiKeyCreated,
                vec![record.id.to_string()],
                serde_json::json!({
                    "label": record.label,
                    "scopes": record.scopes.names(),
                    "environment": record.environment.as_str(),
                    "expires_at": record.expires_at,
                    "agents": record.agents,
                }),
            ),
        )
        .await?;
        transaction.commit().await.map_err(StorageError::from_db)?;
        Ok((record, presented))
    }

    /// The public ids of every key not revoked, across projects: public parts (shown in key
    /// lists), so a door can tell a made-up key id from a real one without a lookup each.
    pub async fn api_key_public_ids(&self) -> Result<Vec<String>, StorageError> {
        api_keys::Entity::find()
            .select_only()
            .column(api_keys::Column::PublicId)
            .filter(api_keys::Column::RevokedAt.is_null())
            .into_tuple()
            .all(&self.connection)
            .await
            .map_err(StorageError::from_db)
    }

    /// Every key of `scope`'s project, newest first (revoked and expired ones included, so
    /// the console can show what happened to them).
    pub async fn list_api_keys(
        &self,
        scope: &ProjectScope,
    ) -> Result<Vec<ApiKeyRecord>, StorageError> {
        let models = keys_of(scope)
            .order_by_desc(api_keys::Column::CreatedAt)
            .order_by_desc(api_keys::Column::Id)
            .all(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        Ok(models.into_iter().map(record_from_model).collect())
    }

    /// One key of `scope`'s project (revoked and expired ones included); `None` for an id of
    /// another project or none.
    pub async fn api_key(
        &self,
        scope: &ProjectScope,
        key_id: ApiKeyId,
    ) -> Result<Option<ApiKeyRecord>, StorageError> {
        Ok(keys_of(scope)
            .filter(api_keys::Column::Id.eq(key_id.as_uuid()))
            .one(&self.connection)
            .await
            .map_err(StorageError::from_db)?
            .map(record_from_model))
    }

    /// Revoke a key of `scope`'s project at once (idempotent). A key of another project is
    /// `NotFound`.
    pub async fn revoke_api_key(
        &self,
        scope: &ProjectScope,
        key_id: ApiKeyId,
        actor: &Actor,
    ) -> Result<ApiKeyRecord, StorageError> {
        let _permit = self.write_permit().await;
        let transaction = self.begin_write().await?;
        let found = keys_of(scope)
            .filter(api_keys::Column::Id.eq(key_id.as_uuid()))
            .one(&transaction)
            .await
            .map_err(StorageError::from_db)?
            .ok_or(StorageError::NotFound(NotFoundKind::ApiKey))?;
        if found.revoked_at.is_some() {
            return Ok(record_from_model(found));
        }
        let mut active: api_keys::ActiveModel = found.into();
        active.revoked_at = Set(Some(Utc::now()));
        let updated = sea_orm::ActiveModelTrait::update(active, &transaction)
            .await
            .map_err(StorageError::from_db)?;
        append_audit_event(
            &transaction,
            scope.organization_id(),
            Some(scope),
            actor,
            &NewAuditEvent::success(
                AuditAction::ApiKeyRevoked,
                vec![key_id.to_string()],
                serde_json::json!({}),
            ),
        )
        .await?;
        transaction.commit().await.map_err(StorageError::from_db)?;
        Ok(record_from_model(updated))
    }

    /// Replace a key with a new one of the same label, scopes, environment and expiry. The
    /// old key keeps working for `overlap` (so deployments can switch without downtime),
    /// then expires; an overlap of zero revokes it at once. Returns the new key, its
    /// presented text and the old key as it is now. A revoked or expired key cannot be
    /// rolled (`NotFound`, as if it did not exist).
    pub async fn roll_api_key(
        &self,
        scope: &ProjectScope,
        key_id: ApiKeyId,
        overlap: std::time::Duration,
        pepper: &ApiKeyPepper,
        actor: &Actor,
    ) -> Result<(ApiKeyRecord, String, ApiKeyRecord), StorageError> {
        let _permit = self.write_permit().await;
        let transaction = self.begin_write().await?;
        let now = Utc::now();
        let found = keys_of(scope)
            .filter(api_keys::Column::Id.eq(key_id.as_uuid()))
            .one(&transaction)
            .await
            .map_err(StorageError::from_db)?
            .ok_or(StorageError::NotFound(NotFoundKind::ApiKey))?;
        let usable = found.revoked_at.is_none()
            && found.expires_at.is_none_or(|expires_at| expires_at > now);
        if !usable {
            return Err(StorageError::NotFound(NotFoundKind::ApiKey));
        }
        // The new key is bound as the old one was; a stored list that does not parse refuses
        // the roll rather than making a key of every agent.
        let agents = stored_agents(found.agents.as_deref())?;
        let old_record = record_from_model(found.clone());
        let lineage_id = found.lineage_id.unwrap_or(found.id);
        let (new_record, presented) = insert_api_key(
            &transaction,
            scope,
            &NewApiKey {
                label: old_record.label.clone(),
                scopes: old_record.scopes.clone(),
                environment: old_record.environment,
                expires_at: old_record.expires_at,
                agents,
            },
            Some(lineage_id),
            found.created_by.clone(),
            pepper,
        )
        .await?;
        let overlap = chrono::Duration::from_std(overlap).unwrap_or(chrono::Duration::zero());
        let mut active: api_keys::ActiveModel = found.into();
        if overlap.is_zero() {
            active.revoked_at = Set(Some(now));
        } else {
            let overlap_end = now + overlap;
            let expires_at = match old_record.expires_at {
                Some(existing) if existing < overlap_end => existing,
                _ => overlap_end,
            };
            active.expires_at = Set(Some(expires_at));
        }
        let updated_old = sea_orm::ActiveModelTrait::update(active, &transaction)
            .await
            .map_err(StorageError::from_db)?;
        append_audit_event(
            &transaction,
            scope.organization_id(),
            Some(scope),
            actor,
            &NewAuditEvent::success(
                AuditAction::ApiKeyRolled,
                vec![key_id.to_string(), new_record.id.to_string()],
                serde_json::json!({
                    "overlap_seconds": overlap.num_seconds(),
                    "previous_expires_at": updated_old.expires_at,
                }),
            ),
        )
        .await?;
        transaction.commit().await.map_err(StorageError::from_db)?;
        Ok((new_record, presented, record_from_model(updated_old)))
    }
}
