//! Metered usage: hourly counters per project, credential and unit, and daily counters per
//! project, credential, channel, end-user and agent, both added to by the same increment in
//! the same transaction (so a breakdown always adds up to the totals); read back per hour,
//! per day, or per day broken down by one dimension.

use crate::audit::append_audit_event;
use crate::entities::{budget_alerts, projects, usage_daily, usage_hourly};
use crate::{Storage, StorageError};
use chrono::{DateTime, Duration, DurationRound, Utc};
use engram_core::NotFoundKind;
use engram_core::audit::{Actor, AuditAction, NewAuditEvent};
use engram_core::usage::{
    BillingMonth, BreakdownValue, CostBreakdownRow, PICOS_PER_MICRO, Picos, SpendLimits,
    UsageAttribution, UsageBreakdown, UsageBreakdownRow, UsageUnit,
};
pub use engram_core::usage::{BudgetAlert, CostRow, PriceEntry, UsageGranularity, UsageRow};
use engram_core::{OrganizationId, ProjectId, ProjectScope};
use sea_orm::sea_query::{Expr, OnConflict};
use sea_orm::{ActiveValue::Set, ColumnTrait, EntityTrait, QueryFilter, QueryOrder};
use std::collections::BTreeMap;

/// Units to add to one hourly counter (by credential) and one daily counter (by the whole
/// attribution).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UsageIncrement {
    pub organization_id: OrganizationId,
    pub project_id: ProjectId,
    pub attribution: UsageAttribution,
    pub unit: UsageUnit,
    /// Any time within the hour; stored as the hour's start.
    pub at: DateTime<Utc>,
    pub quantity: i64,
}

/// The columns that make one daily counter.
const DAILY_COUNTER_KEY: [usage_daily::Column; 8] = [
    usage_daily::Column::ProjectId,
    usage_daily::Column::Day,
    usage_daily::Column::Unit,
    usage_daily::Column::Credential,
    usage_daily::Column::Channel,
    usage_daily::Column::EndUser,
    usage_daily::Column::EndUserErased,
    usage_daily::Column::AgentId,
];

/// The start of the hour `at` falls in.
pub fn hour_start(at: DateTime<Utc>) -> DateTime<Utc> {
    at.duration_trunc(Duration::hours(1)).unwrap_or(at)
}

/// The start of the UTC day `at` falls in.
pub fn day_start(at: DateTime<Utc>) -> DateTime<Utc> {
    at.duration_trunc(Duration::days(1)).unwrap_or(at)
}

/// Add one increment to its daily and its hourly counter (each created at 0 if absent),
/// inside the caller's transaction.
pub(crate) async fn add_to_usage_counters(
    transaction: &crate::WriteTransaction,
    increment: &UsageIncrement,
) -> Result<(), StorageError> {
    add_to_daily_counter(transaction, increment).await?;
    add_to_hourly_counter(transaction, increment).await
}

/// Add a batch to its counters: every daily counter in key order, then every hourly one, so
/// two gateways flushing at once lock rows in the same order (PostgreSQL would otherwise
/// find them deadlocked on a shared hourly row).
async fn add_batch_to_usage_counters(
    transaction: &crate::WriteTransaction,
    increments: &[UsageIncrement],
) -> Result<(), StorageError> {
    let mut ordered: Vec<&UsageIncrement> = increments.iter().collect();
    ordered.sort_by(|a, b| {
        (a.project_id, day_start(a.at), a.unit, &a.attribution).cmp(&(
            b.project_id,
            day_start(b.at),
            b.unit,
            &b.attribution,
        ))
    });
    for increment in &ordered {
        add_to_daily_counter(transaction, increment).await?;
    }
    ordered.sort_by(|a, b| {
        (
            a.project_id,
            hour_start(a.at),
            a.unit,
            &a.attribution.credential,
        )
            .cmp(&(
                b.project_id,
                hour_start(b.at),
                b.unit,
                &b.attribution.credential,
            ))
    });
    for increment in &ordered {
        add_to_hourly_counter(transaction, increment).await?;
    }
    Ok(())
}

