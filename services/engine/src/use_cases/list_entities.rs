//! Which end-users, agents, sessions or applications (`metadata.app_id`) a project's active
//! memories name, each with its count, a page at a time in id order.

use crate::{EngineError, MemoryEngine};
pub use engram_core::memory::EntityCount;
use engram_core::memory_filter::EntityField;
use engram_core::{Operation, Principal};

/// Most entities one page holds.
pub const MAX_ENTITY_PAGE: u64 = 500;

#[derive(Clone, Debug)]
pub struct ListEntitiesRequest {
    pub field: EntityField,
    /// The page starts after this id (the previous page's `next_cursor`).
    pub after: Option<String>,
    pub limit: u64,
}

pub struct EntityPage {
    pub entities: Vec<EntityCount>,
    pub next_cursor: Option<String>,
}

impl MemoryEngine {
    pub async fn list_entities_for(
        &self,
        principal: &Principal,
        request: ListEntitiesRequest,
    ) -> Result<EntityPage, EngineError> {
        principal.authorize(Operation::ListEntities)?;
        if request.limit == 0 || request.limit > MAX_ENTITY_PAGE {
            return Err(engram_core::InvalidInput::single(
                "limit",
                format!("must be 1–{MAX_ENTITY_PAGE}"),
            )
            .into());
        }
        // An end-user token's scope holds its own memories only: it learns of no other.
        let mut entities = self
            .storage
            .memory_entities(
                principal.memory_scope(),
                request.field,
                request.after.as_deref(),
                request.limit + 1,
            )
            .await?;
        let next_cursor = if entities.len() as u64 > request.limit {
            entities.truncate(request.limit as usize);
            entities.last().map(|entity| entity.id.clone())
        } else {
            None
        };
        Ok(EntityPage {
            entities,
            next_cursor,
        })
    }
}
