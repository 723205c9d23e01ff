//! `/v1/audit`: the project's audit events (filters, cursor), verification of the
//! organization's hash chain, and CSV / NDJSON export. Needs the `admin` scope.

use crate::auth::{Authorized, ProjectAdmin};
use crate::extract::QueryParams;
use crate::problem::{ApiError, ProblemDocument};
use crate::state::AppState;
use crate::views::{AuditEventView, events_as_csv};
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use chrono::{DateTime, Utc};
use engram_core::FieldError;
use engram_core::audit::AuditFilter;
use engram_core::audit::VerificationStart;
use engram_engine::MemoryEngine;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use utoipa::{IntoParams, ToSchema};

/// Most events one export returns; narrow the time range for more.
const DEFAULT_PAGE: u64 = 100;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/audit", get(list_audit_events))
        .route("/v1/audit/verify", post(verify_audit_chain))
        .route("/v1/audit/export", get(export_audit_events))
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct AuditPageView {
    pub events: Vec<AuditEventView>,
    pub next_cursor: Option<String>,
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AuditQuery {
    /// Only this action (`memory.created`, …).
    #[param(schema_with = engram_core::openapi_schemas::audit_action)]
    pub action: Option<String>,
    /// Only this actor (an API key id or console account id).
    #[param(min_length = 1, max_length = 255)]
    pub actor_id: Option<String>,
    /// Only events about this target id (a memory or key id).
    #[param(min_length = 1, max_length = 255)]
    pub target_id: Option<String>,
    /// From this time (inclusive), RFC 3339.
    pub since: Option<DateTime<Utc>>,
    /// Before this time, RFC 3339.
    pub until: Option<DateTime<Utc>>,
    /// 1–500, default 100.
    #[param(minimum = 1, maximum = 500)]
    pub limit: Option<i64>,
    #[param(pattern = "^[0-9]{1,18}$")]
    pub cursor: Option<String>,
    /// Export only: `ndjson` (default) or `csv`.
    #[param(pattern = "^(ndjson|csv)$")]
    pub format: Option<String>,
}

impl AuditQuery {
    /// The filter as typed; its rules (`audit_filter_errors`) are the use case's, checked
    /// here as well only so one answer names every bad parameter with its `query.` name.
    fn to_filter(&self) -> Result<AuditFilter, ApiError> {
        let mut errors = Vec::new();
        let after_id = self.cursor.as_deref().and_then(|text| {
            engram_core::cursors::parse_audit_cursor(text, "query.cursor")
                .map_err(|error| errors.push(error))
                .ok()
        });
        // Read by the export only, but checked wherever it is sent: a list request with a
        // misspelt format is told so rather than silently served.
        if self
            .format
            .as_deref()
            .is_some_and(|format| !matches!(format, "ndjson" | "csv"))
        {
            errors.push(FieldError::new("query.format", "must be `ndjson` or `csv`"));
        }
        let filter = AuditFilter {
            action: self.action.clone(),
            actor_id: self.actor_id.clone(),
            target_id: self.target_id.clone(),
            since: self.since,
            until: self.until,
            after_id,
            // A negative page is out of range like 0.
            limit: self
                .limit
                .map(|limit| u64::try_from(limit).unwrap_or(0))
                .unwrap_or(DEFAULT_PAGE),
            ..Default::default()
        };
        errors.extend(engram_engine::audit_filter_errors(&filter, "query."));
        if !errors.is_empty() {
            return Err(ApiError::invalid(errors));
        }
        Ok(filter)
    }
}

/// The project's audit events, oldest first, with cursor pagination.
#[utoipa::path(get, path = "/v1/audit", tag = "audit", params(AuditQuery),
    responses((status = 200, body = AuditPageView),
        (status = 403, description = "The API key lacks the `admin` scope", body = ProblemDocument, content_type = "application/problem+json"),
        (status = 422, body = ProblemDocument, content_type = "application/problem+json")),
    security(("api_key" = ["admin"])))]
