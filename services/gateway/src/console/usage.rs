//! The console's usage and cost page: usage per day and unit, cost per day, the month's
//! burn-down, the organization's top projects, and the spend-limit form both ways.

use super::{GatewayConsoleBackend, engine_error};
use crate::views::{MemoryLimitsBody, MonthlyBudgetBody, RecallBudgetBody, SpendLimitsBody};
use chrono::{Duration, Utc};
use engram_console::model::{
    BreakdownEntry, MonthBudget, ProjectCost, SpendLimitsForm, UsageBreakdownTop, UsageDay,
    UsageOverview,
};
use engram_console::{ConsoleCaller, ConsoleError};
use engram_core::memory_limits::MemoryLimitPolicy;
use engram_core::usage::{
    BillingMonth, BreakdownValue, CostBreakdownRow, Picos, SpendLimits, UsageBreakdown, UsageUnit,
    forecast_month_cost,
};
use std::collections::BTreeMap;

/// Units drawn per day, in the order the units are defined.
const CHARTED_UNITS: [UsageUnit; 8] = UsageUnit::ALL;
const DEFAULT_CURRENCY: &str = "USD";

impl GatewayConsoleBackend {
    pub(super) async fn build_usage_overview(
        &self,
        caller: &ConsoleCaller,
        project_id: &str,
        days: u32,
    ) -> Result<UsageOverview, ConsoleError> {
        let (member, principal) = self
            .authorized_project(caller, project_id, engram_core::Operation::GetUsage)
            .await?;
        let can_edit_limits = principal.may(engram_core::Operation::PutSpendLimits);
        let engine = self.engine()?;
        // The report's month-to-date and alerts are read once, here, for the whole page.
        let report = engine
            .spend_limits_for(&principal)
            .await
            .map_err(engine_error)?;
        let limits = report.limits;
        let now = Utc::now();
        let today = now.date_naive();
        // The page offers up to a year; anything else is brought into that range.
        let first_day = today - Duration::days(i64::from(days.clamp(1, 366)) - 1);
        let range_start = first_day
            .and_hms_opt(0, 0, 0)
            .map(|at| at.and_utc())
            .unwrap_or(now);
        let range_end = (today + Duration::days(1))
            .and_hms_opt(0, 0, 0)
            .map(|at| at.and_utc())
            .unwrap_or(now);
        // One read gives both: each cost row carries the day's quantity of its unit.
        let costs = engine
            .costs_for(&principal, range_start, range_end)
            .await
            .map_err(engine_error)?;
        let currency = limits
            .monthly_budget
            .as_ref()
            .map(|budget| budget.currency.clone())
            .or_else(|| {
                costs
                    .iter()
                    .find_map(|row| row.price.as_ref().map(|p| p.currency.clone()))
            })
            .unwrap_or_else(|| DEFAULT_CURRENCY.to_string());
        let mut quantities: BTreeMap<(chrono::NaiveDate, UsageUnit), i64> = BTreeMap::new();
        let mut day_costs: BTreeMap<chrono::NaiveDate, Picos> = BTreeMap::new();
        for row in &costs {
            *quantities
                .entry((row.day.date_naive(), row.unit))
                .or_default() += row.quantity;
            if row
                .price
                .as_ref()
                .is_some_and(|price| price.currency == currency)
            {
                *day_costs.entry(row.day.date_naive()).or_default() += row.cost;
            }
        }
        let mut day_rows = Vec::new();
        let mut day = first_day;
        while day <= today {
            day_rows.push(UsageDay {
                day: day.to_string(),
                quantities: CHARTED_UNITS
                    .iter()
                    .map(|unit| quantities.get(&(day, *unit)).copied().unwrap_or(0))
                    .collect(),
                cost_micros: day_costs.get(&day).copied().unwrap_or_default().micros(),
            });
            day += Duration::days(1);
        }
        let range_cost_micros = day_costs.values().copied().sum::<Picos>().micros();
        let default_prices = costs.iter().any(|row| {
            row.cost > Picos::ZERO && row.price.as_ref().is_some_and(|price| price.is_default)
        });
        // Keys are named by their labels where the member may list keys (else by id).
        let key_labels: BTreeMap<String, String> = engine
            .list_api_keys_for(&principal)
            .await
            .map(|keys| {
                keys.into_iter()
                    .map(|key| (format!("key:{}", key.id), key.label))
                    .collect()
            })
            .unwrap_or_default();
        let mut breakdowns = Vec::with_capacity(UsageBreakdown::ALL.len());
        for by in UsageBreakdown::ALL {
            let rows = engine
                .costs_by_for(&principal, range_start, range_end, by)
                .await
                .map_err(engine_error)?;
            breakdowns.push(top_ten(by, &rows, &currency, &key_labels));
        }
        let month = self
            .month_budget(&principal, &limits, &currency, report.alerts)
            .await?;
        let top_projects: Vec<ProjectCost> = self
            .access
            .project_costs_this_month(&member, &currency)
            .await
            .map_err(engine_error)?
            .into_iter()
            .map(|ranked| ProjectCost {
                project_id: ranked.project.id.to_string(),
                name: ranked.project.name,
                cost_micros: ranked.cost_micros,
            })
            .collect();
        let project_name = top_projects
            .iter()
            .find(|project| project.project_id == project_id)
            .map(|project| project.name.clone())
            .unwrap_or_else(|| project_id.to_string());
        let llm_by_model = engine
            .llm_usage_for(&principal, range_start, range_end)
            .await
            .map_err(engine_error)?
            .into_iter()
            .map(|usage| engram_console::model::LlmModelUsage {
                model: usage.model,
                calls: usage.calls,
                failed_calls: usage.failed_calls,
                tokens_in: usage.tokens_in,
                tokens_out: usage.tokens_out,
            })
            .collect();
        Ok(UsageOverview {
            project_id: project_id.to_string(),
            project_name,
            currency,
            units: CHARTED_UNITS
                .iter()
                .map(|unit| unit.as_str().to_string())
                .collect(),
            days: day_rows,
            range_cost_micros,
            month,
            top_projects,
            limits: limits_form(project_id, &limits),
            can_edit_limits,
            llm_by_model,
            breakdowns,
            default_prices,
        })
    }

