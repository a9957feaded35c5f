//! What the EKS kinds share: their tags, the owner check that lets a retried or resumed create
//! adopt the object its first try made, and the wait for an EKS update to finish.

pub(super) mod access_entry;
pub(super) mod addon;
pub(super) mod cluster;
pub(super) mod nodegroup;

use super::{Claim, Clients, Poll, Status, child_id, error, made_by, wait_until};
use crate::provider::{Ctx, ProviderError};
use aws_sdk_ec2::config::http::HttpResponse;
use aws_sdk_ec2::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_eks::types::{Addon, Cluster, Nodegroup, UpdateStatus};
use serde_json::Value;
use std::collections::HashMap;
use std::future::Future;
use std::time::Duration;

/// EKS's error code for a cluster, node group, add-on or update that does not exist.
pub(super) const NOT_FOUND: &str = "ResourceNotFoundException";

/// EKS's error code for a name that is taken (or an object still in use).
pub(super) const IN_USE: &str = "ResourceInUseException";

/// What forge reads of every EKS object (cluster, node group, add-on) besides its status
/// ([`Status`]): its tags and the issues its health reports.
pub(super) trait Object: Status {
    /// Its tags.
    fn tag_map(&self) -> Option<&HashMap<String, String>>;
    /// The issues its health reports, as one line.
    fn issues(&self) -> String;
}

/// The EKS object types answer [`Status`] and [`Object`] with the accessors they all have; an
/// object that shows no status reads as DELETING.
macro_rules! objects {
    ($($object:ty),+) => {$(
        impl Status for $object {
            fn status_name(&self) -> Option<&str> {
                Some(self.status().map_or("DELETING", |s| s.as_str()))
            }
        }

        impl Object for $object {
            fn tag_map(&self) -> Option<&HashMap<String, String>> {
                self.tags()
            }

            fn issues(&self) -> String {
                self.health()
                    .map(|h| h.issues().iter().filter_map(|i| i.message()).collect::<Vec<_>>().join("; "))
                    .unwrap_or_default()
            }
        }
    )+};
}

objects!(Cluster, Nodegroup, Addon);

/// The tags an EKS object is created with (see [`super::create_tags`]).
pub(super) fn create_tags(ctx: &Ctx, token: &str, config: &Value) -> HashMap<String, String> {
    super::create_tags(ctx, token, config).into_iter().collect()
}

/// Whether an object with these tags was made by the create with `token` (see [`made_by`]).
pub(super) fn owned(ctx: &Ctx, token: &str, tags: Option<&HashMap<String, String>>) -> bool {
    made_by(ctx, token, |k| tags.and_then(|t| t.get(k)).map(String::as_str))
}

/// The stack and address of the forge mark these EKS tags carry, if any.
pub(super) fn mark_of(tags: Option<&HashMap<String, String>>) -> Option<(String, String)> {
    super::mark_in(|k| tags.and_then(|t| t.get(k)).map(String::as_str))
}

/// Puts forge's mark ([`super::mark_tags`]) on the EKS object `arn`: one TagResource.
pub(super) async fn mark(ctx: &Ctx, aws: &Clients, arn: &str, token: &str) -> Result<(), ProviderError> {
    let tags: HashMap<String, String> = super::mark_tags(ctx, token).map(|(k, v)| (k.to_owned(), v.to_owned())).into();
    aws.eks
        .tag_resource()
        .resource_arn(arn)
        .set_tags(Some(tags))
        .send()
        .await
        .map_err(|e| super::error(aws, "TagResource", e))?;
    Ok(())
}

