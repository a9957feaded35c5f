//! What the FSx kinds share: their tags, the owner check that lets a retried or resumed create
//! adopt what its first try made, and tag updates by ARN.

use super::{Clients, TOKEN_TAG};
use crate::provider::{Ctx, ProviderError};
use aws_sdk_fsx::types::Tag;
use serde_json::Value;

/// FSx's error code for a file system that does not exist.
pub const FILE_SYSTEM_NOT_FOUND: &str = "FileSystemNotFound";

/// FSx's error code for a data repository association that does not exist.
pub const ASSOCIATION_NOT_FOUND: &str = "DataRepositoryAssociationNotFound";

/// The tags an FSx object is created with: the block's, forge's, and `forge:token`.
pub fn create_tags(ctx: &Ctx, token: &str, config: &Value) -> Vec<Tag> {
    let mut tags = ctx.tags(config);
    tags.insert(TOKEN_TAG.into(), token.into());
    tags.into_iter().map(|(k, v)| Tag::builder().key(k).value(v).build()).collect()
}

/// Whether an FSx object with these tags was made by the create with `token`.
pub fn owned(ctx: &Ctx, token: &str, tags: &[Tag]) -> bool {
    let has = |k: &str, v: &str| tags.iter().any(|t| t.key() == Some(k) && t.value() == Some(v));
    has("forge:stack", &ctx.stack) && has("forge:address", &ctx.address) && has(TOKEN_TAG, token)
}

/// Brings an FSx object's tags from `old` to `new` config with one UntagResource and one
/// TagResource at most.
pub async fn sync_tags(ctx: &Ctx, aws: &Clients, arn: &str, old: &Value, new: &Value) -> Result<(), ProviderError> {
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
