//! Session state (run memory): JSON values per session and key, versioned for optimistic
//! concurrency, with the end-user they belong to (so subject erasure removes them).

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum SessionState {
    Table,
    OrganizationId,
    ProjectId,
    SessionId,
    Key,
    Value,
    Version,
    UserId,
    CreatedAt,
    UpdatedAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(SessionState::Table)
                    .if_not_exists()
                    .col(
                        ColumnDef::new(SessionState::OrganizationId)
                            .uuid()
                            .not_null(),
                    )
                    .col(ColumnDef::new(SessionState::ProjectId).uuid().not_null())
                    .col(
                        ColumnDef::new(SessionState::SessionId)
                            .string_len(255)
                            .not_null(),
                    )
                    .col(ColumnDef::new(SessionState::Key).string_len(255).not_null())
                    .col(ColumnDef::new(SessionState::Value).json().not_null())
                    .col(
                        ColumnDef::new(SessionState::Version)
                            .big_integer()
                            .not_null(),
                    )
                    .col(ColumnDef::new(SessionState::UserId).string_len(255).null())
                    .col(
                        ColumnDef::new(SessionState::CreatedAt)
                            .timestamp_with_time_zone()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(SessionState::UpdatedAt)
                            .timestamp_with_time_zone()
                            .not_null(),
                    )
                    .primary_key(
                        Index::create()
                            .col(SessionState::ProjectId)
                            .col(SessionState::SessionId)
                            .col(SessionState::Key),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("session_state_by_user")
                    .table(SessionState::Table)
                    .col(SessionState::ProjectId)
                    .col(SessionState::UserId)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(SessionState::Table).to_owned())
            .await
    }
}
