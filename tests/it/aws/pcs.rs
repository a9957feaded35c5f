//! AWS Parallel Computing Service: the PCS kinds and the NeMo Slurm stack.

use super::*;

/// A Slurm cluster on AWS PCS declared kind by kind: the cluster, a node group launched from a
/// launch template at a numeric version with an `AWSPCS…` role, and a queue over it.
const PCS_KINDS: &str = r#"
[stack]
name = "pcs-kinds"

[aws]
region = "us-west-2"

[vpc.main]
cidr = "10.0.0.0/16"
zones = ["us-west-2a"]

[aws_security_group.slurm]
name = "pcs-kinds-slurm"
vpc_id = "${vpc.main.vpc_id}"
ingress = [{ self = true }]
egress = [{ cidr_blocks = ["0.0.0.0/0"] }]

[aws_iam_role.nodes]
name = "AWSPCS-pcs-kinds-nodes"
assume_role_policy = { Version = "2012-10-17", Statement = [{ Effect = "Allow", Principal = { Service = "ec2.amazonaws.com" }, Action = "sts:AssumeRole" }] }
managed_policy_arns = ["arn:aws:iam::aws:policy/AWSPCSComputeNodePolicy"]

[aws_iam_instance_profile.nodes]
name = "pcs-kinds-nodes"
role = "${aws_iam_role.nodes.name}"

[aws_launch_template.gpu]
name = "pcs-kinds-gpu"
network_interfaces = [{ network_card_index = 0, device_index = 0, security_groups = ["${aws_security_group.slurm.id}"] }]

[aws_pcs_cluster.slurm]
name = "pcs-kinds"
slurm_version = "25.05"
size = "SMALL"
subnet_id = "${vpc.main.private_subnets_by_zone.us-west-2a}"
security_group_ids = ["${aws_security_group.slurm.id}"]
slurm_settings = { SelectTypeParameters = "CR_Core_Memory" }

[aws_pcs_compute_node_group.gpu]
cluster_id = "${aws_pcs_cluster.slurm.id}"
name = "gpu"
instance_types = ["p5.48xlarge"]
subnet_ids = ["${vpc.main.private_subnets_by_zone.us-west-2a}"]
instance_profile_arn = "${aws_iam_instance_profile.nodes.arn}"
launch_template_id = "${aws_launch_template.gpu.id}"
launch_template_version = "${aws_launch_template.gpu.latest_version}"
scaling = { min = 0, max = 2 }

[aws_pcs_queue.gpu]
cluster_id = "${aws_pcs_cluster.slurm.id}"
name = "gpu"
compute_node_group_ids = ["${aws_pcs_compute_node_group.gpu.group_id}"]
"#;

