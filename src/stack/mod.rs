//! ① The stack file: TOML → a validated [`Stack`]. Reads the file and nothing else.
//!
//! Loading checks every section, key, type, name and reference against the kinds and
//! components forge knows, substitutes `${var.…}`, expands components into resources and
//! inlines references to component outputs, so that what leaves this module is a flat list of
//! resources whose templates refer only to other resources.

pub mod diagnostic;
mod load;

pub use diagnostic::{SourceFile, StackError};
pub use load::{LoadError, Parsed, load, load_str, parse, parse_str};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::PathBuf;

/// A validated stack: what `forge` builds.
#[derive(Debug, Clone)]
pub struct Stack {
    /// `[stack] name`: names the state and tags every resource.
    pub name: String,
    /// `[stack] description`.
    pub description: Option<String>,
    /// The file it came from, for errors that point into it.
    pub source: SourceFile,
    /// Provider settings (`[aws]`, `[gcp]`) by provider name.
    pub providers: BTreeMap<String, Value>,
    /// Where the state lives.
    pub state: StateSettings,
    /// `[outputs]`: templates evaluated against the state after `up`.
    pub outputs: BTreeMap<String, Value>,
    /// Every resource, components expanded, in file order.
    pub resources: Vec<Resource>,
    /// Each component's outputs by its address (`fsx.data`): templates over its resources.
    pub component_outputs: BTreeMap<String, serde_json::Map<String, Value>>,
    /// What `up` checks at the end before it calls the clusters ready: the components'
    /// readiness checks, templates over their resources (see `provider::k8s::ready`).
    pub readiness: Vec<crate::readiness::Check>,
    /// The sha256 of each bundle its components apply without a pinned digest, by URL: the
    /// state records them on the first apply, and a later plan refuses a bundle that changed.
    pub bundles: BTreeMap<String, String>,
}

/// One resource the stack declares.
#[derive(Debug, Clone)]
pub struct Resource {
    /// `null.a`, or `<component>.<name>.<local>` for a component's resources.
    pub address: String,
    /// The kind's name (`null`).
    pub kind: String,
    /// The attributes, as a template whose references name other resources.
    pub config: Value,
    /// Addresses this resource must follow: its references and `depends_on`, sorted, unique.
    pub depends_on: Vec<String>,
    /// `ignore_changes`: attribute paths (`tags.team`) whose live changes drift leaves out
    /// (a component's apply to each resource it makes).
    pub ignore_changes: Vec<String>,
    /// The block header (or the component's) in the file.
    pub span: Range<usize>,
}

/// Where and how state is kept (`[state]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateSettings {
    /// `local` (a file), `s3` or `gcs` (an object in a bucket).
    pub backend: String,
    /// The local state file, relative to the working directory.
    pub path: PathBuf,
    /// The bucket of a remote state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bucket: Option<String>,
    /// The object key of a remote state's snapshot: S3's `key` (`<stack>/state.json` by
    /// default), GCS's `<prefix>/state.json` (prefix `<stack>` by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// The bucket's region (default `[aws] region`, else the environment's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// SSE-KMS key of an S3 state (default SSE-S3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kms_key_id: Option<String>,
    /// Cloud KMS key of a GCS state (default Google's keys).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kms_key_name: Option<String>,
    /// The project of a GCS state's bucket, for messages (`[gcp] project`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    /// The Cloud Storage endpoint of a GCS state (`[gcp] endpoints.storage`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// How long a remote lock lasts unless its holder renews it (`"2m"` by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease: Option<String>,
}

impl StateSettings {
    /// The local backend's file `path`.
    pub fn local(path: PathBuf) -> Self {
        StateSettings {
            backend: "local".into(),
            path,
            bucket: None,
            key: None,
            region: None,
            kms_key_id: None,
            kms_key_name: None,
            project: None,
            endpoint: None,
            lease: None,
        }
    }

    /// Where the state is, as messages say it: the file, `s3://bucket/key` or `gs://bucket/key`.
    pub fn location(&self) -> String {
        let scheme = if self.backend == "gcs" { "gs" } else { &self.backend };
        match (&self.bucket, &self.key) {
            (Some(bucket), Some(key)) => format!("{scheme}://{bucket}/{key}"),
            _ => self.path.display().to_string(),
        }
    }
}
