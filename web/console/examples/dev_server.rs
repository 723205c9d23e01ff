//! Development-only server: the console over an in-memory `ConsoleBackend` with seeded data.
//! Not a test and not the real backend (the gateway implements that against the database).
//!
//! ```sh
//! scripts/build-console.sh                       # the hydrate bundle into target/console-pkg
//! cargo run -p engram-console --features dev-server --example dev_server
//! ```
//! Environment: `CONSOLE_DEV_LISTEN` (default `127.0.0.1:3900`), `CONSOLE_DEV_PKG_DIR`
//! (default `<workspace>/target/console-pkg`). Sign in as `admin@example.com` / `dev-password`.
//! On start it prints the seeded contents of the first project as JSON, the form
//! `ENGRAM_EXPECT_CONTENTS` of `tests/browser/console.spec.mjs` expects.

use engram_console::{
    ConsoleAccount, ConsoleAssets, ConsoleBackend, ConsoleCaller, ConsoleError, MemoryListQuery,
    MemoryPage, MemoryRow, ProjectSummary, console_router,
};
use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

const EMAIL: &str = "admin@example.com";
const PASSWORD: &str = "dev-password";

/// (project id, user id, kind, key, content, state, version)
type SeedRow = (
    &'static str,
    &'static str,
    &'static str,
    Option<&'static str>,
    &'static str,
    &'static str,
    i64,
);

struct DevBackend {
    sessions: Mutex<HashMap<String, ConsoleAccount>>,
    projects: Vec<ProjectSummary>,
    /// (project id, row)
    memories: Vec<(String, MemoryRow)>,
    counter: AtomicU64,
}

impl DevBackend {
    fn seeded() -> Self {
        let projects = vec![
            ProjectSummary {
                id: "p-support".into(),
                name: "Support bot".into(),
            },
            ProjectSummary {
                id: "p-sales".into(),
                name: "Sales assistant".into(),
            },
        ];
        let rows: [SeedRow; 7] = [
            (
                "p-support",
                "u-42",
                "preference",
                Some("reply_style"),
                "Prefers short answers.",
                "active",
                2,
            ),
            (
                "p-support",
                "u-42",
                "semantic",
                None,
                "Works at Acme Corp as a data engineer.",
                "active",
                1,
            ),
            (
                "p-support",
                "u-7",
                "episodic",
                None,
                "Reported a login failure on 2025-03-02.",
                "active",
                1,
            ),
            (
                "p-support",
                "u-7",
                "procedural",
                None,
                "Always answer in French.",
                "active",
                1,
            ),
            (
                "p-support",
                "u-42",
                "preference",
                Some("reply_style"),
                "Prefers long, detailed answers.",
                "superseded",
                1,
            ),
            (
                "p-sales",
                "u-100",
                "semantic",
                None,
                "Budget approved for Q3.",
                "active",
                1,
            ),
            (
                "p-sales",
                "u-101",
                "preference",
                None,
                "Wants invoices in EUR.",
                "active",
                1,
            ),
        ];
        let memories = rows
            .into_iter()
            .enumerate()
            .map(|(i, (project, user, kind, key, content, state, version))| {
                let row = MemoryRow {
                    id: format!("0193-dev-{i:04}"),
                    user_id: Some(user.into()),
                    agent_id: None,
                    session_id: None,
                    kind: kind.into(),
                    key: key.map(Into::into),
                    content: content.into(),
                    state: state.into(),
                    version,
                    updated_at: format!("2025-06-0{}T09:{:02}:00.000Z", 1 + i % 9, i * 7),
                    source: "user_stated".into(),
                    categories: Vec::new(),
                    immutable: false,
                    legal_hold: false,
                    visibility: "shared".into(),
                    shared_with: None,
                    verified_by: None,
                    score: None,
                };
                (project.to_owned(), row)
            })
            .collect();
        Self {
            sessions: Mutex::new(HashMap::new()),
            projects,
            memories,
            counter: AtomicU64::new(0),
        }
    }

    /// Not a secure token: good enough for a development server on localhost.
    fn new_token(&self) -> String {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let a = RandomState::new().hash_one(n);
        let b = RandomState::new().hash_one(a);
        format!("dev{a:016x}{b:016x}")
    }

    fn account(&self, token: &str) -> Option<ConsoleAccount> {
        self.sessions.lock().ok()?.get(token).cloned()
    }
}

