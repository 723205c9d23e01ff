//! The console's server functions (mounted under `/console/api/…`) and its session cookie.
//! Bodies run on the server only; the browser build gets generated `fetch` stubs instead.

use crate::model::{
    AuditListing, BulkDeleteOutcome, BulkDeletePreview, ConsoleError, ErasureStatus,
    InvitationPreview, KeyListing, MemberListing, MemoryDetail, MemoryFilters, MemoryListing,
    NewInvitation, NewKeySecret, SessionInfo, SubjectSummary,
};
use leptos::prelude::*;

/// Where the server functions live; must match the `prefix` of every `#[server]` below.
pub const API_PREFIX: &str = "/console/api";

/// Sign in: on success the session cookie is set and the browser is sent to the memories.
#[server(prefix = "/console/api", endpoint = "login")]
pub async fn login(email: String, password: String) -> Result<(), ConsoleError> {
    ssr::answer(ssr::login(email, password).await).await
}

/// Sign out: ends the backend session, clears the cookie, goes back to the login page.
#[server(prefix = "/console/api", endpoint = "logout")]
pub async fn logout() -> Result<(), ConsoleError> {
    ssr::answer(ssr::logout().await).await
}

/// Speak `language` (`en` or `zh`) to the signed-in account from now on (the top bar's
/// switch); the page reloads in it.
#[server(prefix = "/console/api", endpoint = "language")]
pub async fn choose_language(language: String) -> Result<(), ConsoleError> {
    ssr::answer(ssr::choose_language(language).await).await
}

/// The signed-in account and its projects.
#[server(prefix = "/console/api", endpoint = "session")]
pub async fn load_session() -> Result<SessionInfo, ConsoleError> {
    ssr::answer(ssr::load_session().await).await
}

/// The memories of a project (the first project when none is chosen) matching the filters,
/// or the nearest ones to `meaning`.
// JSON: the filters are a nested struct whose fields may all be absent.
#[server(prefix = "/console/api", endpoint = "memories", input = leptos::server_fn::codec::Json)]
pub async fn list_memories(
    filters: MemoryFilters,
    after: Option<String>,
) -> Result<MemoryListing, ConsoleError> {
    ssr::answer(ssr::list_memories(filters, after).await).await
}

/// One memory with provenance and history.
#[server(prefix = "/console/api", endpoint = "memory")]
pub async fn load_memory(
    project_id: String,
    memory_id: String,
) -> Result<MemoryDetail, ConsoleError> {
    ssr::answer(
        ssr::backend()?
            .memory_detail(&ssr::caller().await?, &project_id, &memory_id)
            .await,
    )
    .await
}

/// Correct a memory (a reason is required).
// A server function's arguments are its form's fields, one each (`allow`: the macro
// expands the function twice, and only one of them may trip the lint).
#[allow(clippy::too_many_arguments)]
#[server(prefix = "/console/api", endpoint = "correct_memory")]
pub async fn correct_memory(
    project_id: String,
    memory_id: String,
    content: String,
    metadata: Option<String>,
    categories: Option<String>,
    metadata_shown: Option<String>,
    categories_shown: Option<String>,
    version: Option<i64>,
    reason: String,
) -> Result<(), ConsoleError> {
    // Only what the person changed is sent: an unchanged field keeps what it holds now.
    let changed = |given: Option<String>, shown: Option<String>| {
        given.filter(|given| Some(given.trim()) != shown.as_deref().map(str::trim))
    };
    let correction = crate::model::MemoryCorrection {
        content,
        metadata_json: changed(metadata, metadata_shown),
        categories: changed(categories, categories_shown),
        reason,
        expected_version: version,
    };
    let result = ssr::backend()?
        .correct_memory(&ssr::caller().await?, &project_id, &memory_id, correction)
        .await;
    ssr::answer(result).await
}

/// Delete a memory (a reason and a confirmation are required).
#[server(prefix = "/console/api", endpoint = "delete_memory")]
pub async fn delete_memory(
    project_id: String,
    memory_id: String,
    reason: String,
    confirm: Option<String>,
) -> Result<(), ConsoleError> {
    if confirm.is_none() {
        return ssr::answer(Err(ConsoleError::InvalidInput(
            "tick the box to confirm the deletion".into(),
        )))
        .await;
    }
    let result = ssr::backend()?
        .delete_memory(&ssr::caller().await?, &project_id, &memory_id, reason)
        .await;
    if result.is_ok() {
        // The list says what happened, where the person lands.
        leptos_axum::redirect(&format!("/console/memories?project={project_id}&deleted=1"));
    }
    ssr::answer(result).await
}

/// Set (`on`) or lift (`off`) the `immutable` or `legal_hold` flag of a memory, or set its
/// `visibility` (`private` or `shared`).
#[server(prefix = "/console/api", endpoint = "set_memory_flag")]
pub async fn set_memory_flag(
    project_id: String,
    memory_id: String,
    flag: String,
    value: String,
    reason: String,
) -> Result<(), ConsoleError> {
    if flag == "verified" {
        let result = ssr::backend()?
            .verify_memory(
                &ssr::caller().await?,
                &project_id,
                &memory_id,
                value == "on",
                reason,
            )
            .await;
        return ssr::answer(result).await;
    }
    if flag == "visibility" {
        let result = ssr::backend()?
            .set_memory_visibility(
                &ssr::caller().await?,
                &project_id,
                &memory_id,
                value,
                reason,
            )
            .await;
        return ssr::answer(result).await;
    }
    let on = value == "on";
    let (immutable, legal_hold) = match flag.as_str() {
        "immutable" => (Some(on), None),
        "legal_hold" => (None, Some(on)),
        _ => return ssr::answer(Err(ConsoleError::InvalidInput("unknown flag".into()))).await,
    };
    let result = ssr::backend()?
        .set_memory_flags(
            &ssr::caller().await?,
            &project_id,
            &memory_id,
            immutable,
            legal_hold,
            reason,
        )
        .await;
    ssr::answer(result).await
}

/// How many memories the filters match, before a bulk delete.
// JSON: the filters are a nested struct whose fields may all be absent.
#[server(prefix = "/console/api", endpoint = "preview_bulk_delete", input = leptos::server_fn::codec::Json)]
pub async fn preview_bulk_delete(
    filters: MemoryFilters,
) -> Result<BulkDeletePreview, ConsoleError> {
    ssr::answer(ssr::preview_bulk_delete(filters).await).await
}

