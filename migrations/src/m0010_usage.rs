//! Usage metering: billable units per project, credential, unit and hour, added to by the
//! gateways' batched meters (one row per key and hour, never one per request).

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum UsageHourly {
    Table,
    OrganizationId,
    ProjectId,
    Credential,
    Unit,
    HourStart,
    Quantity,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(UsageHourly::Table)
                    .if_not_exists()
                    .col(
                        ColumnDef::new(UsageHourly::OrganizationId)
                            .uuid()
                            .not_null(),
                    )
                    .col(ColumnDef::new(UsageHourly::ProjectId).uuid().not_null())
                    // `key:<id>` or `end_user`: who spent it.
                    .col(
                        ColumnDef::new(UsageHourly::Credential)
                            .string_len(64)
                            .not_null(),
                    )
                    .col(ColumnDef::new(UsageHourly::Unit).string_len(32).not_null())
                    .col(
                        ColumnDef::new(UsageHourly::HourStart)
                            .timestamp_with_time_zone()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(UsageHourly::Quantity)
                            .big_integer()
                            .not_null()
                            .default(0),
                    )
                    .primary_key(
                        Index::create()
                            .col(UsageHourly::ProjectId)
                            .col(UsageHourly::HourStart)
                            .col(UsageHourly::Unit)
                            .col(UsageHourly::Credential),
                    )
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(UsageHourly::Table).to_owned())
            .await
    }
}