#[engram_console::async_trait]
impl ConsoleBackend for DevBackend {
    async fn login(
        &self,
        email: String,
        password: String,
        _device_token: Option<String>,
        _origin: &engram_console::ConsoleRequestOrigin,
    ) -> Result<engram_console::model::SessionTokens, ConsoleError> {
        if email != EMAIL || password != PASSWORD {
            return Err(ConsoleError::InvalidCredentials);
        }
        let token = self.new_token();
        let account = ConsoleAccount {
            email,
            organization_name: "Acme (dev)".into(),
            role: "owner".into(),
            // The owner may use every page.
            functions: engram_console::topbar::PAGES
                .iter()
                .map(|page| page.function.to_string())
                .collect(),
            language: None,
        };
        self.sessions
            .lock()
            .map_err(|_| ConsoleError::Internal("session store poisoned".into()))?
            .insert(token.clone(), account);
        // The dev server has no refresh: sessions live until the process ends.
        Ok(engram_console::model::SessionTokens {
            access: token,
            refresh: "dev-no-refresh".to_string(),
            device: None,
        })
    }

    async fn refresh(&self, _refresh_token: &str) -> Option<engram_console::model::SessionTokens> {
        None
    }

    async fn logout(&self, caller: &ConsoleCaller) {
        if let Ok(mut sessions) = self.sessions.lock() {
            sessions.remove(&caller.session_token);
        }
    }

    async fn current_account(&self, caller: &ConsoleCaller) -> Option<ConsoleAccount> {
        self.account(&caller.session_token)
    }

    async fn choose_language(
        &self,
        caller: &ConsoleCaller,
        language: &str,
    ) -> Result<(), ConsoleError> {
        let mut sessions = self
            .sessions
            .lock()
            .map_err(|_| ConsoleError::Internal("sessions lock poisoned".into()))?;
        let account = sessions
            .get_mut(&caller.session_token)
            .ok_or(ConsoleError::Unauthorized)?;
        account.language = Some(language.to_string()).filter(|tag| !tag.is_empty());
        Ok(())
    }

    async fn list_projects(
        &self,
        caller: &ConsoleCaller,
    ) -> Result<Vec<ProjectSummary>, ConsoleError> {
        self.account(&caller.session_token)
            .ok_or(ConsoleError::Unauthorized)?;
        Ok(self.projects.clone())
    }

    async fn list_memories(
        &self,
        caller: &ConsoleCaller,
        query: MemoryListQuery,
    ) -> Result<MemoryPage, ConsoleError> {
        self.account(&caller.session_token)
            .ok_or(ConsoleError::Unauthorized)?;
        if !self.projects.iter().any(|p| p.id == query.project_id) {
            return Err(ConsoleError::NotFound);
        }
        let text = query.text.as_deref().map(str::to_lowercase);
        let memories: Vec<MemoryRow> = self
            .memories
            .iter()
            .filter(|(project, _)| *project == query.project_id)
            .map(|(_, row)| row)
            .filter(|row| query.kind.as_ref().is_none_or(|k| *k == row.kind))
            .filter(|row| query.user_id.is_none() || row.user_id == query.user_id)
            .filter(|row| {
                text.as_ref().is_none_or(|t| {
                    row.content.to_lowercase().contains(t)
                        || row
                            .user_id
                            .as_deref()
                            .is_some_and(|u| u.to_lowercase().contains(t))
                })
            })
            .take(query.limit as usize)
            .cloned()
            .collect();
        Ok(MemoryPage {
            total_shown: memories.len(),
            total_matching: Some(memories.len() as u64),
            memories,
            // The dev server shows one page.
            next_cursor: None,
        })
    }

    /// The dev server keeps no audit trail: an empty, trivially verified log.
    async fn audit_log(
        &self,
        caller: &ConsoleCaller,
        query: engram_console::model::AuditQuery,
    ) -> Result<engram_console::model::AuditListing, ConsoleError> {
        self.account(&caller.session_token)
            .ok_or(ConsoleError::Unauthorized)?;
        Ok(engram_console::model::AuditListing {
            project_id: Some(query.project_id),
            events: Vec::new(),
            chain: engram_console::model::AuditChainStatus {
                verified: true,
                ..Default::default()
            },
            next_before: None,
        })
    }

    async fn list_keys(
        &self,
        _caller: &ConsoleCaller,
        _project_id: &str,
    ) -> Result<engram_console::model::KeyListing, ConsoleError> {
        Ok(engram_console::model::KeyListing::default())
    }

    async fn create_key(
        &self,
        _caller: &ConsoleCaller,
        _request: engram_console::model::NewKeyRequest,
    ) -> Result<engram_console::model::NewKeySecret, ConsoleError> {
        Err(ConsoleError::Internal(
            "the dev server has no API keys".into(),
        ))
    }

