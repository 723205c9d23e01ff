//! The audit chain's seal, kept outside the database: the key its hashes are computed with,
//! and the anchor file that records every organization's newest event before it commits.
//!
//! The anchor is a ledger of JSON lines, appended and flushed to disk with every event: a
//! `pending` line (sequence and keyed hash) before the event's transaction commits, a
//! `committed` line after. Whoever holds only the database can therefore neither rewrite an
//! event (the hash needs the key) nor drop the newest ones (the anchor still names them).
//! Several processes may append to one anchor (a shared volume): every line is one short
//! `O_APPEND` write, and readers keep, per organization, the newest sequence they read.

use crate::StorageError;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use uuid::Uuid;

/// Whether an anchored event's transaction had committed when the line was written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum AnchorState {
    Pending,
    Committed,
}

/// One line of the anchor file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct AnchorLine {
    pub organization_id: Uuid,
    pub sequence: i64,
    pub hash: String,
    pub state: AnchorState,
    /// The first sequence of the organization's chain with a keyed hash.
    pub keyed_since: i64,
}

/// What the anchor says about one organization's chain.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AnchoredHead {
    pub keyed_since: Option<i64>,
    /// The newest event known to have committed, with its hash.
    pub committed: Option<(i64, String)>,
    /// The newest event anchored before its commit; it may have been rolled back.
    pub pending: Option<(i64, String)>,
    /// Why the anchor shows the chain was rewound: an append after a committed event at a
    /// sequence not beyond it (the newest events deleted and the database's head moved
    /// back), or a change of where keyed hashes begin. Once set, it stays.
    pub rewound: Option<(i64, String)>,
}

impl AnchoredHead {
    fn absorb(&mut self, line: &AnchorLine) {
        // Appends take their sequence from the database's chain head. A head moved back
        // shows here as an append that does not go beyond an event already committed.
        if self.rewound.is_none() {
            if let Some((committed, committed_hash)) = &self.committed {
                let rewound = match line.state {
                    AnchorState::Pending => line.sequence <= *committed,
                    AnchorState::Committed => {
                        line.sequence == *committed && line.hash != *committed_hash
                    }
                };
                if rewound {
                    self.rewound = Some((
                        *committed,
                        format!(
                            "the anchor records event {committed} as committed, yet a later event was appended at sequence {}: the chain was rewound (its newest events deleted and its head moved back)",
                            line.sequence
                        ),
                    ));
                }
            }
            if let Some(since) = self.keyed_since
                && since != line.keyed_since
            {
                self.rewound = Some((
                    line.sequence,
                    format!(
                        "the anchor records keyed hashes from sequence {since}, yet an event was appended claiming they begin at {}: the chain head was altered",
                        line.keyed_since
                    ),
                ));
            }
        }
        // The first line of an organization says where its keyed hashes begin.
        self.keyed_since.get_or_insert(line.keyed_since);
        let slot = match line.state {
            AnchorState::Pending => &mut self.pending,
            AnchorState::Committed => &mut self.committed,
        };
        // Appends of one organization are serialised by its chain lock, but their
        // `committed` lines (written after the lock is released) may land out of order;
        // a rolled-back append's sequence is reused by the next one, whose line comes later.
        match slot {
            Some((sequence, _)) if *sequence > line.sequence => {}
            _ => *slot = Some((line.sequence, line.hash.clone())),
        }
        if let (Some((pending, _)), Some((committed, _))) = (&self.pending, &self.committed)
            && pending < committed
        {
            self.pending = None;
        }
    }

    /// The newest sequence the anchor names, pending or committed.
    pub fn newest_sequence(&self) -> i64 {
        let committed = self.committed.as_ref().map_or(0, |(sequence, _)| *sequence);
        let pending = self.pending.as_ref().map_or(0, |(sequence, _)| *sequence);
        committed.max(pending)
    }
}

/// How far verification has already vouched for an organization's chain.
#[derive(Clone, Debug, Default)]
pub(crate) struct VerifiedCheckpoint {
    pub sequence: i64,
    pub hash: String,
    pub events_per_project: HashMap<Option<Uuid>, u64>,
}

/// What the anchor file held at the last read, and where reading stopped.
#[derive(Default)]
struct AnchorReading {
    offset: u64,
    heads: HashMap<Uuid, AnchoredHead>,
}

/// The key and the anchor of the audit chain.
pub struct AuditSeal {
    key: Vec<u8>,
    anchor_path: PathBuf,
    /// Appends go through one handle per process, one line per write.
    anchor_file: Mutex<std::fs::File>,
    reading: Mutex<AnchorReading>,
    checkpoints: Mutex<HashMap<Uuid, VerifiedCheckpoint>>,
}

impl std::fmt::Debug for AuditSeal {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("AuditSeal")
            .field("key", &"***")
            .field("anchor_path", &self.anchor_path)
            .finish()
    }
}

fn anchor_error(path: &Path, what: &str, error: impl std::fmt::Display) -> StorageError {
    StorageError::Internal(format!(
        "audit anchor {}: cannot {what}: {error}",
        path.display()
    ))
}

