//! `k8s_manifest`: Kubernetes objects of the stack's own, from a YAML file (one or more
//! documents) or inline `objects`, applied into a cluster block of the stack. Each object is a
//! `k8s_object` part; the block orders them the way an API server needs them — namespaces, then
//! CRDs (waited for until Established), then RBAC, then configuration, then workloads, then
//! webhook configurations, then custom resources — so a CRD and its resources never race in
//! one `up`. Values may reference forge outputs (`${fsx.data.dns_name}`); `$${` writes `${`.

use super::{Component, ComponentError, Expansion, Input, kubernetes};
use crate::schema::{Field, FieldType};
use serde_json::{Map, Value};

/// The component's registration.
pub const COMPONENT: Component = Component {
    name: "k8s_manifest",
    schema: &[
        Field::required("cluster", FieldType::String),
        Field::optional("file", FieldType::File),
        Field::optional("objects", FieldType::List),
    ],
    expand,
};

/// The order objects go in, by kind; a kind not listed is a custom resource (last).
const TIERS: &[&[&str]] = &[
    &["Namespace"],
    &["CustomResourceDefinition"],
    &["ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"],
    &[
        "ConfigMap",
        "Secret",
        "PriorityClass",
        "StorageClass",
        "PersistentVolume",
        "PersistentVolumeClaim",
        "LimitRange",
        "ResourceQuota",
    ],
    &[
        "Service",
        "DaemonSet",
        "Deployment",
        "StatefulSet",
        "Job",
        "CronJob",
        "PodDisruptionBudget",
        "Ingress",
    ],
    &["MutatingWebhookConfiguration", "ValidatingWebhookConfiguration", "APIService"],
];

fn tier(kind: &str) -> usize {
    TIERS.iter().position(|t| t.contains(&kind)).unwrap_or(TIERS.len())
}

/// An address segment from an object's name (`mpijobs.kubeflow.org` → `mpijobs_kubeflow_org`).
fn segment(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '_' })
        .collect()
}

fn expand(input: &Input) -> Result<Expansion, ComponentError> {
    let cluster_block = input.text("cluster").unwrap_or_default();
    let cluster = match cluster_block.split_once('.').map(|(kind, _)| kind) {
        Some("eks") => input.named_block("cluster", "eks").map(|(a, _)| kubernetes::eks_cluster(a))?,
        Some("gke") => input.named_block("cluster", "gke").map(|(a, _)| kubernetes::gke_cluster(a))?,
        _ => {
            return Err(ComponentError::at(
                "cluster",
                format!("`cluster = \"{cluster_block}\"` names no cluster block"),
                "write `cluster = \"eks.<name>\"` or `cluster = \"gke.<name>\"`: a cluster block of this stack",
            ));
        }
    };
    let mut objects: Vec<Value> = Vec::new();
    if let Some(text) = input.text("file") {
        let text = text.replace("$${", "${");
        for (i, doc) in serde_yaml_ng::Deserializer::from_str(&text).enumerate() {
            let value = <Value as serde::Deserialize>::deserialize(doc).map_err(|e| {
                ComponentError::at(
                    "file",
                    format!("document {} of the manifest is not YAML Kubernetes reads: {e}", i + 1),
                    "fix the file",
                )
            })?;
            if !value.is_null() {
                objects.push(value);
            }
        }
    }
    objects.extend(input.config.get("objects").and_then(Value::as_array).cloned().unwrap_or_default());
    if objects.is_empty() {
        return Err(ComponentError::at(
            "file",
            "the manifest has no objects",
            "write `file = \"manifests/queue.yaml\"` (YAML documents) or `objects = [{ apiVersion = \"v1\", kind = \"ConfigMap\", … }]`",
        ));
    }
    let mut placed: Vec<(usize, String, Value)> = Vec::new();
    for (i, object) in objects.into_iter().enumerate() {
        let field = |path: &str| object.pointer(path).and_then(Value::as_str).map(str::to_owned);
        let (Some(kind), Some(name), Some(_)) = (field("/kind"), field("/metadata/name"), field("/apiVersion")) else {
            return Err(ComponentError::at(
                "objects",
                format!("object {} of the manifest lacks `apiVersion`, `kind` or `metadata.name`", i + 1),
                "every Kubernetes object names its apiVersion, kind and metadata.name",
            ));
        };
        let local = match field("/metadata/namespace") {
            Some(ns) => format!("{}.{}.{}", segment(&kind), segment(&ns), segment(&name)),
            None => format!("{}.{}", segment(&kind), segment(&name)),
        };
        if placed.iter().any(|(_, l, _)| *l == local) {
            return Err(ComponentError::at(
                "objects",
                format!("the manifest has {kind} `{name}` twice"),
                "keep one",
            ));
        }
        placed.push((tier(&kind), local, object));
    }
    // Each object follows every object of the nearest tier before its own that has any.
    let mut parts = Vec::new();
    for (t, local, object) in &placed {
        let before = (0..*t).rev().find(|earlier| placed.iter().any(|(x, ..)| x == earlier));
        let after: Vec<String> = placed
            .iter()
            .filter(|(x, ..)| Some(*x) == before)
            .map(|(_, l, _)| format!("{}.{l}", input.address))
            .collect();
        parts.push(kubernetes::object(local.clone(), &cluster, object.clone(), after));
    }
    Ok(Expansion {
        parts,
        outputs: Map::new(),
        ready: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn custom_resources_follow_their_definitions_and_webhooks() {
        assert!(tier("Namespace") < tier("CustomResourceDefinition"));
        assert!(tier("CustomResourceDefinition") < tier("ClusterRole"));
        assert!(tier("Deployment") < tier("ValidatingWebhookConfiguration"));
        assert!(tier("ValidatingWebhookConfiguration") < tier("ClusterQueue"));
        assert_eq!(segment("mpijobs.kubeflow.org"), "mpijobs_kubeflow_org");
    }
}
