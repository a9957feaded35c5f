//! GPUDirect-RDMA on GKE: A3 Ultra and A4 pools over forge's RDMA networks or GKE's managed
//! DRANET, and A4X pools with their workload policy and NVIDIA's DRA driver, against the
//! emulator's network profiles, machine types and GKE's refusals.
use super::Gcp;
use kube::api::{Api, DynamicObject};
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// The NeMo-on-A3-Ultra seed stack with this test's project, and an A4 pool of `a4_nodes` in
/// the same zone after it.
fn ultra_stack(gcp: &Gcp, a4_nodes: u32) -> String {
    let stack = include_str!("../../../stacks/nemo-gke-a3-ultra.toml").replace("nemo-training", &gcp.project);
    let a4 = format!("\n[gke.nemo.node_pools.a4]\nmachine_type = \"a4-highgpu-8g\"\nsize = {a4_nodes}\nzone = \"us-central1-b\"\n");
    format!("{stack}{}", if a4_nodes > 0 { a4 } else { String::new() })
}

/// A kube client of the stack's cluster `name`, as a reader.
fn cluster_client(gcp: &Gcp, name: &str) -> kube::Client {
    let cluster = gcp.located("container", &format!("us-central1/clusters/{name}"));
    let endpoint = format!("https://{}", cluster["endpoint"].as_str().unwrap());
    let mut config = kube::Config::new(endpoint.parse().unwrap());
    config.accept_invalid_certs = true;
    config.auth_info.token = Some("test-reader".to_owned().into());
    kube::Client::try_from(config).unwrap()
}

/// Every object of kind `group/version/kind` in the cluster.
async fn list(client: &kube::Client, group: &str, version: &str, kind: &str) -> Vec<DynamicObject> {
    let gvk = kube::api::GroupVersionKind::gvk(group, version, kind);
    let (resource, _) = kube::discovery::pinned_kind(client, &gvk).await.unwrap();
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    api.list(&Default::default()).await.unwrap().items
}

/// A DaemonSet of kube-system, as JSON.
async fn daemon_set(client: &kube::Client, name: &str) -> Value {
    let api: Api<k8s_openapi::api::apps::v1::DaemonSet> = Api::namespaced(client.clone(), "kube-system");
    serde_json::to_value(api.get(name).await.unwrap()).unwrap()
}

