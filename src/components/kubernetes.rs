//! What forge applies inside a cluster so that the first job finds its devices and its data:
//! device plugin DaemonSets for the node groups that need them, the shared file system's
//! PersistentVolume and bound claim, and the readiness checks `up` makes at the end. Data
//! only — manifests built from facts (images, arguments, mounts, tolerations) — made into
//! `k8s_object` parts here; the engine that applies them is `provider::k8s`.

use super::{ComponentError, Part};
use crate::readiness::{Check, Claim};
use crate::template::Address;
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, BTreeSet};

/// A device plugin forge can install: its setting key, the DaemonSet's name and image, and
/// its default version.
pub struct DevicePlugin {
    /// The key in `kubernetes = { … }` (`nvidia_device_plugin`).
    pub key: &'static str,
    /// The DaemonSet's name in `kube-system`.
    pub name: &'static str,
    /// The version installed when the stack pins none.
    pub version: &'static str,
    /// The extended resource its nodes advertise once it runs.
    pub resource: &'static str,
}

/// NVIDIA's device plugin (NVIDIA AMIs): `nvidia.com/gpu`.
pub const NVIDIA: DevicePlugin = DevicePlugin {
    key: "nvidia_device_plugin",
    name: "nvidia-device-plugin",
    version: "v0.20.0",
    resource: "nvidia.com/gpu",
};

/// AWS's EFA device plugin (EFA node groups): `vpc.amazonaws.com/efa`.
pub const EFA: DevicePlugin = DevicePlugin {
    key: "efa_device_plugin",
    name: "aws-efa-k8s-device-plugin",
    version: "v0.5.6",
    resource: "vpc.amazonaws.com/efa",
};

/// AWS Neuron's device plugin (Trainium, Inferentia): `aws.amazon.com/neuron`.
pub const NEURON: DevicePlugin = DevicePlugin {
    key: "neuron_device_plugin",
    name: "neuron-device-plugin",
    version: "2.23.30.0",
    resource: "aws.amazon.com/neuron",
};

/// The device plugins, in the order their settings are documented.
pub const DEVICE_PLUGINS: [&DevicePlugin; 3] = [&NVIDIA, &EFA, &NEURON];

/// The settings a `kubernetes = { … }` table of a cluster block takes.
pub const CLUSTER_SETTINGS: &[&str] = &[
    "nvidia_device_plugin",
    "efa_device_plugin",
    "neuron_device_plugin",
    "nvidia_dra_driver",
    "wait_ready",
    "reach_timeout",
    "api_timeout",
    "kueue",
    "mpi_operator",
    "training_operator",
];

/// Regions whose EKS images live in another registry account than 602401143452 (AWS's
/// "Amazon container image registries for Amazon EKS add-ons").
const EKS_REGISTRY_ACCOUNTS: &[(&str, &str)] = &[
    ("af-south-1", "877085696533"),
    ("ap-east-1", "800184023465"),
    ("ap-southeast-3", "296578399912"),
    ("ap-south-2", "900889452093"),
    ("ap-southeast-4", "491585149902"),
    ("ap-southeast-5", "151610086707"),
    ("ap-southeast-7", "121268973566"),
    ("cn-north-1", "918309763551"),
    ("cn-northwest-1", "961992271922"),
];

/// The EKS image registry of `region`.
pub fn eks_registry(region: &str) -> String {
    let account = EKS_REGISTRY_ACCOUNTS
        .iter()
        .find(|(r, _)| *r == region)
        .map_or("602401143452", |(_, a)| a);
    let domain = if region.starts_with("cn-") {
        "amazonaws.com.cn"
    } else {
        "amazonaws.com"
    };
    format!("{account}.dkr.ecr.{region}.{domain}")
}

/// One plugin setting: `true`/`false`, or a version string (on, pinned).
#[derive(Debug, Clone, PartialEq)]
pub enum Switch {
    /// Not set: the node group's default.
    Default,
    /// Off.
    Off,
    /// On, at the default version or the one given.
    On(Option<String>),
}