/// Delete what the filters match, if that is still `expected` memories.
// JSON: the filters are a nested struct whose fields may all be absent.
#[server(prefix = "/console/api", endpoint = "bulk_delete", input = leptos::server_fn::codec::Json)]
pub async fn bulk_delete(
    filters: MemoryFilters,
    expected: u64,
    reason: String,
) -> Result<BulkDeleteOutcome, ConsoleError> {
    ssr::answer(ssr::bulk_delete(filters, expected, reason).await).await
}

/// One end-user of a project: memories and holds.
#[server(prefix = "/console/api", endpoint = "subject")]
pub async fn load_subject(
    project_id: Option<String>,
    user_id: String,
) -> Result<SubjectSummary, ConsoleError> {
    ssr::answer(ssr::load_subject(project_id, user_id).await).await
}

/// End-users by the start of their id or by a metadata `key=value` of their memories.
#[server(prefix = "/console/api", endpoint = "find_subjects")]
pub async fn find_subjects(
    project_id: Option<String>,
    id_prefix: Option<String>,
    metadata: Option<String>,
) -> Result<Vec<crate::model::SubjectMatchRow>, ConsoleError> {
    ssr::answer(ssr::find_subjects(project_id, id_prefix, metadata).await).await
}

/// Start erasing an end-user; `confirm` must repeat the user id.
#[server(prefix = "/console/api", endpoint = "request_erasure")]
pub async fn request_erasure(
    project_id: String,
    user_id: String,
    confirm: String,
) -> Result<ErasureStatus, ConsoleError> {
    let result = ssr::backend()?
        .request_erasure(&ssr::caller().await?, &project_id, &user_id, &confirm)
        .await;
    ssr::answer(result).await
}

/// Start erasing an end-user in every project of the organization; `confirm` must repeat the
/// user id.
#[server(prefix = "/console/api", endpoint = "request_organization_erasure")]
pub async fn request_organization_erasure(
    project_id: String,
    user_id: String,
    confirm: String,
) -> Result<ErasureStatus, ConsoleError> {
    let result = ssr::backend()?
        .request_organization_erasure(&ssr::caller().await?, &project_id, &user_id, &confirm)
        .await;
    ssr::answer(result).await
}

/// The project's governance settings with the retention dry run.
#[server(prefix = "/console/api", endpoint = "settings")]
pub async fn load_settings(
    project_id: Option<String>,
) -> Result<crate::model::GovernanceSettings, ConsoleError> {
    ssr::answer(ssr::load_settings(project_id).await).await
}

/// Save PII redaction, retention days (empty: no limit for that kind) and the relevance
/// floor (`model` or a number from 0 to 1; empty: `model`).
#[server(prefix = "/console/api", endpoint = "save_settings")]
pub async fn save_settings(
    project_id: String,
    pii_redaction: String,
    relevance_floor: Option<String>,
    semantic: Option<String>,
    episodic: Option<String>,
    procedural: Option<String>,
    preference: Option<String>,
) -> Result<(), ConsoleError> {
    let mut retention = Vec::new();
    for (kind, days) in [
        ("semantic", semantic),
        ("episodic", episodic),
        ("procedural", procedural),
        ("preference", preference),
    ] {
        let days = match days
            .as_deref()
            .map(str::trim)
            .filter(|text| !text.is_empty())
        {
            Some(text) => match text.parse::<u32>() {
                Ok(days) => Some(days),
                Err(_) => {
                    return ssr::answer(Err(ConsoleError::InvalidInput(format!(
                        "{kind}: days must be a whole number (or empty for no limit)"
                    ))))
                    .await;
                }
            },
            None => None,
        };
        retention.push((kind.to_string(), days));
    }
    let result = ssr::backend()?
        .save_governance_settings(
            &ssr::caller().await?,
            &project_id,
            &pii_redaction,
            retention,
            relevance_floor.as_deref().unwrap_or_default().trim(),
        )
        .await;
    ssr::answer(result).await
}

/// Usage, cost, the month against the budget and the limits of a project (the first
/// project when none is chosen) over the last `days` days (default 30).
#[server(prefix = "/console/api", endpoint = "usage")]
pub async fn load_usage(
    project_id: Option<String>,
    days: Option<u32>,
) -> Result<crate::model::UsageOverview, ConsoleError> {
    ssr::answer(ssr::load_usage(project_id, days).await).await
}

/// The recall-quality page of a project (the first one when none is chosen) between two
/// days, `YYYY-MM-DD` inclusive (default: the last 7 days).
#[server(prefix = "/console/api", endpoint = "recall")]
pub async fn load_recall(
    project_id: Option<String>,
    from: Option<String>,
    to: Option<String>,
) -> Result<crate::model::RecallDashboard, ConsoleError> {
    ssr::answer(ssr::load_recall(project_id, from, to).await).await
}

/// Create an evaluation set from the console's form.
#[server(prefix = "/console/api", endpoint = "create_evaluation_set")]
pub async fn create_evaluation_set(
    project_id: String,
    name: String,
    k: Option<String>,
    schedule_hours: Option<String>,
    cases_jsonl: String,
) -> Result<(), ConsoleError> {
    let form = crate::model::NewEvaluationSetForm {
        project_id,
        name: name.trim().to_string(),
        k: k.unwrap_or_default().trim().to_string(),
        schedule_hours: schedule_hours.unwrap_or_default().trim().to_string(),
        cases_jsonl,
    };
    let result = ssr::backend()?
        .create_evaluation_set(&ssr::caller().await?, form)
        .await;
    ssr::answer(result).await
}

/// Run an evaluation set now.
#[server(prefix = "/console/api", endpoint = "run_evaluation_set")]
pub async fn run_evaluation_set(project_id: String, set_id: String) -> Result<(), ConsoleError> {
    let result = ssr::backend()?
        .run_evaluation_set(&ssr::caller().await?, &project_id, &set_id)
        .await;
    ssr::answer(result).await
}

/// One recall event of a project, for the drill-down.
#[server(prefix = "/console/api", endpoint = "recall_event")]
pub async fn load_recall_event(
    project_id: Option<String>,
    recall_id: String,
) -> Result<crate::model::RecallEventDetail, ConsoleError> {
    ssr::answer(ssr::load_recall_event(project_id, recall_id).await).await
}

