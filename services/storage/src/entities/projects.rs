use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "projects")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    pub organization_id: Uuid,
    pub name: String,
    pub created_at: DateTimeUtc,
    pub end_user_key_generation: i64,
    pub pii_redaction: String,
    pub retention_days: Json,
    pub store_retention_days: Json,
    pub spend_limits: Json,
    pub derive_memories: bool,
    pub embedding_source: String,
    pub embedding_dimension: Option<i32>,
    pub recall_events: String,
    pub recall_event_retention_days: i32,
    /// Raised by every erasure: cached query embeddings of older epochs are dropped.
    pub query_cache_epoch: i64,
    /// `digests` or `full`: whether run steps keep prompts, arguments and results as text.
    pub run_capture: String,
    pub keep_trajectories: bool,
    /// Thousandths; `NULL`: the embedding model's measured floor.
    pub relevance_floor: Option<i32>,
    /// The visibility of a new memory that names none: `shared` or `private`.
    pub default_visibility: String,
    /// Whether searches take other agents' memories only once verified.
    pub verified_only_from_other_agents: bool,
    /// Team name → its agents.
    pub agent_teams: Json,
    /// Raised by every switch of the embedding model of a project with memories: a write
    /// embedded in an older generation is refused.
    pub embedding_generation: i64,
    /// The source the project is being re-embedded into; `NULL`: no move under way.
    pub embedding_target_source: Option<String>,
    /// The task moving it.
    pub embedding_target_task: Option<Uuid>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
