//! The keyed audit chain: each organization's chain head records from which sequence its
//! hashes are keyed (the `audit.chain_rekeyed` event, or 1 for a chain keyed from its start);
//! null for a chain still written with plain hashes (before the upgrade).

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum AuditChainHeads {
    Table,
    KeyedSince,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(AuditChainHeads::Table)
                    .add_column(
                        ColumnDef::new(AuditChainHeads::KeyedSince)
                            .big_integer()
                            .null(),
                    )
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(AuditChainHeads::Table)
                    .drop_column(AuditChainHeads::KeyedSince)
                    .to_owned(),
            )
            .await
    }
}
