//! Which backend a stack's state lives in — a local file ([`LocalStore`]) or an object store
//! ([`RemoteStore`]) — behind one [`Store`] that the commands use alike. [`Backend`] is
//! `[state]`: each backend with the keys it takes. The state layer reaches no provider: what a
//! remote store needs of one, the caller hands [`Store::open`] as an [`Access`].

use super::journal::Journal;
use super::lock::{self, LockError, LockInfo, LockMode, StateLock};
use super::objects::Objects;
use super::remote::{RemoteLock, RemoteStore};
use super::store::{Loaded, LocalStore, StateError};
use super::{Event, State};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// How long a remote lock lasts unless renewed, by default.
const LEASE: Duration = Duration::from_secs(120);

/// Where and how a stack's state is kept (`[state]`): each backend with its keys. Serialized
/// (in a saved plan) as one object, `backend` first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "backend", rename_all = "lowercase")]
pub enum Backend {
    /// A file.
    Local {
        /// The state file, relative to the working directory.
        path: PathBuf,
    },
    /// An object in an S3 bucket.
    S3 {
        /// The local state file (`[state] path`): the one `state push` moves to the bucket, and
        /// beside which a run that cannot store the state leaves it.
        path: PathBuf,
        /// The bucket.
        bucket: String,
        /// The snapshot's object key (`<stack>/state.json` by default).
        key: String,
        /// The bucket's region (default `[aws] region`, else the environment's).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        region: Option<String>,
        /// SSE-KMS key (default SSE-S3).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        kms_key_id: Option<String>,
        /// How long a lock lasts unless its holder renews it (`"2m"` by default).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        lease: Option<String>,
    },
    /// An object in a GCS bucket.
    Gcs {
        /// The local state file (`[state] path`), as for S3.
        path: PathBuf,
        /// The bucket.
        bucket: String,
        /// The snapshot's object key: `<prefix>/state.json` (prefix `<stack>` by default).
        key: String,
        /// Cloud KMS key (default Google's keys).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        kms_key_name: Option<String>,
        /// The bucket's project, for messages (`[gcp] project`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        project: Option<String>,
        /// The Cloud Storage endpoint (`[gcp] endpoints.storage`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        endpoint: Option<String>,
        /// How long a lock lasts unless its holder renews it (`"2m"` by default).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        lease: Option<String>,
    },
}

impl Backend {
    /// `local`, `s3` or `gcs`, as `[state] backend` names it.
    pub fn name(&self) -> &'static str {
        match self {
            Backend::Local { .. } => "local",
            Backend::S3 { .. } => "s3",
            Backend::Gcs { .. } => "gcs",
        }
    }

    /// The local state file: the state itself, or beside a remote one (see [`Backend::S3`]).
    pub fn path(&self) -> &Path {
        match self {
            Backend::Local { path } | Backend::S3 { path, .. } | Backend::Gcs { path, .. } => path,
        }
    }

    /// Where the state is, as messages say it: the file, `s3://bucket/key` or `gs://bucket/key`.
    pub fn location(&self) -> String {
        match self {
            Backend::Local { path } => path.display().to_string(),
            Backend::S3 { bucket, key, .. } => format!("s3://{bucket}/{key}"),
            Backend::Gcs { bucket, key, .. } => format!("gs://{bucket}/{key}"),
        }
    }
}

/// What the remote stores need of the clouds' providers, which the state layer does not reach:
/// the caller hands it to [`Store::open`]. S3 needs nothing of them (the AWS SDK reads the
/// region given and the environment).
pub struct Access {
    /// GCS: the root URL of a Google API (`"storage"`), given its configured endpoint, if any.
    #[cfg(feature = "gcp")]
    pub gcp_root_url: fn(Option<String>, &str) -> String,
    /// GCS: Google credentials, or why there are none.
    #[cfg(feature = "gcp")]
    pub gcp_credentials: fn() -> Result<google_cloud_auth::credentials::Credentials, String>,
    /// GCS: one line for an HTTP answer that is not the API's own (a proxy's page), from its
    /// status and body.
    #[cfg(feature = "gcp")]
    pub not_the_api: fn(u16, &[u8]) -> String,
}

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
fn rescue_path(settings: &Backend) -> PathBuf {
    settings.path().with_extension("rescue.json")
}

/// The object store of a remote `[state]`.
#[cfg_attr(not(feature = "gcp"), allow(unused_variables))]
fn connect(settings: &Backend, access: &Access) -> Result<Arc<dyn Objects>, String> {
    match settings {
        #[cfg(feature = "aws")]
        Backend::S3 {
            bucket,
            region,
            kms_key_id,
            ..
        } => Ok(Arc::new(super::s3::S3Objects::connect(
            bucket,
            region.as_deref(),
            kms_key_id.as_deref(),
        )?)),
        #[cfg(feature = "gcp")]
        Backend::Gcs {
            bucket,
            kms_key_name,
            project,
            endpoint,
            ..
        } => Ok(Arc::new(super::gcs::GcsObjects::connect(
            bucket,
            project.as_deref(),
            endpoint.as_deref(),
            kms_key_name.as_deref(),
            access,
        )?)),
        backend => Err(format!(
            "this forge was built without the `{}` backend (its cloud's feature is off)",
            backend.name()
        )),
    }
}

impl Store {
    /// The store `settings` name; a remote one connects to its bucket with `access`.
    pub fn open(settings: &Backend, access: &Access) -> Result<Store, StateError> {
        let (key, lease) = match settings {
            Backend::Local { path } => return Ok(Store::Local(LocalStore::new(path))),
            Backend::S3 { key, lease, .. } | Backend::Gcs { key, lease, .. } => (key, lease),
        };
        let objects = connect(settings, access).map_err(|message| StateError::Remote {
            location: settings.location(),
            message,
        })?;
        let lease = lease.as_deref().and_then(|l| humantime::parse_duration(l).ok()).unwrap_or(LEASE);
        Ok(Store::Remote(RemoteStore::new(objects, key, lease, rescue_path(settings))))
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