    /// The month so far: cumulative cost per day, forecast, budget, alerts and quotas.
    async fn month_budget(
        &self,
        principal: &engram_core::Principal,
        limits: &SpendLimits,
        currency: &str,
        alerts: Vec<engram_core::usage::BudgetAlert>,
    ) -> Result<MonthBudget, ConsoleError> {
        let now = Utc::now();
        let month = BillingMonth::containing(now);
        let costs = self
            .engine()?
            .costs_for(principal, month.starts_at(), month.resets_at())
            .await
            .map_err(engine_error)?;
        let day_of_month = (now - month.starts_at()).num_days() + 1;
        let mut per_day = vec![Picos::ZERO; usize::try_from(day_of_month).unwrap_or(0)];
        for row in costs.iter().filter(|row| {
            row.price
                .as_ref()
                .is_some_and(|price| price.currency == currency)
        }) {
            let index = usize::try_from((row.day - month.starts_at()).num_days()).unwrap_or(0);
            if let Some(slot) = per_day.get_mut(index) {
                *slot += row.cost;
            }
        }
        let mut running = Picos::ZERO;
        let cumulative_micros: Vec<i64> = per_day
            .iter()
            .map(|cost| {
                running += *cost;
                running.micros()
            })
            .collect();
        let spent_micros = running.micros();
        let mut used: BTreeMap<UsageUnit, i64> = BTreeMap::new();
        for row in &costs {
            *used.entry(row.unit).or_default() += row.quantity;
        }
        let alerts = alerts
            .into_iter()
            .map(|alert| {
                (
                    alert.threshold_percent,
                    super::readable_time(alert.reached_at),
                )
            })
            .collect();
        Ok(MonthBudget {
            month: month.label(),
            days_in_month: u32::try_from(month.days()).unwrap_or(31),
            day_of_month: u32::try_from(day_of_month).unwrap_or(1),
            cumulative_micros,
            spent_micros,
            forecast_micros: forecast_month_cost(month, spent_micros, now),
            budget_micros: limits
                .monthly_budget
                .as_ref()
                .map(|budget| budget.amount_micros),
            hard_cap: limits
                .monthly_budget
                .as_ref()
                .is_some_and(|budget| budget.hard_cap),
            alerts,
            quotas: [
                UsageUnit::MemoriesWritten,
                UsageUnit::Searches,
                UsageUnit::TokensEmbedded,
                UsageUnit::FileBytes,
            ]
            .iter()
            .map(|unit| {
                (
                    unit.as_str().to_string(),
                    used.get(unit).copied().unwrap_or(0),
                    limits.monthly_quotas.get(unit).copied(),
                )
            })
            .collect(),
        })
    }

