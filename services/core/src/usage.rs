//! Billable units and spend limits: what a request spends, named the way invoices and the
//! usage API name it, and the per-project budget, quotas and recall budget that cap it.

use crate::ids::OrganizationId;
use chrono::{DateTime, Datelike, NaiveDate, TimeZone, Utc};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UsageUnit {
    /// Memories stored by a successful add (an idempotent replay stores none).
    MemoriesWritten,
    /// Successful searches.
    Searches,
    /// Tokens run through the embedding model: stored contents, edited contents and search
    /// queries (a query served from the embedding cache embeds nothing).
    TokensEmbedded,
    /// Live memories held, sampled once a day: one memory kept for a day is one memory-day.
    MemoryDays,
    /// Bytes of uploaded files that were ingested (billed when the ingest succeeds).
    FileBytes,
    /// Prompt tokens sent to the configured LLM (extraction, reconciliation), as the
    /// provider counted them; per model in `GET /v1/usage`'s `llm_by_model`.
    LlmTokensIn,
    /// Completion tokens the LLM answered with, as the provider counted them.
    LlmTokensOut,
    /// Memories deleted by the project's memory limits to make room for newer ones (not
    /// billed by the default price book; counted so the Usage page shows what the limits do).
    MemoriesEvicted,
}

impl UsageUnit {
    pub const ALL: [UsageUnit; 8] = [
        UsageUnit::MemoriesWritten,
        UsageUnit::Searches,
        UsageUnit::TokensEmbedded,
        UsageUnit::MemoryDays,
        UsageUnit::FileBytes,
        UsageUnit::LlmTokensIn,
        UsageUnit::LlmTokensOut,
        UsageUnit::MemoriesEvicted,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            UsageUnit::MemoriesWritten => "memories_written",
            UsageUnit::Searches => "searches",
            UsageUnit::TokensEmbedded => "tokens_embedded",
            UsageUnit::MemoryDays => "memory_days",
            UsageUnit::FileBytes => "file_bytes",
            UsageUnit::LlmTokensIn => "llm_tokens_in",
            UsageUnit::LlmTokensOut => "llm_tokens_out",
            UsageUnit::MemoriesEvicted => "memories_evicted",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|unit| unit.as_str() == text)
    }
}

/// A calendar month in UTC: the period budgets and quotas are counted over.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BillingMonth {
    first_day: NaiveDate,
}

impl BillingMonth {
    pub fn containing(at: DateTime<Utc>) -> Self {
        let date = at.date_naive();
        Self {
            first_day: NaiveDate::from_ymd_opt(date.year(), date.month(), 1).unwrap_or(date),
        }
    }

    pub fn starts_at(self) -> DateTime<Utc> {
        Utc.from_utc_datetime(&self.first_day.and_time(chrono::NaiveTime::MIN))
    }

    /// The first instant of the next month: when the month's budget and quotas reset.
    pub fn resets_at(self) -> DateTime<Utc> {
        self.next().starts_at()
    }

    pub fn next(self) -> Self {
        Self {
            first_day: self
                .first_day
                .checked_add_months(chrono::Months::new(1))
                .unwrap_or(self.first_day),
        }
    }

    pub fn previous(self) -> Self {
        Self {
            first_day: self
                .first_day
                .checked_sub_months(chrono::Months::new(1))
                .unwrap_or(self.first_day),
        }
    }

    pub fn days(self) -> i64 {
        (self.next().first_day - self.first_day).num_days()
    }

    /// `2026-11`.
    pub fn label(self) -> String {
        self.first_day.format("%Y-%m").to_string()
    }
}

/// A project's monthly spending limit, in millionths of its currency.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MonthlyBudget {
    pub amount_micros: i64,
    /// ISO 4217 code; the budget counts only prices in this currency.
    pub currency: String,
    /// Percentages of the budget at which an alert is recorded (once per month each).
    pub alert_thresholds_percent: Vec<u8>,
    /// When set, requests are refused (402) once the month's cost has reached the budget.
    pub hard_cap: bool,
}

/// The most a single search may return, in memories and in tokens of content.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecallBudget {
    pub max_results: Option<u32>,
    pub max_tokens: Option<u32>,
}

