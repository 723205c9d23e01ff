//! `GET /v1/usage`: the project's metered units per hour or day, per unit and credential,
//! with totals; `GET /v1/costs`; `GET|PUT /v1/project/limits` (budget, quotas, recall
//! budget). JSON or CSV. Needs the `admin` scope.

use crate::auth::{Authorized, ProjectAdmin};
use crate::extract::{JsonBody, QueryParams};
use crate::problem::{ApiError, ProblemDocument};
use crate::state::AppState;
use crate::views::SpendLimitsBody;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use chrono::{DateTime, NaiveDate, Utc};
use engram_core::FieldError;
use engram_core::usage::UsageGranularity;
use engram_core::usage::{
    BreakdownValue, CostRow, Picos, UsageBreakdown, UsageUnit, forecast_month_cost,
};
use engram_engine::MemoryEngine;
use engram_engine::{SpendLimitsReport, UsageReportRequest};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;
use utoipa::{IntoParams, ToSchema};

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/usage", get(project_usage))
        .route("/v1/costs", get(project_costs))
        .route(
            "/v1/project/limits",
            get(get_spend_limits).put(put_spend_limits),
        )
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct UsageQuery {
    /// First day, `YYYY-MM-DD` (UTC), inclusive; default: 30 days ago.
    #[param(format = Date)]
    pub from: Option<String>,
    /// Last day, `YYYY-MM-DD` (UTC), inclusive; default: today.
    #[param(format = Date)]
    pub to: Option<String>,
    /// `day` (default) or `hour`.
    #[param(pattern = "^(hour|day)$")]
    pub granularity: Option<String>,
    /// Daily rows per `key` (`key_id`), `end_user` (`user_id`), `agent` (`agent_id`) or
    /// `channel` (`channel`) instead of per credential; needs granularity `day`.
    #[param(pattern = "^(key|end_user|agent|channel)$")]
    pub by: Option<String>,
    /// `json` (default) or `csv`.
    #[param(pattern = "^(json|csv)$")]
    pub format: Option<String>,
}

/// What a row is about, for a report broken down by `by`: each field appears only in the
/// rows of its breakdown, `null` where nothing was recorded for it.
#[derive(Debug, Default, Serialize, Deserialize, ToSchema)]
pub struct BreakdownFields {
    /// `by=key`: the key's id (an end-user token's usage is under the key that minted it);
    /// `null` for a credential that is not a key (see `credential`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    pub key_id: Option<Option<String>>,
    /// `by=end_user`: the end-user the call named or the token was for; `null` for calls
    /// naming none and for erased end-users (see `erased_subject`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    pub user_id: Option<Option<String>>,
    /// `by=end_user`: an erased end-user's subject digest (their usage stays counted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub erased_subject: Option<String>,
    /// `by=agent`: the agent the call named; `null` for calls naming none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    pub agent_id: Option<Option<String>>,
    /// `by=channel`: `http`, `console`, `cli`, `mem0`, `mcp` or `job`; `null` for usage
    /// recorded before channels were.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    pub channel: Option<Option<String>>,
}

impl BreakdownFields {
    fn of(by: UsageBreakdown, value: &BreakdownValue) -> (Self, Option<String>) {
        let named = match value {
            BreakdownValue::Named(text) => Some(text.clone()),
            BreakdownValue::Unattributed | BreakdownValue::ErasedEndUser(_) => None,
        };
        let mut fields = Self::default();
        let mut credential = None;
        match by {
            UsageBreakdown::Key => {
                fields.key_id = Some(
                    named
                        .as_deref()
                        .and_then(|credential| credential.strip_prefix("key:"))
                        .map(str::to_string),
                );
                credential = named;
            }
            UsageBreakdown::EndUser => {
                fields.user_id = Some(named);
                if let BreakdownValue::ErasedEndUser(digest) = value {
                    fields.erased_subject = Some(digest.clone());
                }
            }
            UsageBreakdown::Agent => fields.agent_id = Some(named),
            UsageBreakdown::Channel => fields.channel = Some(named),
        }
        (fields, credential)
    }

