//! EKS clusters, node groups and add-ons with EFA wired, instance-type facts, waits that resume,
//! and the EKS seed stacks round trip.

use super::*;

/// The NeMo p5 stack: the EFA wiring is exactly what AWS documents, a size change updates the
/// node group in place, and destroy leaves nothing.
#[test]
fn eks_p5_stack_comes_up_with_efa_wired_and_goes_away() {
    let aws = Aws::new();
    aws.write("p5.toml", include_str!("../../../stacks/nemo-eks-p5.toml"));
    let (code, plan) = aws.forge(&["plan", "p5.toml"]);
    assert_eq!(code, 0, "{plan}");
    insta::assert_snapshot!("nemo_eks_p5_plan", crate::support::undated(&plan));
    aws.calls();
    let started = std::time::Instant::now();
    aws.ok(&["up", "p5.toml", "--yes"]);
    let up_calls = aws.calls();
    eprintln!(
        "up: {:.2}s, {} calls",
        started.elapsed().as_secs_f64(),
        up_calls.values().sum::<u64>()
    );

    let eks = aws.eks();
    let (cluster, gpu, system) = runtime().block_on(async {
        let cluster = eks.describe_cluster().name("nemo").send().await.unwrap().cluster().unwrap().clone();
        let group = |name: &'static str| {
            let eks = eks.clone();
            async move {
                eks.describe_nodegroup()
                    .cluster_name("nemo")
                    .nodegroup_name(name)
                    .send()
                    .await
                    .unwrap()
                    .nodegroup()
                    .unwrap()
                    .clone()
            }
        };
        (cluster, group("gpu").await, group("system").await)
    });
    assert_eq!(cluster.status().unwrap().as_str(), "ACTIVE");
    assert_eq!(cluster.version(), Some("1.31"));
    let cluster_sg = cluster
        .resources_vpc_config()
        .unwrap()
        .cluster_security_group_id()
        .unwrap()
        .to_owned();

    // EC2's layout: the primary ENA interface at card 0 device 0, an `efa-only` at card 0 device
    // 1 and at device 0 of every further card — 32 EFA devices, and one VPC address per node
    // before any pod, where an `efa` on every card took 32 — the EFA SG and cluster SG on each.
    let layout = efa_layout(&aws, "nemo-gpu");
    assert_eq!(layout.len(), 33);
    let addresses = layout.iter().filter(|(_, _, kind, _)| kind != "efa-only").count();
    assert_eq!(addresses, 1, "a node's VPC addresses before pods");
    let (_, _, groups) = tagged(&aws, "nemo-eks-p5");
    let efa_sg = groups
        .iter()
        .find(|g| g.group_name() == Some("nemo-gpu-efa"))
        .expect("the EFA security group");
    let efa_sg_id = efa_sg.group_id().unwrap().to_owned();
    for (i, (card, device, kind, sgs)) in layout.iter().enumerate() {
        let want = match i {
            0 => (0, 0, "interface"),
            1 => (0, 1, "efa-only"),
            i => (i as i32 - 1, 0, "efa-only"),
        };
        assert_eq!((*card, *device, kind.as_str()), want, "interface {i}");
        let mut sgs = sgs.clone();
        sgs.sort();
        let mut want = vec![efa_sg_id.clone(), cluster_sg.clone()];
        want.sort();
        assert_eq!(sgs, want, "interface {i}");
    }
    // The EFA SG: exactly the two self rules, and not tagged for the cluster's load balancers.
    let only_self = |perms: &[aws_sdk_ec2::types::IpPermission]| only_self_rule(perms, &efa_sg_id);
    assert!(only_self(efa_sg.ip_permissions()), "{:?}", efa_sg.ip_permissions());
    assert!(only_self(efa_sg.ip_permissions_egress()), "{:?}", efa_sg.ip_permissions_egress());
    assert!(
        efa_sg
            .tags()
            .iter()
            .all(|t| !t.key().unwrap_or_default().starts_with("kubernetes.io/cluster/"))
    );

    // A `cluster` placement group in the launch template.
    let placement = runtime()
        .block_on(aws.ec2().describe_placement_groups().group_names("nemo-gpu").send())
        .unwrap();
    assert_eq!(placement.placement_groups()[0].strategy().unwrap().as_str(), "cluster");

    // The GPU group sits in one subnet, in us-west-2c; it takes its type from the template.
    assert_eq!(gpu.subnets().len(), 1);
    let subnet = runtime()
        .block_on(aws.ec2().describe_subnets().subnet_ids(&gpu.subnets()[0]).send())
        .unwrap();
    assert_eq!(subnet.subnets()[0].availability_zone(), Some("us-west-2c"));
    assert_eq!(gpu.ami_type().unwrap().as_str(), "AL2023_x86_64_NVIDIA");
    assert!(gpu.launch_template().is_some());
    assert_eq!(gpu.scaling_config().unwrap().desired_size(), Some(2));
    assert_eq!(gpu.taints().len(), 1);
    assert_eq!(system.instance_types(), ["c5.2xlarge"]);
    assert_eq!(system.subnets().len(), 3, "a system group spans the VPC's private subnets");
    assert_eq!(system.ami_type().unwrap().as_str(), "AL2023_x86_64_STANDARD");

    // The node role has the three node policies; the cluster role the cluster policy.
    let attached = |role: &'static str| {
        let iam = aws.iam();
        let mut arns: Vec<String> = runtime()
            .block_on(iam.list_attached_role_policies().role_name(role).send())
            .unwrap()
            .attached_policies()
            .iter()
            .map(|p| p.policy_name().unwrap().to_owned())
            .collect();
        arns.sort();
        arns
    };
    assert_eq!(
        attached("nemo-node"),
        [
            "AmazonEC2ContainerRegistryReadOnly",
            "AmazonEKSWorkerNodePolicy",
            "AmazonEKS_CNI_Policy",
            "AmazonFSxFullAccess"
        ],
        "the FSx CSI policy on the node role"
    );
    assert_eq!(attached("nemo-cluster"), ["AmazonEKSClusterPolicy"]);
    let addons = runtime().block_on(eks.list_addons().cluster_name("nemo").send()).unwrap();
    let mut names = addons.addons().to_vec();
    names.sort();
    assert_eq!(names, ["aws-fsx-csi-driver", "coredns", "kube-proxy", "vpc-cni"]);

    // FSx for Lustre: one file system in the GPU subnet, TCP 988 and 1018-1023 open within its
    // security group and from the cluster's nodes (the cluster security group), nothing else.
    let lustre_sg = groups
        .iter()
        .find(|g| g.group_name() == Some("data-lustre"))
        .expect("the FSx security group");
    let lustre_sg_id = lustre_sg.group_id().unwrap();
    let mut rules: Vec<(String, i32, i32, String)> = lustre_sg
        .ip_permissions()
        .iter()
        .flat_map(|p| {
            p.user_id_group_pairs().iter().map(|pair| {
                let source = pair.group_id().unwrap();
                let who = if source == lustre_sg_id {
                    "self"
                } else if source == cluster_sg {
                    "nodes"
                } else {
                    "other"
                };
                (
                    p.ip_protocol().unwrap().to_owned(),
                    p.from_port().unwrap(),
                    p.to_port().unwrap(),
                    who.to_owned(),
                )
            })
        })
        .collect();
    rules.sort();
    assert_eq!(
        rules,
        [
            ("tcp".into(), 988, 988, "nodes".into()),
            ("tcp".into(), 988, 988, "self".into()),
            ("tcp".into(), 1018, 1023, "nodes".into()),
            ("tcp".into(), 1018, 1023, "self".into()),
        ],
        "{:?}",
        lustre_sg.ip_permissions()
    );
    assert!(
        lustre_sg.ip_permissions().iter().all(|p| p.ip_ranges().is_empty()),
        "no CIDR sources"
    );
    let file_systems = runtime().block_on(aws.fsx().describe_file_systems().send()).unwrap();
    assert_eq!(file_systems.file_systems().len(), 1);
    let lustre = &file_systems.file_systems()[0];
    assert_eq!(lustre.subnet_ids(), gpu.subnets(), "in the GPU nodes' subnet");
    assert_eq!(lustre.storage_capacity(), Some(1200));
    let config = lustre.lustre_configuration().unwrap();
    assert_eq!(config.deployment_type().unwrap().as_str(), "PERSISTENT_2");
    assert_eq!(config.per_unit_storage_throughput(), Some(250));
    assert_eq!(config.data_compression_type().unwrap().as_str(), "LZ4");
    let out = aws.command(&["output", "p5.toml", "gpu_efa_interfaces"]).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "32");

    // No-op plan: exit 0, reads only.
    let started = std::time::Instant::now();
    let (code, stderr) = aws.forge(&["plan", "p5.toml", "--detailed-exitcode"]);
    assert_eq!(code, 0, "{stderr}");
    let calls = aws.calls();
    assert!(mutating(&calls).is_empty(), "{calls:?}");
    eprintln!(
        "no-op plan: {:.2}s, {} calls",
        started.elapsed().as_secs_f64(),
        calls.values().sum::<u64>()
    );

    // A size change updates the node group in place.
    let stderr = aws.ok(&["up", "p5.toml", "--yes", "--var", "gpu_nodes=3"]);
    assert!(stderr.contains("~ scaling.desired = 2 -> 3"), "{stderr}");
    assert!(stderr.contains("0 to add, 1 to change, 0 to replace, 0 to destroy"), "{stderr}");
    let calls = aws.calls();
    assert_eq!(
        mutating(&calls),
        ["eks:POST /clusters/nemo/node-groups/gpu/update-config"],
        "{calls:?}"
    );
    let gpu = runtime()
        .block_on(eks.describe_nodegroup().cluster_name("nemo").nodegroup_name("gpu").send())
        .unwrap();
    assert_eq!(gpu.nodegroup().unwrap().scaling_config().unwrap().desired_size(), Some(3));

    // Destroy: add-ons and node groups, then the cluster; nothing is left.
    let started = std::time::Instant::now();
    aws.ok(&["destroy", "p5.toml", "--yes", "--var", "gpu_nodes=3"]);
    let calls = aws.calls();
    eprintln!(
        "destroy: {:.2}s, {} calls",
        started.elapsed().as_secs_f64(),
        calls.values().sum::<u64>()
    );
    let (vpcs, subnets, groups) = tagged(&aws, "nemo-eks-p5");
    assert!(vpcs.is_empty() && subnets.is_empty() && groups.is_empty());
    assert!(runtime().block_on(eks.list_clusters().send()).unwrap().clusters().is_empty());
    let templates = runtime()
        .block_on(aws.ec2().describe_launch_templates().filters(stack_filter("nemo-eks-p5")).send())
        .unwrap();
    assert!(templates.launch_templates().is_empty());
    let groups = runtime()
        .block_on(aws.ec2().describe_placement_groups().filters(stack_filter("nemo-eks-p5")).send())
        .unwrap();
    assert!(groups.placement_groups().is_empty());
    let roles = runtime().block_on(aws.iam().list_roles().send()).unwrap();
    assert!(roles.roles().iter().all(|r| !r.role_name().starts_with("nemo-")));
}