/// Everything that caps a project's spending; all parts optional.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpendLimits {
    pub monthly_budget: Option<MonthlyBudget>,
    /// Most requests (writes and searches) per minute for the whole project.
    pub requests_per_minute: Option<u32>,
    /// Most units per calendar month, per unit.
    pub monthly_quotas: BTreeMap<UsageUnit, u64>,
    pub recall: RecallBudget,
    /// Most live memories per end-user and per agent, and what a write past them does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_limits: Option<crate::memory_limits::MemoryLimits>,
}

/// Most alert thresholds a budget may carry.
pub const MAX_ALERT_THRESHOLDS: usize = 10;
/// The thresholds a budget alerts at when it names none.
pub const DEFAULT_ALERT_THRESHOLDS: [u8; 2] = [80, 100];
/// Highest project-wide request rate a limit may set.
pub const MAX_REQUESTS_PER_MINUTE: u32 = 1_000_000;
/// Highest recall budget in tokens.
pub const MAX_RECALL_TOKENS: u32 = 100_000;

impl SpendLimits {
    /// Whether any check has to look at the month's usage before serving a request.
    pub fn meters_the_month(&self) -> bool {
        self.monthly_budget.is_some() || !self.monthly_quotas.is_empty()
    }

    /// What is wrong with these limits, one error per field as the API names it. The
    /// spend-limits use case holds every door to it.
    pub fn limit_errors(&self) -> Vec<crate::FieldError> {
        use crate::FieldError;
        use crate::limits::MAX_TOP_K;
        let mut errors = Vec::new();
        if let Some(budget) = &self.monthly_budget {
            if budget.amount_micros < 0 {
                errors.push(FieldError::new(
                    "monthly_budget.amount_micros",
                    "must not be negative",
                ));
            }
            let currency = &budget.currency;
            if currency.len() != 3 || !currency.chars().all(|c| c.is_ascii_uppercase()) {
                errors.push(FieldError::new(
                    "monthly_budget.currency",
                    "must be a three-letter ISO 4217 code such as USD",
                ));
            }
            if budget.alert_thresholds_percent.len() > MAX_ALERT_THRESHOLDS {
                errors.push(FieldError::new(
                    "monthly_budget.alert_thresholds_percent",
                    format!("at most {MAX_ALERT_THRESHOLDS} thresholds"),
                ));
            }
            for (position, percent) in budget.alert_thresholds_percent.iter().enumerate() {
                if *percent == 0 {
                    errors.push(FieldError::new(
                        format!("monthly_budget.alert_thresholds_percent[{position}]"),
                        "must be between 1 and 255",
                    ));
                }
            }
        }
        if let Some(per_minute) = self.requests_per_minute
            && !(1..=MAX_REQUESTS_PER_MINUTE).contains(&per_minute)
        {
            errors.push(FieldError::new(
                "requests_per_minute",
                format!("must be between 1 and {MAX_REQUESTS_PER_MINUTE}"),
            ));
        }
        if self.monthly_quotas.contains_key(&UsageUnit::MemoryDays) {
            errors.push(FieldError::new(
                "monthly_quotas.memory_days",
                "memory_days is sampled once a day and cannot be capped per request",
            ));
        }
        if self
            .monthly_quotas
            .contains_key(&UsageUnit::MemoriesEvicted)
        {
            errors.push(FieldError::new(
                "monthly_quotas.memories_evicted",
                "evictions follow from memory_limits; cap memories_written instead",
            ));
        }
        if let Some(max_results) = self.recall.max_results
            && !(1..=MAX_TOP_K as u32).contains(&max_results)
        {
            errors.push(FieldError::new(
                "recall.max_results",
                format!("must be between 1 and {MAX_TOP_K}"),
            ));
        }
        if let Some(max_tokens) = self.recall.max_tokens
            && !(1..=MAX_RECALL_TOKENS).contains(&max_tokens)
        {
            errors.push(FieldError::new(
                "recall.max_tokens",
                format!("must be between 1 and {MAX_RECALL_TOKENS}"),
            ));
        }
        if let Some(memory_limits) = &self.memory_limits {
            errors.extend(memory_limits.limit_errors());
        }
        errors
    }
}

