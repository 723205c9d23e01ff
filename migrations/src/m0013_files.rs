//! Uploaded files: what was uploaded (name, format, size, digest, who it is about), the text
//! until it has been ingested, the ingest's status and the memories it became.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Files {
    Table,
    Id,
    OrganizationId,
    ProjectId,
    Name,
    Format,
    SizeBytes,
    Sha256,
    UserId,
    AgentId,
    SessionId,
    Kind,
    Credential,
    Body,
    Status,
    ChunkCount,
    MemoryIds,
    TaskId,
    Error,
    CreatedAt,
    UpdatedAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(Files::Table)
                    .if_not_exists()
                    .col(ColumnDef::new(Files::Id).uuid().not_null().primary_key())
                    .col(ColumnDef::new(Files::OrganizationId).uuid().not_null())
                    .col(ColumnDef::new(Files::ProjectId).uuid().not_null())
                    .col(ColumnDef::new(Files::Name).string_len(255).not_null())
                    .col(ColumnDef::new(Files::Format).string_len(16).not_null())
                    .col(ColumnDef::new(Files::SizeBytes).big_integer().not_null())
                    .col(ColumnDef::new(Files::Sha256).string_len(64).not_null())
                    .col(ColumnDef::new(Files::UserId).string_len(255).null())
                    .col(ColumnDef::new(Files::AgentId).string_len(255).null())
                    .col(ColumnDef::new(Files::SessionId).string_len(255).null())
                    .col(ColumnDef::new(Files::Kind).string_len(16).not_null())
                    // Who is billed: `key:<id>` or `end_user`.
                    .col(ColumnDef::new(Files::Credential).string_len(64).not_null())
                    // The text, kept only until it has been ingested.
                    .col(ColumnDef::new(Files::Body).text().null())
                    .col(ColumnDef::new(Files::Status).string_len(16).not_null())
                    .col(
                        ColumnDef::new(Files::ChunkCount)
                            .integer()
                            .not_null()
                            .default(0),
                    )
                    .col(
                        ColumnDef::new(Files::MemoryIds)
                            .json()
                            .not_null()
                            .default("[]"),
                    )
                    .col(ColumnDef::new(Files::TaskId).uuid().not_null())
                    .col(ColumnDef::new(Files::Error).text().null())
                    .col(
                        ColumnDef::new(Files::CreatedAt)
                            .timestamp_with_time_zone()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(Files::UpdatedAt)
                            .timestamp_with_time_zone()
                            .not_null(),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("files_by_project_user")
                    .table(Files::Table)
                    .col(Files::ProjectId)
                    .col(Files::UserId)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(Files::Table).to_owned())
            .await
    }
}
