//! Exclusive use of a data dir: the lock `engram serve` and the offline admin commands hold
//! for their lifetime, released by the operating system when the process ends.

use anyhow::{Context, Result, bail};
use std::fs::{File, OpenOptions, TryLockError};
use std::path::Path;

const LOCK_FILE: &str = "engram.lock";

/// Exclusive use of a data dir. The in-process index must never be opened by two processes,
/// so `engram serve` and offline admin commands that open it hold this for their lifetime;
/// the operating system releases it when the process ends, even by SIGKILL.
pub struct DataDirLock {
    _file: File,
}

impl DataDirLock {
    pub fn acquire(data_dir: &Path) -> Result<Self> {
        std::fs::create_dir_all(data_dir)
            .with_context(|| format!("cannot create data dir {}", data_dir.display()))?;
        let path = data_dir.join(LOCK_FILE);
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .with_context(|| format!("cannot open {}", path.display()))?;
        match file.try_lock() {
            Ok(()) => Ok(Self { _file: file }),
            Err(TryLockError::WouldBlock) => bail!(
                "the data dir {} is in use by another engram process (a running `engram serve`?); stop it first",
                data_dir.display()
            ),
            Err(TryLockError::Error(error)) => {
                Err(error).with_context(|| format!("cannot lock {}", path.display()))
            }
        }
    }
}