/// The values of the first node affinity term of a DaemonSet's pods.
fn affinity_values(set: &Value) -> &Value {
    &set["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]["matchExpressions"]
        [0]["values"]
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

/// A GKE cluster with an A3 Ultra pool (the seed stack's, on its reservation) and an A4 pool
/// comes up ready over RDMA networks: one RDMA VPC in the pools' zone made with the zone's
/// `vpc-roce` profile (MTU 8896, 8 subnetworks), the second gVNIC network, each pool's 9
/// additional networks and GKE's RDMA strategy, `gvnic-1` and `rdma-0`…`rdma-7` with their
/// device modes, the gIB installer on both GPU types, 8 GPUs a node; then a no-op plan and
/// clean drift, and destroy leaves nothing.
#[test]
fn a3_ultra_and_a4_pools_come_up_over_rdma_networks() {
    let gcp = Gcp::new();
    gcp.write("ultra.toml", &ultra_stack(&gcp, 2));
    let stderr = gcp.ok(&["up", "ultra.toml", "--yes"]);
    assert!(stderr.contains("node pool `a3u`: 4 nodes, each nvidia.com/gpu 8"), "{stderr}");
    assert!(stderr.contains("node pool `a4`: 2 nodes, each nvidia.com/gpu 8"), "{stderr}");

    let (_, rdma) = gcp.compute("GET", "global/networks/nemo-a3u-rdma-us-central1-b", Value::Null);
    assert_eq!(
        rdma["networkProfile"],
        format!(
            "https://www.googleapis.com/compute/v1/projects/{}/global/networkProfiles/us-central1-b-vpc-roce",
            gcp.project
        ),
        "{rdma:#}"
    );
    assert_eq!(rdma["mtu"], 8896);
    let subnets = gcp.names("regions/us-central1/subnetworks");
    let rdma_subnets: Vec<&String> = subnets.iter().filter(|s| s.starts_with("nemo-a3u-rdma-")).collect();
    assert_eq!(rdma_subnets.len(), 8, "{subnets:?}");
    let (_, first) = gcp.compute("GET", "regions/us-central1/subnetworks/nemo-a3u-rdma-us-central1-b-0", Value::Null);
    assert_eq!(first["ipCidrRange"], "192.168.128.0/20");
    let (_, gvnic) = gcp.compute("GET", "global/networks/nemo-a3u-gvnic", Value::Null);
    assert_eq!(gvnic["mtu"], 8896);
    assert!(gvnic.get("networkProfile").is_none(), "the gVNIC network is a plain VPC: {gvnic:#}");

    for (pool, accelerator) in [("a3u", "nvidia-h200-141gb"), ("a4", "nvidia-b200")] {
        let live = gcp.located("container", &format!("us-central1/clusters/nemo-a3u/nodePools/{pool}"));
        let extra = live["networkConfig"]["additionalNodeNetworkConfigs"].as_array().unwrap();
        assert_eq!(extra.len(), 9, "{pool}: {extra:?}");
        assert_eq!(
            extra[0],
            json!({ "network": "nemo-a3u-gvnic", "subnetwork": "nemo-a3u-gvnic-subnet" })
        );
        assert_eq!(
            extra[8],
            json!({ "network": "nemo-a3u-rdma-us-central1-b", "subnetwork": "nemo-a3u-rdma-us-central1-b-7" })
        );
        assert_eq!(live["config"]["gpuDirectConfig"]["gpuDirectStrategy"], "RDMA", "{pool}");
        assert_eq!(live["config"]["gvnic"]["enabled"], true);
        assert_eq!(live["config"]["accelerators"][0]["acceleratorType"], accelerator);
    }
    let a3u = gcp.located("container", "us-central1/clusters/nemo-a3u/nodePools/a3u");
    assert_eq!(a3u["config"]["reservationAffinity"]["values"], json!(["nemo-a3u-reservation"]));
    assert_eq!(a3u["config"]["diskType"], "hyperdisk-balanced");
    assert!(a3u.get("placementPolicy").is_none(), "the reservation places it: {a3u:#}");
    let a4 = gcp.located("container", "us-central1/clusters/nemo-a3u/nodePools/a4");
    assert_eq!(a4["placementPolicy"]["type"], "COMPACT");
    assert_eq!(a4["config"]["diskType"], "hyperdisk-balanced");
    let cluster = gcp.located("container", "us-central1/clusters/nemo-a3u");
    assert_eq!(cluster["networkConfig"]["enableMultiNetworking"], true);

    runtime().block_on(async {
        let client = cluster_client(&gcp, "nemo-a3u");
        let params = list(&client, "networking.gke.io", "v1", "GKENetworkParamSet").await;
        let modes: BTreeMap<&str, (&Value, &Value)> = params
            .iter()
            .map(|p| {
                (
                    p.metadata.name.as_deref().unwrap(),
                    (&p.data["spec"]["deviceMode"], &p.data["spec"]["vpcSubnet"]),
                )
            })
            .collect();
        assert_eq!(modes.len(), 9, "{modes:?}");
        assert_eq!(modes["gvnic-1"], (&json!("NetDevice"), &json!("nemo-a3u-gvnic-subnet")));
        for i in 0..8 {
            let subnet = json!(format!("nemo-a3u-rdma-us-central1-b-{i}"));
            assert_eq!(modes[format!("rdma-{i}").as_str()], (&json!("RDMA"), &subnet));
        }
        assert_eq!(list(&client, "networking.gke.io", "v1", "Network").await.len(), 9);
        let installer = daemon_set(&client, "nccl-rdma-installer").await;
        assert_eq!(affinity_values(&installer), &json!(["nvidia-h200-141gb", "nvidia-b200"]));
        let image = &installer["spec"]["template"]["spec"]["initContainers"][0]["image"];
        assert_eq!(image, "us-docker.pkg.dev/gce-ai-infra/gpudirect-gib/nccl-plugin-gib:v1.1.0");
    });

    let (code, stderr) = gcp.forge(&["plan", "ultra.toml", "--detailed-exitcode"]);
    assert_eq!(code, 0, "{stderr}");
    let (code, report) = gcp.drift("ultra.toml");
    assert_eq!(code, 0, "{report:#}");
    gcp.ok(&["destroy", "ultra.toml", "--yes"]);
    let all = gcp.everything();
    assert!(all.values().all(Vec::is_empty), "{all:?}");
}

/// With `rdma = "dranet"` GKE's managed DRANET wires the NICs: no RDMA networks of forge's,
/// the pools' `acceleratorNetworkProfile` is `auto` with no additional networks, their nodes
/// carry GKE's DRANET label, the gIB installer still comes, and a re-plan changes nothing.
#[test]
fn managed_dranet_pools_need_no_rdma_networks() {
    let gcp = Gcp::new();
    let stack = ultra_stack(&gcp, 1)
        .replace("# rdma = \"dranet\"", "rdma = \"dranet\"")
        .replace("size = 1\nzone", "size = 1\nrdma = \"dranet\"\nzone");
    gcp.write("dranet.toml", &stack);
    let stderr = gcp.ok(&["up", "dranet.toml", "--yes"]);
    assert!(stderr.contains("node pool `a3u`: 4 nodes, each nvidia.com/gpu 8"), "{stderr}");
    let networks = gcp.names("global/networks");
    assert_eq!(networks, ["nemo-a3u"], "only the cluster's own VPC");
    for pool in ["a3u", "a4"] {
        let live = gcp.located("container", &format!("us-central1/clusters/nemo-a3u/nodePools/{pool}"));
        assert_eq!(live["networkConfig"]["acceleratorNetworkProfile"], "auto", "{pool}");
        assert!(live["networkConfig"].get("additionalNodeNetworkConfigs").is_none(), "{live:#}");
    }
    let cluster = gcp.located("container", "us-central1/clusters/nemo-a3u");
    assert_ne!(
        cluster["networkConfig"]["enableMultiNetworking"], true,
        "DRANET needs no multi-networking"
    );
    runtime().block_on(async {
        let client = cluster_client(&gcp, "nemo-a3u");
        let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(client.clone());
        let dranet = nodes
            .list(&kube::api::ListParams::default().labels("cloud.google.com/gke-networking-dra-driver=true"))
            .await
            .unwrap();
        assert_eq!(dranet.items.len(), 5, "the a3u and a4 nodes");
        assert!(daemon_set(&client, "nccl-rdma-installer").await["metadata"]["name"].is_string());
    });
    let (code, stderr) = gcp.forge(&["plan", "dranet.toml", "--detailed-exitcode"]);
    assert_eq!(code, 0, "{stderr}");
    let (code, report) = gcp.drift("dranet.toml");
    assert_eq!(code, 0, "{report:#}");
    gcp.ok(&["destroy", "dranet.toml", "--yes"]);
    assert!(gcp.everything().values().all(Vec::is_empty));
}

const A4X: &str = r#"
[stack]
name = "gb200"

[gcp]
project = "PROJECT"
region = "us-central1"

[gcp_vpc.main]
cidr = "10.0.0.0/20"
pods_cidr = "10.4.0.0/14"
services_cidr = "10.8.0.0/20"

[gke.rack]
vpc = "gcp_vpc.main"
version = "1.34"

[gke.rack.node_pools.system]
machine_type = "e2-standard-4"
size = 1

[gke.rack.node_pools.gb200]
machine_type = "a4x-highgpu-4g"
size = 18
zone = "us-central1-b"
"#;

/// An A4X pool of one NVL72 rack (18 machines) gets the cluster's workload policy (accelerator
/// topology 1x72) as its placement, managed DRANET by default, the arm64 gIB installer and
/// NVIDIA's DRA driver with the ComputeDomain CRD and GKE's driver root; 4 GPUs a node; a
/// re-plan changes nothing, and destroy takes the policy after the pool.
#[test]
fn an_a4x_pool_gets_its_workload_policy_and_the_dra_driver() {
    let gcp = Gcp::new();
    gcp.write("a4x.toml", A4X);
    let stderr = gcp.ok(&["up", "a4x.toml", "--yes"]);
    assert!(stderr.contains("node pool `gb200`: 18 nodes, each nvidia.com/gpu 4"), "{stderr}");
    let (status, policy) = gcp.compute("GET", "regions/us-central1/resourcePolicies/rack-nvl72", Value::Null);
    assert_eq!(status, 200, "{policy}");
    assert_eq!(
        policy["workloadPolicy"],
        json!({ "type": "HIGH_THROUGHPUT", "acceleratorTopology": "1x72" })
    );
    let pool = gcp.located("container", "us-central1/clusters/rack/nodePools/gb200");
    assert_eq!(pool["placementPolicy"]["policyName"], "rack-nvl72");
    assert_eq!(pool["networkConfig"]["acceleratorNetworkProfile"], "auto");
    assert_eq!(pool["config"]["accelerators"][0]["acceleratorType"], "nvidia-gb200");
    assert!(
        pool["config"].get("gpuDirectConfig").is_none(),
        "GKE's RDMA strategy is A3 Ultra's and A4's"
    );
    runtime().block_on(async {
        let client = cluster_client(&gcp, "rack");
        let installer = daemon_set(&client, "nccl-rdma-installer-arm64").await;
        assert_eq!(affinity_values(&installer), &json!(["nvidia-gb200"]));
        assert_eq!(installer["spec"]["template"]["spec"]["nodeSelector"]["kubernetes.io/arch"], "arm64");
        let api: Api<k8s_openapi::api::apps::v1::DaemonSet> = Api::namespaced(client.clone(), "nvidia-dra-driver-gpu");
        let plugin = serde_json::to_value(api.get("nvidia-dra-driver-gpu-kubelet-plugin").await.unwrap()).unwrap();
        let pod = &plugin["spec"]["template"]["spec"];
        assert_eq!(affinity_values(&plugin), &json!(["a4x-highgpu-4g"]));
        assert!(
            pod["containers"][0]["env"]
                .as_array()
                .unwrap()
                .contains(&json!({ "name": "NVIDIA_DRIVER_ROOT", "value": "/home/kubernetes/bin/nvidia" })),
            "{pod:#}"
        );
        for taint in ["nvidia.com/gpu", "kubernetes.io/arch"] {
            assert!(
                pod["tolerations"].as_array().unwrap().iter().any(|t| t["key"] == taint),
                "GKE's {taint} taint is tolerated: {pod:#}"
            );
        }
        let classes = list(&client, "resource.k8s.io", "v1", "DeviceClass").await;
        assert!(
            classes
                .iter()
                .any(|c| c.metadata.name.as_deref() == Some("compute-domain-default-channel.nvidia.com")),
            "NVIDIA's DeviceClasses in the DRA API GKE 1.34 serves"
        );
        let crds = list(&client, "apiextensions.k8s.io", "v1", "CustomResourceDefinition").await;
        assert!(
            crds.iter()
                .any(|c| c.metadata.name.as_deref() == Some("computedomains.resource.nvidia.com"))
        );
    });
    let (code, stderr) = gcp.forge(&["plan", "a4x.toml", "--detailed-exitcode"]);
    assert_eq!(code, 0, "{stderr}");
    gcp.ok(&["destroy", "a4x.toml", "--yes"]);
    assert!(gcp.everything().values().all(Vec::is_empty));
    assert!(gcp.names("regions/us-central1/resourcePolicies").is_empty());
}

/// SIGKILL at random points of the A3 Ultra stack's `up`, then a rerun: exactly one of each
/// network, subnetwork, rule, cluster, pool and share.
#[test]
fn sigkill_during_an_rdma_up_then_rerun_leaves_exactly_one_of_each() {
    let gcp = Gcp::new();
    gcp.write("ultra.toml", &ultra_stack(&gcp, 0));
    let mut moments = crate::support::Moments::new(0x5eed_a301);
    for _ in 0..5 {
        let child = crate::support::quiet(&mut gcp.command(&["up", "ultra.toml", "--yes"]));
        crate::support::kill_after(child, moments.next(200, 3000));
    }
    gcp.ok(&["up", "ultra.toml", "--yes"]);
    let counts: BTreeMap<&str, usize> = gcp.everything().iter().map(|(k, v)| (*k, v.len())).collect();
    assert_eq!(
        counts,
        BTreeMap::from([
            ("clusters", 1),
            ("global/firewalls", 2),
            ("global/networks", 3),
            ("instances", 1),
            ("regions/us-central1/routers", 1),
            ("regions/us-central1/subnetworks", 10),
        ]),
        "the VPC's, the gVNIC network's and the RDMA VPC's 8: {:?}",
        gcp.everything()
    );
    let pools = gcp.located("container", "us-central1/clusters/nemo-a3u/nodePools");
    assert_eq!(pools["nodePools"].as_array().unwrap().len(), 2, "{pools:#}");
    let (code, stderr) = gcp.forge(&["plan", "ultra.toml", "--detailed-exitcode"]);
    assert_eq!(code, 0, "{stderr}");
    gcp.ok(&["destroy", "ultra.toml", "--yes"]);
    assert!(gcp.everything().values().all(Vec::is_empty));
}
