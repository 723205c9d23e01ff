//! Tombstones of deleted memories: ids, last version and deletion time only (never content),
//! kept for a configurable period so late or replayed index work for a deleted memory is
//! recognised as a delete, then purged by the worker.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum MemoryTombstones {
    Table,
    MemoryId,
    OrganizationId,
    ProjectId,
    LastVersion,
    DeletedAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(MemoryTombstones::Table)
                    .if_not_exists()
                    .col(
                        ColumnDef::new(MemoryTombstones::MemoryId)
                            .uuid()
                            .not_null()
                            .primary_key(),
                    )
                    .col(
                        ColumnDef::new(MemoryTombstones::OrganizationId)
                            .uuid()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(MemoryTombstones::ProjectId)
                            .uuid()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(MemoryTombstones::LastVersion)
                            .big_integer()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(MemoryTombstones::DeletedAt)
                            .timestamp_with_time_zone()
                            .not_null(),
                    )
                    .to_owned(),
            )
            .await?;
        // The purge scans by age.
        manager
            .create_index(
                Index::create()
                    .name("memory_tombstones_deleted_at")
                    .table(MemoryTombstones::Table)
                    .col(MemoryTombstones::DeletedAt)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(MemoryTombstones::Table).to_owned())
            .await
    }
}
