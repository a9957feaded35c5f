//! AWS kinds end to end: the real `forge` binary and the official SDK against moto (the repo's
//! launcher, tests/moto/launcher.py). Each test has its own account, so tests run in parallel
//! on one emulator; forge sees moto only through the standard AWS environment.

mod network;
mod iam;
mod eks;
mod storage;
mod cfn;
mod drift;
mod pcs;
mod capacity;
mod existing;
mod import;
mod cost;

use assert_cmd::Command;
use aws_sdk_ec2::types::Filter;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Stdio;

use crate::support::launcher_url as moto_url;

/// A non-negative amount as forge writes money, computed here on its own: rounded to `places`
/// decimals, its whole part grouped by thousands (`10571.9`, 2 → `10,571.90`; `81577.65`, 0 →
/// `81,578`).
fn grouped(amount: f64, places: usize) -> String {
    let scale = 10u64.pow(places as u32);
    let scaled = (amount * scale as f64).round() as u64;
    let whole = (scaled / scale).to_string();
    let groups: Vec<&str> = whole.as_bytes().rchunks(3).rev().map(|c| std::str::from_utf8(c).unwrap()).collect();
    match places {
        0 => groups.join(","),
        _ => format!("{}.{:0places$}", groups.join(","), scaled % scale),
    }
}

/// One test's world: a fresh account on the emulator and a working directory.
struct Aws {
    account: String,
    dir: tempfile::TempDir,
}

impl Aws {
    fn new() -> Self {
        Aws {
            account: crate::support::fresh_account(),
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
        crate::support::aws_forge(self.dir.path(), &self.account, args)
    }

    /// `forge ARGS`: the exit code, stdout and stderr.
    fn run(&self, args: &[&str]) -> (i32, String, String) {
        let out = self.command(args).output().unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
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
        crate::support::request(method, path, body).1
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

    fn autoscaling(&self) -> aws_sdk_autoscaling::Client {
        aws_sdk_autoscaling::Client::new(&self.sdk_config())
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
                    fs.lustre_configuration()
                        .and_then(aws_sdk_fsx::types::LustreFileSystemConfiguration::per_unit_storage_throughput),
                )
            })
            .collect()
    }
}

/// For each cloud call in `creates`, in a fresh account: `forge up FILE` (the `stack`) is
/// killed while that call has taken effect but not answered (the emulator holds its answer),
/// so the run dies with the create's intent journaled and the object made; then the next `up`
/// must adopt it by its token: `check` sees exactly one of everything, the plan has nothing to
/// do and drift finds nothing unmanaged. Fails when a run never reaches its call.
fn kill_inside_each(stack: &str, file: &str, creates: &[&str], check: impl Fn(&Aws)) {
    for call in creates {
        let aws = Aws::new();
        aws.write(file, stack);
        let rule = serde_json::json!([{ "account": aws.account, "match": call, "ms": 60_000, "when": "after" }]);
        aws.control("POST", &format!("/_forge/latency?account={}", aws.account), &rule.to_string());
        let mut child = aws
            .command(&["up", file, "--yes", "--no-wait-ready"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let started = std::time::Instant::now();
        while !aws.peek_calls().contains_key(*call) {
            assert!(started.elapsed().as_secs() < 120, "`forge up {file}` never called {call}");
            assert!(
                child.try_wait().unwrap().is_none(),
                "`forge up {file}` ended before it called {call}"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let _ = child.kill();
        child.wait().unwrap();
        aws.control("POST", &format!("/_forge/latency?account={}", aws.account), "[]");
        let (code, stderr) = aws.forge(&["up", file, "--yes", "--no-wait-ready"]);
        assert_eq!(code, 0, "killed inside {call}, then `up`:\n{stderr}");
        check(&aws);
        let (code, stderr) = aws.forge(&["plan", file, "--detailed-exitcode"]);
        assert_eq!(code, 0, "killed inside {call}: the state matches the cloud: {stderr}");
        let (code, report) = aws.drift(&[file]);
        assert_eq!(
            code, 0,
            "killed inside {call}: nothing changed, went or appeared outside forge: {report}"
        );
    }
}

/// At the end of a test that passed so far, the account's requests were all faithful.
impl Drop for Aws {
    fn drop(&mut self) {
        crate::support::assert_faithful(&self.account);
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

const NETWORK: &str = include_str!("../../../examples/aws-network.toml");

fn mutating(calls: &BTreeMap<String, u64>) -> Vec<&String> {
    // Query and JSON protocols name the action; REST ones (EKS) the method and path.
    let reads = ["Describe", "List", "Get", "GET "];
    calls
        .keys()
        .filter(|c| !c.starts_with("fault:") && !reads.iter().any(|r| c.split_once(':').map_or("", |(_, a)| a).starts_with(r)))
        .collect()
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
