//! What GKE's two kinds share: ids and the serialization key of a cluster, the wait on GKE's
//! own operations (no poller: `get_operation` until DONE, then its `error`) and on a change's
//! ([`changed`]), GKE's errors (a change refused because another operation runs on the cluster
//! is retried), versions (GKE never takes a cluster or pool back to an earlier minor version),
//! and forge's mark on node pools, which have no description: labels on their VMs.

use super::operation::wait_done;
use super::{Clients, error_in};
use crate::provider::{Ctx, ProviderError, Refusal};
use google_cloud_container_v1::model::Operation;
use google_cloud_container_v1::model::operation::Status;
use google_cloud_gax::error::rpc::Code;
use serde_json::Value;
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

/// The location and name of the cluster an id (a cluster's or a node pool's) or an
/// operation's target link (which may name the location `zones/…`) names.
pub(super) fn cluster_of(id: &str) -> (&str, &str) {
    let segments: Vec<&str> = id.split('/').collect();
    let after = |key: &str| segments.iter().position(|s| *s == key).and_then(|i| segments.get(i + 1)).copied();
    let location = after("locations").or_else(|| after("zones")).unwrap_or_default();
    (location, after("clusters").unwrap_or_default())
}

/// The serialization key of everything done to the cluster at `location` named `name`: GKE
/// runs one operation at a time on a cluster and its node pools.
pub(super) fn serialization_key(location: &str, name: &str) -> String {
    format!("gke-cluster:{location}/{name}")
}

/// How GKE has worded a refusal because another operation runs on the cluster ("Cluster is
/// running incompatible operation …", "Operation … is currently upgrading cluster …. Please
/// wait and try again once it is done."): only a hint, for when its operations cannot be read.
const BUSY_WORDS: &[&str] = &["incompatible operation", "try again once it is done"];

/// Maps a GKE error: [`super::error`]'s reading, with GKE's endpoint.
pub(super) fn error(gcp: &Clients, what: &str, err: google_cloud_compute_v1::Error) -> ProviderError {
    error_in(&gcp.container_context, what, err)
}

/// Maps the error of a change GKE refused (`what`, on `target`: a cluster's or a node pool's
/// id): [`error`], and retryable when the cluster is busy — HTTP 400 FAILED_PRECONDITION while
/// an operation runs on it (one forge did not start: an auto-upgrade, someone's gcloud), as
/// the cluster's operations show; the refusal's words decide only when they cannot be read.
pub(super) async fn refused(gcp: &Clients, what: &str, target: &str, err: google_cloud_compute_v1::Error) -> ProviderError {
    let (precondition, worded) = match err.status() {
        Some(s) => (
            err.http_status_code() == Some(400) && s.code == Code::FailedPrecondition,
            BUSY_WORDS.iter().any(|w| s.message.contains(w)),
        ),
        None => (false, false),
    };
    let mut mapped = error(gcp, what, err);
    if !precondition {
        return mapped;
    }
    match running_operation(gcp, target).await {
        Ok(Some(operation)) => {
            mapped.retryable = true;
            mapped.message = format!(
                "{} — {operation} runs on the cluster; forge tries again when it is done",
                mapped.message
            );
        }
        Ok(None) => {}
        Err(_) => mapped.retryable = worded,
    }
    mapped
}

/// The type and name of an operation that runs on the cluster of `target` (a cluster's or a
/// node pool's id), from one list of the operations in the cluster's location.
async fn running_operation(gcp: &Clients, target: &str) -> Result<Option<String>, google_cloud_compute_v1::Error> {
    let (location, name) = cluster_of(target);
    let listed = gcp
        .container
        .list_operations()
        .set_parent(format!("projects/{}/locations/{location}", gcp.project))
        .send()
        .await?;
    let running = listed
        .operations
        .iter()
        .find(|op| op.status != Status::Done && cluster_of(&op.target_link) == (location, name));
    Ok(running.map(|op| format!("{} {}", op.operation_type.name().unwrap_or("operation"), op.name)))
}

/// The refusal of an update that asks for an earlier minor `version` than the one the object
/// runs (its recorded output `version`): GKE upgrades a control plane (`what`) or a node pool,
/// and takes it back at most to an earlier patch of the same minor version; `fix` says how to
/// run the earlier version anyway.
pub(super) fn downgrade(before: &Value, after: &Value, outputs: &Value, what: &str, fix: &str) -> Option<Refusal> {
    let wanted = after.get("version")?.as_str()?;
    let running = outputs.get("version")?.as_str()?;
    if before.get("version") == after.get("version") || !earlier_minor(wanted, running) {
        return None;
    }
    Some(Refusal {
        attribute: "version",
        message: format!("GKE cannot take {what} back to an earlier minor version: it runs {running}, the stack asks for {wanted}"),
        hint: format!("ask for {running} or a later version, or leave `version` out; {fix}"),
    })
}

/// Whether the version `wanted` (`1.31`, `1.31.4-gke.100`; `latest` or `-`: no) is of an earlier
/// minor version than `running` (`1.32.7-gke.1079000`).
fn earlier_minor(wanted: &str, running: &str) -> bool {
    let minor = |version: &str| -> Vec<u64> {
        version
            .split(|c: char| !c.is_ascii_digit())
            .filter(|n| !n.is_empty())
            .take(2)
            .filter_map(|n| n.parse().ok())
            .collect()
    };
    let (wanted, running) = (minor(wanted), minor(running));
    wanted.len() == 2 && running.len() == 2 && wanted < running
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

/// Waits for the operation of a change (`what`: `nodePools.setSize`, on `target`: the
/// cluster's or node pool's id) that the call `sent` starts.
pub(super) async fn changed(
    ctx: &Ctx,
    gcp: &Clients,
    what: &str,
    target: &str,
    sent: impl Future<Output = Result<Operation, google_cloud_compute_v1::Error>>,
    limit: Duration,
) -> Result<(), ProviderError> {
    let op = match sent.await {
        Ok(op) => op,
        Err(e) => return Err(refused(gcp, what, target, e).await),
    };
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
        assert_eq!(
            cluster_of("https://container.googleapis.com/v1/projects/123/zones/us-central1/clusters/nemo/nodePools/a3"),
            ("us-central1", "nemo"),
            "an operation's target link"
        );
        assert_eq!(label_value("gke.nemo.node_pools.A3"), "gke-nemo-node_pools-a3");
        assert!(stockout("GCE_STOCKOUT") && !stockout("QUOTA"));
    }

    #[test]
    fn only_an_earlier_minor_version_is_a_downgrade() {
        assert!(earlier_minor("1.31", "1.32.7-gke.1079000"));
        assert!(earlier_minor("1.31.9-gke.1", "1.32.7-gke.1079000"));
        assert!(!earlier_minor("1.32.5-gke.100", "1.32.7-gke.1079000"), "an earlier patch GKE takes");
        assert!(!earlier_minor("1.33", "1.32.7-gke.1079000"));
        assert!(!earlier_minor("latest", "1.32.7-gke.1079000"));
        let outputs = serde_json::json!({ "version": "1.32.7-gke.1079000" });
        let refused = downgrade(
            &serde_json::json!({}),
            &serde_json::json!({ "version": "1.31" }),
            &outputs,
            "the control plane",
            "",
        );
        assert_eq!(refused.map(|r| r.attribute), Some("version"));
        let unchanged = serde_json::json!({ "version": "1.31" });
        assert!(
            downgrade(&unchanged, &unchanged, &outputs, "the control plane", "").is_none(),
            "no change asks for nothing"
        );
    }
}