/// Which limit a request ran into, with what a client needs to back off correctly.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LimitReached {
    /// `monthly_budget`, `monthly_quota.<unit>` or `requests_per_minute`.
    pub limit: String,
    /// The limit's value (micros of the currency for the budget).
    pub maximum: i64,
    /// What has been used in the period so far.
    pub used: i64,
    /// `month` or `minute`.
    pub period: &'static str,
    pub resets_at: DateTime<Utc>,
}

/// What one request is about to spend.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlannedSpend {
    pub unit: UsageUnit,
    pub quantity: u64,
}

/// The monthly checks, decided on the month's usage so far (per unit) and cost (micros in
/// the budget's currency). A quota refuses a request that would take the unit past it; the
/// budget refuses once the cost has reached it (so the request that reaches it is served
/// and the overshoot is at most one request's cost).
pub fn check_monthly_limits(
    limits: &SpendLimits,
    month: BillingMonth,
    used: &BTreeMap<UsageUnit, i64>,
    spent_micros: i64,
    planned: &[PlannedSpend],
) -> Result<(), LimitReached> {
    for spend in planned {
        let Some(&quota) = limits.monthly_quotas.get(&spend.unit) else {
            continue;
        };
        let used_so_far = used.get(&spend.unit).copied().unwrap_or(0);
        let after = used_so_far.saturating_add(i64::try_from(spend.quantity).unwrap_or(i64::MAX));
        if after > i64::try_from(quota).unwrap_or(i64::MAX) {
            return Err(LimitReached {
                limit: format!("monthly_quota.{}", spend.unit.as_str()),
                maximum: i64::try_from(quota).unwrap_or(i64::MAX),
                used: used_so_far,
                period: "month",
                resets_at: month.resets_at(),
            });
        }
    }
    if let Some(budget) = &limits.monthly_budget
        && budget.hard_cap
        && spent_micros >= budget.amount_micros
    {
        return Err(LimitReached {
            limit: "monthly_budget".to_string(),
            maximum: budget.amount_micros,
            used: spent_micros,
            period: "month",
            resets_at: month.resets_at(),
        });
    }
    Ok(())
}

/// The alert thresholds (percent) the month's cost has reached.
pub fn thresholds_reached(budget: &MonthlyBudget, spent_micros: i64) -> Vec<u8> {
    if budget.amount_micros <= 0 {
        return budget.alert_thresholds_percent.clone();
    }
    budget
        .alert_thresholds_percent
        .iter()
        .copied()
        .filter(|percent| {
            i128::from(spent_micros) * 100
                >= i128::from(budget.amount_micros) * i128::from(*percent)
        })
        .collect()
}

