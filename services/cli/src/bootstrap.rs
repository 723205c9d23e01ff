//! First start of an empty data dir (organization, project, owner account, API key, written
//! once to `bootstrap.json` with mode 0600), the server secret, and `admin create-project`.

use anyhow::Result;
use clap::Args;
use engram_engine::console_credentials::hash_password;
use engram_storage::{ApiKeyPepper, Storage};
use serde::Serialize;
use std::path::Path;

use crate::secrets::{SERVER_SECRET_FILE, write_private_file};
pub use crate::secrets::{ServerSecrets, load_or_create_server_secrets, server_secrets};
use engram_core::DeploymentOperator;
use engram_engine::deployment::{
    CreateMemberRequest, CreateOrganizationRequest, CreateProjectRequest, DeploymentAdmin,
};

pub const BOOTSTRAP_FILE: &str = "bootstrap.json";
pub const OWNER_EMAIL: &str = "owner@engram.local";

#[derive(Debug, Serialize)]
pub struct BootstrapFile {
    pub org_id: String,
    pub project_id: String,
    pub api_key: String,
    pub console_email: String,
    pub console_password: String,
}

/// On an empty database, create the first tenant and write its credentials once to
/// `bootstrap_path` (mode 0600); `None` when the database already has an organization.
pub async fn bootstrap_if_empty(
    storage: &Storage,
    bootstrap_path: &Path,
    secrets: &ServerSecrets,
) -> Result<Option<BootstrapFile>> {
    if storage.organization_count().await? > 0 {
        return Ok(None);
    }
    let console_password = engram_engine::deployment::new_console_password();
    let password_hash = hash_password(&console_password).map_err(anyhow::Error::msg)?;
    let record = storage
        .bootstrap_organization(
            "Default organization",
            "Default project",
            OWNER_EMAIL,
            &password_hash,
            &secrets.api_key_pepper,
        )
        .await?;
    let file = BootstrapFile {
        org_id: record.organization_id.to_string(),
        project_id: record.project_id.to_string(),
        api_key: record.api_key,
        console_email: OWNER_EMAIL.to_string(),
        console_password,
    };
    write_private_file(
        bootstrap_path,
        serde_json::to_string_pretty(&file)?.as_bytes(),
    )?;
    Ok(Some(file))
}

#[derive(Debug, Args)]
pub struct CreateProjectArgs {
    #[command(flatten)]
    pub deployment: crate::config::AdminDeploymentArgs,
    /// Name of the new project.
    #[arg(long)]
    pub name: String,
    /// The organization the project belongs to, by id or exact name; default: the one
    /// created when the data dir was bootstrapped.
    #[arg(long)]
    pub organization: Option<String>,
    /// Print `{"project_id", "organization_id", "api_key"}` as JSON.
    #[arg(long)]
    pub json: bool,
}

/// The deployment's secrets, for commands that make keys or start an organization's audit
/// chain: without the secret they would invent one the gateways do not share, and neither
/// the keys nor the chain would verify, so its absence is refused.
fn required_secrets(deployment: &crate::config::AdminDeploymentArgs) -> Result<ServerSecrets> {
    anyhow::ensure!(
        deployment.server_secret.is_some() || deployment.data_dir.join(SERVER_SECRET_FILE).exists(),
        "{} has no server secret: start `engram serve --data-dir {}` once first, or set ENGRAM_SERVER_SECRET",
        deployment.data_dir.display(),
        deployment.data_dir.display()
    );
    server_secrets(deployment.server_secret.as_ref(), &deployment.data_dir)
}

#[derive(Debug, Serialize)]
struct CreatedProject {
    project_id: String,
    organization_id: String,
    api_key: String,
}

pub async fn create_project_command(arguments: CreateProjectArgs) -> Result<()> {
    let secrets = required_secrets(&arguments.deployment)?;
    let storage = arguments.deployment.open_sealed_storage().await?;
    let admin = deployment_admin(&storage, &secrets);
    let created = admin
        .create_project_for(
            &DeploymentOperator::at_the_command_line("admin create-project"),
            CreateProjectRequest {
                name: arguments.name.clone(),
                organization: arguments.organization.clone(),
            },
        )
        .await
        .map_err(crate::config::admin_refusal)?;
    let created = CreatedProject {
        project_id: created.project_id.to_string(),
        organization_id: created.organization_id.to_string(),
        api_key: created.api_key,
    };
    if arguments.json {
        println!("{}", serde_json::to_string(&created)?);
    } else {
        println!(
            "project {} created\norganization_id: {}\nproject_id:      {}\napi_key:         {} (shown once)",
            arguments.name.trim(),
            created.organization_id,
            created.project_id,
            created.api_key
        );
    }
    storage.close().await?;
    Ok(())
}

