//! What a remote state backend needs of an object store, and no more: read an object with its
//! version tag (S3's ETag, GCS's generation), write one unconditionally, only if it does not
//! exist, or only if it is still the version read (compare-and-swap), and delete one. The
//! remote state ([`super::remote`]) is written once over this; each store is one file.

/// The condition of a write or delete.
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
    /// Deletes the object if `condition` holds; one already gone is a success.
    fn delete(&self, key: &str, condition: Condition) -> Result<(), ObjectError>;
}