/// The project's agent runs (the first project when none is chosen).
#[server(prefix = "/console/api", endpoint = "runs")]
pub async fn load_runs(
    project_id: Option<String>,
    user_id: Option<String>,
    status: Option<String>,
    before: Option<String>,
) -> Result<crate::model::RunListing, ConsoleError> {
    ssr::answer(ssr::load_runs(project_id, user_id, status, before).await).await
}

/// One run's timeline.
#[server(prefix = "/console/api", endpoint = "run")]
pub async fn load_run(
    project_id: Option<String>,
    run_id: String,
) -> Result<crate::model::RunTimelineDetail, ConsoleError> {
    ssr::answer(ssr::load_run(project_id, run_id).await).await
}

/// The project's recorded recalls, filtered.
#[server(prefix = "/console/api", endpoint = "recalls")]
pub async fn load_recalls(
    project_id: Option<String>,
    user_id: Option<String>,
    session_id: Option<String>,
    memory_id: Option<String>,
    run_id: Option<String>,
    before: Option<String>,
) -> Result<crate::model::RecallListing, ConsoleError> {
    ssr::answer(ssr::load_recalls(project_id, user_id, session_id, memory_id, run_id, before).await)
        .await
}

/// Save the project's budget, quotas, recall budget and memory limits (empty fields: no
/// limit).
#[allow(clippy::too_many_arguments)]
#[server(prefix = "/console/api", endpoint = "save_limits")]
pub async fn save_limits(
    project_id: String,
    budget_amount: Option<String>,
    currency: Option<String>,
    alert_thresholds: Option<String>,
    hard_cap: Option<String>,
    requests_per_minute: Option<String>,
    quota_memories_written: Option<String>,
    quota_searches: Option<String>,
    quota_tokens_embedded: Option<String>,
    quota_file_bytes: Option<String>,
    recall_max_results: Option<String>,
    recall_max_tokens: Option<String>,
    memory_per_end_user: Option<String>,
    memory_per_agent: Option<String>,
    memory_policy: Option<String>,
) -> Result<(), ConsoleError> {
    let text = |value: Option<String>| value.unwrap_or_default().trim().to_string();
    let form = crate::model::SpendLimitsForm {
        project_id,
        budget_amount: text(budget_amount),
        currency: text(currency),
        alert_thresholds: text(alert_thresholds),
        hard_cap: hard_cap.is_some_and(|value| value == "on" || value == "true"),
        requests_per_minute: text(requests_per_minute),
        quota_memories_written: text(quota_memories_written),
        quota_searches: text(quota_searches),
        quota_tokens_embedded: text(quota_tokens_embedded),
        quota_file_bytes: text(quota_file_bytes),
        recall_max_results: text(recall_max_results),
        recall_max_tokens: text(recall_max_tokens),
        memory_per_end_user: text(memory_per_end_user),
        memory_per_agent: text(memory_per_agent),
        memory_policy: text(memory_policy),
    };
    let result = ssr::backend()?
        .save_spend_limits(&ssr::caller().await?, form)
        .await;
    ssr::answer(result).await
}

/// The organization's price book: every unit's price today and those scheduled.
#[server(prefix = "/console/api", endpoint = "price_book")]
pub async fn load_price_book() -> Result<crate::model::PriceBook, ConsoleError> {
    let result = ssr::backend()?.price_book(&ssr::caller().await?).await;
    ssr::answer(result).await
}

/// Add a price of the organization, from today or a later day (owners and admins).
#[server(prefix = "/console/api", endpoint = "add_organization_price")]
pub async fn add_organization_price(
    unit: String,
    price: String,
    per: Option<String>,
    currency: String,
    effective_from: Option<String>,
) -> Result<String, ConsoleError> {
    let form = crate::model::NewPriceForm {
        unit: unit.trim().to_string(),
        price: price.trim().to_string(),
        per: per.unwrap_or_default().trim().to_string(),
        currency: currency.trim().to_string(),
        effective_from: effective_from.unwrap_or_default().trim().to_string(),
    };
    let result = ssr::backend()?
        .add_organization_price(&ssr::caller().await?, form)
        .await;
    ssr::answer(result).await
}

/// Withdraw a price of the organization before it takes effect (owners and admins).
#[server(prefix = "/console/api", endpoint = "withdraw_organization_price")]
pub async fn withdraw_organization_price(price_id: String) -> Result<(), ConsoleError> {
    let result = ssr::backend()?
        .withdraw_organization_price(&ssr::caller().await?, &price_id)
        .await;
    ssr::answer(result).await
}

/// The organization's statement of a month (`YYYY-MM`; none: this month).
#[server(prefix = "/console/api", endpoint = "organization_statement")]
pub async fn load_organization_statement(
    month: Option<String>,
) -> Result<crate::model::StatementPage, ConsoleError> {
    let result = ssr::backend()?
        .organization_statement(&ssr::caller().await?, month.unwrap_or_default().trim())
        .await;
    ssr::answer(result).await
}

/// Run the project's retention sweep now.
#[server(prefix = "/console/api", endpoint = "sweep_now")]
pub async fn sweep_now(project_id: String) -> Result<u64, ConsoleError> {
    let result = ssr::backend()?
        .sweep_retention_now(&ssr::caller().await?, &project_id)
        .await;
    ssr::answer(result).await
}

/// Progress (and, when done, the receipt) of an erasure.
#[server(prefix = "/console/api", endpoint = "erasure_status")]
pub async fn load_erasure_status(
    project_id: String,
    task_id: String,
) -> Result<ErasureStatus, ConsoleError> {
    ssr::answer(
        ssr::backend()?
            .erasure_status(&ssr::caller().await?, &project_id, &task_id)
            .await,
    )
    .await
}

/// The audit log of a project (the first project when `project_id` is empty), newest first,
/// with the verification of the organization's hash chain.
// Form fields, one each (`allow`: the macro expands the function twice, and only one of
// them may trip the lint); every one but the project may be absent.
#[allow(clippy::too_many_arguments)]
#[server(prefix = "/console/api", endpoint = "audit")]
pub async fn load_audit(
    project_id: Option<String>,
    action: Option<String>,
    full: Option<bool>,
    actor: Option<String>,
    target: Option<String>,
    since: Option<String>,
    until: Option<String>,
    before: Option<i64>,
) -> Result<AuditListing, ConsoleError> {
    let filters = crate::model::AuditFilters {
        project_id,
        action,
        actor,
        target,
        since,
        until,
        before,
        full: full.unwrap_or(false),
    };
    ssr::answer(ssr::load_audit(filters).await).await
}

