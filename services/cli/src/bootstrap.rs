//! First start of an empty data dir (organization, project, owner account, API key, written
//! once to `bootstrap.json` with mode 0600), the server secret, and `admin create-project`.

use anyhow::{Context, Result};
use clap::Args;
use engram_engine::console_credentials::hash_password;
use engram_storage::{ApiKeyPepper, Storage};
use rand::Rng;
use rand::distributions::Alphanumeric;
use secrecy::{ExposeSecret, SecretString};
use serde::Serialize;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

pub(crate) const SERVER_SECRET_FILE: &str = "server_secret";
pub const BOOTSTRAP_FILE: &str = "bootstrap.json";
pub const OWNER_EMAIL: &str = "owner@engram.local";

/// Write a new file readable only by its owner; never overwrite an existing one.
fn write_private_file(path: &Path, contents: &[u8]) -> Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("cannot create {}", path.display()))?;
    file.write_all(contents)?;
    file.sync_all()?;
    Ok(())
}

/// A console account's initial password: 20 random alphanumerics (about 119 bits), shown
/// once.
fn new_console_password() -> String {
    rand::thread_rng()
        .sample_iter(&Alphanumeric)
        .take(20)
        .map(char::from)
        .collect()
}

/// Server-wide secrets, derived from one random value kept in the data dir.
#[derive(Clone)]
pub struct ServerSecrets {
    pub api_key_pepper: ApiKeyPepper,
    /// Version 1 of the console session signing key (see [`Self::console_signing_secret_for`]).
    pub console_signing_secret: Vec<u8>,
    /// Base of every project's end-user token signing key.
    pub end_user_token_secret: Vec<u8>,
    /// Keys the digest that stands for an erased end-user in the ledger and audit log.
    pub subject_digest_key: Vec<u8>,
    /// Keys the audit chain's hashes: the database never holds it.
    pub audit_chain_key: Vec<u8>,
    root: Vec<u8>,
}

/// The deployment's secrets: from `ENGRAM_SERVER_SECRET` when given (every gateway of a
/// deployment shares it), else from the data dir's file, created on first start.
pub fn server_secrets(
    explicit_secret: Option<&SecretString>,
    data_dir: &Path,
) -> Result<ServerSecrets> {
    if let Some(secret) = explicit_secret {
        return ServerSecrets::from_hex(secret.expose_secret())
            .context("ENGRAM_SERVER_SECRET must be 64 hex characters (32 random bytes, e.g. `openssl rand -hex 32`)");
    }
    load_or_create_server_secrets(data_dir)
}

/// Read the data dir's secret, creating it on first start.
pub fn load_or_create_server_secrets(data_dir: &Path) -> Result<ServerSecrets> {
    let path = data_dir.join(SERVER_SECRET_FILE);
    if !path.exists() {
        std::fs::create_dir_all(data_dir)
            .with_context(|| format!("cannot create data dir {}", data_dir.display()))?;
        let secret: [u8; 32] = rand::thread_rng().r#gen();
        write_private_file(&path, hex::encode(secret).as_bytes())?;
    }
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    ServerSecrets::from_hex(&text).with_context(|| format!("{} is corrupt", path.display()))
}

impl ServerSecrets {
    /// The console session signing key of `version` (`ENGRAM_CONSOLE_SIGNING_KEY_VERSION`):
    /// raising the version rotates the key without a new server secret.
    pub fn console_signing_secret_for(&self, version: u32) -> Vec<u8> {
        use sha2::{Digest, Sha256};
        let mut hasher = Sha256::new();
        hasher.update(&self.root);
        hasher.update(format!("engram console session signing v{version}").as_bytes());
        hasher.finalize().to_vec()
    }