    /// The row's cells under [`breakdown_columns`] (empty where the JSON has `null`).
    fn csv_cells(&self, by: UsageBreakdown, credential: Option<&str>) -> Vec<String> {
        let text = |field: &Option<Option<String>>| field.clone().flatten().unwrap_or_default();
        match by {
            UsageBreakdown::Key => vec![
                credential.unwrap_or_default().to_string(),
                text(&self.key_id),
            ],
            UsageBreakdown::EndUser => vec![
                text(&self.user_id),
                self.erased_subject.clone().unwrap_or_default(),
            ],
            UsageBreakdown::Agent => vec![text(&self.agent_id)],
            UsageBreakdown::Channel => vec![text(&self.channel)],
        }
    }
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct UsageRowView {
    pub period_start: DateTime<Utc>,
    /// `memories_written | searches | ...`
    pub unit: String,
    /// Who is billed: `key:<id>` (for an end-user token, the key that minted it),
    /// `console:<account id>`, or Engram's own work (`storage`, `consolidation`,
    /// `operator`). Usage recorded before tokens were billed to their key shows `end_user`.
    /// Absent in `by=end_user|agent|channel` rows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credential: Option<String>,
    #[serde(flatten)]
    pub breakdown: BreakdownFields,
    pub quantity: i64,
}

/// LLM calls and tokens of one model over the range.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct LlmModelUsageView {
    pub model: String,
    pub calls: i64,
    /// Calls that failed (after retries); they carry no tokens.
    pub failed_calls: i64,
    pub tokens_in: i64,
    pub tokens_out: i64,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct UsageView {
    pub granularity: String,
    /// The breakdown asked for, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    #[schema(value_type = Object)]
    pub totals: BTreeMap<String, i64>,
    pub usage: Vec<UsageRowView>,
    /// `llm_tokens_in` / `llm_tokens_out` per model (one row per model called).
    #[serde(default)]
    pub llm_by_model: Vec<LlmModelUsageView>,
}

/// A report day as the published pattern has it (`YYYY-MM-DD`, nothing around it); absent:
/// `default`. An empty value is a mistake, not a request for the default.
fn day(text: Option<&str>, field: &str, default: NaiveDate) -> Result<NaiveDate, FieldError> {
    match text {
        Some(text) => {
            // Exactly `DDDD-DD-DD`, as published (chrono alone would also take `+2024-01-1`).
            let shaped = text.len() == 10
                && text
                    .bytes()
                    .enumerate()
                    .all(|(position, byte)| match position {
                        4 | 7 => byte == b'-',
                        _ => byte.is_ascii_digit(),
                    });
            if !shaped {
                return Err(FieldError::new(field, "expected a date as YYYY-MM-DD"));
            }
            let day = NaiveDate::parse_from_str(text, "%Y-%m-%d")
                .map_err(|_| FieldError::new(field, "expected a date as YYYY-MM-DD"))?;
            engram_core::validation::check_report_day(field, day)?;
            Ok(day)
        }
        None => Ok(default),
    }
}

/// `by=`: absent, or one of the documented breakdowns.
fn breakdown(text: Option<&str>) -> Result<Option<UsageBreakdown>, ApiError> {
    let Some(text) = text else {
        return Ok(None);
    };
    match UsageBreakdown::parse(text) {
        Some(by) => Ok(Some(by)),
        None => Err(ApiError::invalid(vec![FieldError::new(
            "by",
            "must be key, end_user, agent or channel",
        )])),
    }
}

/// The project's usage. Units are counted after a request succeeded (failed calls and
/// idempotent replays are not billed) and written within about a second.
#[utoipa::path(get, path = "/v1/usage", tag = "usage", params(UsageQuery),
    responses((status = 200, description = "`format=json` (default) or `format=csv`",
            content((UsageView = "application/json"), (String = "text/csv"))),
        (status = 422, body = ProblemDocument, content_type = "application/problem+json")),
    security(("api_key" = [])))]