/// Reads `<key>` of a `kubernetes` table at `path` (for errors).
pub fn switch(table: Option<&Value>, path: &str, key: &str) -> Result<Switch, ComponentError> {
    match table.and_then(|t| t.get(key)) {
        None => Ok(Switch::Default),
        Some(Value::Bool(false)) => Ok(Switch::Off),
        Some(Value::Bool(true)) => Ok(Switch::On(None)),
        Some(Value::String(v)) if !v.is_empty() => Ok(Switch::On(Some(v.clone()))),
        Some(other) => Err(ComponentError::at(
            format!("{path}.{key}"),
            format!("`{key}` must be true, false or a version, not {}", crate::schema::describe(other)),
            format!(
                "write `{key} = false` to leave it out, or `{key} = \"{}\"` to pin a version",
                plugin(key).map_or("…", |p| p.version)
            ),
        )),
    }
}

fn plugin(key: &str) -> Option<&'static DevicePlugin> {
    DEVICE_PLUGINS.into_iter().find(|p| p.key == key)
}

/// Checks a `kubernetes` table's keys against `allowed`.
pub fn check_keys(table: Option<&Value>, path: &str, allowed: &[&str]) -> Result<(), ComponentError> {
    let Some(table) = table else { return Ok(()) };
    let Some(map) = table.as_object() else {
        return Err(ComponentError::at(
            path,
            format!("`{path}` must be a table"),
            "e.g. `kubernetes = { nvidia_device_plugin = false }`",
        ));
    };
    match map.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(extra) => Err(ComponentError::at(
            format!("{path}.{extra}"),
            format!("`{path}` has no setting `{extra}`"),
            crate::schema::suggestion(extra, allowed),
        )),
        None => Ok(()),
    }
}

/// The node groups one plugin serves in a cluster: their names, instance types and taints.
#[derive(Debug, Default)]
pub struct Served {
    /// Node group names (the value of the cloud's node group label).
    pub groups: Vec<String>,
    /// Their instance types.
    pub instance_types: Vec<String>,
    /// Tolerations for their taints.
    pub tolerations: Vec<Value>,
}

/// A toleration of an EKS taint (`{ key, value, effect = "NO_SCHEDULE" }`).
pub fn toleration(taint: &Value) -> Value {
    let effect = match taint.get("effect").and_then(Value::as_str).unwrap_or("NO_SCHEDULE") {
        "NO_EXECUTE" | "NoExecute" => "NoExecute",
        "PREFER_NO_SCHEDULE" | "PreferNoSchedule" => "PreferNoSchedule",
        _ => "NoSchedule",
    };
    json!({ "key": taint.get("key").cloned().unwrap_or(Value::Null), "operator": "Exists", "effect": effect })
}

/// A `k8s_object` part in `cluster` (a `${…}` template of `eks/<name>` or `gke/<id>`).
pub fn object(local: String, cluster: &str, manifest: Value, depends_on: Vec<String>) -> Part {
    Part {
        local,
        kind: "k8s_object",
        config: json!({ "cluster": cluster, "manifest": manifest }),
        depends_on,
        existing: None,
    }
}

/// The labels of a forge object `name`.
pub fn labels(name: &str) -> Value {
    json!({ "app.kubernetes.io/name": name, "app.kubernetes.io/managed-by": "forge" })
}

/// A DaemonSet `name` in `kube-system` running `pod` (a pod spec), labelled as forge's.
fn daemon_set(name: &str, pod: Value) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": { "name": name, "namespace": "kube-system", "labels": labels(name) },
        "spec": {
            "selector": { "matchLabels": { "app.kubernetes.io/name": name } },
            "updateStrategy": { "type": "RollingUpdate" },
            "template": { "metadata": { "labels": labels(name) }, "spec": pod },
        },
    })
}

