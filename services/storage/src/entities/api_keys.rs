use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "api_keys")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    pub organization_id: Uuid,
    pub project_id: Uuid,
    pub public_id: String,
    pub secret_hash: String,
    pub label: String,
    pub created_at: DateTimeUtc,
    pub revoked_at: Option<DateTimeUtc>,
    pub scopes: String,
    pub environment: String,
    pub expires_at: Option<DateTimeUtc>,
    pub last_used_at: Option<DateTimeUtc>,
    /// The first key of this key's roll line; `None` when the key is the first.
    pub lineage_id: Option<Uuid>,
    /// Who made the key (an actor label); a rolled key keeps its line's maker.
    pub created_by: Option<String>,
    /// The agents the key is bound to (a JSON array); `None` for every agent.
    pub agents: Option<String>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
