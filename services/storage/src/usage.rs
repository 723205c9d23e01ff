//! Metered usage: hourly counters per project, credential and unit, added to in batches by
//! the gateways' meters, and read back per hour or per day (the daily rollup is the sum of
//! the hours, computed by the query, so the two can never disagree).

use crate::audit::append_audit_event;
use crate::entities::{budget_alerts, projects, usage_hourly};
use crate::{Storage, StorageError};
use chrono::{DateTime, Duration, DurationRound, Utc};
use engram_core::NotFoundKind;
use engram_core::audit::{Actor, AuditAction, NewAuditEvent};
use engram_core::usage::{BillingMonth, SpendLimits, UsageUnit};
pub use engram_core::usage::{BudgetAlert, CostRow, PriceEntry, UsageGranularity, UsageRow};
use engram_core::{OrganizationId, ProjectId, ProjectScope};
use sea_orm::sea_query::{Expr, OnConflict};
use sea_orm::{ActiveValue::Set, ColumnTrait, EntityTrait, QueryFilter, QueryOrder};
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

/// The start of the hour `at` falls in.
pub fn hour_start(at: DateTime<Utc>) -> DateTime<Utc> {
    at.duration_trunc(Duration::hours(1)).unwrap_or(at)
}

/// Add one increment to its hourly counter (created at 0 if absent), inside the caller's
/// transaction.
pub(crate) async fn add_to_hourly_counter(
    transaction: &crate::WriteTransaction,
    increment: &UsageIncrement,
) -> Result<(), StorageError> {
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
    .exec_without_returning(transaction)
    .await
    .map_err(StorageError::from_db)?;
    Ok(())
}

