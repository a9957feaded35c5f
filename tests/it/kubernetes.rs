//! Workload-ready clusters end to end: the real `forge` binary against the emulators' EKS,
//! whose clusters each run an emulated Kubernetes API server (TLS with the cluster's own CA,
//! discovery, server-side apply, CRDs, webhooks, Nodes whose devices the device plugins
//! advertise). forge reaches it only as it reaches a real cluster: the endpoint and CA from
//! DescribeCluster and an EKS token it signs itself. The tests read the API server with kube-rs
//! (and the machine's kubectl where there is one), as an operator would.
use assert_cmd::Command;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Service};
use kube::api::{Api, DeleteParams, PostParams};
use std::path::PathBuf;

/// One test's world: a fresh account on the emulator and a working directory.
struct World {
    account: String,
    dir: tempfile::TempDir,
}

/// At the end of a test that passed so far, the account's requests were all faithful.
impl Drop for World {
    fn drop(&mut self) {
        crate::support::assert_faithful(&self.account);
    }
}

impl World {
    fn new() -> Self {
        World {
            account: crate::support::fresh_account(),
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    fn forge(&self, args: &[&str]) -> (i32, String, String) {
        let out = Command::from_std(crate::support::aws_forge(self.dir.path(), &self.account, args))
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    fn ok(&self, args: &[&str]) -> String {
        let (code, _, stderr) = self.forge(args);
        assert_eq!(code, 0, "forge {args:?}:\n{stderr}");
        stderr
    }

    /// A client of cluster `name`'s API server, at the endpoint EKS reports for it.
    async fn cluster(&self, file: &str, block: &str) -> kube::Client {
        let (_, endpoint, stderr) = self.forge(&["output", file, &format!("{block}.endpoint")]);
        let endpoint = endpoint.trim();
        assert!(endpoint.starts_with("https://"), "no endpoint for {block}: {stderr}");
        let mut config = kube::Config::new(endpoint.parse().unwrap());
        config.accept_invalid_certs = true;
        config.auth_info.token = Some("test-reader".to_owned().into());
        kube::Client::try_from(config).unwrap()
    }

    /// The SDK configuration of this test's account on the emulator.
    fn sdk_config(&self) -> aws_config::SdkConfig {
        let creds = aws_sdk_ec2::config::Credentials::new(&self.account, "secret", None, None, "test");
        aws_config::SdkConfig::builder()
            .behavior_version(aws_config::BehaviorVersion::latest())
            .region(aws_config::Region::new("us-west-2"))
            .endpoint_url(crate::support::launcher_url())
            .credentials_provider(aws_sdk_ec2::config::SharedCredentialsProvider::new(creds))
            .build()
    }

    /// What cluster `name`'s API server answered: (method, path, bearer token).
    fn requests(&self, name: &str) -> Vec<serde_json::Value> {
        let (_, body) = crate::support::request(
            "GET",
            &format!("/_forge/kubernetes/requests?cluster=eks/{}/us-west-2/{name}", self.account),
            "",
        );
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"))
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

const NEMO: &str = include_str!("../../stacks/nemo-eks-p5.toml");
const BERT: &str = include_str!("../../stacks/bert-eks-trn1.toml");

#[test]
fn nemo_on_p5_comes_up_with_its_device_plugins_and_claim_and_waits_until_ready() {
    let w = World::new();
    w.write("nemo.toml", NEMO);
    let stderr = w.ok(&["up", "nemo.toml", "--yes"]);
    assert!(
        stderr.contains("Ready: eks/nemo: node group `gpu`: 2 nodes, each nvidia.com/gpu 8, vpc.amazonaws.com/efa 32"),
        "{stderr}"
    );
    assert!(stderr.contains("claim default/data-pvc Bound"), "{stderr}");
    runtime().block_on(async {
        let client = w.cluster("nemo.toml", "eks.nemo").await;
        let daemonsets: Api<DaemonSet> = Api::namespaced(client.clone(), "kube-system");
        let nvidia = daemonsets.get("nvidia-device-plugin").await.unwrap();
        let pod = nvidia.spec.template.spec.unwrap();
        assert_eq!(pod.containers[0].image.as_deref(), Some("nvcr.io/nvidia/k8s-device-plugin:v0.20.0"));
        assert!(
            pod.tolerations.unwrap().iter().any(|t| t.key.as_deref() == Some("nvidia.com/gpu")),
            "the GPU group's taint is tolerated"
        );
        let efa = daemonsets.get("aws-efa-k8s-device-plugin").await.unwrap();
        let pod = efa.spec.template.spec.unwrap();
        assert_eq!(
            pod.containers[0].image.as_deref(),
            Some("602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/aws-efa-k8s-device-plugin:v0.5.6")
        );
        assert_eq!(pod.host_network, Some(true));
        let fields = efa.metadata.managed_fields.unwrap();
        assert!(
            fields
                .iter()
                .any(|f| f.manager.as_deref() == Some("forge") && f.operation.as_deref() == Some("Apply"))
        );
        let claims: Api<PersistentVolumeClaim> = Api::namespaced(client, "default");
        let claim = claims.get("data-pvc").await.unwrap();
        assert_eq!(claim.status.unwrap().phase.as_deref(), Some("Bound"));
        assert_eq!(claim.spec.unwrap().volume_name.as_deref(), Some("default-data-pvc"));
    });
    // Every call carried an EKS token forge signed: a presigned STS GetCallerIdentity URL that
    // signs the cluster's name in `x-k8s-aws-id`.
    let requests = w.requests("nemo");
    assert!(requests.iter().any(|r| r["method"] == "PATCH"), "{requests:?}");
    use base64::Engine;
    for r in requests.iter().filter(|r| r["token"] != "test-reader") {
        let token = r["token"].as_str().unwrap();
        let url = token
            .strip_prefix("k8s-aws-v1.")
            .unwrap_or_else(|| panic!("not an EKS token: {token}"));
        let url = String::from_utf8(base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(url).unwrap()).unwrap();
        assert!(
            url.starts_with("https://sts.us-west-2.amazonaws.com/?Action=GetCallerIdentity"),
            "{url}"
        );
        assert!(url.contains("X-Amz-SignedHeaders=host%3Bx-k8s-aws-id"), "{url}");
        assert!(url.contains("X-Amz-Expires=60"), "{url}");
    }
    // Nothing changes on a second look; the plan names the objects as Kubernetes does.
    let (code, _, stderr) = w.forge(&["plan", "nemo.toml", "--detailed-exitcode"]);
    assert_eq!(code, 0, "{stderr}");
    let (_, _, plan) = w.forge(&["plan", "nemo.toml", "--refresh=false", "--destroy"]);
    assert!(plan.contains("(k8s: DaemonSet kube-system/nvidia-device-plugin)"), "{plan}");
    w.ok(&["destroy", "nemo.toml", "--yes"]);
}

#[test]
fn bert_on_trn1_gets_the_neuron_plugin_with_its_rbac_and_efa_and_its_claim_a_namespace() {
    let w = World::new();
    // The claim in a namespace of its own, which the cluster block makes.
    let stack = BERT.replace(
        "clients = [\"eks.bert\"]",
        "clients = [\"eks.bert\"]\nkubernetes = { claim = \"datasets\", namespace = \"training\" }",
    );
    assert_ne!(stack, BERT);
    w.write("bert.toml", &stack);
    // A saved plan waits for readiness as `up FILE` does.
    w.ok(&["plan", "bert.toml", "--out", "bert.plan"]);
    let stderr = w.ok(&["up", "bert.plan", "--yes"]);
    assert!(
        stderr.contains("node group `trn`: 2 nodes, each aws.amazon.com/neuron 16, vpc.amazonaws.com/efa 8"),
        "{stderr}"
    );
    assert!(stderr.contains("claim training/datasets Bound"), "{stderr}");
    runtime().block_on(async {
        let client = w.cluster("bert.toml", "eks.bert").await;
        let daemonsets: Api<DaemonSet> = Api::namespaced(client.clone(), "kube-system");
        let names: Vec<String> = daemonsets
            .list(&Default::default())
            .await
            .unwrap()
            .into_iter()
            .filter_map(|d| d.metadata.name)
            .collect();
        assert_eq!(
            names,
            ["aws-efa-k8s-device-plugin", "neuron-device-plugin"],
            "no NVIDIA plugin on Trainium"
        );
        let bindings: Api<k8s_openapi::api::rbac::v1::ClusterRoleBinding> = Api::all(client.clone());
        assert!(bindings.get_opt("neuron-device-plugin").await.unwrap().is_some());
        let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client);
        assert!(namespaces.get_opt("training").await.unwrap().is_some());
    });
    w.ok(&["destroy", "bert.toml", "--yes"]);
}

#[test]
fn drift_sees_a_deleted_or_changed_daemonset_and_up_brings_it_back_and_a_removed_plugin_is_pruned() {
    let w = World::new();
    w.write("nemo.toml", NEMO);
    w.ok(&["up", "nemo.toml", "--yes", "--no-wait-ready"]);
    // One runtime for the client: it cannot outlive the runtime it was made in.
    let rt = runtime();
    let daemonsets = rt.block_on(async { Api::<DaemonSet>::namespaced(w.cluster("nemo.toml", "eks.nemo").await, "kube-system") });
    rt.block_on(daemonsets.delete("nvidia-device-plugin", &DeleteParams::default()))
        .unwrap();
    let (code, report, stderr) = w.forge(&["drift", "nemo.toml", "--json"]);
    assert_eq!(code, 2, "{stderr}");
    let report: serde_json::Value = serde_json::from_str(&report).unwrap();
    let deleted = report.to_string();
    assert!(deleted.contains("eks.nemo.k8s.nvidia_device_plugin.daemonset"), "{deleted}");
    w.ok(&["up", "nemo.toml", "--yes", "--no-wait-ready"]);
    assert!(rt.block_on(daemonsets.get_opt("nvidia-device-plugin")).unwrap().is_some());

    // Someone swaps the plugin's image: drift names the field, and `up` puts forge's back.
    let swap = serde_json::json!({ "spec": { "template": { "spec": { "containers": [{ "name": "nvidia-device-plugin", "image": "example.com/other:v1" }] } } } });
    rt.block_on(daemonsets.patch(
        "nvidia-device-plugin",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(&swap),
    ))
    .unwrap();
    let (code, report, _) = w.forge(&["drift", "nemo.toml", "--json"]);
    assert_eq!(code, 2);
    assert!(report.contains("manifest.spec.template.spec.containers.0.image"), "{report}");
    assert!(report.contains("example.com/other:v1"), "{report}");
    w.ok(&["up", "nemo.toml", "--yes", "--no-wait-ready"]);
    let image = rt
        .block_on(daemonsets.get("nvidia-device-plugin"))
        .unwrap()
        .spec
        .template
        .spec
        .unwrap()
        .containers[0]
        .image
        .clone();
    assert_eq!(image.as_deref(), Some("nvcr.io/nvidia/k8s-device-plugin:v0.20.0"));

    // Turning the EFA plugin off removes its DaemonSet.
    w.write(
        "nemo.toml",
        &NEMO.replace(
            "endpoint = \"public\"",
            "endpoint = \"public\"\nkubernetes = { efa_device_plugin = false }",
        ),
    );
    let (_, _, plan) = w.forge(&["plan", "nemo.toml"]);
    assert!(
        plan.contains("- eks.nemo.k8s.efa_device_plugin.daemonset (k8s: DaemonSet kube-system/aws-efa-k8s-device-plugin)"),
        "{plan}"
    );
    w.ok(&["up", "nemo.toml", "--yes", "--no-wait-ready"]);
    assert!(rt.block_on(daemonsets.get_opt("aws-efa-k8s-device-plugin")).unwrap().is_none());
    w.ok(&["destroy", "nemo.toml", "--yes"]);
}

/// A small cluster and a manifest with a CRD, a resource of it, and a ConfigMap that reads a
/// forge output.
const MANIFEST_STACK: &str = r#"
[stack]
name = "queues"

[aws]
region = "us-west-2"

[vpc.main]
cidr = "10.0.0.0/16"
zones = ["us-west-2a", "us-west-2b"]
nat = "none"

[eks.train]
vpc = "vpc.main"

[eks.train.nodegroups.system]
instance_type = "c5.2xlarge"
size = 1

[k8s_manifest.queue]
cluster = "eks.train"
file = "queue.yaml"
"#;

const QUEUE_YAML: &str = r"
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata:
  name: gpu-queue
spec:
  namespaceSelector: {}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: clusterqueues.kueue.x-k8s.io
spec:
  group: kueue.x-k8s.io
  scope: Cluster
  names: { plural: clusterqueues, singular: clusterqueue, kind: ClusterQueue }
  versions:
    - name: v1beta1
      served: true
      storage: true
      schema: { openAPIV3Schema: { type: object, x-kubernetes-preserve-unknown-fields: true } }
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: cluster-facts
  namespace: default
data:
  cluster: ${eks.train.name}
";

#[test]
fn a_crd_and_its_resources_in_one_up_never_race_and_a_webhook_not_ready_is_waited_for() {
    let w = World::new();
    w.write("queues.toml", MANIFEST_STACK);
    w.write("queue.yaml", QUEUE_YAML);
    // The cluster first, so the webhook can be made unavailable before the manifest goes in.
    w.write(
        "queues.toml",
        &MANIFEST_STACK.replace("[k8s_manifest.queue]\ncluster = \"eks.train\"\nfile = \"queue.yaml\"\n", ""),
    );
    w.ok(&["up", "queues.toml", "--yes"]);
    w.write("queues.toml", MANIFEST_STACK);
    let (status, body) = crate::support::request(
        "POST",
        "/_forge/kubernetes/webhook",
        &format!(
            r#"{{"cluster": "eks/{}/us-west-2/train", "group": "kueue.x-k8s.io", "seconds": 3}}"#,
            w.account
        ),
    );
    assert_eq!(status, 200, "{body}");
    let (_, _, plan) = w.forge(&["plan", "queues.toml"]);
    assert!(
        plan.contains("+ k8s_manifest.queue.customresourcedefinition.clusterqueues_kueue_x_k8s_io"),
        "{plan}"
    );
    w.ok(&["up", "queues.toml", "--yes"]);
    let requests = w.requests("train");
    let applies = requests
        .iter()
        .filter(|r| r["method"] == "PATCH" && r["path"].as_str().unwrap_or("").contains("clusterqueues/gpu-queue"))
        .count();
    assert!(
        applies >= 2,
        "the resource was applied again once its webhook answered: {requests:?}"
    );
    runtime().block_on(async {
        let client = w.cluster("queues.toml", "eks.train").await;
        let gvk = kube::api::GroupVersionKind::gvk("kueue.x-k8s.io", "v1beta1", "ClusterQueue");
        let (resource, _) = kube::discovery::pinned_kind(&client, &gvk).await.unwrap();
        let queues: Api<kube::api::DynamicObject> = Api::all_with(client.clone(), &resource);
        assert!(queues.get_opt("gpu-queue").await.unwrap().is_some());
        let maps: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client, "default");
        let facts = maps.get("cluster-facts").await.unwrap();
        assert_eq!(facts.data.unwrap()["cluster"], "train", "the manifest read a forge output");
    });
    w.ok(&["destroy", "queues.toml", "--yes"]);
}

#[test]
fn a_load_balancer_service_made_outside_forge_does_not_block_destroy() {
    let w = World::new();
    w.write("nemo.toml", NEMO);
    w.ok(&["up", "nemo.toml", "--yes", "--no-wait-ready"]);
    runtime().block_on(async {
        let services: Api<Service> = Api::namespaced(w.cluster("nemo.toml", "eks.nemo").await, "default");
        let service: Service = serde_json::from_value(serde_json::json!({
            "metadata": { "name": "inference" },
            "spec": { "type": "LoadBalancer", "ports": [{ "port": 80, "targetPort": 8080 }] },
        }))
        .unwrap();
        services.create(&PostParams::default(), &service).await.unwrap();
    });
    // Left behind, its load balancer would keep its security group in the VPC (the emulator
    // models that): the VPC could not be deleted.
    let stderr = w.ok(&["destroy", "nemo.toml", "--yes"]);
    assert!(stderr.contains("eks.nemo.k8s.teardown: deleted"), "{stderr}");
}

#[test]
fn a_group_that_never_reports_its_devices_fails_readiness_naming_the_node() {
    let w = World::new();
    // A Neuron plugin asked for on p5 nodes, which have no Neuron devices to advertise.
    let stack = NEMO
        .replace(
            "endpoint = \"public\"",
            "endpoint = \"public\"\nkubernetes = { wait_ready = \"2s\" }",
        )
        .replace("volume_gib = 500", "volume_gib = 500\nkubernetes = { neuron_device_plugin = true }");
    w.write("nemo.toml", &stack);
    let (code, _, stderr) = w.forge(&["up", "nemo.toml", "--yes"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("of group `gpu` reports aws.amazon.com/neuron 0 (wants at least 1)"),
        "{stderr}"
    );
    assert!(
        stderr.contains("--no-wait-ready") || stderr.contains("run `forge up` again"),
        "{stderr}"
    );
    w.ok(&["destroy", "nemo.toml", "--yes"]);
}

#[test]
fn the_machines_kubectl_sees_what_forge_applied() {
    if std::process::Command::new("kubectl")
        .arg("version")
        .arg("--client")
        .output()
        .is_err()
    {
        eprintln!("no kubectl on this machine: skipped");
        return;
    }
    let w = World::new();
    w.write("nemo.toml", NEMO);
    w.ok(&["up", "nemo.toml", "--yes", "--no-wait-ready"]);
    let (_, endpoint, _) = w.forge(&["output", "nemo.toml", "endpoint"]);
    let out = std::process::Command::new("kubectl")
        .args(["--server", endpoint.trim(), "--insecure-skip-tls-verify", "--token", "kubectl"])
        .args(["get", "daemonsets,pv,pvc", "--all-namespaces", "-o", "name"])
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    for name in [
        "daemonset.apps/nvidia-device-plugin",
        "daemonset.apps/aws-efa-k8s-device-plugin",
        "persistentvolume/default-data-pvc",
        "persistentvolumeclaim/data-pvc",
    ] {
        assert!(listed.contains(name), "{name} in {listed}");
    }
    w.ok(&["destroy", "nemo.toml", "--yes"]);
}

#[test]
fn a_run_killed_after_its_apply_took_effect_is_adopted_by_the_next() {
    let w = World::new();
    let without = MANIFEST_STACK.replace("[k8s_manifest.queue]\ncluster = \"eks.train\"\nfile = \"queue.yaml\"\n", "");
    w.write("queues.toml", &without);
    w.ok(&["up", "queues.toml", "--yes"]);
    let facts_only =
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cluster-facts\n  namespace: default\ndata:\n  cluster: ${eks.train.name}\n";
    w.write("queue.yaml", facts_only);
    w.write("queues.toml", MANIFEST_STACK);
    let cluster = format!("eks/{}/us-west-2/train", w.account);
    let stall = |seconds: u32| {
        let body = format!(r#"{{"cluster": "{cluster}", "path": "configmaps/cluster-facts", "seconds": {seconds}}}"#);
        assert_eq!(crate::support::request("POST", "/_forge/kubernetes/stall", &body).0, 200);
    };
    // The apply takes effect, its answer is held back, and forge is killed meanwhile.
    stall(60);
    let mut run = crate::support::aws_forge(w.dir.path(), &w.account, &["up", "queues.toml", "--yes"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while !w
        .requests("train")
        .iter()
        .any(|r| r["method"] == "PATCH" && r["path"].as_str().unwrap_or("").contains("configmaps/cluster-facts"))
    {
        assert!(started.elapsed().as_secs() < 60, "forge never applied the config map");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    run.kill().unwrap();
    run.wait().unwrap();
    stall(0);
    // The next run finds the object its interrupted create made (its token) and adopts it,
    // instead of refusing an object it does not know.
    let stderr = w.ok(&["up", "queues.toml", "--yes"]);
    assert!(!stderr.contains("already exists"), "{stderr}");
    let (code, _, stderr) = w.forge(&["plan", "queues.toml", "--detailed-exitcode"]);
    assert_eq!(code, 0, "{stderr}");
    let (_, list, _) = w.forge(&["state", "list", "queues.toml"]);
    assert!(list.contains("k8s_manifest.queue.configmap.default.cluster_facts"), "{list}");
    w.ok(&["destroy", "queues.toml", "--yes"]);
}

/// A Kubeflow training operator as `kubectl kustomize` renders the standalone overlay: its
/// namespace, CRDs for its job kinds (MPIJob among them) and its controller.
const TRAINING_OPERATOR: &str = "\
apiVersion: v1
kind: Namespace
metadata: {name: kubeflow}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: mpijobs.kubeflow.org}
spec: {group: kubeflow.org, scope: Namespaced, names: {kind: MPIJob, plural: mpijobs}, versions: [{name: v1, served: true, storage: true}]}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: pytorchjobs.kubeflow.org}
spec: {group: kubeflow.org, scope: Namespaced, names: {kind: PyTorchJob, plural: pytorchjobs}, versions: [{name: v1, served: true, storage: true}]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: training-operator, namespace: kubeflow}
spec:
  selector: {matchLabels: {control-plane: kubeflow-training-operator}}
  template:
    metadata: {labels: {control-plane: kubeflow-training-operator}}
    spec:
      containers:
      - {name: training-operator, image: kubeflow/training-operator:v1-855e096, args: [--zap-log-level=info]}
";

/// Serves `text` on the emulator's bundle mirror as `https://<path>`.
fn mirror(path: &str, text: &str) {
    let body = serde_json::json!({ "path": path, "text": text }).to_string();
    let (status, answer) = crate::support::request("POST", "/_forge/bundles", &body);
    assert_eq!(status, 200, "{answer}");
}

#[test]
fn bert_on_trn1_gets_a_queue_of_its_neuron_devices_and_both_operators_without_the_mpijobs_clash() {
    let w = World::new();
    let host = format!("artifacts.{}.example/training-operator-v1.9.3.yaml", w.account);
    mirror(&host, TRAINING_OPERATOR);
    let stack = BERT.replace(
        "[eks.bert]\n",
        &format!(
            "[eks.bert]\nkubernetes = {{ kueue = {{ queue = \"trn-queue\", namespace = \"bert\" }}, mpi_operator = true, training_operator = {{ url = \"https://{host}\" }} }}\n"
        ),
    );
    assert_ne!(stack, BERT);
    w.write("bert.toml", &stack);
    let stderr = w.ok(&["up", "bert.toml", "--yes"]);
    assert!(stderr.contains("queue `trn-queue` Active"), "{stderr}");
    runtime().block_on(async {
        let client = w.cluster("bert.toml", "eks.bert").await;
        let read = |group: &str, version: &str, kind: &str| {
            let client = client.clone();
            let gvk = kube::api::GroupVersionKind::gvk(group, version, kind);
            async move {
                let (resource, _) = kube::discovery::pinned_kind(&client, &gvk).await.unwrap();
                let api: Api<kube::api::DynamicObject> = Api::all_with(client, &resource);
                api.list(&Default::default()).await.unwrap().items
            }
        };
        // Two trn1.32xlarge (16 Neuron devices each, from DescribeInstanceTypes) at most.
        let queue = &read("kueue.x-k8s.io", "v1beta1", "ClusterQueue").await[0];
        let group = &queue.data["spec"]["resourceGroups"][0];
        assert_eq!(
            group["coveredResources"],
            serde_json::json!(["cpu", "memory", "aws.amazon.com/neuron"])
        );
        assert_eq!(group["flavors"][0]["resources"][2]["nominalQuota"], 32);
        let flavor = &read("kueue.x-k8s.io", "v1beta1", "ResourceFlavor").await[0];
        assert_eq!(flavor.data["spec"]["nodeLabels"]["eks.amazonaws.com/nodegroup"], "trn");
        let local = &read("kueue.x-k8s.io", "v1beta1", "LocalQueue").await[0];
        assert_eq!(
            local.metadata.namespace.as_deref(),
            Some("bert"),
            "the cluster block made the namespace"
        );
        // The MPI operator's v2beta1 MPIJob, not the training operator's v1.
        let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
            Api::all(client.clone());
        let mpijobs = crds.get("mpijobs.kubeflow.org").await.unwrap();
        assert_eq!(mpijobs.spec.versions[0].name, "v2beta1");
        assert!(crds.get_opt("pytorchjobs.kubeflow.org").await.unwrap().is_some());
        let deployments: Api<k8s_openapi::api::apps::v1::Deployment> = Api::namespaced(client.clone(), "kubeflow");
        let operator = deployments.get("training-operator").await.unwrap();
        let args = operator.spec.template.spec.unwrap().containers[0].args.clone().unwrap();
        assert_eq!(args, ["--zap-log-level=info", "--enable-scheme=pytorchjob"]);
    });
    w.ok(&["destroy", "bert.toml", "--yes"]);
}

#[test]
fn a_bundle_is_held_to_its_pinned_or_first_applied_digest() {
    let w = World::new();
    let path = format!("bundles.{}.example/queue.yaml", w.account);
    let first = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: queue, namespace: default}\ndata: {size: \"1\"}\n";
    mirror(&path, first);
    let manifest = |pin: &str| format!("\n[k8s_manifest.queue]\ncluster = \"eks.nemo\"\nurl = \"https://{path}\"\n{pin}");
    w.write("nemo.toml", &format!("{NEMO}{}", manifest("")));
    w.ok(&["up", "nemo.toml", "--yes", "--no-wait-ready"]);
    // The same URL serves other bytes: the plan refuses them, naming both digests.
    let second = first.replace("\"1\"", "\"2\"");
    mirror(&path, &second);
    // The error as one line, whatever the terminal's width.
    let flat = |stderr: &str| stderr.replace('│', " ").split_whitespace().collect::<Vec<_>>().join(" ");
    let (code, _, stderr) = w.forge(&["plan", "nemo.toml"]);
    assert_eq!(code, 1, "{stderr}");
    let stderr = flat(&stderr);
    assert!(stderr.contains("changed since it was first applied"), "{stderr}");
    let digest = |text: &str| {
        use sha2::Digest;
        format!("{:x}", sha2::Sha256::digest(text.as_bytes()))
    };
    assert!(stderr.contains(&digest(&second)) && stderr.contains(&digest(first)), "{stderr}");
    // A pin that does not match is an error at its line; the right pin lets the change through.
    w.write(
        "nemo.toml",
        &format!("{NEMO}{}", manifest(&format!("sha256 = \"{}\"\n", digest(first)))),
    );
    let (code, _, stderr) = w.forge(&["plan", "nemo.toml"]);
    assert_eq!(code, 1, "{stderr}");
    let stderr = flat(&stderr);
    assert!(stderr.contains("not the pinned") && stderr.contains("nemo.toml"), "{stderr}");
    w.write(
        "nemo.toml",
        &format!("{NEMO}{}", manifest(&format!("sha256 = \"{}\"\n", digest(&second)))),
    );
    let stderr = w.ok(&["up", "nemo.toml", "--yes", "--no-wait-ready"]);
    assert!(stderr.contains("k8s_manifest.queue.configmap.default.queue"), "{stderr}");
    runtime().block_on(async {
        let client = w.cluster("nemo.toml", "eks.nemo").await;
        let configs: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client, "default");
        assert_eq!(configs.get("queue").await.unwrap().data.unwrap()["size"], "2");
    });
    w.ok(&["destroy", "nemo.toml", "--yes"]);
}

#[test]
fn where_the_cluster_exists_the_plan_asks_its_api_server_with_a_dry_run() {
    let w = World::new();
    w.write("nemo.toml", NEMO);
    w.ok(&["up", "nemo.toml", "--yes", "--no-wait-ready"]);
    // A name the API server refuses: the plan says so, and `up` applies nothing.
    let bad = "\n[k8s_manifest.facts]\ncluster = \"eks.nemo\"\nobjects = [{ apiVersion = \"v1\", kind = \"ConfigMap\", metadata = { name = \"Queue_Config\", namespace = \"default\" } }]\n";
    w.write("nemo.toml", &format!("{NEMO}{bad}"));
    let flat = |stderr: &str| stderr.replace('│', " ").split_whitespace().collect::<Vec<_>>().join(" ");
    for command in [&["plan", "nemo.toml"][..], &["up", "nemo.toml", "--yes"][..]] {
        let (code, _, stderr) = w.forge(command);
        assert_eq!(code, 1, "{stderr}");
        let stderr = flat(&stderr);
        assert!(
            stderr.contains("1 of the planned objects would be refused (asked before anything is applied)"),
            "{stderr}"
        );
        assert!(stderr.contains("k8s_manifest.facts.configmap.default.queue_config"), "{stderr}");
        assert!(stderr.contains("metadata.name: Invalid value: \"Queue_Config\""), "{stderr}");
    }
    let (_, state, _) = w.forge(&["state", "list", "nemo.toml"]);
    assert!(!state.contains("k8s_manifest.facts"), "{state}");
    // Fixed, it goes through: the dry run stored nothing, the apply does.
    w.write("nemo.toml", &format!("{NEMO}{}", bad.replace("Queue_Config", "queue-config")));
    w.ok(&["up", "nemo.toml", "--yes", "--no-wait-ready"]);
    let (_, state, _) = w.forge(&["state", "list", "nemo.toml"]);
    assert!(state.contains("k8s_manifest.facts.configmap.default.queue_config"), "{state}");
    w.ok(&["destroy", "nemo.toml", "--yes"]);
}

/// A cluster whose endpoint is private, with one in-cluster object, each wait short.
const PRIVATE_STACK: &str = r#"
[stack]
name = "private"

[aws]
region = "us-west-2"

[vpc.main]
cidr = "10.0.0.0/16"
zones = ["us-west-2a", "us-west-2b"]
nat = "none"

[eks.train]
vpc = "vpc.main"
endpoint = "private"
kubernetes = { reach_timeout = "4s", api_timeout = "3s" }

[eks.train.nodegroups.system]
instance_type = "c5.2xlarge"
size = 1

[k8s_manifest.facts]
cluster = "eks.train"
objects = [{ apiVersion = "v1", kind = "ConfigMap", metadata = { name = "facts", namespace = "default" }, data = { team = "ml" } }]
"#;

/// Sets how cluster `name`'s endpoint answers (`open`, `refuse`, `unauthorized`, `forbidden`).
fn set_reach(w: &World, name: &str, mode: &str) {
    let body = format!(r#"{{"cluster": "eks/{}/us-west-2/{name}", "mode": "{mode}"}}"#, w.account);
    let (status, answer) = crate::support::request("POST", "/_forge/kubernetes/reach", &body);
    assert_eq!(status, 200, "{answer}");
}

#[test]
fn a_cluster_forge_cannot_reach_fails_fast_naming_its_endpoint_and_the_next_up_converges() {
    let w = World::new();
    w.write("private.toml", PRIVATE_STACK);
    let flat = |text: &str| text.replace('│', " ").split_whitespace().collect::<Vec<_>>().join(" ");
    // The plan knows the endpoint is private; the cloud side goes first, the object waits.
    let (_, _, plan) = w.forge(&["plan", "private.toml"]);
    assert!(flat(&plan).contains("`eks.train.cluster` has a private endpoint only"), "{plan}");
    let stderr = flat(&w.ok(&["up", "private.toml", "--yes", "--skip-in-cluster"]));
    assert!(
        stderr.contains("Pending, left for a run that reaches the clusters (--skip-in-cluster): 2 change(s)"),
        "{stderr}"
    );
    assert!(stderr.contains("+ k8s_manifest.facts.configmap.default.facts"), "{stderr}");
    let (_, state, _) = w.forge(&["state", "list", "private.toml"]);
    assert!(state.contains("eks.train.cluster") && !state.contains("k8s_manifest"), "{state}");
    // From a place the endpoint refuses: one error naming the endpoint, the failure and the way in.
    set_reach(&w, "train", "refuse");
    let (code, _, stderr) = w.forge(&["up", "private.toml", "--yes"]);
    let stderr = flat(&stderr);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("cannot reach the API server of cluster `eks/train` at https://127.0.0.1:"),
        "{stderr}"
    );
    assert!(stderr.contains("connection refused"), "{stderr}");
    assert!(
        stderr.contains("public_access_cidrs") && stderr.contains("--skip-in-cluster"),
        "{stderr}"
    );
    // From a place it answers: the object is applied, nothing cloud-side is made twice.
    set_reach(&w, "train", "open");
    w.ok(&["up", "private.toml", "--yes", "--no-wait-ready"]);
    let (code, _, stderr) = w.forge(&["plan", "private.toml", "--detailed-exitcode"]);
    assert_eq!(code, 0, "{stderr}");
    runtime().block_on(async {
        let client = w.cluster("private.toml", "eks.train").await;
        let maps: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client, "default");
        assert_eq!(maps.get("facts").await.unwrap().data.unwrap()["team"], "ml");
        let eks = aws_sdk_eks::Client::new(&w.sdk_config());
        assert_eq!(eks.list_clusters().send().await.unwrap().clusters(), ["train"]);
        let groups = eks.list_nodegroups().cluster_name("train").send().await.unwrap();
        assert_eq!(groups.nodegroups().len(), 1);
    });
    // Credentials the cluster does not take: the identity forge used, and how to grant it.
    set_reach(&w, "train", "unauthorized");
    w.write("private.toml", &PRIVATE_STACK.replace("team = \"ml\"", "team = \"infra\""));
    let (code, _, stderr) = w.forge(&["up", "private.toml", "--yes", "--no-wait-ready"]);
    let stderr = flat(&stderr);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("401 Unauthorized: it does not accept forge's identity, the IAM principal arn:aws:"),
        "{stderr}"
    );
    assert!(stderr.contains("aws eks create-access-entry --cluster-name train"), "{stderr}");
    // A kind the cluster does not serve fails after the object's API wait, naming it.
    set_reach(&w, "train", "open");
    let widget = "\n[k8s_manifest.widget]\ncluster = \"eks.train\"\nobjects = [{ apiVersion = \"example.com/v1\", kind = \"Widget\", metadata = { name = \"w\", namespace = \"default\" } }]\n";
    w.write("private.toml", &format!("{PRIVATE_STACK}{widget}"));
    let (code, _, stderr) = w.forge(&["up", "private.toml", "--yes", "--no-wait-ready"]);
    let stderr = flat(&stderr);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("does not serve example.com/v1 (kind Widget) after 3s"), "{stderr}");
    assert!(stderr.contains("no CustomResourceDefinition provides it"), "{stderr}");
    w.write("private.toml", PRIVATE_STACK);
    w.ok(&["destroy", "private.toml", "--yes"]);
}

/// A one-cluster stack `name` (block `eks.<name>`, Kubernetes 1.33, a system group) with the
/// node groups `groups` (TOML tables).
fn gpu_cluster(name: &str, groups: &str) -> String {
    format!(
        "[stack]\nname = \"{name}\"\n[aws]\nregion = \"us-west-2\"\n[vpc.main]\ncidr = \"10.0.0.0/16\"\nzones = [\"us-west-2a\", \"us-west-2b\"]\nnat = \"none\"\n[eks.{name}]\nvpc = \"vpc.main\"\nversion = \"1.33\"\n[eks.{name}.nodegroups.system]\ninstance_type = \"c5.2xlarge\"\nsize = 1\n{groups}"
    )
}

/// The GPU and Trainium shapes of 2026, one node group each.
const NEW_SHAPES: &str = r#"
[eks.shapes.nodegroups.h200]
instance_type = "p5en.48xlarge"
size = 1
zone = "us-west-2a"

[eks.shapes.nodegroups.b200]
instance_type = "p6-b200.48xlarge"
size = 1
zone = "us-west-2a"

[eks.shapes.nodegroups.b300]
instance_type = "p6-b300.48xlarge"
size = 1
zone = "us-west-2a"

[eks.shapes.nodegroups.trn2]
instance_type = "trn2.48xlarge"
size = 1
zone = "us-west-2a"
"#;

#[test]
fn the_2026_shapes_come_up_laid_out_as_ec2_documents_and_report_their_devices() {
    let w = World::new();
    w.write("shapes.toml", &gpu_cluster("shapes", NEW_SHAPES));
    let stderr = w.ok(&["up", "shapes.toml", "--yes"]);
    for line in [
        "node group `h200`: 1 nodes, each nvidia.com/gpu 8, vpc.amazonaws.com/efa 16",
        "node group `b200`: 1 nodes, each nvidia.com/gpu 8, vpc.amazonaws.com/efa 8",
        "node group `b300`: 1 nodes, each nvidia.com/gpu 8, vpc.amazonaws.com/efa 16",
        "aws.amazon.com/neuron 16",
    ] {
        assert!(stderr.contains(line), "{line}: {stderr}");
    }
    let ec2 = aws_sdk_ec2::Client::new(&w.sdk_config());
    let layout = |template: &str| {
        let versions = runtime()
            .block_on(
                ec2.describe_launch_template_versions()
                    .launch_template_name(template)
                    .versions("$Latest")
                    .send(),
            )
            .unwrap();
        let data = versions.launch_template_versions()[0].launch_template_data().unwrap().clone();
        data.network_interfaces()
            .iter()
            .map(|n| {
                (
                    n.network_card_index().unwrap(),
                    n.device_index().unwrap(),
                    n.interface_type().unwrap().to_owned(),
                )
            })
            .collect::<Vec<_>>()
    };
    let nic = |card, device, kind: &str| (card, device, kind.to_owned());
    // p6-b300: card 0 takes ENA only; EFA on cards 1–16, each efa-only at device 0.
    let b300 = layout("shapes-b300");
    assert_eq!(b300.len(), 17);
    assert_eq!(b300[..2], [nic(0, 0, "interface"), nic(1, 0, "efa-only")]);
    assert_eq!(b300[16], nic(16, 0, "efa-only"));
    for (template, efa) in [("shapes-h200", 16), ("shapes-b200", 8), ("shapes-trn2", 16)] {
        let nics = layout(template);
        assert_eq!(nics.len(), efa + 1, "{template}");
        assert_eq!(nics[..2], [nic(0, 0, "interface"), nic(0, 1, "efa-only")], "{template}");
    }
    w.ok(&["destroy", "shapes.toml", "--yes"]);
}

/// A P6e-GB200 UltraServer node group on its Capacity Block.
const ULTRASERVER: &str = r#"
[eks.gb.nodegroups.nvl72]
instance_type = "p6e-gb200.36xlarge"
size = 18
zone = "us-west-2a"
capacity_type = "CAPACITY_BLOCK"
capacity_reservation_id = "cr-0123456789abcdef0"
"#;

#[test]
fn a_p6e_gb200_ultraserver_group_comes_up_on_its_capacity_block_with_alternating_efa() {
    let w = World::new();
    w.write("gb.toml", &gpu_cluster("gb", ULTRASERVER));
    let stderr = w.ok(&["up", "gb.toml", "--yes"]);
    assert!(
        stderr.contains("UltraServer node group (p6e-gb200.36xlarge) `nvl72`: 18 nodes, each nvidia.com/gpu 4, vpc.amazonaws.com/efa 17"),
        "{stderr}"
    );
    let (_, state, _) = w.forge(&["state", "show", "gb.toml", "eks.gb.nodegroups.nvl72.launch_template"]);
    let record: serde_json::Value = serde_json::from_str(&state).unwrap();
    let nics = record["config"]["network_interfaces"].as_array().unwrap().clone();
    assert_eq!(nics.len(), 17);
    for (card, n) in nics.iter().enumerate() {
        let want = if card % 2 == 0 { "efa" } else { "efa-only" };
        assert_eq!(
            (n["network_card_index"].as_u64(), n["interface_type"].as_str()),
            (Some(card as u64), Some(want))
        );
    }
    assert_eq!(record["config"]["capacity_block"], true);
    assert!(
        record["config"].get("placement_group").is_none(),
        "the Capacity Block brings its placement"
    );
    let (_, group, _) = w.forge(&["state", "show", "gb.toml", "eks.gb.nodegroups.nvl72.nodegroup"]);
    let group: serde_json::Value = serde_json::from_str(&group).unwrap();
    assert_eq!(group["config"]["ami_type"], "AL2023_ARM_64_NVIDIA");
    assert_eq!(group["config"]["capacity_type"], "CAPACITY_BLOCK");
    // NVIDIA's DRA driver with IMEX: the ComputeDomain CRD Established, its DeviceClasses, the
    // kubelet plugin on the GB200 nodes.
    runtime().block_on(async {
        use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
        let client = w.cluster("gb.toml", "eks.gb").await;
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        let crd = crds.get("computedomains.resource.nvidia.com").await.unwrap();
        let established = crd.status.unwrap().conditions.unwrap_or_default();
        assert!(established.iter().any(|c| c.type_ == "Established" && c.status == "True"));
        let plugins: Api<DaemonSet> = Api::namespaced(client.clone(), "nvidia-dra-driver-gpu");
        let listed = plugins.list(&Default::default()).await.unwrap();
        let plugin = serde_json::to_value(&listed.items[0]).unwrap();
        let affinity = plugin["spec"]["template"]["spec"]["affinity"].to_string();
        assert!(affinity.contains("p6e-gb200.36xlarge"), "{affinity}");
        let classes = kube::api::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk("resource.k8s.io", "v1beta1", "DeviceClass"));
        let classes: Api<kube::api::DynamicObject> = Api::all_with(client, &classes);
        let names: Vec<String> = classes
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter_map(|c| c.metadata.name)
            .collect();
        assert!(names.contains(&"compute-domain-default-channel.nvidia.com".to_owned()), "{names:?}");
    });
    w.ok(&["destroy", "gb.toml", "--yes"]);
}

const EXISTING: &str = include_str!("../../stacks/nemo-eks-existing.toml");

/// A cluster and its VPC made as eksctl would (here with the SDK), with a private subnet in two
/// zones and a public one: the VPC's id.
fn made_by_eksctl(w: &World, cluster: &str) -> String {
    use aws_sdk_ec2::types::{ResourceType, Tag, TagSpecification};
    let config = w.sdk_config();
    let (ec2, iam, eks) = (
        aws_sdk_ec2::Client::new(&config),
        aws_sdk_iam::Client::new(&config),
        aws_sdk_eks::Client::new(&config),
    );
    runtime().block_on(async {
        let named = |kind: ResourceType, name: &str| TagSpecification::builder().resource_type(kind).tags(Tag::builder().key("Name").value(name).build()).build();
        let vpc = ec2.create_vpc().cidr_block("10.20.0.0/16").tag_specifications(named(ResourceType::Vpc, "eksctl-vpc")).send().await.unwrap();
        let vpc = vpc.vpc().unwrap().vpc_id().unwrap().to_owned();
        let mut private = Vec::new();
        for (cidr, zone) in [("10.20.0.0/20", "us-west-2c"), ("10.20.16.0/20", "us-west-2a")] {
            let subnet = ec2.create_subnet().vpc_id(&vpc).cidr_block(cidr).availability_zone(zone).send().await.unwrap();
            private.push(subnet.subnet().unwrap().subnet_id().unwrap().to_owned());
        }
        // As eksctl lays it out: the main route table goes to the internet gateway (the public
        // subnet in the GPU zone uses it: not the one to use), the private subnets have a
        // table of their own without that route.
        ec2.create_subnet().vpc_id(&vpc).cidr_block("10.20.32.0/24").availability_zone("us-west-2c").send().await.unwrap();
        let igw = ec2.create_internet_gateway().send().await.unwrap();
        let igw = igw.internet_gateway().unwrap().internet_gateway_id().unwrap().to_owned();
        ec2.attach_internet_gateway().vpc_id(&vpc).internet_gateway_id(&igw).send().await.unwrap();
        let filter = aws_sdk_ec2::types::Filter::builder().name("vpc-id").values(&vpc).build();
        let tables = ec2.describe_route_tables().filters(filter).send().await.unwrap();
        let main = tables.route_tables()[0].route_table_id().unwrap().to_owned();
        ec2.create_route().route_table_id(&main).destination_cidr_block("0.0.0.0/0").gateway_id(&igw).send().await.unwrap();
        let table = ec2.create_route_table().vpc_id(&vpc).send().await.unwrap();
        let table = table.route_table().unwrap().route_table_id().unwrap().to_owned();
        for subnet in &private {
            ec2.associate_route_table().route_table_id(&table).subnet_id(subnet).send().await.unwrap();
        }
        let trust = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"eks.amazonaws.com"},"Action":"sts:AssumeRole"}]}"#;
        let role = iam.create_role().role_name("eksctl-cluster-role").assume_role_policy_document(trust).send().await.unwrap();
        let vpc_config = aws_sdk_eks::types::VpcConfigRequest::builder().set_subnet_ids(Some(private.clone())).build();
        eks.create_cluster()
            .name(cluster)
            .role_arn(role.role().unwrap().arn())
            .version("1.31")
            .resources_vpc_config(vpc_config)
            .access_config(aws_sdk_eks::types::CreateAccessConfigRequest::builder().authentication_mode(aws_sdk_eks::types::AuthenticationMode::ApiAndConfigMap).build())
            .tags("made-by", "eksctl")
            .send()
            .await
            .unwrap();
        while eks.describe_cluster().name(cluster).send().await.unwrap().cluster().unwrap().status() != Some(&aws_sdk_eks::types::ClusterStatus::Active) {
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
        // eksctl's own node group, which forge must leave alone.
        let trust = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}"#;
        let nodes = iam.create_role().role_name("eksctl-node-role").assume_role_policy_document(trust).send().await.unwrap();
        let scaling = aws_sdk_eks::types::NodegroupScalingConfig::builder().min_size(1).max_size(1).desired_size(1).build();
        eks.create_nodegroup()
            .cluster_name(cluster)
            .nodegroup_name("ng-system")
            .node_role(nodes.role().unwrap().arn())
            .subnets(&private[1])
            .instance_types("c5.2xlarge")
            .scaling_config(scaling)
            .send()
            .await
            .unwrap();
        vpc
    })
}

