//! `GET /v1/prices`: the prices that apply to the project (any project key), and
//! `GET /v1/statements/{month}`: the project's monthly statement as JSON or CSV (`admin`).

use crate::auth::{Authorized, ProjectAdmin, ProjectPrincipal};
use crate::extract::QueryParams;
use crate::problem::{ApiError, ProblemDocument};
use crate::state::AppState;
use axum::extract::{Path, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use engram_core::FieldError;
use engram_core::statements::Statement;
use engram_engine::{MemoryEngine, PriceBookEntry, PriceBookUnit};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use utoipa::{IntoParams, ToSchema};

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/prices", get(project_prices))
        .route("/v1/statements/{month}", get(project_statement))
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct PriceView {
    pub id: String,
    pub currency: String,
    /// Price of one unit, exact, as a decimal (`0.00000002`).
    pub unit_price: String,
    /// The same rounded to the nearest millionth.
    pub unit_price_micros: i64,
    /// First day (UTC) the price applies.
    pub effective_from: chrono::NaiveDate,
    /// `organization` (the organization's own price), `deployment` (the operator's) or
    /// `default` (Engram's default book: a placeholder).
    pub source: String,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct UnitPricesView {
    pub unit: String,
    /// The price in effect today; `null` when nothing prices the unit.
    pub current: Option<PriceView>,
    /// Prices that take effect after today, soonest first.
    pub scheduled: Vec<PriceView>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct PricesView {
    pub units: Vec<UnitPricesView>,
}

impl From<PriceBookEntry> for PriceView {
    fn from(entry: PriceBookEntry) -> Self {
        Self {
            id: entry.id,
            currency: entry.currency,
            unit_price: entry.unit_price.decimal(),
            unit_price_micros: entry.unit_price.micros(),
            effective_from: entry.effective_from,
            source: entry.source.to_string(),
        }
    }
}

impl From<PriceBookUnit> for UnitPricesView {
    fn from(unit: PriceBookUnit) -> Self {
        Self {
            unit: unit.unit.as_str().to_string(),
            current: unit.current.map(PriceView::from),
            scheduled: unit.scheduled.into_iter().map(PriceView::from).collect(),
        }
    }
}

/// Per unit, the price in effect today and those scheduled (the organization's own, else
/// the deployment's, else Engram's default book). Any project key; not an end-user token.
#[utoipa::path(get, path = "/v1/prices", tag = "usage",
    responses((status = 200, body = PricesView),
        (status = 403, description = "An end-user token reads no prices", body = ProblemDocument, content_type = "application/problem+json")),
    security(("api_key" = [])))]
pub async fn project_prices(
    principal: ProjectPrincipal,
    State(engine): State<Arc<MemoryEngine>>,
) -> Result<Json<PricesView>, ApiError> {
    let units = engine.prices_for(principal.principal()).await?;
    Ok(Json(PricesView {
        units: units.into_iter().map(UnitPricesView::from).collect(),
    }))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct StatementQuery {
    /// `json` (default) or `csv`.
    #[param(pattern = "^(json|csv)$")]
    pub format: Option<String>,
}

/// The project's statement of a month: units at the prices in effect, cost, totals per
/// currency, budget and alerts, and the breakdowns by key, end-user, agent and channel.
/// `provisional: true` until the month closes, one hour after it ends; from then on the
/// stored statement, which never changes (an erasure only replaces the end-user's id).
#[utoipa::path(get, path = "/v1/statements/{month}", tag = "usage",
    params(("month" = String, Path, description = "The month, `YYYY-MM`", pattern = "^[0-9]{4}-[0-9]{2}$"), StatementQuery),
    responses((status = 200, description = "`format=json` (default) or `format=csv`",
            content((Statement = "application/json"), (String = "text/csv"))),
        (status = 422, body = ProblemDocument, content_type = "application/problem+json")),
    security(("api_key" = ["admin"])))]
pub async fn project_statement(
    principal: Authorized<ProjectAdmin>,
    State(engine): State<Arc<MemoryEngine>>,
    Path(month): Path<String>,
    QueryParams(query): QueryParams<StatementQuery>,
) -> Result<Response, ApiError> {
    let csv = match query.format.as_deref().unwrap_or("json") {
        "json" => false,
        "csv" => true,
        _ => {
            return Err(ApiError::invalid(vec![FieldError::new(
                "format",
                "must be json or csv",
            )]));
        }
    };
    let statement = engine.statement_for(principal.principal(), &month).await?;
    if !csv {
        return Ok(Json(statement).into_response());
    }
    let file_name = format!("statement-{}.csv", statement.month);
    let disposition = format!("attachment; filename=\"{file_name}\"");
    Ok((
        [
            (header::CONTENT_TYPE, "text/csv; charset=utf-8".to_string()),
            (header::CONTENT_DISPOSITION, disposition),
        ],
        statement_csv(&statement),
    )
        .into_response())
}

/// A statement as one table: its lines, totals, budgets and breakdowns, each row naming its
/// section. Cells go through the one CSV writer (formula-safe).
pub fn statement_csv(statement: &Statement) -> String {
    const COLUMNS: [&str; 14] = [
        "month",
        "provisional",
        "section",
        "by",
        "project_id",
        "value",
        "erased_subject",
        "unit",
        "quantity",
        "currency",
        "unit_price",
        "price_from",
        "default_price",
        "cost",
    ];
    let month = statement.month.clone();
    let provisional = statement.provisional.to_string();
    let row = |section: &str, cells: [String; 11]| {
        let mut row = vec![month.clone(), provisional.clone(), section.to_string()];
        row.extend(cells);
        row
    };
    let mut rows = Vec::new();
    for line in &statement.lines {
        rows.push(row(
            "line",
            [
                String::new(),
                String::new(),
                String::new(),
                String::new(),
                line.unit.clone(),
                line.quantity.to_string(),
                line.currency.clone().unwrap_or_default(),
                line.unit_price
                    .map(|price| price.decimal())
                    .unwrap_or_default(),
                line.price_from
                    .map(|day| day.to_string())
                    .unwrap_or_default(),
                line.default_price.to_string(),
                line.cost.decimal(),
            ],
        ));
    }
    for total in &statement.totals {
        rows.push(row(
            "total",
            [
                String::new(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
                total.currency.clone(),
                String::new(),
                String::new(),
                String::new(),
                total.cost.decimal(),
            ],
        ));
    }
    for budget in &statement.budgets {
        rows.push(row(
            "budget",
            [
                String::new(),
                budget.project_id.clone(),
                budget.amount.decimal(),
                String::new(),
                String::new(),
                String::new(),
                budget.currency.clone(),
                String::new(),
                String::new(),
                String::new(),
                budget.spent.decimal(),
            ],
        ));
    }
    for line in &statement.breakdowns {
        rows.push(row(
            "breakdown",
            [
                line.by.clone(),
                line.project_id.clone().unwrap_or_default(),
                line.value.clone().unwrap_or_default(),
                line.erased_subject.clone().unwrap_or_default(),
                line.unit.clone(),
                line.quantity.to_string(),
                line.currency.clone().unwrap_or_default(),
                String::new(),
                String::new(),
                String::new(),
                line.cost.decimal(),
            ],
        ));
    }
    crate::csv_export::csv_text(&COLUMNS, rows)
}