/// The DaemonSet of `plugin` at `image` for the node groups in `served`, labelled by the
/// cloud with `group_label` (`eks.amazonaws.com/nodegroup`).
pub fn device_plugin(plugin: &DevicePlugin, image: &str, group_label: &str, served: &Served) -> Value {
    let mut tolerations = vec![
        json!({ "key": "CriticalAddonsOnly", "operator": "Exists" }),
        json!({ "key": plugin.resource, "operator": "Exists", "effect": "NoSchedule" }),
    ];
    for t in &served.tolerations {
        if !tolerations.contains(t) {
            tolerations.push(t.clone());
        }
    }
    let mut container = json!({
        "name": plugin.name,
        "image": image,
        "securityContext": { "allowPrivilegeEscalation": false, "capabilities": { "drop": ["ALL"] } },
        "volumeMounts": [{ "name": "device-plugin", "mountPath": "/var/lib/kubelet/device-plugins" }],
    });
    let mut volumes = vec![json!({ "name": "device-plugin", "hostPath": { "path": "/var/lib/kubelet/device-plugins" } })];
    let mut pod = json!({});
    match plugin.key {
        "nvidia_device_plugin" => {
            container["env"] = json!([{ "name": "FAIL_ON_INIT_ERROR", "value": "false" }]);
        }
        "efa_device_plugin" => {
            pod["hostNetwork"] = json!(true);
            container["volumeMounts"]
                .as_array_mut()
                .expect("made above")
                .push(json!({ "name": "infiniband", "mountPath": "/dev/infiniband" }));
            volumes.push(json!({ "name": "infiniband", "hostPath": { "path": "/dev/infiniband" } }));
        }
        _ => {
            pod["serviceAccountName"] = json!(plugin.name);
            container["env"] = json!([{ "name": "KUBECONFIG", "value": "/etc/kubernetes/kubelet.conf" },
                                      { "name": "NODE_NAME", "valueFrom": { "fieldRef": { "fieldPath": "spec.nodeName" } } }]);
        }
    }
    let mut expressions = vec![json!({ "key": group_label, "operator": "In", "values": served.groups })];
    if !served.instance_types.is_empty() {
        expressions.push(json!({ "key": "node.kubernetes.io/instance-type", "operator": "In", "values": served.instance_types }));
    }
    let spec = pod.as_object_mut().expect("made above");
    spec.insert("priorityClassName".into(), json!("system-node-critical"));
    spec.insert("tolerations".into(), Value::Array(tolerations));
    spec.insert(
        "affinity".into(),
        json!({ "nodeAffinity": { "requiredDuringSchedulingIgnoredDuringExecution": { "nodeSelectorTerms": [{ "matchExpressions": expressions }] } } }),
    );
    spec.insert("containers".into(), json!([container]));
    spec.insert("volumes".into(), Value::Array(volumes));
    daemon_set(plugin.name, pod)
}

/// The Neuron plugin's identity: a ServiceAccount and the node access it needs (it reads its
/// node and the pods bound to it, and records events).
pub fn neuron_rbac() -> Vec<(&'static str, Value)> {
    let name = NEURON.name;
    vec![
        (
            "service_account",
            json!({ "apiVersion": "v1", "kind": "ServiceAccount", "metadata": { "name": name, "namespace": "kube-system", "labels": labels(name) } }),
        ),
        (
            "cluster_role",
            json!({ "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": { "name": name, "labels": labels(name) },
                    "rules": [
                        { "apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"] },
                        { "apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch", "update"] },
                        { "apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "update", "patch"] },
                        { "apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"] },
                    ] }),
        ),
        (
            "cluster_role_binding",
            json!({ "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": { "name": name, "labels": labels(name) },
                    "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name },
                    "subjects": [{ "kind": "ServiceAccount", "name": name, "namespace": "kube-system" }] }),
        ),
    ]
}

/// GPUDirect on GKE: TCPX (A3 High and Edge, 4 GPU networks) or TCPXO (A3 Mega, 8).
pub struct GpuDirect {
    /// `tcpx` or `tcpxo`: names the installer (`nccl-tcpx-installer`) and its config map.
    pub flavour: &'static str,
    /// The NCCL plugin image the installer copies onto the node.
    pub installer_image: &'static str,
}