/// p4de: four EFA interfaces, one per network card, checked against the emulator's
/// DescribeInstanceTypes rather than the built-in table.
#[test]
fn eks_p4de_launch_template_has_four_efa_interfaces() {
    let aws = Aws::new();
    aws.write("p4de.toml", include_str!("../../../stacks/nemo-eks-p4de.toml"));
    let stderr = aws.ok(&["up", "p4de.toml", "--yes", "-v"]);
    assert!(
        stderr.contains("instance types: c5.2xlarge, p4de.24xlarge checked with AWS"),
        "{stderr}"
    );
    let layout: Vec<(i32, i32, String)> = efa_layout(&aws, "nemo-p4de-gpu")
        .into_iter()
        .map(|(c, d, t, _)| (c, d, t))
        .collect();
    let nic = |c, d, kind: &str| (c, d, kind.to_owned());
    assert_eq!(
        layout,
        [
            nic(0, 0, "interface"),
            nic(0, 1, "efa-only"),
            nic(1, 0, "efa-only"),
            nic(2, 0, "efa-only"),
            nic(3, 0, "efa-only")
        ]
    );

    // The kubeconfig context is merged beside the ones already there, twice without duplicates.
    let other = "apiVersion: v1\nkind: Config\nclusters:\n- name: other\n  cluster: {server: 'https://other'}\nusers:\n- name: other\n  user: {token: t}\ncontexts:\n- name: other\n  context: {cluster: other, user: other}\ncurrent-context: other\n";
    let path = aws.write("kube.yaml", other);
    for _ in 0..2 {
        aws.ok(&["kubeconfig", "p4de.toml", "eks.nemo", "--kubeconfig", "kube.yaml"]);
    }
    let config: serde_yaml_ng::Value = serde_yaml_ng::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let names = |list: &str| -> Vec<String> {
        config[list]
            .as_sequence()
            .unwrap()
            .iter()
            .map(|e| e["name"].as_str().unwrap().to_owned())
            .collect()
    };
    let arn = "arn:aws:eks:us-west-2:".to_owned() + &aws.account + ":cluster/nemo-p4de";
    for list in ["clusters", "users", "contexts"] {
        assert_eq!(names(list), ["other".to_owned(), arn.clone()], "{list}");
    }
    assert_eq!(config["current-context"].as_str(), Some(arn.as_str()));
    let user = &config["users"][1]["user"]["exec"];
    assert_eq!(user["command"].as_str(), Some("aws"));
    let args: Vec<&str> = user["args"].as_sequence().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
    assert_eq!(
        args,
        [
            "--region",
            "us-west-2",
            "eks",
            "get-token",
            "--cluster-name",
            "nemo-p4de",
            "--output",
            "json"
        ]
    );
    assert!(config["clusters"][1]["cluster"]["server"].as_str().unwrap().starts_with("https://"));
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);

    aws.ok(&["destroy", "p4de.toml", "--yes"]);
}

