//! What the AWS Parallel Computing Service (PCS) kinds share: Slurm settings, tags, the owner
//! check that lets a resumed create adopt what its first try made, and the waits on `status`
//! (PCS has no waiters): `*_FAILED` ends a wait with PCS's `errorInfo`.

pub(super) mod cluster;
pub(super) mod compute_node_group;
pub(super) mod queue;

use super::{Claim, Clients, Poll, Status, error, made_by, wait_for};
use crate::provider::{Ctx, Observed, ProviderError};
use aws_sdk_ec2::config::http::HttpResponse;
use aws_sdk_ec2::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_pcs::types::{Cluster, ComputeNodeGroup, ErrorInfo, Queue, SlurmCustomSetting};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::time::Duration;

/// PCS's error code for a cluster, node group or queue that does not exist.
pub(super) const NOT_FOUND: &str = "ResourceNotFoundException";

/// PCS's error code for a name that is taken, or an object in a state that forbids the call
/// (a cluster not ACTIVE yet, a node group a queue still uses).
pub(super) const CONFLICT: &str = "ConflictException";

/// What forge reads of every PCS object (cluster, compute node group, queue) besides its status
/// ([`Status`]): its ARN, by which its tags are read, and its `errorInfo`.
pub(super) trait Object: Status {
    /// Its ARN.
    fn object_arn(&self) -> &str;
    /// Its `errorInfo`.
    fn errors(&self) -> &[ErrorInfo];
}

/// The PCS object types answer [`Status`] and [`Object`] with the accessors they all have.
macro_rules! objects {
    ($($object:ty),+) => {$(
        impl Status for $object {
            fn status_name(&self) -> Option<&str> {
                Some(self.status().as_str())
            }
        }

        impl Object for $object {
            fn object_arn(&self) -> &str {
                self.arn()
            }

            fn errors(&self) -> &[ErrorInfo] {
                self.error_info()
            }
        }
    )+};
}

objects!(Cluster, ComputeNodeGroup, Queue);

/// Slurm settings as PCS takes them (`slurmCustomSettings`), from `{ name = "value" }`.
pub(super) fn slurm_settings(settings: &BTreeMap<String, String>) -> Result<Vec<SlurmCustomSetting>, ProviderError> {
    settings
        .iter()
        .map(|(name, value)| {
            SlurmCustomSetting::builder()
                .parameter_name(name)
                .parameter_value(value)
                .build()
                .map_err(|e| ProviderError::permanent(format!("Slurm setting `{name}`: {e}")))
        })
        .collect()
}

/// Slurm settings as PCS shows them, back into `{ name = "value" }`.
pub(super) fn settings_of(settings: &[SlurmCustomSetting]) -> BTreeMap<String, String> {
    settings
        .iter()
        .map(|s| (s.parameter_name().to_owned(), s.parameter_value().to_owned()))
        .collect()
}

/// The tags a PCS object is created with (see [`super::create_tags`]).
pub(super) fn create_tags(ctx: &Ctx, token: &str, config: &Value) -> HashMap<String, String> {
    super::create_tags(ctx, token, config).into_iter().collect()
}

/// The tags of the PCS object `arn`.
pub(super) async fn tags(aws: &Clients, arn: &str) -> Result<HashMap<String, String>, ProviderError> {
    let out = aws
        .pcs
        .list_tags_for_resource()
        .resource_arn(arn)
        .send()
        .await
        .map_err(|e| error(aws, "ListTagsForResource", e))?;
    Ok(out.tags().cloned().unwrap_or_default())
}

/// Whether the PCS object `arn` was made by the create with `token` (see [`made_by`]).
pub(super) async fn owned(ctx: &Ctx, aws: &Clients, token: &str, arn: &str) -> Result<bool, ProviderError> {
    let tags = tags(aws, arn).await?;
    Ok(made_by(ctx, token, |k| tags.get(k).map(String::as_str)))
}

/// Brings a PCS object's tags from `old` to `new` config with one UntagResource and one
/// TagResource at most.
pub(super) async fn sync_tags(ctx: &Ctx, aws: &Clients, arn: &str, old: &Value, new: &Value) -> Result<(), ProviderError> {
    let (removed, changed) = super::tag_changes(ctx, old, new);
    let set = (!changed.is_empty()).then(|| changed.into_iter().collect::<HashMap<_, _>>());
    retag!(aws, pcs, untag_resource, tag_resource, resource_arn(arn), removed, set);
    Ok(())
}

