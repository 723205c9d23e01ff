use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "memory_tombstones")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub memory_id: Uuid,
    pub organization_id: Uuid,
    pub project_id: Uuid,
    pub last_version: i64,
    pub deleted_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
