use sea_orm::entity::prelude::*;

/// One memory named by a stored idempotency answer, with its end-user: how deletes and
/// erasure find the answers to blank without reading their bodies.
#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "idempotency_answer_memories")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub project_id: Uuid,
    #[sea_orm(primary_key, auto_increment = false)]
    pub idempotency_key: String,
    #[sea_orm(primary_key, auto_increment = false)]
    pub memory_id: Uuid,
    pub user_id: Option<String>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