#[test]
fn pcs_kinds_make_a_slurm_cluster_update_in_place_and_go_in_order() {
    let aws = Aws::new();
    aws.write("pcs.toml", PCS_KINDS);
    aws.ok(&["up", "pcs.toml", "--yes"]);
    let pcs = aws.pcs();
    let ids = aws.ids("pcs.toml");
    let cluster = ids["aws_pcs_cluster.slurm"].clone();
    runtime().block_on(async {
        let live = pcs.get_cluster().cluster_identifier(&cluster).send().await.unwrap();
        let live = live.cluster().unwrap();
        assert_eq!(live.status().as_str(), "ACTIVE");
        assert_eq!(live.name(), "pcs-kinds");
        let tags = pcs.list_tags_for_resource().resource_arn(live.arn()).send().await.unwrap();
        assert_eq!(tags.tags().unwrap()["forge:address"], "aws_pcs_cluster.slurm");
        let groups = pcs.list_compute_node_groups().cluster_identifier(&cluster).send().await.unwrap();
        let group = &groups.compute_node_groups()[0];
        let queue = pcs.list_queues().cluster_identifier(&cluster).send().await.unwrap();
        let queue = pcs
            .get_queue()
            .cluster_identifier(&cluster)
            .queue_identifier(queue.queues()[0].id())
            .send()
            .await
            .unwrap();
        assert_eq!(
            queue.queue().unwrap().compute_node_group_configurations()[0].compute_node_group_id(),
            Some(group.id()),
            "the queue runs on the node group"
        );
    });
    // A scaling change made outside forge is drift, attribute by attribute.
    let (cluster_id, group_id) = ids["aws_pcs_compute_node_group.gpu"].split_once('/').unwrap();
    runtime().block_on(async {
        let scaling = aws_sdk_pcs::types::ScalingConfigurationRequest::builder()
            .min_instance_count(0)
            .max_instance_count(3)
            .build();
        pcs.update_compute_node_group()
            .cluster_identifier(cluster_id)
            .compute_node_group_identifier(group_id)
            .scaling_configuration(scaling)
            .send()
            .await
            .unwrap();
    });
    let (code, report) = aws.drift(&["pcs.toml"]);
    assert_eq!(code, 2, "{report}");
    let text = report.to_string();
    assert!(
        text.contains("aws_pcs_compute_node_group.gpu") && text.contains("scaling"),
        "{report}"
    );
    // A scaling change in the stack updates the node group in place.
    aws.write(
        "pcs.toml",
        &PCS_KINDS.replace("scaling = { min = 0, max = 2 }", "scaling = { min = 1, max = 2 }"),
    );
    let (code, _) = aws.forge(&["plan", "pcs.toml", "--detailed-exitcode"]);
    assert_eq!(code, 2);
    let stderr = aws.ok(&["up", "pcs.toml", "--yes"]);
    assert!(stderr.contains("1 changed, 0 destroyed"), "{stderr}");
    assert_eq!(
        aws.ids("pcs.toml")["aws_pcs_compute_node_group.gpu"],
        ids["aws_pcs_compute_node_group.gpu"]
    );
    runtime().block_on(async {
        let group = pcs
            .get_compute_node_group()
            .cluster_identifier(cluster_id)
            .compute_node_group_identifier(group_id)
            .send()
            .await
            .unwrap();
        assert_eq!(
            group
                .compute_node_group()
                .unwrap()
                .scaling_configuration()
                .unwrap()
                .min_instance_count(),
            1
        );
    });
    aws.ok(&["destroy", "pcs.toml", "--yes"]);
    let left = runtime().block_on(pcs.list_clusters().send()).unwrap();
    assert!(left.clusters().is_empty(), "{left:?}");
}

#[test]
fn a_pcs_node_group_that_fails_reports_pcs_error_info() {
    let aws = Aws::new();
    let rule = format!(
        r#"[{{"account": "{}", "match": "gpu", "code": "InsufficientInstanceCapacity", "message": "no p5 capacity in us-west-2a"}}]"#,
        aws.account
    );
    aws.control("POST", "/_forge/pcs/failures", &rule);
    aws.write("pcs.toml", PCS_KINDS);
    let (code, stderr) = aws.forge(&["up", "pcs.toml", "--yes"]);
    assert_eq!(code, 1, "{stderr}");
    let flat = stderr.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        flat.contains("PCS compute node group `gpu` is CREATE_FAILED: InsufficientInstanceCapacity: no p5 capacity in us-west-2a"),
        "{stderr}"
    );
    aws.control("POST", "/_forge/pcs/failures", "[]");
    aws.ok(&["destroy", "pcs.toml", "--yes"]);
}

/// The PCS objects of the account: (cluster names, node group names and scaling (min, max) by
/// name, queues with the ids of their node groups).
type PcsObjects = (Vec<String>, BTreeMap<String, (i32, i32)>, Vec<(String, Vec<String>)>);