    pub(super) async fn store_spend_limits(
        &self,
        caller: &ConsoleCaller,
        form: SpendLimitsForm,
    ) -> Result<(), ConsoleError> {
        let (_, principal) = self
            .authorized_project(
                caller,
                &form.project_id,
                engram_core::Operation::PutSpendLimits,
            )
            .await?;
        let body = limits_body(&form)?;
        let limits = body.into_limits().map_err(|errors| {
            ConsoleError::InvalidInput(
                errors
                    .iter()
                    .map(|error| format!("{}: {}", error.field, error.message))
                    .collect::<Vec<_>>()
                    .join("; "),
            )
        })?;
        self.engine()?
            .put_spend_limits_for(&principal, limits)
            .await
            .map(|_| ())
            .map_err(engine_error)
    }
}

/// How many of each breakdown the page draws.
const BREAKDOWN_TOP: usize = 10;

/// The ten values of `by` that cost most over the rows (in `currency`), with their searches
/// and memories written.
fn top_ten(
    by: UsageBreakdown,
    rows: &[CostBreakdownRow],
    currency: &str,
    key_labels: &BTreeMap<String, String>,
) -> UsageBreakdownTop {
    let mut per_value: BTreeMap<&BreakdownValue, BreakdownEntry> = BTreeMap::new();
    let mut exact: BTreeMap<&BreakdownValue, Picos> = BTreeMap::new();
    for row in rows {
        let entry = per_value
            .entry(&row.value)
            .or_insert_with(|| BreakdownEntry {
                label: breakdown_label(by, &row.value, key_labels),
                cost_micros: 0,
                searches: 0,
                memories_written: 0,
            });
        if row
            .cost
            .price
            .as_ref()
            .is_some_and(|price| price.currency == currency)
        {
            *exact.entry(&row.value).or_default() += row.cost.cost;
        }
        match row.cost.unit {
            UsageUnit::Searches => entry.searches += row.cost.quantity,
            UsageUnit::MemoriesWritten => entry.memories_written += row.cost.quantity,
            _ => {}
        }
    }
    // A value whose rows all count nothing (a day's sample of no memories) is not drawn.
    let mut used: std::collections::BTreeSet<&BreakdownValue> = std::collections::BTreeSet::new();
    for row in rows.iter().filter(|row| row.cost.quantity != 0) {
        used.insert(&row.value);
    }
    let mut entries: Vec<BreakdownEntry> = per_value
        .into_iter()
        .filter(|(value, _)| used.contains(value))
        .map(|(value, mut entry)| {
            entry.cost_micros = exact.get(value).copied().unwrap_or_default().micros();
            entry
        })
        .collect();
    entries.sort_by(|a, b| {
        b.cost_micros
            .cmp(&a.cost_micros)
            .then(b.searches.cmp(&a.searches))
            .then(a.label.cmp(&b.label))
    });
    let more = entries.len().saturating_sub(BREAKDOWN_TOP);
    entries.truncate(BREAKDOWN_TOP);
    UsageBreakdownTop {
        by: by.as_str().to_string(),
        entries,
        more,
    }
}

