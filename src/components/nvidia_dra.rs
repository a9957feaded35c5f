//! NVIDIA's DRA driver for GPUs, as forge installs it in a cluster with GB200 nodes (EKS:
//! P6e-GB200 UltraServers; GKE: A4X pools — NVL72 racks whose machines share one NVLink domain). Its ComputeDomains give
//! the pods of one multi-node job an IMEX domain of their own, so that their GPUs reach each
//! other over multi-node NVLink — which the device plugin, still the one allocating GPUs
//! (`nvidia.com/gpu`), cannot do. Its DeviceClasses are in the DRA API the cluster serves
//! ([`Platform`]).
//!
//! Data only, like [`super::kubernetes`]: the driver's namespace, the ComputeDomain CRD,
//! NVIDIA's DeviceClasses, the identities of the driver and of the IMEX daemons its controller
//! starts, the controller and the ComputeDomain kubelet plugin, each a `k8s_object` part under
//! `k8s.nvidia_dra`. The driver's GPU kubelet plugin is not run: the device plugin owns the GPUs,
//! and two allocators of the same devices would hand them out twice.

use super::{Part, kubernetes};
use serde_json::{Value, json};

/// The driver version installed when the stack pins none.
pub const DEFAULT_VERSION: &str = "v25.8.1";

/// The CRD whose Established the readiness waits on.
pub const COMPUTE_DOMAIN_CRD: &str = "computedomains.resource.nvidia.com";

/// The driver's image repository; its tags are the driver's versions.
const IMAGE: &str = "nvcr.io/nvidia/k8s-dra-driver-gpu";

/// The driver's name: its namespace, its ServiceAccount and ClusterRole, its objects' label.
const NAME: &str = "nvidia-dra-driver-gpu";

/// Where the parts go, below the cluster block's address.
const LOCAL: &str = "k8s.nvidia_dra";

/// The RBAC API.
const RBAC_API: &str = "rbac.authorization.k8s.io/v1";

/// The DRA driver name NVIDIA's GPU kubelet plugin publishes GPUs and MIG devices under.
const GPU_DRIVER: &str = "gpu.nvidia.com";

/// The DRA driver name the ComputeDomain kubelet plugin publishes IMEX channels and daemons under.
const COMPUTE_DOMAIN_DRIVER: &str = "compute-domain.nvidia.com";

/// The ServiceAccount NVIDIA's controller runs the IMEX daemons under, in the driver's namespace.
const DAEMON_ACCOUNT: &str = "compute-domain-daemon-service-account";

/// What the driver depends on of the cluster's platform.
pub struct Platform {
    /// The NVIDIA driver's root on a node.
    pub driver_root: &'static str,
    /// The DRA API the cluster serves, which the DeviceClasses are written in.
    pub dra_api: &'static str,
}

/// EKS: its NVIDIA AMIs install the driver in the host itself; Kubernetes 1.33 serves DRA as
/// `resource.k8s.io/v1beta1`.
pub const EKS: Platform = Platform {
    driver_root: "/",
    dra_api: "resource.k8s.io/v1beta1",
};

/// GKE: its driver installation puts the driver under `/home/kubernetes/bin/nvidia`; the
/// GKE 1.34 that A4X pools need serves DRA as `resource.k8s.io/v1` (GA; GKE keeps beta APIs
/// off unless a cluster turns them on).
pub const GKE: Platform = Platform {
    driver_root: "/home/kubernetes/bin/nvidia",
    dra_api: "resource.k8s.io/v1",
};

/// NVIDIA's DeviceClasses: the part, the class, the DRA driver and the `type` attribute of the
/// devices it selects, and the one IMEX channel it is limited to (the default channel: 0).
const DEVICE_CLASSES: [(&str, &str, &str, &str, Option<u32>); 4] = [
    ("device_class.gpu", "gpu.nvidia.com", GPU_DRIVER, "gpu", None),
    ("device_class.mig", "mig.nvidia.com", GPU_DRIVER, "mig", None),
    (
        "device_class.compute_domain_daemon",
        "compute-domain-daemon.nvidia.com",
        COMPUTE_DOMAIN_DRIVER,
        "daemon",
        None,
    ),
    (
        "device_class.compute_domain_default_channel",
        "compute-domain-default-channel.nvidia.com",
        COMPUTE_DOMAIN_DRIVER,
        "channel",
        Some(0),
    ),
];

