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
    Router::new().route("/v1/usage", get(project_usage))
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
    let today = Utc::now().date_naive();
    let mut errors = Vec::new();
    let from = day(
        query.from.as_deref(),
        "from",
        today - chrono::Duration::days(30),
    )
    .map_err(|error| errors.push(error))
    .ok();
    let to = day(query.to.as_deref(), "to", today)
        .map_err(|error| errors.push(error))
        .ok();
    let granularity = match query.granularity.as_deref().unwrap_or("day") {
        "day" => Some(UsageGranularity::Day),
        "hour" => Some(UsageGranularity::Hour),
        _ => {
            errors.push(FieldError::new("granularity", "must be day or hour"));
            None
        }
    };
    let csv = match query.format.as_deref().unwrap_or("json") {
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
    let (Some(from), Some(to), Some(granularity), true) =
        (from, to, granularity, errors.is_empty())
    else {
        return Err(ApiError::invalid(errors));
    };
    let from = from
        .and_hms_opt(0, 0, 0)
        .map(|at| at.and_utc())
        .unwrap_or_default();
    let to = (to + chrono::Duration::days(1))
        .and_hms_opt(0, 0, 0)
        .map(|at| at.and_utc())
        .unwrap_or_default();
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
