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

/// Where a store's async calls run: the command's runtime (the one `main` builds), driven to
/// their end from the store's plain methods: directly from a plain thread (the journal writer,
/// the lock renewer), and from inside the runtime off its async workers (`block_in_place`).
pub struct CallRuntime(tokio::runtime::Handle);

impl CallRuntime {
    /// The command's runtime, for the calls of `store` (named in the error).
    pub fn new(store: &str) -> Result<Self, String> {
        tokio::runtime::Handle::try_current()
            .map(CallRuntime)
            .map_err(|_| format!("{store} calls run on forge's async runtime, and none is running"))
    }

    /// Runs `call` to its end.
    pub fn block_on<T>(&self, call: impl std::future::Future<Output = T>) -> T {
        match tokio::runtime::Handle::try_current() {
            Ok(_) => tokio::task::block_in_place(|| self.0.block_on(call)),
            Err(_) => self.0.block_on(call),
        }
    }
}
