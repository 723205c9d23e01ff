//! Keys belong to someone: each API key records who made it (`console_account:<id>`,
//! `api_key:<id>` or `system:<command>`); a rolled key keeps its line's maker. Keys made
//! before this migration have none: only owners, admins and admin keys manage them.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum ApiKeys {
    Table,
    CreatedBy,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(ApiKeys::Table)
                    .add_column(ColumnDef::new(ApiKeys::CreatedBy).string().null())
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(ApiKeys::Table)
                    .drop_column(ApiKeys::CreatedBy)
                    .to_owned(),
            )
            .await
    }
}
