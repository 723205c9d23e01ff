//! `GET /v1/usage`: the project's metered units per hour or day, per unit and credential,
//! with totals; as JSON or CSV. Needs the `admin` scope.

use crate::auth::{Authorized, ProjectAdmin};
use crate::extract::QueryParams;
use crate::problem::{ApiError, ProblemDocument};
use crate::state::AppState;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use chrono::{DateTime, NaiveDate, Utc};
use engram_core::FieldError;
use engram_engine::MemoryEngine;
use engram_storage::usage::UsageGranularity;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;
use utoipa::{IntoParams, ToSchema};

/// Longest range one request may ask for.
const MAX_RANGE_DAYS: i64 = 366;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/usage", get(project_usage))
        .route("/v1/costs", get(project_costs))
}

#[derive(Debug, Deserialize, IntoParams)]
pub struct UsageQuery {
    /// First day, `YYYY-MM-DD` (UTC), inclusive; default: 30 days ago.
    pub from: Option<String>,
    /// Last day, `YYYY-MM-DD` (UTC), inclusive; default: today.
    pub to: Option<String>,
    /// `day` (default) or `hour`.
    pub granularity: Option<String>,
    /// `json` (default) or `csv`.
    pub format: Option<String>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct UsageRowView {
    pub period_start: DateTime<Utc>,
    /// `memories_written | searches`
    pub unit: String,
    /// `key:<id>` or `end_user`.
    pub credential: String,
    pub quantity: i64,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct UsageView {
    pub granularity: String,
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    #[schema(value_type = Object)]
    pub totals: BTreeMap<String, i64>,
    pub usage: Vec<UsageRowView>,
}

fn day(text: Option<&str>, field: &str, default: NaiveDate) -> Result<NaiveDate, FieldError> {
    match text.map(str::trim).filter(|text| !text.is_empty()) {
        Some(text) => NaiveDate::parse_from_str(text, "%Y-%m-%d")
            .map_err(|_| FieldError::new(field, "expected a date as YYYY-MM-DD")),
        None => Ok(default),
    }
}

/// The project's usage. Units are counted after a request succeeded (failed calls and
/// idempotent replays are not billed) and written within about a second.
#[utoipa::path(get, path = "/v1/usage", tag = "usage", params(UsageQuery),
    responses((status = 200, body = UsageView),
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
    let (from, to, csv) = parse_range(
        query.from.as_deref(),
        query.to.as_deref(),
        query.format.as_deref(),
    )?;
    let rows = engine
        .storage()
        .usage(&principal.scope, from, to, granularity)
        .await
        .map_err(|error| ApiError::from(engram_engine::EngineError::from(error)))?;
    let mut totals: BTreeMap<String, i64> = engram_core::usage::UsageUnit::ALL
        .iter()
        .map(|unit| (unit.as_str().to_string(), 0))
        .collect();
    for row in &rows {
        *totals.entry(row.unit.as_str().to_string()).or_default() += row.quantity;
    }
    let usage: Vec<UsageRowView> = rows
        .into_iter()
        .map(|row| UsageRowView {
            period_start: row.period_start,
            unit: row.unit.as_str().to_string(),
            credential: row.credential,
            quantity: row.quantity,
        })
        .collect();
    if csv {
        let mut text = String::from("period_start,unit,credential,quantity\n");
        for row in &usage {
            text.push_str(&format!(
                "{},{},{},{}\n",
                row.period_start.to_rfc3339(),
                row.unit,
                row.credential,
                row.quantity
            ));
        }
        return Ok((
            [
                (header::CONTENT_TYPE, "text/csv; charset=utf-8"),
                (
                    header::CONTENT_DISPOSITION,
                    "attachment; filename=\"usage.csv\"",
                ),
            ],
            text,
        )
            .into_response());
    }
    Ok(Json(UsageView {
        granularity: match granularity {
            UsageGranularity::Day => "day",
            UsageGranularity::Hour => "hour",
        }
        .to_string(),
        from,
        to,
        totals,
        usage,
    })
    .into_response())
}

#[derive(Debug, Deserialize, IntoParams)]
pub struct CostsQuery {
    /// First day, `YYYY-MM-DD` (UTC), inclusive; default: 30 days ago.
    pub from: Option<String>,
    /// Last day, `YYYY-MM-DD` (UTC), inclusive; default: today.
    pub to: Option<String>,
    /// `json` (default) or `csv`.
    pub format: Option<String>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct CostRowView {
    pub day: String,
    pub unit: String,
    pub quantity: i64,
    /// `None` when the price book has no price for the unit on that day.
    pub currency: Option<String>,
    /// Price of one unit, in millionths of the currency.
    pub unit_price_micros: Option<i64>,
    pub cost_micros: i64,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct CostsView {
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    /// Total per currency, in millionths.
    #[schema(value_type = Object)]
    pub totals_micros: BTreeMap<String, i64>,
    pub days: Vec<CostRowView>,
}

/// The project's cost per day and unit: usage × the price in effect that day (the
/// organization's override, else the deployment's price).
#[utoipa::path(get, path = "/v1/costs", tag = "usage", params(CostsQuery),
    responses((status = 200, body = CostsView),
        (status = 422, body = ProblemDocument, content_type = "application/problem+json")),
    security(("api_key" = [])))]
pub async fn project_costs(
    principal: Authorized<ProjectAdmin>,
    State(engine): State<Arc<MemoryEngine>>,
    QueryParams(query): QueryParams<CostsQuery>,
) -> Result<Response, ApiError> {
    let (from, to, csv) = parse_range(
        query.from.as_deref(),
        query.to.as_deref(),
        query.format.as_deref(),
    )?;
    let rows = engine
        .storage()
        .costs(&principal.scope, from, to)
        .await
        .map_err(|error| ApiError::from(engram_engine::EngineError::from(error)))?;
    let mut totals_micros: BTreeMap<String, i64> = BTreeMap::new();
    let days: Vec<CostRowView> = rows
        .into_iter()
        .map(|row| {
            if let Some(price) = &row.price {
                *totals_micros.entry(price.currency.clone()).or_default() += row.cost_micros;
            }
            CostRowView {
                day: row.day.date_naive().to_string(),
                unit: row.unit.as_str().to_string(),
                quantity: row.quantity,
                currency: row.price.as_ref().map(|price| price.currency.clone()),
                unit_price_micros: row.price.as_ref().map(|price| price.unit_price_micros),
                cost_micros: row.cost_micros,
            }
        })
        .collect();
    if csv {
        let mut text = String::from("day,unit,quantity,currency,unit_price_micros,cost_micros\n");
        for row in &days {
            text.push_str(&format!(
                "{},{},{},{},{},{}\n",
                row.day,
                row.unit,
                row.quantity,
                row.currency.clone().unwrap_or_default(),
                row.unit_price_micros
                    .map(|price| price.to_string())
                    .unwrap_or_default(),
                row.cost_micros
            ));
        }
        return Ok((
            [
                (header::CONTENT_TYPE, "text/csv; charset=utf-8"),
                (
                    header::CONTENT_DISPOSITION,
                    "attachment; filename=\"costs.csv\"",
                ),
            ],
            text,
        )
            .into_response());
    }
    Ok(Json(CostsView {
        from,
        to,
        totals_micros,
        days,
    })
    .into_response())
}

/// `from`/`to` days (inclusive, at most a year apart) as a half-open time range, and whether
/// CSV was asked for; every problem named by its field.
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
    if let (Some(from), Some(to)) = (from, to) {
        if to < from {
            errors.push(FieldError::new("to", "must not be before from"));
        } else if (to - from).num_days() > MAX_RANGE_DAYS {
            errors.push(FieldError::new(
                "to",
                format!("at most {MAX_RANGE_DAYS} days per request"),
            ));
        }
    }
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
