//! Session state (run memory): a JSON value per project, session, end-user and key with a
//! version that every write raises, so a writer holding an old version is refused instead of
//! overwriting (optimistic concurrency); removed with the end-user it belongs to. Each
//! end-user of a session (and "no end-user") has a namespace of its own: `owner`.

use crate::entities::session_state;
use crate::{Storage, StorageError};
use chrono::Utc;
use engram_core::NotFoundKind;
pub use engram_core::session_state::{MAX_KEYS_PER_SESSION, SessionStateEntry, StateWriteRefused};
use engram_core::{MemoryScope, ProjectScope};
use sea_orm::sea_query::Expr;
use sea_orm::{
    ActiveValue::Set, ColumnTrait, EntityTrait, PaginatorTrait, QueryFilter, QueryOrder,
};

/// A value to write and the condition it is written under.
#[derive(Clone, Debug, PartialEq)]
pub struct StateWrite {
    pub value: serde_json::Value,
    /// Write only over this version.
    pub expected: Option<i64>,
    /// Write only when there is no value.
    pub create_only: bool,
    /// The agent writing it, recorded on a new value (a value keeps the agent that created
    /// it); `None`: no agent's.
    pub agent_id: Option<String>,
}

fn entry(model: session_state::Model) -> SessionStateEntry {
    SessionStateEntry {
        session_id: model.session_id,
        key: model.key,
        value: model.value,
        version: model.version,
        user_id: model.user_id,
        created_at: model.created_at,
        updated_at: model.updated_at,
    }
}

/// The stored owner of an end-user's namespace ('' for values of no end-user).
fn owner_of(end_user: Option<&str>) -> &str {
    end_user.unwrap_or("")
}

/// The values of one session in one end-user's namespace (`None`: no end-user's).
fn of_session(
    scope: &ProjectScope,
    session_id: &str,
    end_user: Option<&str>,
) -> sea_orm::Select<session_state::Entity> {
    session_state::Entity::find()
        .filter(crate::tenancy::in_project::<session_state::Entity>(scope))
        .filter(session_state::Column::SessionId.eq(session_id))
        .filter(session_state::Column::Owner.eq(owner_of(end_user)))
}

/// Refuses a change of `row` through `memory_scope` when the scope is bound to agents and the
/// row is not one of theirs (values of no agent are read by every agent, changed by none).
fn refuse_unless_changeable(
    memory_scope: &MemoryScope,
    row: &session_state::Model,
) -> Result<(), StorageError> {
    match memory_scope.agents() {
        Some(agents) if !memory_scope.changes_rows_of(row.agent_id.as_deref()) => {
            // Which agent it is stays unsaid: the value may be one this credential cannot read.
            Err(StorageError::AnotherAgents(format!(
                "session state {:?} is not one of this credential's agents': a credential bound to agents {} changes only its agents' values",
                row.key,
                agents.describe()
            )))
        }
        _ => Ok(()),
    }
}

impl Storage {
    /// One value of `end_user`'s namespace of the session.
    pub async fn session_state(
        &self,
        memory_scope: &MemoryScope,
        session_id: &str,
        end_user: Option<&str>,
        key: &str,
    ) -> Result<Option<SessionStateEntry>, StorageError> {
        let scope = memory_scope.project();
        let Some(end_user) = memory_scope.owner_within(end_user) else {
            return Ok(None);
        };
        Ok(of_session(scope, session_id, end_user)
            .filter(crate::tenancy::seen_by_agents_of::<session_state::Entity>(
                memory_scope,
            ))
            .filter(session_state::Column::Key.eq(key))
            .one(&self.connection)
            .await
            .map_err(StorageError::from_db)?
            .map(entry))
    }

    /// Every key of `end_user`'s namespace of the session, in key order.
    pub async fn session_state_entries(
        &self,
        memory_scope: &MemoryScope,
        session_id: &str,
        end_user: Option<&str>,
    ) -> Result<Vec<SessionStateEntry>, StorageError> {
        let scope = memory_scope.project();
        let Some(end_user) = memory_scope.owner_within(end_user) else {
            return Ok(Vec::new());
        };
        Ok(of_session(scope, session_id, end_user)
            .filter(crate::tenancy::seen_by_agents_of::<session_state::Entity>(
                memory_scope,
            ))
            .order_by_asc(session_state::Column::Key)
            .all(&self.connection)
            .await
            .map_err(StorageError::from_db)?
            .into_iter()
            .map(entry)
            .collect())
    }