impl Storage {
    /// Add every increment to its hourly counter, in one transaction (all or nothing, so a
    /// retried batch after a failure is not counted twice).
    pub async fn add_usage(&self, increments: &[UsageIncrement]) -> Result<(), StorageError> {
        if increments.is_empty() {
            return Ok(());
        }
        let _permit = self.write_permit().await;
        let transaction = self.begin_write().await?;
        for increment in increments {
            add_to_hourly_counter(&transaction, increment).await?;
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
            .filter(crate::tenancy::in_project::<usage_hourly::Entity>(scope))
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

impl Storage {
    /// Add a price to the book; it applies from `effective_from` until a later entry for the
    /// same unit (and organization) takes over. Past entries are never changed, so a cost
    /// computed for a past day stays the same.
    pub async fn add_price(&self, entry: &PriceEntry) -> Result<(), StorageError> {
        let _permit = self.write_permit().await;
        crate::entities::price_book::Entity::insert(crate::entities::price_book::ActiveModel {
            id: Set(uuid::Uuid::now_v7()),
            organization_id: Set(entry.organization_id.map(|id| id.as_uuid())),
            unit: Set(entry.unit.as_str().to_string()),
            currency: Set(entry.currency.clone()),
            unit_price_micros: Set(entry.unit_price_micros),
            effective_from: Set(entry.effective_from),
            created_at: Set(Utc::now()),
        })
        .exec_without_returning(&self.connection)
        .await
        .map_err(StorageError::from_db)?;
        Ok(())
    }

    /// The entries that apply to an organization: the defaults and its overrides.
    pub async fn price_book_for(
        &self,
        organization_id: OrganizationId,
    ) -> Result<Vec<PriceEntry>, StorageError> {
        use crate::entities::price_book;
        let rows = price_book::Entity::find()
            .filter(
                sea_orm::Condition::any()
                    .add(price_book::Column::OrganizationId.is_null())
                    .add(price_book::Column::OrganizationId.eq(organization_id.as_uuid())),
            )
            .order_by_asc(price_book::Column::EffectiveFrom)
            .order_by_asc(price_book::Column::CreatedAt)
            .all(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        Ok(rows
            .into_iter()
            .filter_map(|row| {
                Some(PriceEntry {
                    organization_id: row.organization_id.map(OrganizationId::from_uuid),
                    unit: UsageUnit::parse(&row.unit)?,
                    currency: row.currency,
                    unit_price_micros: row.unit_price_micros,
                    effective_from: row.effective_from,
                })
            })
            .collect())
    }

    /// Cost per day and unit of the project's usage from `from` to `to`: quantity × the price
    /// in effect on that day.
    pub async fn costs(
        &self,
        scope: &ProjectScope,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Vec<CostRow>, StorageError> {
        Ok(self.costs_with_price_book(scope, from, to).await?.0)
    }

    /// [`Storage::costs`] and the price book it used (what applies to the organization).
    pub async fn costs_with_price_book(
        &self,
        scope: &ProjectScope,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<(Vec<CostRow>, Vec<PriceEntry>), StorageError> {
        let book = self.price_book_for(scope.organization_id()).await?;
        let usage = self.usage(scope, from, to, UsageGranularity::Day).await?;
        let mut per_day: BTreeMap<(DateTime<Utc>, UsageUnit), i64> = BTreeMap::new();
        for row in usage {
            *per_day.entry((row.period_start, row.unit)).or_default() += row.quantity;
        }
        let rows = per_day
            .into_iter()
            .map(|((day, unit), quantity)| {
                let price = price_in_effect(&book, unit, day);
                let cost_micros = price
                    .as_ref()
                    .map_or(0, |price| price.unit_price_micros.saturating_mul(quantity));
                CostRow {
                    day,
                    unit,
                    quantity,
                    price,
                    cost_micros,
                }
            })
            .collect();
        Ok((rows, book))
    }
}

/// The price of `unit` on `day`: the organization's latest override that started on or
/// before the day, else the latest default that did.
pub fn price_in_effect(
    book: &[PriceEntry],
    unit: UsageUnit,
    day: DateTime<Utc>,
) -> Option<PriceEntry> {
    let latest = |overrides: bool| {
        book.iter()
            .filter(|entry| entry.unit == unit && entry.organization_id.is_some() == overrides)
            .filter(|entry| entry.effective_from <= day)
            .max_by_key(|entry| entry.effective_from)
            .cloned()
    };
    latest(true).or_else(|| latest(false))
}

impl Storage {
    /// The project's budget, quotas and recall budget (all empty until set).
    pub async fn spend_limits(&self, scope: &ProjectScope) -> Result<SpendLimits, StorageError> {
        let project = projects::Entity::find()
            .filter(crate::tenancy::in_project::<projects::Entity>(scope))
            .one(&self.connection)
            .await
            .map_err(StorageError::from_db)?
            .ok_or(StorageError::NotFound(NotFoundKind::Project))?;
        Ok(serde_json::from_value(project.spend_limits).unwrap_or_default())
    }

    /// Replace the project's limits; audited with the old and new values.
    pub async fn set_spend_limits(
        &self,
        scope: &ProjectScope,
        limits: &SpendLimits,
        actor: &Actor,
    ) -> Result<SpendLimits, StorageError> {
        let _permit = self.write_permit().await;
        let transaction = self.begin_write().await?;
        let project = projects::Entity::find()
            .filter(crate::tenancy::in_project::<projects::Entity>(scope))
            .one(&transaction)
            .await
            .map_err(StorageError::from_db)?
            .ok_or(StorageError::NotFound(NotFoundKind::Project))?;
        let new_value = serde_json::to_value(limits)
            .map_err(|error| StorageError::Internal(format!("limits not serialisable: {error}")))?;
        projects::Entity::update_many()
            .col_expr(
                projects::Column::SpendLimits,
                Expr::value(new_value.clone()),
            )
            .filter(crate::tenancy::in_project::<projects::Entity>(scope))
            .exec(&transaction)
            .await
            .map_err(StorageError::from_db)?;
        append_audit_event(
            &transaction,
            scope.organization_id(),
            Some(scope),
            actor,
            &NewAuditEvent::success(
                AuditAction::ProjectLimitsChanged,
                vec![scope.project_id().to_string()],
                serde_json::json!({ "from": project.spend_limits, "to": new_value }),
            ),
        )
        .await?;
        transaction.commit().await.map_err(StorageError::from_db)?;
        Ok(limits.clone())
    }

    /// The project's usage per unit in `month` so far (what has been flushed).
    pub async fn month_usage(
        &self,
        scope: &ProjectScope,
        month: BillingMonth,
    ) -> Result<BTreeMap<UsageUnit, i64>, StorageError> {
        let rows = self
            .usage(
                scope,
                month.starts_at(),
                month.resets_at(),
                UsageGranularity::Day,
            )
            .await?;
        let mut per_unit = BTreeMap::new();
        for row in rows {
            *per_unit.entry(row.unit).or_default() += row.quantity;
        }
        Ok(per_unit)
    }

    /// Record that the month's cost reached a threshold, once: `true` when this call recorded
    /// it (and wrote the audit event), `false` when it had already been recorded.
    pub async fn record_budget_alert(
        &self,
        scope: &ProjectScope,
        alert: &BudgetAlert,
    ) -> Result<bool, StorageError> {
        let _permit = self.write_permit().await;
        let transaction = self.begin_write().await?;
        let inserted = budget_alerts::Entity::insert(budget_alerts::ActiveModel {
            organization_id: Set(scope.organization_id().as_uuid()),
            project_id: Set(scope.project_id().as_uuid()),
            month: Set(alert.month.clone()),
            threshold_percent: Set(i32::from(alert.threshold_percent)),
            spent_micros: Set(alert.spent_micros),
            budget_micros: Set(alert.budget_micros),
            currency: Set(alert.currency.clone()),
            reached_at: Set(alert.reached_at),
        })
        .on_conflict(
            OnConflict::columns([
                budget_alerts::Column::ProjectId,
                budget_alerts::Column::Month,
                budget_alerts::Column::ThresholdPercent,
            ])
            .do_nothing()
            .to_owned(),
        )
        .exec_without_returning(&transaction)
        .await
        .map_err(StorageError::from_db)?;
        if inserted == 0 {
            return Ok(false);
        }
        append_audit_event(
            &transaction,
            scope.organization_id(),
            Some(scope),
            &Actor::system("budget"),
            &NewAuditEvent::success(
                AuditAction::BudgetThresholdReached,
                vec![scope.project_id().to_string()],
                serde_json::json!({
                    "month": alert.month,
                    "threshold_percent": alert.threshold_percent,
                    "spent_micros": alert.spent_micros,
                    "budget_micros": alert.budget_micros,
                    "currency": alert.currency,
                }),
            ),
        )
        .await?;
        transaction.commit().await.map_err(StorageError::from_db)?;
        Ok(true)
    }

    /// The alerts that fired in `month`, lowest threshold first.
    pub async fn budget_alerts(
        &self,
        scope: &ProjectScope,
        month: BillingMonth,
    ) -> Result<Vec<BudgetAlert>, StorageError> {
        let rows = budget_alerts::Entity::find()
            .filter(crate::tenancy::in_project::<budget_alerts::Entity>(scope))
            .filter(budget_alerts::Column::Month.eq(month.label()))
            .order_by_asc(budget_alerts::Column::ThresholdPercent)
            .all(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        Ok(rows
            .into_iter()
            .map(|row| BudgetAlert {
                month: row.month,
                threshold_percent: u8::try_from(row.threshold_percent).unwrap_or(u8::MAX),
                spent_micros: row.spent_micros,
                budget_micros: row.budget_micros,
                currency: row.currency,
                reached_at: row.reached_at,
            })
            .collect())
    }

    /// Set (not add to) one day's sample of a gauge-like unit such as memory-days: sampling
    /// the same day twice leaves one sample. Stored at the day's first hour under the
    /// credential `storage`.
    pub async fn set_daily_sample(
        &self,
        scope: &ProjectScope,
        unit: UsageUnit,
        day: DateTime<Utc>,
        quantity: i64,
    ) -> Result<(), StorageError> {
        let _permit = self.write_permit().await;
        let day_start = day.duration_trunc(Duration::days(1)).unwrap_or(day);
        usage_hourly::Entity::insert(usage_hourly::ActiveModel {
            organization_id: Set(scope.organization_id().as_uuid()),
            project_id: Set(scope.project_id().as_uuid()),
            credential: Set(SAMPLED_CREDENTIAL.to_string()),
            unit: Set(unit.as_str().to_string()),
            hour_start: Set(day_start),
            quantity: Set(quantity),
        })
        .on_conflict(
            OnConflict::columns([
                usage_hourly::Column::ProjectId,
                usage_hourly::Column::HourStart,
                usage_hourly::Column::Unit,
                usage_hourly::Column::Credential,
            ])
            .update_column(usage_hourly::Column::Quantity)
            .to_owned(),
        )
        .exec_without_returning(&self.connection)
        .await
        .map_err(StorageError::from_db)?;
        Ok(())
    }
}

/// The credential sampled units (memory-days) are stored under.
pub const SAMPLED_CREDENTIAL: &str = "storage";