/// The API keys of a project (the first project when `project_id` is empty).
#[server(prefix = "/console/api", endpoint = "keys")]
pub async fn load_keys(project_id: Option<String>) -> Result<KeyListing, ConsoleError> {
    ssr::answer(ssr::load_keys(project_id).await).await
}

/// Create a key with the checked scopes; the answer carries its secret, once.
// A server function's arguments are its form's fields, one each (`allow`: the macro
// expands the function twice, and only one of them may trip the lint).
#[allow(clippy::too_many_arguments)]
#[server(prefix = "/console/api", endpoint = "create_key")]
pub async fn create_key(
    project_id: Option<String>,
    label: String,
    read: Option<String>,
    write: Option<String>,
    delete: Option<String>,
    verify: Option<String>,
    admin: Option<String>,
    environment: Option<String>,
    expires_on: Option<String>,
    agents: Option<String>,
) -> Result<NewKeySecret, ConsoleError> {
    ssr::answer(
        ssr::create_key(
            project_id,
            label,
            [read, write, delete, verify, admin],
            environment,
            expires_on,
            agents,
        )
        .await,
    )
    .await
}

/// Revoke a key at once.
#[server(prefix = "/console/api", endpoint = "revoke_key")]
pub async fn revoke_key(project_id: Option<String>, key_id: String) -> Result<(), ConsoleError> {
    ssr::answer(ssr::revoke_key(project_id, key_id).await).await
}

/// Roll a key: a new secret, the old one works for another day.
#[server(prefix = "/console/api", endpoint = "roll_key")]
pub async fn roll_key(
    project_id: Option<String>,
    key_id: String,
) -> Result<NewKeySecret, ConsoleError> {
    ssr::answer(ssr::roll_key(project_id, key_id).await).await
}

/// The organization's members and pending invitations.
#[server(prefix = "/console/api", endpoint = "members")]
pub async fn load_members() -> Result<MemberListing, ConsoleError> {
    ssr::answer(ssr::load_members().await).await
}

/// Invite someone; the answer carries the invitation link, once.
#[server(prefix = "/console/api", endpoint = "invite_member")]
pub async fn invite_member(email: String, role: String) -> Result<NewInvitation, ConsoleError> {
    ssr::answer(ssr::invite_member(email, role).await).await
}

/// Withdraw a pending invitation.
#[server(prefix = "/console/api", endpoint = "revoke_invitation")]
pub async fn revoke_invitation(invitation_id: String) -> Result<(), ConsoleError> {
    ssr::answer(ssr::revoke_invitation(invitation_id).await).await
}

/// Give a member another role.
#[server(prefix = "/console/api", endpoint = "change_member_role")]
pub async fn change_member_role(member_id: String, role: String) -> Result<(), ConsoleError> {
    ssr::answer(ssr::change_member_role(member_id, role).await).await
}

/// Remove a member; their sessions end at once.
#[server(prefix = "/console/api", endpoint = "remove_member")]
pub async fn remove_member(member_id: String) -> Result<(), ConsoleError> {
    ssr::answer(ssr::remove_member(member_id).await).await
}

/// Who an invitation link is for (no session needed).
#[server(prefix = "/console/api", endpoint = "invitation")]
pub async fn load_invitation(token: String) -> Result<InvitationPreview, ConsoleError> {
    ssr::answer(ssr::load_invitation(token).await).await
}

/// Accept an invitation with a new password: signs the new member in.
#[server(prefix = "/console/api", endpoint = "accept_invitation")]
pub async fn accept_invitation(
    token: String,
    password: String,
    password_again: String,
) -> Result<(), ConsoleError> {
    ssr::answer(ssr::accept_invitation(token, password, password_again).await).await
}

/// The server functions' bodies, the backend from context and the `engram_console` cookie.
#[cfg(feature = "ssr")]
pub(crate) mod ssr {
    use crate::backend::ConsoleBackend;
    use crate::model::{
        AUDIT_PAGE_LIMIT, AuditFilters, AuditListing, AuditQuery, BulkDeleteOutcome,
        BulkDeletePreview, ConsoleCaller, ConsoleError, ConsoleRequestOrigin, InvitationPreview,
        KEY_SCOPES, KeyListing, MEMORY_PAGE_LIMIT, MemberListing, MemoryFilters, MemoryListQuery,
        MemoryListing, NewInvitation, NewKeyRequest, NewKeySecret, SessionInfo,
    };
    use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
    use leptos::prelude::use_context;
    use std::sync::Arc;

    pub async fn login(email: String, password: String) -> Result<(), ConsoleError> {
        let backend = backend()?;
        // How long an e-mail address or password may be is the sign-in use case's rule.
        let email = email.trim().to_owned();
        let device_token = request_headers()
            .await
            .and_then(|headers| cookie_from_headers(&headers, DEVICE_COOKIE));
        let tokens = match backend
            .login(email, password, device_token, &request_origin().await)
            .await
        {
            Ok(tokens) => tokens,
            Err(err) => {
                // No e-mail in the log: it is personal data, and sign-in history belongs to
                // the audit log.
                tracing::info!(error = %err, "console login refused");
                return Err(err);
            }
        };
        start_session_cookies(&tokens).await?;
        // The landing page of the member's role. Without JavaScript the form post follows
        // this redirect; the hydrated sign-in page loads it itself, as a whole page, so the
        // console comes in the account's language rather than the sign-in page's.
        if accepts_html().await {
            leptos_axum::redirect("/console");
        }
        Ok(())
    }

    /// Whether the caller is a plain form post (or a page render), not the browser's `fetch`.
    async fn accepts_html() -> bool {
        request_headers().await.is_some_and(|h| {
            h.get(header::ACCEPT)
                .and_then(|v| v.to_str().ok())
                .is_some_and(|v| v.contains("text/html"))
        })
    }

    async fn start_session_cookies(
        tokens: &crate::model::SessionTokens,
    ) -> Result<(), ConsoleError> {
        let secure = request_is_https().await;
        set_cookie(session_cookie(&tokens.access, secure)?);
        set_cookie(refresh_cookie(&tokens.refresh, secure)?);
        if let Some(device) = &tokens.device {
            set_cookie(device_cookie(device, secure)?);
        }
        Ok(())
    }

    pub async fn logout() -> Result<(), ConsoleError> {
        let backend = backend()?;
        if let Ok(caller) = caller().await {
            backend.logout(&caller).await;
        }
        let secure = request_is_https().await;
        set_cookie(clearing_cookie(secure));
        set_cookie(clearing_refresh_cookie(secure));
        leptos_axum::redirect("/console/login");
        Ok(())
    }