/// Read access.
const READ: [&str; 3] = ["get", "list", "watch"];

/// Full control of what the driver makes itself.
const MANAGE: [&str; 7] = ["get", "list", "watch", "create", "update", "patch", "delete"];

/// The NVIDIA DRA driver's parts in `cluster` (a k8s_object cluster reference, e.g.
/// `eks/${eks.gb.cluster.name}`, as [`kubernetes::eks_cluster`] writes it: the block in it is
/// the one the parts' ordering names), its kubelet plugin scheduled on the nodes of
/// `instance_types` (not empty) and tolerating `taints` (node group taints as written in the
/// stack), image at `version`, on `platform`. The namespace and the CRD come first, then the
/// classes and identities, then the controller and the kubelet plugin.
pub fn driver(cluster: &str, instance_types: &[String], taints: &[Value], version: &str, platform: &Platform) -> Vec<Part> {
    let image = format!("{IMAGE}:{version}");
    let tolerations = tolerations(taints);
    let first = vec![("namespace".to_owned(), namespace()), ("crd".to_owned(), compute_domain_crd())];
    let mut config = device_classes(platform.dra_api);
    config.extend(driver_identity());
    config.extend(daemon_identity());
    let workloads = vec![
        ("controller".to_owned(), controller(&image, &tolerations)),
        (
            "kubelet_plugin".to_owned(),
            kubelet_plugin(&image, instance_types, &tolerations, platform.driver_root),
        ),
    ];
    let block = block_of(cluster);
    let after_first = addresses(block, &first);
    let after_config = [after_first.clone(), addresses(block, &config)].concat();
    [(first, Vec::new()), (config, after_first), (workloads, after_config)]
        .into_iter()
        .flat_map(|(objects, after)| {
            objects
                .into_iter()
                .map(move |(local, manifest)| kubernetes::object(format!("{LOCAL}.{local}"), cluster, manifest, after.clone()))
        })
        .collect()
}

/// The block a cluster reference names (`eks/${eks.gb.cluster.name}` → `eks.gb`).
fn block_of(cluster: &str) -> &str {
    let inner = cluster.split_once("${").map_or(cluster, |(_, rest)| rest);
    inner.split_once(".cluster.").map_or(inner, |(block, _)| block)
}

/// The full addresses of `objects` (parts of `block` under [`LOCAL`]).
fn addresses(block: &str, objects: &[(String, Value)]) -> Vec<String> {
    objects.iter().map(|(local, _)| format!("{block}.{LOCAL}.{local}")).collect()
}

/// The tolerations of the driver's pods: `CriticalAddonsOnly` and the node groups' taints.
fn tolerations(taints: &[Value]) -> Vec<Value> {
    let mut all = vec![json!({ "key": "CriticalAddonsOnly", "operator": "Exists" })];
    for toleration in taints.iter().map(kubernetes::toleration) {
        if !all.contains(&toleration) {
            all.push(toleration);
        }
    }
    all
}

/// The driver's namespace.
fn namespace() -> Value {
    json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": NAME, "labels": kubernetes::labels(NAME) } })
}

/// The ComputeDomain CRD (`resource.nvidia.com/v1beta1`, namespaced, with a status
/// subresource the controller and the IMEX daemons write).
fn compute_domain_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": { "name": COMPUTE_DOMAIN_CRD, "labels": kubernetes::labels(NAME) },
        "spec": {
            "group": "resource.nvidia.com",
            "scope": "Namespaced",
            "names": { "kind": "ComputeDomain", "listKind": "ComputeDomainList", "plural": "computedomains", "singular": "computedomain" },
            "versions": [{
                "name": "v1beta1",
                "served": true,
                "storage": true,
                "subresources": { "status": {} },
                "schema": { "openAPIV3Schema": {
                    "description": "A set of nodes prepared to run one multi-node NVLink workload in: an IMEX domain of its own.",
                    "type": "object",
                    "properties": {
                        "apiVersion": { "type": "string" },
                        "kind": { "type": "string" },
                        "metadata": { "type": "object" },
                        "spec": compute_domain_spec(),
                        "status": compute_domain_status(),
                    },
                } },
            }],
        },
    })
}