/// A straight-line forecast of the month's cost from what was spent by `now`.
pub fn forecast_month_cost(month: BillingMonth, spent_micros: i64, now: DateTime<Utc>) -> i64 {
    let elapsed = (now - month.starts_at()).num_seconds().max(1);
    let whole = (month.resets_at() - month.starts_at()).num_seconds().max(1);
    let projected = i128::from(spent_micros) * i128::from(whole) / i128::from(elapsed);
    i64::try_from(projected).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn month() -> BillingMonth {
        BillingMonth::containing(Utc.with_ymd_and_hms(2026, 2, 14, 9, 0, 0).unwrap())
    }

    #[test]
    fn a_month_knows_its_bounds_and_length() {
        let february = month();
        assert_eq!(february.label(), "2026-02");
        assert_eq!(february.days(), 28);
        assert_eq!(
            february.resets_at(),
            Utc.with_ymd_and_hms(2026, 3, 1, 0, 0, 0).unwrap()
        );
        let december =
            BillingMonth::containing(Utc.with_ymd_and_hms(2026, 12, 31, 23, 59, 59).unwrap());
        assert_eq!(
            december.resets_at(),
            Utc.with_ymd_and_hms(2027, 1, 1, 0, 0, 0).unwrap()
        );
    }

    #[test]
    fn a_quota_refuses_the_request_that_would_pass_it() {
        let limits = SpendLimits {
            monthly_quotas: BTreeMap::from([(UsageUnit::MemoriesWritten, 5)]),
            ..SpendLimits::default()
        };
        let used = BTreeMap::from([(UsageUnit::MemoriesWritten, 3)]);
        let two = [PlannedSpend {
            unit: UsageUnit::MemoriesWritten,
            quantity: 2,
        }];
        let three = [PlannedSpend {
            unit: UsageUnit::MemoriesWritten,
            quantity: 3,
        }];
        assert!(check_monthly_limits(&limits, month(), &used, 0, &two).is_ok());
        let refused = check_monthly_limits(&limits, month(), &used, 0, &three).unwrap_err();
        assert_eq!(refused.limit, "monthly_quota.memories_written");
        assert_eq!((refused.maximum, refused.used), (5, 3));
        assert_eq!(refused.resets_at, month().resets_at());
    }

    #[test]
    fn a_hard_capped_budget_refuses_once_reached_and_a_soft_one_never() {
        let mut budget = MonthlyBudget {
            amount_micros: 10_000,
            currency: "USD".to_string(),
            alert_thresholds_percent: vec![50, 80, 100],
            hard_cap: true,
        };
        let limits = |budget: &MonthlyBudget| SpendLimits {
            monthly_budget: Some(budget.clone()),
            ..SpendLimits::default()
        };
        let none = BTreeMap::new();
        assert!(check_monthly_limits(&limits(&budget), month(), &none, 9_999, &[]).is_ok());
        let refused =
            check_monthly_limits(&limits(&budget), month(), &none, 10_000, &[]).unwrap_err();
        assert_eq!(refused.limit, "monthly_budget");
        budget.hard_cap = false;
        assert!(check_monthly_limits(&limits(&budget), month(), &none, 50_000, &[]).is_ok());
        assert_eq!(thresholds_reached(&budget, 7_999), vec![50]);
        assert_eq!(thresholds_reached(&budget, 8_000), vec![50, 80]);
        assert_eq!(thresholds_reached(&budget, 12_000), vec![50, 80, 100]);
    }

    #[test]
    fn prices_are_exact_trillionths_whatever_quantity_they_are_quoted_for() {
        assert_eq!(parse_unit_price("0.0004", 1), Ok(400_000_000));
        assert_eq!(parse_unit_price("2", 1), Ok(2 * 1_000_000_000_000));
        assert_eq!(parse_unit_price(".25", 1), Ok(250_000_000_000));
        assert_eq!(parse_unit_price("0.00000002", 1), Ok(20_000));
        assert_eq!(parse_unit_price("0.02", 1_000_000), Ok(20_000));
        assert_eq!(parse_unit_price("0.0375", 1_000_000), Ok(37_500));
        assert_eq!(parse_unit_price("1.5", 1_000), Ok(1_500_000_000));
        assert!(parse_unit_price("0.0000000000001", 1).is_err());
        assert!(parse_unit_price("0.0000001", 1_000_000).is_err());
        assert!(parse_unit_price("-1", 1).is_err());
        assert!(parse_unit_price("1", 7).is_err());
        assert!(parse_unit_price("abc", 1).is_err());
        assert!(parse_unit_price("", 1).is_err());
        assert!(parse_unit_price("9000001", 1).is_err());
    }

    #[test]
    fn amounts_are_exact_and_round_to_micros_only_when_asked() {
        let price = Picos(20_000);
        let cost = Picos::times(price, 3);
        assert_eq!(cost.decimal(), "0.00000006");
        assert_eq!(cost.micros(), 0);
        assert_eq!(Picos::times(price, 50).micros(), 1);
        assert_eq!(Picos::from_micros(12_500_000).decimal(), "12.50");
        assert_eq!(Picos::from_micros(3_000_000).decimal(), "3.00");
    }

    #[test]
    fn the_forecast_extends_the_spending_rate_to_the_month_end() {
        let half_way = Utc.with_ymd_and_hms(2026, 2, 15, 0, 0, 0).unwrap();
        assert_eq!(forecast_month_cost(month(), 1_000, half_way), 2_000);
    }
}

/// How usage is grouped in time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UsageGranularity {
    Hour,
    Day,
}