    pub async fn choose_language(language: String) -> Result<(), ConsoleError> {
        backend()?
            .choose_language(&caller().await?, &language)
            .await
    }

    pub async fn load_session() -> Result<SessionInfo, ConsoleError> {
        let backend = backend()?;
        let caller = caller().await?;
        let account = backend
            .current_account(&caller)
            .await
            .ok_or(ConsoleError::Unauthorized)?;
        let projects = backend.list_projects(&caller).await?;
        Ok(SessionInfo { account, projects })
    }

    /// The backend query for the filters: the chosen project or the account's first.
    async fn memory_query(
        backend: &Arc<dyn ConsoleBackend>,
        caller: &ConsoleCaller,
        filters: MemoryFilters,
    ) -> Result<Option<MemoryListQuery>, ConsoleError> {
        let Some(project_id) = chosen_project(backend, caller, filters.project_id).await? else {
            return Ok(None);
        };
        let short = |value: Option<String>| {
            non_empty(value).map(|text| text.chars().take(MAX_FILTER_CHARS).collect::<String>())
        };
        Ok(Some(MemoryListQuery {
            project_id,
            user_id: short(filters.user_id),
            kind: short(filters.kind),
            text: short(filters.text),
            limit: MEMORY_PAGE_LIMIT,
            agent_id: short(filters.agent_id),
            session_id: short(filters.session_id),
            state: short(filters.state),
            source: short(filters.source),
            category: short(filters.category),
            created_from: short(filters.created_from),
            created_to: short(filters.created_to),
            occurred_from: short(filters.occurred_from),
            occurred_to: short(filters.occurred_to),
            metadata: short(filters.metadata),
            min_confidence: short(filters.min_confidence),
            meaning: short(filters.meaning),
            min_score: short(filters.min_score),
            after: None,
        }))
    }

    pub async fn list_memories(
        filters: MemoryFilters,
        after: Option<String>,
    ) -> Result<MemoryListing, ConsoleError> {
        let backend = backend()?;
        let caller = caller().await?;
        let Some(mut query) = memory_query(&backend, &caller, filters).await? else {
            return Ok(MemoryListing::default());
        };
        query.after =
            non_empty(after).map(|cursor| cursor.chars().take(MAX_FILTER_CHARS).collect());
        let project_id = query.project_id.clone();
        let page = backend.list_memories(&caller, query).await?;
        Ok(MemoryListing {
            project_id: Some(project_id),
            page,
        })
    }

    pub async fn preview_bulk_delete(
        filters: MemoryFilters,
    ) -> Result<BulkDeletePreview, ConsoleError> {
        let backend = backend()?;
        let caller = caller().await?;
        let query = memory_query(&backend, &caller, filters)
            .await?
            .ok_or(ConsoleError::NotFound)?;
        backend.preview_bulk_delete(&caller, query).await
    }

    pub async fn bulk_delete(
        filters: MemoryFilters,
        expected: u64,
        reason: String,
    ) -> Result<BulkDeleteOutcome, ConsoleError> {
        let backend = backend()?;
        let caller = caller().await?;
        let query = memory_query(&backend, &caller, filters)
            .await?
            .ok_or(ConsoleError::NotFound)?;
        backend.bulk_delete(&caller, query, expected, reason).await
    }

    pub async fn load_audit(filters: AuditFilters) -> Result<AuditListing, ConsoleError> {
        let backend = backend()?;
        let caller = caller().await?;
        let Some(project_id) = chosen_project(&backend, &caller, filters.project_id).await? else {
            return Ok(AuditListing::default());
        };
        let query = AuditQuery {
            project_id: project_id.clone(),
            action: non_empty(filters.action),
            limit: AUDIT_PAGE_LIMIT,
            full: filters.full,
            actor: non_empty(filters.actor),
            target: non_empty(filters.target),
            since: non_empty(filters.since),
            until: non_empty(filters.until),
            before: filters.before,
        };
        let mut listing = backend.audit_log(&caller, query).await?;
        listing.project_id = Some(project_id);
        Ok(listing)
    }

    /// The project a call is about: the one given, or the account's first (`None` when the
    /// organization has no project).
    async fn chosen_project(
        backend: &std::sync::Arc<dyn ConsoleBackend>,
        caller: &ConsoleCaller,
        project_id: Option<String>,
    ) -> Result<Option<String>, ConsoleError> {
        match non_empty(project_id) {
            Some(id) => Ok(Some(id)),
            None => Ok(backend
                .list_projects(caller)
                .await?
                .into_iter()
                .next()
                .map(|first| first.id)),
        }
    }

    pub async fn load_subject(
        project_id: Option<String>,
        user_id: String,
    ) -> Result<crate::model::SubjectSummary, ConsoleError> {
        let backend = backend()?;
        let caller = caller().await?;
        let project_id = chosen_project(&backend, &caller, project_id)
            .await?
            .ok_or(ConsoleError::NotFound)?;
        backend
            .subject_summary(&caller, &project_id, &user_id)
            .await
    }

    pub async fn find_subjects(
        project_id: Option<String>,
        id_prefix: Option<String>,
        metadata: Option<String>,
    ) -> Result<Vec<crate::model::SubjectMatchRow>, ConsoleError> {
        let backend = backend()?;
        let caller = caller().await?;
        let project_id = chosen_project(&backend, &caller, project_id)
            .await?
            .ok_or(ConsoleError::NotFound)?;
        backend
            .find_subjects(&caller, &project_id, id_prefix, metadata)
            .await
    }

    pub async fn load_settings(
        project_id: Option<String>,
    ) -> Result<crate::model::GovernanceSettings, ConsoleError> {
        let backend = backend()?;
        let caller = caller().await?;
        let Some(project_id) = chosen_project(&backend, &caller, project_id).await? else {
            return Ok(Default::default());
        };
        backend.governance_settings(&caller, &project_id).await
    }

    pub async fn load_recall(
        project_id: Option<String>,
        from: Option<String>,
        to: Option<String>,
    ) -> Result<crate::model::RecallDashboard, ConsoleError> {
        let backend = backend()?;
        let caller = caller().await?;
        let Some(project_id) = chosen_project(&backend, &caller, project_id).await? else {
            return Ok(Default::default());
        };
        backend
            .recall_dashboard(
                &caller,
                &project_id,
                from.as_deref().unwrap_or_default(),
                to.as_deref().unwrap_or_default(),
            )
            .await
    }