    async fn revoke_key(
        &self,
        _caller: &ConsoleCaller,
        _project_id: &str,
        _key_id: &str,
    ) -> Result<(), ConsoleError> {
        Err(ConsoleError::NotFound)
    }

    async fn roll_key(
        &self,
        _caller: &ConsoleCaller,
        _project_id: &str,
        _key_id: &str,
    ) -> Result<engram_console::model::NewKeySecret, ConsoleError> {
        Err(ConsoleError::NotFound)
    }

    async fn export_audit_csv(
        &self,
        caller: &ConsoleCaller,
        _query: engram_console::model::AuditQuery,
    ) -> Result<String, ConsoleError> {
        self.account(&caller.session_token)
            .ok_or(ConsoleError::Unauthorized)?;
        Ok("id,sequence,at,actor_type,actor_id,action,target_type,target_ids,outcome,ip,user_agent,request_id,details,hash\n".to_string())
    }

    /// The dev server has one member (the signed-in owner) and no invitations.
    async fn list_members(
        &self,
        caller: &ConsoleCaller,
    ) -> Result<engram_console::model::MemberListing, ConsoleError> {
        let account = self
            .account(&caller.session_token)
            .ok_or(ConsoleError::Unauthorized)?;
        Ok(engram_console::model::MemberListing {
            members: vec![engram_console::model::MemberRow {
                id: "dev-owner".into(),
                email: account.email,
                role: account.role,
                joined_at: "2026-01-01T00:00:00+00:00".into(),
                is_you: true,
            }],
            invitations: Vec::new(),
            assignable_roles: Vec::new(),
        })
    }

    async fn invite_member(
        &self,
        _caller: &ConsoleCaller,
        _email: &str,
        _role: &str,
    ) -> Result<engram_console::model::NewInvitation, ConsoleError> {
        Err(ConsoleError::refused(
            "conflict",
            "the dev server has no invitations".into(),
        ))
    }

    async fn revoke_invitation(
        &self,
        _caller: &ConsoleCaller,
        _invitation_id: &str,
    ) -> Result<(), ConsoleError> {
        Err(ConsoleError::NotFound)
    }

    async fn change_member_role(
        &self,
        _caller: &ConsoleCaller,
        _member_id: &str,
        _role: &str,
    ) -> Result<(), ConsoleError> {
        Err(ConsoleError::NotFound)
    }

    async fn remove_member(
        &self,
        _caller: &ConsoleCaller,
        _member_id: &str,
    ) -> Result<(), ConsoleError> {
        Err(ConsoleError::NotFound)
    }

    async fn preview_invitation(
        &self,
        _token: &str,
    ) -> Result<engram_console::model::InvitationPreview, ConsoleError> {
        Err(ConsoleError::NotFound)
    }

    async fn accept_invitation(
        &self,
        _token: &str,
        _password: String,
        _origin: &engram_console::ConsoleRequestOrigin,
    ) -> Result<engram_console::model::SessionTokens, ConsoleError> {
        Err(ConsoleError::NotFound)
    }

    // The dev server's data is read-only: the compliance actions say so.
    async fn memory_detail(
        &self,
        _caller: &ConsoleCaller,
        _project_id: &str,
        _memory_id: &str,
    ) -> Result<engram_console::model::MemoryDetail, ConsoleError> {
        Err(ConsoleError::NotFound)
    }

    async fn correct_memory(
        &self,
        _caller: &ConsoleCaller,
        _project_id: &str,
        _memory_id: &str,
        _correction: engram_console::model::MemoryCorrection,
    ) -> Result<(), ConsoleError> {
        Err(ConsoleError::refused(
            "conflict",
            "the dev server is read-only".into(),
        ))
    }

    async fn delete_memory(
        &self,
        _caller: &ConsoleCaller,
        _project_id: &str,
        _memory_id: &str,
        _reason: String,
    ) -> Result<(), ConsoleError> {
        Err(ConsoleError::refused(
            "conflict",
            "the dev server is read-only".into(),
        ))
    }

    async fn set_memory_flags(
        &self,
        _caller: &ConsoleCaller,
        _project_id: &str,
        _memory_id: &str,
        _immutable: Option<bool>,
        _legal_hold: Option<bool>,
        _reason: String,
    ) -> Result<(), ConsoleError> {
        Err(ConsoleError::refused(
            "conflict",
            "the dev server is read-only".into(),
        ))
    }