/// GPUDirect-TCPX's NCCL plugin (A3 High, A3 Edge).
pub const TCPX: GpuDirect = GpuDirect {
    flavour: "tcpx",
    installer_image: "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx/nccl-plugin-gpudirecttcpx-dev:v3.1.9",
};

/// GPUDirect-TCPXO's NCCL plugin (A3 Mega).
pub const TCPXO: GpuDirect = GpuDirect {
    flavour: "tcpxo",
    installer_image: "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/nccl-plugin-gpudirecttcpx-dev:v1.0.15",
};

/// GKE's NRI device injector, which hands a pod's containers the GPU devices its annotations
/// name (the TCPX receive daemon needs them), pinned by digest.
const NRI_INJECTOR_IMAGE: &str =
    "gcr.io/gke-release/nri-device-injector@sha256:7704e2bd74b8edbb76b6913c7904cc2362f1fa887c4d4aba7b19778ea353537c";

/// The settings a `kubernetes = { … }` table of a `gke` block takes.
pub const GKE_SETTINGS: &[&str] = &[
    "gpudirect",
    "nvidia_dra_driver",
    "wait_ready",
    "reach_timeout",
    "api_timeout",
    "kueue",
    "mpi_operator",
    "training_operator",
];

/// The `GKENetworkParamSet` and `Network` that make a VPC and subnetwork (their names, `${…}`
/// templates) a device network pods name `name` in their `networking.gke.io/interfaces`
/// annotation: `vpc1` … of GPUDirect-TCPX, `gvnic-1` and `rdma-0` … of GPUDirect-RDMA.
/// `device_mode` is `NetDevice` (the NIC moves into the pod) or `RDMA` (its RDMA device does).
pub fn gpu_network(name: &str, vpc: Value, subnetwork: Value, device_mode: &str) -> (Value, Value) {
    let params = json!({
        "apiVersion": "networking.gke.io/v1",
        "kind": "GKENetworkParamSet",
        "metadata": { "name": name, "labels": labels("gpudirect") },
        "spec": { "vpc": vpc, "vpcSubnet": subnetwork, "deviceMode": device_mode },
    });
    let network = json!({
        "apiVersion": "networking.gke.io/v1",
        "kind": "Network",
        "metadata": { "name": name, "labels": labels("gpudirect") },
        "spec": { "type": "Device", "parametersRef": { "group": "networking.gke.io", "kind": "GKENetworkParamSet", "name": name } },
    });
    (params, network)
}

/// Google's gIB (InfiniBand-verbs over RoCE) NCCL plugin, which GPUDirect-RDMA machines (A3
/// Ultra, A4, A4X) need: the installer images for x86 and Arm nodes, pinned to the release
/// Cluster Toolkit's blueprints pin.
pub const GIB_IMAGES: [(&str, &str); 2] = [
    ("amd64", "us-docker.pkg.dev/gce-ai-infra/gpudirect-gib/nccl-plugin-gib:v1.1.0"),
    ("arm64", "us-docker.pkg.dev/gce-ai-infra/gpudirect-gib/nccl-plugin-gib-arm64:v1.1.0"),
];

/// The DaemonSet that installs gIB on the `arch` nodes with `accelerators`: a privileged init
/// container copies the plugin and its NCCL settings script into `/home/kubernetes/bin/gib`,
/// which workloads mount at `/usr/local/gib`.
pub fn gib_installer(arch: &str, image: &str, accelerators: &[String]) -> Value {
    let name = if arch == "amd64" {
        "nccl-rdma-installer".to_owned()
    } else {
        format!("nccl-rdma-installer-{arch}")
    };
    let mut pod = on_gpu_nodes(accelerators);
    pod["nodeSelector"] = json!({ "kubernetes.io/arch": arch });
    pod["volumes"] = json!([{ "name": "gib", "hostPath": { "path": "/home/kubernetes/bin/gib" } }]);
    pod["initContainers"] = json!([{
        "name": "nccl-plugin-gib",
        "image": image,
        "command": ["/scripts/container_entry.sh", "install"],
        "securityContext": { "privileged": true },
        "volumeMounts": [{ "name": "gib", "mountPath": "/target/usr/local/gib" }],
    }]);
    pod["containers"] = json!([{ "name": "pause", "image": "registry.k8s.io/pause:3.10" }]);
    daemon_set(&name, pod)
}