/// The operator's use cases over `storage`, waiting for a locked SQLite database as long as
/// `ENGRAM_ADMIN_LOCK_WAIT_SECS` says.
pub(crate) fn deployment_admin(storage: &Storage, secrets: &ServerSecrets) -> DeploymentAdmin {
    DeploymentAdmin::new(
        storage.clone(),
        secrets.api_key_pepper.clone(),
        crate::config::admin_lock_patience(),
    )
}

#[derive(Debug, Args)]
pub struct CreateOrganizationArgs {
    #[command(flatten)]
    pub deployment: crate::config::AdminDeploymentArgs,
    /// Name of the new organization.
    #[arg(long)]
    pub name: String,
    /// E-mail of its owner's console account.
    #[arg(long)]
    pub owner_email: String,
    /// How many projects to create in it (1–20), each with its first API key.
    #[arg(long, default_value_t = 1)]
    pub projects: u8,
}

#[derive(Debug, Serialize)]
struct CreatedOrganization {
    organization_id: String,
    console_email: String,
    console_password: String,
    projects: Vec<CreatedProject>,
}

/// `engram admin create-organization`: a new tenant organization with an owner account and
/// projects, printed once as JSON (the password and keys are shown nowhere else).
pub async fn create_organization_command(arguments: CreateOrganizationArgs) -> Result<()> {
    let secrets = required_secrets(&arguments.deployment)?;
    let storage = arguments.deployment.open_sealed_storage().await?;
    let created = deployment_admin(&storage, &secrets)
        .create_organization_for(
            &DeploymentOperator::at_the_command_line("admin create-organization"),
            CreateOrganizationRequest {
                name: arguments.name.clone(),
                owner_email: arguments.owner_email.clone(),
                projects: arguments.projects,
            },
        )
        .await
        .map_err(crate::config::admin_refusal)?;
    println!(
        "{}",
        serde_json::to_string(&CreatedOrganization {
            organization_id: created.organization_id.to_string(),
            console_email: created.console_email,
            console_password: created.console_password,
            projects: created
                .projects
                .into_iter()
                .map(|project| CreatedProject {
                    project_id: project.project_id.to_string(),
                    organization_id: project.organization_id.to_string(),
                    api_key: project.api_key,
                })
                .collect(),
        })?
    );
    storage.close().await?;
    Ok(())
}

#[derive(Debug, Args)]
pub struct CreateMemberArgs {
    #[command(flatten)]
    pub deployment: crate::config::AdminDeploymentArgs,
    /// The organization, by id or exact name; default: the one made at bootstrap.
    #[arg(long, alias = "organization")]
    pub organization_id: Option<String>,
    /// E-mail the member signs in with.
    #[arg(long)]
    pub email: String,
    /// owner, admin, compliance (memories and audit), analyst (never memory content) or
    /// developer (keys and settings, never memory content).
    #[arg(long)]
    pub role: String,
}

#[derive(Debug, Serialize)]
struct CreatedMember {
    account_id: String,
    email: String,
    role: String,
    password: String,
}

/// `engram admin create-member`: an admin-created console account with a role; its initial
/// password is printed once as JSON.
pub async fn create_member_command(arguments: CreateMemberArgs) -> Result<()> {
    let storage = arguments.deployment.open_sealed_storage().await?;
    // No key is made: the pepper is never used, so the command needs no server secret.
    let admin = DeploymentAdmin::new(
        storage.clone(),
        ApiKeyPepper::new(Vec::new()),
        crate::config::admin_lock_patience(),
    );
    let created = admin
        .create_member_for(
            &DeploymentOperator::at_the_command_line("admin create-member"),
            CreateMemberRequest {
                organization: arguments.organization_id.clone(),
                email: arguments.email.clone(),
                role: arguments.role.clone(),
            },
        )
        .await
        .map_err(crate::config::admin_refusal)?;
    println!(
        "{}",
        serde_json::to_string(&CreatedMember {
            account_id: created.account_id.to_string(),
            email: created.email,
            role: created.role.as_str().to_string(),
            password: created.password,
        })?
    );
    storage.close().await?;
    Ok(())
}
