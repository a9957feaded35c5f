//! The provider settings a stack file writes, `[aws]` and `[gcp]`: one typed table per
//! provider, declared once with `schema::block!`, so the loader checks the written tables
//! against the same declaration ([`crate::schema::Block::FIELDS`]) that each provider's clients
//! read. Built without either cloud feature too: the loader checks `[aws]` and `[gcp]` even then.

use crate::schema::{AttributeType, FieldType, block};
use serde_json::{Map, Value};

/// The stack's provider settings; a table the file leaves out is `None`. Serialized as the
/// tables are written, `{"aws": {…}, "gcp": {…}}`, the shape saved plans keep.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct Providers {
    /// `[aws]`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub aws: Option<AwsSettings>,
    /// `[gcp]`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gcp: Option<GcpSettings>,
}

impl Providers {
    /// `[aws] region`, when the stack sets it.
    pub fn aws_region(&self) -> Option<&str> {
        self.aws.as_ref()?.region.as_deref()
    }

    /// `[gcp] region`, when the stack sets it.
    pub fn gcp_region(&self) -> Option<&str> {
        self.gcp.as_ref()?.region.as_deref()
    }
}

block! {
    /// `[aws]`: where the AWS calls go, and the tags every AWS object gets.
    #[derive(Debug, Clone, PartialEq, Default, serde::Serialize)]
    pub struct AwsSettings {
        /// The region, else the standard AWS chain's.
        #[serde(skip_serializing_if = "Option::is_none")]
        region: Option<String>,
        /// The shared-config profile, else the standard AWS chain's.
        #[serde(skip_serializing_if = "Option::is_none")]
        profile: Option<String>,
        /// Tags merged into every `aws_*` block's `tags`: strings (the loader checks), in file order.
        #[serde(skip_serializing_if = "Option::is_none")]
        default_tags: Option<Map<String, Value>>,
    }
}

block! {
    /// `[gcp]`: where the Google calls go, and the labels every Google object that takes them gets.
    #[derive(Debug, Clone, PartialEq, Default, serde::Serialize)]
    pub struct GcpSettings {
        /// The project, else Google's environment's.
        #[serde(skip_serializing_if = "Option::is_none")]
        project: Option<String>,
        /// The region, else Google's environment's.
        #[serde(skip_serializing_if = "Option::is_none")]
        region: Option<String>,
        /// Labels merged into every Google object's `labels` or `resource_labels`: strings (the
        /// loader checks), in file order.
        #[serde(skip_serializing_if = "Option::is_none")]
        default_labels: Option<Map<String, Value>>,
        /// Root URLs of Google's APIs.
        #[serde(skip_serializing_if = "Option::is_none")]
        endpoints: Option<GcpEndpoints>,
    }
}

block! {
    /// `[gcp] endpoints`: an API's root URL, by the API's name as gcloud writes it.
    #[derive(Debug, Clone, PartialEq, serde::Serialize)]
    pub struct GcpEndpoints {
        /// Compute Engine's.
        #[serde(skip_serializing_if = "Option::is_none")]
        compute: Option<String>,
        /// GKE's.
        #[serde(skip_serializing_if = "Option::is_none")]
        container: Option<String>,
        /// Filestore's.
        #[serde(skip_serializing_if = "Option::is_none")]
        file: Option<String>,
        /// Cloud Storage's, for a `gcs` state.
        #[serde(skip_serializing_if = "Option::is_none")]
        storage: Option<String>,
    }
}

impl AttributeType for GcpEndpoints {
    const TYPE: FieldType = FieldType::Table;
}

impl GcpEndpoints {
    /// The root URL set for the API `service` (`compute`, `container`, `file`, `storage`), if any.
    pub fn get(&self, service: &str) -> Option<&str> {
        match service {
            "compute" => self.compute.as_deref(),
            "container" => self.container.as_deref(),
            "file" => self.file.as_deref(),
            "storage" => self.storage.as_deref(),
            _ => None,
        }
    }
}