/// How the page names one value of a breakdown.
fn breakdown_label(
    by: UsageBreakdown,
    value: &BreakdownValue,
    key_labels: &BTreeMap<String, String>,
) -> String {
    match value {
        BreakdownValue::Unattributed => match by {
            UsageBreakdown::Channel => "before channels were recorded".to_string(),
            _ => "none named".to_string(),
        },
        BreakdownValue::ErasedEndUser(digest) => {
            format!("erased {}", digest.chars().take(12).collect::<String>())
        }
        BreakdownValue::Named(name) => match by {
            UsageBreakdown::Key => {
                let id = name.strip_prefix("key:").unwrap_or(name);
                match key_labels.get(name) {
                    Some(label) => format!("{label} ({})", id.chars().take(8).collect::<String>()),
                    None => id.to_string(),
                }
            }
            _ => name.clone(),
        },
    }
}

/// `12.5` → 12,500,000 micros; at most six decimals.
fn parse_amount(text: &str) -> Result<i64, ConsoleError> {
    let invalid = || {
        ConsoleError::InvalidInput(format!(
            "monthly budget: {text:?} is not an amount such as 250.00"
        ))
    };
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    if whole.is_empty() && fraction.is_empty()
        || fraction.len() > 6
        || !whole.chars().all(|c| c.is_ascii_digit())
        || !fraction.chars().all(|c| c.is_ascii_digit())
    {
        return Err(invalid());
    }
    let whole: i64 = if whole.is_empty() {
        0
    } else {
        whole.parse().map_err(|_| invalid())?
    };
    let fraction_micros: i64 = format!("{fraction:0<6}").parse().map_err(|_| invalid())?;
    whole
        .checked_mul(1_000_000)
        .and_then(|micros| micros.checked_add(fraction_micros))
        .ok_or_else(invalid)
}

fn parse_number<T: std::str::FromStr>(text: &str, label: &str) -> Result<Option<T>, ConsoleError> {
    if text.is_empty() {
        return Ok(None);
    }
    text.replace([',', '_', ' '], "")
        .parse()
        .map(Some)
        .map_err(|_| ConsoleError::InvalidInput(format!("{label}: {text:?} is not a whole number")))
}

fn limits_body(form: &SpendLimitsForm) -> Result<SpendLimitsBody, ConsoleError> {
    let monthly_budget = if form.budget_amount.is_empty() {
        None
    } else {
        let mut thresholds = Vec::new();
        for part in form
            .alert_thresholds
            .split(',')
            .map(|part| part.trim().trim_end_matches('%').trim())
        {
            if part.is_empty() {
                continue;
            }
            thresholds.push(part.parse::<u16>().map_err(|_| {
                ConsoleError::InvalidInput(format!(
                    "alert thresholds: {part:?} is not a percentage"
                ))
            })?);
        }
        Some(MonthlyBudgetBody {
            amount_micros: parse_amount(&form.budget_amount)?,
            currency: if form.currency.is_empty() {
                DEFAULT_CURRENCY.to_string()
            } else {
                form.currency.clone()
            },
            alert_thresholds_percent: Some(thresholds),
            hard_cap: form.hard_cap,
        })
    };
    let mut monthly_quotas = BTreeMap::new();
    for (unit, text, label) in [
        (
            UsageUnit::MemoriesWritten,
            &form.quota_memories_written,
            "memories written per month",
        ),
        (
            UsageUnit::Searches,
            &form.quota_searches,
            "searches per month",
        ),
        (
            UsageUnit::TokensEmbedded,
            &form.quota_tokens_embedded,
            "tokens embedded per month",
        ),
        (
            UsageUnit::FileBytes,
            &form.quota_file_bytes,
            "file bytes per month",
        ),
    ] {
        if let Some(quota) = parse_number::<u64>(text, label)? {
            monthly_quotas.insert(unit.as_str().to_string(), quota);
        }
    }
    Ok(SpendLimitsBody {
        monthly_budget,
        requests_per_minute: parse_number(&form.requests_per_minute, "requests per minute")?,
        monthly_quotas,
        recall: RecallBudgetBody {
            max_results: parse_number(&form.recall_max_results, "most memories per search")?,
            max_tokens: parse_number(&form.recall_max_tokens, "most tokens per search")?,
        },
        memory_limits: memory_limits_body(form)?,
    })
}

