//! What a remote state backend needs of an object store, and no more: read an object with its
//! version tag (S3's ETag, GCS's generation), write one unconditionally, only if it does not
//! exist, or only if it is still the version read (compare-and-swap). Nothing is listed and
//! nothing needs deleting: a released lock is an empty object written by compare-and-swap, and
//! folded journal segments are discarded where the store can (S3), left where it cannot (the
//! GCS crate deletes only over gRPC). The remote state ([`super::remote`]) is written once over
//! this; each store is one file.

/// The condition of a write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Condition {
    /// None.
    Always,
    /// Only if no object has the key (S3 `If-None-Match: *`, GCS `ifGenerationMatch=0`).
    Absent,
    /// Only if the object is still this version (S3 `If-Match`, GCS `ifGenerationMatch`).
    Version(String),
}

/// A failed object call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ObjectError {
    /// The condition did not hold (HTTP 412): someone else wrote.
    Conflict,
    /// Anything else: the store's message, with bucket and endpoint.
    Failed(String),
}

/// An object store, called from plain threads (each store runs its own async runtime).
pub trait Objects: Send + Sync + 'static {
    /// `s3://bucket/key`, for messages.
    fn url(&self, key: &str) -> String;
    /// The object's bytes and version tag, or `None`.
    fn get(&self, key: &str) -> Result<Option<(Vec<u8>, String)>, ObjectError>;
    /// Writes the object if `condition` holds; returns its new version tag.
    fn put(&self, key: &str, bytes: Vec<u8>, condition: Condition) -> Result<String, ObjectError>;

    /// [`Objects::put`], recognising a retried write whose first answer was lost: the SDKs
    /// retry a conditional write on a server error, and the retry fails its own condition
    /// (412) although the first try landed. An object holding exactly these bytes is that try.
    fn write(&self, key: &str, bytes: Vec<u8>, condition: Condition) -> Result<String, ObjectError> {
        match self.put(key, bytes.clone(), condition) {
            Err(ObjectError::Conflict) => match self.get(key)? {
                Some((current, version)) if current == bytes => Ok(version),
                _ => Err(ObjectError::Conflict),
            },
            done => done,
        }
    }
    /// Removes an object no reader needs any more, if the store can; best effort.
    fn discard(&self, key: &str);
}

/// The async runtime a store's calls run on, driven from plain threads: one worker, enough
/// for one call at a time. Dropped without waiting, since a store may be dropped on an async
/// worker (`forge drift`).
pub struct CallRuntime(Option<tokio::runtime::Runtime>);

impl CallRuntime {
    /// A runtime for the calls of `store` (named in the error).
    pub fn new(store: &str) -> Result<Self, String> {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .map(|runtime| CallRuntime(Some(runtime)))
            .map_err(|e| format!("cannot start the runtime for {store} calls: {e}"))
    }

    /// Runs `call` to its end.
    pub fn block_on<T>(&self, call: impl std::future::Future<Output = T>) -> T {
        self.0.as_ref().expect("the runtime lives as long as the store").block_on(call)
    }
}

impl Drop for CallRuntime {
    fn drop(&mut self) {
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_background();
        }
    }
}
