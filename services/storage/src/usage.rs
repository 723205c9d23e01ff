//! Metered usage: hourly counters per project, credential and unit, added to in batches by
//! the gateways' meters, and read back per hour or per day (the daily rollup is the sum of
//! the hours, computed by the query, so the two can never disagree).

use crate::entities::usage_hourly;
use crate::{Storage, StorageError};
use chrono::{DateTime, Duration, DurationRound, Utc};
use engram_core::usage::UsageUnit;
use engram_core::{OrganizationId, ProjectId, ProjectScope};
use sea_orm::sea_query::{Expr, OnConflict};
use sea_orm::{
    ActiveValue::Set, ColumnTrait, EntityTrait, QueryFilter, QueryOrder, TransactionTrait,
};
use std::collections::BTreeMap;

/// Units to add to one hourly counter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UsageIncrement {
    pub organization_id: OrganizationId,
    pub project_id: ProjectId,
    /// `key:<id>` or `end_user`.
    pub credential: String,
    pub unit: UsageUnit,
    /// Any time within the hour; stored as the hour's start.
    pub at: DateTime<Utc>,
    pub quantity: i64,
}

/// How usage is grouped in time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UsageGranularity {
    Hour,
    Day,
}

/// One row of a usage report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UsageRow {
    pub period_start: DateTime<Utc>,
    pub unit: UsageUnit,
    pub credential: String,
    pub quantity: i64,
}

/// The start of the hour `at` falls in.
pub fn hour_start(at: DateTime<Utc>) -> DateTime<Utc> {
    at.duration_trunc(Duration::hours(1)).unwrap_or(at)
}

impl Storage {
    /// Add every increment to its hourly counter, in one transaction (all or nothing, so a
    /// retried batch after a failure is not counted twice).
    pub async fn add_usage(&self, increments: &[UsageIncrement]) -> Result<(), StorageError> {
        if increments.is_empty() {
            return Ok(());
        }
        let _permit = self.write_permit().await;
        let transaction = self
            .connection
            .begin()
            .await
            .map_err(StorageError::from_db)?;
        for increment in increments {
            usage_hourly::Entity::insert(usage_hourly::ActiveModel {
                organization_id: Set(increment.organization_id.as_uuid()),
                project_id: Set(increment.project_id.as_uuid()),
                credential: Set(increment.credential.clone()),
                unit: Set(increment.unit.as_str().to_string()),
                hour_start: Set(hour_start(increment.at)),
                quantity: Set(increment.quantity),
            })
            .on_conflict(
                OnConflict::columns([
                    usage_hourly::Column::ProjectId,
                    usage_hourly::Column::HourStart,
                    usage_hourly::Column::Unit,
                    usage_hourly::Column::Credential,
                ])
                .value(
                    usage_hourly::Column::Quantity,
                    Expr::col((usage_hourly::Entity, usage_hourly::Column::Quantity))
                        .add(increment.quantity),
                )
                .to_owned(),
            )
            .exec_without_returning(&transaction)
            .await
            .map_err(StorageError::from_db)?;
        }
        transaction.commit().await.map_err(StorageError::from_db)
    }

    /// The project's usage from `from` (inclusive) to `to` (exclusive), per period, unit and
    /// credential, oldest first.
    pub async fn usage(
        &self,
        scope: &ProjectScope,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        granularity: UsageGranularity,
    ) -> Result<Vec<UsageRow>, StorageError> {
        let hours = usage_hourly::Entity::find()
            .filter(usage_hourly::Column::ProjectId.eq(scope.project_id().as_uuid()))
            .filter(usage_hourly::Column::HourStart.gte(hour_start(from)))
            .filter(usage_hourly::Column::HourStart.lt(to))
            .order_by_asc(usage_hourly::Column::HourStart)
            .all(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        let mut grouped: BTreeMap<(DateTime<Utc>, UsageUnit, String), i64> = BTreeMap::new();
        for hour in hours {
            let Some(unit) = UsageUnit::parse(&hour.unit) else {
                continue;
            };
            let period_start = match granularity {
                UsageGranularity::Hour => hour.hour_start,
                UsageGranularity::Day => hour
                    .hour_start
                    .duration_trunc(Duration::days(1))
                    .unwrap_or(hour.hour_start),
            };
            *grouped
                .entry((period_start, unit, hour.credential))
                .or_default() += hour.quantity;
        }
        Ok(grouped
            .into_iter()
            .map(|((period_start, unit, credential), quantity)| UsageRow {
                period_start,
                unit,
                credential,
                quantity,
            })
            .collect())
    }
}