    pub async fn load_recall_event(
        project_id: Option<String>,
        recall_id: String,
    ) -> Result<crate::model::RecallEventDetail, ConsoleError> {
        let backend = backend()?;
        let caller = caller().await?;
        let project_id = chosen_project(&backend, &caller, project_id)
            .await?
            .ok_or(ConsoleError::NotFound)?;
        backend.recall_event(&caller, &project_id, &recall_id).await
    }

    /// A text field as the backend takes it: blank is absent.
    fn given(text: Option<String>) -> Option<String> {
        text.map(|text| text.trim().to_string())
            .filter(|text| !text.is_empty())
    }

    pub async fn load_runs(
        project_id: Option<String>,
        user_id: Option<String>,
        status: Option<String>,
        before: Option<String>,
    ) -> Result<crate::model::RunListing, ConsoleError> {
        let backend = backend()?;
        let caller = caller().await?;
        let Some(project_id) = chosen_project(&backend, &caller, project_id).await? else {
            return Ok(Default::default());
        };
        let mut listing = backend
            .run_list(
                &caller,
                &project_id,
                given(user_id),
                given(status),
                given(before),
            )
            .await?;
        listing.project_id = Some(project_id);
        Ok(listing)
    }

    pub async fn load_run(
        project_id: Option<String>,
        run_id: String,
    ) -> Result<crate::model::RunTimelineDetail, ConsoleError> {
        let backend = backend()?;
        let caller = caller().await?;
        let project_id = chosen_project(&backend, &caller, project_id)
            .await?
            .ok_or(ConsoleError::NotFound)?;
        backend
            .run_timeline(&caller, &project_id, run_id.trim())
            .await
    }

    pub async fn load_recalls(
        project_id: Option<String>,
        user_id: Option<String>,
        session_id: Option<String>,
        memory_id: Option<String>,
        run_id: Option<String>,
        before: Option<String>,
    ) -> Result<crate::model::RecallListing, ConsoleError> {
        let backend = backend()?;
        let caller = caller().await?;
        let Some(project_id) = chosen_project(&backend, &caller, project_id).await? else {
            return Ok(Default::default());
        };
        let query = crate::model::RecallListQuery {
            project_id: project_id.clone(),
            user_id: given(user_id),
            session_id: given(session_id),
            memory_id: given(memory_id),
            run_id: given(run_id),
            before: given(before),
        };
        let mut listing = backend.recall_list(&caller, query).await?;
        listing.project_id = Some(project_id);
        Ok(listing)
    }

    pub async fn load_usage(
        project_id: Option<String>,
        days: Option<u32>,
    ) -> Result<crate::model::UsageOverview, ConsoleError> {
        let backend = backend()?;
        let caller = caller().await?;
        let Some(project_id) = chosen_project(&backend, &caller, project_id).await? else {
            return Ok(Default::default());
        };
        backend
            .usage_overview(&caller, &project_id, days.unwrap_or(30).clamp(1, 366))
            .await
    }

    pub async fn load_keys(project_id: Option<String>) -> Result<KeyListing, ConsoleError> {
        let backend = backend()?;
        let caller = caller().await?;
        let Some(project_id) = chosen_project(&backend, &caller, project_id).await? else {
            return Ok(KeyListing::default());
        };
        let mut listing = backend.list_keys(&caller, &project_id).await?;
        listing.project_id = Some(project_id);
        Ok(listing)
    }

    pub async fn create_key(
        project_id: Option<String>,
        label: String,
        checked: [Option<String>; 5],
        environment: Option<String>,
        expires_on: Option<String>,
        agents: Option<String>,
    ) -> Result<NewKeySecret, ConsoleError> {
        let backend = backend()?;
        let caller = caller().await?;
        let project_id = chosen_project(&backend, &caller, project_id)
            .await?
            .ok_or(ConsoleError::NotFound)?;
        let scopes: Vec<String> = KEY_SCOPES
            .iter()
            .zip(checked)
            .filter(|(_, checked)| checked.is_some())
            .map(|(scope, _)| scope.to_string())
            .collect();
        backend
            .create_key(
                &caller,
                NewKeyRequest {
                    project_id,
                    label: label.trim().chars().take(100).collect(),
                    scopes,
                    environment: non_empty(environment),
                    expires_on: non_empty(expires_on),
                    // Comma-separated agent ids; none: a key of every agent.
                    agents: non_empty(agents).map(|agents| {
                        agents
                            .split(',')
                            .map(str::trim)
                            .filter(|agent| !agent.is_empty())
                            .map(str::to_string)
                            .collect()
                    }),
                },
            )
            .await
    }

    pub async fn revoke_key(
        project_id: Option<String>,
        key_id: String,
    ) -> Result<(), ConsoleError> {
        let backend = backend()?;
        let caller = caller().await?;
        let project_id = chosen_project(&backend, &caller, project_id)
            .await?
            .ok_or(ConsoleError::NotFound)?;
        backend.revoke_key(&caller, &project_id, &key_id).await
    }

    pub async fn roll_key(
        project_id: Option<String>,
        key_id: String,
    ) -> Result<NewKeySecret, ConsoleError> {
        let backend = backend()?;
        let caller = caller().await?;
        let project_id = chosen_project(&backend, &caller, project_id)
            .await?
            .ok_or(ConsoleError::NotFound)?;
        backend.roll_key(&caller, &project_id, &key_id).await
    }

    pub async fn load_members() -> Result<MemberListing, ConsoleError> {
        backend()?.list_members(&caller().await?).await
    }

    pub async fn invite_member(email: String, role: String) -> Result<NewInvitation, ConsoleError> {
        let email = email.trim().to_owned();
        let mut invitation = backend()?
            .invite_member(&caller().await?, &email, role.trim())
            .await?;
        // A link to paste into an e-mail: absolute, on the host the inviter is using.
        if let Some(headers) = request_headers().await {
            let host = headers
                .get("x-forwarded-host")
                .or_else(|| headers.get(header::HOST))
                .and_then(|value| value.to_str().ok());
            if let Some(host) = host {
                let scheme = if is_https(&headers) { "https" } else { "http" };
                invitation.link_path = format!("{scheme}://{host}{}", invitation.link_path);
            }
        }
        Ok(invitation)
    }

    pub async fn revoke_invitation(invitation_id: String) -> Result<(), ConsoleError> {
        backend()?
            .revoke_invitation(&caller().await?, invitation_id.trim())
            .await
    }