pub async fn project_usage(
    principal: Authorized<ProjectAdmin>,
    State(engine): State<Arc<MemoryEngine>>,
    QueryParams(query): QueryParams<UsageQuery>,
) -> Result<Response, ApiError> {
    let granularity = match query.granularity.as_deref().unwrap_or("day") {
        "day" => UsageGranularity::Day,
        "hour" => UsageGranularity::Hour,
        _ => {
            return Err(ApiError::invalid(vec![FieldError::new(
                "granularity",
                "must be day or hour",
            )]));
        }
    };
    let by = breakdown(query.by.as_deref())?;
    let (from, to, csv) = parse_range(
        query.from.as_deref(),
        query.to.as_deref(),
        query.format.as_deref(),
    )?;
    let report = engine
        .usage_report_for(
            principal.principal(),
            UsageReportRequest {
                from,
                to,
                granularity,
                by,
            },
        )
        .await?;
    let mut totals: BTreeMap<String, i64> = UsageUnit::ALL
        .iter()
        .map(|unit| (unit.as_str().to_string(), 0))
        .collect();
    let llm_by_model: Vec<LlmModelUsageView> = report
        .llm_by_model
        .into_iter()
        .map(|usage| LlmModelUsageView {
            model: usage.model,
            calls: usage.calls,
            failed_calls: usage.failed_calls,
            tokens_in: usage.tokens_in,
            tokens_out: usage.tokens_out,
        })
        .collect();
    let usage: Vec<UsageRowView> = match (by, report.breakdown) {
        (Some(by), Some(rows)) => rows
            .into_iter()
            .map(|row| {
                let (breakdown, credential) = BreakdownFields::of(by, &row.value);
                UsageRowView {
                    period_start: row.day,
                    unit: row.unit.as_str().to_string(),
                    credential,
                    breakdown,
                    quantity: row.quantity,
                }
            })
            .collect(),
        _ => report
            .rows
            .into_iter()
            .map(|row| UsageRowView {
                period_start: row.period_start,
                unit: row.unit.as_str().to_string(),
                credential: Some(row.credential),
                breakdown: BreakdownFields::default(),
                quantity: row.quantity,
            })
            .collect(),
    };
    for row in &usage {
        *totals.entry(row.unit.clone()).or_default() += row.quantity;
    }
    if csv {
        let mut columns = vec!["period_start", "unit"];
        columns.extend(by.map_or(&["credential"][..], breakdown_columns));
        columns.push("quantity");
        let text = crate::csv_export::csv_text(
            &columns,
            usage.iter().map(|row| {
                let mut cells = vec![row.period_start.to_rfc3339(), row.unit.clone()];
                match by {
                    None => cells.push(row.credential.clone().unwrap_or_default()),
                    Some(by) => {
                        cells.extend(row.breakdown.csv_cells(by, row.credential.as_deref()))
                    }
                }
                cells.push(row.quantity.to_string());
                cells
            }),
        );
        return Ok(csv_attachment("usage.csv", text));
    }
    Ok(Json(UsageView {
        granularity: match granularity {
            UsageGranularity::Day => "day",
            UsageGranularity::Hour => "hour",
        }
        .to_string(),
        by: by.map(|by| by.as_str().to_string()),
        from,
        to,
        totals,
        usage,
        llm_by_model,
    })
    .into_response())
}

