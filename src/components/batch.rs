//! What a cluster block installs for batch training when asked (`kubernetes = { kueue = …,
//! mpi_operator = …, training_operator = … }`): Kueue from its release bundle with a queue
//! whose GPU quota is the cluster's GPU groups (one ResourceFlavor per group, a ClusterQueue,
//! a LocalQueue), the MPI operator from its release bundle, the Kubeflow training operator
//! from a bundle the stack names. With both operators on, the MPI operator owns
//! `mpijobs.kubeflow.org`: the training operator's definition of it is left out and the
//! training operator is started for its other job kinds only (the two cannot share the CRD).

use super::{ComponentError, Input, Part, kubernetes, manifests};
use serde_json::{Map, Value, json};

/// The `kubernetes` settings of a cluster block that this module reads.
pub const SETTINGS: &[&str] = &["kueue", "mpi_operator", "training_operator"];

/// The Kueue release installed when the stack names none.
pub const KUEUE_VERSION: &str = "v0.14.1";

/// The MPI operator release installed when the stack names none.
pub const MPI_OPERATOR_VERSION: &str = "v0.6.0";

/// The Kueue API version of the queue objects (served by every release since v0.5).
const KUEUE_API: &str = "kueue.x-k8s.io/v1beta1";

/// The CPU and memory each flavor covers: Kueue admits only what a ClusterQueue covers, and
/// the accelerators are what the quota is about, so these are beyond any node group.
const CPU_QUOTA: &str = "10000";
const MEMORY_QUOTA: &str = "10000Gi";

/// A group of GPU (or Neuron) nodes a queue's quota covers.
#[derive(Debug, Clone)]
pub struct GpuGroup {
    /// The node label the cloud sets on the group's nodes (`cloud.google.com/gke-nodepool`).
    pub label: &'static str,
    /// The group's name, that label's value (a template on EKS).
    pub name: Value,
    /// Its name as written in the stack, for the flavor's name.
    pub key: String,
    /// The extended resource its devices are (`nvidia.com/gpu`).
    pub resource: &'static str,
    /// Devices across the group: nodes (the most it may scale to) × devices per node.
    pub devices: i64,
    /// Tolerations of its taints, which Kueue adds to the pods it admits there.
    pub tolerations: Vec<Value>,
}

/// What the settings add to a cluster: its objects, and the queues readiness waits for.
#[derive(Debug, Default)]
pub struct Batch {
    /// `k8s_object` parts.
    pub parts: Vec<Part>,
    /// ClusterQueues that must become Active.
    pub queues: Vec<String>,
}

/// Where a project publishes its bundle, and the version forge installs when the stack names none.
struct Release {
    url: fn(&str) -> String,
    default_version: &'static str,
}

fn kueue_url(version: &str) -> String {
    format!("https://github.com/kubernetes-sigs/kueue/releases/download/{version}/manifests.yaml")
}

fn mpi_operator_url(version: &str) -> String {
    format!("https://raw.githubusercontent.com/kubeflow/mpi-operator/{version}/deploy/v2beta1/mpi-operator.yaml")
}

const KUEUE: Release = Release {
    url: kueue_url,
    default_version: KUEUE_VERSION,
};

const MPI_OPERATOR: Release = Release {
    url: mpi_operator_url,
    default_version: MPI_OPERATOR_VERSION,
};

/// A bundle setting as written: `true`, `"v1.2.3"`, or a table of `version` / `url` and `sha256`.
struct BundleSetting {
    version: Option<String>,
    url: Option<String>,
    sha256: Option<String>,
    table: Map<String, Value>,
}

/// Reads `kubernetes.<key>`: `None` when absent or false.
fn bundle_setting(settings: Option<&Value>, key: &str, extra: &[&str]) -> Result<Option<BundleSetting>, ComponentError> {
    let path = format!("kubernetes.{key}");
    let text = |table: &Map<String, Value>, field: &str| -> Result<Option<String>, ComponentError> {
        match table.get(field) {
            None => Ok(None),
            Some(Value::String(s)) if !s.is_empty() => Ok(Some(s.clone())),
            Some(other) => Err(ComponentError::at(
                format!("{path}.{field}"),
                format!("`{field}` must be a string, not {}", crate::schema::describe(other)),
                "write it in quotes",
            )),
        }
    };
    match settings.and_then(|s| s.get(key)) {
        None | Some(Value::Bool(false)) => Ok(None),
        Some(Value::Bool(true)) => Ok(Some(BundleSetting {
            version: None,
            url: None,
            sha256: None,
            table: Map::new(),
        })),
        Some(Value::String(v)) if !v.is_empty() => Ok(Some(BundleSetting {
            version: Some(v.clone()),
            url: None,
            sha256: None,
            table: Map::new(),
        })),
        Some(Value::Object(table)) => {
            let allowed: Vec<&str> = ["version", "url", "sha256"].into_iter().chain(extra.iter().copied()).collect();
            kubernetes::check_keys(Some(&Value::Object(table.clone())), &path, &allowed)?;
            Ok(Some(BundleSetting {
                version: text(table, "version")?,
                url: text(table, "url")?,
                sha256: text(table, "sha256")?,
                table: table.clone(),
            }))
        }
        Some(other) => Err(ComponentError::at(
            path,
            format!(
                "`{key}` must be true, false, a version or a table, not {}",
                crate::schema::describe(other)
            ),
            format!("write `{key} = true`, or a table such as `{key} = {{ version = \"…\", sha256 = \"…\" }}`"),
        )),
    }
}

