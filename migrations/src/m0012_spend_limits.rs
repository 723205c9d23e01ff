//! Spend limits: each project's budget, quotas and recall budget (one JSON document on the
//! project), and the budget alerts already raised, so each threshold fires once a month.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Projects {
    Table,
    SpendLimits,
}

#[derive(DeriveIden)]
enum BudgetAlerts {
    Table,
    OrganizationId,
    ProjectId,
    Month,
    ThresholdPercent,
    SpentMicros,
    BudgetMicros,
    Currency,
    ReachedAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(Projects::Table)
                    .add_column(
                        ColumnDef::new(Projects::SpendLimits)
                            .json()
                            .not_null()
                            .default("{}"),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(BudgetAlerts::Table)
                    .if_not_exists()
                    .col(
                        ColumnDef::new(BudgetAlerts::OrganizationId)
                            .uuid()
                            .not_null(),
                    )
                    .col(ColumnDef::new(BudgetAlerts::ProjectId).uuid().not_null())
                    // `2026-11`
                    .col(ColumnDef::new(BudgetAlerts::Month).string_len(7).not_null())
                    .col(
                        ColumnDef::new(BudgetAlerts::ThresholdPercent)
                            .integer()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(BudgetAlerts::SpentMicros)
                            .big_integer()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(BudgetAlerts::BudgetMicros)
                            .big_integer()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(BudgetAlerts::Currency)
                            .string_len(3)
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(BudgetAlerts::ReachedAt)
                            .timestamp_with_time_zone()
                            .not_null(),
                    )
                    .primary_key(
                        Index::create()
                            .col(BudgetAlerts::ProjectId)
                            .col(BudgetAlerts::Month)
                            .col(BudgetAlerts::ThresholdPercent),
                    )
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(BudgetAlerts::Table).to_owned())
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(Projects::Table)
                    .drop_column(Projects::SpendLimits)
                    .to_owned(),
            )
            .await
    }
}
