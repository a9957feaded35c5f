//! The EC2 network kinds and the `vpc` component against the emulator, and how forge meets faults
//! there: throttling, lost answers, server errors, kills mid-apply, leftovers, filters that widen.

use super::*;

#[test]
fn network_lifecycle_on_the_emulator() {
    let aws = Aws::new();
    aws.write("net.toml", NETWORK);
    aws.ok(&["up", "net.toml", "--yes"]);
    let up_calls = aws.calls();
    let (vpcs, subnets, groups) = tagged(&aws, "aws-network");
    assert_eq!(vpcs.len(), 1);
    assert_eq!(tag(vpcs[0].tags(), "Name"), Some("training-dev"));
    assert_eq!(tag(vpcs[0].tags(), "team"), Some("ml-platform"), "default_tags");
    assert_eq!(tag(vpcs[0].tags(), "forge:address"), Some("aws_vpc.main"));
    let mut zones: Vec<(&str, &str)> = subnets
        .iter()
        .map(|s| (s.cidr_block().unwrap(), s.availability_zone().unwrap()))
        .collect();
    zones.sort_unstable();
    assert_eq!(zones, [("10.0.0.0/20", "us-west-2c"), ("10.0.16.0/20", "us-west-2a")]);
    assert!(subnets.iter().all(|s| s.vpc_id() == vpcs[0].vpc_id()));

    assert_eq!(groups.len(), 1);
    let efa = &groups[0];
    let group_id = efa.group_id().unwrap();
    let only_self = |perms: &[aws_sdk_ec2::types::IpPermission]| only_self_rule(perms, group_id);
    assert!(
        only_self(efa.ip_permissions()),
        "ingress: all traffic from itself only: {:?}",
        efa.ip_permissions()
    );
    assert!(
        only_self(efa.ip_permissions_egress()),
        "egress: all traffic to itself only: {:?}",
        efa.ip_permissions_egress()
    );

    // A second plan: no changes, and not one mutating call; the refresh reads each kind once.
    aws.calls();
    let (code, stderr) = aws.forge(&["plan", "net.toml", "--detailed-exitcode"]);
    assert_eq!(code, 0, "{stderr}");
    let calls = aws.calls();
    assert!(mutating(&calls).is_empty());
    assert_eq!(
        calls.values().sum::<u64>(),
        4,
        "one Describe per kind (vpc, subnet, security group) and one for the groups' rules: {calls:?}"
    );

    // A subnet deleted outside forge is found by the refresh and created again.
    let system = subnets
        .iter()
        .find(|s| s.cidr_block() == Some("10.0.16.0/20"))
        .unwrap()
        .subnet_id()
        .unwrap()
        .to_owned();
    runtime().block_on(aws.ec2().delete_subnet().subnet_id(&system).send()).unwrap();
    let (code, stderr) = aws.forge(&["plan", "net.toml", "--detailed-exitcode"]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("- aws_subnet.system (aws_subnet, ") && stderr.contains(") deleted outside forge"),
        "{stderr}"
    );
    assert!(
        stderr.contains("+ aws_subnet.system (aws_subnet) — deleted outside forge"),
        "{stderr}"
    );
    aws.ok(&["up", "net.toml", "--yes"]);
    assert_eq!(tagged(&aws, "aws-network").1.len(), 2);
    aws.calls();

    // A tag change updates in place.
    aws.ok(&["up", "net.toml", "--yes", "--var", "env=prod"]);
    let calls = aws.calls();
    assert_eq!(mutating(&calls), ["ec2:CreateTags"], "{calls:?}");
    let (vpcs_after, _, _) = tagged(&aws, "aws-network");
    assert_eq!(vpcs_after[0].vpc_id(), vpcs[0].vpc_id());
    assert_eq!(tag(vpcs_after[0].tags(), "Name"), Some("training-prod"));

    // A rule change updates the group in place: only the new rule is authorized.
    aws.write(
        "net.toml",
        &NETWORK.replace(
            "ingress = [{ protocol = \"-1\", self = true }]",
            "ingress = [{ protocol = \"-1\", self = true }, { protocol = \"tcp\", from_port = 988, cidr_blocks = [\"10.0.0.0/16\"] }]",
        ),
    );
    aws.calls();
    aws.ok(&["up", "net.toml", "--yes", "--var", "env=prod"]);
    let calls = aws.calls();
    assert_eq!(mutating(&calls), ["ec2:AuthorizeSecurityGroupIngress"], "{calls:?}");
    let (_, _, groups_after) = tagged(&aws, "aws-network");
    assert_eq!(groups_after[0].group_id(), Some(group_id));
    let lustre = groups_after[0]
        .ip_permissions()
        .iter()
        .find(|p| p.from_port() == Some(988))
        .expect("the 988 rule");
    assert_eq!(lustre.ip_ranges()[0].cidr_ip(), Some("10.0.0.0/16"));

    // A CIDR change replaces the subnet.
    aws.write("net.toml", &NETWORK.replace("10.0.16.0/20", "10.0.32.0/20"));
    let out = aws.ok(&["up", "net.toml", "--yes"]);
    assert!(
        out.contains("-/+ aws_subnet.system (aws_subnet), replaced because cidr_block changed"),
        "{out}"
    );
    let (_, subnets, _) = tagged(&aws, "aws-network");
    let mut cidrs: Vec<&str> = subnets.iter().map(|s| s.cidr_block().unwrap()).collect();
    cidrs.sort_unstable();
    assert_eq!(cidrs, ["10.0.0.0/20", "10.0.32.0/20"]);

    aws.calls();
    aws.ok(&["destroy", "net.toml", "--yes"]);
    let destroy_calls = aws.calls();
    let (vpcs, subnets, groups) = tagged(&aws, "aws-network");
    assert!(
        vpcs.is_empty() && subnets.is_empty() && groups.is_empty(),
        "nothing tagged with the stack is left"
    );
    eprintln!(
        "API calls: up {}, destroy {}",
        up_calls.values().sum::<u64>(),
        destroy_calls.values().sum::<u64>()
    );
}