/// The memory limits the form names: none when both limits are empty.
fn memory_limits_body(form: &SpendLimitsForm) -> Result<Option<MemoryLimitsBody>, ConsoleError> {
    let per_end_user = parse_number(&form.memory_per_end_user, "most memories per end-user")?;
    let per_agent = parse_number(&form.memory_per_agent, "most memories per agent")?;
    if per_end_user.is_none() && per_agent.is_none() {
        return Ok(None);
    }
    let policy = if form.memory_policy.is_empty() {
        MemoryLimitPolicy::Refuse
    } else {
        form.memory_policy.parse().map_err(|message| {
            ConsoleError::InvalidInput(format!("past a memory limit: {message}"))
        })?
    };
    Ok(Some(MemoryLimitsBody {
        per_end_user,
        per_agent,
        policy,
    }))
}

fn limits_form(project_id: &str, limits: &SpendLimits) -> SpendLimitsForm {
    let text = |value: Option<String>| value.unwrap_or_default();
    let budget = limits.monthly_budget.as_ref();
    let memory_limits = limits.memory_limits.as_ref();
    SpendLimitsForm {
        project_id: project_id.to_string(),
        budget_amount: text(
            budget.map(|budget| format!("{:.2}", budget.amount_micros as f64 / 1_000_000.0)),
        ),
        currency: text(budget.map(|budget| budget.currency.clone())),
        alert_thresholds: text(budget.map(|budget| {
            budget
                .alert_thresholds_percent
                .iter()
                .map(|percent| percent.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        })),
        hard_cap: budget.is_some_and(|budget| budget.hard_cap),
        requests_per_minute: text(limits.requests_per_minute.map(|value| value.to_string())),
        quota_memories_written: text(
            limits
                .monthly_quotas
                .get(&UsageUnit::MemoriesWritten)
                .map(|value| value.to_string()),
        ),
        quota_searches: text(
            limits
                .monthly_quotas
                .get(&UsageUnit::Searches)
                .map(|value| value.to_string()),
        ),
        quota_tokens_embedded: text(
            limits
                .monthly_quotas
                .get(&UsageUnit::TokensEmbedded)
                .map(|value| value.to_string()),
        ),
        quota_file_bytes: text(
            limits
                .monthly_quotas
                .get(&UsageUnit::FileBytes)
                .map(|value| value.to_string()),
        ),
        recall_max_results: text(limits.recall.max_results.map(|value| value.to_string())),
        recall_max_tokens: text(limits.recall.max_tokens.map(|value| value.to_string())),
        memory_per_end_user: text(
            memory_limits.and_then(|limits| limits.per_end_user.map(|value| value.to_string())),
        ),
        memory_per_agent: text(
            memory_limits.and_then(|limits| limits.per_agent.map(|value| value.to_string())),
        ),
        memory_policy: memory_limits
            .map(|limits| limits.policy.as_str())
            .unwrap_or("refuse")
            .to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::parse_amount;

    #[test]
    fn amounts_are_read_exactly_as_micros() {
        assert_eq!(parse_amount("250").unwrap(), 250_000_000);
        assert_eq!(parse_amount("0.015").unwrap(), 15_000);
        assert_eq!(parse_amount("12.345678").unwrap(), 12_345_678);
        assert!(parse_amount("1.2345678").is_err());
        assert!(parse_amount("-3").is_err());
        assert!(parse_amount("abc").is_err());
        assert!(parse_amount(".").is_err());
    }
}
