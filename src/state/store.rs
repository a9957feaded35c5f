//! The local backend: `state/<stack>.json` (the snapshot, mode 0600), `….journal` (changes
//! since the snapshot), `….backup` (the snapshot before the last one) and `….lock`.

use super::journal::{self, Journal};
use super::lock::{self, LockError, LockInfo, LockMode, StateLock};
use super::{STATE_VERSION, State};
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A state problem. Nothing is overwritten when one is raised.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum StateError {
    /// The file could not be read.
    #[error("cannot read state `{}`", path.display())]
    #[diagnostic(help("check the file's permissions"))]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The file is not a forge state.
    #[error("state `{}` is corrupt: {message}", path.display())]
    #[diagnostic(help(
        "forge keeps the previous snapshot beside it with the suffix `.backup`; inspect both before restoring one. Nothing was overwritten."
    ))]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What failed to parse.
        message: String,
    },
    /// Written by a newer forge.
    #[error("state `{}` was written by a newer forge (state version {found}; this forge reads up to {STATE_VERSION})", path.display())]
    #[diagnostic(help("upgrade forge; this one will not touch the file"))]
    TooNew {
        /// The file.
        path: PathBuf,
        /// Its version.
        found: u32,
    },
    /// Belongs to another stack.
    #[error("state `{}` belongs to stack `{found}`, not `{expected}`", path.display())]
    #[diagnostic(help("two stacks cannot share a state file: give this stack its own `[state] path`, or fix `[stack] name`"))]
    OtherStack {
        /// The file.
        path: PathBuf,
        /// The stack name in the file.
        found: String,
        /// The stack being run.
        expected: String,
    },
    /// A remote state could not be read or written.
    #[error("state `{location}`: {message}")]
    #[diagnostic(help(
        "check the bucket, the credentials and the network, then run again: nothing was lost, every change made so far is in the journal"
    ))]
    Remote {
        /// `s3://bucket/key`.
        location: String,
        /// The store's message.
        message: String,
    },
    /// The snapshot changed since this run read it: another run wrote it.
    #[error("state `{location}` was changed by another run since this one read it")]
    #[diagnostic(help(
        "someone else wrote this state while forge held its lock (a run that stalled past its lease, a hand edit): check who else runs forge on this stack before running again"
    ))]
    Conflict {
        /// `s3://bucket/key`.
        location: String,
    },
    /// The file could not be written.
    #[error("cannot write state `{}`: {message}", path.display())]
    #[diagnostic(help("free disk space or fix permissions, then run again: the journal keeps every change made so far"))]
    Write {
        /// The file.
        path: PathBuf,
        /// The OS error.
        message: String,
    },
}

/// What loading found.
#[derive(Debug)]
pub struct Loaded {
    /// The state (a new, empty one when there was none).
    pub state: State,
    /// Whether any state existed on disk.
    pub existed: bool,
    /// Whether a torn journal tail was dropped.
    pub dropped_tail: bool,
}

/// A snapshot read from `location` (a file, or an object's URL), checked: a forge state, of a
/// version this forge reads, of this stack.
pub fn parse_snapshot(bytes: &[u8], stack: &str, location: &Path) -> Result<State, StateError> {
    let corrupt = |message: String| StateError::Corrupt {
        path: location.to_owned(),
        message,
    };
    let raw: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| corrupt(e.to_string()))?;
    let version = raw
        .get("version")
        .and_then(serde_json::Value::as_u64)
        .ok_or_else(|| corrupt("no `version` field".into()))?;
    if version > u64::from(STATE_VERSION) {
        return Err(StateError::TooNew {
            path: location.to_owned(),
            found: u32::try_from(version).unwrap_or(u32::MAX),
        });
    }
    let mut state: State = serde_json::from_value(raw).map_err(|e| corrupt(e.to_string()))?;
    // Read records came before version 2 did: a state that holds one is version 2.
    if state.resources.values().any(|r| r.status == super::Status::Read) {
        state.version = state.version.max(STATE_VERSION);
    }
    if state.stack != stack {
        return Err(StateError::OtherStack {
            path: location.to_owned(),
            found: state.stack,
            expected: stack.to_owned(),
        });
    }
    Ok(state)
}

/// The local state backend for one stack.
#[derive(Debug, Clone)]
pub struct LocalStore {
    path: PathBuf,
}

