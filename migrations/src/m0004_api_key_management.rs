//! API key management: scopes, live/test environment, optional expiry (also used for the
//! overlap window when a key is rolled) and the last time a key was used. Keys that existed
//! before keep every scope, so nothing that worked stops working.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum ApiKeys {
    Table,
    Scopes,
    Environment,
    ExpiresAt,
    LastUsedAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // One column per statement: SQLite's ALTER TABLE adds one column at a time.
        let columns = [
            ColumnDef::new(ApiKeys::Scopes)
                .string_len(200)
                .not_null()
                .default("memories:read memories:write memories:delete admin")
                .to_owned(),
            ColumnDef::new(ApiKeys::Environment)
                .string_len(10)
                .not_null()
                .default("live")
                .to_owned(),
            ColumnDef::new(ApiKeys::ExpiresAt)
                .timestamp_with_time_zone()
                .null()
                .to_owned(),
            ColumnDef::new(ApiKeys::LastUsedAt)
                .timestamp_with_time_zone()
                .null()
                .to_owned(),
        ];
        for mut column in columns {
            manager
                .alter_table(
                    Table::alter()
                        .table(ApiKeys::Table)
                        .add_column(&mut column)
                        .to_owned(),
                )
                .await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for column in [
            ApiKeys::LastUsedAt,
            ApiKeys::ExpiresAt,
            ApiKeys::Environment,
            ApiKeys::Scopes,
        ] {
            manager
                .alter_table(
                    Table::alter()
                        .table(ApiKeys::Table)
                        .drop_column(column)
                        .to_owned(),
                )
                .await?;
        }
        Ok(())
    }
}
