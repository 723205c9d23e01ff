use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "budget_alerts")]
pub struct Model {
    pub organization_id: Uuid,
    #[sea_orm(primary_key, auto_increment = false)]
    pub project_id: Uuid,
    #[sea_orm(primary_key, auto_increment = false)]
    pub month: String,
    #[sea_orm(primary_key, auto_increment = false)]
    pub threshold_percent: i32,
    pub spent_micros: i64,
    pub budget_micros: i64,
    pub currency: String,
    pub reached_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
