use sea_orm::entity::prelude::*;

/// A memory's vector in the model its project is moving to, computed from the content whose
/// digest is `content_hash`.
#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "memory_reembeddings")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub memory_id: Uuid,
    pub organization_id: Uuid,
    pub project_id: Uuid,
    pub content_hash: String,
    pub embedding_model: String,
    pub embedding: Vec<u8>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
