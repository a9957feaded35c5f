//! AWS kinds end to end: the real `forge` binary and the official SDK against moto (the repo's
//! launcher, tests/moto/launcher.py). Each test has its own account, so tests run in parallel
//! on one emulator; forge sees moto only through the standard AWS environment.
#![cfg(feature = "aws")]

use assert_cmd::Command;
use aws_sdk_ec2::types::Filter;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Stdio;

mod support;
use support::launcher_url as moto_url;

/// One test's world: a fresh account on the emulator and a working directory.
struct Aws {
    account: String,
    dir: tempfile::TempDir,
}

impl Aws {
    fn new() -> Self {
        Aws {
            account: support::fresh_account(),
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    /// `forge ARGS` pointed at the emulator through the standard AWS environment only.
    fn command(&self, args: &[&str]) -> std::process::Command {
        support::aws_forge(self.dir.path(), &self.account, args)
    }

    fn forge(&self, args: &[&str]) -> (i32, String) {
        let out = Command::from_std(self.command(args)).output().unwrap();
        (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stderr).into_owned())
    }

    /// `forge drift … --json`: the exit code and the report.
    fn drift(&self, args: &[&str]) -> (i32, serde_json::Value) {
        let mut all = vec!["drift"];
        all.extend_from_slice(args);
        all.push("--json");
        let out = Command::from_std(self.command(&all)).output().unwrap();
        let report =
            serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("forge {all:?}: {e}\n{}", String::from_utf8_lossy(&out.stderr)));
        (out.status.code().unwrap_or(-1), report)
    }

    /// The id of each resource in the state of `file`, by address (`forge state list`).
    fn ids(&self, file: &str) -> BTreeMap<String, String> {
        let out = Command::from_std(self.command(&["state", "list", file])).output().unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| {
                let cols: Vec<&str> = l.split('\t').collect();
                Some((cols.first()?.to_string(), cols.get(3)?.to_string()))
            })
            .collect()
    }

    fn ok(&self, args: &[&str]) -> String {
        let (code, stderr) = self.forge(args);
        assert_eq!(code, 0, "forge {args:?}:\n{stderr}");
        stderr
    }

    fn control(&self, method: &str, path: &str, body: &str) -> String {
        support::request(method, path, body).1
    }

    /// API calls this test's account made, by `service:Action`; clears the counter.
    fn calls(&self) -> BTreeMap<String, u64> {
        let body = self.control("GET", &format!("/_forge/calls?account={}", self.account), "");
        self.control("POST", &format!("/_forge/reset?account={}", self.account), "{}");
        serde_json::from_str(&body).unwrap()
    }

    /// The SDK configuration of this test's account on the emulator.
    fn sdk_config(&self) -> aws_config::SdkConfig {
        let creds = aws_sdk_ec2::config::Credentials::new(&self.account, "secret", None, None, "test");
        aws_config::SdkConfig::builder()
            .behavior_version(aws_config::BehaviorVersion::latest())
            .region(aws_config::Region::new("us-west-2"))
            .endpoint_url(moto_url())
            .credentials_provider(aws_sdk_ec2::config::SharedCredentialsProvider::new(creds))
            .build()
    }

    fn ec2(&self) -> aws_sdk_ec2::Client {
        aws_sdk_ec2::Client::new(&self.sdk_config())
    }

    fn iam(&self) -> aws_sdk_iam::Client {
        aws_sdk_iam::Client::new(&self.sdk_config())
    }

    fn eks(&self) -> aws_sdk_eks::Client {
        aws_sdk_eks::Client::new(&self.sdk_config())
    }

    fn fsx(&self) -> aws_sdk_fsx::Client {
        aws_sdk_fsx::Client::new(&self.sdk_config())
    }

    fn cloudformation(&self) -> aws_sdk_cloudformation::Client {
        aws_sdk_cloudformation::Client::new(&self.sdk_config())
    }

    fn pcs(&self) -> aws_sdk_pcs::Client {
        aws_sdk_pcs::Client::new(&self.sdk_config())
    }

    /// The API calls this test's account made so far, without clearing the counter.
    fn peek_calls(&self) -> BTreeMap<String, u64> {
        serde_json::from_str(&self.control("GET", &format!("/_forge/calls?account={}", self.account), "")).unwrap()
    }

    /// The FSx file systems tagged with the stack, as (id, capacity GiB, throughput per TiB).
    fn file_systems(&self, stack: &str) -> Vec<(String, i32, Option<i32>)> {
        let out = runtime().block_on(self.fsx().describe_file_systems().send()).unwrap();
        out.file_systems()
            .iter()
            .filter(|fs| fs.tags().iter().any(|t| t.key() == Some("forge:stack") && t.value() == Some(stack)))
            .map(|fs| {
                (
                    fs.file_system_id().unwrap().to_owned(),
                    fs.storage_capacity().unwrap(),
                    fs.lustre_configuration().and_then(|l| l.per_unit_storage_throughput()),
                )
            })
            .collect()
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

fn stack_filter(stack: &str) -> Filter {
    Filter::builder().name("tag:forge:stack").values(stack).build()
}

/// What exists in the account with the stack's tag: (vpcs, subnets by cidr, security groups).
fn tagged(
    aws: &Aws,
    stack: &str,
) -> (
    Vec<aws_sdk_ec2::types::Vpc>,
    Vec<aws_sdk_ec2::types::Subnet>,
    Vec<aws_sdk_ec2::types::SecurityGroup>,
) {
    let ec2 = aws.ec2();
    runtime().block_on(async {
        let vpcs = ec2
            .describe_vpcs()
            .filters(stack_filter(stack))
            .send()
            .await
            .unwrap()
            .vpcs()
            .to_vec();
        let subnets = ec2
            .describe_subnets()
            .filters(stack_filter(stack))
            .send()
            .await
            .unwrap()
            .subnets()
            .to_vec();
        let groups = ec2
            .describe_security_groups()
            .filters(stack_filter(stack))
            .send()
            .await
            .unwrap()
            .security_groups()
            .to_vec();
        (vpcs, subnets, groups)
    })
}

/// Whether `perms` is exactly one rule: all traffic, to or from the group `group_id` itself.
fn only_self_rule(perms: &[aws_sdk_ec2::types::IpPermission], group_id: &str) -> bool {
    perms.len() == 1
        && perms[0].ip_protocol() == Some("-1")
        && perms[0].ip_ranges().is_empty()
        && perms[0]
            .user_id_group_pairs()
            .iter()
            .map(|p| p.group_id().unwrap())
            .collect::<Vec<_>>()
            == [group_id]
}

fn tag<'a>(tags: &'a [aws_sdk_ec2::types::Tag], key: &str) -> Option<&'a str> {
    tags.iter().find(|t| t.key() == Some(key)).and_then(|t| t.value())
}