fn pcs_objects(aws: &Aws) -> (PcsObjects, BTreeMap<String, String>) {
    let pcs = aws.pcs();
    runtime().block_on(async {
        let clusters = pcs.list_clusters().send().await.unwrap();
        let mut groups = BTreeMap::new();
        let mut group_ids = BTreeMap::new();
        let mut queues = Vec::new();
        for cluster in clusters.clusters() {
            for summary in pcs
                .list_compute_node_groups()
                .cluster_identifier(cluster.id())
                .send()
                .await
                .unwrap()
                .compute_node_groups()
            {
                let group = pcs
                    .get_compute_node_group()
                    .cluster_identifier(cluster.id())
                    .compute_node_group_identifier(summary.id())
                    .send()
                    .await
                    .unwrap();
                let scaling = group.compute_node_group().unwrap().scaling_configuration().unwrap();
                groups.insert(
                    summary.name().to_owned(),
                    (scaling.min_instance_count(), scaling.max_instance_count()),
                );
                group_ids.insert(summary.id().to_owned(), summary.name().to_owned());
            }
            for summary in pcs.list_queues().cluster_identifier(cluster.id()).send().await.unwrap().queues() {
                let queue = pcs
                    .get_queue()
                    .cluster_identifier(cluster.id())
                    .queue_identifier(summary.id())
                    .send()
                    .await
                    .unwrap();
                let on: Vec<String> = queue
                    .queue()
                    .unwrap()
                    .compute_node_group_configurations()
                    .iter()
                    .filter_map(|c| c.compute_node_group_id().map(str::to_owned))
                    .collect();
                queues.push((summary.name().to_owned(), on));
            }
        }
        let names = clusters.clusters().iter().map(|c| c.name().to_owned()).collect();
        ((names, groups, queues), group_ids)
    })
}