impl LocalStore {
    /// A store whose snapshot lives at `path`.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        LocalStore { path: path.into() }
    }

    /// The snapshot's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn sibling(&self, suffix: &str) -> PathBuf {
        let mut name = self.path.as_os_str().to_owned();
        name.push(suffix);
        PathBuf::from(name)
    }

    /// The lock file's path.
    pub fn lock_path(&self) -> PathBuf {
        self.sibling(".lock")
    }

    fn journal_path(&self) -> PathBuf {
        self.sibling(".journal")
    }

    /// Makes the directory the state file is in, if it is missing.
    fn make_dir(&self) -> Result<(), (PathBuf, std::io::Error)> {
        match self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            Some(dir) => fs::create_dir_all(dir).map_err(|e| (dir.to_owned(), e)),
            None => Ok(()),
        }
    }

    fn write_err(&self, path: &Path, e: impl std::fmt::Display) -> StateError {
        StateError::Write {
            path: path.to_owned(),
            message: e.to_string(),
        }
    }

    /// Takes the lock: `Exclusive` for commands that write, `Shared` for readers.
    pub fn lock(&self, mode: LockMode, operation: &str, timeout: Duration) -> Result<(StateLock, Option<LockInfo>), LockError> {
        self.make_dir().map_err(|(path, e)| LockError::Io {
            path,
            message: e.to_string(),
        })?;
        lock::acquire(&self.lock_path(), mode, operation, timeout)
    }

    /// Reads the snapshot and replays the journal after it.
    pub fn load(&self, stack: &str) -> Result<Loaded, StateError> {
        let snapshot = match fs::read(&self.path) {
            Ok(bytes) => Some(parse_snapshot(&bytes, stack, &self.path)?),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => {
                return Err(StateError::Read {
                    path: self.path.clone(),
                    source: e,
                });
            }
        };
        let journal = match fs::read(self.journal_path()) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => {
                return Err(StateError::Read {
                    path: self.journal_path(),
                    source: e,
                });
            }
        };
        let (entries, dropped_tail) = journal::read_entries(&journal);
        let existed = snapshot.is_some() || !entries.is_empty();
        let mut state = snapshot.unwrap_or_else(|| {
            let mut fresh = State::new(stack);
            if let Some(first) = entries.first() {
                fresh.lineage = first.lineage;
            }
            fresh
        });
        state.replay(entries);
        Ok(Loaded {
            state,
            existed,
            dropped_tail,
        })
    }

    /// Writes `state` as the new snapshot (temp file, fsync, rename; the old one becomes the
    /// backup) and empties the journal it folds in.
    pub fn compact(&self, state: &State) -> Result<(), StateError> {
        let bytes = state.snapshot();
        self.make_dir().map_err(|(dir, e)| self.write_err(&dir, e))?;
        let tmp = self.sibling(".tmp");
        let write = |path: &Path, bytes: &[u8]| -> std::io::Result<()> {
            let mut f = OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(path)?;
            f.write_all(bytes)?;
            f.sync_all()
        };
        write(&tmp, &bytes).map_err(|e| self.write_err(&tmp, e))?;
        if self.path.exists() {
            let backup = self.sibling(".backup");
            let backup_tmp = self.sibling(".backup.tmp");
            let old = fs::read(&self.path).map_err(|e| self.write_err(&backup, e))?;
            write(&backup_tmp, &old)
                .and_then(|()| fs::rename(&backup_tmp, &backup))
                .map_err(|e| self.write_err(&backup, e))?;
        }
        fs::rename(&tmp, &self.path).map_err(|e| self.write_err(&self.path, e))?;
        self.sync_dir()?;
        let journal = self.journal_path();
        if journal.exists() {
            OpenOptions::new()
                .write(true)
                .open(&journal)
                .and_then(|f| f.set_len(0).and_then(|()| f.sync_all()))
                .map_err(|e| self.write_err(&journal, e))?;
        }
        Ok(())
    }

    fn sync_dir(&self) -> Result<(), StateError> {
        let dir = self.path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        File::open(dir).and_then(|d| d.sync_all()).map_err(|e| self.write_err(dir, e))
    }

    /// Opens the journal for appending changes to `state`.
    pub fn journal(&self) -> Result<Journal, StateError> {
        let path = self.journal_path();
        let created = !path.exists();
        let file = OpenOptions::new()
            .append(true)
            .create(true)
            .mode(0o600)
            .open(&path)
            .map_err(|e| self.write_err(&path, e))?;
        if created {
            self.sync_dir()?;
        }
        Ok(Journal::open(path, file))
    }

    /// Appends entries and waits until they are durable (for one-off changes like `state rm`).
    pub fn record(&self, state: &mut State, events: Vec<super::Event>) -> Result<(), StateError> {
        self.journal()?.commit(state, events)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::state::{Event, ResourceRecord, Status};
    use serde_json::json;

    /// A created `null` record at `address`, for the state's tests.
    pub(crate) fn record(address: &str) -> ResourceRecord {
        ResourceRecord {
            address: address.into(),
            kind: "null".into(),
            status: Status::Created,
            id: Some("i-1".into()),
            token: None,
            config: json!({}),
            outputs: json!({}),
            dependencies: vec![],
        }
    }

    #[test]
    fn journal_replays_over_snapshot_and_ignores_a_torn_tail() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::new(dir.path().join("s.json"));
        let mut state = store.load("s").unwrap().state;
        store.compact(&state).unwrap();
        store
            .record(&mut state, vec![Event::Put(record("null.a")), Event::Put(record("null.b"))])
            .unwrap();
        let journal = dir.path().join("s.json.journal");
        let mut f = OpenOptions::new().append(true).open(&journal).unwrap();
        f.write_all(br#"{"lineage":"torn","ser"#).unwrap();
        let loaded = store.load("s").unwrap();
        assert!(loaded.dropped_tail);
        assert_eq!(loaded.state, state);
        store.compact(&loaded.state).unwrap();
        assert_eq!(fs::metadata(&journal).unwrap().len(), 0);
        assert_eq!(store.load("s").unwrap().state, state);
        let mode = fs::metadata(store.path()).unwrap().permissions();
        assert_eq!(std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777, 0o600);
    }

    #[test]
    fn journal_without_snapshot_is_a_state() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::new(dir.path().join("s.json"));
        let mut state = State::new("s");
        store.record(&mut state, vec![Event::Put(record("null.a"))]).unwrap();
        let loaded = store.load("s").unwrap();
        assert!(loaded.existed);
        assert_eq!(loaded.state.resources.len(), 1);
        assert_eq!(loaded.state.lineage, state.lineage);
    }

    #[test]
    fn a_state_takes_version_2_with_its_first_read_record_and_keeps_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::new(dir.path().join("s.json"));
        let mut state = State::new("s");
        store.record(&mut state, vec![Event::Put(record("null.a"))]).unwrap();
        store.compact(&state).unwrap();
        let version = |store: &LocalStore| {
            let raw: serde_json::Value = serde_json::from_slice(&fs::read(store.path()).unwrap()).unwrap();
            raw["version"].clone()
        };
        assert_eq!(version(&store), json!(1), "nothing read: the first format");
        let read = ResourceRecord {
            status: Status::Read,
            ..record("aws_vpc.shared")
        };
        store.record(&mut state, vec![Event::Put(read)]).unwrap();
        assert_eq!(store.load("s").unwrap().state.version, 2, "replayed from the journal");
        store.compact(&state).unwrap();
        assert_eq!(version(&store), json!(2));
        store.record(&mut state, vec![Event::Remove("aws_vpc.shared".into())]).unwrap();
        store.compact(&state).unwrap();
        assert_eq!(version(&store), json!(2), "a version never goes back");

        // A state that an earlier forge wrote as version 1 with a read record is version 2.
        let mut old = State::new("s");
        old.resources.insert(
            "aws_vpc.shared".into(),
            ResourceRecord {
                status: Status::Read,
                ..record("aws_vpc.shared")
            },
        );
        fs::write(store.path(), old.snapshot()).unwrap();
        fs::write(dir.path().join("s.json.journal"), "").unwrap();
        assert_eq!(version(&store), json!(1));
        assert_eq!(store.load("s").unwrap().state.version, 2);
    }

    #[test]
    fn refuses_newer_corrupt_and_foreign_states_without_writing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.json");
        let store = LocalStore::new(&path);
        fs::write(&path, r#"{"version": 99}"#).unwrap();
        assert!(matches!(store.load("s"), Err(StateError::TooNew { found: 99, .. })));
        fs::write(&path, "{not json").unwrap();
        assert!(matches!(store.load("s"), Err(StateError::Corrupt { .. })));
        store.compact(&State::new("other")).unwrap();
        assert!(matches!(store.load("s"), Err(StateError::OtherStack { .. })));
    }
}