/// Who a unit of usage is attributed to. The credential and channel are known for every
/// call; the end-user and agent when the call names them (an end-user token always names
/// its end-user).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct UsageAttribution {
    /// `key:<id>` (a key, or the key that minted an end-user token), `console:<account>`,
    /// `operator`, or what a background job bills (`consolidation`, `storage`).
    pub credential: String,
    /// The door: `http`, `console`, `cli`, `mem0`, `mcp`, `job` (see `Channel`).
    pub channel: String,
    /// The raw end-user id (personal data: erasure replaces it by the subject digest).
    pub end_user: Option<String>,
    pub agent_id: Option<String>,
}

impl UsageAttribution {
    /// Engram's own work that no caller asked for (`storage`, `consolidation`).
    pub fn engine(credential: &str) -> Self {
        Self {
            credential: credential.to_string(),
            channel: "job".to_string(),
            end_user: None,
            agent_id: None,
        }
    }

    /// This attribution for a call about `user_id` and `agent_id`: what the call names
    /// fills what is unknown (an end-user token's end-user is already known, and kept).
    pub fn for_subject(mut self, user_id: Option<&str>, agent_id: Option<&str>) -> Self {
        if self.end_user.is_none() {
            self.end_user = user_id.map(str::to_string);
        }
        if self.agent_id.is_none() {
            self.agent_id = agent_id.map(str::to_string);
        }
        self
    }

    /// The credential and channel as one word, `key:<id>@http`: what background work that
    /// continues a request (a derivation, a file's ingest) keeps of who pays; the end-user
    /// and agent come back from the records the work is about.
    pub fn billing_label(&self) -> String {
        format!("{}@{}", self.credential, self.channel)
    }

    /// The attribution a [`UsageAttribution::billing_label`] names; a label stored before
    /// channels existed (no `@`) reads as the credential with an unknown channel (empty).
    pub fn from_billing_label(label: &str) -> Self {
        let (credential, channel) = match label.rsplit_once('@') {
            Some((credential, channel)) if crate::audit::Channel::named(channel).is_some() => {
                (credential, channel)
            }
            _ => (label, ""),
        };
        Self {
            credential: credential.to_string(),
            channel: channel.to_string(),
            end_user: None,
            agent_id: None,
        }
    }
}

/// What a usage or cost report breaks its daily rows down by (`by=`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UsageBreakdown {
    /// The billed credential: a key (an end-user token under the key that minted it).
    Key,
    EndUser,
    Agent,
    Channel,
}

impl UsageBreakdown {
    pub const ALL: [UsageBreakdown; 4] = [
        UsageBreakdown::Key,
        UsageBreakdown::EndUser,
        UsageBreakdown::Agent,
        UsageBreakdown::Channel,
    ];

    /// The `by=` value: `key`, `end_user`, `agent`, `channel`.
    pub const fn as_str(self) -> &'static str {
        match self {
            UsageBreakdown::Key => "key",
            UsageBreakdown::EndUser => "end_user",
            UsageBreakdown::Agent => "agent",
            UsageBreakdown::Channel => "channel",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|by| by.as_str() == text)
    }
}

/// Who one breakdown row is about: the value of the dimension it breaks down by.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum BreakdownValue {
    /// Nothing recorded for the dimension (a call that named no end-user or agent; usage
    /// from before attribution was recorded).
    Unattributed,
    /// The credential, end-user id, agent id or channel.
    Named(String),
    /// An erased end-user, by subject digest: its quantities stay in the totals.
    ErasedEndUser(String),
}

/// One daily row of a broken-down usage report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UsageBreakdownRow {
    pub day: DateTime<Utc>,
    pub unit: UsageUnit,
    pub value: BreakdownValue,
    pub quantity: i64,
}

/// One daily row of a broken-down cost report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CostBreakdownRow {
    pub value: BreakdownValue,
    pub cost: CostRow,
}

/// One row of a usage report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UsageRow {
    pub period_start: DateTime<Utc>,
    pub unit: UsageUnit,
    pub credential: String,
    pub quantity: i64,
}

