//! "Ready means ready": the checks `up` makes after the apply, before it calls a cluster ready
//! for its first job. Every node of each GPU group reports its devices as allocatable (a
//! DaemonSet's rollout is vacuously complete while there are no nodes: allocatable is the
//! real signal), found by the label the cloud puts on a group's nodes; every claim is Bound;
//! every Kueue ClusterQueue is Active (its flavors exist and Kueue's controller took it up).
//! The checks are data the components write ([`crate::readiness`]); this module only reads
//! the clusters, polling until all hold or the check's time is up.

use super::ClusterRef;
use crate::provider::{Cloud, ProviderError};
use crate::readiness::{Check, DEFAULT_TIMEOUT};
use k8s_openapi::api::core::v1::{Node, PersistentVolumeClaim};
use kube::api::{Api, ListParams};
use std::time::{Duration, Instant};

/// What one look at a cluster found: what holds (for the summary) and what does not yet.
#[derive(Debug, Default)]
struct Look {
    holds: Vec<String>,
    missing: Vec<String>,
}

/// Checks one cluster once.
async fn look(cloud: &Cloud, check: &Check) -> Result<Look, ProviderError> {
    let cluster = ClusterRef::parse(&check.cluster)?;
    let Some(connection) = super::connect(cloud, &cluster, super::reach::REACH_TIMEOUT).await? else {
        return Err(ProviderError::permanent(format!("cluster `{cluster}` does not exist")));
    };
    let mut found = Look::default();
    let nodes: Api<Node> = Api::all(connection.client.clone());
    for group in &check.node_groups {
        if let Some(starts) = group.starts.as_deref()
            && humantime::parse_rfc3339_weak(starts).is_ok_and(|t| t > std::time::SystemTime::now())
        {
            found.holds.push(format!(
                "{} `{}` runs on a Capacity Block that starts at {starts}: its {} nodes come then, not waited for",
                group.noun(),
                group.name,
                group.nodes
            ));
            continue;
        }
        let last_hour = std::time::Duration::from_secs(3600);
        if let Some(ends) = group.ends.as_deref()
            && humantime::parse_rfc3339_weak(ends).is_ok_and(|t| t <= std::time::SystemTime::now() + last_hour)
        {
            found.holds.push(format!(
                "{} `{}` runs on a Capacity Block that ends at {ends}: its nodes are going, not waited for",
                group.noun(),
                group.name
            ));
            continue;
        }
        let selector = format!("{}={}", group.label, group.name);
        let listed = nodes
            .list(&ListParams::default().labels(&selector))
            .await
            .map_err(|e| super::error(&connection, "list nodes", e))?;
        let count = listed.items.len() as i64;
        if count < group.nodes {
            found
                .missing
                .push(format!("{} `{}` has {count} of {} nodes", group.noun(), group.name, group.nodes));
        }
        let mut short = Vec::new();
        for node in &listed.items {
            let allocatable = node.status.as_ref().and_then(|s| s.allocatable.as_ref());
            for (resource, wanted) in &group.devices {
                let have: i64 = allocatable
                    .and_then(|a| a.get(resource))
                    .and_then(|q| q.0.parse().ok())
                    .unwrap_or(0);
                if have < (*wanted).max(1) {
                    let name = node.metadata.name.as_deref().unwrap_or("?");
                    short.push(format!(
                        "node `{name}` of group `{}` reports {resource} {have} (wants {})",
                        group.name,
                        if *wanted > 0 { wanted.to_string() } else { "at least 1".into() }
                    ));
                }
            }
        }
        if short.is_empty() && count >= group.nodes {
            let devices: Vec<String> = group
                .devices
                .keys()
                .map(|resource| {
                    let each = listed
                        .items
                        .first()
                        .and_then(|n| n.status.as_ref()?.allocatable.as_ref()?.get(resource).map(|q| q.0.clone()))
                        .unwrap_or_default();
                    format!("{resource} {each}")
                })
                .collect();
            found.holds.push(format!(
                "{} `{}`: {count} nodes, each {}",
                group.noun(),
                group.name,
                devices.join(", ")
            ));
        }
        found.missing.extend(short);
    }
    for claim in &check.claims {
        let claims: Api<PersistentVolumeClaim> = Api::namespaced(connection.client.clone(), &claim.namespace);
        let live = claims
            .get_opt(&claim.name)
            .await
            .map_err(|e| super::error(&connection, "get claim", e))?;
        let phase = live.as_ref().and_then(|c| c.status.as_ref()?.phase.clone());
        match phase.as_deref() {
            Some("Bound") => found.holds.push(format!("claim {}/{} Bound", claim.namespace, claim.name)),
            Some(other) => found.missing.push(format!("claim {}/{} is {other}", claim.namespace, claim.name)),
            None => found
                .missing
                .push(format!("claim {}/{} does not exist", claim.namespace, claim.name)),
        }
    }
    for queue in &check.queues {
        let condition = cluster_queue_active(&connection.client, queue)
            .await
            .map_err(|e| super::error(&connection, "get cluster queue", e))?;
        match condition {
            Some((true, _)) => found.holds.push(format!("queue `{queue}` Active")),
            Some((false, why)) => found.missing.push(format!("queue `{queue}` is not Active: {why}")),
            None => found.missing.push(format!("queue `{queue}` does not exist yet")),
        }
    }
    Ok(found)
}