    /// Write a value: version 1 when new, else the stored version + 1. With `expected`, only
    /// when the stored version is that one; with `create_only`, only when there is none.
    pub async fn put_session_state(
        &self,
        memory_scope: &MemoryScope,
        session_id: &str,
        end_user: Option<&str>,
        key: &str,
        write: StateWrite,
    ) -> Result<Result<(SessionStateEntry, bool), StateWriteRefused>, StorageError> {
        let scope = memory_scope.project();
        let Some(end_user) = memory_scope.owner_within(end_user) else {
            return Err(StorageError::NotFound(NotFoundKind::SessionState));
        };
        let StateWrite {
            value,
            expected,
            create_only,
            agent_id,
        } = write;
        let _permit = self.write_permit().await;
        let transaction = self.begin_write().await?;
        let current = of_session(scope, session_id, end_user)
            .filter(session_state::Column::Key.eq(key))
            .one(&transaction)
            .await
            .map_err(StorageError::from_db)?;
        if let Some(row) = &current {
            refuse_unless_changeable(memory_scope, row)?;
        }
        let current_version = current.as_ref().map(|row| row.version);
        let refused = StateWriteRefused::VersionMismatch {
            current: current_version,
        };
        if (create_only && current.is_some())
            || expected.is_some_and(|expected| Some(expected) != current_version)
        {
            return Ok(Err(refused));
        }
        let now = Utc::now();
        let created = current.is_none();
        match current {
            Some(row) => {
                // Guarded by the version read: a concurrent writer that got there first
                // makes this update match nothing.
                let updated = session_state::Entity::update_many()
                    .col_expr(session_state::Column::Value, Expr::value(value))
                    .col_expr(session_state::Column::Version, Expr::value(row.version + 1))
                    .col_expr(session_state::Column::UpdatedAt, Expr::value(now))
                    .filter(crate::tenancy::in_project::<session_state::Entity>(scope))
                    .filter(session_state::Column::SessionId.eq(session_id))
                    .filter(session_state::Column::Owner.eq(owner_of(end_user)))
                    .filter(session_state::Column::Key.eq(key))
                    .filter(session_state::Column::Version.eq(row.version))
                    .exec(&transaction)
                    .await
                    .map_err(StorageError::from_db)?;
                if updated.rows_affected != 1 {
                    return Ok(Err(refused));
                }
            }
            None => {
                let keys = of_session(scope, session_id, end_user)
                    .count(&transaction)
                    .await
                    .map_err(StorageError::from_db)?;
                if keys >= MAX_KEYS_PER_SESSION {
                    return Ok(Err(StateWriteRefused::TooManyKeys));
                }
                let inserted = session_state::Entity::insert(session_state::ActiveModel {
                    organization_id: Set(scope.organization_id().as_uuid()),
                    project_id: Set(scope.project_id().as_uuid()),
                    session_id: Set(session_id.to_string()),
                    owner: Set(owner_of(end_user).to_string()),
                    key: Set(key.to_string()),
                    value: Set(value),
                    version: Set(1),
                    user_id: Set(end_user.map(str::to_string)),
                    created_at: Set(now),
                    updated_at: Set(now),
                    agent_id: Set(agent_id),
                })
                .exec_without_returning(&transaction)
                .await;
                // A concurrent first write of the same key won.
                if inserted.is_err() {
                    return Ok(Err(refused));
                }
            }
        }
        transaction.commit().await.map_err(StorageError::from_db)?;
        let stored = self
            .session_state(memory_scope, session_id, end_user, key)
            .await?
            .ok_or(StorageError::NotFound(NotFoundKind::SessionState))?;
        Ok(Ok((stored, created)))
    }

    /// Remove a value (only at `expected`, when given). `Ok(None)`: there was none.
    pub async fn delete_session_state(
        &self,
        memory_scope: &MemoryScope,
        session_id: &str,
        end_user: Option<&str>,
        key: &str,
        expected: Option<i64>,
    ) -> Result<Result<Option<i64>, StateWriteRefused>, StorageError> {
        let scope = memory_scope.project();
        let Some(end_user) = memory_scope.owner_within(end_user) else {
            return Ok(Ok(None));
        };
        let _permit = self.write_permit().await;
        let current = of_session(scope, session_id, end_user)
            .filter(crate::tenancy::seen_by_agents_of::<session_state::Entity>(
                memory_scope,
            ))
            .filter(session_state::Column::Key.eq(key))
            .one(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        if let Some(row) = &current {
            refuse_unless_changeable(memory_scope, row)?;
        }
        let current = current.map(entry);
        let Some(current) = current else {
            return Ok(if expected.is_some() {
                Err(StateWriteRefused::VersionMismatch { current: None })
            } else {
                Ok(None)
            });
        };
        if expected.is_some_and(|expected| expected != current.version) {
            return Ok(Err(StateWriteRefused::VersionMismatch {
                current: Some(current.version),
            }));
        }
        let deleted = session_state::Entity::delete_many()
            .filter(crate::tenancy::in_project::<session_state::Entity>(scope))
            .filter(session_state::Column::SessionId.eq(session_id))
            .filter(session_state::Column::Owner.eq(owner_of(end_user)))
            .filter(session_state::Column::Key.eq(key))
            .filter(session_state::Column::Version.eq(current.version))
            .exec(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        if deleted.rows_affected != 1 {
            return Ok(Err(StateWriteRefused::VersionMismatch {
                current: Some(current.version),
            }));
        }
        Ok(Ok(Some(current.version)))
    }

    /// Every value that belongs to an end-user, by session and key (subject export).
    pub async fn session_state_of_subject(
        &self,
        scope: &ProjectScope,
        user_id: &str,
    ) -> Result<Vec<SessionStateEntry>, StorageError> {
        Ok(session_state::Entity::find()
            .filter(crate::tenancy::in_project::<session_state::Entity>(scope))
            .filter(session_state::Column::UserId.eq(user_id))
            .order_by_asc(session_state::Column::SessionId)
            .order_by_asc(session_state::Column::Key)
            .all(&self.connection)
            .await
            .map_err(StorageError::from_db)?
            .into_iter()
            .map(entry)
            .collect())
    }

    /// Remove every value that belongs to an end-user (subject erasure); returns how many.
    pub async fn delete_session_state_of_subject(
        &self,
        scope: &ProjectScope,
        user_id: &str,
    ) -> Result<u64, StorageError> {
        let _permit = self.write_permit().await;
        let deleted = session_state::Entity::delete_many()
            .filter(crate::tenancy::in_project::<session_state::Entity>(scope))
            .filter(session_state::Column::UserId.eq(user_id))
            .exec(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        Ok(deleted.rows_affected)
    }
}