pub async fn list_audit_events(
    principal: Authorized<ProjectAdmin>,
    State(engine): State<Arc<MemoryEngine>>,
    QueryParams(query): QueryParams<AuditQuery>,
) -> Result<Json<AuditPageView>, ApiError> {
    let filter = query.to_filter()?;
    let events = engine
        .list_audit_events_for(principal.principal(), filter.clone())
        .await?;
    let next_cursor = (events.len() as u64 == filter.limit)
        .then(|| events.last().map(|event| event.id.to_string()))
        .flatten();
    Ok(Json(AuditPageView {
        events: events.into_iter().map(AuditEventView::from).collect(),
        next_cursor,
    }))
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct AuditVerificationView {
    /// True when every event of the organization's chain recomputes to its stored hash.
    pub verified: bool,
    /// Events of this project vouched for (the chain spans the organization): recomputed
    /// now, or by the earlier verification this one continued from.
    pub project_events_checked: u64,
    /// The sequence this run started recomputing from. The organization's sequences are not
    /// a project's business: always null through a project key (the console shows them to
    /// owners, admins and compliance staff).
    pub recomputed_from_sequence: Option<i64>,
    /// The newest sequence the anchor outside the database records for the organization's
    /// chain: null through a project key (it would tell other projects' activity).
    pub anchored_sequence: Option<i64>,
    /// The first event hashed with the deployment's audit key: null through a project key.
    pub keyed_since: Option<i64>,
    /// The first event that does not match, when it belongs to this project; events of
    /// other projects are not identified.
    pub first_broken_link: Option<BrokenLinkView>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct BrokenLinkView {
    /// The event's id; null when it is not this project's (or a removed newest event).
    pub event_id: Option<i64>,
    pub sequence: Option<i64>,
    pub reason: String,
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct VerifyQuery {
    /// Recompute every event from the first: the organization's (console owners, admins,
    /// compliance), so a project key gets 403 (default: continue from the last verified
    /// checkpoint, re-checking that nothing before it was removed or inserted).
    pub full: Option<bool>,
}

/// Verify the organization's audit chain — keyed hashes, links, sequence and the anchor kept
/// outside the database — and name the first broken link.
#[utoipa::path(post, path = "/v1/audit/verify", tag = "audit",
    params(VerifyQuery),
    responses((status = 200, body = AuditVerificationView),
        (status = 403, description = "The API key lacks the `admin` scope", body = ProblemDocument, content_type = "application/problem+json")),
    security(("api_key" = ["admin"])))]
pub async fn verify_audit_chain(
    principal: Authorized<ProjectAdmin>,
    State(engine): State<Arc<MemoryEngine>>,
    QueryParams(query): QueryParams<VerifyQuery>,
) -> Result<Json<AuditVerificationView>, ApiError> {
    let start = if query.full.unwrap_or(false) {
        VerificationStart::Genesis
    } else {
        VerificationStart::LastCheckpoint
    };
    let report = engine
        .verify_audit_chain_for(principal.principal(), start)
        .await?;
    Ok(Json(AuditVerificationView {
        verified: report.verified,
        project_events_checked: report.events_checked,
        recomputed_from_sequence: report.recomputed_from_sequence,
        anchored_sequence: report.anchored_sequence,
        keyed_since: report.keyed_since,
        first_broken_link: report.first_broken.map(|broken| BrokenLinkView {
            event_id: broken.event_id,
            sequence: broken.sequence,
            reason: broken.reason,
        }),
    }))
}

/// Export the project's audit events matching the filters as NDJSON (default) or CSV.
#[utoipa::path(get, path = "/v1/audit/export", tag = "audit", params(AuditQuery),
    responses((status = 200, description = "`application/x-ndjson` or `text/csv`"),
        (status = 403, description = "The API key lacks the `admin` scope", body = ProblemDocument, content_type = "application/problem+json"),
        (status = 422, body = ProblemDocument, content_type = "application/problem+json")),
    security(("api_key" = ["admin"])))]
pub async fn export_audit_events(
    principal: Authorized<ProjectAdmin>,
    State(engine): State<Arc<MemoryEngine>>,
    QueryParams(query): QueryParams<AuditQuery>,
) -> Result<Response, ApiError> {
    let as_csv = match query.format.as_deref() {
        None | Some("ndjson") => false,
        Some("csv") => true,
        Some(_) => {
            return Err(ApiError::invalid(vec![FieldError::new(
                "query.format",
                "must be `ndjson` or `csv`",
            )]));
        }
    };
    let events: Vec<AuditEventView> = engine
        .export_audit_events_for(principal.principal(), query.to_filter()?)
        .await?
        .into_iter()
        .map(AuditEventView::from)
        .collect();
    let (content_type, body) = if as_csv {
        let body = events_as_csv(&events);
        ("text/csv; charset=utf-8", body)
    } else {
        let mut body = String::new();
        for event in &events {
            body.push_str(&serde_json::to_string(event).unwrap_or_default());
            body.push('\n');
        }
        ("application/x-ndjson", body)
    };
    Ok((
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, content_type),
            (
                header::CONTENT_DISPOSITION,
                if as_csv {
                    "attachment; filename=\"audit.csv\""
                } else {
                    "attachment; filename=\"audit.ndjson\""
                },
            ),
        ],
        body,
    )
        .into_response())
}
