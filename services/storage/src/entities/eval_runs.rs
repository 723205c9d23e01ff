use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "eval_runs")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    pub set_id: Uuid,
    pub organization_id: Uuid,
    pub project_id: Uuid,
    pub task_id: Uuid,
    pub profile: String,
    pub compare_profile: Option<String>,
    pub trigger: String,
    pub status: String,
    pub metrics: Option<Json>,
    pub comparison: Option<Json>,
    pub regression: bool,
    pub regression_reasons: Option<Json>,
    pub error: Option<String>,
    pub created_at: DateTimeUtc,
    pub finished_at: Option<DateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