impl AuditSeal {
    /// Open (creating it when absent) the anchor at `anchor_path`; `key` keys every chain
    /// hash from now on. Keep both out of the database and its backups.
    pub fn open(key: Vec<u8>, anchor_path: PathBuf) -> Result<Self, StorageError> {
        if key.len() < 16 {
            return Err(StorageError::Configuration(
                "the audit chain key must be at least 16 bytes".to_string(),
            ));
        }
        if let Some(parent) = anchor_path.parent()
            && !parent.as_os_str().is_empty()
        {
            std::fs::create_dir_all(parent)
                .map_err(|error| anchor_error(&anchor_path, "create its directory", error))?;
        }
        let mut anchor_file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .read(true)
            .open(&anchor_path)
            .map_err(|error| anchor_error(&anchor_path, "open it for appending", error))?;
        // A line torn by a crash mid-write is ended, so the next line stays readable.
        let length = anchor_file
            .metadata()
            .map_err(|error| anchor_error(&anchor_path, "read", error))?
            .len();
        if length > 0 {
            let mut last = [0u8; 1];
            anchor_file
                .seek(SeekFrom::Start(length - 1))
                .and_then(|_| anchor_file.read_exact(&mut last))
                .map_err(|error| anchor_error(&anchor_path, "read", error))?;
            if last[0] != b'\n' {
                anchor_file
                    .write_all(b"\n")
                    .and_then(|()| anchor_file.sync_data())
                    .map_err(|error| anchor_error(&anchor_path, "end a torn line", error))?;
            }
        }
        Ok(Self {
            key,
            anchor_path,
            anchor_file: Mutex::new(anchor_file),
            reading: Mutex::new(AnchorReading::default()),
            checkpoints: Mutex::new(HashMap::new()),
        })
    }

    pub fn anchor_path(&self) -> &Path {
        &self.anchor_path
    }

    pub(crate) fn key(&self) -> &[u8] {
        &self.key
    }

    /// Append `lines`; with `flush`, they are on disk before this returns. `pending` lines
    /// are flushed (an event the database commits must be anchored); `committed` ones need
    /// not be: one lost in a crash leaves its event anchored as pending, which still holds.
    pub(crate) async fn anchor(
        self: &std::sync::Arc<Self>,
        lines: Vec<AnchorLine>,
        flush: bool,
    ) -> Result<(), StorageError> {
        if lines.is_empty() {
            return Ok(());
        }
        let seal = self.clone();
        tokio::task::spawn_blocking(move || seal.anchor_now(&lines, flush))
            .await
            .map_err(|error| StorageError::Internal(format!("audit anchor task failed: {error}")))?
    }

    fn anchor_now(&self, lines: &[AnchorLine], flush: bool) -> Result<(), StorageError> {
        let mut file = self
            .anchor_file
            .lock()
            .map_err(|_| StorageError::Internal("audit anchor lock poisoned".to_string()))?;
        for line in lines {
            let mut text = serde_json::to_string(line)
                .map_err(|error| anchor_error(&self.anchor_path, "encode a line", error))?;
            text.push('\n');
            file.write_all(text.as_bytes())
                .map_err(|error| anchor_error(&self.anchor_path, "append", error))?;
        }
        if !flush {
            return Ok(());
        }
        file.sync_data()
            .map_err(|error| anchor_error(&self.anchor_path, "flush to disk", error))
    }

    /// What the anchor names for `organization_id`, after reading what other processes (or
    /// this one) appended since the last call. `Err` says why the anchor cannot be read (a
    /// verification then fails closed).
    pub(crate) fn anchored_head(
        &self,
        organization_id: Uuid,
    ) -> Result<Option<AnchoredHead>, String> {
        let mut reading = self
            .reading
            .lock()
            .map_err(|_| "the audit anchor's reader failed earlier".to_string())?;
        let unreadable = |error: std::io::Error| {
            if error.kind() == std::io::ErrorKind::NotFound {
                format!("the audit anchor {} is missing", self.anchor_path.display())
            } else {
                format!(
                    "the audit anchor {} cannot be read: {error}",
                    self.anchor_path.display()
                )
            }
        };
        let mut file = std::fs::File::open(&self.anchor_path).map_err(unreadable)?;
        let length = file.metadata().map_err(unreadable)?.len();
        if length < reading.offset {
            // Replaced or truncated: what was read before no longer stands.
            *reading = AnchorReading::default();
        }
        file.seek(SeekFrom::Start(reading.offset))
            .map_err(unreadable)?;
        let mut appended = Vec::new();
        file.read_to_end(&mut appended).map_err(unreadable)?;
        // Only whole lines: a line being written now is read next time.
        let whole = appended
            .iter()
            .rposition(|byte| *byte == b'\n')
            .map_or(0, |position| position + 1);
        for line in appended[..whole].split(|byte| *byte == b'\n') {
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            match serde_json::from_slice::<AnchorLine>(line) {
                Ok(line) => reading
                    .heads
                    .entry(line.organization_id)
                    .or_default()
                    .absorb(&line),
                Err(error) => {
                    tracing::warn!(%error, "skipped an unreadable audit anchor line")
                }
            }
        }
        reading.offset += whole as u64;
        Ok(reading.heads.get(&organization_id).cloned())
    }

    pub(crate) fn checkpoint(&self, organization_id: Uuid) -> Option<VerifiedCheckpoint> {
        self.checkpoints
            .lock()
            .ok()
            .and_then(|checkpoints| checkpoints.get(&organization_id).cloned())
    }

    pub(crate) fn set_checkpoint(&self, organization_id: Uuid, checkpoint: VerifiedCheckpoint) {
        if let Ok(mut checkpoints) = self.checkpoints.lock() {
            checkpoints.insert(organization_id, checkpoint);
        }
    }

    pub(crate) fn forget_checkpoint(&self, organization_id: Uuid) {
        if let Ok(mut checkpoints) = self.checkpoints.lock() {
            checkpoints.remove(&organization_id);
        }
    }
}
