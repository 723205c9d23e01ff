//! Prices finer than a millionth (`price_book.unit_price_picos`, trillionths of the currency,
//! backfilled from the micros every existing price has), and the monthly statements that are
//! stored once their month closes (`statement_snapshots`, one per project or organization
//! and month, never rewritten but for an erased end-user's id).

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum PriceBook {
    Table,
    UnitPricePicos,
}

#[derive(DeriveIden)]
enum StatementSnapshots {
    Table,
    Id,
    OrganizationId,
    ProjectId,
    /// The project's id, or `organization` for the organization's statement: unique with
    /// the month (a NULL project id would not be, on either database).
    StatementOf,
    Month,
    Body,
    ClosedAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(PriceBook::Table)
                    .add_column(
                        ColumnDef::new(PriceBook::UnitPricePicos)
                            .big_integer()
                            .null(),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .get_connection()
            .execute_unprepared(
                "UPDATE price_book SET unit_price_picos = unit_price_micros * 1000000",
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(StatementSnapshots::Table)
                    .if_not_exists()
                    .col(
                        ColumnDef::new(StatementSnapshots::Id)
                            .uuid()
                            .not_null()
                            .primary_key(),
                    )
                    .col(
                        ColumnDef::new(StatementSnapshots::OrganizationId)
                            .uuid()
                            .not_null(),
                    )
                    .col(ColumnDef::new(StatementSnapshots::ProjectId).uuid().null())
                    .col(
                        ColumnDef::new(StatementSnapshots::StatementOf)
                            .string_len(64)
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(StatementSnapshots::Month)
                            .string_len(7)
                            .not_null(),
                    )
                    .col(ColumnDef::new(StatementSnapshots::Body).text().not_null())
                    .col(
                        ColumnDef::new(StatementSnapshots::ClosedAt)
                            .timestamp_with_time_zone()
                            .not_null(),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .if_not_exists()
                    .name("statement_snapshots_once")
                    .table(StatementSnapshots::Table)
                    .col(StatementSnapshots::OrganizationId)
                    .col(StatementSnapshots::StatementOf)
                    .col(StatementSnapshots::Month)
                    .unique()
                    .to_owned(),
            )
            .await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(
                Table::drop()
                    .table(StatementSnapshots::Table)
                    .if_exists()
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(PriceBook::Table)
                    .drop_column(PriceBook::UnitPricePicos)
                    .to_owned(),
            )
            .await?;
        Ok(())
    }
}
