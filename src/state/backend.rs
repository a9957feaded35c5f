//! Which backend a stack's state lives in — a local file ([`LocalStore`]) or an object store
//! ([`RemoteStore`]) — behind one [`Store`] that the commands use alike.

use super::journal::Journal;
use super::lock::{self, LockError, LockInfo, LockMode, StateLock};
use super::remote::{RemoteLock, RemoteStore};
use super::store::{Loaded, LocalStore, StateError};
use super::{Event, State};
use crate::stack::StateSettings;
use std::time::Duration;

/// How long a remote lock lasts unless renewed, by default.
#[cfg(feature = "aws")]
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

impl Store {
    /// The store `settings` name; a remote one connects to its bucket.
    pub fn open(settings: &StateSettings) -> Result<Store, StateError> {
        match (settings.backend.as_str(), &settings.bucket) {
            #[cfg(feature = "aws")]
            ("s3", Some(bucket)) => {
                let objects = super::s3::S3Objects::connect(bucket, settings.region.as_deref(), settings.kms_key_id.as_deref()).map_err(
                    |message| StateError::Remote {
                        location: settings.location(),
                        message,
                    },
                )?;
                let lease = settings
                    .lease
                    .as_deref()
                    .and_then(|l| humantime::parse_duration(l).ok())
                    .unwrap_or(LEASE);
                let key = settings.key.clone().unwrap_or_default();
                Ok(Store::Remote(RemoteStore::new(std::sync::Arc::new(objects), &key, lease)))
            }
            ("local", _) => Ok(Store::Local(LocalStore::new(&settings.path))),
            (backend, _) => Err(StateError::Remote {
                location: settings.location(),
                message: format!("this forge was built without the `{backend}` backend (its cloud's feature is off)"),
            }),
        }
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

    /// `forge state unlock ID`.
    pub fn unlock(&self, id: &str, force: bool) -> Result<LockInfo, LockError> {
        match self {
            Store::Local(store) => lock::unlock(&store.lock_path(), id, force),
            Store::Remote(store) => store.unlock(id, force),
        }
    }
}