/// Whether the ClusterQueue `name` is Active, and Kueue's reason when it is not; `None` while
/// the queue (or Kueue's API) does not exist.
async fn cluster_queue_active(client: &kube::Client, name: &str) -> Result<Option<(bool, String)>, kube::Error> {
    let resource = kube::discovery::ApiResource {
        group: "kueue.x-k8s.io".into(),
        version: "v1beta1".into(),
        api_version: "kueue.x-k8s.io/v1beta1".into(),
        kind: "ClusterQueue".into(),
        plural: "clusterqueues".into(),
    };
    let queues: Api<kube::api::DynamicObject> = Api::all_with(client.clone(), &resource);
    let live = match queues.get_opt(name).await {
        Ok(live) => live,
        Err(e) if super::is_not_found(&e) => None,
        Err(e) => return Err(e),
    };
    Ok(live.map(|queue| {
        let conditions = queue
            .data
            .pointer("/status/conditions")
            .and_then(|c| c.as_array())
            .cloned()
            .unwrap_or_default();
        let active = conditions.iter().find(|c| c.get("type").and_then(|t| t.as_str()) == Some("Active"));
        let text = |c: Option<&serde_json::Value>, key: &str| c.and_then(|c| c.get(key)?.as_str().map(str::to_owned));
        match text(active, "status").as_deref() {
            Some("True") => (true, String::new()),
            _ => (false, text(active, "message").unwrap_or_else(|| "Kueue has not taken it up".into())),
        }
    }))
}

/// The checks of each cluster as one (the components each write their own): node groups and
/// claims together, with the longest time any of them allows.
pub fn by_cluster(checks: Vec<Check>) -> Vec<Check> {
    let mut merged: Vec<Check> = Vec::new();
    for check in checks {
        match merged.iter_mut().find(|m| m.cluster == check.cluster) {
            Some(m) => {
                let length = |t: &Option<String>| t.as_deref().and_then(|t| humantime::parse_duration(t).ok());
                if length(&check.timeout) > length(&m.timeout) {
                    m.timeout = check.timeout;
                }
                m.node_groups.extend(check.node_groups);
                m.claims.extend(check.claims);
                m.queues.extend(check.queues);
            }
            None => merged.push(check),
        }
    }
    merged
}

/// Waits until every check holds, reporting progress through `status`; returns one summary
/// line per cluster, or an error naming what is still missing where when a check's time is up.
pub async fn wait(cloud: &Cloud, checks: &[Check], status: &(dyn Fn(&str) + Sync)) -> Result<Vec<String>, ProviderError> {
    futures::future::try_join_all(checks.iter().map(|check| wait_one(cloud, check, status))).await
}

/// [`wait`] for one cluster.
async fn wait_one(cloud: &Cloud, check: &Check, status: &(dyn Fn(&str) + Sync)) -> Result<String, ProviderError> {
    let limit = check
        .timeout
        .as_deref()
        .and_then(|t| humantime::parse_duration(t).ok())
        .unwrap_or(DEFAULT_TIMEOUT);
    let started = Instant::now();
    let mut interval = Duration::from_millis(200);
    loop {
        let found = look(cloud, check).await?;
        if found.missing.is_empty() {
            return Ok(format!("{}: {}", check.cluster, found.holds.join("; ")));
        }
        if started.elapsed() >= limit {
            return Err(ProviderError::permanent(format!(
                "`{}` is not ready after {}s: {}",
                check.cluster,
                started.elapsed().as_secs(),
                found.missing.join("; ")
            )));
        }
        status(&format!("{}: waiting: {}", check.cluster, found.missing[0]));
        tokio::time::sleep(interval).await;
        interval = (interval * 2).min(Duration::from_secs(10));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks_of_one_cluster_merge() {
        let check = |cluster: &str, timeout: Option<&str>, claim: &str| Check {
            cluster: cluster.into(),
            timeout: timeout.map(str::to_owned),
            node_groups: vec![],
            queues: vec![],
            claims: vec![crate::readiness::Claim {
                namespace: "default".into(),
                name: claim.into(),
            }],
        };
        let merged = by_cluster(vec![
            check("eks/a", None, "x"),
            check("eks/b", Some("1m"), "y"),
            check("eks/a", Some("2s"), "z"),
        ]);
        assert_eq!(merged.len(), 2);
        assert_eq!(merged[0].timeout.as_deref(), Some("2s"));
        assert_eq!(merged[0].claims.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(), ["x", "z"]);
    }
}