async fn add_to_daily_counter(
    transaction: &crate::WriteTransaction,
    increment: &UsageIncrement,
) -> Result<(), StorageError> {
    add_to_daily_row(transaction, daily_row(increment), increment.quantity).await
}

/// The daily counter an increment adds to (absent dimensions are empty strings).
fn daily_row(increment: &UsageIncrement) -> usage_daily::ActiveModel {
    let attribution = &increment.attribution;
    usage_daily::ActiveModel {
        organization_id: Set(increment.organization_id.as_uuid()),
        project_id: Set(increment.project_id.as_uuid()),
        day: Set(day_start(increment.at)),
        unit: Set(increment.unit.as_str().to_string()),
        credential: Set(attribution.credential.clone()),
        channel: Set(attribution.channel.clone()),
        end_user: Set(attribution.end_user.clone().unwrap_or_default()),
        end_user_erased: Set(false),
        agent_id: Set(attribution.agent_id.clone().unwrap_or_default()),
        quantity: Set(increment.quantity),
    }
}

/// Add `quantity` (the row's own) to the row's daily counter, created as `row` if absent.
async fn add_to_daily_row(
    transaction: &crate::WriteTransaction,
    row: usage_daily::ActiveModel,
    quantity: i64,
) -> Result<(), StorageError> {
    usage_daily::Entity::insert(row)
        .on_conflict(
            OnConflict::columns(DAILY_COUNTER_KEY)
                .value(
                    usage_daily::Column::Quantity,
                    Expr::col((usage_daily::Entity, usage_daily::Column::Quantity)).add(quantity),
                )
                .to_owned(),
        )
        .exec_without_returning(transaction)
        .await
        .map_err(StorageError::from_db)?;
    Ok(())
}