/// The result of a create: EKS refusing a taken name is a success when the object there is
/// the `claim`'s own (an earlier try made it; `get` reads the object), its refusal otherwise.
pub(super) async fn created_or_own<T, O, E, F, Fut>(
    claim: &Claim<'_>,
    aws: &Clients,
    operation: &str,
    made: Result<O, SdkError<E, HttpResponse>>,
    get: F,
) -> Result<(), ProviderError>
where
    T: Object,
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    F: FnOnce() -> Fut,
    Fut: Future<Output = Result<Option<T>, ProviderError>>,
{
    match made {
        Ok(_) => Ok(()),
        Err(e) if super::code(&e) == Some(IN_USE) => match get().await? {
            Some(found) if claim.adopts(|k| found.tag_map()?.get(k).map(String::as_str)) => Ok(()),
            _ => Err(claim.refusal()),
        },
        // A role made seconds ago may not be assumable yet (IAM is eventually consistent):
        // EKS says so with InvalidParameterException, and a later try succeeds.
        Err(e) if super::code(&e) == Some("InvalidParameterException") && e.message().is_some_and(|m| m.contains("role")) => {
            Err(ProviderError {
                retryable: true,
                ..error(aws, operation, e)
            })
        }
        Err(e) => Err(error(aws, operation, e)),
    }
}

/// Brings an EKS object's tags from `old` to `new` config with one UntagResource and one
/// TagResource at most.
pub(super) async fn sync_tags(ctx: &Ctx, aws: &Clients, arn: &str, old: &Value, new: &Value) -> Result<(), ProviderError> {
    let (removed, changed) = super::tag_changes(ctx, old, new);
    let set = (!changed.is_empty()).then(|| changed.into_iter().collect::<HashMap<_, _>>());
    retag!(aws, eks, untag_resource, tag_resource, resource_arn(arn), removed, set);
    Ok(())
}

/// What an update belongs to besides its cluster.
#[derive(Clone, Copy)]
pub(super) enum Scope<'a> {
    /// The cluster itself.
    Cluster,
    /// One of its node groups.
    Nodegroup(&'a str),
    /// One of its add-ons.
    Addon(&'a str),
}

/// Waits until the update `id` of `cluster` has succeeded; a failed or cancelled update is an
/// error with EKS's own reasons.
pub(super) async fn wait_update(
    ctx: &Ctx,
    aws: &Clients,
    cluster: &str,
    scope: Scope<'_>,
    id: &str,
    timeout: Duration,
) -> Result<(), ProviderError> {
    let (nodegroup, addon) = match scope {
        Scope::Cluster => (None, None),
        Scope::Nodegroup(n) => (Some(n.to_owned()), None),
        Scope::Addon(a) => (None, Some(a.to_owned())),
    };
    wait_until(ctx, timeout, || async {
        let out = aws
            .eks
            .describe_update()
            .name(cluster)
            .update_id(id)
            .set_nodegroup_name(nodegroup.clone())
            .set_addon_name(addon.clone())
            .send()
            .await
            .map_err(|e| error(aws, "DescribeUpdate", e))?;
        let Some(update) = out.update() else {
            return Ok(Poll::Pending("update pending".into()));
        };
        Ok(match update.status() {
            Some(UpdateStatus::Successful) => Poll::Done(()),
            Some(status @ (UpdateStatus::Failed | UpdateStatus::Cancelled)) => {
                let reasons: Vec<String> = update
                    .errors()
                    .iter()
                    .map(|e| e.error_message().unwrap_or("no reason given").to_owned())
                    .collect();
                Poll::Failed(format!("EKS update {id} {}: {}", status.as_str(), reasons.join("; ")))
            }
            Some(status) => Poll::Pending(format!("update {}", status.as_str())),
            None => Poll::Pending("update pending".into()),
        })
    })
    .await
}

/// The child id a block will have, known at plan time from `cluster_name` and `name`.
pub(super) fn planned_child_id(config: &Value, _: Option<&Value>) -> Value {
    match (
        config.get("cluster_name").and_then(Value::as_str),
        config.get("name").and_then(Value::as_str),
    ) {
        (Some(cluster), Some(name)) => Value::String(child_id(cluster, name)),
        _ => Value::Null,
    }
}
