use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "agent_runs")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    pub organization_id: Uuid,
    pub project_id: Uuid,
    pub user_id: Option<String>,
    pub agent_id: Option<String>,
    pub session_id: Option<String>,
    pub parent_run_id: Option<Uuid>,
    pub task: String,
    pub metadata: Json,
    pub status: String,
    pub outcome: Option<String>,
    pub created_at: DateTimeUtc,
    pub last_activity_at: DateTimeUtc,
    pub ended_at: Option<DateTimeUtc>,
    pub step_count: i32,
    pub credential: String,
    pub channel: String,
    pub trajectory_memory_id: Option<Uuid>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
