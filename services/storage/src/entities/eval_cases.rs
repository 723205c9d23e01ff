use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "eval_cases")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    pub set_id: Uuid,
    pub project_id: Uuid,
    pub query: String,
    pub user_id: Option<String>,
    pub agent_id: Option<String>,
    pub filters: Json,
    pub expected_memory_ids: Json,
    pub expected_contents: Json,
    pub query_vector: Option<Json>,
    pub created_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
