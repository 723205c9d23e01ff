//! Governance: per-project PII redaction and retention settings, immutable and legal-hold
//! flags on memories, background tasks (subject erasure) with progress, and the content-free
//! erasure ledger that is replayed after a restore.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Projects {
    Table,
    PiiRedaction,
    RetentionDays,
}

#[derive(DeriveIden)]
enum Memories {
    Table,
    Immutable,
    LegalHold,
}

#[derive(DeriveIden)]
enum Tasks {
    Table,
    Id,
    OrganizationId,
    ProjectId,
    Kind,
    Subject,
    Status,
    ProgressDone,
    ProgressTotal,
    Result,
    Error,
    RequestId,
    CreatedAt,
    UpdatedAt,
    ClaimedUntil,
}

#[derive(DeriveIden)]
enum ErasureLedger {
    Table,
    Id,
    OrganizationId,
    ProjectId,
    SubjectDigest,
    ErasedAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // SQLite adds one column per ALTER TABLE.
        manager
            .alter_table(
                Table::alter()
                    .table(Projects::Table)
                    .add_column(
                        ColumnDef::new(Projects::PiiRedaction)
                            .string_len(16)
                            .not_null()
                            .default("off"),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(Projects::Table)
                    .add_column(
                        ColumnDef::new(Projects::RetentionDays)
                            .json()
                            .not_null()
                            .default("{}"),
                    )
                    .to_owned(),
            )
            .await?;
        for column in [Memories::Immutable, Memories::LegalHold] {
            manager
                .alter_table(
                    Table::alter()
                        .table(Memories::Table)
                        .add_column(ColumnDef::new(column).boolean().not_null().default(false))
                        .to_owned(),
                )
                .await?;
        }
        manager
            .create_table(
                Table::create()
                    .table(Tasks::Table)
                    .if_not_exists()
                    .col(ColumnDef::new(Tasks::Id).uuid().not_null().primary_key())
                    .col(ColumnDef::new(Tasks::OrganizationId).uuid().not_null())
                    .col(ColumnDef::new(Tasks::ProjectId).uuid().not_null())
                    .col(ColumnDef::new(Tasks::Kind).string_len(32).not_null())
                    // The end-user being erased; cleared when the task ends.
                    .col(ColumnDef::new(Tasks::Subject).string_len(255).null())
                    .col(ColumnDef::new(Tasks::Status).string_len(16).not_null())
                    .col(
                        ColumnDef::new(Tasks::ProgressDone)
                            .big_integer()
                            .not_null()
                            .default(0),
                    )
                    .col(
                        ColumnDef::new(Tasks::ProgressTotal)
                            .big_integer()
                            .not_null()
                            .default(0),
                    )
                    .col(ColumnDef::new(Tasks::Result).json().null())
                    .col(ColumnDef::new(Tasks::Error).text().null())
                    .col(ColumnDef::new(Tasks::RequestId).string_len(256).null())
                    .col(
                        ColumnDef::new(Tasks::CreatedAt)
                            .timestamp_with_time_zone()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(Tasks::UpdatedAt)
                            .timestamp_with_time_zone()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(Tasks::ClaimedUntil)
                            .timestamp_with_time_zone()
                            .null(),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("tasks_project")
                    .table(Tasks::Table)
                    .col(Tasks::ProjectId)
                    .col(Tasks::CreatedAt)
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(ErasureLedger::Table)
                    .if_not_exists()
                    .col(
                        ColumnDef::new(ErasureLedger::Id)
                            .uuid()
                            .not_null()
                            .primary_key(),
                    )
                    .col(
                        ColumnDef::new(ErasureLedger::OrganizationId)
                            .uuid()
                            .not_null(),
                    )
                    .col(ColumnDef::new(ErasureLedger::ProjectId).uuid().not_null())
                    .col(
                        ColumnDef::new(ErasureLedger::SubjectDigest)
                            .string_len(64)
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(ErasureLedger::ErasedAt)
                            .timestamp_with_time_zone()
                            .not_null(),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("erasure_ledger_project_subject")
                    .table(ErasureLedger::Table)
                    .col(ErasureLedger::ProjectId)
                    .col(ErasureLedger::SubjectDigest)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(ErasureLedger::Table).to_owned())
            .await?;
        manager
            .drop_table(Table::drop().table(Tasks::Table).to_owned())
            .await?;
        for column in [Memories::Immutable, Memories::LegalHold] {
            manager
                .alter_table(
                    Table::alter()
                        .table(Memories::Table)
                        .drop_column(column)
                        .to_owned(),
                )
                .await?;
        }
        for column in [Projects::PiiRedaction, Projects::RetentionDays] {
            manager
                .alter_table(
                    Table::alter()
                        .table(Projects::Table)
                        .drop_column(column)
                        .to_owned(),
                )
                .await?;
        }
        Ok(())
    }
}