/// Node affinity on the GPU types GKE labels its nodes with.
fn on_accelerators(accelerators: &[String]) -> Value {
    json!({ "nodeAffinity": { "requiredDuringSchedulingIgnoredDuringExecution": { "nodeSelectorTerms": [
        { "matchExpressions": [{ "key": "cloud.google.com/gke-accelerator", "operator": "In", "values": accelerators }] }
    ] } } })
}

/// The DaemonSet that installs the NCCL plugin of `direct` on the nodes with `accelerators`
/// (a privileged init container copies it into `/home/kubernetes/bin/nvidia/lib64`), and the
/// NCCL settings workloads read from the `nccl-<flavour>-config` config map.
pub fn nccl_installer(direct: &GpuDirect, accelerators: &[String], networks: usize) -> (Value, Value) {
    let name = format!("nccl-{}-installer", direct.flavour);
    let mut pod = on_gpu_nodes(accelerators);
    pod["volumes"] = json!([
        { "name": "var-lib", "hostPath": { "path": "/var/lib" } },
        { "name": "library-dir-host", "hostPath": { "path": "/home/kubernetes/bin" } },
    ]);
    pod["initContainers"] = json!([{
        "name": "nccl-plugin-installer",
        "image": direct.installer_image,
        "command": ["/scripts/container_entry.sh", "install", "--install-nccl"],
        "securityContext": { "privileged": true },
        "volumeMounts": [
            { "name": "var-lib", "mountPath": "/var/lib" },
            { "name": "library-dir-host", "mountPath": "/usr/local" },
        ],
    }]);
    pod["containers"] = json!([{ "name": "pause", "image": "registry.k8s.io/pause:3.10" }]);
    let installer = daemon_set(&name, pod);
    let interfaces: Vec<String> = (1..=networks).map(|n| format!("eth{n}")).collect();
    let prefix = if direct.flavour == "tcpx" {
        "NCCL_GPUDIRECTTCPX"
    } else {
        "NCCL_FASTRAK"
    };
    let mut data = Map::new();
    data.insert("NCCL_SOCKET_IFNAME".into(), json!("eth0"));
    let ifname = if direct.flavour == "tcpx" {
        format!("{prefix}_SOCKET_IFNAME")
    } else {
        format!("{prefix}_IFNAME")
    };
    data.insert(ifname, json!(interfaces.join(",")));
    data.insert(format!("{prefix}_CTRL_DEV"), json!("eth0"));
    data.insert("NCCL_CROSS_NIC".into(), json!("0"));
    data.insert("NCCL_ALGO".into(), json!("Ring,Tree"));
    data.insert("NCCL_PROTO".into(), json!("Simple"));
    data.insert("NCCL_NET_GDR_LEVEL".into(), json!("PIX"));
    data.insert("NCCL_P2P_PXN_LEVEL".into(), json!("0"));
    data.insert("LD_LIBRARY_PATH".into(), json!("/usr/local/nvidia/lib64"));
    let config = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": { "name": format!("nccl-{}-config", direct.flavour), "namespace": "default", "labels": labels(&name) },
        "data": data,
    });
    (installer, config)
}

/// GKE's NRI device injector on the nodes with `accelerators`.
pub fn nri_injector(accelerators: &[String]) -> Value {
    let mut pod = on_gpu_nodes(accelerators);
    pod["containers"] = json!([{
        "name": "device-injector",
        "image": NRI_INJECTOR_IMAGE,
        "securityContext": { "privileged": true },
        "volumeMounts": [{ "name": "nri", "mountPath": "/var/run/nri" }],
    }]);
    pod["volumes"] = json!([{ "name": "nri", "hostPath": { "path": "/var/run/nri" } }]);
    daemon_set("nri-device-injector", pod)
}