    pub async fn change_member_role(member_id: String, role: String) -> Result<(), ConsoleError> {
        backend()?
            .change_member_role(&caller().await?, member_id.trim(), role.trim())
            .await
    }

    pub async fn remove_member(member_id: String) -> Result<(), ConsoleError> {
        backend()?
            .remove_member(&caller().await?, member_id.trim())
            .await
    }

    pub async fn load_invitation(token: String) -> Result<InvitationPreview, ConsoleError> {
        backend()?.preview_invitation(token.trim()).await
    }

    pub async fn accept_invitation(
        token: String,
        password: String,
        password_again: String,
    ) -> Result<(), ConsoleError> {
        // The two fields of the form must agree; what makes a good password is the use case's.
        if password != password_again {
            return Err(ConsoleError::InvalidInput(
                "the two passwords differ".into(),
            ));
        }
        let tokens = backend()?
            .accept_invitation(token.trim(), password, &request_origin().await)
            .await?;
        start_session_cookies(&tokens).await?;
        // The landing page of the member's role: for a plain form post; the hydrated
        // invitation page loads it itself, as a whole page (see `login`).
        if accepts_html().await {
            leptos_axum::redirect("/console");
        }
        Ok(())
    }

    /// Gives a failed call an HTTP status that says what went wrong (401, 404, 500) when the
    /// caller is the browser's `fetch`. Plain form posts (and in-process calls while a page
    /// renders, whose response is the page) accept `text/html`: their status is left alone,
    /// since it is the redirect back to the form or the page's own.
    pub async fn answer<T>(result: Result<T, ConsoleError>) -> Result<T, ConsoleError> {
        let Err(err) = result else {
            return result;
        };
        if !accepts_html().await
            && let Some(response) = use_context::<leptos_axum::ResponseOptions>()
        {
            if let ConsoleError::TooManyAttempts {
                retry_after_seconds,
            } = &err
            {
                response
                    .insert_header(header::RETRY_AFTER, HeaderValue::from(*retry_after_seconds));
            }
            response.set_status(match err {
                ConsoleError::Unauthorized | ConsoleError::InvalidCredentials => {
                    StatusCode::UNAUTHORIZED
                }
                ConsoleError::NotFound => StatusCode::NOT_FOUND,
                ConsoleError::Forbidden { .. }
                | ConsoleError::MissingPermission { .. }
                | ConsoleError::Denied(_) => StatusCode::FORBIDDEN,
                ConsoleError::TooManyAttempts { .. } => StatusCode::TOO_MANY_REQUESTS,
                ConsoleError::InvalidInput(_) => StatusCode::BAD_REQUEST,
                ConsoleError::Refused { .. } => StatusCode::CONFLICT,
                ConsoleError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
            });
        }
        Err(err)
    }

    /// Name of the session cookie.
    pub const SESSION_COOKIE: &str = "engram_console";
    pub const REFRESH_COOKIE: &str = "engram_console_refresh";
    /// The browser's device token: sent only to the sign-in route, kept across sign-outs.
    pub const DEVICE_COOKIE: &str = "engram_console_device";

    /// Longest text filter passed on to the backend; longer input cannot match anything useful.
    pub const MAX_FILTER_CHARS: usize = 500;

    pub fn backend() -> Result<Arc<dyn ConsoleBackend>, ConsoleError> {
        use_context::<Arc<dyn ConsoleBackend>>().ok_or_else(|| {
            tracing::error!("console backend missing from leptos context");
            ConsoleError::Internal("the console is not configured".into())
        })
    }

    pub fn non_empty(value: Option<String>) -> Option<String> {
        value.map(|v| v.trim().to_owned()).filter(|v| !v.is_empty())
    }

    async fn request_headers() -> Option<HeaderMap> {
        leptos_axum::extract::<HeaderMap>().await.ok()
    }

    /// The caller of the current request: its session token (`Unauthorized` without the
    /// cookie) and where it came from.
    pub async fn caller() -> Result<ConsoleCaller, ConsoleError> {
        let headers = request_headers().await.ok_or(ConsoleError::Unauthorized)?;
        let session_token = token_from_headers(&headers).ok_or(ConsoleError::Unauthorized)?;
        Ok(ConsoleCaller::new(session_token, request_origin().await))
    }

    /// The client's address, user agent and request id, for the audit log.
    pub async fn request_origin() -> ConsoleRequestOrigin {
        let peer = leptos_axum::extract::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
            .await
            .ok()
            .map(|axum::extract::ConnectInfo(address)| address.ip().to_string());
        let headers = request_headers().await.unwrap_or_default();
        origin_from(&headers, peer)
    }

    pub fn origin_from(headers: &HeaderMap, peer_ip: Option<String>) -> ConsoleRequestOrigin {
        let header = |name: &str| {
            headers
                .get(name)
                .and_then(|value| value.to_str().ok())
                .map(|value| value.chars().take(256).collect::<String>())
        };
        ConsoleRequestOrigin {
            ip: peer_ip,
            user_agent: header("user-agent"),
            request_id: header("x-request-id"),
        }
    }

    pub async fn request_is_https() -> bool {
        request_headers().await.is_some_and(|h| is_https(&h))
    }

    /// Reads `engram_console` (the access token) from the `Cookie` header(s).
    pub fn token_from_headers(headers: &HeaderMap) -> Option<String> {
        cookie_from_headers(headers, SESSION_COOKIE)
    }

    /// Reads `engram_console_refresh` from the `Cookie` header(s).
    pub fn refresh_token_from_headers(headers: &HeaderMap) -> Option<String> {
        cookie_from_headers(headers, REFRESH_COOKIE)
    }

    fn cookie_from_headers(headers: &HeaderMap, cookie_name: &str) -> Option<String> {
        headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .filter_map(|pair| pair.trim().split_once('='))
            .find(|(name, _)| *name == cookie_name)
            .map(|(_, value)| value.trim_matches('"').to_owned())
            .filter(|value| !value.is_empty())
    }

