use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "usage_daily")]
pub struct Model {
    pub organization_id: Uuid,
    #[sea_orm(primary_key, auto_increment = false)]
    pub project_id: Uuid,
    #[sea_orm(primary_key, auto_increment = false)]
    pub day: DateTimeUtc,
    #[sea_orm(primary_key, auto_increment = false)]
    pub unit: String,
    #[sea_orm(primary_key, auto_increment = false)]
    pub credential: String,
    #[sea_orm(primary_key, auto_increment = false)]
    pub channel: String,
    #[sea_orm(primary_key, auto_increment = false)]
    pub end_user: String,
    #[sea_orm(primary_key, auto_increment = false)]
    pub end_user_erased: bool,
    #[sea_orm(primary_key, auto_increment = false)]
    pub agent_id: String,
    pub quantity: i64,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