/// A ComputeDomain's spec, fixed once made: how many nodes it expects, and the
/// ResourceClaimTemplate the controller makes for its workload's IMEX channels.
fn compute_domain_spec() -> Value {
    json!({
        "type": "object",
        "required": ["numNodes"],
        "x-kubernetes-validations": [{ "rule": "self == oldSelf", "message": "a ComputeDomain's spec is immutable" }],
        "properties": {
            "numNodes": { "type": "integer", "minimum": 0, "description": "The number of nodes (IMEX daemons) expected to join." },
            "channel": {
                "type": "object",
                "required": ["resourceClaimTemplate"],
                "properties": {
                    "resourceClaimTemplate": {
                        "type": "object",
                        "required": ["name"],
                        "properties": { "name": { "type": "string", "description": "The ResourceClaimTemplate the workload's pods claim their channel through." } },
                    },
                    "allocationMode": { "type": "string", "enum": ["Single", "All"], "default": "Single", "description": "One IMEX channel per claim, or all of them." },
                },
            },
        },
    })
}

/// A ComputeDomain's status: Ready once its nodes' IMEX daemons are, and those nodes.
fn compute_domain_status() -> Value {
    json!({
        "type": "object",
        "properties": {
            "status": { "type": "string", "enum": ["Ready", "NotReady"], "default": "NotReady" },
            "nodes": {
                "type": "array",
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["name"],
                "items": {
                    "type": "object",
                    "required": ["name"],
                    "properties": {
                        "name": { "type": "string" },
                        "ipAddress": { "type": "string" },
                        "cliqueID": { "type": "string" },
                        "index": { "type": "integer" },
                        "status": { "type": "string", "enum": ["Ready", "NotReady"] },
                    },
                },
            },
        },
    })
}

/// NVIDIA's DeviceClasses (see [`DEVICE_CLASSES`]), each selecting its devices by driver and
/// `type` attribute.
fn device_classes(api: &str) -> Vec<(String, Value)> {
    DEVICE_CLASSES
        .iter()
        .map(|&(local, name, driver, device, channel)| (local.to_owned(), device_class(api, name, driver, device, channel)))
        .collect()
}

/// DeviceClass `name` in the DRA API `api`: the devices of `driver` whose `type` is `device`
/// (and whose `id` is `channel`, when given).
fn device_class(api: &str, name: &str, driver: &str, device: &str, channel: Option<u32>) -> Value {
    let attribute = format!("device.attributes['{driver}']");
    let only = channel.map_or_else(String::new, |id| format!(" && {attribute}.id == {id}"));
    let expression = format!("device.driver == '{driver}' && {attribute}.type == '{device}'{only}");
    json!({
        "apiVersion": api,
        "kind": "DeviceClass",
        "metadata": { "name": name, "labels": kubernetes::labels(NAME) },
        "spec": { "selectors": [{ "cel": { "expression": expression } }] },
    })
}

/// The identity the controller and the kubelet plugin share: the plugin publishes the node's
/// ResourceSlices and prepares the claims allocated there; the controller turns each
/// ComputeDomain into a ResourceClaimTemplate and a DaemonSet of IMEX daemons, and labels the
/// nodes that join it.
fn driver_identity() -> Vec<(String, Value)> {
    let rules = json!([
        { "apiGroups": ["resource.k8s.io"], "resources": ["resourceslices", "resourceclaimtemplates"], "verbs": MANAGE },
        { "apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims", "deviceclasses"], "verbs": READ },
        { "apiGroups": ["resource.nvidia.com"], "resources": ["computedomains", "computedomains/status"], "verbs": ["get", "list", "watch", "update", "patch"] },
        { "apiGroups": ["apps"], "resources": ["daemonsets"], "verbs": MANAGE },
        { "apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch", "update", "patch"] },
        { "apiGroups": [""], "resources": ["pods"], "verbs": READ },
    ]);
    identity("", NAME, NAME, rules)
}