    async fn set_memory_visibility(
        &self,
        _caller: &ConsoleCaller,
        _project_id: &str,
        _memory_id: &str,
        _visibility: String,
        _reason: String,
    ) -> Result<(), ConsoleError> {
        Err(ConsoleError::refused(
            "conflict",
            "the dev server is read-only".into(),
        ))
    }

    async fn verify_memory(
        &self,
        _caller: &ConsoleCaller,
        _project_id: &str,
        _memory_id: &str,
        _verified: bool,
        _reason: String,
    ) -> Result<(), ConsoleError> {
        Err(ConsoleError::refused(
            "conflict",
            "the dev server is read-only".into(),
        ))
    }

    async fn preview_bulk_delete(
        &self,
        _caller: &ConsoleCaller,
        _query: MemoryListQuery,
    ) -> Result<engram_console::model::BulkDeletePreview, ConsoleError> {
        Err(ConsoleError::refused(
            "conflict",
            "the dev server is read-only".into(),
        ))
    }

    async fn bulk_delete(
        &self,
        _caller: &ConsoleCaller,
        _query: MemoryListQuery,
        _expected: u64,
        _reason: String,
    ) -> Result<engram_console::model::BulkDeleteOutcome, ConsoleError> {
        Err(ConsoleError::refused(
            "conflict",
            "the dev server is read-only".into(),
        ))
    }

    async fn subject_summary(
        &self,
        _caller: &ConsoleCaller,
        _project_id: &str,
        _user_id: &str,
    ) -> Result<engram_console::model::SubjectSummary, ConsoleError> {
        Err(ConsoleError::NotFound)
    }

    async fn find_subjects(
        &self,
        _caller: &ConsoleCaller,
        _project_id: &str,
        _id_prefix: Option<String>,
        _metadata: Option<String>,
    ) -> Result<Vec<engram_console::model::SubjectMatchRow>, ConsoleError> {
        Ok(Vec::new())
    }

    async fn request_erasure(
        &self,
        _caller: &ConsoleCaller,
        _project_id: &str,
        _user_id: &str,
        _confirm: &str,
    ) -> Result<engram_console::model::ErasureStatus, ConsoleError> {
        Err(ConsoleError::refused(
            "conflict",
            "the dev server is read-only".into(),
        ))
    }

    async fn request_organization_erasure(
        &self,
        _caller: &ConsoleCaller,
        _project_id: &str,
        _user_id: &str,
        _confirm: &str,
    ) -> Result<engram_console::model::ErasureStatus, ConsoleError> {
        Err(ConsoleError::refused(
            "conflict",
            "the dev server is read-only".into(),
        ))
    }

    async fn erasure_status(
        &self,
        _caller: &ConsoleCaller,
        _project_id: &str,
        _task_id: &str,
    ) -> Result<engram_console::model::ErasureStatus, ConsoleError> {
        Err(ConsoleError::NotFound)
    }

    async fn export_subject(
        &self,
        _caller: &ConsoleCaller,
        _project_id: &str,
        _user_id: &str,
    ) -> Result<String, ConsoleError> {
        Err(ConsoleError::NotFound)
    }

    async fn governance_settings(
        &self,
        _caller: &ConsoleCaller,
        _project_id: &str,
    ) -> Result<engram_console::model::GovernanceSettings, ConsoleError> {
        Err(ConsoleError::refused(
            "conflict",
            "the dev server has no settings".into(),
        ))
    }

    async fn save_governance_settings(
        &self,
        _caller: &ConsoleCaller,
        _project_id: &str,
        _pii_redaction: &str,
        _retention_days: Vec<(String, Option<u32>)>,
        _relevance_floor: &str,
    ) -> Result<(), ConsoleError> {
        Err(ConsoleError::refused(
            "conflict",
            "the dev server is read-only".into(),
        ))
    }

    async fn sweep_retention_now(
        &self,
        _caller: &ConsoleCaller,
        _project_id: &str,
    ) -> Result<u64, ConsoleError> {
        Err(ConsoleError::refused(
            "conflict",
            "the dev server is read-only".into(),
        ))
    }

    async fn recall_dashboard(
        &self,
        _caller: &ConsoleCaller,
        _project_id: &str,
        _from: &str,
        _to: &str,
    ) -> Result<engram_console::model::RecallDashboard, ConsoleError> {
        Err(ConsoleError::refused(
            "conflict",
            "the dev server records no recall events".into(),
        ))
    }

    async fn create_evaluation_set(
        &self,
        _caller: &ConsoleCaller,
        _form: engram_console::model::NewEvaluationSetForm,
    ) -> Result<(), ConsoleError> {
        Err(ConsoleError::refused(
            "conflict",
            "the dev server runs no evaluations".into(),
        ))
    }

