//! Feedback on recalled memories (`relevant`, `not_relevant`, `wrong`, optional text), kept
//! with the end-user the memory belongs to so subject erasure removes it.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Feedback {
    Table,
    Id,
    OrganizationId,
    ProjectId,
    MemoryId,
    RecallId,
    UserId,
    Rating,
    Text,
    Credential,
    Correction,
    CreatedAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(Feedback::Table)
                    .if_not_exists()
                    .col(ColumnDef::new(Feedback::Id).uuid().not_null().primary_key())
                    .col(ColumnDef::new(Feedback::OrganizationId).uuid().not_null())
                    .col(ColumnDef::new(Feedback::ProjectId).uuid().not_null())
                    .col(ColumnDef::new(Feedback::MemoryId).uuid().null())
                    .col(ColumnDef::new(Feedback::RecallId).uuid().null())
                    .col(ColumnDef::new(Feedback::UserId).string_len(255).null())
                    .col(ColumnDef::new(Feedback::Rating).string_len(16).not_null())
                    .col(ColumnDef::new(Feedback::Text).text().null())
                    .col(
                        ColumnDef::new(Feedback::Credential)
                            .string_len(64)
                            .not_null(),
                    )
                    .col(ColumnDef::new(Feedback::Correction).json().null())
                    .col(
                        ColumnDef::new(Feedback::CreatedAt)
                            .timestamp_with_time_zone()
                            .not_null(),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("feedback_by_memory")
                    .table(Feedback::Table)
                    .col(Feedback::ProjectId)
                    .col(Feedback::MemoryId)
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("feedback_by_recall")
                    .table(Feedback::Table)
                    .col(Feedback::ProjectId)
                    .col(Feedback::RecallId)
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("feedback_by_user")
                    .table(Feedback::Table)
                    .col(Feedback::ProjectId)
                    .col(Feedback::UserId)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(Feedback::Table).to_owned())
            .await
    }
}