/// One entry of the price book.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PriceEntry {
    /// `None`: the deployment's default; `Some`: this organization's override.
    pub organization_id: Option<OrganizationId>,
    pub unit: UsageUnit,
    /// ISO 4217, e.g. `USD`.
    pub currency: String,
    /// Price of one unit in trillionths of the currency (exact to a millionth of a
    /// millionth: token prices quoted per million tokens fit).
    pub unit_price_picos: i64,
    pub effective_from: DateTime<Utc>,
    /// Set on the default price book Engram applies where the operator set no price: a
    /// placeholder to replace with `engram admin set-price`.
    pub is_default: bool,
}

impl PriceEntry {
    pub fn unit_price(&self) -> Picos {
        Picos(i128::from(self.unit_price_picos))
    }
}

/// Trillionths of a currency unit in one unit.
pub const PICOS_PER_UNIT: i128 = 1_000_000_000_000;
/// Trillionths in one millionth: budgets and the `*_micros` fields count millionths.
pub const PICOS_PER_MICRO: i128 = 1_000_000;

/// An amount of money in trillionths of its currency: exact for any quantity × unit price,
/// so a statement's totals equal the sum of its lines to the last digit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Picos(pub i128);

/// Written as its exact decimal (`"0.00000006"`), so no JSON reader rounds it.
impl Serialize for Picos {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.decimal())
    }
}

impl<'de> Deserialize<'de> for Picos {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Picos::parse(&text).ok_or_else(|| serde::de::Error::custom("not an exact amount"))
    }
}

impl Picos {
    pub const ZERO: Picos = Picos(0);

    pub fn from_micros(micros: i64) -> Self {
        Picos(i128::from(micros) * PICOS_PER_MICRO)
    }

    /// `unit_price` × `quantity`, exact (saturating far past any real bill).
    pub fn times(unit_price: Picos, quantity: i64) -> Self {
        Picos(unit_price.0.saturating_mul(i128::from(quantity)))
    }

    /// Rounded to the nearest millionth (halves away from zero): what the `*_micros` fields
    /// and budgets read.
    pub fn micros(self) -> i64 {
        let half = PICOS_PER_MICRO / 2;
        let rounded = if self.0 >= 0 {
            self.0.saturating_add(half) / PICOS_PER_MICRO
        } else {
            self.0.saturating_sub(half) / PICOS_PER_MICRO
        };
        i64::try_from(rounded).unwrap_or(if rounded > 0 { i64::MAX } else { i64::MIN })
    }

    /// What [`Picos::decimal`] wrote (or any decimal of at most twelve places).
    pub fn parse(text: &str) -> Option<Picos> {
        let (negative, text) = match text.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
        if whole.is_empty()
            || fraction.len() > 12
            || !whole.chars().all(|c| c.is_ascii_digit())
            || !fraction.chars().all(|c| c.is_ascii_digit())
        {
            return None;
        }
        let whole: i128 = whole.parse().ok()?;
        let fraction: i128 = format!("{fraction:0<12}").parse().ok()?;
        let magnitude = whole.checked_mul(PICOS_PER_UNIT)?.checked_add(fraction)?;
        Some(Picos(if negative { -magnitude } else { magnitude }))
    }

    /// The exact amount as a decimal, at least two decimals and no trailing zeros past
    /// them: `0.00000006`, `12.50`, `3.00`.
    pub fn decimal(self) -> String {
        let sign = if self.0 < 0 { "-" } else { "" };
        let magnitude = self.0.unsigned_abs();
        let whole = magnitude / PICOS_PER_UNIT as u128;
        let fraction = format!("{:012}", magnitude % PICOS_PER_UNIT as u128);
        let mut fraction = fraction.trim_end_matches('0').to_string();
        while fraction.len() < 2 {
            fraction.push('0');
        }
        format!("{sign}{whole}.{fraction}")
    }
}

impl std::ops::Add for Picos {
    type Output = Picos;
    fn add(self, other: Picos) -> Picos {
        Picos(self.0.saturating_add(other.0))
    }
}

impl std::ops::AddAssign for Picos {
    fn add_assign(&mut self, other: Picos) {
        *self = *self + other;
    }
}