/// A zone that does not offer the type is refused from the emulator's offerings; without a
/// reachable AWS the plan warns and checks against the built-in table.
#[test]
fn instance_type_offerings_are_checked_at_plan_time() {
    let aws = Aws::new();
    let stack = include_str!("../../../stacks/nemo-eks-p5.toml")
        .replace("p5.48xlarge", "trn1.32xlarge")
        .replace(
            "zones = [\"us-west-2a\", \"us-west-2b\", \"us-west-2c\"]",
            "zones = [\"us-west-2a\", \"us-west-2b\", \"us-west-2c\", \"us-west-2d\"]",
        );
    aws.write("trn.toml", &stack);
    let (code, stderr) = aws.forge(&["plan", "trn.toml"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("zone `us-west-2c` does not offer `trn1.32xlarge`"), "{stderr}");
    assert!(stderr.contains("zones that offer it: us-west-2b, us-west-2d"), "{stderr}");
    let (code, stderr) = aws.forge(&["plan", "trn.toml", "--var", "gpu_zone=us-west-2d"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("+ eks.nemo.nodegroups.gpu.launch_template"), "{stderr}");
    assert!(stderr.contains("ami_type = \"AL2023_x86_64_NEURON\""), "{stderr}");

    let mut offline = aws.command(&["plan", "trn.toml", "--var", "gpu_zone=us-west-2c"]);
    offline.env("AWS_ENDPOINT_URL", "http://127.0.0.1:9").env("AWS_MAX_ATTEMPTS", "1");
    let out = offline.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("could not check instance types with AWS"), "{stderr}");
}

/// A wait that runs out leaves the create pending; the next `up` resumes waiting on the same
/// cluster instead of making another.
#[test]
fn an_eks_wait_that_runs_out_resumes_on_the_next_up() {
    let aws = Aws::new();
    let stack = |timeout: &str| {
        format!(
            r#"[stack]
name = "wait"
[aws_vpc.main]
cidr_block = "10.1.0.0/16"
[aws_subnet.a]
vpc_id = "${{aws_vpc.main.id}}"
cidr_block = "10.1.0.0/20"
availability_zone = "us-west-2a"
[aws_subnet.b]
vpc_id = "${{aws_vpc.main.id}}"
cidr_block = "10.1.16.0/20"
availability_zone = "us-west-2b"
[aws_iam_role.cluster]
name = "wait-cluster"
assume_role_policy = {{ Version = "2012-10-17", Statement = [{{ Effect = "Allow", Principal = {{ Service = "eks.amazonaws.com" }}, Action = "sts:AssumeRole" }}] }}
managed_policy_arns = ["arn:aws:iam::aws:policy/AmazonEKSClusterPolicy"]
[aws_eks_cluster.main]
name = "wait"
role_arn = "${{aws_iam_role.cluster.arn}}"
subnet_ids = ["${{aws_subnet.a.id}}", "${{aws_subnet.b.id}}"]
timeouts = {{ create = "{timeout}" }}
"#
        )
    };
    // This account's clusters take 5 s to become ACTIVE, not the emulator's 0.3 s, so the
    // first look after the create sees CREATING however slowly a loaded machine runs forge.
    aws.control("POST", &format!("/_forge/phases?account={}", aws.account), r#"{"seconds": 5}"#);
    aws.write("wait.toml", &stack("0s"));
    let (code, stderr) = aws.forge(&["up", "wait.toml", "--yes"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("still CREATING"), "{stderr}");
    assert!(stderr.contains("run `forge up` again to resume waiting"), "{stderr}");

    // A longer timeout is not a change of the cluster: the plan resumes the same create.
    aws.write("wait.toml", &stack("30m"));
    let stderr = aws.ok(&["up", "wait.toml", "--yes"]);
    assert!(stderr.contains("resuming an interrupted create"), "{stderr}");
    assert!(stderr.contains("1 to add, 0 to change, 0 to replace"), "{stderr}");
    let clusters = runtime().block_on(aws.eks().list_clusters().send()).unwrap();
    assert_eq!(clusters.clusters(), ["wait"]);
    let (code, stderr) = aws.forge(&["plan", "wait.toml", "--detailed-exitcode"]);
    assert_eq!(code, 0, "{stderr}");
    aws.ok(&["destroy", "wait.toml", "--yes"]);
    assert!(runtime().block_on(aws.eks().list_clusters().send()).unwrap().clusters().is_empty());
}

/// A type the built-in table does not know is checked with AWS even though the offline load
/// refused it: g6e.48xlarge takes 4 EFA interfaces.
#[test]
fn a_type_only_aws_knows_gets_its_efa_interfaces_from_aws() {
    let aws = Aws::new();
    let stack = include_str!("../../../stacks/nemo-eks-p5.toml").replace("\"p5.48xlarge\"", "\"g6e.48xlarge\"\nefa = true");
    aws.write("g6e.toml", &stack);
    let (code, stderr) = aws.forge(&["validate", "g6e.toml"]);
    assert_eq!(code, 1, "offline, forge cannot tell the EFA count: {stderr}");
    let (code, stderr) = aws.forge(&["plan", "g6e.toml"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains("+ network_interfaces = 5 interfaces: ENA + 4 EFA-only over 4 cards"),
        "{stderr}"
    );
}

/// Scaling that an autoscaler changed stays within new bounds; a taint whose value changes is
/// updated, not doubled; both compared with the live group.
#[test]
fn node_group_updates_keep_the_autoscalers_desired_size_and_replace_taint_values() {
    let aws = Aws::new();
    let stack = |max: u32, value: &str| {
        format!(
            r#"[stack]
name = "scale"
[aws]
region = "us-west-2"
[vpc.main]
cidr = "10.2.0.0/16"
zones = ["us-west-2a", "us-west-2b"]
nat = "none"
[eks.scale]
vpc = "vpc.main"
addons = []
[eks.scale.nodegroups.workers]
instance_type = "c5.2xlarge"
size = {{ min = 1, max = {max}, desired = 2 }}
taints = [{{ key = "dedicated", value = "{value}", effect = "NO_SCHEDULE" }}]
"#
        )
    };
    aws.write("scale.toml", &stack(4, "train"));
    aws.ok(&["up", "scale.toml", "--yes"]);
    let eks = aws.eks();
    let group = || {
        runtime()
            .block_on(eks.describe_nodegroup().cluster_name("scale").nodegroup_name("workers").send())
            .unwrap()
            .nodegroup()
            .unwrap()
            .clone()
    };
    // An autoscaler scales to 3 outside forge.
    let scaled = aws_sdk_eks::types::NodegroupScalingConfig::builder().desired_size(3).build();
    runtime()
        .block_on(
            eks.update_nodegroup_config()
                .cluster_name("scale")
                .nodegroup_name("workers")
                .scaling_config(scaled)
                .send(),
        )
        .unwrap();
    while group().status().unwrap().as_str() != "ACTIVE" {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    aws.write("scale.toml", &stack(5, "eval"));
    aws.ok(&["up", "scale.toml", "--yes"]);
    let now = group();
    let scaling = now.scaling_config().unwrap();
    assert_eq!(
        (scaling.min_size(), scaling.max_size(), scaling.desired_size()),
        (Some(1), Some(5), Some(3))
    );
    let taints: Vec<(Option<&str>, Option<&str>)> = now.taints().iter().map(|t| (t.key(), t.value())).collect();
    assert_eq!(taints, [(Some("dedicated"), Some("eval"))]);
    aws.ok(&["destroy", "scale.toml", "--yes"]);
}

#[test]
fn the_ml_platform_stack_round_trips() {
    let aws = Aws::new();
    // Its state is in S3: this account's own bucket.
    let bucket = format!("forge-state-{}", aws.account);
    let s3 = aws_sdk_s3::Client::from_conf(aws_sdk_s3::config::Builder::from(&aws.sdk_config()).force_path_style(true).build());
    runtime().block_on(crate::support::s3_bucket(&s3, &bucket));
    aws.write(
        "platform.toml",
        &include_str!("../../../stacks/ml-platform-eks.toml").replace("ml-platform-forge-state", &bucket),
    );
    let snapshot = || {
        runtime()
            .block_on(s3.get_object().bucket(&bucket).key("ml-platform-eks/state.json").send())
            .is_ok()
    };
    seed_stack_round_trip(&aws, "platform.toml", "ml-platform-eks", || {
        // EFS: a mount target per zone; FSx: linked to the S3 prefix, both ways.
        let efs = aws_sdk_efs::Client::new(&aws.sdk_config());
        let fs = runtime().block_on(efs.describe_file_systems().send()).unwrap();
        assert_eq!(fs.file_systems().len(), 1);
        let id = fs.file_systems()[0].file_system_id();
        let targets = runtime().block_on(efs.describe_mount_targets().file_system_id(id).send()).unwrap();
        assert_eq!(targets.mount_targets().len(), 3);
        let links = runtime()
            .block_on(aws.fsx().describe_data_repository_associations().send())
            .unwrap();
        let link = &links.associations()[0];
        assert_eq!(link.data_repository_path(), Some("s3://ml-platform-data/datasets"));
        let s3 = link.s3().unwrap();
        assert_eq!(s3.auto_import_policy().unwrap().events().len(), 3);
        assert_eq!(s3.auto_export_policy().unwrap().events().len(), 3);
        let addons = runtime().block_on(aws.eks().list_addons().cluster_name("platform").send()).unwrap();
        for driver in ["aws-efs-csi-driver", "aws-fsx-csi-driver"] {
            assert!(addons.addons().iter().any(|a| a == driver), "{driver}: {addons:?}");
        }
        // The state is the bucket's, not a local file.
        assert!(snapshot(), "no snapshot in s3://{bucket}");
        assert!(!aws.dir.path().join("state/ml-platform-eks.json").exists());
    });
}

#[test]
fn the_bert_trainium_stack_round_trips() {
    let aws = Aws::new();
    aws.write("bert.toml", include_str!("../../../stacks/bert-eks-trn1.toml"));
    seed_stack_round_trip(&aws, "bert.toml", "bert-eks-trn1", || {});
}

/// A run of the NeMo EKS stack killed inside each EKS-side create call — the cluster, its OIDC
/// provider, the add-ons, the node groups, the GPU group's launch template — is resumed by the
/// next `up` without a second of anything.
#[test]
fn a_run_killed_inside_each_create_call_is_resumed_without_duplicates() {
    let calls = [
        "ec2:CreateLaunchTemplate",
        "eks:POST /clusters",
        "iam:CreateOpenIDConnectProvider",
        "eks:POST /clusters/nemo/addons",
        "eks:POST /clusters/nemo/node-groups",
    ];
    kill_inside_each(include_str!("../../../stacks/nemo-eks-p5.toml"), "nemo.toml", &calls, |aws| {
        runtime().block_on(async {
            let eks = aws.eks();
            assert_eq!(eks.list_clusters().send().await.unwrap().clusters(), ["nemo"]);
            assert_eq!(
                eks.list_nodegroups().cluster_name("nemo").send().await.unwrap().nodegroups().len(),
                2
            );
            let providers = aws.iam().list_open_id_connect_providers().send().await.unwrap();
            assert_eq!(providers.open_id_connect_provider_list().len(), 1);
        });
        let mut addons = runtime()
            .block_on(aws.eks().list_addons().cluster_name("nemo").send())
            .unwrap()
            .addons()
            .to_vec();
        let listed = addons.len();
        addons.dedup();
        assert_eq!(addons.len(), listed, "one of each add-on: {addons:?}");
    });
}