    async fn run_evaluation_set(
        &self,
        _caller: &ConsoleCaller,
        _project_id: &str,
        _set_id: &str,
    ) -> Result<(), ConsoleError> {
        Err(ConsoleError::refused(
            "conflict",
            "the dev server runs no evaluations".into(),
        ))
    }

    async fn recall_event(
        &self,
        _caller: &ConsoleCaller,
        _project_id: &str,
        _recall_id: &str,
    ) -> Result<engram_console::model::RecallEventDetail, ConsoleError> {
        Err(ConsoleError::NotFound)
    }

    // The dev server keeps no runs or recalls: its pages show their empty states.
    async fn run_list(
        &self,
        _caller: &ConsoleCaller,
        project_id: &str,
        _user_id: Option<String>,
        _status: Option<String>,
        _before: Option<String>,
    ) -> Result<engram_console::model::RunListing, ConsoleError> {
        Ok(engram_console::model::RunListing {
            project_id: Some(project_id.to_string()),
            ..Default::default()
        })
    }

    async fn run_timeline(
        &self,
        _caller: &ConsoleCaller,
        _project_id: &str,
        _run_id: &str,
    ) -> Result<engram_console::model::RunTimelineDetail, ConsoleError> {
        Err(ConsoleError::NotFound)
    }

    async fn recall_list(
        &self,
        _caller: &ConsoleCaller,
        query: engram_console::model::RecallListQuery,
    ) -> Result<engram_console::model::RecallListing, ConsoleError> {
        Ok(engram_console::model::RecallListing {
            project_id: Some(query.project_id),
            ..Default::default()
        })
    }

    async fn usage_overview(
        &self,
        _caller: &ConsoleCaller,
        _project_id: &str,
        _days: u32,
    ) -> Result<engram_console::model::UsageOverview, ConsoleError> {
        Err(ConsoleError::refused(
            "conflict",
            "the dev server meters no usage".into(),
        ))
    }

    async fn save_spend_limits(
        &self,
        _caller: &ConsoleCaller,
        _form: engram_console::model::SpendLimitsForm,
    ) -> Result<(), ConsoleError> {
        Err(ConsoleError::refused(
            "conflict",
            "the dev server is read-only".into(),
        ))
    }

    async fn price_book(
        &self,
        _caller: &ConsoleCaller,
    ) -> Result<engram_console::model::PriceBook, ConsoleError> {
        Err(ConsoleError::refused(
            "conflict",
            "the dev server has no prices".into(),
        ))
    }

    async fn add_organization_price(
        &self,
        _caller: &ConsoleCaller,
        _form: engram_console::model::NewPriceForm,
    ) -> Result<String, ConsoleError> {
        Err(ConsoleError::refused(
            "conflict",
            "the dev server is read-only".into(),
        ))
    }

    async fn withdraw_organization_price(
        &self,
        _caller: &ConsoleCaller,
        _price_id: &str,
    ) -> Result<(), ConsoleError> {
        Err(ConsoleError::refused(
            "conflict",
            "the dev server is read-only".into(),
        ))
    }

    async fn organization_statement(
        &self,
        _caller: &ConsoleCaller,
        _month: &str,
    ) -> Result<engram_console::model::StatementPage, ConsoleError> {
        Err(ConsoleError::refused(
            "conflict",
            "the dev server has no statements".into(),
        ))
    }

    async fn organization_statement_csv(
        &self,
        _caller: &ConsoleCaller,
        _month: &str,
    ) -> Result<String, ConsoleError> {
        Err(ConsoleError::refused(
            "conflict",
            "the dev server has no statements".into(),
        ))
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();

    let listen = std::env::var("CONSOLE_DEV_LISTEN").unwrap_or_else(|_| "127.0.0.1:3900".into());
    let assets = std::env::var("CONSOLE_DEV_PKG_DIR")
        .map(ConsoleAssets::new)
        .unwrap_or_default();

    let backend = DevBackend::seeded();
    let first_project = backend.projects[0].id.clone();
    let expect: Vec<&str> = backend
        .memories
        .iter()
        .filter(|(p, row)| *p == first_project && row.state == "active")
        .map(|(_, row)| row.content.as_str())
        .collect();
    println!("ENGRAM_EXPECT_CONTENTS={}", serde_json::to_string(&expect)?);

    let app = console_router(Arc::new(backend), assets);
    let listener = tokio::net::TcpListener::bind(&listen).await?;
    tracing::info!(url = %format!("http://{}/console", listener.local_addr()?), "dev console listening");
    axum::serve(listener, app).await?;
    Ok(())
}