/// The IMEX daemons' identity: they read their ComputeDomain and its pods and report to its
/// status.
fn daemon_identity() -> Vec<(String, Value)> {
    let rules = json!([
        { "apiGroups": ["resource.nvidia.com"], "resources": ["computedomains", "computedomains/status"], "verbs": ["get", "list", "watch", "update", "patch"] },
        { "apiGroups": [""], "resources": ["pods"], "verbs": READ },
    ]);
    identity("daemon.", DAEMON_ACCOUNT, &format!("{NAME}-compute-domain-daemon"), rules)
}

/// ServiceAccount `account` in the driver's namespace bound to a ClusterRole `role` of `rules`:
/// parts `<prefix>service_account`, `<prefix>cluster_role`, `<prefix>cluster_role_binding`.
fn identity(prefix: &str, account: &str, role: &str, rules: Value) -> Vec<(String, Value)> {
    vec![
        (
            format!("{prefix}service_account"),
            json!({ "apiVersion": "v1", "kind": "ServiceAccount", "metadata": { "name": account, "namespace": NAME, "labels": kubernetes::labels(NAME) } }),
        ),
        (
            format!("{prefix}cluster_role"),
            json!({ "apiVersion": RBAC_API, "kind": "ClusterRole", "metadata": { "name": role, "labels": kubernetes::labels(NAME) }, "rules": rules }),
        ),
        (
            format!("{prefix}cluster_role_binding"),
            json!({ "apiVersion": RBAC_API, "kind": "ClusterRoleBinding", "metadata": { "name": role, "labels": kubernetes::labels(NAME) },
                    "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role },
                    "subjects": [{ "kind": "ServiceAccount", "name": account, "namespace": NAME }] }),
        ),
    ]
}

/// An environment variable `name` of the pod's field `path`.
fn field_env(name: &str, path: &str) -> Value {
    json!({ "name": name, "valueFrom": { "fieldRef": { "fieldPath": path } } })
}

/// `NVIDIA_VISIBLE_DEVICES=void`: the NVIDIA container runtime gives the container no GPU.
fn no_gpus() -> Value {
    json!({ "name": "NVIDIA_VISIBLE_DEVICES", "value": "void" })
}

/// The controller (one replica, anywhere): it starts the IMEX daemons of each ComputeDomain
/// with its own image.
fn controller(image: &str, tolerations: &[Value]) -> Value {
    let name = format!("{NAME}-controller");
    let pod = json!({
        "serviceAccountName": NAME,
        "priorityClassName": "system-cluster-critical",
        "tolerations": tolerations,
        "containers": [{
            "name": "compute-domain-controller",
            "image": image,
            "command": ["compute-domain-controller"],
            "env": [
                field_env("POD_NAME", "metadata.name"),
                field_env("NAMESPACE", "metadata.namespace"),
                { "name": "IMAGE_NAME", "value": image },
                no_gpus(),
            ],
            "securityContext": { "allowPrivilegeEscalation": false, "capabilities": { "drop": ["ALL"] } },
        }],
    });
    workload("Deployment", &name, json!({ "replicas": 1 }), pod)
}

/// The ComputeDomain kubelet plugin on each node of `instance_types`: registered with the
/// kubelet, it publishes the node's IMEX channels and daemon slot as devices and writes the CDI
/// specs that hand a claim's channel to its containers, from the driver on the host.
fn kubelet_plugin(image: &str, instance_types: &[String], tolerations: &[Value], driver_root: &str) -> Value {
    let name = format!("{NAME}-kubelet-plugin");
    let host_path = |volume: &str, path: &str| json!({ "name": volume, "hostPath": { "path": path } });
    let pod = json!({
        "serviceAccountName": NAME,
        "priorityClassName": "system-node-critical",
        "tolerations": tolerations,
        "affinity": { "nodeAffinity": { "requiredDuringSchedulingIgnoredDuringExecution": { "nodeSelectorTerms": [
            { "matchExpressions": [{ "key": "node.kubernetes.io/instance-type", "operator": "In", "values": instance_types }] }
        ] } } },
        "containers": [{
            "name": "compute-domains",
            "image": image,
            "command": ["compute-domain-kubelet-plugin"],
            "env": [
                { "name": "NVIDIA_DRIVER_ROOT", "value": driver_root },
                { "name": "CDI_ROOT", "value": "/var/run/cdi" },
                field_env("NODE_NAME", "spec.nodeName"),
                field_env("NAMESPACE", "metadata.namespace"),
                no_gpus(),
            ],
            "securityContext": { "privileged": true },
            "volumeMounts": [
                { "name": "plugins-registry", "mountPath": "/var/lib/kubelet/plugins_registry" },
                { "name": "plugins", "mountPath": "/var/lib/kubelet/plugins", "mountPropagation": "Bidirectional" },
                { "name": "cdi", "mountPath": "/var/run/cdi" },
                { "name": "driver-root", "mountPath": "/driver-root", "readOnly": true, "mountPropagation": "HostToContainer" },
            ],
        }],
        "volumes": [
            host_path("plugins-registry", "/var/lib/kubelet/plugins_registry"),
            host_path("plugins", "/var/lib/kubelet/plugins"),
            host_path("cdi", "/var/run/cdi"),
            host_path("driver-root", driver_root),
        ],
    });
    workload("DaemonSet", &name, json!({ "updateStrategy": { "type": "RollingUpdate" } }), pod)
}