/// The CSV columns a breakdown names its rows by: the JSON fields of the same names.
fn breakdown_columns(by: UsageBreakdown) -> &'static [&'static str] {
    match by {
        UsageBreakdown::Key => &["credential", "key_id"],
        UsageBreakdown::EndUser => &["user_id", "erased_subject"],
        UsageBreakdown::Agent => &["agent_id"],
        UsageBreakdown::Channel => &["channel"],
    }
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct CostsQuery {
    /// First day, `YYYY-MM-DD` (UTC), inclusive; default: 30 days ago.
    #[param(format = Date)]
    pub from: Option<String>,
    /// Last day, `YYYY-MM-DD` (UTC), inclusive; default: today.
    #[param(format = Date)]
    pub to: Option<String>,
    /// Rows per day, unit and `key` (`key_id`), `end_user` (`user_id`), `agent`
    /// (`agent_id`) or `channel` (`channel`).
    #[param(pattern = "^(key|end_user|agent|channel)$")]
    pub by: Option<String>,
    /// `json` (default) or `csv`.
    #[param(pattern = "^(json|csv)$")]
    pub format: Option<String>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct CostRowView {
    pub day: String,
    pub unit: String,
    /// `by=key`: the billed credential (see the usage report).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credential: Option<String>,
    #[serde(flatten)]
    pub breakdown: BreakdownFields,
    pub quantity: i64,
    /// `None` when the price book has no price for the unit on that day.
    pub currency: Option<String>,
    /// Price of one unit, in millionths of the currency, rounded to the nearest (exact:
    /// `unit_price`).
    pub unit_price_micros: Option<i64>,
    /// Price of one unit, exact, as a decimal (`0.00000002`).
    pub unit_price: Option<String>,
    /// True when the price is Engram's default price book (a placeholder to replace with
    /// `engram admin set-price`).
    #[serde(default)]
    pub default_price: bool,
    /// The cost rounded to the nearest millionth (exact: `cost`).
    pub cost_micros: i64,
    /// Quantity × unit price, exact, as a decimal.
    pub cost: String,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct CostsView {
    /// The breakdown asked for, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    /// Total per currency, in millionths (rounded once, from the exact `totals`).
    #[schema(value_type = Object)]
    pub totals_micros: BTreeMap<String, i64>,
    /// Total per currency, exact, as a decimal.
    #[schema(value_type = Object)]
    pub totals: BTreeMap<String, String>,
    pub days: Vec<CostRowView>,
}

/// The project's cost per day and unit: usage × the price in effect that day (the
/// organization's override, else the deployment's price, else the default price book).
#[utoipa::path(get, path = "/v1/costs", tag = "usage", params(CostsQuery),
    responses((status = 200, description = "`format=json` (default) or `format=csv`",
            content((CostsView = "application/json"), (String = "text/csv"))),
        (status = 422, body = ProblemDocument, content_type = "application/problem+json")),
    security(("api_key" = [])))]
pub async fn project_costs(
    principal: Authorized<ProjectAdmin>,
    State(engine): State<Arc<MemoryEngine>>,
    QueryParams(query): QueryParams<CostsQuery>,
) -> Result<Response, ApiError> {
    let by = breakdown(query.by.as_deref())?;
    let (from, to, csv) = parse_range(
        query.from.as_deref(),
        query.to.as_deref(),
        query.format.as_deref(),
    )?;
    // Each row with what it is about, for a breakdown.
    let rows: Vec<(Option<BreakdownValue>, CostRow)> = match by {
        Some(by) => engine
            .costs_by_for(principal.principal(), from, to, by)
            .await?
            .into_iter()
            .map(|row| (Some(row.value), row.cost))
            .collect(),
        None => engine
            .costs_for(principal.principal(), from, to)
            .await?
            .into_iter()
            .map(|cost| (None, cost))
            .collect(),
    };
    let mut totals: BTreeMap<String, Picos> = BTreeMap::new();
    let days: Vec<CostRowView> = rows
        .into_iter()
        .map(|(value, row)| {
            if let Some(price) = &row.price {
                *totals.entry(price.currency.clone()).or_default() += row.cost;
            }
            let (breakdown, credential) = match (by, &value) {
                (Some(by), Some(value)) => BreakdownFields::of(by, value),
                _ => (BreakdownFields::default(), None),
            };
            CostRowView {
                day: row.day.date_naive().to_string(),
                unit: row.unit.as_str().to_string(),
                credential,
                breakdown,
                quantity: row.quantity,
                currency: row.price.as_ref().map(|price| price.currency.clone()),
                unit_price_micros: row.price.as_ref().map(|price| price.unit_price().micros()),
                unit_price: row.price.as_ref().map(|price| price.unit_price().decimal()),
                default_price: row.price.as_ref().is_some_and(|price| price.is_default),
                cost_micros: row.cost.micros(),
                cost: row.cost.decimal(),
            }
        })
        .collect();
    if csv {
        // `default_price` last: readers that go by position keep their columns.
        let mut columns = vec!["day", "unit"];
        if let Some(by) = by {
            columns.extend(breakdown_columns(by));
        }
        columns.extend([
            "quantity",
            "currency",
            "unit_price_micros",
            "cost_micros",
            "default_price",
            "unit_price",
            "cost",
        ]);
        let text = crate::csv_export::csv_text(
            &columns,
            days.iter().map(|row| {
                let mut cells = vec![row.day.to_string(), row.unit.clone()];
                if let Some(by) = by {
                    cells.extend(row.breakdown.csv_cells(by, row.credential.as_deref()));
                }
                cells.extend([
                    row.quantity.to_string(),
                    row.currency.clone().unwrap_or_default(),
                    row.unit_price_micros
                        .map(|price| price.to_string())
                        .unwrap_or_default(),
                    row.cost_micros.to_string(),
                    row.default_price.to_string(),
                    row.unit_price.clone().unwrap_or_default(),
                    row.cost.clone(),
                ]);
                cells
            }),
        );
        return Ok(csv_attachment("costs.csv", text));
    }
    Ok(Json(CostsView {
        by: by.map(|by| by.as_str().to_string()),
        from,
        to,
        totals_micros: totals
            .iter()
            .map(|(currency, total)| (currency.clone(), total.micros()))
            .collect(),
        totals: totals
            .into_iter()
            .map(|(currency, total)| (currency, total.decimal()))
            .collect(),
        days,
    })
    .into_response())
}

/// CSV text as a download named `file_name`.
fn csv_attachment(file_name: &'static str, text: String) -> Response {
    let disposition = format!("attachment; filename=\"{file_name}\"");
    (
        [
            (header::CONTENT_TYPE, "text/csv; charset=utf-8".to_string()),
            (header::CONTENT_DISPOSITION, disposition),
        ],
        text,
    )
        .into_response()
}

/// `from`/`to` days (inclusive) as a half-open time range, and whether CSV was asked for;
/// every problem of syntax named by its field (the window's rules are the use case's).
fn parse_range(
    from: Option<&str>,
    to: Option<&str>,
    format: Option<&str>,
) -> Result<(DateTime<Utc>, DateTime<Utc>, bool), ApiError> {
    let today = Utc::now().date_naive();
    let mut errors = Vec::new();
    let from = day(from, "from", today - chrono::Duration::days(30))
        .map_err(|error| errors.push(error))
        .ok();
    let to = day(to, "to", today)
        .map_err(|error| errors.push(error))
        .ok();
    let csv = match format.unwrap_or("json") {
        "json" => false,
        "csv" => true,
        _ => {
            errors.push(FieldError::new("format", "must be json or csv"));
            false
        }
    };
    let (Some(from), Some(to), true) = (from, to, errors.is_empty()) else {
        return Err(ApiError::invalid(errors));
    };
    let start = from
        .and_hms_opt(0, 0, 0)
        .map(|at| at.and_utc())
        .unwrap_or_default();
    let end = (to + chrono::Duration::days(1))
        .and_hms_opt(0, 0, 0)
        .map(|at| at.and_utc())
        .unwrap_or_default();
    Ok((start, end, csv))
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct BudgetAlertView {
    pub threshold_percent: u8,
    pub spent_micros: i64,
    pub budget_micros: i64,
    pub currency: String,
    pub reached_at: DateTime<Utc>,
}

/// The month so far, as the limits see it.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct MonthToDateView {
    /// `2026-11`
    pub month: String,
    pub resets_at: DateTime<Utc>,
    #[schema(value_type = Object)]
    pub used: BTreeMap<String, i64>,
    /// Cost so far in the budget's currency (0 without a budget).
    pub spent_micros: i64,
    /// Straight-line forecast of the month's cost.
    pub forecast_micros: i64,
    /// Whether the forecast passes the monthly budget (false without a budget).
    pub forecast_exceeds_budget: bool,
    pub alerts: Vec<BudgetAlertView>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct SpendLimitsView {
    pub limits: SpendLimitsBody,
    pub month_to_date: MonthToDateView,
}

fn limits_view(report: SpendLimitsReport) -> SpendLimitsView {
    let SpendLimitsReport {
        limits,
        month,
        month_to_date,
        alerts,
    } = report;
    let forecast_micros = forecast_month_cost(month, month_to_date.spent_micros, Utc::now());
    let forecast_exceeds_budget = limits
        .monthly_budget
        .as_ref()
        .is_some_and(|budget| forecast_micros > budget.amount_micros);
    SpendLimitsView {
        limits: SpendLimitsBody::from_limits(&limits),
        month_to_date: MonthToDateView {
            month: month.label(),
            resets_at: month.resets_at(),
            used: UsageUnit::ALL
                .iter()
                .map(|unit| {
                    (
                        unit.as_str().to_string(),
                        month_to_date.used.get(unit).copied().unwrap_or(0),
                    )
                })
                .collect(),
            spent_micros: month_to_date.spent_micros,
            forecast_micros,
            forecast_exceeds_budget,
            alerts: alerts
                .into_iter()
                .map(|alert| BudgetAlertView {
                    threshold_percent: alert.threshold_percent,
                    spent_micros: alert.spent_micros,
                    budget_micros: alert.budget_micros,
                    currency: alert.currency,
                    reached_at: alert.reached_at,
                })
                .collect(),
        },
    }
}

/// The project's budget, quotas and recall budget, with the month so far.
#[utoipa::path(get, path = "/v1/project/limits", tag = "usage",
    responses((status = 200, body = SpendLimitsView)),
    security(("api_key" = [])))]
pub async fn get_spend_limits(
    principal: Authorized<ProjectAdmin>,
    State(engine): State<Arc<MemoryEngine>>,
) -> Result<Json<SpendLimitsView>, ApiError> {
    let report = engine.spend_limits_for(principal.principal()).await?;
    Ok(Json(limits_view(report)))
}

/// Replace the project's budget, quotas and recall budget (audited). Takes effect at once
/// on this server, within 5 s on others.
#[utoipa::path(put, path = "/v1/project/limits", tag = "usage", request_body = SpendLimitsBody,
    responses((status = 200, body = SpendLimitsView),
        (status = 422, body = ProblemDocument, content_type = "application/problem+json")),
    security(("api_key" = [])))]
pub async fn put_spend_limits(
    principal: Authorized<ProjectAdmin>,
    State(engine): State<Arc<MemoryEngine>>,
    body: JsonBody<SpendLimitsBody>,
) -> Result<Json<SpendLimitsView>, ApiError> {
    let limits = body.value.into_limits().map_err(ApiError::invalid)?;
    let report = engine
        .put_spend_limits_for(principal.principal(), limits)
        .await?;
    Ok(Json(limits_view(report)))
}
