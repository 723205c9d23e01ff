use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "memories")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    pub organization_id: Uuid,
    pub project_id: Uuid,
    pub user_id: Option<String>,
    pub agent_id: Option<String>,
    pub session_id: Option<String>,
    pub kind: String,
    pub key: Option<String>,
    pub content: String,
    pub metadata: Json,
    pub categories: Json,
    pub source: String,
    pub confidence: f64,
    pub state: String,
    pub version: i64,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
    pub occurred_at: DateTimeUtc,
    pub valid_from: DateTimeUtc,
    pub valid_to: Option<DateTimeUtc>,
    pub expires_at: Option<DateTimeUtc>,
    pub embedding_model: String,
    pub embedding: Vec<u8>,
    pub content_hash: String,
    pub immutable: bool,
    pub legal_hold: bool,
    /// `private` or `shared` among the project's agents.
    pub visibility: String,
    /// The team a shared memory is shared with; `None`: every agent.
    pub shared_with: Option<String>,
    /// When it was verified; `None`: unverified.
    pub verified_at: Option<DateTimeUtc>,
    /// Who verified it (an actor label).
    pub verified_by: Option<String>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
