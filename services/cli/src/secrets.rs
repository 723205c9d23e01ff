//! The deployment's secrets: one random value (from `ENGRAM_SERVER_SECRET`, or the data
//! dir's file written on first start) and the keys derived from it, one per purpose.

use anyhow::{Context, Result};
use engram_storage::ApiKeyPepper;
use rand::Rng;
use secrecy::{ExposeSecret, SecretString};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

pub(crate) const SERVER_SECRET_FILE: &str = "server_secret";

/// Write a new file readable only by its owner; never overwrite an existing one.
pub(crate) fn write_private_file(path: &Path, contents: &[u8]) -> Result<()> {
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
