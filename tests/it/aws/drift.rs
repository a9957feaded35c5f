//! `forge drift` against the emulator: each out-of-band change in its class.

use super::*;

/// `forge drift` on the p5 stack: nothing right after `up`; then each out-of-band change in its
/// class with its attribute (an added rule, a changed tag, a scaled fixed-size node group, a
/// deleted subnet, an FSx throughput change, a VPC made with the stack's tag); ignore rules
/// that silence exactly their attribute; `plan` and `up` that show and undo the drift; a
/// pending edit alone exiting 3; a held lock reported; and never a write.
#[test]
fn drift_reports_each_out_of_band_change_in_its_class() {
    let aws = Aws::new();
    let text = include_str!("../../../stacks/nemo-eks-p5.toml");
    aws.write("p5.toml", text);
    aws.ok(&["up", "p5.toml", "--yes"]);
    let ids = aws.ids("p5.toml");
    aws.calls();
    let (code, report) = aws.drift(&["p5.toml"]);
    assert_eq!(code, 0, "{report:#}");
    let clean = aws.calls();
    assert!(mutating(&clean).is_empty(), "{clean:?}");

    let (ec2, eks, fsx) = (aws.ec2(), aws.eks(), aws.fsx());
    let sg = &ids["fsx.data.security_group"];
    let ssh = aws_sdk_ec2::types::IpPermission::builder()
        .ip_protocol("tcp")
        .from_port(22)
        .to_port(22)
        .ip_ranges(aws_sdk_ec2::types::IpRange::builder().cidr_ip("0.0.0.0/0").build())
        .build();
    let stray = runtime().block_on(async {
        ec2.authorize_security_group_ingress()
            .group_id(sg)
            .ip_permissions(ssh)
            .send()
            .await
            .unwrap();
        let tag = aws_sdk_ec2::types::Tag::builder().key("project").value("someone-else").build();
        ec2.create_tags().resources(&ids["vpc.main.vpc"]).tags(tag).send().await.unwrap();
        let size = aws_sdk_eks::types::NodegroupScalingConfig::builder()
            .min_size(2)
            .max_size(4)
            .desired_size(4)
            .build();
        eks.update_nodegroup_config()
            .cluster_name("nemo")
            .nodegroup_name("system")
            .scaling_config(size)
            .send()
            .await
            .unwrap();
        ec2.delete_subnet()
            .subnet_id(&ids["vpc.main.public.us-west-2c"])
            .send()
            .await
            .unwrap();
        let faster = aws_sdk_fsx::types::UpdateFileSystemLustreConfiguration::builder()
            .per_unit_storage_throughput(500)
            .build();
        fsx.update_file_system()
            .file_system_id(&ids["fsx.data.file_system"])
            .lustre_configuration(faster)
            .send()
            .await
            .unwrap();
        let copy = aws_sdk_ec2::types::TagSpecification::builder()
            .resource_type(aws_sdk_ec2::types::ResourceType::Vpc)
            .tags(aws_sdk_ec2::types::Tag::builder().key("forge:stack").value("nemo-eks-p5").build())
            .tags(
                aws_sdk_ec2::types::Tag::builder()
                    .key("forge:address")
                    .value("vpc.main.vpc")
                    .build(),
            )
            .build();
        let made = ec2
            .create_vpc()
            .cidr_block("10.99.0.0/16")
            .tag_specifications(copy)
            .send()
            .await
            .unwrap();
        made.vpc().unwrap().vpc_id().unwrap().to_owned()
    });
    // FSx applies a throughput change when its administrative action completes.
    let started = std::time::Instant::now();
    while aws.file_systems("nemo-eks-p5")[0].2 != Some(500) {
        assert!(started.elapsed().as_secs() < 60, "the throughput update never completed");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    aws.calls();

    let (code, report) = aws.drift(&["p5.toml"]);
    let calls = aws.calls();
    assert_eq!(code, 2, "{report:#}");
    assert!(mutating(&calls).is_empty(), "drift wrote: {calls:?}");
    let r = &report["stacks"][0];
    let changed = |address: &str| -> Vec<String> {
        r["changed"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["address"] == address)
            .flat_map(|c| {
                c["attributes"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|a| a["attribute"].as_str().unwrap().to_owned())
            })
            .collect()
    };
    assert_eq!(changed("fsx.data.security_group"), ["ingress"], "{r:#}");
    let rule = r["changed"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["address"] == "fsx.data.security_group")
        .unwrap();
    let live = rule["attributes"][0]["live"].as_array().unwrap();
    assert!(
        live.contains(&serde_json::json!({"protocol": "tcp", "from_port": 22, "to_port": 22, "cidr_blocks": ["0.0.0.0/0"]})),
        "{rule:#}"
    );
    assert_eq!(changed("vpc.main.vpc"), ["tags.project"], "{r:#}");
    assert_eq!(
        changed("eks.nemo.nodegroups.system.nodegroup"),
        ["scaling.max", "scaling.desired"],
        "{r:#}"
    );
    assert_eq!(changed("fsx.data.file_system"), ["per_unit_storage_throughput"], "{r:#}");
    assert!(
        changed("fsx.data.client_rules.nemo").is_empty(),
        "the client rules are the ingress resource's, not drift: {r:#}"
    );
    assert_eq!(r["changed"].as_array().unwrap().len(), 4, "no other resource drifted: {r:#}");
    assert_eq!(r["deleted"].as_array().unwrap().len(), 1, "{r:#}");
    assert_eq!(r["deleted"][0]["address"], "vpc.main.public.us-west-2c");
    assert_eq!(r["unmanaged"].as_array().unwrap().len(), 1, "{r:#}");
    assert_eq!(r["unmanaged"][0]["id"], stray.as_str());
    assert_eq!(r["unmanaged"][0]["kind"], "aws_vpc");
    assert_eq!(r["pending"].as_array().unwrap().len(), 0, "{r:#}");

    // An ignore rule silences exactly its attribute: on the command line, then in the file.
    let (code, report) = aws.drift(&["p5.toml", "--ignore", "vpc.main.vpc.tags.project"]);
    assert_eq!(code, 2);
    let r = &report["stacks"][0];
    assert!(
        r["changed"].as_array().unwrap().iter().all(|c| c["address"] != "vpc.main.vpc"),
        "{r:#}"
    );
    assert_eq!(
        (r["changed"].as_array().unwrap().len(), r["ignored"].as_u64()),
        (3, Some(1)),
        "{r:#}"
    );
    aws.write(
        "p5.toml",
        &text.replacen("[vpc.main]\n", "[vpc.main]\nignore_changes = [\"tags.project\"]\n", 1),
    );
    let (_, report) = aws.drift(&["p5.toml"]);
    assert_eq!(report["stacks"][0]["changed"].as_array().unwrap().len(), 3, "{report:#}");
    aws.write("p5.toml", text);
    let (code, stderr) = aws.forge(&["drift", "p5.toml", "--ignore", "vpc.main.nope"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("`--ignore vpc.main.nope` names no resource"), "{stderr}");

    // A run holding the write lock is reported, not waited for and not counted as drift.
    let holder = serde_json::json!({
        "id": "l-1", "who": "ci@runner", "host": "elsewhere", "pid": 1,
        "operation": "up", "started": "2026-11-21T03:00:00Z"
    });
    aws.write("state/nemo-eks-p5.json.lock", &holder.to_string());
    let out = Command::from_std(aws.command(&["drift", "p5.toml"])).output().unwrap();
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(shown.contains("apply in progress since 2026-11-21T03:00:00Z"), "{shown}");
    assert!(
        shown.contains("~ fsx.data.security_group") && shown.contains("ingress: + "),
        "{shown}"
    );
    assert!(shown.contains("- vpc.main.public.us-west-2c"), "{shown}");
    std::fs::remove_file(aws.dir.path().join("state/nemo-eks-p5.json.lock")).unwrap();

    // `plan` shows the same drift and plans it back; `up` applies it.
    let (code, stderr) = aws.forge(&["plan", "p5.toml", "--detailed-exitcode"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("changed outside forge"), "{stderr}");
    let out = Command::from_std(aws.command(&["plan", "p5.toml"])).output().unwrap();
    let planned = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        planned.contains("~ fsx.data.security_group (aws_security_group) — changed outside forge"),
        "{planned}"
    );
    assert!(
        planned.contains("+ vpc.main.public.us-west-2c (aws_subnet) — deleted outside forge"),
        "{planned}"
    );
    aws.ok(&["up", "p5.toml", "--yes"]);
    runtime().block_on(ec2.delete_vpc().vpc_id(&stray).send()).unwrap();
    let (code, report) = aws.drift(&["p5.toml"]);
    assert_eq!(code, 0, "up brought every resource back: {report:#}");

    // An edit of the stack file alone is pending, not drift.
    aws.write("p5.toml", &text.replace("owner = \"ml-platform\"", "owner = \"research\""));
    let (code, report) = aws.drift(&["p5.toml"]);
    assert_eq!(code, 3, "{report:#}");
    assert!(report["stacks"][0]["pending"].as_array().unwrap().len() > 10, "{report:#}");
    aws.write("p5.toml", text);
    aws.ok(&["destroy", "p5.toml", "--yes"]);
}