    /// Separate keys per purpose, derived from one 32-byte secret, so a console token can
    /// never double as a key hash.
    pub fn from_hex(text: &str) -> Result<Self> {
        let secret = hex::decode(text.trim()).context("not hex")?;
        anyhow::ensure!(
            secret.len() == 32,
            "expected 32 bytes, got {}",
            secret.len()
        );
        let derive = |label: &str| {
            use sha2::{Digest, Sha256};
            let mut hasher = Sha256::new();
            hasher.update(&secret);
            hasher.update(label.as_bytes());
            hasher.finalize().to_vec()
        };
        Ok(Self {
            root: secret.clone(),
            api_key_pepper: ApiKeyPepper::new(derive("engram api key pepper v1")),
            console_signing_secret: derive("engram console session signing v1"),
            end_user_token_secret: derive("engram end-user token signing v1"),
            subject_digest_key: derive("engram subject digest v1"),
            audit_chain_key: derive("engram audit chain v1"),
        })
    }
}

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
    let console_password = new_console_password();
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
    #[arg(long, env = "ENGRAM_DATA_DIR", default_value = "./data")]
    pub data_dir: PathBuf,
    #[arg(long, env = "ENGRAM_DATABASE_URL", hide_env_values = true, value_parser = crate::config::secret)]
    pub database_url: Option<secrecy::SecretString>,
    /// Use the database even if it could lose acknowledged writes (as `serve` would).
    #[arg(long, env = "ENGRAM_ALLOW_UNSAFE_DURABILITY", default_value_t = false)]
    pub allow_unsafe_durability: bool,
    /// The deployment's secret (as the gateways have it); default: the data dir's.
    #[arg(long, env = "ENGRAM_SERVER_SECRET", hide_env_values = true, value_parser = crate::config::secret)]
    pub server_secret: Option<SecretString>,
    /// Name of the new project.
    #[arg(long)]
    pub name: String,
    /// Print `{"project_id", "api_key"}` as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Serialize)]
struct CreatedProject {
    project_id: String,
    api_key: String,
}

pub async fn create_project_command(arguments: CreateProjectArgs) -> Result<()> {
    let name = arguments.name.trim();
    anyhow::ensure!(
        !name.is_empty() && name.chars().count() <= 200,
        "--name must be 1–200 characters"
    );
    anyhow::ensure!(
        arguments.server_secret.is_some() || arguments.data_dir.join(SERVER_SECRET_FILE).exists(),
        "{} has no server secret: start `engram serve --data-dir {}` once first, or set ENGRAM_SERVER_SECRET",
        arguments.data_dir.display(),
        arguments.data_dir.display()
    );
    let secrets = server_secrets(arguments.server_secret.as_ref(), &arguments.data_dir)?;
    let database_url = crate::config::database_url_for(
        crate::config::exposed(&arguments.database_url).as_deref(),
        &arguments.data_dir,
    );
    let storage = crate::config::open_sealed_storage(
        &database_url,
        arguments.allow_unsafe_durability,
        &arguments.data_dir,
        arguments.server_secret.as_ref(),
    )
    .await?;
    let organization_id = storage
        .first_organization_id()
        .await?
        .context("the data dir has no organization yet: start `engram serve` once first")?;
    let (project, api_key) = crate::config::retry_while_busy("creating the project", || {
        storage.create_project(organization_id, name, &secrets.api_key_pepper)
    })
    .await?;
    let created = CreatedProject {
        project_id: project.id.to_string(),
        api_key,
    };
    if arguments.json {
        println!("{}", serde_json::to_string(&created)?);
    } else {
        println!(
            "project {} created\nproject_id: {}\napi_key:    {} (shown once)",
            name, created.project_id, created.api_key
        );
    }
    storage.close().await?;
    Ok(())
}