/// The objects of the bundle a setting names: its `url`, else the `release` URL of its
/// `version`; `None` when bundles were not fetched.
fn setting_objects(
    input: &Input,
    key: &str,
    setting: &BundleSetting,
    release: Option<&Release>,
) -> Result<Option<Vec<Value>>, ComponentError> {
    let path = format!("kubernetes.{key}");
    let url = match (&setting.url, release) {
        (Some(url), _) => {
            if setting.version.is_some() {
                return Err(ComponentError::at(
                    format!("{path}.version"),
                    "`version` and `url` both say which bundle to apply",
                    "keep one: the URL names its version",
                ));
            }
            url.clone()
        }
        (None, Some(release)) => (release.url)(setting.version.as_deref().unwrap_or(release.default_version)),
        (None, None) => {
            return Err(ComponentError::at(
                path,
                format!("`{key}` publishes no single-file release, so forge needs the bundle's `url`"),
                format!(
                    "render it once (`kubectl kustomize \"github.com/kubeflow/training-operator.git/manifests/overlays/standalone?ref=v1.9.3\" > training-operator.yaml`), host it, and write `{key} = {{ url = \"https://…/training-operator.yaml\", sha256 = \"…\" }}`"
                ),
            ));
        }
    };
    manifests::bundle(input, &url, setting.sha256.as_deref(), &path)
}

/// The batch objects of the cluster block at `address` (reached as `cluster`), whose GPU
/// groups are `groups`.
pub fn batch(input: &Input, address: &str, cluster: &str, groups: &[GpuGroup]) -> Result<Batch, ComponentError> {
    let settings = input.config.get("kubernetes");
    let mut batch = Batch::default();
    let mpi = bundle_setting(settings, "mpi_operator", &[])?;
    if let Some(setting) = &mpi
        && let Some(objects) = setting_objects(input, "mpi_operator", setting, Some(&MPI_OPERATOR))?
    {
        batch.parts.extend(manifests::ordered_parts(
            address,
            "k8s.mpi_operator",
            cluster,
            objects,
            "kubernetes.mpi_operator",
        )?);
    }
    let training = bundle_setting(settings, "training_operator", &[])?;
    if let Some(mut objects) = training
        .map(|t| setting_objects(input, "training_operator", &t, None))
        .transpose()?
        .flatten()
    {
        if mpi.is_some() {
            leave_mpi_jobs_to_the_mpi_operator(&mut objects);
        }
        batch.parts.extend(manifests::ordered_parts(
            address,
            "k8s.training_operator",
            cluster,
            objects,
            "kubernetes.training_operator",
        )?);
    }
    if let Some(setting) = bundle_setting(settings, "kueue", &["queue", "namespace"])? {
        kueue(input, address, cluster, groups, &setting, &mut batch)?;
    }
    Ok(batch)
}

