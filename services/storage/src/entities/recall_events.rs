use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "recall_events")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    pub organization_id: Uuid,
    pub project_id: Uuid,
    pub created_at: DateTimeUtc,
    pub user_id: Option<String>,
    pub agent_id: Option<String>,
    pub session_id: Option<String>,
    pub query_text: Option<String>,
    pub profile: String,
    pub retrieval: String,
    pub filters: Json,
    pub results: Json,
    pub result_count: i32,
    pub top_score: Option<f64>,
    pub total_micros: i64,
    pub timings: Json,
    pub trace_id: Option<String>,
    pub credential: String,
    pub channel: Option<String>,
    pub run_id: Option<Uuid>,
    pub purpose: String,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
