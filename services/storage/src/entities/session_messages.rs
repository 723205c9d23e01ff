use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "session_messages")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    pub organization_id: Uuid,
    pub project_id: Uuid,
    pub session_id: String,
    pub user_id: Option<String>,
    pub agent_id: Option<String>,
    pub role: String,
    pub name: Option<String>,
    pub content: String,
    pub memory_key: Option<String>,
    pub sent_at: DateTimeUtc,
    pub created_at: DateTimeUtc,
    pub batch_id: Uuid,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
