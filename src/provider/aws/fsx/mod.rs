//! What the FSx kinds share: their tags, the owner check that lets a retried or resumed create
//! adopt what its first try made, tag updates by ARN, and their lifecycle states.

pub(super) mod data_repository_association;
pub(super) mod lustre;

use super::{Clients, Status, made_by};
use crate::provider::{Ctx, ProviderError};
use aws_sdk_fsx::types::{DataRepositoryAssociation, FileSystem, Tag};
use serde_json::Value;

/// FSx's error code for a file system that does not exist.
pub(super) const FILE_SYSTEM_NOT_FOUND: &str = "FileSystemNotFound";

/// FSx's error code for a data repository association that does not exist.
pub(super) const ASSOCIATION_NOT_FOUND: &str = "DataRepositoryAssociationNotFound";

impl Status for FileSystem {
    fn status_name(&self) -> Option<&str> {
        self.lifecycle().map(aws_sdk_fsx::types::FileSystemLifecycle::as_str)
    }
}

impl Status for DataRepositoryAssociation {
    fn status_name(&self) -> Option<&str> {
        self.lifecycle().map(aws_sdk_fsx::types::DataRepositoryLifecycle::as_str)
    }
}

/// The tags an FSx object is created with (see [`super::create_tags`]).
pub(super) fn create_tags(ctx: &Ctx, token: &str, config: &Value) -> Vec<Tag> {
    super::create_tags(ctx, token, config)
        .into_iter()
        .map(|(k, v)| Tag::builder().key(k).value(v).build())
        .collect()
}

/// Whether an FSx object with these tags was made by the create with `token` (see [`made_by`]).
pub(super) fn owned(ctx: &Ctx, token: &str, tags: &[Tag]) -> bool {
    made_by(ctx, token, |k| tags.iter().find(|t| t.key() == Some(k)).and_then(|t| t.value()))
}

/// The stack and address of the forge mark these FSx tags carry, if any.
pub(super) fn mark_of(tags: &[Tag]) -> Option<(String, String)> {
    super::mark_in(|k| tags.iter().find(|t| t.key() == Some(k)).and_then(|t| t.value()))
}

/// Puts forge's mark ([`super::mark_tags`]) on the FSx object `arn`: one TagResource.
pub(super) async fn mark(ctx: &Ctx, aws: &Clients, arn: &str, token: &str) -> Result<(), ProviderError> {
    let tags = super::mark_tags(ctx, token).map(|(k, v)| Tag::builder().key(k).value(v).build());
    aws.fsx
        .tag_resource()
        .resource_arn(arn)
        .set_tags(Some(tags.to_vec()))
        .send()
        .await
        .map_err(|e| super::error(aws, "TagResource", e))?;
    Ok(())
}

/// Brings an FSx object's tags from `old` to `new` config with one UntagResource and one
/// TagResource at most.
pub(super) async fn sync_tags(ctx: &Ctx, aws: &Clients, arn: &str, old: &Value, new: &Value) -> Result<(), ProviderError> {
    let (removed, changed) = super::tag_changes(ctx, old, new);
    let set = (!changed.is_empty()).then(|| {
        changed
            .into_iter()
            .map(|(k, v)| Tag::builder().key(k).value(v).build())
            .collect::<Vec<_>>()
    });
    retag!(aws, fsx, untag_resource, tag_resource, resource_arn(arn), removed, set);
    Ok(())
}
