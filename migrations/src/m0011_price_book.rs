//! The price book: unit prices with a currency and the date from which they apply, for the
//! whole deployment (no organization) or overridden for one organization.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum PriceBook {
    Table,
    Id,
    OrganizationId,
    Unit,
    Currency,
    UnitPriceMicros,
    EffectiveFrom,
    CreatedAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(PriceBook::Table)
                    .if_not_exists()
                    .col(
                        ColumnDef::new(PriceBook::Id)
                            .uuid()
                            .not_null()
                            .primary_key(),
                    )
                    .col(ColumnDef::new(PriceBook::OrganizationId).uuid().null())
                    .col(ColumnDef::new(PriceBook::Unit).string_len(32).not_null())
                    .col(ColumnDef::new(PriceBook::Currency).string_len(3).not_null())
                    .col(
                        ColumnDef::new(PriceBook::UnitPriceMicros)
                            .big_integer()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(PriceBook::EffectiveFrom)
                            .timestamp_with_time_zone()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(PriceBook::CreatedAt)
                            .timestamp_with_time_zone()
                            .not_null(),
                    )
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(PriceBook::Table).to_owned())
            .await
    }
}
