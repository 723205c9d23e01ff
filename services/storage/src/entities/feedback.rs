use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "feedback")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    pub organization_id: Uuid,
    pub project_id: Uuid,
    pub memory_id: Option<Uuid>,
    pub recall_id: Option<Uuid>,
    pub user_id: Option<String>,
    pub rating: String,
    pub text: Option<String>,
    pub credential: String,
    pub correction: Option<Json>,
    pub created_at: DateTimeUtc,
    /// The agent the feedback came from; `None` for no agent.
    pub agent_id: Option<String>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