const NETWORK: &str = include_str!("../examples/aws-network.toml");

fn mutating(calls: &BTreeMap<String, u64>) -> Vec<&String> {
    // Query and JSON protocols name the action; REST ones (EKS) the method and path.
    let reads = ["Describe", "List", "Get", "GET "];
    calls
        .keys()
        .filter(|c| !c.starts_with("fault:") && !reads.iter().any(|r| c.split_once(':').map_or("", |(_, a)| a).starts_with(r)))
        .collect()
}

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
    zones.sort();
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
    cidrs.sort();
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
    // Paced to the same bucket (`--api-rate 4`): at most 5% of the calls throttled (the
    // bucket's edge: forge's clock and the emulator's start a connection apart), creating or
    // deleting, and every group made and deleted once.
    paced.ok(&["up", "groups.toml", "--yes", "--api-rate", "4"]);
    paced.ok(&["destroy", "groups.toml", "--yes", "--api-rate", "4"]);
    let calls = paced.calls();
    for action in ["CreatePlacementGroup", "DeletePlacementGroup"] {
        let throttled = calls.get(&format!("throttled:ec2:{action}")).copied().unwrap_or(0);
        assert_eq!(calls.get(&format!("ec2:{action}")).copied(), Some(90 + throttled), "{calls:?}");
        assert!(throttled * 20 <= 90, "{calls:?}");
    }
    // Unpaced, 64 at once: the emulator throttles, and with a single attempt allowed every
    // throttled create is still tried again until it goes through.
    unpaced.ok(&["up", "groups.toml", "--yes", "--api-rate", "off", "--max-attempts", "1"]);
    let calls = unpaced.calls();
    aws_buckets("[]");
    assert!(calls.get("throttled:ec2:CreatePlacementGroup").is_some_and(|n| *n > 0), "{calls:?}");
    assert_eq!(unpaced.ids("groups.toml").len(), 90);
    unpaced.ok(&["destroy", "groups.toml", "--yes"]);
}