/// Whether a create was refused because the name is taken.
pub(super) fn is_taken<E: ProvideErrorMetadata, R>(err: &SdkError<E, R>) -> bool {
    err.code() == Some(CONFLICT) && err.message().is_some_and(|m| m.contains("already exists"))
}

/// The end of a create: PCS refusing a taken name is a success when the object of that name
/// is the `claim`'s own (an earlier try made it; `get` reads the object), its refusal
/// otherwise; then the wait until the object is ACTIVE ([`active`]), which returns it.
pub(super) async fn created_and_active<T, O, E, F, Fut>(
    claim: &Claim<'_>,
    aws: &Clients,
    operation: &str,
    made: Result<O, SdkError<E, HttpResponse>>,
    limit: Duration,
    get: F,
) -> Result<T, ProviderError>
where
    T: Object,
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    F: Fn() -> Fut,
    Fut: Future<Output = Result<Option<T>, ProviderError>>,
{
    match made {
        Ok(_) => {}
        Err(e) if is_taken(&e) => {
            if own(claim.ctx, aws, claim.token, get().await?).await?.is_none() {
                return Err(claim.refusal());
            }
        }
        Err(e) => return Err(pcs_error(aws, operation, e)),
    }
    wait_for(claim.ctx, &format!("{} `{}`", claim.what, claim.name), limit, get, active).await
}

/// `found` when the create with `token` made it (its tags, read by its ARN, say so).
pub(super) async fn own<T: Object>(ctx: &Ctx, aws: &Clients, token: &str, found: Option<T>) -> Result<Option<T>, ProviderError> {
    match found {
        Some(found) if owned(ctx, aws, token, found.object_arn()).await? => Ok(Some(found)),
        _ => Ok(None),
    }
}

/// Maps a PCS error, marking as worth retrying what a later call may not hit: a conflict
/// with an object's state (a cluster still CREATING, a node group still UPDATING) and PCS's
/// one-cluster-creating-at-a-time quota.
pub(super) fn pcs_error<E>(aws: &Clients, what: &str, err: SdkError<E, HttpResponse>) -> ProviderError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    let later = matches!(super::code(&err), Some(CONFLICT | "ServiceQuotaExceededException"))
        && err
            .message()
            .is_some_and(|m| m.contains("CREATING") || m.contains("UPDATING") || m.contains("DELETING"));
    let mapped = error(aws, what, err);
    ProviderError {
        retryable: mapped.retryable || later,
        ..mapped
    }
}

/// PCS's `errorInfo`, as one line.
fn error_info(errors: &[ErrorInfo]) -> String {
    let lines: Vec<String> = errors
        .iter()
        .map(|e| format!("{}: {}", e.code().unwrap_or("error"), e.message().unwrap_or("no reason given")))
        .collect();
    if lines.is_empty() {
        "PCS gives no reason".into()
    } else {
        lines.join("; ")
    }
}

/// The live members (`<cluster>/<id>`) of clusters as drift sees them: one Get each (PCS's
/// lists carry no attributes), read with `get` and shown in the shape of their config by
/// `attributes`.
pub(super) async fn observe<T, G, GFut>(
    live: impl IntoIterator<Item = String>,
    get: G,
    attributes: fn(&T) -> Value,
) -> Result<Vec<Observed>, ProviderError>
where
    G: Fn(String, String) -> GFut,
    GFut: Future<Output = Result<Option<T>, ProviderError>>,
{
    let reads = live.into_iter().map(|id| {
        let (cluster, member) = super::split(&id);
        let found = get(cluster.to_owned(), member.to_owned());
        async move {
            Ok::<_, ProviderError>(found.await?.map(|object| Observed {
                id,
                address: None,
                attributes: attributes(&object),
            }))
        }
    });
    Ok(futures::future::try_join_all(reads).await?.into_iter().flatten().collect())
}

/// Whether a PCS object is ACTIVE, for [`wait_for`]: a `*_FAILED` one never will be, for the
/// reasons in its `errorInfo`.
pub(super) fn active<T: Object>(found: &T) -> Poll {
    let status = found.status_name().unwrap_or_default();
    if status == "ACTIVE" {
        Poll::Done(())
    } else if status.ends_with("_FAILED") {
        Poll::Failed(format!("is {status}: {}", error_info(found.errors())))
    } else {
        Poll::Pending(status.to_owned())
    }
}