/// The NeMo Slurm stack on PCS: SIGKILLed `up`s converge to exactly one of everything; the GPU
/// queue's launch template has the EFA layout AWS documents, the placement group and IMDSv2;
/// the nodes' user data mounts the file system at /fsx; the node role follows PCS's naming
/// rule; a scaling change updates in place; destroy leaves nothing.
#[test]
fn the_nemo_slurm_stack_survives_kills_comes_up_wired_and_goes() {
    let aws = Aws::new();
    aws.write("slurm.toml", include_str!("../../../stacks/nemo-slurm-p5.toml"));
    let (code, plan) = aws.forge(&["plan", "slurm.toml"]);
    assert_eq!(code, 0, "{plan}");
    insta::assert_snapshot!("nemo_slurm_p5_plan", crate::support::undated(&plan));
    let mut moments = crate::support::Moments::new(0x51_0e_2a);
    for round in 0..4 {
        let child = crate::support::quiet(&mut aws.command(&["up", "slurm.toml", "--yes"]));
        crate::support::kill_after(child, moments.next(200, 1500));
        if round == 2 {
            aws.ok(&["destroy", "slurm.toml", "--yes"]);
        }
    }
    aws.ok(&["up", "slurm.toml", "--yes"]);
    let ((clusters, groups, queues), group_ids) = pcs_objects(&aws);
    assert_eq!(clusters, ["nemo"], "exactly one cluster");
    assert_eq!(
        groups,
        BTreeMap::from([("gpu-p5-48xlarge".to_owned(), (0, 2)), ("login".to_owned(), (1, 1))])
    );
    assert_eq!(queues.len(), 1, "exactly one queue: {queues:?}");
    assert_eq!(queues[0].0, "gpu");
    assert_eq!(
        queues[0].1.iter().map(|id| group_ids[id].as_str()).collect::<Vec<_>>(),
        ["gpu-p5-48xlarge"],
        "the queue runs on the GPU group"
    );
    let (code, stderr) = aws.forge(&["plan", "slurm.toml", "--detailed-exitcode"]);
    assert_eq!(code, 0, "the state matches the cloud: {stderr}");

    // The GPU nodes' launch template: the ENA primary and 32 `efa-only` interfaces (card 0
    // device 1, then device 0 of cards 1–31), the cluster's group on each; the placement group;
    // IMDSv2 with a hop for containers.
    let (_, _, groups) = tagged(&aws, "nemo-slurm-p5");
    let slurm_group = groups
        .iter()
        .find(|g| g.group_name() == Some("nemo-slurm"))
        .unwrap()
        .group_id()
        .unwrap()
        .to_owned();
    let layout = efa_layout(&aws, "nemo-gpu");
    assert_eq!(layout.len(), 33);
    assert_eq!(layout[0], (0, 0, "interface".to_owned(), vec![slurm_group.clone()]));
    assert_eq!(layout[1], (0, 1, "efa-only".to_owned(), vec![slurm_group.clone()]));
    assert!(
        layout[2..]
            .iter()
            .enumerate()
            .all(|(i, l)| *l == (i as i32 + 1, 0, "efa-only".to_owned(), vec![slurm_group.clone()]))
    );
    let ec2 = aws.ec2();
    let data = runtime().block_on(async {
        let versions = ec2
            .describe_launch_template_versions()
            .launch_template_name("nemo-gpu")
            .versions("$Latest")
            .send()
            .await
            .unwrap();
        versions.launch_template_versions()[0].launch_template_data().unwrap().clone()
    });
    assert_eq!(data.placement().and_then(|p| p.group_name()), Some("nemo-gpu"));
    let metadata = data.metadata_options().unwrap();
    assert_eq!(
        metadata
            .http_tokens()
            .map(aws_sdk_ec2::types::LaunchTemplateHttpTokensState::as_str),
        Some("required")
    );
    assert_eq!(metadata.http_put_response_hop_limit(), Some(2));
    use base64::Engine;
    let user_data = String::from_utf8(base64::engine::general_purpose::STANDARD.decode(data.user_data().unwrap()).unwrap()).unwrap();
    let fsx = runtime().block_on(aws.fsx().describe_file_systems().send()).unwrap();
    let fs = &fsx.file_systems()[0];
    let mount = format!(
        "mount -t lustre -o relatime,flock {}@tcp:/{} /fsx",
        fs.dns_name().unwrap(),
        fs.lustre_configuration().unwrap().mount_name().unwrap()
    );
    assert!(user_data.contains(&mount), "{user_data}");
    assert!(
        user_data.contains("Content-Type: multipart/mixed") && user_data.contains("Content-Type: text/x-shellscript"),
        "{user_data}"
    );
    // The node role: named AWSPCS…, with PCS's node policy.
    let attached = runtime()
        .block_on(aws.iam().list_attached_role_policies().role_name("AWSPCS-nemo-nodes").send())
        .unwrap();
    assert!(
        attached
            .attached_policies()
            .iter()
            .any(|p| p.policy_name() == Some("AWSPCSComputeNodePolicy"))
    );

    // How to reach the login node: SSH to the instance of its node group.
    let ids = aws.ids("slurm.toml");
    let out = Command::from_std(aws.command(&["output", "slurm.toml", "slurm.nemo.login"]))
        .output()
        .unwrap();
    let login = String::from_utf8_lossy(&out.stdout);
    let login_group = ids["slurm.nemo.login.node_group"].split_once('/').unwrap().1;
    assert!(
        login.starts_with("ssh ec2-user@$(aws ec2 describe-instances --region us-west-2"),
        "{login}"
    );
    assert!(login.contains(&format!("Values={login_group} ")), "{login}");

    // More GPU nodes: the node group changes in place, the queue stays.
    let stderr = aws.ok(&["up", "slurm.toml", "--yes", "--var", "gpu_nodes=4"]);
    assert!(stderr.contains("0 added, 1 changed, 0 destroyed"), "{stderr}");
    assert_eq!(aws.ids("slurm.toml"), ids);
    assert_eq!(pcs_objects(&aws).0.1["gpu-p5-48xlarge"], (0, 4));

    // Another instance type: a new group, taken into the queue, then the old one goes; the
    // queue stays (PCS refuses to delete a group a queue uses, so the order matters).
    aws.write(
        "slurm.toml",
        &include_str!("../../../stacks/nemo-slurm-p5.toml").replace("instance_type = \"p5.48xlarge\"", "instance_type = \"p5e.48xlarge\""),
    );
    let (_, plan) = aws.forge(&["plan", "slurm.toml", "--var", "gpu_nodes=4"]);
    for line in [
        "+ slurm.nemo.queues.gpu.node_group_p5e_48xlarge",
        "~ slurm.nemo.queues.gpu.queue",
        "- slurm.nemo.queues.gpu.node_group_p5_48xlarge",
    ] {
        assert!(plan.contains(line), "{line}:\n{plan}");
    }
    aws.ok(&["up", "slurm.toml", "--yes", "--var", "gpu_nodes=4"]);
    let ((_, groups, queues), group_ids) = pcs_objects(&aws);
    assert_eq!(groups.keys().collect::<Vec<_>>(), ["gpu-p5e-48xlarge", "login"]);
    assert_eq!(
        queues[0].1.iter().map(|id| group_ids[id].as_str()).collect::<Vec<_>>(),
        ["gpu-p5e-48xlarge"]
    );
    assert_eq!(
        aws.ids("slurm.toml")["slurm.nemo.queues.gpu.queue"],
        ids["slurm.nemo.queues.gpu.queue"]
    );

    aws.ok(&["destroy", "slurm.toml", "--yes", "--var", "gpu_nodes=4"]);
    let ((clusters, groups, queues), _) = pcs_objects(&aws);
    assert!(clusters.is_empty() && groups.is_empty() && queues.is_empty());
    let (vpcs, subnets, groups) = tagged(&aws, "nemo-slurm-p5");
    assert!(vpcs.is_empty() && subnets.is_empty() && groups.is_empty());
}

