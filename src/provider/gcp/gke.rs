//! What GKE's two kinds share: ids and the serialization key of a cluster, the wait on GKE's
//! own operations (no poller: `get_operation` until DONE, then its `error`) and on a change's
//! ([`changed`]), GKE's errors (a change refused because another operation runs on the cluster
//! is retried), and forge's mark on node pools, which have no description: labels on their VMs.

use super::operation::wait_done;
use super::{Clients, error_in};
use crate::provider::{Ctx, ProviderError};
use google_cloud_container_v1::model::Operation;
use google_cloud_container_v1::model::operation::Status;
use std::collections::HashMap;
use std::future::Future;
use std::time::Duration;

/// A cluster or a GPU node pool takes 10–40 minutes (an A3 pool once took 35, past
/// Terraform's 30-minute limit); forge waits an hour by default.
pub(super) const CREATE_TIMEOUT: Duration = Duration::from_secs(60 * 60);
/// Updates roll nodes; deletes drain them.
pub(super) const CHANGE_TIMEOUT: Duration = Duration::from_secs(60 * 60);

/// The id forge records for a cluster: `projects/p/locations/l/clusters/c`, as GKE names it.
pub(super) fn cluster_id(gcp: &Clients, location: &str, name: &str) -> String {
    format!("projects/{}/locations/{location}/clusters/{name}", gcp.project)
}

/// The location and name of the cluster an id (a cluster's or a node pool's) names.
pub(super) fn cluster_of(id: &str) -> (&str, &str) {
    let segments: Vec<&str> = id.split('/').collect();
    let after = |key: &str| {
        segments
            .iter()
            .position(|s| *s == key)
            .and_then(|i| segments.get(i + 1))
            .copied()
            .unwrap_or_default()
    };
    (after("locations"), after("clusters"))
}

/// The serialization key of everything done to the cluster at `location` named `name`: GKE
/// runs one operation at a time on a cluster and its node pools.
pub(super) fn serialization_key(location: &str, name: &str) -> String {
    format!("gke-cluster:{location}/{name}")
}

/// The words of a refusal because another operation runs on the cluster.
const BUSY: &str = "incompatible operation";

/// Maps a GKE error: [`super::error`]'s reading, and retryable when GKE refused the call
/// because another operation runs on the cluster (one forge did not start: an auto-upgrade,
/// someone's gcloud).
pub(super) fn error(gcp: &Clients, what: &str, err: google_cloud_compute_v1::Error) -> ProviderError {
    let busy = err.status().is_some_and(|s| s.message.contains(BUSY));
    let mut mapped = error_in(&gcp.container_context, what, err);
    mapped.retryable |= busy;
    mapped
}

/// Error codes in a failed operation that mean Compute has no capacity for the machines.
const STOCKOUT: &[&str] = &["GCE_STOCKOUT", "ZONE_RESOURCE_POOL_EXHAUSTED", "RESOURCE_POOL_EXHAUSTED"];

/// The hint for a pool the zone has no capacity for.
pub(super) const STOCKOUT_HINT: &str = "the zone has no capacity for these machines now: try another `zone`, \
     a `reservation` of your own, or `flex_start = true`; then run `forge up` again (or `forge destroy`), \
     which deletes the failed pool first";

/// Whether a failure message says the zone ran out of machines.
pub(super) fn stockout(message: &str) -> bool {
    STOCKOUT.iter().any(|code| message.contains(code))
}

/// Waits until the GKE operation `op` is DONE (at most `limit`), and fails with its error
/// (and, for a stockout, a hint) if it has one.
pub(super) async fn wait_operation(ctx: &Ctx, gcp: &Clients, what: &str, op: Operation, limit: Duration) -> Result<(), ProviderError> {
    let name = format!("projects/{}/locations/{}/operations/{}", gcp.project, op.location, op.name);
    let done = wait_done(
        ctx,
        limit,
        op,
        |op| op.status == Status::Done,
        |op| op.status.name().unwrap_or("PENDING").to_owned(),
        || async {
            let sent = gcp.container.get_operation().set_name(&name).send().await;
            sent.map_err(|e| error(gcp, "operations.get", e))
        },
    )
    .await?;
    match &done.error {
        Some(status) if status.code != 0 || !status.message.is_empty() => {
            let hint = if stockout(&status.message) {
                format!(" — {STOCKOUT_HINT}")
            } else {
                String::new()
            };
            Err(ProviderError::permanent(format!(
                "{what}: the operation failed: {}{hint} ({})",
                status.message, gcp.container_context
            )))
        }
        _ => Ok(()),
    }
}

/// Waits for the operation of a change (`what`: `nodePools.setSize`) that the call `sent`
/// starts.
pub(super) async fn changed(
    ctx: &Ctx,
    gcp: &Clients,
    what: &str,
    sent: impl Future<Output = Result<Operation, google_cloud_compute_v1::Error>>,
    limit: Duration,
) -> Result<(), ProviderError> {
    let op = sent.await.map_err(|e| error(gcp, what, e))?;
    wait_operation(ctx, gcp, what, op, limit).await
}

/// A label value from any text: GCE labels take lowercase letters, digits, `-` and `_`, at
/// most 63 of them.
fn label_value(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            'a'..='z' | '0'..='9' | '-' | '_' => c,
            'A'..='Z' => c.to_ascii_lowercase(),
            _ => '-',
        })
        .take(63)
        .collect()
}

/// The labels of forge's mark on a node pool's VMs (`forge-stack`, `forge-address`,
/// `forge-token`), made by the create with `token`.
pub(super) fn pool_mark(ctx: &Ctx, token: &str) -> [(String, String); 3] {
    [
        ("forge-stack".into(), label_value(&ctx.stack)),
        ("forge-address".into(), label_value(&ctx.address)),
        ("forge-token".into(), label_value(token)),
    ]
}

/// Whether a node pool with these VM labels was made by the create with one of `tokens`: its
/// own, or the cluster's (a pool created inline with its cluster carries the cluster's token).
pub(super) fn pool_made_by(ctx: &Ctx, tokens: &[&str], labels: &HashMap<String, String>) -> bool {
    let label = |key: &str| labels.get(key).map(String::as_str);
    label("forge-stack") == Some(label_value(&ctx.stack).as_str())
        && label("forge-address") == Some(label_value(&ctx.address).as_str())
        && tokens.iter().any(|t| label("forge-token") == Some(label_value(t).as_str()))
}

/// The message of an object in ERROR: its conditions' messages.
pub(super) fn conditions(conditions: &[google_cloud_container_v1::model::StatusCondition]) -> String {
    conditions.iter().map(|c| c.message.as_str()).collect::<Vec<_>>().join("; ")
}

/// Whether a label is forge's mark, which blocks never set and drift never shows.
pub(super) fn is_mark(key: &str) -> bool {
    matches!(key, "forge-stack" | "forge-address" | "forge-token")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_name_their_cluster() {
        assert_eq!(
            cluster_of("projects/p/locations/us-central1/clusters/nemo"),
            ("us-central1", "nemo")
        );
        assert_eq!(
            cluster_of("projects/p/locations/us-central1/clusters/nemo/nodePools/a3"),
            ("us-central1", "nemo")
        );
        assert_eq!(label_value("gke.nemo.node_pools.A3"), "gke-nemo-node_pools-a3");
        assert!(stockout("GCE_STOCKOUT") && !stockout("QUOTA"));
    }
}
