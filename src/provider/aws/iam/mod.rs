//! IAM: roles, policies, instance profiles and OIDC providers, one file each, and what they
//! share here: IAM's tag types, ownership by forge's token, its code for what is gone, and the
//! default path.

/// Applies an IAM tag update (see [`iam_tag_changes`]) with the kind's own calls:
/// `sync_iam_tags!(ctx, aws, old, new, untag_role, tag_role, role_name(id))`.
macro_rules! sync_iam_tags {
    ($ctx:expr, $aws:expr, $old:expr, $new:expr, $untag:ident, $tag:ident, $key:ident($id:expr)) => {{
        let (removed, set) = $crate::provider::aws::iam::iam_tag_changes($ctx, $old, $new);
        retag!($aws, iam, $untag, $tag, $key($id), removed, set);
    }};
}

pub(super) mod instance_profile;
pub(super) mod oidc_provider;
pub(super) mod policy;
pub(super) mod role;

use super::{Claim, Clients, create_tags, made_by, tolerate};
use crate::provider::{Ctx, ProviderError};
use aws_sdk_ec2::config::http::HttpResponse;
use aws_sdk_ec2::error::{ProvideErrorMetadata, SdkError};
use serde_json::Value;

/// IAM's error code for an object that does not exist.
pub(super) const NO_SUCH_ENTITY: &str = "NoSuchEntity";

/// The ARN of what a create `made` (`arn` reads it from the answer), or — when IAM says the
/// name is taken — that of the object `lookup` finds, when `claim` says it is this create's
/// own; any other failure is `op`'s error.
pub(super) async fn made_or_adopted<O, E>(
    aws: &Clients,
    claim: &Claim<'_>,
    op: &str,
    made: Result<O, SdkError<E, HttpResponse>>,
    arn: impl FnOnce(O) -> String,
    lookup: impl Future<Output = Result<Option<(String, bool)>, ProviderError>>,
) -> Result<String, ProviderError>
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    match made {
        Ok(answer) => Ok(arn(answer)),
        Err(e) if e.code() == Some("EntityAlreadyExists") => claim.adopt(lookup.await?),
        Err(e) => Err(super::error(aws, op, e)),
    }
}

/// What a kind's `find` answers from its lookup: the ARN, when the object is its own.
pub(super) fn own_arn(found: Option<(String, bool)>) -> Option<String> {
    found.filter(|(_, own)| *own).map(|(arn, _)| arn)
}

/// An IAM call that is already so when what it names is gone ([`NO_SUCH_ENTITY`]): a delete,
/// a detach, a removal (see [`tolerate`]).
pub(super) fn gone_ok<T, E>(aws: &Clients, what: &str, result: Result<T, SdkError<E, HttpResponse>>) -> Result<(), ProviderError>
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    tolerate(aws, what, result, &[NO_SUCH_ENTITY])
}

/// Takes `role` out of the instance profile `profile`; a profile or role that is gone is out
/// already.
pub(super) async fn remove_role(aws: &Clients, profile: &str, role: &str) -> Result<(), ProviderError> {
    let removed = aws
        .iam
        .remove_role_from_instance_profile()
        .instance_profile_name(profile)
        .role_name(role)
        .send()
        .await;
    gone_ok(aws, "RemoveRoleFromInstanceProfile", removed)
}

/// The tags an IAM object is created with.
pub(super) fn iam_tags(ctx: &Ctx, config: &Value) -> Vec<aws_sdk_iam::types::Tag> {
    ctx.tags(config)
        .into_iter()
        .filter_map(|(k, v)| aws_sdk_iam::types::Tag::builder().key(k).value(v).build().ok())
        .collect()
}

/// The tags an IAM object is created with: [`create_tags`].
pub(super) fn iam_create_tags(ctx: &Ctx, token: &str, config: &Value) -> Vec<aws_sdk_iam::types::Tag> {
    create_tags(ctx, token, config)
        .into_iter()
        .filter_map(|(k, v)| aws_sdk_iam::types::Tag::builder().key(k).value(v).build().ok())
        .collect()
}

/// Whether an existing IAM object was made by the create with `token` (see [`made_by`]).
pub(super) fn iam_owned(ctx: &Ctx, token: &str, tags: &[aws_sdk_iam::types::Tag]) -> bool {
    made_by(ctx, token, |k| {
        tags.iter().find(|t| t.key() == k).map(aws_sdk_iam::types::Tag::value)
    })
}

/// What an IAM tag update does: the keys to remove, and the full tag set to apply when
/// anything changed.
pub(super) fn iam_tag_changes(ctx: &Ctx, old: &Value, new: &Value) -> (Vec<String>, Option<Vec<aws_sdk_iam::types::Tag>>) {
    let (before, after) = (ctx.tags(old), ctx.tags(new));
    let removed = before.keys().filter(|k| !after.contains_key(*k)).cloned().collect();
    (removed, (before != after).then(|| iam_tags(ctx, new)))
}

/// IAM's default path for roles, policies and instance profiles.
pub(super) fn iam_root_path() -> String {
    "/".into()
}

/// A policy document as IAM returns it (URL-encoded JSON) as the table a block writes.
pub(super) fn policy_value(encoded: &str) -> Result<Value, ProviderError> {
    let text = percent_encoding::percent_decode_str(encoded).decode_utf8_lossy();
    serde_json::from_str(&text).map_err(|e| ProviderError::permanent(format!("IAM returned a policy document that is not JSON: {e}")))
}

/// IAM tags as a table, as a block writes them.
pub(super) fn iam_tag_table(tags: &[aws_sdk_iam::types::Tag]) -> Value {
    super::tag_table(tags.iter().map(|t| (Some(t.key()), Some(t.value()))))
}

/// The stack and address of the forge mark these IAM tags carry, if any.
pub(super) fn iam_mark(tags: &[aws_sdk_iam::types::Tag]) -> Option<(String, String)> {
    super::mark_in(|k| tags.iter().find(|t| t.key() == k).map(aws_sdk_iam::types::Tag::value))
}

/// forge's mark ([`super::mark_tags`]) as IAM tags.
pub(super) fn mark_tags(ctx: &Ctx, token: &str) -> Vec<aws_sdk_iam::types::Tag> {
    super::mark_tags(ctx, token)
        .into_iter()
        .filter_map(|(k, v)| aws_sdk_iam::types::Tag::builder().key(k).value(v).build().ok())
        .collect()
}

/// A policy document (a TOML table) as the JSON string IAM takes.
pub(super) fn policy_json(document: &Value) -> String {
    serde_json::to_string(document).expect("JSON values serialize")
}