    /// The request's `Cookie` header with both session cookies replaced by `tokens` (after a
    /// refresh, so the handlers downstream see the new session).
    pub fn with_session_cookies(
        headers: &HeaderMap,
        access: &str,
        refresh: &str,
    ) -> Option<HeaderValue> {
        let others: Vec<String> = headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .map(str::trim)
            .filter(|pair| {
                let name = pair.split_once('=').map_or(*pair, |(name, _)| name);
                !pair.is_empty() && name != SESSION_COOKIE && name != REFRESH_COOKIE
            })
            .map(str::to_owned)
            .collect();
        let mut cookie = others.join("; ");
        if !cookie.is_empty() {
            cookie.push_str("; ");
        }
        cookie.push_str(&format!(
            "{SESSION_COOKIE}={access}; {REFRESH_COOKIE}={refresh}"
        ));
        HeaderValue::from_str(&cookie).ok()
    }

    /// Whether the browser reached us over https. The gateway usually sits behind a
    /// TLS-terminating proxy, so the proxy's `X-Forwarded-Proto` / `Forwarded` decide. A
    /// client forging them over plain http only gets a `Secure` cookie its browser drops.
    pub fn is_https(headers: &HeaderMap) -> bool {
        let forwarded_proto = headers
            .get("x-forwarded-proto")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(',').next())
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("https"));
        let forwarded = headers
            .get(header::FORWARDED)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| {
                v.split([';', ','])
                    .any(|part| part.trim().eq_ignore_ascii_case("proto=https"))
            });
        forwarded_proto || forwarded
    }

    /// RFC 6265 `cookie-octet`: what may appear in a cookie value without quoting.
    fn is_cookie_octet(b: u8) -> bool {
        matches!(b, 0x21 | 0x23..=0x2B | 0x2D..=0x3A | 0x3C..=0x5B | 0x5D..=0x7E)
    }

    fn cookie_attributes(secure: bool) -> &'static str {
        if secure {
            "Path=/console; HttpOnly; SameSite=Strict; Secure"
        } else {
            "Path=/console; HttpOnly; SameSite=Strict"
        }
    }

    /// The `Set-Cookie` value carrying a new session. A browser-session cookie (no
    /// `Max-Age`): the backend owns expiry, so a stale cookie simply stops working.
    pub fn session_cookie(token: &str, secure: bool) -> Result<HeaderValue, ConsoleError> {
        if token.is_empty() || !token.bytes().all(is_cookie_octet) {
            tracing::error!("console backend issued a session token that is not cookie-safe");
            return Err(ConsoleError::Internal("could not start a session".into()));
        }
        let value = format!("{SESSION_COOKIE}={token}; {}", cookie_attributes(secure));
        HeaderValue::from_str(&value)
            .map_err(|_| ConsoleError::Internal("could not start a session".into()))
    }

    /// The `Set-Cookie` value carrying a refresh token (same attributes as the session's).
    pub fn refresh_cookie(token: &str, secure: bool) -> Result<HeaderValue, ConsoleError> {
        if token.is_empty() || !token.bytes().all(is_cookie_octet) {
            tracing::error!("console backend issued a refresh token that is not cookie-safe");
            return Err(ConsoleError::Internal("could not start a session".into()));
        }
        let value = format!("{REFRESH_COOKIE}={token}; {}", cookie_attributes(secure));
        HeaderValue::from_str(&value)
            .map_err(|_| ConsoleError::Internal("could not start a session".into()))
    }

    /// The `Set-Cookie` value carrying the browser's device token: sent back only to the
    /// sign-in route and kept for the device token's lifetime (not cleared by signing out).
    pub fn device_cookie(token: &str, secure: bool) -> Result<HeaderValue, ConsoleError> {
        if token.is_empty() || !token.bytes().all(is_cookie_octet) {
            tracing::error!("console backend issued a device token that is not cookie-safe");
            return Err(ConsoleError::Internal("could not start a session".into()));
        }
        let value = format!(
            "{DEVICE_COOKIE}={token}; Path=/console/api/login; Max-Age={}; HttpOnly; SameSite=Strict{}",
            DEVICE_COOKIE_MAX_AGE_SECONDS,
            if secure { "; Secure" } else { "" }
        );
        HeaderValue::from_str(&value)
            .map_err(|_| ConsoleError::Internal("could not start a session".into()))
    }

    /// The device cookie's lifetime: the engine's device tokens last 180 days.
    const DEVICE_COOKIE_MAX_AGE_SECONDS: u64 = 180 * 24 * 3_600;

    /// The `Set-Cookie` value that removes the refresh cookie.
    pub fn clearing_refresh_cookie(secure: bool) -> HeaderValue {
        let value = format!(
            "{REFRESH_COOKIE}=; Max-Age=0; {}",
            cookie_attributes(secure)
        );
        HeaderValue::from_str(&value).unwrap_or_else(|_| HeaderValue::from_static(""))
    }

    /// The `Set-Cookie` value that removes the session cookie.
    pub fn clearing_cookie(secure: bool) -> HeaderValue {
        let value = format!(
            "{SESSION_COOKIE}=; Max-Age=0; {}",
            cookie_attributes(secure)
        );
        // Built only from constants, so it is always a valid header value.
        HeaderValue::from_str(&value).unwrap_or_else(|_| HeaderValue::from_static(""))
    }

    pub fn set_cookie(value: HeaderValue) {
        if let Some(response) = use_context::<leptos_axum::ResponseOptions>() {
            response.append_header(header::SET_COOKIE, value);
        } else {
            tracing::error!("console response options missing; cookie not set");
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn reads_the_session_cookie_among_others() {
            let mut headers = HeaderMap::new();
            headers.insert(
                header::COOKIE,
                HeaderValue::from_static("a=1; engram_console=tok-123; b=2"),
            );
            assert_eq!(token_from_headers(&headers).as_deref(), Some("tok-123"));
        }

        #[test]
        fn refuses_tokens_that_would_break_the_header() {
            assert!(session_cookie("abc;def", false).is_err());
            assert!(session_cookie("abc def", false).is_err());
            let ok = session_cookie("abc_DEF-123", true).expect("cookie-safe token");
            assert_eq!(
                ok.to_str().ok(),
                Some(
                    "engram_console=abc_DEF-123; Path=/console; HttpOnly; SameSite=Strict; Secure"
                )
            );
        }

        #[test]
        fn https_is_taken_from_the_proxy_headers() {
            let mut headers = HeaderMap::new();
            assert!(!is_https(&headers));
            headers.insert("x-forwarded-proto", HeaderValue::from_static("https"));
            assert!(is_https(&headers));
            let mut headers = HeaderMap::new();
            headers.insert(
                header::FORWARDED,
                HeaderValue::from_static("for=1.2.3.4;proto=https"),
            );
            assert!(is_https(&headers));
        }
    }
}