/// A run of the NeMo Slurm stack killed inside each kind's create call — the call made, its
/// answer lost with the process (the instance profile's create and its role's addition
/// included) — is resumed by the next `up`, which adopts what each made by its token.
#[test]
fn a_run_killed_inside_each_create_call_is_resumed_without_duplicates() {
    let calls = [
        "ec2:CreateVpc",
        "ec2:CreateSubnet",
        "ec2:CreateInternetGateway",
        "ec2:AllocateAddress",
        "ec2:CreateNatGateway",
        "ec2:CreateRouteTable",
        "ec2:CreateSecurityGroup",
        "ec2:AuthorizeSecurityGroupIngress",
        "ec2:CreatePlacementGroup",
        "ec2:CreateLaunchTemplate",
        "iam:CreateRole",
        "iam:CreateInstanceProfile",
        "iam:AddRoleToInstanceProfile",
        "fsx:CreateFileSystem",
        "pcs:CreateCluster",
        "pcs:CreateComputeNodeGroup",
        "pcs:CreateQueue",
    ];
    kill_inside_each(include_str!("../../../stacks/nemo-slurm-p5.toml"), "slurm.toml", &calls, |aws| {
        let ((clusters, groups, queues), _) = pcs_objects(aws);
        assert_eq!(
            (clusters.len(), groups.len(), queues.len()),
            (1, 2, 1),
            "{clusters:?} {groups:?} {queues:?}"
        );
        let profiles = runtime().block_on(aws.iam().list_instance_profiles().send()).unwrap();
        let roles: Vec<usize> = profiles.instance_profiles().iter().map(|p| p.roles().len()).collect();
        assert_eq!(roles, [1], "one instance profile, with its role");
        assert_eq!(aws.file_systems("nemo-slurm-p5").len(), 1);
        let (vpcs, subnets, groups) = tagged(aws, "nemo-slurm-p5");
        assert_eq!((vpcs.len(), subnets.len(), groups.len()), (1, 4, 3));
    });
}

/// A Slurm queue of p6-b300 (card 0 ENA only) comes up with EC2's layout for it: the ENA
/// primary on card 0 and `efa-only` on cards 1–16; PCS launches it (the emulator refuses a
/// group whose template the type cannot launch).
#[test]
fn a_p6_b300_queue_gets_the_layout_its_cards_take() {
    let aws = Aws::new();
    let stack = include_str!("../../../stacks/nemo-slurm-p5.toml")
        .replace("p5.48xlarge", "p6-b300.48xlarge")
        .replace("gpu_zone = \"us-west-2c\"", "gpu_zone = \"us-west-2b\"");
    aws.write("b300.toml", &stack);
    aws.ok(&["up", "b300.toml", "--yes"]);
    let layout: Vec<(i32, i32, String)> = efa_layout(&aws, "nemo-gpu").into_iter().map(|(c, d, t, _)| (c, d, t)).collect();
    assert_eq!(layout.len(), 17);
    assert_eq!(layout[0], (0, 0, "interface".to_owned()));
    assert!(
        layout[1..]
            .iter()
            .enumerate()
            .all(|(i, l)| *l == (i as i32 + 1, 0, "efa-only".to_owned()))
    );
    let ((_, groups, _), _) = pcs_objects(&aws);
    assert!(groups.contains_key("gpu-p6-b300-48xlarge"), "{groups:?}");
    aws.ok(&["destroy", "b300.toml", "--yes"]);
}