/// The pod spec a GPU node's system daemon starts from: on the nodes with `accelerators`,
/// tolerating everything, in the host's network and process namespaces.
fn on_gpu_nodes(accelerators: &[String]) -> Value {
    json!({
        "priorityClassName": "system-node-critical",
        "affinity": on_accelerators(accelerators),
        "tolerations": [{ "operator": "Exists" }],
        "hostNetwork": true,
        "hostPID": true,
    })
}

/// The readiness wait a cluster block's `kubernetes = { wait_ready = … }` asks for: `None` to
/// skip it, else the time (`None`: the default).
pub fn wait_ready(settings: Option<&Value>) -> Result<Option<Option<String>>, ComponentError> {
    match settings.and_then(|s| s.get("wait_ready")) {
        None | Some(Value::Bool(true)) => Ok(Some(None)),
        Some(Value::Bool(false)) => Ok(None),
        Some(Value::String(t)) if humantime::parse_duration(t).is_ok() => Ok(Some(Some(t.clone()))),
        Some(other) => Err(ComponentError::at(
            "kubernetes.wait_ready",
            format!(
                "`wait_ready` must be true, false or a duration, not {}",
                crate::schema::describe(other)
            ),
            "write `wait_ready = \"45m\"`, or `wait_ready = false` to skip the readiness check",
        )),
    }
}

/// The in-cluster waits a cluster block's `kubernetes` table sets, and the `timeouts` entry
/// of each `k8s_object` in that cluster they become: how long forge tries the cluster's
/// endpoint (`reach_timeout`, default a minute) and how long an object waits for the cluster
/// to serve its kind (`api_timeout`, default two minutes).
const WAITS: [(&str, &str); 2] = [("reach_timeout", "reach"), ("api_timeout", "api")];

/// Checks the durations of a cluster block's [`WAITS`].
pub fn check_waits(settings: Option<&Value>) -> Result<(), ComponentError> {
    for (key, _) in WAITS {
        match settings.and_then(|s| s.get(key)) {
            None => {}
            Some(Value::String(t)) if humantime::parse_duration(t).is_ok() => {}
            Some(other) => {
                return Err(ComponentError::at(
                    format!("kubernetes.{key}"),
                    format!("`{key}` must be a duration, not {}", crate::schema::describe(other)),
                    format!("write it like `{key} = \"5m\"`"),
                ));
            }
        }
    }
    Ok(())
}

/// Gives a `k8s_object` part the [`WAITS`] its cluster's block sets (whichever block made
/// the part: the cluster's own, or a storage block mounting into it).
pub fn with_cluster_waits(part: &mut Part, components: &BTreeMap<String, Map<String, Value>>) {
    let block = part.config["cluster"].as_str().and_then(cluster_block);
    let Some(settings) = block.and_then(|b| components.get(b)).and_then(|c| c.get("kubernetes")) else {
        return;
    };
    for (key, operation) in WAITS {
        if let Some(wait) = settings.get(key).filter(|w| w.is_string()) {
            part.config["timeouts"][operation] = wait.clone();
        }
    }
}

/// The cluster block a `k8s_object`'s cluster names ([`eks_cluster`], [`gke_cluster`]).
fn cluster_block(cluster: &str) -> Option<&str> {
    let inner = cluster.strip_prefix("eks/${").or_else(|| cluster.strip_prefix("gke/${"))?;
    inner.split_once(".cluster.").map(|(block, _)| block)
}

/// A shared file system as Kubernetes mounts it: a statically provisioned ReadWriteMany
/// volume for a CSI driver.
pub struct SharedVolume<'a> {
    /// The CSI driver (`fsx.csi.aws.com`).
    pub driver: &'a str,
    /// The size the volume and claim state.
    pub capacity_gib: i64,
    /// The driver's volume handle (a `${…}` template).
    pub handle: Value,
    /// The driver's volume attributes.
    pub attributes: Map<String, Value>,
    /// Mount options (`flock` for Lustre).
    pub mount_options: &'a [&'a str],
}

