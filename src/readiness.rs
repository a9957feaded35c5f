//! What "ready for the first job" means for a cluster, as data: the checks a component writes
//! for the clusters it makes (every node of each GPU group reports its devices, every claim is
//! Bound, every Kueue ClusterQueue is Active). They travel typed from the component through
//! the stack and the plan to `up`'s wait (`provider::k8s::ready`), with `${…}` references in
//! their strings that are evaluated against the applied state first.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

/// How long `up` waits for a cluster that names no time of its own.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// One cluster's readiness check.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Check {
    /// `eks/<name>` or `gke/projects/…` (a template over the cluster's resource).
    pub cluster: String,
    /// How long to wait (`"30m"`); a cluster's checks take the longest any of them gives,
    /// [`DEFAULT_TIMEOUT`] when none gives one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
    /// Node groups whose nodes must report devices.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub node_groups: Vec<NodeGroup>,
    /// Claims that must be Bound.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub claims: Vec<Claim>,
    /// Kueue ClusterQueues that must be Active.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub queues: Vec<String>,
}

impl Check {
    /// A check of `cluster` with nothing in it yet.
    pub fn of(cluster: &str) -> Check {
        Check {
            cluster: cluster.to_owned(),
            timeout: None,
            node_groups: Vec::new(),
            claims: Vec::new(),
            queues: Vec::new(),
        }
    }
}

/// A node group's expected nodes and devices.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeGroup {
    /// The node label the cloud sets (`eks.amazonaws.com/nodegroup`).
    pub label: String,
    /// The group's name, that label's value (a template over the group's resource).
    pub name: String,
    /// How many nodes it should have.
    pub nodes: i64,
    /// Allocatable each node must report: at least this many (0: at least one).
    pub devices: BTreeMap<String, i64>,
    /// The instance type of UltraServers its nodes make up (`p6e-gb200.36xlarge`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ultraserver: Option<String>,
    /// When its capacity starts (a Capacity Block's `start`, RFC 3339; a template over the
    /// block's resource): until then it has no nodes, and the wait says when it starts instead
    /// of waiting for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub starts: Option<String>,
    /// When that capacity ends (RFC 3339, a template): in its last hour, and after, its nodes
    /// are going or gone, and it is not waited for either.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ends: Option<String>,
}

impl NodeGroup {
    /// What the cloud calls it: a GKE node pool, else a node group (of UltraServers).
    pub fn noun(&self) -> String {
        match &self.ultraserver {
            _ if self.label == "cloud.google.com/gke-nodepool" => "node pool".into(),
            Some(instance_type) => format!("UltraServer node group ({instance_type})"),
            None => "node group".into(),
        }
    }
}

/// A claim that must be Bound.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Claim {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
}
