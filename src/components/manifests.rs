//! Kubernetes objects in bulk, for the components that apply many at once (`k8s_manifest`, a
//! cluster's Kueue and operators): YAML documents read, fetched bundles checked against their
//! pinned digest, and objects made into `k8s_object` parts ordered the way an API server needs
//! them — namespaces, then CRDs (waited for until Established), then RBAC, then configuration,
//! then workloads, then webhook configurations, then custom resources — so a CRD and its
//! resources never race in one `up`.

use super::{ComponentError, Input, Part, kubernetes};
use serde_json::Value;

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

/// The objects of a YAML text of one or more documents; `key` is the attribute it came from.
pub fn documents(text: &str, key: &str) -> Result<Vec<Value>, ComponentError> {
    let mut objects = Vec::new();
    for (i, doc) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
        let value = <Value as serde::Deserialize>::deserialize(doc).map_err(|e| {
            ComponentError::at(
                key,
                format!("document {} of `{key}` is not YAML Kubernetes reads: {e}", i + 1),
                "fix the manifest",
            )
        })?;
        if !value.is_null() {
            objects.push(value);
        }
    }
    Ok(objects)
}

/// The bundle at `url`, as fetched for this load, with its digest checked against `pin`:
/// `None` when bundles were not fetched (a command that works from the state). The
/// objects are quoted, so an upstream `${…}` stays literal.
pub fn bundle(input: &Input, url: &str, pin: Option<&str>, key: &str) -> Result<Option<Vec<Value>>, ComponentError> {
    if !url.starts_with("https://") {
        return Err(ComponentError::at(
            key,
            format!("the bundle URL `{url}` is not https://"),
            "give the official release URL over HTTPS; the digest (`sha256`) is checked either way",
        ));
    }
    if let Some(pin) = pin
        && (pin.len() != 64 || !pin.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
    {
        return Err(ComponentError::at(
            key,
            format!("`sha256 = \"{pin}\"` is not a sha256 digest"),
            "write the 64 lowercase hex digits `sha256sum` prints for the file",
        ));
    }
    let Some(fetched) = input.facts.bundle(url, pin) else {
        return Ok(None);
    };
    if let Some(pin) = pin.filter(|pin| *pin != fetched.sha256) {
        return Err(ComponentError::at(
            key,
            format!("the bundle at {url} has sha256 {}, not the pinned {pin}", fetched.sha256),
            "if the new contents are expected, pin the new digest; else check the URL, the version and any FORGE_BUNDLE_MIRROR",
        ));
    }
    let objects = documents(&fetched.text, key)?;
    Ok(Some(objects.iter().map(crate::template::quote).collect()))
}

/// The objects as `k8s_object` parts of the block at `address` into `cluster`, named
/// `[<prefix>.]<kind>.[<namespace>.]<name>`; each follows every object of the nearest tier
/// before its own that has any. `key` is the attribute blamed for a malformed object.
pub fn ordered_parts(address: &str, prefix: &str, cluster: &str, objects: Vec<Value>, key: &str) -> Result<Vec<Part>, ComponentError> {
    let mut placed: Vec<(usize, String, Value)> = Vec::new();
    for (i, object) in objects.into_iter().enumerate() {
        let field = |path: &str| object.pointer(path).and_then(Value::as_str).map(str::to_owned);
        let (Some(kind), Some(name), Some(_)) = (field("/kind"), field("/metadata/name"), field("/apiVersion")) else {
            return Err(ComponentError::at(
                key,
                format!("object {} of `{key}` lacks `apiVersion`, `kind` or `metadata.name`", i + 1),
                "every Kubernetes object names its apiVersion, kind and metadata.name",
            ));
        };
        let namespace = field("/metadata/namespace").map(|ns| segment(&ns));
        let local = [Some(prefix.to_owned()), Some(segment(&kind)), namespace, Some(segment(&name))]
            .into_iter()
            .flatten()
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join(".");
        if placed.iter().any(|(_, l, _)| *l == local) {
            return Err(ComponentError::at(key, format!("`{key}` has {kind} `{name}` twice"), "keep one"));
        }
        placed.push((tier(&kind), local, object));
    }
    let mut parts = Vec::new();
    for (t, local, object) in &placed {
        let before = (0..*t).rev().find(|earlier| placed.iter().any(|(x, ..)| x == earlier));
        let after: Vec<String> = placed
            .iter()
            .filter(|(x, ..)| Some(*x) == before)
            .map(|(_, l, _)| format!("{address}.{l}"))
            .collect();
        parts.push(kubernetes::object(local.clone(), cluster, object.clone(), after));
    }
    Ok(parts)
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
