use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "memory_history")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i64,
    pub memory_id: Uuid,
    pub project_id: Uuid,
    pub version: i64,
    pub event: String,
    pub content: Option<String>,
    pub actor: String,
    pub reason: Option<String>,
    pub at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
