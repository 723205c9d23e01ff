use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "price_book")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    pub organization_id: Option<Uuid>,
    pub unit: String,
    pub currency: String,
    /// Rounded to the nearest millionth: what a release before finer prices reads.
    pub unit_price_micros: i64,
    /// The exact price, in trillionths; `None` never after the migration that added it.
    pub unit_price_picos: Option<i64>,
    pub effective_from: DateTimeUtc,
    pub created_at: DateTimeUtc,
    pub is_default: bool,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
