//! Spend limits at the door: before a write or a search the project's rate quota, monthly
//! quotas and hard-capped budget are checked, and budget alerts are raised as the month's
//! cost crosses their thresholds.
//!
//! The month's usage is what storage holds plus what this gateway's meter has not written
//! yet, so one gateway enforces exactly; with several, another gateway's last second of
//! usage (its unflushed meter) is seen one flush later. What storage holds is read again
//! only after this gateway's meter flushed (or a second passed), not on every request.

use crate::EngineError;
use crate::metering::UsageMeter;
use crate::project_settings_cache::ProjectSettingsCache;
use chrono::Utc;
use engram_core::usage::{
    BillingMonth, LimitReached, Picos, PlannedSpend, SpendLimits, UsageUnit, check_monthly_limits,
    thresholds_reached,
};
use engram_core::{ProjectId, ProjectScope};
use engram_storage::Storage;
use engram_storage::usage::{BudgetAlert, price_in_effect};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

type ProjectRateLimiter = governor::DefaultDirectRateLimiter;

/// The month's usage and cost of a project as the guard sees it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MonthToDate {
    pub used: BTreeMap<UsageUnit, i64>,
    /// Cost in the budget's currency (or, without a budget, in none: 0).
    pub spent_micros: i64,
}

pub struct SpendGuard {
    storage: Storage,
    meter: UsageMeter,
    /// The project settings cache the whole engine shares: a change made through this
    /// gateway applies at once, one made through another within its TTL.
    settings: Arc<ProjectSettingsCache>,
    /// One limiter per project with a rate quota, rebuilt when the quota changes.
    rate_limiters: Mutex<HashMap<ProjectId, (u32, Arc<ProjectRateLimiter>)>>,
    /// Thresholds already recorded, so storage is asked once per threshold and month.
    alerts_raised: Mutex<HashSet<(ProjectId, BillingMonth, u8)>>,
    /// The month's written usage per project, valid until the meter flushes again.
    written: Mutex<HashMap<ProjectId, Arc<WrittenMonth>>>,
}

/// Longest a read of written usage is reused: bounds how late another gateway's writes and
/// a price change are seen.
const WRITTEN_USAGE_TTL: Duration = Duration::from_secs(1);

/// The month as storage held it after `flushes` flushes of this gateway's meter.
struct WrittenMonth {
    month: BillingMonth,
    flushes: u64,
    read_at: Instant,
    used: BTreeMap<UsageUnit, i64>,
    /// Cost per currency, exact.
    spent: BTreeMap<String, Picos>,
    price_book: Vec<engram_storage::usage::PriceEntry>,
}

impl std::fmt::Debug for SpendGuard {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("SpendGuard").finish_non_exhaustive()
    }
}

impl SpendGuard {
    pub fn new(
        storage: Storage,
        meter: UsageMeter,
        settings: Arc<ProjectSettingsCache>,
    ) -> Arc<Self> {
        Arc::new(Self {
            storage,
            meter,
            settings,
            rate_limiters: Mutex::default(),
            alerts_raised: Mutex::default(),
            written: Mutex::default(),
        })
    }

    /// The project's limits, from the project settings cache.
    pub async fn limits(&self, scope: &ProjectScope) -> Result<Arc<SpendLimits>, EngineError> {
        Ok(self.settings.of(scope).await?.spend_limits.clone())
    }

    /// Let a request that plans to spend `planned` through, or refuse it with the limit it
    /// ran into. Returns the limits, so the use case can apply the recall budget.
    pub async fn admit(
        &self,
        scope: &ProjectScope,
        planned: &[PlannedSpend],
    ) -> Result<Arc<SpendLimits>, EngineError> {
        let limits = self.limits(scope).await?;
        if let Some(per_minute) = limits.requests_per_minute {
            self.check_rate(scope.project_id(), per_minute)?;
        }
        if !limits.meters_the_month() {
            return Ok(limits);
        }
        let now = Utc::now();
        let month = BillingMonth::containing(now);
        let month_to_date = self.month_to_date(scope, &limits, month).await?;
        if let Some(budget) = &limits.monthly_budget {
            self.raise_alerts(scope, month, budget, month_to_date.spent_micros)
                .await;
        }
        check_monthly_limits(
            &limits,
            month,
            &month_to_date.used,
            month_to_date.spent_micros,
            planned,
        )
        .map_err(|reached| {
            let currency = (reached.limit == "monthly_budget")
                .then(|| limits.monthly_budget.as_ref().map(|b| b.currency.clone()))
                .flatten();
            limit_reached(reached, currency)
        })?;
        Ok(limits)
    }

    /// Usage per unit and cost so far this month, written or not.
    pub async fn month_to_date(
        &self,
        scope: &ProjectScope,
        limits: &SpendLimits,
        month: BillingMonth,
    ) -> Result<MonthToDate, EngineError> {
        // A flush between reading storage and reading the meter could hide units from both;
        // the flush counter shows it happened, and the two are read again.
        let mut attempts = 0;
        let (written, unflushed) = loop {
            attempts += 1;
            let written = self.written_month(scope, month).await?;
            let unflushed = self.meter.unflushed(scope.project_id(), month.starts_at());
            if self.meter.flushes() == written.flushes || attempts >= 3 {
                break (written, unflushed);
            }
        };
        let mut used = written.used.clone();
        for (unit, quantity) in &unflushed {
            *used.entry(*unit).or_default() += quantity;
        }
        let Some(budget) = &limits.monthly_budget else {
            return Ok(MonthToDate {
                used,
                spent_micros: 0,
            });
        };
        let mut spent = written
            .spent
            .get(&budget.currency)
            .copied()
            .unwrap_or_default();
        let today = Utc::now();
        for (unit, quantity) in unflushed {
            if let Some(price) = price_in_effect(&written.price_book, unit, today)
                .filter(|price| price.currency == budget.currency)
            {
                spent += Picos::times(price.unit_price(), quantity);
            }
        }
        Ok(MonthToDate {
            used,
            spent_micros: spent.micros(),
        })
    }

