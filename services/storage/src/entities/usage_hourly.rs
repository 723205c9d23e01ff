use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "usage_hourly")]
pub struct Model {
    pub organization_id: Uuid,
    #[sea_orm(primary_key, auto_increment = false)]
    pub project_id: Uuid,
    #[sea_orm(primary_key, auto_increment = false)]
    pub hour_start: DateTimeUtc,
    #[sea_orm(primary_key, auto_increment = false)]
    pub unit: String,
    #[sea_orm(primary_key, auto_increment = false)]
    pub credential: String,
    pub quantity: i64,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