/// A `kind` (Deployment, DaemonSet) `name` in the driver's namespace running `pod`, with the
/// rest of its `spec`.
fn workload(kind: &str, name: &str, mut spec: Value, pod: Value) -> Value {
    spec["selector"] = json!({ "matchLabels": { "app.kubernetes.io/name": name } });
    spec["template"] = json!({ "metadata": { "labels": kubernetes::labels(name) }, "spec": pod });
    json!({
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": { "name": name, "namespace": NAME, "labels": kubernetes::labels(name) },
        "spec": spec,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLUSTER: &str = "eks/${eks.gb.cluster.name}";

    fn parts() -> Vec<Part> {
        let taint = json!({ "key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE" });
        driver(CLUSTER, &["p6e-gb200.36xlarge".to_owned()], &[taint], DEFAULT_VERSION, &EKS)
    }

    fn manifest(parts: &[Part], local: &str) -> Value {
        let part = parts.iter().find(|p| p.local == format!("{LOCAL}.{local}"));
        part.unwrap_or_else(|| panic!("no part {local}")).config["manifest"].clone()
    }

    #[test]
    fn the_namespace_and_crd_come_first_and_the_workloads_last() {
        let parts = parts();
        let locals: Vec<&str> = parts.iter().map(|p| p.local.as_str()).collect();
        assert_eq!(
            locals,
            [
                "k8s.nvidia_dra.namespace",
                "k8s.nvidia_dra.crd",
                "k8s.nvidia_dra.device_class.gpu",
                "k8s.nvidia_dra.device_class.mig",
                "k8s.nvidia_dra.device_class.compute_domain_daemon",
                "k8s.nvidia_dra.device_class.compute_domain_default_channel",
                "k8s.nvidia_dra.service_account",
                "k8s.nvidia_dra.cluster_role",
                "k8s.nvidia_dra.cluster_role_binding",
                "k8s.nvidia_dra.daemon.service_account",
                "k8s.nvidia_dra.daemon.cluster_role",
                "k8s.nvidia_dra.daemon.cluster_role_binding",
                "k8s.nvidia_dra.controller",
                "k8s.nvidia_dra.kubelet_plugin",
            ]
        );
        assert!(parts.iter().all(|p| p.kind == "k8s_object" && p.config["cluster"] == CLUSTER));
        assert!(parts[..2].iter().all(|p| p.depends_on.is_empty()));
        for part in &parts[2..] {
            for first in ["eks.gb.k8s.nvidia_dra.namespace", "eks.gb.k8s.nvidia_dra.crd"] {
                assert!(part.depends_on.iter().any(|d| d == first), "{} follows {first}", part.local);
            }
        }
        let plugin = parts.last().unwrap();
        assert!(plugin.depends_on.iter().any(|d| d == "eks.gb.k8s.nvidia_dra.cluster_role_binding"));
        assert!(plugin.depends_on.iter().all(|d| !d.ends_with(".controller")));
    }

    #[test]
    fn the_crd_defines_namespaced_v1beta1_compute_domains() {
        let crd = manifest(&parts(), "crd");
        let spec = &crd["spec"];
        assert_eq!(crd["metadata"]["name"], COMPUTE_DOMAIN_CRD);
        assert_eq!(
            format!("{}.{}", spec["names"]["plural"].as_str().unwrap(), spec["group"].as_str().unwrap()),
            COMPUTE_DOMAIN_CRD
        );
        assert_eq!(
            (&spec["names"]["kind"], &spec["scope"]),
            (&json!("ComputeDomain"), &json!("Namespaced"))
        );
        let version = &spec["versions"][0];
        assert_eq!(version["name"], "v1beta1");
        let schema = &version["schema"]["openAPIV3Schema"]["properties"];
        assert_eq!(schema["spec"]["properties"]["numNodes"]["type"], "integer");
        assert_eq!(
            schema["spec"]["properties"]["channel"]["properties"]["resourceClaimTemplate"]["properties"]["name"]["type"],
            "string"
        );
        assert_eq!(schema["status"]["properties"]["status"]["enum"], json!(["Ready", "NotReady"]));
    }

    #[test]
    fn device_classes_select_by_driver_and_type() {
        let parts = parts();
        let gpu = manifest(&parts, "device_class.gpu");
        assert_eq!((&gpu["apiVersion"], &gpu["kind"]), (&json!(EKS.dra_api), &json!("DeviceClass")));
        assert_eq!(
            gpu["spec"]["selectors"][0]["cel"]["expression"],
            "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"
        );
        let channel = manifest(&parts, "device_class.compute_domain_default_channel");
        assert_eq!(channel["metadata"]["name"], "compute-domain-default-channel.nvidia.com");
        assert!(
            channel["spec"]["selectors"][0]["cel"]["expression"]
                .as_str()
                .unwrap()
                .ends_with("['compute-domain.nvidia.com'].type == 'channel' && device.attributes['compute-domain.nvidia.com'].id == 0")
        );
    }

    #[test]
    fn the_kubelet_plugin_runs_on_the_gb200_nodes_despite_their_taints() {
        let ds = manifest(&parts(), "kubelet_plugin");
        assert_eq!((&ds["kind"], &ds["metadata"]["namespace"]), (&json!("DaemonSet"), &json!(NAME)));
        let pod = &ds["spec"]["template"]["spec"];
        let terms = &pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"];
        assert_eq!(terms[0]["matchExpressions"][0]["key"], "node.kubernetes.io/instance-type");
        assert_eq!(terms[0]["matchExpressions"][0]["values"], json!(["p6e-gb200.36xlarge"]));
        let tolerations = pod["tolerations"].as_array().unwrap();
        assert!(tolerations.contains(&json!({ "key": "CriticalAddonsOnly", "operator": "Exists" })));
        assert!(tolerations.contains(&json!({ "key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule" })));
        assert_eq!(pod["priorityClassName"], "system-node-critical");
        let container = &pod["containers"][0];
        assert_eq!(container["image"], "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.8.1");
        assert_eq!(container["securityContext"]["privileged"], true);
        assert!(
            container["env"]
                .as_array()
                .unwrap()
                .contains(&json!({ "name": "NVIDIA_DRIVER_ROOT", "value": "/" }))
        );
        let paths: Vec<&str> = pod["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|v| v["hostPath"]["path"].as_str())
            .collect();
        assert_eq!(
            paths,
            ["/var/lib/kubelet/plugins_registry", "/var/lib/kubelet/plugins", "/var/run/cdi", "/"]
        );
    }

    #[test]
    fn the_controller_starts_imex_daemons_with_its_own_image() {
        let deployment = manifest(&parts(), "controller");
        assert_eq!(
            (&deployment["kind"], &deployment["spec"]["replicas"]),
            (&json!("Deployment"), &json!(1))
        );
        let container = &deployment["spec"]["template"]["spec"]["containers"][0];
        assert!(
            container["env"]
                .as_array()
                .unwrap()
                .contains(&json!({ "name": "IMAGE_NAME", "value": "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.8.1" }))
        );
        let daemons = manifest(&parts(), "daemon.service_account");
        assert_eq!(daemons["metadata"]["name"], DAEMON_ACCOUNT);
    }

    #[test]
    fn the_block_comes_from_the_cluster_reference() {
        assert_eq!(block_of(CLUSTER), "eks.gb");
    }
}
