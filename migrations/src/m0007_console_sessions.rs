//! Console sessions kept server-side: a short-lived signed access token names its session, and
//! the session holds the hash of its current refresh token (rotated at every use; the
//! previous hash is kept to recognise a replayed token). Logout and replay revoke it.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum ConsoleSessions {
    Table,
    Id,
    AccountId,
    OrganizationId,
    RefreshHash,
    PreviousRefreshHash,
    CreatedAt,
    ExpiresAt,
    RevokedAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(ConsoleSessions::Table)
                    .if_not_exists()
                    .col(
                        ColumnDef::new(ConsoleSessions::Id)
                            .uuid()
                            .not_null()
                            .primary_key(),
                    )
                    .col(ColumnDef::new(ConsoleSessions::AccountId).uuid().not_null())
                    .col(
                        ColumnDef::new(ConsoleSessions::OrganizationId)
                            .uuid()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(ConsoleSessions::RefreshHash)
                            .string_len(64)
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(ConsoleSessions::PreviousRefreshHash)
                            .string_len(64)
                            .null(),
                    )
                    .col(
                        ColumnDef::new(ConsoleSessions::CreatedAt)
                            .timestamp_with_time_zone()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(ConsoleSessions::ExpiresAt)
                            .timestamp_with_time_zone()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(ConsoleSessions::RevokedAt)
                            .timestamp_with_time_zone()
                            .null(),
                    )
                    .to_owned(),
            )
            .await?;
        for (name, column) in [
            (
                "console_sessions_refresh_hash",
                ConsoleSessions::RefreshHash,
            ),
            (
                "console_sessions_previous_refresh_hash",
                ConsoleSessions::PreviousRefreshHash,
            ),
        ] {
            manager
                .create_index(
                    Index::create()
                        .name(name)
                        .table(ConsoleSessions::Table)
                        .col(column)
                        .to_owned(),
                )
                .await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(ConsoleSessions::Table).to_owned())
            .await
    }
}
