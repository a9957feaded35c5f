//! Which backend a stack's state lives in — a local file ([`LocalStore`]) or an object store
//! ([`RemoteStore`]) — behind one [`Store`] that the commands use alike.

use super::journal::Journal;
use super::lock::{self, LockError, LockInfo, LockMode, StateLock};
use super::objects::Objects;
use super::remote::{RemoteLock, RemoteStore};
use super::store::{Loaded, LocalStore, StateError};
use super::{Event, State};
use crate::stack::StateSettings;
use std::sync::Arc;
use std::time::Duration;

/// How long a remote lock lasts unless renewed, by default.
const LEASE: Duration = Duration::from_secs(120);

/// A stack's state, wherever it is kept.
pub enum Store {
    /// `state/<stack>.json`.
    Local(LocalStore),
    /// An object in a bucket.
    Remote(RemoteStore),
}

/// A held state lock; dropping it releases the lock.
pub enum Held {
    /// The local file lock.
    Local(StateLock),
    /// A remote lock (`None` for a reader, which takes none).
    Remote(Option<RemoteLock>),
}

/// Where a run leaves a remote state it could not store: `state/<stack>.rescue.json` beside
/// `[state] path`.
fn rescue_path(settings: &StateSettings) -> std::path::PathBuf {
    settings.path.with_extension("rescue.json")
}

/// The object store of a remote `[state]`.
#[cfg_attr(not(any(feature = "aws", feature = "gcp")), allow(unused_variables))]
fn connect(settings: &StateSettings) -> Result<Arc<dyn Objects>, String> {
    let bucket = settings.bucket.as_deref().unwrap_or_default();
    match settings.backend.as_str() {
        #[cfg(feature = "aws")]
        "s3" => Ok(Arc::new(super::s3::S3Objects::connect(
            bucket,
            settings.region.as_deref(),
            settings.kms_key_id.as_deref(),
        )?)),
        #[cfg(feature = "gcp")]
        "gcs" => Ok(Arc::new(super::gcs::GcsObjects::connect(
            bucket,
            settings.project.as_deref(),
            settings.endpoint.as_deref(),
            settings.kms_key_name.as_deref(),
        )?)),
        backend => Err(format!(
            "this forge was built without the `{backend}` backend (its cloud's feature is off)"
        )),
    }
}

impl Store {
    /// The store `settings` name; a remote one connects to its bucket.
    pub fn open(settings: &StateSettings) -> Result<Store, StateError> {
        if settings.backend == "local" {
            return Ok(Store::Local(LocalStore::new(&settings.path)));
        }
        let objects = connect(settings).map_err(|message| StateError::Remote {
            location: settings.location(),
            message,
        })?;
        let lease = settings
            .lease
            .as_deref()
            .and_then(|l| humantime::parse_duration(l).ok())
            .unwrap_or(LEASE);
        let key = settings.key.clone().unwrap_or_default();
        Ok(Store::Remote(RemoteStore::new(objects, &key, lease, rescue_path(settings))))
    }

    /// Takes the lock: `Exclusive` for commands that write, `Shared` for readers.
    pub fn lock(&self, mode: LockMode, operation: &str, timeout: Duration) -> Result<(Held, Option<LockInfo>), LockError> {
        match self {
            Store::Local(store) => store.lock(mode, operation, timeout).map(|(l, s)| (Held::Local(l), s)),
            Store::Remote(store) => store.lock(mode, operation, timeout).map(|(l, s)| (Held::Remote(l), s)),
        }
    }

    /// Reads the snapshot and the journal after it.
    pub fn load(&self, stack: &str) -> Result<Loaded, StateError> {
        match self {
            Store::Local(store) => store.load(stack),
            Store::Remote(store) => store.load(stack),
        }
    }

    /// Writes `state` as the new snapshot, folding the journal in.
    pub fn compact(&self, state: &State) -> Result<(), StateError> {
        match self {
            Store::Local(store) => store.compact(state),
            Store::Remote(store) => store.compact(state),
        }
    }

    /// Opens the journal for appending changes to `state`.
    pub fn journal(&self, state: &State) -> Result<Journal, StateError> {
        match self {
            Store::Local(store) => store.journal(),
            Store::Remote(store) => store.journal(state),
        }
    }

    /// Appends entries and waits until they are durable.
    pub fn record(&self, state: &mut State, events: Vec<Event>) -> Result<(), StateError> {
        match self {
            Store::Local(store) => store.record(state, events),
            Store::Remote(store) => store.record(state, events),
        }
    }

    /// Who holds the write lock now, without taking it (a lock left by a crashed run is none).
    pub fn holder(&self) -> Option<LockInfo> {
        match self {
            Store::Local(store) => lock::holder(&store.lock_path()),
            Store::Remote(store) => store.holder(),
        }
    }

    /// The local file a run leaves the state in when its remote store cannot take it (none for
    /// a local state).
    pub fn rescue_path(&self) -> Option<&std::path::Path> {
        match self {
            Store::Local(_) => None,
            Store::Remote(store) => Some(store.rescue_path()),
        }
    }

    /// `forge state unlock ID`.
    pub fn unlock(&self, id: &str, force: bool) -> Result<LockInfo, LockError> {
        match self {
            Store::Local(store) => lock::unlock(&store.lock_path(), id, force),
            Store::Remote(store) => store.unlock(id, force),
        }
    }
}
