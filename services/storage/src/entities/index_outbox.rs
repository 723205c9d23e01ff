use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "index_outbox")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i64,
    pub organization_id: Uuid,
    pub project_id: Uuid,
    pub memory_id: Uuid,
    pub created_at: DateTimeUtc,
    pub attempts: i32,
    pub last_error: Option<String>,
    pub claimed_by: Option<String>,
    pub claimed_until: Option<DateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