    /// What storage holds for the month, reused until this gateway's meter writes again (or,
    /// for other gateways' writes and price changes, for at most a second).
    async fn written_month(
        &self,
        scope: &ProjectScope,
        month: BillingMonth,
    ) -> Result<Arc<WrittenMonth>, EngineError> {
        let project_id = scope.project_id();
        let flushes_before_read = self.meter.flushes();
        if let Ok(cache) = self.written.lock()
            && let Some(written) = cache.get(&project_id)
            && written.month == month
            && written.flushes == flushes_before_read
            && written.read_at.elapsed() < WRITTEN_USAGE_TTL
        {
            return Ok(written.clone());
        }
        let (costs, price_book) = self
            .storage
            .costs_with_price_book(scope, month.starts_at(), month.resets_at())
            .await?;
        let mut used: BTreeMap<UsageUnit, i64> = BTreeMap::new();
        let mut spent: BTreeMap<String, Picos> = BTreeMap::new();
        for row in &costs {
            *used.entry(row.unit).or_default() += row.quantity;
            if let Some(price) = &row.price {
                *spent.entry(price.currency.clone()).or_default() += row.cost;
            }
        }
        let written = Arc::new(WrittenMonth {
            month,
            flushes: flushes_before_read,
            read_at: Instant::now(),
            used,
            spent,
            price_book,
        });
        if let Ok(mut cache) = self.written.lock() {
            cache.insert(project_id, written.clone());
        }
        Ok(written)
    }

    fn check_rate(&self, project_id: ProjectId, per_minute: u32) -> Result<(), EngineError> {
        use governor::clock::{Clock, DefaultClock};
        let Some(quota_per_minute) = NonZeroU32::new(per_minute) else {
            return Err(limit_reached(
                LimitReached {
                    limit: "requests_per_minute".to_string(),
                    maximum: 0,
                    used: 0,
                    period: "minute",
                    resets_at: Utc::now() + chrono::Duration::minutes(1),
                },
                None,
            ));
        };
        let limiter = {
            let Ok(mut limiters) = self.rate_limiters.lock() else {
                return Ok(());
            };
            let entry = limiters.entry(project_id).or_insert_with(|| {
                (
                    per_minute,
                    Arc::new(governor::RateLimiter::direct(governor::Quota::per_minute(
                        quota_per_minute,
                    ))),
                )
            });
            if entry.0 != per_minute {
                *entry = (
                    per_minute,
                    Arc::new(governor::RateLimiter::direct(governor::Quota::per_minute(
                        quota_per_minute,
                    ))),
                );
            }
            entry.1.clone()
        };
        limiter.check().map_err(|not_until| {
            let wait = not_until.wait_time_from(DefaultClock::default().now());
            limit_reached(
                LimitReached {
                    limit: "requests_per_minute".to_string(),
                    maximum: i64::from(per_minute),
                    used: i64::from(per_minute),
                    period: "minute",
                    resets_at: Utc::now()
                        + chrono::Duration::from_std(wait)
                            .unwrap_or_else(|_| chrono::Duration::seconds(60)),
                },
                None,
            )
        })
    }

    /// Record each threshold the month's cost has reached, once per month (storage keeps the
    /// record and writes the audit event). A failure is logged, never shown to the caller.
    async fn raise_alerts(
        &self,
        scope: &ProjectScope,
        month: BillingMonth,
        budget: &engram_core::usage::MonthlyBudget,
        spent_micros: i64,
    ) {
        for threshold_percent in thresholds_reached(budget, spent_micros) {
            let key = (scope.project_id(), month, threshold_percent);
            let already = self
                .alerts_raised
                .lock()
                .map(|raised| raised.contains(&key))
                .unwrap_or(true);
            if already {
                continue;
            }
            let alert = BudgetAlert {
                month: month.label(),
                threshold_percent,
                spent_micros,
                budget_micros: budget.amount_micros,
                currency: budget.currency.clone(),
                reached_at: Utc::now(),
            };
            match self.storage.record_budget_alert(scope, &alert).await {
                Ok(first_time) => {
                    if first_time {
                        tracing::warn!(
                            project_id = %scope.project_id(),
                            threshold_percent,
                            spent_micros,
                            budget_micros = budget.amount_micros,
                            "budget threshold reached"
                        );
                        metrics::counter!("engram_budget_alerts_total").increment(1);
                    }
                    if let Ok(mut raised) = self.alerts_raised.lock() {
                        raised.insert(key);
                    }
                }
                Err(error) => tracing::warn!(%error, "budget alert not recorded"),
            }
        }
    }
}

/// The refusal for a reached limit (a 402 for the budget, a 429 otherwise at the HTTP door).
fn limit_reached(reached: LimitReached, currency: Option<String>) -> EngineError {
    EngineError::LimitReached {
        reached: Box::new(reached),
        currency,
    }
}

/// `12.50 USD` from micros.
pub fn format_micros(micros: i64, currency: Option<&str>) -> String {
    let amount = format!("{:.2}", micros as f64 / 1_000_000.0);
    match currency {
        Some(currency) => format!("{amount} {currency}"),
        None => amount,
    }
}