/// Kueue's bundle and the queue: a ResourceFlavor per GPU group (its nodes by label, its
/// taints tolerated), a ClusterQueue covering CPU, memory and the groups' devices with the
/// groups' device counts as quota, and a LocalQueue of the same name.
fn kueue(
    input: &Input,
    address: &str,
    cluster: &str,
    groups: &[GpuGroup],
    setting: &BundleSetting,
    batch: &mut Batch,
) -> Result<(), ComponentError> {
    let queue = setting.table.get("queue").and_then(Value::as_str).unwrap_or("gpu-queue").to_owned();
    let namespace = setting
        .table
        .get("namespace")
        .and_then(Value::as_str)
        .unwrap_or("default")
        .to_owned();
    if groups.is_empty() {
        return Err(ComponentError::at(
            "kubernetes.kueue",
            "the cluster has no GPU or Neuron nodes for a queue's quota",
            "add a GPU node group or pool, or remove `kueue`",
        ));
    }
    let mut objects = setting_objects(input, "kueue", setting, Some(&KUEUE))?.unwrap_or_default();
    let mut covered = vec!["cpu", "memory"];
    for g in groups {
        if !covered.contains(&g.resource) {
            covered.push(g.resource);
        }
    }
    let mut flavors = Vec::new();
    for g in groups {
        let flavor = format!("{queue}-{}", g.key.replace('_', "-"));
        let mut spec = json!({ "nodeLabels": { g.label: g.name } });
        if !g.tolerations.is_empty() {
            spec["tolerations"] = json!(g.tolerations);
        }
        objects.push(json!({ "apiVersion": KUEUE_API, "kind": "ResourceFlavor", "metadata": { "name": flavor }, "spec": spec }));
        let resources: Vec<Value> = covered
            .iter()
            .map(|r| {
                let quota = match *r {
                    "cpu" => json!(CPU_QUOTA),
                    "memory" => json!(MEMORY_QUOTA),
                    device if device == g.resource => json!(g.devices),
                    _ => json!(0),
                };
                json!({ "name": r, "nominalQuota": quota })
            })
            .collect();
        flavors.push(json!({ "name": flavor, "resources": resources }));
    }
    objects.push(json!({
        "apiVersion": KUEUE_API,
        "kind": "ClusterQueue",
        "metadata": { "name": queue },
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [{ "coveredResources": covered, "flavors": flavors }],
        },
    }));
    objects.push(json!({
        "apiVersion": KUEUE_API,
        "kind": "LocalQueue",
        "metadata": { "name": queue, "namespace": namespace },
        "spec": { "clusterQueue": queue },
    }));
    let mut parts = manifests::ordered_parts(address, "k8s.kueue", cluster, objects, "kubernetes.kueue")?;
    if let Some(local_queue) = parts.iter_mut().find(|p| p.config["manifest"]["kind"] == "LocalQueue")
        && kubernetes::made_namespace(&namespace)
    {
        local_queue.depends_on.push(format!("{address}.k8s.namespace.{namespace}"));
    }
    batch.parts.extend(parts);
    batch.queues.push(queue);
    Ok(())
}

/// With the MPI operator on: the training operator's `mpijobs.kubeflow.org` is left out, and
/// its controller is started for the job kinds whose definitions its bundle keeps
/// (`--enable-scheme=pytorchjob` …), so it does not watch MPIJobs.
fn leave_mpi_jobs_to_the_mpi_operator(objects: &mut Vec<Value>) {
    let is_mpi_jobs = |o: &Value| o["kind"] == "CustomResourceDefinition" && o["metadata"]["name"] == "mpijobs.kubeflow.org";
    objects.retain(|o| !is_mpi_jobs(o));
    let schemes: Vec<Value> = objects
        .iter()
        .filter(|o| o["kind"] == "CustomResourceDefinition" && o["spec"]["group"] == "kubeflow.org")
        .filter_map(|o| o["spec"]["names"]["kind"].as_str())
        .map(|kind| json!(format!("--enable-scheme={}", kind.to_ascii_lowercase())))
        .collect();
    for deployment in objects.iter_mut().filter(|o| o["kind"] == "Deployment") {
        let Some(containers) = deployment
            .pointer_mut("/spec/template/spec/containers")
            .and_then(Value::as_array_mut)
        else {
            continue;
        };
        for container in containers.iter_mut().filter(|c| c["name"] == "training-operator") {
            let mut args: Vec<Value> = container["args"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .filter(|a| !a.as_str().is_some_and(|a| a.starts_with("--enable-scheme")))
                .collect();
            args.extend(schemes.iter().cloned());
            container["args"] = json!(args);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_training_operator_leaves_mpi_jobs_to_the_mpi_operator() {
        let crd = |kind: &str, plural: &str| {
            json!({ "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                    "metadata": { "name": format!("{plural}.kubeflow.org") },
                    "spec": { "group": "kubeflow.org", "names": { "kind": kind, "plural": plural } } })
        };
        let mut objects = vec![
            crd("MPIJob", "mpijobs"),
            crd("PyTorchJob", "pytorchjobs"),
            crd("TFJob", "tfjobs"),
            json!({ "apiVersion": "apps/v1", "kind": "Deployment", "metadata": { "name": "training-operator" },
                    "spec": { "template": { "spec": { "containers": [
                        { "name": "training-operator", "args": ["--enable-scheme=mpijob", "--zap-log-level=info"] }] } } } }),
        ];
        leave_mpi_jobs_to_the_mpi_operator(&mut objects);
        assert_eq!(objects.len(), 3);
        assert!(objects.iter().all(|o| o["metadata"]["name"] != "mpijobs.kubeflow.org"));
        assert_eq!(
            objects[2]["spec"]["template"]["spec"]["containers"][0]["args"],
            json!(["--zap-log-level=info", "--enable-scheme=pytorchjob", "--enable-scheme=tfjob"])
        );
    }
}