/// What a storage block puts into its client clusters: parts, readiness checks, and the same
/// objects as YAML for its `pv_yaml` output.
pub struct Mounted {
    /// A volume and its claim per client cluster.
    pub parts: Vec<Part>,
    /// Per client cluster: its claim is Bound.
    pub ready: Vec<Check>,
    /// The volume and claim as one YAML stream.
    pub yaml: Value,
}

impl Mounted {
    /// A storage component's expansion: its own `parts` and `outputs`, and these volumes,
    /// claims, readiness checks and `pv_yaml`.
    pub fn expansion(self, mut parts: Vec<Part>, mut outputs: Map<String, Value>) -> super::Expansion {
        parts.extend(self.parts);
        outputs.insert("pv_yaml".into(), self.yaml);
        super::Expansion {
            parts,
            outputs,
            ready: self.ready,
        }
    }
}

/// The volume and a claim bound to it in each of `clients` (cluster blocks; `cluster_ref`
/// makes a client's `k8s_object` cluster reference). The claim is the block's
/// `kubernetes = { claim = "…", namespace = "…" }`, by default `<block name>-pvc` in
/// `default`; the volume is `<namespace>-<claim>` (volumes are cluster-wide).
pub fn mount(
    address: &Address,
    settings: Option<&Value>,
    clients: &[&str],
    volume: SharedVolume,
    cluster_ref: fn(&str) -> String,
) -> Result<Mounted, ComponentError> {
    check_keys(settings, "kubernetes", &["claim", "namespace"])?;
    let get = |key: &str| settings.and_then(|t| t.get(key)).and_then(Value::as_str).map(str::to_owned);
    let claim_name = get("claim").unwrap_or_else(|| format!("{}-pvc", address.name()).replace('_', "-"));
    let namespace = get("namespace").unwrap_or_else(|| "default".into());
    let volume_name = format!("{namespace}-{claim_name}");
    let storage = json!(format!("{}Gi", volume.capacity_gib));
    let mut spec = json!({
        "capacity": { "storage": storage },
        "volumeMode": "Filesystem",
        "accessModes": ["ReadWriteMany"],
        "persistentVolumeReclaimPolicy": "Retain",
        "storageClassName": "",
        "csi": { "driver": volume.driver, "volumeHandle": volume.handle, "volumeAttributes": volume.attributes },
    });
    if !volume.mount_options.is_empty() {
        spec["mountOptions"] = json!(volume.mount_options);
    }
    let pv = json!({ "apiVersion": "v1", "kind": "PersistentVolume", "metadata": { "name": volume_name, "labels": labels(&claim_name) }, "spec": spec });
    let pvc = json!({
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": { "name": claim_name, "namespace": namespace, "labels": labels(&claim_name) },
        "spec": {
            "accessModes": ["ReadWriteMany"],
            "storageClassName": "",
            "volumeName": volume_name,
            "resources": { "requests": { "storage": storage } },
        },
    });
    let mut mounted = Mounted {
        parts: Vec::new(),
        ready: Vec::new(),
        yaml: Value::String(format!(
            "{}---\n{}",
            serde_yaml_ng::to_string(&pv).unwrap_or_default(),
            serde_yaml_ng::to_string(&pvc).unwrap_or_default()
        )),
    };
    for client in clients {
        let cluster = cluster_ref(client);
        let local = format!("k8s.{}", client.split_once('.').map_or(*client, |(_, n)| n));
        mounted.parts.push(object(format!("{local}.volume"), &cluster, pv.clone(), vec![]));
        mounted.parts.push(object(
            format!("{local}.claim"),
            &cluster,
            pvc.clone(),
            vec![format!("{address}.{local}.volume")],
        ));
        mounted.ready.push(Check {
            claims: vec![Claim {
                namespace: namespace.clone(),
                name: claim_name.clone(),
            }],
            ..Check::of(&cluster)
        });
    }
    Ok(mounted)
}

