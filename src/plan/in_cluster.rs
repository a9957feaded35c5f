//! The plan's in-cluster changes — the objects applied through a cluster's API server rather
//! than the cloud's: the note a cluster whose endpoint forge may not reach needs, and
//! `--skip-in-cluster`, which leaves them (and whatever must follow them) for a run that
//! reaches the cluster, so a pipeline can apply the cloud side from anywhere and the
//! in-cluster side from a runner inside the VPC.

use super::{Action, Change};
use crate::stack::Stack;
use crate::template;
use serde_json::Value;
use std::collections::BTreeSet;

/// Kinds applied through a cluster's API server.
pub const IN_CLUSTER_KINDS: &[&str] = &["k8s_object", "k8s_teardown"];

/// Whether `kind` is applied through a cluster's API server.
pub fn is_in_cluster(kind: &str) -> bool {
    IN_CLUSTER_KINDS.contains(&kind)
}

/// Once per cluster whose endpoint only some networks reach (a private EKS or GKE endpoint, a
/// public one narrowed to some addresses) and that has in-cluster changes: what
/// those changes need, and how to get it.
pub fn endpoint_notes(stack: &Stack, changes: &[Change]) -> Vec<String> {
    let clusters: BTreeSet<&str> = changes
        .iter()
        .filter(|c| is_in_cluster(&c.kind) && c.action != Action::Delete)
        .filter_map(|c| c.config.as_ref())
        .flat_map(|config| template::references(config).unwrap_or_default())
        .filter_map(|r| {
            r.resolve(|address| stack.resources.iter().find(|res| res.address == address))
                .map(|(_, resource, _)| resource)
        })
        .filter(|r| matches!(r.kind.as_str(), "aws_eks_cluster" | "google_container_cluster"))
        .map(|r| r.address.as_str())
        .collect();
    clusters
        .into_iter()
        .filter_map(|address| {
            let resource = stack.resources.iter().find(|r| r.address == address)?;
            note(address, &resource.kind, &resource.config)
        })
        .collect()
}

/// The note for one cluster resource, if its endpoint is not open to everyone.
fn note(address: &str, kind: &str, config: &Value) -> Option<String> {
    let inside = "Run forge from inside the cluster's VPC (or a CI runner there)";
    let later = "or apply the cloud side first with `forge up --skip-in-cluster` and the rest from there";
    match kind {
        "aws_eks_cluster" if config["endpoint_public_access"] == false => Some(format!(
            "`{address}` has a private endpoint only: its in-cluster objects need network reach to it. {inside}, or open the public endpoint to where forge runs (`endpoint = \"both\"` with `public_access_cidrs`), {later}"
        )),
        "aws_eks_cluster"
            if config["public_access_cidrs"]
                .as_array()
                .is_some_and(|c| !c.is_empty() && !c.iter().any(|c| c == "0.0.0.0/0")) =>
        {
            Some(format!(
                "`{address}` takes API calls only from its `public_access_cidrs`: its in-cluster objects need forge to run from one of them. {inside}, {later}"
            ))
        }
        "google_container_cluster" if config["private_endpoint"] == true => Some(format!(
            "`{address}` has a private endpoint only: its in-cluster objects need network reach to it. {inside}, or keep the public endpoint (`private_endpoint = false`) with `authorized_networks` that include where forge runs, {later}"
        )),
        "google_container_cluster" if config["authorized_networks"].as_array().is_some() => Some(format!(
            "`{address}` takes API calls only from its `authorized_networks`: its in-cluster objects need forge to run from one of them. {inside}, or add where forge runs to `authorized_networks`, {later}"
        )),
        _ => None,
    }
}

/// What `--skip-in-cluster` leaves for later: the in-cluster changes, what depends on one of
/// them, and the deletes that must wait for one of them (a cluster outlives its objects).
/// Returns the deferred changes, removed from `changes` in their order.
pub fn defer(changes: &mut Vec<Change>) -> Vec<Change> {
    let mut deferred: BTreeSet<String> = BTreeSet::new();
    loop {
        let before = deferred.len();
        for c in changes.iter() {
            let waits = match c.action {
                // A delete goes after the deletes of what depended on it.
                Action::Delete => changes
                    .iter()
                    .any(|d| d.action == Action::Delete && deferred.contains(&d.address) && d.prior_depends_on.contains(&c.address)),
                _ => c.depends_on.iter().any(|d| deferred.contains(d)),
            };
            if is_in_cluster(&c.kind) || waits {
                deferred.insert(c.address.clone());
            }
        }
        if deferred.len() == before {
            break;
        }
    }
    let (later, now): (Vec<Change>, Vec<Change>) = std::mem::take(changes).into_iter().partition(|c| deferred.contains(&c.address));
    *changes = now;
    later
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn change(address: &str, kind: &str, action: Action, depends_on: &[&str], prior: &[&str]) -> Change {
        Change {
            address: address.into(),
            kind: kind.into(),
            action,
            before: None,
            after: None,
            config: Some(json!({})),
            depends_on: depends_on.iter().map(|s| (*s).to_owned()).collect(),
            prior_depends_on: prior.iter().map(|s| (*s).to_owned()).collect(),
            replace_because: vec![],
            reason: None,
            destroys_data: false,
            purchase: None,
        }
    }

    #[test]
    fn skipping_in_cluster_defers_what_follows_and_what_must_outlive_them() {
        let mut changes = vec![
            change("cluster", "aws_eks_cluster", Action::Create, &[], &[]),
            change("ds", "k8s_object", Action::Create, &["cluster"], &[]),
            change("after_ds", "null", Action::Create, &["ds"], &[]),
            change("old_obj", "k8s_object", Action::Delete, &[], &["old_cluster"]),
            change("old_cluster", "aws_eks_cluster", Action::Delete, &[], &[]),
            change("bucket", "null", Action::Delete, &[], &[]),
        ];
        let later = defer(&mut changes);
        let names = |cs: &[Change]| cs.iter().map(|c| c.address.clone()).collect::<Vec<_>>();
        assert_eq!(names(&changes), ["cluster", "bucket"]);
        assert_eq!(names(&later), ["ds", "after_ds", "old_obj", "old_cluster"]);
    }

    #[test]
    fn only_endpoints_closed_to_some_get_a_note() {
        let private = json!({ "endpoint_public_access": false, "endpoint_private_access": true });
        assert!(
            note("eks.gpu.cluster", "aws_eks_cluster", &private)
                .unwrap()
                .contains("private endpoint only")
        );
        assert!(note("eks.gpu.cluster", "aws_eks_cluster", &json!({ "endpoint_public_access": true })).is_none());
        let narrowed = json!({ "endpoint_public_access": true, "public_access_cidrs": ["203.0.113.0/24"] });
        assert!(
            note("eks.gpu.cluster", "aws_eks_cluster", &narrowed)
                .unwrap()
                .contains("public_access_cidrs")
        );
        let gke = json!({ "authorized_networks": ["10.0.0.0/8"] });
        assert!(note("gke.a3.cluster", "google_container_cluster", &gke).is_some());
    }
}