#[test]
fn injected_throttling_still_converges_without_duplicates() {
    let aws = Aws::new();
    aws.write("net.toml", NETWORK);
    let rule = format!(r#"[{{"account": "{}", "match": "ec2:*", "rate": 0.3, "seed": 7}}]"#, aws.account);
    aws.control("POST", &format!("/_forge/faults?account={}", aws.account), &rule);
    aws.ok(&["up", "net.toml", "--yes"]);
    aws.control("POST", &format!("/_forge/faults?account={}", aws.account), "[]");
    let (vpcs, subnets, groups) = tagged(&aws, "aws-network");
    assert_eq!((vpcs.len(), subnets.len(), groups.len()), (1, 2, 1), "exactly one of each");
    let (code, _) = aws.forge(&["plan", "net.toml", "--detailed-exitcode"]);
    assert_eq!(code, 0);
    aws.ok(&["destroy", "net.toml", "--yes"]);
}

/// forge's retry is the only one: a call that always answers 500 is sent exactly
/// `--max-attempts` times, a refresh's read as much as a create (the SDK's own retries, were
/// they on, would multiply them).
#[test]
fn a_call_that_always_fails_is_sent_max_attempts_times() {
    let aws = Aws::new();
    aws.write(
        "vpc.toml",
        "[stack]\nname = \"retries\"\n[aws_vpc.main]\ncidr_block = \"10.0.0.0/16\"\n",
    );
    aws.write(
        "other.toml",
        "[stack]\nname = \"retries-2\"\n[aws_vpc.main]\ncidr_block = \"10.1.0.0/16\"\n",
    );
    aws.ok(&["up", "vpc.toml", "--yes"]);
    let always_500 = |action: &str| {
        let rule = serde_json::json!([{ "match": action, "rate": 1.0, "kind": "error", "account": aws.account }]);
        aws.control("POST", &format!("/_forge/faults?account={}", aws.account), &rule.to_string());
        aws.calls();
    };
    always_500("ec2:DescribeVpcs");
    let (code, stderr) = aws.forge(&["plan", "vpc.toml", "--max-attempts", "3"]);
    assert_ne!(code, 0, "{stderr}");
    assert!(stderr.contains("describe_vpcs: InternalError"), "{stderr}");
    assert_eq!(aws.calls().get("ec2:DescribeVpcs"), Some(&3), "{stderr}");
    always_500("ec2:CreateVpc");
    let (code, stderr) = aws.forge(&["up", "other.toml", "--yes", "--max-attempts", "3"]);
    assert_ne!(code, 0, "{stderr}");
    assert_eq!(aws.calls().get("ec2:CreateVpc"), Some(&3), "{stderr}");
    aws.control("POST", &format!("/_forge/faults?account={}", aws.account), "[]");
    aws.ok(&["destroy", "vpc.toml", "--yes"]);
    aws.ok(&["destroy", "other.toml", "--yes"]);
}

/// A stack of `n` placement groups: one `CreatePlacementGroup` each, all ready at once.
fn placement_groups(stack: &str, n: usize) -> String {
    let mut text = format!("[stack]\nname = \"{stack}\"\n");
    for i in 0..n {
        text.push_str(&format!("[aws_placement_group.p{i}]\nname = \"{stack}-{i}\"\n"));
    }
    text
}

#[test]
fn paced_calls_fit_the_accounts_buckets_and_throttled_calls_never_fail() {
    let (paced, unpaced) = (Aws::new(), Aws::new());
    // EC2's bucket for a mutating action (50 at once, 5 a second), refilled 4 times faster.
    let rule = |account: &str| {
        format!(r#"{{"account": "{account}", "match": "ec2:*", "class": "mutating", "burst": 50, "refill": 20, "per_action": true}}"#)
    };
    aws_buckets(&format!("[{}, {}]", rule(&paced.account), rule(&unpaced.account)));
    for aws in [&paced, &unpaced] {
        aws.write("groups.toml", &placement_groups(&format!("groups-{}", aws.account), 90));
    }
    // Paced a little under the bucket (`--api-rate 3.5`: 17.5 a second against its 20): every
    // group made and deleted once, and at most a quarter of the calls throttled, creating or
    // deleting — without pacing, 90 calls at once against a burst of 20 throttle most of them.
    // How close to none it gets depends on the machine's load (the calls' varying latency
    // bunches them up at the emulator: a fresh-clone run saw 10 of 90); bench/throttle.py
    // measures it.
    paced.ok(&["up", "groups.toml", "--yes", "--api-rate", "3.5"]);
    paced.ok(&["destroy", "groups.toml", "--yes", "--api-rate", "3.5"]);
    let calls = paced.calls();
    let throttled =
        |calls: &std::collections::BTreeMap<String, u64>, action: &str| calls.get(&format!("throttled:ec2:{action}")).copied().unwrap_or(0);
    for action in ["CreatePlacementGroup", "DeletePlacementGroup"] {
        let throttled = throttled(&calls, action);
        assert_eq!(calls.get(&format!("ec2:{action}")).copied(), Some(90 + throttled), "{calls:?}");
        assert!(throttled * 4 <= 90, "{calls:?}");
    }
    let paced_creates = throttled(&calls, "CreatePlacementGroup");
    // Unpaced, 64 at once: the emulator throttles more often than paced, and with a single
    // attempt allowed every throttled create is still tried again until it goes through.
    unpaced.ok(&["up", "groups.toml", "--yes", "--api-rate", "off", "--max-attempts", "1"]);
    let calls = unpaced.calls();
    aws_buckets("[]");
    assert!(throttled(&calls, "CreatePlacementGroup") > paced_creates, "{calls:?}");
    assert_eq!(unpaced.ids("groups.toml").len(), 90);
    unpaced.ok(&["destroy", "groups.toml", "--yes"]);
}

/// Sets the emulator's token buckets (one list for every test: only this file's pacing test sets any).
fn aws_buckets(rules: &str) {
    crate::support::request("POST", "/_forge/buckets", rules);
}

#[test]
fn a_permanent_error_names_the_resource_and_the_cloud_message() {
    let aws = Aws::new();
    aws.write("bad.toml", "[stack]\nname = \"bad\"\n[aws_vpc.main]\ncidr_block = \"10.0.0.0/16\"\n[aws_subnet.outside]\nvpc_id = \"${aws_vpc.main.id}\"\ncidr_block = \"192.168.0.0/24\"\n");
    let (code, stderr) = aws.forge(&["up", "bad.toml", "--yes"]);
    assert_eq!(code, 1);
    assert!(stderr.contains("`aws_subnet.outside`: create failed"), "{stderr}");
    assert!(
        stderr.contains("InvalidSubnet.Range") && stderr.contains("region us-west-2"),
        "{stderr}"
    );
    let fixed = "[stack]\nname = \"bad\"\n[aws_vpc.main]\ncidr_block = \"10.0.0.0/16\"\n[aws_subnet.outside]\nvpc_id = \"${aws_vpc.main.id}\"\ncidr_block = \"10.0.1.0/24\"\n";
    aws.write("bad.toml", fixed);
    aws.ok(&["up", "bad.toml", "--yes"]);
    let (vpcs, subnets, _) = tagged(&aws, "bad");
    assert_eq!((vpcs.len(), subnets.len()), (1, 1), "the rerun resumed: no second VPC");
    aws.ok(&["destroy", "bad.toml", "--yes"]);
}

#[test]
fn the_vpc_component_builds_the_whole_network_and_destroys_it() {
    let aws = Aws::new();
    aws.write("vpc.toml", include_str!("../../../examples/vpc.toml"));
    let started = std::time::Instant::now();
    let out = aws.ok(&["up", "vpc.toml", "--yes"]);
    let up_time = started.elapsed();
    assert!(out.contains("Apply complete: 14 added"), "{out}");
    let up_calls = aws.calls();

    let ec2 = aws.ec2();
    let (vpcs, subnets, _) = tagged(&aws, "vpc");
    assert_eq!(vpcs.len(), 1);
    let vpc_id = vpcs[0].vpc_id().unwrap();
    let mut layout: Vec<(String, &str, Option<&str>, Option<&str>)> = subnets
        .iter()
        .map(|s| {
            (
                s.cidr_block().unwrap().to_owned(),
                s.availability_zone().unwrap(),
                tag(s.tags(), "kubernetes.io/role/elb"),
                tag(s.tags(), "kubernetes.io/role/internal-elb"),
            )
        })
        .collect();
    layout.sort();
    assert_eq!(
        layout,
        [
            ("10.0.0.0/20".to_owned(), "us-west-2a", None, Some("1")),
            ("10.0.16.0/20".to_owned(), "us-west-2b", None, Some("1")),
            ("10.0.253.0/24".to_owned(), "us-west-2c", Some("1"), None),
            ("10.0.254.0/24".to_owned(), "us-west-2b", Some("1"), None),
            ("10.0.255.0/24".to_owned(), "us-west-2a", Some("1"), None),
            ("10.0.32.0/20".to_owned(), "us-west-2c", None, Some("1")),
        ]
    );
    runtime().block_on(async {
        let igws = ec2.describe_internet_gateways().filters(stack_filter("vpc")).send().await.unwrap();
        let attached: Vec<_> = igws
            .internet_gateways()
            .iter()
            .flat_map(aws_sdk_ec2::types::InternetGateway::attachments)
            .map(|a| a.vpc_id().unwrap().to_owned())
            .collect();
        assert_eq!(attached, [vpc_id]);
        let nats = ec2.describe_nat_gateways().filter(stack_filter("vpc")).send().await.unwrap();
        let states: Vec<_> = nats.nat_gateways().iter().map(|n| n.state().unwrap().as_str().to_owned()).collect();
        assert_eq!(states, ["available"], "the NAT gateway was waited for");
        assert_eq!(
            ec2.describe_addresses()
                .filters(stack_filter("vpc"))
                .send()
                .await
                .unwrap()
                .addresses()
                .len(),
            1
        );
        let tables = ec2.describe_route_tables().filters(stack_filter("vpc")).send().await.unwrap();
        let default_routes: Vec<(bool, bool)> = tables
            .route_tables()
            .iter()
            .map(|t| {
                let route = t.routes().iter().find(|r| r.destination_cidr_block() == Some("0.0.0.0/0"));
                (
                    route.and_then(|r| r.gateway_id()).is_some_and(|g| g.starts_with("igw-")),
                    route.and_then(|r| r.nat_gateway_id()).is_some(),
                )
            })
            .collect();
        assert_eq!(
            default_routes.iter().filter(|(igw, _)| *igw).count(),
            1,
            "one public table routes to the internet gateway"
        );
        assert_eq!(
            default_routes.iter().filter(|(_, nat)| *nat).count(),
            3,
            "each zone's private table routes to the NAT"
        );
        let associated: usize = tables
            .route_tables()
            .iter()
            .map(|t| t.associations().iter().filter(|a| a.subnet_id().is_some()).count())
            .sum();
        assert_eq!(associated, 6);
    });
    let private: serde_json::Value = {
        let out = Command::cargo_bin("forge")
            .unwrap()
            .current_dir(aws.dir.path())
            .args(["output", "vpc.toml", "private_subnets", "-q"])
            .output()
            .unwrap();
        serde_json::from_slice(&out.stdout).unwrap()
    };
    assert_eq!(private.as_object().unwrap().len(), 3);

    aws.calls();
    let (code, stderr) = aws.forge(&["plan", "vpc.toml", "--detailed-exitcode"]);
    assert_eq!(code, 0, "{stderr}");
    let noop_calls = aws.calls();
    assert!(mutating(&noop_calls).is_empty());
    assert_eq!(noop_calls.len(), 6, "one read per kind for 14 resources of 6 kinds: {noop_calls:?}");

    aws.calls();
    let started = std::time::Instant::now();
    aws.ok(&["destroy", "vpc.toml", "--yes"]);
    let destroy_time = started.elapsed();
    let destroy_calls = aws.calls();
    let (vpcs, subnets, _) = tagged(&aws, "vpc");
    assert!(vpcs.is_empty() && subnets.is_empty());
    runtime().block_on(async {
        assert!(
            ec2.describe_internet_gateways()
                .filters(stack_filter("vpc"))
                .send()
                .await
                .unwrap()
                .internet_gateways()
                .is_empty()
        );
        assert!(
            ec2.describe_addresses()
                .filters(stack_filter("vpc"))
                .send()
                .await
                .unwrap()
                .addresses()
                .is_empty()
        );
        assert!(
            ec2.describe_route_tables()
                .filters(stack_filter("vpc"))
                .send()
                .await
                .unwrap()
                .route_tables()
                .is_empty()
        );
        let nats = ec2.describe_nat_gateways().filter(stack_filter("vpc")).send().await.unwrap();
        assert!(
            nats.nat_gateways()
                .iter()
                .all(|n| n.state().map(aws_sdk_ec2::types::NatGatewayState::as_str) == Some("deleted"))
        );
    });
    eprintln!(
        "examples/vpc.toml on moto: up {:.2}s, {} API calls ({} mutating); no-op plan {} calls; destroy {:.2}s, {} calls",
        up_time.as_secs_f64(),
        up_calls.values().sum::<u64>(),
        mutating(&up_calls).iter().map(|c| up_calls[*c]).sum::<u64>(),
        noop_calls.values().sum::<u64>(),
        destroy_time.as_secs_f64(),
        destroy_calls.values().sum::<u64>()
    );
}

#[test]
fn efa_launch_template_and_cluster_placement_group() {
    let aws = Aws::new();
    let text = include_str!("../../../examples/efa-launch-template.toml");
    aws.write("efa.toml", text);
    aws.ok(&["up", "efa.toml", "--yes"]);
    let ec2 = aws.ec2();
    let (_, _, groups) = tagged(&aws, "efa-nodes");
    let sg = groups[0].group_id().unwrap().to_owned();
    let versions = |ec2: &aws_sdk_ec2::Client| {
        runtime().block_on(async {
            let found = ec2
                .describe_launch_templates()
                .filters(stack_filter("efa-nodes"))
                .send()
                .await
                .unwrap();
            let id = found.launch_templates()[0].launch_template_id().unwrap().to_owned();
            ec2.describe_launch_template_versions()
                .launch_template_id(id)
                .send()
                .await
                .unwrap()
                .launch_template_versions()
                .to_vec()
        })
    };
    let all = versions(&ec2);
    assert_eq!(all.len(), 1);
    let data = all[0].launch_template_data().unwrap();
    let nics: Vec<(i32, i32, &str, Vec<&str>)> = data
        .network_interfaces()
        .iter()
        .map(|n| {
            (
                n.network_card_index().unwrap(),
                n.device_index().unwrap(),
                n.interface_type().unwrap(),
                n.groups().iter().map(String::as_str).collect(),
            )
        })
        .collect();
    assert_eq!(
        nics,
        [
            (0, 0, "efa", vec![sg.as_str()]),
            (1, 1, "efa", vec![sg.as_str()]),
            (2, 1, "efa", vec![sg.as_str()]),
            (3, 1, "efa", vec![sg.as_str()])
        ]
    );
    assert_eq!(data.placement().and_then(|p| p.group_name()), Some("efa-nodes-gpu"));
    assert_eq!(
        data.instance_type().map(aws_sdk_ec2::types::InstanceType::as_str),
        Some("p4d.24xlarge")
    );
    runtime().block_on(async {
        let pgs = ec2.describe_placement_groups().group_names("efa-nodes-gpu").send().await.unwrap();
        assert_eq!(
            pgs.placement_groups()[0]
                .strategy()
                .map(aws_sdk_ec2::types::PlacementStrategy::as_str),
            Some("cluster")
        );
    });

    aws.write("efa.toml", &text.replace("echo efa", "echo efa v2"));
    let out = aws.ok(&["up", "efa.toml", "--yes"]);
    assert!(
        out.contains("~ aws_launch_template.gpu"),
        "a change is a new version, in place: {out}"
    );
    let all = versions(&ec2);
    assert_eq!(all.len(), 2);
    assert!(
        all.iter()
            .any(|v| v.version_number() == Some(2) && v.default_version() == Some(true)),
        "the new version is the default"
    );

    aws.ok(&["destroy", "efa.toml", "--yes"]);
    runtime().block_on(async {
        assert!(
            ec2.describe_launch_templates()
                .filters(stack_filter("efa-nodes"))
                .send()
                .await
                .unwrap()
                .launch_templates()
                .is_empty()
        );
        assert!(
            ec2.describe_placement_groups()
                .filters(stack_filter("efa-nodes"))
                .send()
                .await
                .unwrap()
                .placement_groups()
                .is_empty()
        );
    });
    let (vpcs, subnets, groups) = tagged(&aws, "efa-nodes");
    assert!(vpcs.is_empty() && subnets.is_empty() && groups.is_empty());
}

#[test]
fn a_delete_blocked_by_leftovers_names_them_and_the_rerun_finishes() {
    let aws = Aws::new();
    aws.write("v.toml", "[stack]\nname = \"left\"\n[aws_vpc.main]\ncidr_block = \"10.9.0.0/16\"\n");
    aws.ok(&["up", "v.toml", "--yes"]);
    let ec2 = aws.ec2();
    let vpc = tagged(&aws, "left").0[0].vpc_id().unwrap().to_owned();
    // What Kubernetes leaves behind: a subnet and a load balancer's network interface.
    let (subnet, eni) = runtime().block_on(async {
        let subnet = ec2
            .create_subnet()
            .vpc_id(&vpc)
            .cidr_block("10.9.1.0/24")
            .send()
            .await
            .unwrap()
            .subnet()
            .unwrap()
            .subnet_id()
            .unwrap()
            .to_owned();
        let eni = ec2
            .create_network_interface()
            .subnet_id(&subnet)
            .description("ELB app/k8s-default-web")
            .send()
            .await
            .unwrap();
        (subnet, eni.network_interface().unwrap().network_interface_id().unwrap().to_owned())
    });
    let (code, stderr) = aws.forge(&["destroy", "v.toml", "--yes", "--max-attempts", "2"]);
    assert_eq!(code, 1);
    assert!(stderr.contains("`aws_vpc.main`: delete failed"), "{stderr}");
    assert!(
        stderr.contains("DependencyViolation") && stderr.contains(&format!("still in use by {eni} (ELB app/k8s-default-web)")),
        "{stderr}"
    );
    assert_eq!(tagged(&aws, "left").0.len(), 1, "the VPC is still recorded and still there");

    runtime().block_on(async {
        ec2.delete_network_interface().network_interface_id(&eni).send().await.unwrap();
        ec2.delete_subnet().subnet_id(&subnet).send().await.unwrap();
    });
    aws.ok(&["destroy", "v.toml", "--yes"]);
    assert!(tagged(&aws, "left").0.is_empty());
}

/// SIGKILL of `forge up` at seeded random moments (NAT gateway waits included), then a rerun:
/// exactly one of everything exists on the emulator, tagged with the stack — no duplicate, no
/// orphan — and the state matches it.
#[test]
fn sigkill_during_up_then_rerun_leaves_exactly_one_of_everything() {
    let aws = Aws::new();
    aws.write("vpc.toml", include_str!("../../../examples/vpc.toml"));
    let mut moments = crate::support::Moments::new(0xfeed_5eed);
    let mut killed_mid_call = 0;
    for round in 0..4 {
        let child = crate::support::quiet(&mut aws.command(&["up", "vpc.toml", "--yes"]));
        crate::support::kill_after(child, moments.next(100, 900));
        let state = forge::state::LocalStore::new(aws.dir.path().join("state/vpc.json"))
            .load("vpc")
            .unwrap()
            .state;
        killed_mid_call += usize::from(state.resources.values().any(|r| r.status == forge::state::Status::PendingCreate));
        if round % 2 == 1 {
            aws.ok(&["destroy", "vpc.toml", "--yes"]);
        }
    }
    assert!(killed_mid_call > 0, "at least one kill landed while a create was in flight");
    aws.ok(&["up", "vpc.toml", "--yes"]);
    let (vpcs, subnets, _) = tagged(&aws, "vpc");
    assert_eq!((vpcs.len(), subnets.len()), (1, 6));
    let ec2 = aws.ec2();
    runtime().block_on(async {
        assert_eq!(
            ec2.describe_internet_gateways()
                .filters(stack_filter("vpc"))
                .send()
                .await
                .unwrap()
                .internet_gateways()
                .len(),
            1
        );
        assert_eq!(
            ec2.describe_addresses()
                .filters(stack_filter("vpc"))
                .send()
                .await
                .unwrap()
                .addresses()
                .len(),
            1
        );
        assert_eq!(
            ec2.describe_route_tables()
                .filters(stack_filter("vpc"))
                .send()
                .await
                .unwrap()
                .route_tables()
                .len(),
            4
        );
        let nats = ec2.describe_nat_gateways().filter(stack_filter("vpc")).send().await.unwrap();
        let live: Vec<_> = nats
            .nat_gateways()
            .iter()
            .filter(|n| n.state().map(aws_sdk_ec2::types::NatGatewayState::as_str) != Some("deleted"))
            .collect();
        assert_eq!(live.len(), 1, "one NAT gateway");
    });
    let (code, stderr) = aws.forge(&["plan", "vpc.toml", "--detailed-exitcode"]);
    assert_eq!(code, 0, "the state matches the cloud: {stderr}");
    aws.ok(&["destroy", "vpc.toml", "--yes"]);
    assert!(tagged(&aws, "vpc").0.is_empty());
}

#[test]
fn a_rule_added_by_hand_is_not_sent_again_and_the_new_one_is_added() {
    let aws = Aws::new();
    let stack = |ingress: &str| {
        format!(
            "[stack]\nname = \"sg\"\n[aws_vpc.main]\ncidr_block = \"10.2.0.0/16\"\n[aws_security_group.g]\nname = \"g\"\nvpc_id = \"${{aws_vpc.main.id}}\"\ningress = [{ingress}]\n"
        )
    };
    aws.write(
        "sg.toml",
        &stack("{ protocol = \"tcp\", from_port = 22, cidr_blocks = [\"10.0.0.0/8\"] }"),
    );
    aws.ok(&["up", "sg.toml", "--yes"]);
    let ec2 = aws.ec2();
    let group = tagged(&aws, "sg").2[0].group_id().unwrap().to_owned();
    // Someone adds the 988 rule by hand; then the stack declares it and a new one.
    runtime().block_on(async {
        let perm = aws_sdk_ec2::types::IpPermission::builder()
            .ip_protocol("tcp")
            .from_port(988)
            .to_port(988)
            .ip_ranges(aws_sdk_ec2::types::IpRange::builder().cidr_ip("10.0.0.0/8").build())
            .build();
        ec2.authorize_security_group_ingress()
            .group_id(&group)
            .ip_permissions(perm)
            .send()
            .await
            .unwrap();
    });
    aws.write(
        "sg.toml",
        &stack("{ protocol = \"tcp\", from_port = 22, cidr_blocks = [\"10.0.0.0/8\"] }, { protocol = \"tcp\", from_port = 988, cidr_blocks = [\"10.0.0.0/8\"] }, { protocol = \"tcp\", from_port = 1018, to_port = 1023, cidr_blocks = [\"10.0.0.0/8\"] }"),
    );
    // Even planned from the state alone, the update starts from the group's live rules: the
    // hand-made rule is not sent again, and the new one goes in one call.
    aws.calls();
    aws.ok(&["up", "sg.toml", "--yes", "--refresh=false"]);
    let calls = aws.calls();
    assert_eq!(
        calls.get("ec2:AuthorizeSecurityGroupIngress"),
        Some(&1),
        "one call for what is new: {calls:?}"
    );
    assert_eq!(calls.get("ec2:DescribeSecurityGroupRules"), Some(&1), "{calls:?}");
    let mut ports: Vec<(i32, i32)> = tagged(&aws, "sg").2[0]
        .ip_permissions()
        .iter()
        .map(|p| (p.from_port().unwrap(), p.to_port().unwrap()))
        .collect();
    ports.sort_unstable();
    assert_eq!(ports, [(22, 22), (988, 988), (1018, 1023)]);
    aws.ok(&["destroy", "sg.toml", "--yes"]);
}

/// Creates whose answers are lost (the emulator does the work, then answers 500): forge's
/// retries find what the first attempt made by its token instead of making a second one.
#[test]
fn lost_create_responses_make_no_duplicates() {
    let aws = Aws::new();
    aws.write("net.toml", NETWORK);
    let rule = format!(
        r#"[{{"account": "{}", "match": "ec2:Create*", "rate": 0.5, "seed": 11, "when": "after"}}, {{"account": "{}", "match": "ec2:AllocateAddress", "rate": 0.5, "seed": 12, "when": "after"}}]"#,
        aws.account, aws.account
    );
    aws.control("POST", &format!("/_forge/faults?account={}", aws.account), &rule);
    aws.calls();
    aws.ok(&["up", "net.toml", "--yes"]);
    aws.control("POST", &format!("/_forge/faults?account={}", aws.account), "[]");
    let lost: u64 = aws
        .calls()
        .iter()
        .filter(|(k, _)| k.starts_with("fault:ec2:Create"))
        .map(|(_, v)| v)
        .sum();
    assert!(lost > 0, "some create answers were lost");
    let (vpcs, subnets, groups) = tagged(&aws, "aws-network");
    assert_eq!(
        (vpcs.len(), subnets.len(), groups.len()),
        (1, 2, 1),
        "exactly one of each, though creates were answered with errors"
    );
    let (code, _) = aws.forge(&["plan", "net.toml", "--detailed-exitcode"]);
    assert_eq!(code, 0);
    aws.ok(&["destroy", "net.toml", "--yes"]);
    let (vpcs, subnets, groups) = tagged(&aws, "aws-network");
    assert!(vpcs.is_empty() && subnets.is_empty() && groups.is_empty());
}

#[test]
fn a_route_added_by_hand_is_pointed_where_the_stack_says() {
    let aws = Aws::new();
    let stack = |routes: &str| {
        format!(
            "[stack]\nname = \"rt\"\n[aws_vpc.main]\ncidr_block = \"10.4.0.0/16\"\n[aws_internet_gateway.gw]\nvpc_id = \"${{aws_vpc.main.id}}\"\n[aws_route_table.public]\nvpc_id = \"${{aws_vpc.main.id}}\"\nroutes = [{routes}]\n"
        )
    };
    aws.write("rt.toml", &stack(""));
    aws.ok(&["up", "rt.toml", "--yes"]);
    let ec2 = aws.ec2();
    let table = runtime().block_on(async {
        let found = ec2.describe_route_tables().filters(stack_filter("rt")).send().await.unwrap();
        found.route_tables()[0].route_table_id().unwrap().to_owned()
    });
    let other = runtime().block_on(async {
        let other = ec2
            .create_internet_gateway()
            .send()
            .await
            .unwrap()
            .internet_gateway()
            .unwrap()
            .internet_gateway_id()
            .unwrap()
            .to_owned();
        ec2.create_route()
            .route_table_id(&table)
            .destination_cidr_block("10.8.0.0/16")
            .gateway_id(&other)
            .send()
            .await
            .unwrap();
        other
    });
    aws.write(
        "rt.toml",
        &stack("{ cidr_block = \"10.8.0.0/16\", gateway_id = \"${aws_internet_gateway.gw.id}\" }"),
    );
    aws.ok(&["up", "rt.toml", "--yes"]);
    let (target, igw) = runtime().block_on(async {
        let found = ec2.describe_route_tables().route_table_ids(&table).send().await.unwrap();
        let route = found.route_tables()[0]
            .routes()
            .iter()
            .find(|r| r.destination_cidr_block() == Some("10.8.0.0/16"))
            .cloned()
            .unwrap();
        let igw = ec2
            .describe_internet_gateways()
            .filters(stack_filter("rt"))
            .send()
            .await
            .unwrap()
            .internet_gateways()[0]
            .internet_gateway_id()
            .unwrap()
            .to_owned();
        (route.gateway_id().unwrap().to_owned(), igw)
    });
    assert_eq!(target, igw);
    assert_ne!(target, other);
    aws.ok(&["destroy", "rt.toml", "--yes"]);
}

/// forge adopts only what carries its own token, checked on the object the API returns: here
/// the server ignores DescribeNatGateways' filters and answers with every NAT gateway of the
/// account, someone else's among them, and forge still makes its own.
#[test]
fn a_nat_gateway_that_a_widened_filter_returns_is_not_adopted() {
    let aws = Aws::new();
    let ec2 = aws.ec2();
    let foreign = runtime().block_on(async {
        let vpc = ec2.create_vpc().cidr_block("10.9.0.0/16").send().await.unwrap();
        let vpc = vpc.vpc().unwrap().vpc_id().unwrap();
        let subnet = ec2.create_subnet().vpc_id(vpc).cidr_block("10.9.0.0/24").send().await.unwrap();
        let subnet = subnet.subnet().unwrap().subnet_id().unwrap();
        let eip = ec2
            .allocate_address()
            .domain(aws_sdk_ec2::types::DomainType::Vpc)
            .send()
            .await
            .unwrap();
        let made = ec2
            .create_nat_gateway()
            .subnet_id(subnet)
            .allocation_id(eip.allocation_id().unwrap())
            .send()
            .await
            .unwrap();
        made.nat_gateway().unwrap().nat_gateway_id().unwrap().to_owned()
    });
    let rule = serde_json::json!([{ "match": "ec2:DescribeNatGateways", "account": aws.account }]);
    aws.control("POST", "/_forge/ignore_filters", &rule.to_string());
    aws.write("vpc.toml", include_str!("../../../examples/vpc.toml"));
    let (code, stderr) = aws.forge(&["up", "vpc.toml", "--yes"]);
    aws.control("POST", "/_forge/ignore_filters", "[]");
    assert_eq!(code, 0, "{stderr}");
    let ids = aws.ids("vpc.toml");
    let nat = ids.iter().find(|(address, _)| address.contains(".nat.")).map(|(_, id)| id).unwrap();
    assert_ne!(nat, &foreign, "someone else's NAT gateway was adopted");
    aws.ok(&["destroy", "vpc.toml", "--yes"]);
}

/// An answer that is not the service's own (an HTML page from a proxy) reads as one line: the
/// call, the HTTP status and the first words of the body, never the SDK's dump of the response.
#[test]
fn an_answer_that_is_not_the_apis_reads_as_one_line() {
    let aws = Aws::new();
    aws.write("vpc.toml", include_str!("../../../examples/vpc.toml"));
    let rule = serde_json::json!([{ "match": "ec2:DescribeVpcs", "rate": 1.0, "kind": "html", "account": aws.account }]);
    aws.control("POST", &format!("/_forge/faults?account={}", aws.account), &rule.to_string());
    let (code, stderr) = aws.forge(&["up", "vpc.toml", "--yes", "--max-attempts", "1"]);
    aws.control("POST", &format!("/_forge/faults?account={}", aws.account), "[]");
    assert_ne!(code, 0);
    assert!(
        stderr.contains("DescribeVpcs: HTTP 502, not an answer from the API: <html><body>Bad Gateway</body></html>"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("headers") && !stderr.contains("ServiceError"),
        "no debug dump: {stderr}"
    );
}