#[derive(Debug, Args)]
pub struct CreateOrganizationArgs {
    #[arg(long, env = "ENGRAM_DATA_DIR", default_value = "./data")]
    pub data_dir: PathBuf,
    #[arg(long, env = "ENGRAM_DATABASE_URL", hide_env_values = true, value_parser = crate::config::secret)]
    pub database_url: Option<secrecy::SecretString>,
    #[arg(long, env = "ENGRAM_ALLOW_UNSAFE_DURABILITY", default_value_t = false)]
    pub allow_unsafe_durability: bool,
    #[arg(long, env = "ENGRAM_SERVER_SECRET", hide_env_values = true, value_parser = crate::config::secret)]
    pub server_secret: Option<SecretString>,
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
    let name = arguments.name.trim();
    anyhow::ensure!(
        !name.is_empty() && name.chars().count() <= 200,
        "--name must be 1–200 characters"
    );
    anyhow::ensure!(
        (1..=20).contains(&arguments.projects),
        "--projects must be 1–20"
    );
    anyhow::ensure!(
        arguments.owner_email.contains('@') && arguments.owner_email.len() <= 254,
        "--owner-email must be an e-mail address"
    );
    let secrets = server_secrets(arguments.server_secret.as_ref(), &arguments.data_dir)?;
    let database_url = crate::config::database_url_for(
        crate::config::exposed(&arguments.database_url).as_deref(),
        &arguments.data_dir,
    );
    let storage = crate::config::open_sealed_storage(
        &database_url,
        arguments.allow_unsafe_durability,
        &arguments.data_dir,
        arguments.server_secret.as_ref(),
    )
    .await?;
    let console_password = new_console_password();
    let password_hash = hash_password(&console_password).map_err(anyhow::Error::msg)?;
    let record = crate::config::retry_while_busy("creating the organization", || {
        storage.bootstrap_organization(
            name,
            "project 1",
            &arguments.owner_email,
            &password_hash,
            &secrets.api_key_pepper,
        )
    })
    .await?;
    let mut projects = vec![CreatedProject {
        project_id: record.project_id.to_string(),
        api_key: record.api_key,
    }];
    for number in 2..=arguments.projects {
        let project_name = format!("project {number}");
        let (project, api_key) = crate::config::retry_while_busy("creating a project", || {
            storage.create_project(
                record.organization_id,
                &project_name,
                &secrets.api_key_pepper,
            )
        })
        .await?;
        projects.push(CreatedProject {
            project_id: project.id.to_string(),
            api_key,
        });
    }
    println!(
        "{}",
        serde_json::to_string(&CreatedOrganization {
            organization_id: record.organization_id.to_string(),
            console_email: arguments.owner_email.to_lowercase(),
            console_password,
            projects,
        })?
    );
    storage.close().await?;
    Ok(())
}

#[derive(Debug, Args)]
pub struct CreateMemberArgs {
    #[arg(long, env = "ENGRAM_DATA_DIR", default_value = "./data")]
    pub data_dir: PathBuf,
    #[arg(long, env = "ENGRAM_DATABASE_URL", hide_env_values = true, value_parser = crate::config::secret)]
    pub database_url: Option<secrecy::SecretString>,
    #[arg(long, env = "ENGRAM_ALLOW_UNSAFE_DURABILITY", default_value_t = false)]
    pub allow_unsafe_durability: bool,
    /// The organization; default: the first one (the embedded default has exactly one).
    #[arg(long)]
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
    let Some(role) = engram_core::ConsoleRole::parse(&arguments.role) else {
        anyhow::bail!(
            "--role must be one of owner, admin, compliance, analyst, developer (got {:?})",
            arguments.role
        );
    };
    let email = arguments.email.trim().to_lowercase();
    anyhow::ensure!(
        email.contains('@') && email.len() <= 254,
        "--email must be an e-mail address"
    );
    let database_url = crate::config::database_url_for(
        crate::config::exposed(&arguments.database_url).as_deref(),
        &arguments.data_dir,
    );
    let storage = crate::config::open_sealed_storage(
        &database_url,
        arguments.allow_unsafe_durability,
        &arguments.data_dir,
        None,
    )
    .await?;
    let organization_id = match &arguments.organization_id {
        Some(text) => text
            .parse::<engram_core::OrganizationId>()
            .map_err(|_| anyhow::anyhow!("--organization-id is not an organization id"))?,
        None => storage
            .first_organization_id()
            .await?
            .context("no organization yet: start `engram serve` once first")?,
    };
    let password = new_console_password();
    let password_hash = hash_password(&password).map_err(anyhow::Error::msg)?;
    let account_id = crate::config::retry_while_busy("creating the member", || {
        storage.create_console_account(organization_id, &email, &password_hash, role)
    })
    .await?;
    println!(
        "{}",
        serde_json::to_string(&CreatedMember {
            account_id: account_id.to_string(),
            email,
            role: role.as_str().to_string(),
            password,
        })?
    );
    storage.close().await?;
    Ok(())
}