impl std::iter::Sum for Picos {
    fn sum<I: Iterator<Item = Picos>>(iter: I) -> Picos {
        iter.fold(Picos::ZERO, |sum, amount| sum + amount)
    }
}

/// How many units a quoted price is for: price lists quote token prices per thousand or per
/// million.
pub const PRICE_QUANTITIES: [u64; 3] = [1, 1_000, 1_000_000];

/// The exact unit price, in trillionths, of `text` quoted for `per` units: `0.02` per
/// 1,000,000 → 20,000 picos. Refuses what is not a non-negative decimal, a price finer than
/// a trillionth of the currency per unit, and one past 9,000,000 per unit.
pub fn parse_unit_price(text: &str, per: u64) -> Result<i64, String> {
    if !PRICE_QUANTITIES.contains(&per) {
        return Err("is quoted per 1, 1000 or 1000000 units".to_string());
    }
    let text = text.trim();
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    if whole.is_empty() && fraction.is_empty() {
        return Err("must be a number such as 0.0004".to_string());
    }
    if !(whole.chars().all(|c| c.is_ascii_digit()) && fraction.chars().all(|c| c.is_ascii_digit()))
    {
        return Err("must be a non-negative decimal number such as 0.0004".to_string());
    }
    let digits = format!("{whole}{fraction}");
    let digits = digits.trim_start_matches('0');
    if digits.len() > 24 || fraction.len() > 18 {
        return Err("has too many digits".to_string());
    }
    let mantissa: i128 = if digits.is_empty() {
        0
    } else {
        digits.parse().map_err(|_| "is too large".to_string())?
    };
    let numerator = mantissa * PICOS_PER_UNIT;
    let denominator = 10_i128.pow(fraction.len() as u32) * i128::from(per);
    if numerator % denominator != 0 {
        return Err(format!(
            "is finer than a trillionth of the currency per unit (at most {} decimals for a price per {per})",
            12 + per.ilog10()
        ));
    }
    i64::try_from(numerator / denominator)
        .ok()
        .filter(|picos| i128::from(*picos) <= 9_000_000 * PICOS_PER_UNIT)
        .ok_or_else(|| "is too large: at most 9000000 per unit".to_string())
}

/// The currency of the default price book.
pub const DEFAULT_PRICE_CURRENCY: &str = "USD";

/// The default price book, in millionths of a US dollar per unit: applied where the
/// deployment has no price for a unit, so costs show real money from the first call, and
/// marked as a default to replace. Rough figures for running Engram on one's own hardware
/// with a hosted LLM; the operator's `engram admin set-price` replaces them.
pub const DEFAULT_PRICES_MICROS: [(UsageUnit, i64); 8] = [
    // 0.001 USD per memory stored.
    (UsageUnit::MemoriesWritten, 1_000),
    // 0.0005 USD per search.
    (UsageUnit::Searches, 500),
    // 1 USD per million tokens embedded.
    (UsageUnit::TokensEmbedded, 1),
    // 0.30 USD per thousand memories kept for a month.
    (UsageUnit::MemoryDays, 10),
    // Files are billed through the memories and LLM tokens their ingest produces.
    (UsageUnit::FileBytes, 0),
    // 1 USD per million prompt tokens, 4 USD per million completion tokens.
    (UsageUnit::LlmTokensIn, 1),
    (UsageUnit::LlmTokensOut, 4),
    // Evictions are counted to show what the memory limits do, not billed.
    (UsageUnit::MemoriesEvicted, 0),
];

/// The cost of one unit on one day.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CostRow {
    pub day: DateTime<Utc>,
    pub unit: UsageUnit,
    pub quantity: i64,
    /// The price in effect that day (the organization's override, else the default);
    /// `None` when the book has no price for the unit yet.
    pub price: Option<PriceEntry>,
    /// Quantity × unit price, exact.
    pub cost: Picos,
}

/// A budget alert that fired: the month's cost reached `threshold_percent` of the budget.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BudgetAlert {
    pub month: String,
    pub threshold_percent: u8,
    pub spent_micros: i64,
    pub budget_micros: i64,
    pub currency: String,
    pub reached_at: DateTime<Utc>,
}