async fn add_to_hourly_counter(
    transaction: &crate::WriteTransaction,
    increment: &UsageIncrement,
) -> Result<(), StorageError> {
    usage_hourly::Entity::insert(usage_hourly::ActiveModel {
        organization_id: Set(increment.organization_id.as_uuid()),
        project_id: Set(increment.project_id.as_uuid()),
        credential: Set(increment.attribution.credential.clone()),
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
        add_batch_to_usage_counters(&transaction, increments).await?;
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
    /// computed for a past day stays the same. An organization's price is audited in its
    /// log as added by `actor`, in the same transaction. Returns the entry's id.
    pub async fn add_price(
        &self,
        entry: &PriceEntry,
        actor: &Actor,
    ) -> Result<uuid::Uuid, StorageError> {
        let _permit = self.write_permit().await;
        let transaction = self.begin_write().await?;
        let id = uuid::Uuid::now_v7();
        crate::entities::price_book::Entity::insert(crate::entities::price_book::ActiveModel {
            id: Set(id),
            organization_id: Set(entry.organization_id.map(|id| id.as_uuid())),
            unit: Set(entry.unit.as_str().to_string()),
            currency: Set(entry.currency.clone()),
            unit_price_micros: Set(entry.unit_price().micros()),
            unit_price_picos: Set(Some(entry.unit_price_picos)),
            effective_from: Set(entry.effective_from),
            created_at: Set(Utc::now()),
            is_default: Set(entry.is_default),
        })
        .exec_without_returning(&transaction)
        .await
        .map_err(StorageError::from_db)?;
        if let Some(organization_id) = entry.organization_id {
            append_audit_event(
                &transaction,
                organization_id,
                None,
                actor,
                &NewAuditEvent::success(
                    AuditAction::PriceAdded,
                    vec![id.to_string()],
                    price_details(entry),
                ),
            )
            .await?;
        }
        transaction.commit().await.map_err(StorageError::from_db)?;
        Ok(id)
    }

    /// Withdraw the organization's price `price_id` before it takes effect: `NotFound` when
    /// the organization has no such price, `Refused` when it already applies (a price that
    /// priced a day is never removed). Audited in the same transaction.
    pub async fn withdraw_scheduled_price(
        &self,
        organization_id: OrganizationId,
        price_id: uuid::Uuid,
        now: DateTime<Utc>,
        actor: &Actor,
    ) -> Result<PriceEntry, StorageError> {
        use crate::entities::price_book;
        let _permit = self.write_permit().await;
        let transaction = self.begin_write().await?;
        let Some(row) = price_book::Entity::find_by_id(price_id)
            .filter(price_book::Column::OrganizationId.eq(organization_id.as_uuid()))
            .one(&transaction)
            .await
            .map_err(StorageError::from_db)?
        else {
            return Err(StorageError::NotFound(NotFoundKind::Price));
        };
        if row.effective_from <= now {
            return Err(StorageError::Refused(format!(
                "the price has applied since {}: a price that priced a day stays; add a new one instead",
                row.effective_from.date_naive()
            )));
        }
        price_book::Entity::delete_by_id(price_id)
            .exec(&transaction)
            .await
            .map_err(StorageError::from_db)?;
        let entry = price_entry(row)
            .ok_or_else(|| StorageError::Internal("a price of an unknown unit".to_string()))?;
        append_audit_event(
            &transaction,
            organization_id,
            None,
            actor,
            &NewAuditEvent::success(
                AuditAction::PriceWithdrawn,
                vec![price_id.to_string()],
                price_details(&entry),
            ),
        )
        .await?;
        transaction.commit().await.map_err(StorageError::from_db)?;
        Ok(entry)
    }

    /// The entries that apply to an organization: the defaults and its overrides.
    pub async fn price_book_for(
        &self,
        organization_id: OrganizationId,
    ) -> Result<Vec<PriceEntry>, StorageError> {
        Ok(self
            .price_book_with_ids_for(organization_id)
            .await?
            .into_iter()
            .map(|(_, entry)| entry)
            .collect())
    }

    /// [`Storage::price_book_for`] with each entry's id, oldest first.
    pub async fn price_book_with_ids_for(
        &self,
        organization_id: OrganizationId,
    ) -> Result<Vec<(uuid::Uuid, PriceEntry)>, StorageError> {
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
            .filter_map(|row| Some((row.id, price_entry(row)?)))
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
            .map(|((day, unit), quantity)| priced(&book, day, unit, quantity))
            .collect();
        Ok((rows, book))
    }
}

/// What the audit log records of a price added or withdrawn.
fn price_details(entry: &PriceEntry) -> serde_json::Value {
    serde_json::json!({
        "unit": entry.unit.as_str(),
        "currency": entry.currency,
        "unit_price": entry.unit_price().decimal(),
        "effective_from": entry.effective_from.date_naive().to_string(),
    })
}

fn price_entry(row: crate::entities::price_book::Model) -> Option<PriceEntry> {
    Some(PriceEntry {
        organization_id: row.organization_id.map(OrganizationId::from_uuid),
        unit: UsageUnit::parse(&row.unit)?,
        currency: row.currency,
        unit_price_picos: row
            .unit_price_picos
            .unwrap_or_else(|| row.unit_price_micros.saturating_mul(PICOS_PER_MICRO as i64)),
        effective_from: row.effective_from,
        is_default: row.is_default,
    })
}

/// `quantity` of `unit` used on `day`, at the price in effect that day.
fn priced(book: &[PriceEntry], day: DateTime<Utc>, unit: UsageUnit, quantity: i64) -> CostRow {
    let price = price_in_effect(book, unit, day);
    let cost = price.as_ref().map_or(Picos::ZERO, |price| {
        Picos::times(price.unit_price(), quantity)
    });
    CostRow {
        day,
        unit,
        quantity,
        price,
        cost,
    }
}

/// The price of `unit` on `day`: the organization's latest override that started on or
/// before the day, else the deployment's latest price set by its operator that did, else
/// the latest of Engram's default price book (which only fills what the operator left
/// unpriced).
pub fn price_in_effect(
    book: &[PriceEntry],
    unit: UsageUnit,
    day: DateTime<Utc>,
) -> Option<PriceEntry> {
    let latest = |overrides: bool, default_book: bool| {
        book.iter()
            .filter(|entry| entry.unit == unit && entry.organization_id.is_some() == overrides)
            .filter(|entry| entry.is_default == default_book)
            .filter(|entry| entry.effective_from <= day)
            .max_by_key(|entry| entry.effective_from)
            .cloned()
    };
    latest(true, false)
        .or_else(|| latest(false, false))
        .or_else(|| latest(false, true))
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
        let day_start = day_start(day);
        let transaction = self.begin_write().await?;
        usage_daily::Entity::insert(daily_row(&UsageIncrement {
            organization_id: scope.organization_id(),
            project_id: scope.project_id(),
            attribution: UsageAttribution::engine(SAMPLED_CREDENTIAL),
            unit,
            at: day_start,
            quantity,
        }))
        .on_conflict(
            OnConflict::columns(DAILY_COUNTER_KEY)
                .update_column(usage_daily::Column::Quantity)
                .to_owned(),
        )
        .exec_without_returning(&transaction)
        .await
        .map_err(StorageError::from_db)?;
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
        .exec_without_returning(&transaction)
        .await
        .map_err(StorageError::from_db)?;
        transaction.commit().await.map_err(StorageError::from_db)
    }
}

/// The credential sampled units (memory-days) are stored under.
pub const SAMPLED_CREDENTIAL: &str = "storage";

impl Storage {
    /// The project's usage from `from` (inclusive) to `to` (exclusive) per day and unit,
    /// broken down by `by`, oldest day first and, within a day and unit, largest first.
    pub async fn usage_breakdown(
        &self,
        scope: &ProjectScope,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        by: UsageBreakdown,
    ) -> Result<Vec<UsageBreakdownRow>, StorageError> {
        let counters = self.daily_counters(scope, from, to).await?;
        Ok(breakdown_rows(&counters, by))
    }

    /// The project's daily counters from `from` to `to`.
    async fn daily_counters(
        &self,
        scope: &ProjectScope,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Vec<usage_daily::Model>, StorageError> {
        usage_daily::Entity::find()
            .filter(crate::tenancy::in_project::<usage_daily::Entity>(scope))
            .filter(usage_daily::Column::Day.gte(day_start(from)))
            .filter(usage_daily::Column::Day.lt(to))
            .all(&self.connection)
            .await
            .map_err(StorageError::from_db)
    }

    /// What a statement is made of, from one read of the daily counters (so its lines and
    /// every breakdown are the same usage): the cost per day and unit, and the cost per day,
    /// unit and value of each breakdown.
    pub async fn statement_costs(
        &self,
        scope: &ProjectScope,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<(Vec<CostRow>, Vec<(UsageBreakdown, Vec<CostBreakdownRow>)>), StorageError> {
        let book = self.price_book_for(scope.organization_id()).await?;
        let counters = self.daily_counters(scope, from, to).await?;
        let mut per_day: BTreeMap<(DateTime<Utc>, UsageUnit), i64> = BTreeMap::new();
        for counter in &counters {
            if let Some(unit) = UsageUnit::parse(&counter.unit) {
                let quantity = per_day.entry((day_start(counter.day), unit)).or_default();
                *quantity = quantity.saturating_add(counter.quantity);
            }
        }
        let costs = per_day
            .into_iter()
            .map(|((day, unit), quantity)| priced(&book, day, unit, quantity))
            .collect();
        let breakdowns = UsageBreakdown::ALL
            .into_iter()
            .map(|by| {
                let rows = breakdown_rows(&counters, by)
                    .into_iter()
                    .map(|row| CostBreakdownRow {
                        cost: priced(&book, row.day, row.unit, row.quantity),
                        value: row.value,
                    })
                    .collect();
                (by, rows)
            })
            .collect();
        Ok((costs, breakdowns))
    }

    /// [`Storage::usage_breakdown`] priced: each row's quantity × the price in effect for
    /// its unit that day.
    pub async fn costs_breakdown(
        &self,
        scope: &ProjectScope,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        by: UsageBreakdown,
    ) -> Result<Vec<CostBreakdownRow>, StorageError> {
        let book = self.price_book_for(scope.organization_id()).await?;
        let rows = self.usage_breakdown(scope, from, to, by).await?;
        Ok(rows
            .into_iter()
            .map(|row| CostBreakdownRow {
                cost: priced(&book, row.day, row.unit, row.quantity),
                value: row.value,
            })
            .collect())
    }

    /// Apply the default price book where the deployment has no price of its own for a
    /// unit: from today on when nothing of the unit was ever used (a fresh install shows
    /// money from its first call), else from tomorrow on (costs are per day, so a day that
    /// already had usage is never re-priced). Returns the units given a default now.
    pub async fn apply_default_prices(
        &self,
        defaults: &[(UsageUnit, i64)],
        currency: &str,
        now: DateTime<Utc>,
    ) -> Result<Vec<UsageUnit>, StorageError> {
        use crate::entities::price_book;
        use sea_orm::PaginatorTrait;
        let deployment_book = price_book::Entity::find()
            .filter(price_book::Column::OrganizationId.is_null())
            .all(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        // A deployment that prices in another currency gets no placeholders in this one:
        // they would mix into its reports and never count against its budgets.
        if deployment_book
            .iter()
            .any(|entry| entry.currency != currency)
        {
            tracing::warn!(
                currency,
                "the deployment prices in another currency: no default prices applied"
            );
            return Ok(Vec::new());
        }
        let mut applied = Vec::new();
        for (unit, unit_price_micros) in defaults {
            if deployment_book
                .iter()
                .any(|entry| entry.unit == unit.as_str())
            {
                continue;
            }
            let used = usage_hourly::Entity::find()
                .filter(usage_hourly::Column::Unit.eq(unit.as_str()))
                .filter(usage_hourly::Column::Quantity.gt(0))
                .count(&self.connection)
                .await
                .map_err(StorageError::from_db)?;
            let effective_from = if used == 0 {
                day_start(now)
            } else {
                day_start(now) + Duration::days(1)
            };
            self.add_price(
                &PriceEntry {
                    organization_id: None,
                    unit: *unit,
                    currency: currency.to_string(),
                    unit_price_picos: unit_price_micros.saturating_mul(PICOS_PER_MICRO as i64),
                    effective_from,
                    is_default: true,
                },
                &Actor::system("default-prices"),
            )
            .await?;
            applied.push(*unit);
        }
        Ok(applied)
    }

    /// Replace the end-user id in the project's usage counters that name `user_id` by the
    /// subject digest, keeping every quantity (totals and past reports do not change).
    /// Returns the counters changed.
    pub async fn pseudonymize_usage_of_subject(
        &self,
        scope: &ProjectScope,
        user_id: &str,
        subject_digest: &str,
    ) -> Result<u64, StorageError> {
        let _permit = self.write_permit().await;
        let transaction = self.begin_write().await?;
        use sea_orm::{ConnectionTrait, QuerySelect};
        let mut counters = subject_usage(scope, user_id);
        // Another gateway's flush adding to a counter between this read and its delete
        // would lose its units (PostgreSQL reads committed): the rows are locked first.
        // SQLite's write transaction already excludes every other writer.
        if transaction.get_database_backend() == sea_orm::DbBackend::Postgres {
            counters = counters.lock_exclusive();
        }
        let counters = counters
            .all(&transaction)
            .await
            .map_err(StorageError::from_db)?;
        let changed = counters.len() as u64;
        // The digest's counter may exist already (the same id erased before and used again):
        // each quantity is added to it. Then every counter read goes, in one statement.
        for counter in counters {
            let renamed = usage_daily::ActiveModel {
                organization_id: Set(counter.organization_id),
                project_id: Set(counter.project_id),
                day: Set(counter.day),
                unit: Set(counter.unit),
                credential: Set(counter.credential),
                channel: Set(counter.channel),
                end_user: Set(subject_digest.to_string()),
                end_user_erased: Set(true),
                agent_id: Set(counter.agent_id),
                quantity: Set(counter.quantity),
            };
            add_to_daily_row(&transaction, renamed, counter.quantity).await?;
        }
        usage_daily::Entity::delete_many()
            .filter(crate::tenancy::in_project::<usage_daily::Entity>(scope))
            .filter(usage_daily::Column::EndUser.eq(user_id))
            .filter(usage_daily::Column::EndUserErased.eq(false))
            .exec(&transaction)
            .await
            .map_err(StorageError::from_db)?;
        // Closed statements keep their figures; only the id becomes the digest, as here.
        let statements = self
            .pseudonymize_statements(&transaction, scope, user_id, subject_digest)
            .await?;
        transaction.commit().await.map_err(StorageError::from_db)?;
        Ok(changed + statements)
    }

    /// Whether a daily counter of the project from `from` to `to` still names `user_id` by
    /// its raw id (after an erasure none does).
    pub async fn usage_names_end_user(
        &self,
        scope: &ProjectScope,
        user_id: &str,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<bool, StorageError> {
        use sea_orm::PaginatorTrait;
        let counters = subject_usage(scope, user_id)
            .filter(usage_daily::Column::Day.gte(from))
            .filter(usage_daily::Column::Day.lt(to))
            .count(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        Ok(counters > 0)
    }

    /// How many of the project's usage counters and stored statements still name `user_id`.
    pub async fn count_usage_of_subject(
        &self,
        scope: &ProjectScope,
        user_id: &str,
    ) -> Result<u64, StorageError> {
        use sea_orm::PaginatorTrait;
        let counters = subject_usage(scope, user_id)
            .count(&self.connection)
            .await
            .map_err(StorageError::from_db)?;
        let statements = self
            .statements_naming(&self.connection, scope, user_id)
            .await?
            .len() as u64;
        Ok(counters + statements)
    }
}

/// The project's daily counters that name `user_id` by its raw id.
fn subject_usage(scope: &ProjectScope, user_id: &str) -> sea_orm::Select<usage_daily::Entity> {
    usage_daily::Entity::find()
        .filter(crate::tenancy::in_project::<usage_daily::Entity>(scope))
        .filter(usage_daily::Column::EndUser.eq(user_id))
        .filter(usage_daily::Column::EndUserErased.eq(false))
}

/// The daily `counters` summed per day, unit and value of `by`, each day's biggest first.
fn breakdown_rows(counters: &[usage_daily::Model], by: UsageBreakdown) -> Vec<UsageBreakdownRow> {
    let mut grouped: BTreeMap<(DateTime<Utc>, UsageUnit, BreakdownValue), i64> = BTreeMap::new();
    for counter in counters {
        let Some(unit) = UsageUnit::parse(&counter.unit) else {
            continue;
        };
        let value = breakdown_value(counter, by);
        *grouped
            .entry((day_start(counter.day), unit, value))
            .or_default() += counter.quantity;
    }
    let mut rows: Vec<UsageBreakdownRow> = grouped
        .into_iter()
        .map(|((day, unit, value), quantity)| UsageBreakdownRow {
            day,
            unit,
            value,
            quantity,
        })
        .collect();
    rows.sort_by(|a, b| {
        (a.day, a.unit)
            .cmp(&(b.day, b.unit))
            .then(b.quantity.cmp(&a.quantity))
            .then(a.value.cmp(&b.value))
    });
    rows
}

/// What one daily counter is, for the dimension a report breaks down by.
fn breakdown_value(counter: &usage_daily::Model, by: UsageBreakdown) -> BreakdownValue {
    let named = |text: &str| {
        if text.is_empty() {
            BreakdownValue::Unattributed
        } else {
            BreakdownValue::Named(text.to_string())
        }
    };
    match by {
        UsageBreakdown::Key => named(&counter.credential),
        UsageBreakdown::Channel => named(&counter.channel),
        UsageBreakdown::Agent => named(&counter.agent_id),
        UsageBreakdown::EndUser if counter.end_user_erased => {
            BreakdownValue::ErasedEndUser(counter.end_user.clone())
        }
        UsageBreakdown::EndUser => named(&counter.end_user),
    }
}