/// The cluster's status, version and tags, and the VPC's subnets: what forge must leave as it
/// found them.
fn untouched(w: &World, cluster: &str, vpc: &str) -> (String, String, Vec<(String, String)>, Vec<String>) {
    let config = w.sdk_config();
    let (ec2, eks) = (aws_sdk_ec2::Client::new(&config), aws_sdk_eks::Client::new(&config));
    runtime().block_on(async {
        let c = eks.describe_cluster().name(cluster).send().await.unwrap();
        let c = c.cluster().unwrap();
        let mut tags: Vec<(String, String)> = c.tags().into_iter().flatten().map(|(k, v)| (k.clone(), v.clone())).collect();
        tags.sort();
        let filter = aws_sdk_ec2::types::Filter::builder().name("vpc-id").values(vpc).build();
        let subnets = ec2.describe_subnets().filters(filter).send().await.unwrap();
        let mut subnets: Vec<String> = subnets.subnets().iter().map(|s| s.subnet_id().unwrap().to_owned()).collect();
        subnets.sort();
        (
            c.status().unwrap().as_str().to_owned(),
            c.version().unwrap().to_owned(),
            tags,
            subnets,
        )
    })
}

#[test]
fn nemo_on_an_existing_cluster_adds_its_node_group_fsx_and_plugins_and_leaves_the_cluster() {
    let w = World::new();
    let vpc = made_by_eksctl(&w, "nemo");
    let before = untouched(&w, "nemo", &vpc);
    // With the cluster's OIDC provider, which eksctl made none of.
    // And a CI role's view of the default namespace, through an access entry.
    let ci = runtime()
        .block_on(
            aws_sdk_iam::Client::new(&w.sdk_config())
                .get_role()
                .role_name("eksctl-node-role")
                .send(),
        )
        .unwrap()
        .role()
        .unwrap()
        .arn()
        .to_owned();
    let with_oidc = EXISTING.replace("# oidc_provider = true", "oidc_provider = true").replace(
        "[eks.nemo.nodegroups.gpu]",
        &format!("[eks.nemo.access.ci]\nprincipal = \"{ci}\"\npolicies = [\"AmazonEKSViewPolicy\"]\nnamespaces = [\"default\"]\n\n[eks.nemo.nodegroups.gpu]"),
    );
    assert_ne!(with_oidc, EXISTING);
    w.write("existing.toml", &with_oidc);
    let var = format!("vpc={vpc}");
    let args = |command: &'static str| vec![command, "existing.toml", "--var", &var];

    let stderr = w.ok(&[args("up"), vec!["--yes"]].concat());
    assert!(stderr.contains("<= eks.nemo.cluster (aws_eks_cluster, nemo)"), "{stderr}");
    assert!(stderr.contains("<= vpc.main.private.us-west-2c (aws_subnet, subnet-"), "{stderr}");
    assert!(
        stderr.contains("Ready: eks/nemo: node group `gpu`: 2 nodes, each nvidia.com/gpu 8, vpc.amazonaws.com/efa 32"),
        "{stderr}"
    );
    assert!(stderr.contains("claim default/data-pvc Bound"), "{stderr}");
    let iam = aws_sdk_iam::Client::new(&w.sdk_config());
    let providers = || {
        let listed = runtime().block_on(iam.list_open_id_connect_providers().send()).unwrap();
        listed
            .open_id_connect_provider_list()
            .iter()
            .filter_map(|p| p.arn().map(str::to_owned))
            .collect::<Vec<_>>()
    };
    assert_eq!(providers().len(), 1, "the issuer's provider");
    let (code, listed, stderr) = w.forge(&["state", "list", "existing.toml", "--var", &var]);
    assert_eq!(code, 0, "{stderr}");
    assert!(listed.contains("eks.nemo.oidc"), "{listed}");
    let eks = aws_sdk_eks::Client::new(&w.sdk_config());
    let policies = runtime()
        .block_on(eks.list_associated_access_policies().cluster_name("nemo").principal_arn(&ci).send())
        .unwrap();
    let policy = &policies.associated_access_policies()[0];
    assert_eq!(
        (policy.policy_arn(), policy.access_scope().unwrap().namespaces()),
        (
            Some("arn:aws:eks::aws:cluster-access-policy/AmazonEKSViewPolicy"),
            &["default".to_owned()][..]
        )
    );
    // Another policy, cluster-wide: changed in place, the old one let go.
    w.write(
        "existing.toml",
        &with_oidc.replace(
            "policies = [\"AmazonEKSViewPolicy\"]\nnamespaces = [\"default\"]",
            "policies = [\"AmazonEKSEditPolicy\"]",
        ),
    );
    let stderr = w.ok(&[args("up"), vec!["--yes"]].concat());
    assert!(stderr.contains("~ eks.nemo.access.ci"), "{stderr}");
    let policies = runtime()
        .block_on(eks.list_associated_access_policies().cluster_name("nemo").principal_arn(&ci).send())
        .unwrap();
    let arns: Vec<_> = policies
        .associated_access_policies()
        .iter()
        .map(|p| (p.policy_arn().unwrap(), p.access_scope().unwrap().namespaces().len()))
        .collect();
    assert_eq!(arns, [("arn:aws:eks::aws:cluster-access-policy/AmazonEKSEditPolicy", 0)]);
    assert!(
        !stderr.contains("eks.nemo.cluster (aws_eks_cluster)\n"),
        "the cluster is not created: {stderr}"
    );
    assert_eq!(
        untouched(&w, "nemo", &vpc),
        before,
        "the cluster and its VPC are as eksctl left them"
    );
    let config = w.sdk_config();
    let eks = aws_sdk_eks::Client::new(&config);
    let groups = runtime().block_on(eks.list_nodegroups().cluster_name("nemo").send()).unwrap();
    let mut names = groups.nodegroups().to_vec();
    names.sort();
    assert_eq!(names, ["gpu", "ng-system"]);
    let group = runtime()
        .block_on(eks.describe_nodegroup().cluster_name("nemo").nodegroup_name("gpu").send())
        .unwrap();
    let private_2c = &before.3;
    let subnet = &group.nodegroup().unwrap().subnets()[0];
    assert!(private_2c.contains(subnet), "{subnet}");
    let public = runtime()
        .block_on(aws_sdk_ec2::Client::new(&config).describe_subnets().subnet_ids(subnet).send())
        .unwrap();
    assert_eq!(
        public.subnets()[0].cidr_block(),
        Some("10.20.0.0/20"),
        "the private subnet of us-west-2c, not the public one"
    );
    runtime().block_on(async {
        let client = w.cluster("existing.toml", "eks.nemo").await;
        let daemonsets: Api<DaemonSet> = Api::namespaced(client, "kube-system");
        daemonsets.get("nvidia-device-plugin").await.unwrap();
        daemonsets.get("aws-efa-k8s-device-plugin").await.unwrap();
    });

    // Nothing to do the second time; `forge kubeconfig` works for the cluster it reads.
    let (code, _, stderr) = w.forge(&[args("plan"), vec!["--detailed-exitcode"]].concat());
    assert_eq!(code, 0, "{stderr}");
    let (code, kubeconfig, stderr) = w.forge(&["kubeconfig", "existing.toml", "eks.nemo", "--print", "--var", &var]);
    assert_eq!(code, 0, "{stderr}");
    assert!(kubeconfig.contains("server: https://"), "{kubeconfig}");

    // Destroy removes what forge made, forgets what it read, and leaves the cluster running.
    let stderr = w.ok(&[args("destroy"), vec!["--yes"]].concat());
    assert!(stderr.contains("- eks.nemo.cluster (read only: no call)"), "{stderr}");
    assert_eq!(untouched(&w, "nemo", &vpc), before);
    let groups = runtime().block_on(eks.list_nodegroups().cluster_name("nemo").send()).unwrap();
    assert_eq!(groups.nodegroups(), ["ng-system"], "eksctl's node group stays");
    assert!(providers().is_empty(), "the provider forge added is gone");
    let entries = runtime().block_on(eks.list_access_entries().cluster_name("nemo").send()).unwrap();
    assert!(entries.access_entries().is_empty(), "{entries:?}");
    // One made elsewhere for the issuer: IAM takes one per issuer, so the plan refuses a second.
    let issuer = runtime().block_on(crate::support::oidc_issuer(&eks, "nemo"));
    runtime()
        .block_on(
            iam.create_open_id_connect_provider()
                .url(&issuer)
                .client_id_list("sts.amazonaws.com")
                .send(),
        )
        .unwrap();
    let (code, _, stderr) = w.forge(&args("plan"));
    assert_eq!(code, 1, "{stderr}");
    let flat = stderr.replace('│', " ").split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(flat.contains("`eks.nemo.oidc`: IAM has an OIDC provider for"), "{stderr}");
    assert!(flat.contains("made outside forge"), "{stderr}");
    let file_systems = runtime()
        .block_on(aws_sdk_fsx::Client::new(&config).describe_file_systems().send())
        .unwrap();
    assert!(file_systems.file_systems().is_empty());

    // The same VPC's public subnets, read with `public = true`: the zone's subnet routed to the
    // internet gateway; a zone without one is an error at plan time.
    let net = |zones: &str| {
        format!(
            "[stack]\nname = \"net\"\n[aws]\nregion = \"us-west-2\"\n[vpc.main]\nexisting = \"{vpc}\"\nzones = [{zones}]\npublic = true\n[outputs]\npublic = \"${{vpc.main.public_subnets_by_zone.us-west-2c}}\"\nprivate = \"${{vpc.main.private_subnet_ids}}\"\n"
        )
    };
    w.write("net.toml", &net("\"us-west-2c\""));
    w.ok(&["up", "net.toml", "--yes"]);
    let (code, outputs, stderr) = w.forge(&["output", "net.toml", "--json"]);
    assert_eq!(code, 0, "{stderr}");
    let outputs: serde_json::Value = serde_json::from_str(&outputs).unwrap();
    let cidr = |subnet: &str| {
        let ec2 = aws_sdk_ec2::Client::new(&config);
        let found = runtime().block_on(ec2.describe_subnets().subnet_ids(subnet).send()).unwrap();
        found.subnets()[0].cidr_block().unwrap().to_owned()
    };
    assert_eq!(cidr(outputs["public"].as_str().unwrap()), "10.20.32.0/24");
    assert_eq!(cidr(outputs["private"][0].as_str().unwrap()), "10.20.0.0/20");
    assert_eq!(untouched(&w, "nemo", &vpc), before);
    w.write("net.toml", &net("\"us-west-2c\", \"us-west-2a\""));
    let (code, _, stderr) = w.forge(&["plan", "net.toml"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("vpc.main.public.us-west-2a"), "{stderr}");
}
