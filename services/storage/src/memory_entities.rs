//! Which end-users, agents, sessions and applications a project's active memories name, with
//! how many memories each holds, in pages ordered by id.

use crate::entities::memories;
use crate::memories::owned_memories_of;
use crate::{Storage, StorageError};
use engram_core::memory_filter::{APP_ID_METADATA_KEY, EntityField};
use engram_core::{MemoryScope, MemoryState};
use sea_orm::sea_query::{Expr, SimpleExpr};
use sea_orm::{
    ColumnTrait, ConnectionTrait, DbBackend, FromQueryResult, QueryFilter, QueryOrder, QuerySelect,
};

pub use engram_core::memory::EntityCount;

#[derive(FromQueryResult)]
struct EntityRow {
    entity: String,
    memories: i64,
}

impl Storage {
    /// A page of the values `field` takes among `scope`'s active memories (an end-user
    /// token's: its own only), in id order after `after`, each with its count.
    pub async fn memory_entities(
        &self,
        scope: &MemoryScope,
        field: EntityField,
        after: Option<&str>,
        limit: u64,
    ) -> Result<Vec<EntityCount>, StorageError> {
        let backend = self.connection.get_database_backend();
        let entity = entity_expression(field, backend);
        let mut query = owned_memories_of(scope)
            .filter(memories::Column::State.eq(MemoryState::Active.as_str()))
            .filter(Expr::expr(entity.clone()).is_not_null());
        if let Some(after) = after {
            query = query.filter(Expr::expr(entity.clone()).gt(after));
        }
        let rows = query
            .select_only()
            .column_as(entity.clone(), "entity")
            .column_as(memories::Column::Id.count(), "memories")
            .group_by(entity.clone())
            .order_by_asc(entity)
            .limit(limit.max(1))
            .into_model::<EntityRow>()
            .all(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        Ok(rows
            .into_iter()
            .map(|row| EntityCount {
                id: row.entity,
                memories: u64::try_from(row.memories).unwrap_or(0),
            })
            .collect())
    }
}

fn entity_expression(field: EntityField, backend: DbBackend) -> SimpleExpr {
    match field {
        EntityField::UserId => Expr::col((memories::Entity, memories::Column::UserId)).into(),
        EntityField::AgentId => Expr::col((memories::Entity, memories::Column::AgentId)).into(),
        EntityField::SessionId => Expr::col((memories::Entity, memories::Column::SessionId)).into(),
        // Only text values name an application.
        EntityField::AppId => match backend {
            DbBackend::Postgres => Expr::cust(format!(
                "(CASE WHEN jsonb_typeof((\"memories\".\"metadata\")::jsonb -> '{APP_ID_METADATA_KEY}') = 'string' \
                 THEN (\"memories\".\"metadata\")::jsonb ->> '{APP_ID_METADATA_KEY}' END)"
            )),
            _ => Expr::cust(format!(
                "(CASE WHEN json_type(\"memories\".\"metadata\", '$.{APP_ID_METADATA_KEY}') = 'text' \
                 THEN json_extract(\"memories\".\"metadata\", '$.{APP_ID_METADATA_KEY}') END)"
            )),
        },
    }
}