/// The namespaces the cluster block `address` makes: those (other than the ones every cluster
/// has) where the storage blocks listing it as a client put their claims, and where its Kueue
/// LocalQueue goes; one each, however many objects go there.
fn made_namespaces(components: &BTreeMap<String, Map<String, Value>>, address: &str) -> BTreeSet<String> {
    let queue = components
        .get(address)
        .and_then(|c| c.get("kubernetes")?.get("kueue")?.get("namespace")?.as_str());
    super::blocks_serving(components, address)
        .filter_map(|(_, config)| config.get("kubernetes")?.get("namespace")?.as_str())
        .chain(queue)
        .filter(|ns| made_namespace(ns))
        .map(str::to_owned)
        .collect()
}

/// Whether a cluster block makes namespace `name` (every cluster has the built-in ones).
pub fn made_namespace(name: &str) -> bool {
    !BUILT_IN_NAMESPACES.contains(&name)
}

/// Namespaces every cluster has.
const BUILT_IN_NAMESPACES: &[&str] = &["default", "kube-system", "kube-public", "kube-node-lease"];

/// The `k8s_object` parts of a cluster block (`address`) for the namespaces it makes (see
/// [`made_namespaces`]), at `k8s.namespace.<name>`.
pub fn namespaces(components: &BTreeMap<String, Map<String, Value>>, address: &str, cluster: &str) -> Vec<Part> {
    made_namespaces(components, address)
        .into_iter()
        .map(|ns| {
            let manifest = json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": ns, "labels": labels(&ns) } });
            object(format!("k8s.namespace.{ns}"), cluster, manifest, vec![])
        })
        .collect()
}

/// How a `k8s_object` names an `eks` block's cluster.
pub fn eks_cluster(block: &str) -> String {
    format!("eks/${{{block}.cluster.name}}")
}

/// How a `k8s_object` names a `gke` block's cluster.
pub fn gke_cluster(block: &str) -> String {
    format!("gke/${{{block}.cluster.id}}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registries_follow_the_region() {
        assert_eq!(eks_registry("us-west-2"), "602401143452.dkr.ecr.us-west-2.amazonaws.com");
        assert_eq!(eks_registry("ap-east-1"), "800184023465.dkr.ecr.ap-east-1.amazonaws.com");
        assert_eq!(eks_registry("cn-north-1"), "918309763551.dkr.ecr.cn-north-1.amazonaws.com.cn");
    }

    #[test]
    fn switches_take_booleans_and_versions() {
        let t = json!({ "nvidia_device_plugin": false, "efa_device_plugin": "v0.5.7", "neuron_device_plugin": 3 });
        assert_eq!(switch(Some(&t), "kubernetes", "nvidia_device_plugin").unwrap(), Switch::Off);
        assert_eq!(
            switch(Some(&t), "kubernetes", "efa_device_plugin").unwrap(),
            Switch::On(Some("v0.5.7".into()))
        );
        assert_eq!(switch(None, "kubernetes", "efa_device_plugin").unwrap(), Switch::Default);
        let err = switch(Some(&t), "kubernetes", "neuron_device_plugin").unwrap_err();
        assert_eq!(err.key.as_deref(), Some("kubernetes.neuron_device_plugin"));
    }

    #[test]
    fn device_plugins_select_their_groups_and_tolerate_their_taints() {
        let served = Served {
            groups: vec!["gpu".into()],
            instance_types: vec!["p5.48xlarge".into()],
            tolerations: vec![toleration(
                &json!({ "key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE" }),
            )],
        };
        let ds = device_plugin(
            &EFA,
            "registry/eks/aws-efa-k8s-device-plugin:v0.5.6",
            "eks.amazonaws.com/nodegroup",
            &served,
        );
        let pod = &ds["spec"]["template"]["spec"];
        assert_eq!(pod["hostNetwork"], json!(true));
        let terms =
            &pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]["matchExpressions"];
        assert_eq!(terms[0]["values"], json!(["gpu"]));
        assert_eq!(terms[1]["values"], json!(["p5.48xlarge"]));
        assert!(
            pod["tolerations"]
                .as_array()
                .unwrap()
                .contains(&json!({ "key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule" }))
        );
    }
}