/// Sets the emulator's token buckets (one list for every test: only this file's pacing test sets any).
fn aws_buckets(rules: &str) {
    support::request("POST", "/_forge/buckets", rules);
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
    aws.write("vpc.toml", include_str!("../examples/vpc.toml"));
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
            .flat_map(|g| g.attachments())
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
        assert!(nats.nat_gateways().iter().all(|n| n.state().map(|s| s.as_str()) == Some("deleted")));
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
fn iam_roles_policies_profiles_and_oidc_on_the_emulator() {
    let aws = Aws::new();
    aws.write("iam.toml", include_str!("../examples/eks-iam.toml"));
    aws.ok(&["up", "iam.toml", "--yes"]);
    let iam = aws.iam();
    let attached = |role: &str| {
        runtime().block_on(async {
            let mut arns: Vec<String> = iam
                .list_attached_role_policies()
                .role_name(role)
                .send()
                .await
                .unwrap()
                .attached_policies()
                .iter()
                .map(|p| p.policy_arn().unwrap().to_owned())
                .collect();
            arns.sort();
            arns
        })
    };
    assert_eq!(attached("train-cluster"), ["arn:aws:iam::aws:policy/AmazonEKSClusterPolicy"]);
    let node = attached("train-node");
    assert_eq!(node.len(), 4, "{node:?}");
    assert!(
        node.iter().any(|a| a.ends_with(":policy/train-fsx-csi")),
        "the customer policy is attached by reference: {node:?}"
    );
    runtime().block_on(async {
        let role = iam.get_role().role_name("train-node").send().await.unwrap();
        let tags: Vec<(&str, &str)> = role.role().unwrap().tags().iter().map(|t| (t.key(), t.value())).collect();
        assert!(tags.contains(&("forge:address", "aws_iam_role.node")), "{tags:?}");
        assert_eq!(
            iam.list_role_policies()
                .role_name("train-node")
                .send()
                .await
                .unwrap()
                .policy_names(),
            ["logs"]
        );
        let profile = iam.get_instance_profile().instance_profile_name("train-node").send().await.unwrap();
        assert_eq!(
            profile
                .instance_profile()
                .unwrap()
                .roles()
                .iter()
                .map(|r| r.role_name())
                .collect::<Vec<_>>(),
            ["train-node"]
        );
        assert_eq!(
            iam.list_open_id_connect_providers()
                .send()
                .await
                .unwrap()
                .open_id_connect_provider_list()
                .len(),
            1
        );
    });

    aws.calls();
    let (code, _) = aws.forge(&["plan", "iam.toml", "--detailed-exitcode"]);
    assert_eq!(code, 0);
    let calls = aws.calls();
    assert!(mutating(&calls).is_empty());
    assert_eq!(calls.len(), 4, "one list per IAM kind: {calls:?}");

    // A policy document change publishes a new default version, in place.
    aws.write(
        "iam.toml",
        &include_str!("../examples/eks-iam.toml").replace("\"fsx:TagResource\"", "\"fsx:TagResource\", \"fsx:UpdateFileSystem\""),
    );
    let out = aws.ok(&["up", "iam.toml", "--yes"]);
    assert!(out.contains("~ aws_iam_policy.fsx_csi"), "{out}");
    assert!(aws.calls().contains_key("iam:CreatePolicyVersion"));

    // Replacing a policy that a role uses (its description forces replacement): the old one is
    // detached and deleted, the new one attached again.
    let described = include_str!("../examples/eks-iam.toml").replace("What the FSx for Lustre CSI driver needs", "FSx CSI driver");
    aws.write("iam.toml", &described);
    let out = aws.ok(&["up", "iam.toml", "--yes"]);
    assert!(out.contains("-/+ aws_iam_policy.fsx_csi"), "{out}");
    assert!(
        attached("train-node").iter().any(|a| a.ends_with(":policy/train-fsx-csi")),
        "the role uses the new policy"
    );
    aws.write("iam.toml", include_str!("../examples/eks-iam.toml"));
    aws.ok(&["up", "iam.toml", "--yes"]);

    // Tags follow the stack both ways: added, then removed, in place.
    let role_tag = |key: &str| {
        runtime().block_on(async {
            let role = iam.get_role().role_name("train-node").send().await.unwrap();
            role.role()
                .unwrap()
                .tags()
                .iter()
                .find(|t| t.key() == key)
                .map(|t| t.value().to_owned())
        })
    };
    let tagged_text = include_str!("../examples/eks-iam.toml")
        .replace("region = \"us-west-2\"", "region = \"us-west-2\"\ndefault_tags = { team = \"ml\" }");
    aws.write("iam.toml", &tagged_text);
    aws.ok(&["up", "iam.toml", "--yes"]);
    assert_eq!(role_tag("team").as_deref(), Some("ml"));
    aws.write("iam.toml", include_str!("../examples/eks-iam.toml"));
    aws.ok(&["up", "iam.toml", "--yes"]);
    assert_eq!(role_tag("team"), None, "a tag removed from the stack is removed from the role");
    assert_eq!(role_tag("forge:stack").as_deref(), Some("eks-iam"));

    aws.ok(&["destroy", "iam.toml", "--yes"]);
    runtime().block_on(async {
        for role in ["train-cluster", "train-node"] {
            assert!(iam.get_role().role_name(role).send().await.is_err(), "{role} is gone");
        }
        assert!(iam.get_instance_profile().instance_profile_name("train-node").send().await.is_err());
        let local = iam
            .list_policies()
            .scope(aws_sdk_iam::types::PolicyScopeType::Local)
            .send()
            .await
            .unwrap();
        assert!(local.policies().is_empty(), "the customer policy is gone");
        assert!(
            iam.list_open_id_connect_providers()
                .send()
                .await
                .unwrap()
                .open_id_connect_provider_list()
                .is_empty()
        );
    });
}

#[test]
fn efa_launch_template_and_cluster_placement_group() {
    let aws = Aws::new();
    let text = include_str!("../examples/efa-launch-template.toml");
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
    assert_eq!(data.instance_type().map(|t| t.as_str()), Some("p4d.24xlarge"));
    runtime().block_on(async {
        let pgs = ec2.describe_placement_groups().group_names("efa-nodes-gpu").send().await.unwrap();
        assert_eq!(pgs.placement_groups()[0].strategy().map(|s| s.as_str()), Some("cluster"));
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
    aws.write("vpc.toml", include_str!("../examples/vpc.toml"));
    let mut seed: u64 = 0xfeed_5eed;
    let mut killed_mid_call = 0;
    for round in 0..4 {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let mut child = aws
            .command(&["up", "vpc.toml", "--yes"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(100 + (seed >> 33) % 900));
        let _ = child.kill();
        child.wait().unwrap();
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
            .filter(|n| n.state().map(|s| s.as_str()) != Some("deleted"))
            .collect();
        assert_eq!(live.len(), 1, "one NAT gateway");
    });
    let (code, stderr) = aws.forge(&["plan", "vpc.toml", "--detailed-exitcode"]);
    assert_eq!(code, 0, "the state matches the cloud: {stderr}");
    aws.ok(&["destroy", "vpc.toml", "--yes"]);
    assert!(tagged(&aws, "vpc").0.is_empty());
}

#[test]
fn a_rule_batch_refused_as_duplicate_still_adds_the_new_rules() {
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
    // With a refresh, `up` sees the hand-made rule as drift and authorizes only the new one;
    // planned from the state alone, AWS refuses the batch and the rules go one by one.
    aws.calls();
    aws.ok(&["up", "sg.toml", "--yes", "--refresh=false"]);
    let calls = aws.calls();
    assert_eq!(
        calls.get("ec2:AuthorizeSecurityGroupIngress"),
        Some(&3),
        "the refused batch, then one call per rule: {calls:?}"
    );
    let mut ports: Vec<(i32, i32)> = tagged(&aws, "sg").2[0]
        .ip_permissions()
        .iter()
        .map(|p| (p.from_port().unwrap(), p.to_port().unwrap()))
        .collect();
    ports.sort();
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

/// The EFA layout of a launch template's latest version: (card, device, type) per interface,
/// and the security groups of each.
fn efa_layout(aws: &Aws, template: &str) -> Vec<(i32, i32, String, Vec<String>)> {
    let ec2 = aws.ec2();
    runtime().block_on(async {
        let versions = ec2
            .describe_launch_template_versions()
            .launch_template_name(template)
            .versions("$Latest")
            .send()
            .await
            .unwrap();
        let data = versions.launch_template_versions()[0].launch_template_data().unwrap().clone();
        data.network_interfaces()
            .iter()
            .map(|n| {
                (
                    n.network_card_index().unwrap_or(0),
                    n.device_index().unwrap_or(0),
                    n.interface_type().unwrap_or_default().to_owned(),
                    n.groups().to_vec(),
                )
            })
            .collect()
    })
}

/// The NeMo p5 stack: the EFA wiring is exactly what AWS documents, a size change updates the
/// node group in place, and destroy leaves nothing.
#[test]
fn eks_p5_stack_comes_up_with_efa_wired_and_goes_away() {
    let aws = Aws::new();
    aws.write("p5.toml", include_str!("../stacks/nemo-eks-p5.toml"));
    let (code, plan) = aws.forge(&["plan", "p5.toml"]);
    assert_eq!(code, 0, "{plan}");
    insta::assert_snapshot!("nemo_eks_p5_plan", plan);
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

    // 32 EFA interfaces: card 0 device 0, every other card device 1, EFA SG and cluster SG on each.
    let layout = efa_layout(&aws, "nemo-gpu");
    assert_eq!(layout.len(), 32);
    let (_, _, groups) = tagged(&aws, "nemo-eks-p5");
    let efa_sg = groups
        .iter()
        .find(|g| g.group_name() == Some("nemo-gpu-efa"))
        .expect("the EFA security group");
    let efa_sg_id = efa_sg.group_id().unwrap().to_owned();
    for (i, (card, device, kind, sgs)) in layout.iter().enumerate() {
        assert_eq!(
            (*card, *device, kind.as_str()),
            (i as i32, if i == 0 { 0 } else { 1 }, "efa"),
            "interface {i}"
        );
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
    aws.write("p4de.toml", include_str!("../stacks/nemo-eks-p4de.toml"));
    let stderr = aws.ok(&["up", "p4de.toml", "--yes", "-v"]);
    assert!(
        stderr.contains("instance types: c5.2xlarge, p4de.24xlarge checked with AWS"),
        "{stderr}"
    );
    let layout: Vec<(i32, i32, String)> = efa_layout(&aws, "nemo-p4de-gpu")
        .into_iter()
        .map(|(c, d, t, _)| (c, d, t))
        .collect();
    let efa = |c, d| (c, d, "efa".to_owned());
    assert_eq!(layout, [efa(0, 0), efa(1, 1), efa(2, 1), efa(3, 1)]);

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
    let stack = include_str!("../stacks/nemo-eks-p5.toml")
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
    let stack = include_str!("../stacks/nemo-eks-p5.toml").replace("\"p5.48xlarge\"", "\"g6e.48xlarge\"\nefa = true");
    aws.write("g6e.toml", &stack);
    let (code, stderr) = aws.forge(&["validate", "g6e.toml"]);
    assert_eq!(code, 1, "offline, forge cannot tell the EFA count: {stderr}");
    let (code, stderr) = aws.forge(&["plan", "g6e.toml"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stderr.matches("interface_type = \"efa\"").count(), 4, "{stderr}");
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

/// A VPC and an FSx for Lustre file system (no clients): the data-loss guard and in-place growth.
const LUSTRE: &str = r#"
[stack]
name = "lustre"

[vars]
capacity = 1200
throughput = 250

[aws]
region = "us-west-2"

[vpc.main]
cidr = "10.0.0.0/16"
zones = ["us-west-2a", "us-west-2b"]
nat = "none"

[fsx.scratch]
vpc = "vpc.main"
zone = "us-west-2b"
capacity_gib = "${var.capacity}"
throughput_per_tib = "${var.throughput}"

[outputs]
mount_name = "${fsx.scratch.mount_name}"
"#;

#[test]
fn fsx_grows_in_place_and_a_shrink_needs_allow_data_loss() {
    let aws = Aws::new();
    aws.write("lustre.toml", LUSTRE);
    aws.ok(&["up", "lustre.toml", "--yes"]);
    let first = aws.file_systems("lustre");
    assert_eq!(first.len(), 1, "{first:?}");
    assert_eq!((first[0].1, first[0].2), (1200, Some(250)));
    let out = aws.command(&["output", "lustre.toml", "fsx.scratch.pv_yaml"]).output().unwrap();
    let pv = String::from_utf8_lossy(&out.stdout);
    assert!(pv.contains(&format!("volumeHandle: {}", first[0].0)), "{pv}");
    assert!(pv.contains("driver: fsx.csi.aws.com") && pv.contains("storage: 1200Gi"), "{pv}");
    let (code, stderr) = aws.forge(&["plan", "lustre.toml", "--detailed-exitcode"]);
    assert_eq!(code, 0, "{stderr}");

    // Growing and a new throughput: in place, the same file system.
    aws.calls();
    let stderr = aws.ok(&["up", "lustre.toml", "--yes", "--var", "capacity=2400", "--var", "throughput=500"]);
    assert!(stderr.contains("~ storage_capacity = 1200 -> 2400"), "{stderr}");
    assert_eq!(aws.calls().get("fsx:UpdateFileSystem"), Some(&2), "capacity, then throughput");
    let grown = aws.file_systems("lustre");
    assert_eq!(grown, [(first[0].0.clone(), 2400, Some(500))]);

    // Shrinking needs a new file system: the plan says so loudly, and `up` refuses even with --yes.
    let (code, plan) = aws.forge(&["plan", "lustre.toml", "--var", "throughput=500"]);
    assert_eq!(code, 0, "{plan}");
    assert!(
        plan.contains("-/+ fsx.scratch.file_system (aws_fsx_lustre), replaced because storage_capacity changed (DESTROYS DATA)"),
        "{plan}"
    );
    assert!(plan.contains("storage_capacity = 2400 -> 1200   # forces replacement"), "{plan}");
    let (code, stderr) = aws.forge(&["up", "lustre.toml", "--yes", "--var", "throughput=500"]);
    assert_ne!(code, 0);
    assert!(
        stderr.contains("refusing to apply: it deletes data in fsx.scratch.file_system"),
        "{stderr}"
    );
    assert!(stderr.contains("--allow-data-loss"), "{stderr}");
    assert_eq!(aws.file_systems("lustre"), grown, "nothing was touched");

    aws.ok(&["up", "lustre.toml", "--yes", "--allow-data-loss", "--var", "throughput=500"]);
    let replaced = aws.file_systems("lustre");
    assert_eq!(replaced.len(), 1, "{replaced:?}");
    assert_ne!(replaced[0].0, first[0].0);
    assert_eq!(replaced[0].1, 1200);

    aws.ok(&["destroy", "lustre.toml", "--yes"]);
    assert!(aws.file_systems("lustre").is_empty());
    assert!(tagged(&aws, "lustre").2.is_empty());
}

#[test]
fn sigkill_during_the_fsx_wait_then_rerun_leaves_one_file_system() {
    let aws = Aws::new();
    aws.write("lustre.toml", LUSTRE);
    // Slow reads of this account's file systems keep forge in its wait long enough to be killed.
    let rule = format!(
        r#"[{{"account": "{}", "match": "fsx:DescribeFileSystems", "ms": 700}}]"#,
        aws.account
    );
    aws.control("POST", "/_forge/latency", &rule);
    let mut child = aws
        .command(&["up", "lustre.toml", "--yes"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while !aws.peek_calls().contains_key("fsx:CreateFileSystem") {
        assert!(started.elapsed().as_secs() < 60, "forge never created the file system");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::thread::sleep(std::time::Duration::from_millis(200));
    child.kill().unwrap();
    child.wait().unwrap();
    aws.control("POST", "/_forge/latency", "[]");
    let state = forge::state::LocalStore::new(aws.dir.path().join("state/lustre.json"))
        .load("lustre")
        .unwrap()
        .state;
    let record = &state.resources["fsx.scratch.file_system"];
    assert_eq!(
        record.status,
        forge::state::Status::PendingCreate,
        "killed while the create was in flight"
    );

    let stderr = aws.ok(&["up", "lustre.toml", "--yes"]);
    assert!(stderr.contains("resuming an interrupted create"), "{stderr}");
    assert_eq!(
        aws.peek_calls().get("fsx:CreateFileSystem"),
        Some(&2),
        "the rerun sent the same token again"
    );
    assert_eq!(aws.file_systems("lustre").len(), 1, "one file system");
    let (code, stderr) = aws.forge(&["plan", "lustre.toml", "--detailed-exitcode"]);
    assert_eq!(code, 0, "{stderr}");
    aws.ok(&["destroy", "lustre.toml", "--yes"]);
    assert!(aws.file_systems("lustre").is_empty());
}

/// A CloudFormation stack whose second resource fails: a security group in a VPC that does
/// not exist.
const FAILING_TEMPLATE: &str = r#"
AWSTemplateFormatVersion: "2010-09-09"
Parameters:
  VpcId:
    Type: String
Resources:
  GoodGroup:
    Type: AWS::EC2::SecurityGroup
    Properties:
      GroupDescription: fine
      VpcId: !Ref VpcId
  BadGroup:
    Type: AWS::EC2::SecurityGroup
    DependsOn: GoodGroup
    Properties:
      GroupDescription: in no VPC
      VpcId: vpc-0000000000000dead
Outputs:
  GroupId:
    Value: !Ref GoodGroup
"#;

#[test]
fn a_failed_cloudformation_stack_names_the_failing_resource() {
    let aws = Aws::new();
    aws.write("template.yaml", FAILING_TEMPLATE);
    aws.write(
        "cfn.toml",
        r#"
[stack]
name = "cfn"

[aws]
region = "us-west-2"

[aws_vpc.main]
cidr_block = "10.0.0.0/16"

[aws_cloudformation_stack.groups]
name = "forge-groups"
template_file = "template.yaml"
parameters = { VpcId = "${aws_vpc.main.id}" }

[outputs]
group = "${aws_cloudformation_stack.groups.outputs.GroupId}"
"#,
    );
    let (code, stderr) = aws.forge(&["up", "cfn.toml", "--yes"]);
    assert_ne!(code, 0, "{stderr}");
    assert!(stderr.contains("`BadGroup` (AWS::EC2::SecurityGroup) CREATE_FAILED"), "{stderr}");
    assert!(stderr.contains("vpc-0000000000000dead"), "the cloud's reason: {stderr}");
    assert!(stderr.contains("ROLLBACK_COMPLETE"), "{stderr}");

    // The rolled-back stack is deleted, so fixing the template and running again succeeds.
    let cfn = aws.cloudformation();
    let live = runtime().block_on(cfn.describe_stacks().send()).unwrap();
    assert!(
        live.stacks()
            .iter()
            .all(|s| s.stack_status().map(|s| s.as_str()) != Some("ROLLBACK_COMPLETE")),
        "{live:?}"
    );
    aws.write(
        "template.yaml",
        &FAILING_TEMPLATE.replace("VpcId: vpc-0000000000000dead", "VpcId: !Ref VpcId"),
    );
    aws.ok(&["up", "cfn.toml", "--yes"]);
    let out = aws.command(&["output", "cfn.toml", "group"]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("sg-"));
    let (code, stderr) = aws.forge(&["plan", "cfn.toml", "--detailed-exitcode"]);
    assert_eq!(code, 0, "{stderr}");

    // A template edit is an in-place UpdateStack.
    aws.write(
        "template.yaml",
        &FAILING_TEMPLATE
            .replace("VpcId: vpc-0000000000000dead", "VpcId: !Ref VpcId")
            .replace("in no VPC", "now in the VPC"),
    );
    let stderr = aws.ok(&["up", "cfn.toml", "--yes"]);
    assert!(stderr.contains("~ template_file = (text of"), "{stderr}");
    assert_eq!(aws.calls().get("cloudformation:UpdateStack"), Some(&1));
    aws.ok(&["destroy", "cfn.toml", "--yes"]);
    let live = runtime().block_on(cfn.describe_stacks().send()).unwrap();
    assert!(live.stacks().is_empty(), "{live:?}");
}

/// Goes up, runs `check`, re-plans to no changes with reads only, and destroys to nothing
/// tagged; prints the wall time and API calls of `up`.
fn seed_stack_round_trip(aws: &Aws, file: &str, stack: &str, check: impl FnOnce()) {
    aws.calls();
    let started = std::time::Instant::now();
    aws.ok(&["up", file, "--yes"]);
    let up = aws.calls();
    eprintln!(
        "{stack}: up {:.2}s, {} calls ({} writes)",
        started.elapsed().as_secs_f64(),
        up.values().sum::<u64>(),
        mutating(&up).iter().map(|k| up[*k]).sum::<u64>()
    );
    check();
    let (code, stderr) = aws.forge(&["plan", file, "--detailed-exitcode"]);
    assert_eq!(code, 0, "{stack}: {stderr}");
    let calls = aws.calls();
    assert!(mutating(&calls).is_empty(), "{stack}: {calls:?}");
    // Right after `up`, drift finds nothing, and reads without writing.
    let (code, report) = aws.drift(&[file]);
    let calls = aws.calls();
    assert_eq!(code, 0, "{stack}: {report:#}");
    assert!(mutating(&calls).is_empty(), "{stack}: {calls:?}");
    eprintln!(
        "{stack}: drift read {} resources of {} kinds with {} calls",
        report["stacks"][0]["resources_read"],
        report["stacks"][0]["kinds_read"],
        calls.values().sum::<u64>()
    );
    aws.ok(&["destroy", file, "--yes"]);
    let (vpcs, subnets, groups) = tagged(aws, stack);
    assert!(vpcs.is_empty() && subnets.is_empty() && groups.is_empty(), "{stack}: {groups:?}");
    assert!(aws.file_systems(stack).is_empty(), "{stack}");
    let efs = runtime()
        .block_on(aws_sdk_efs::Client::new(&aws.sdk_config()).describe_file_systems().send())
        .unwrap();
    assert!(efs.file_systems().is_empty(), "{stack}: {efs:?}");
    assert!(runtime().block_on(aws.eks().list_clusters().send()).unwrap().clusters().is_empty());
    let stacks = runtime().block_on(aws.cloudformation().describe_stacks().send()).unwrap();
    assert!(stacks.stacks().is_empty(), "{stack}: {stacks:?}");
}

#[test]
fn the_ml_platform_stack_round_trips() {
    let aws = Aws::new();
    // Its state is in S3: this account's own bucket.
    let bucket = format!("forge-state-{}", aws.account);
    let s3 = aws_sdk_s3::Client::from_conf(aws_sdk_s3::config::Builder::from(&aws.sdk_config()).force_path_style(true).build());
    runtime().block_on(support::s3_bucket(&s3, &bucket));
    aws.write(
        "platform.toml",
        &include_str!("../stacks/ml-platform-eks.toml").replace("ml-platform-forge-state", &bucket),
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
    aws.write("bert.toml", include_str!("../stacks/bert-eks-trn1.toml"));
    seed_stack_round_trip(&aws, "bert.toml", "bert-eks-trn1", || {});
}

#[test]
fn the_cloudformation_node_group_example_round_trips() {
    let aws = Aws::new();
    aws.write("nodegroup.yaml", include_str!("../examples/cfn-nodegroup/nodegroup.yaml"));
    aws.write("stack.toml", include_str!("../examples/cfn-nodegroup/stack.toml"));
    seed_stack_round_trip(&aws, "stack.toml", "bert-cfn-nodegroup", || {
        let out = aws.command(&["output", "stack.toml", "trn_nodegroup"]).output().unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "trn");
        let group = runtime()
            .block_on(aws.eks().describe_nodegroup().cluster_name("bert-cfn").nodegroup_name("trn").send())
            .unwrap();
        let template = group.nodegroup().unwrap().launch_template().unwrap().id().unwrap().to_owned();
        let nics = runtime()
            .block_on(aws.ec2().describe_launch_template_versions().launch_template_id(&template).send())
            .unwrap();
        let data = nics.launch_template_versions()[0].launch_template_data().unwrap();
        assert_eq!(data.network_interfaces().len(), 8, "one EFA interface per trn1 network card");
    });
}

/// `forge drift` on the p5 stack: nothing right after `up`; then each out-of-band change in its
/// class with its attribute (an added rule, a changed tag, a scaled fixed-size node group, a
/// deleted subnet, an FSx throughput change, a VPC made with the stack's tag); ignore rules
/// that silence exactly their attribute; `plan` and `up` that show and undo the drift; a
/// pending edit alone exiting 3; a held lock reported; and never a write.
#[test]
fn drift_reports_each_out_of_band_change_in_its_class() {
    let aws = Aws::new();
    let text = include_str!("../stacks/nemo-eks-p5.toml");
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
    aws.write("vpc.toml", include_str!("../examples/vpc.toml"));
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
    aws.write("vpc.toml", include_str!("../examples/vpc.toml"));
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
    aws.write("slurm.toml", include_str!("../stacks/nemo-slurm-p5.toml"));
    let (code, plan) = aws.forge(&["plan", "slurm.toml"]);
    assert_eq!(code, 0, "{plan}");
    insta::assert_snapshot!("nemo_slurm_p5_plan", plan);
    let mut seed: u64 = 0x51_0e_2a;
    for round in 0..4 {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let mut child = aws
            .command(&["up", "slurm.toml", "--yes"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(200 + (seed >> 33) % 1500));
        let _ = child.kill();
        child.wait().unwrap();
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

    // The GPU nodes' launch template: 32 EFA interfaces, card 0 device 0 and the others device
    // 1, the cluster's group on each; the placement group; IMDSv2 with a hop for containers.
    let (_, _, groups) = tagged(&aws, "nemo-slurm-p5");
    let slurm_group = groups
        .iter()
        .find(|g| g.group_name() == Some("nemo-slurm"))
        .unwrap()
        .group_id()
        .unwrap()
        .to_owned();
    let layout = efa_layout(&aws, "nemo-gpu");
    assert_eq!(layout.len(), 32);
    assert_eq!(layout[0], (0, 0, "efa".to_owned(), vec![slurm_group.clone()]));
    assert!(
        layout[1..]
            .iter()
            .enumerate()
            .all(|(i, l)| *l == (i as i32 + 1, 1, "efa".to_owned(), vec![slurm_group.clone()]))
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
    assert_eq!(metadata.http_tokens().map(|t| t.as_str()), Some("required"));
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
        &include_str!("../stacks/nemo-slurm-p5.toml").replace("instance_type = \"p5.48xlarge\"", "instance_type = \"p5e.48xlarge\""),
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
