//! Google Cloud kinds end to end: the real `forge` binary and the official google-cloud-rust
//! clients against the repo's Compute emulator (served by tests/moto/launcher.py beside moto).
//! Each test has its own project, so tests run in parallel on one emulator; forge sees it only
//! through gcloud's endpoint override and a bearer token in the environment.
mod rdma;
mod reservations;
mod cost;

use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

/// One test's world: a fresh project on the emulator and a working directory.
struct Gcp {
    project: String,
    dir: tempfile::TempDir,
}

/// At the end of a test that passed so far, the project's requests were all faithful.
impl Drop for Gcp {
    fn drop(&mut self) {
        crate::support::assert_faithful(&self.project);
    }
}

impl Gcp {
    fn new() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::SeqCst);
        Gcp {
            project: format!("forge-{}-{n}", std::process::id()),
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::write(&path, text.replace("PROJECT", &self.project)).unwrap();
        path
    }

    /// `forge ARGS` pointed at the emulator through Google's standard environment only, with
    /// the emulator's mirror of the Kubernetes bundles' release hosts and a price cache of its
    /// own.
    fn command(&self, args: &[&str]) -> std::process::Command {
        let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("forge"));
        cmd.current_dir(self.dir.path())
            .env("NO_COLOR", "1")
            .env(
                "CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE",
                format!("{}/compute/v1/", crate::support::launcher_url()),
            )
            .env(
                "CLOUDSDK_API_ENDPOINT_OVERRIDES_CONTAINER",
                format!("{}/container/v1/", crate::support::launcher_url()),
            )
            .env(
                "CLOUDSDK_API_ENDPOINT_OVERRIDES_FILE",
                format!("{}/file/v1/", crate::support::launcher_url()),
            )
            .env(
                "CLOUDSDK_API_ENDPOINT_OVERRIDES_STORAGE",
                format!("{}/storage/v1/", crate::support::launcher_url()),
            )
            .env(
                "CLOUDSDK_API_ENDPOINT_OVERRIDES_CLOUDBILLING",
                format!("{}/cloudbilling/v1/", crate::support::launcher_url()),
            )
            .env("XDG_CACHE_HOME", self.dir.path().join(".cache"))
            .env_remove("STORAGE_EMULATOR_HOST")
            .env("GOOGLE_OAUTH_ACCESS_TOKEN", "emulator-token")
            .env("FORGE_BUNDLE_MIRROR", format!("{}/_forge/bundles", crate::support::launcher_url()))
            .env_remove("GOOGLE_CLOUD_PROJECT")
            .env_remove("CLOUDSDK_CORE_PROJECT")
            .env_remove("CLOUDSDK_COMPUTE_REGION")
            .args(args);
        cmd
    }

    fn forge(&self, args: &[&str]) -> (i32, String) {
        let out = self.command(args).output().unwrap();
        (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stderr).into_owned())
    }

    fn ok(&self, args: &[&str]) -> String {
        let (code, stderr) = self.forge(args);
        assert_eq!(code, 0, "forge {args:?}:\n{stderr}");
        stderr
    }

    /// `forge drift … --json`: the exit code and the first stack's report.
    fn drift(&self, file: &str) -> (i32, Value) {
        let out = self.command(&["drift", file, "--json"]).output().unwrap();
        let report: Value =
            serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("drift: {e}\n{}", String::from_utf8_lossy(&out.stderr)));
        (out.status.code().unwrap_or(-1), report["stacks"][0].clone())
    }

    /// A Compute REST call on this project: the status and the JSON answer.
    fn compute(&self, method: &str, path: &str, body: Value) -> (u16, Value) {
        let path = format!("/compute/v1/projects/{}/{path}", self.project);
        let body = if body.is_null() { String::new() } else { body.to_string() };
        let (status, text) = crate::support::request(method, &path, &body);
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    /// A GET of a GKE (`container`) or Filestore (`file`) path below this project's
    /// `locations/`: the JSON answer, which must be a 200.
    fn located(&self, service: &str, path: &str) -> Value {
        let path = format!("/{service}/v1/projects/{}/locations/{path}", self.project);
        let (status, text) = crate::support::request("GET", &path, "");
        assert_eq!(status, 200, "{path}: {text}");
        serde_json::from_str(&text).unwrap()
    }

    /// A GKE REST call on a path below this project's `locations/us-central1/`: the status and
    /// the JSON answer.
    fn container(&self, method: &str, path: &str, body: Value) -> (u16, Value) {
        let path = format!("/container/v1/projects/{}/locations/us-central1/{path}", self.project);
        let body = if body.is_null() { String::new() } else { body.to_string() };
        let (status, text) = crate::support::request(method, &path, &body);
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    /// Waits until the GKE object at `path` (below `locations/us-central1/`) is RUNNING again.
    fn settled(&self, path: &str) {
        while self.located("container", &format!("us-central1/{path}"))["status"] != "RUNNING" {
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }

    /// The names of this project's objects of a collection (`global/networks`,
    /// `regions/us-central1/subnetworks`).
    fn names(&self, collection: &str) -> Vec<String> {
        let (status, list) = self.compute("GET", collection, Value::Null);
        assert_eq!(status, 200, "{list}");
        list["items"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|i| i["name"].as_str().unwrap().to_owned())
            .collect()
    }

    /// Every object of the Compute, GKE and Filestore kinds in this project, by collection.
    fn everything(&self) -> BTreeMap<&'static str, Vec<String>> {
        [
            "global/networks",
            "global/firewalls",
            "regions/us-central1/subnetworks",
            "regions/us-central1/routers",
        ]
        .into_iter()
        .map(|c| (c, self.names(c)))
        .chain([
            ("clusters", self.located_names("container", "-/clusters", "clusters")),
            ("instances", self.located_names("file", "-/instances", "instances")),
        ])
        .collect()
    }

    /// The last segments of the names a GKE or Filestore list answers under `key`.
    fn located_names(&self, service: &str, path: &str, key: &str) -> Vec<String> {
        let list = self.located(service, path);
        list[key]
            .as_array()
            .into_iter()
            .flatten()
            .map(|i| i["name"].as_str().unwrap().rsplit('/').next().unwrap().to_owned())
            .collect()
    }

    /// API calls this project made, by `compute:<collection>.<method>`; clears the counter.
    fn calls(&self) -> BTreeMap<String, u64> {
        let (_, body) = crate::support::request("GET", &format!("/_forge/calls?account={}", self.project), "");
        crate::support::request("POST", &format!("/_forge/reset?account={}", self.project), "{}");
        serde_json::from_str(&body).unwrap()
    }

    fn faults(&self, rules: Value) {
        let rules: Vec<Value> = rules
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                let mut r = r.clone();
                r["account"] = json!(self.project);
                r
            })
            .collect();
        crate::support::request(
            "POST",
            &format!("/_forge/faults?account={}", self.project),
            &json!(rules).to_string(),
        );
    }
}

/// An error's text with miette's line wrapping undone: one space between words.
fn flat(text: &str) -> String {
    text.replace('│', " ").split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The attributes a drift report says changed on its first changed resource.
fn drifted(report: &Value) -> Vec<&str> {
    report["changed"][0]["attributes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a["attribute"].as_str())
        .collect()
}

/// The calls that change something in the cloud (inserts, patches, updates, deletes, setters);
/// the state's own writes, in Cloud Storage, aside.
fn writes(calls: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    calls
        .iter()
        .filter(|(name, _)| {
            !name.ends_with(".get") && !name.ends_with(".list") && !name.starts_with("fault:") && !name.starts_with("storage:")
        })
        .map(|(n, c)| (n.clone(), *c))
        .collect()
}

const VPC: &str = r#"
[stack]
name = "gcp-vpc"

[gcp]
project = "PROJECT"
region = "us-central1"

[gcp_vpc.main]
name = "a3"
cidr = "10.0.0.0/20"
pods_cidr = "10.4.0.0/14"
services_cidr = "10.8.0.0/20"
"#;

/// The four kinds, block by block, with the attributes the lifecycle changes.
const KINDS: &str = r#"
[stack]
name = "gcp-kinds"

[gcp]
project = "PROJECT"
region = "us-central1"

[vars]
ports = ["22"]
routing = "REGIONAL"
google_access = false
cidr = "10.1.0.0/24"

[google_compute_network.net]
name = "net"
mtu = 8896
routing_mode = "${var.routing}"

[google_compute_subnetwork.sub]
name = "sub"
network = "${google_compute_network.net.self_link}"
ip_cidr_range = "${var.cidr}"
private_ip_google_access = "${var.google_access}"
secondary_ip_ranges = [{ range_name = "pods", ip_cidr_range = "10.8.0.0/16" }]

[google_compute_firewall.ssh]
name = "ssh"
network = "${google_compute_network.net.name}"
description = "SSH from the office"
allow = [{ protocol = "tcp", ports = "${var.ports}" }]
source_ranges = ["203.0.113.0/24"]
target_tags = ["login"]

[google_compute_router.router]
name = "router"
network = "${google_compute_network.net.self_link}"
nats = [{ name = "nat" }]
"#;

#[test]
fn the_gcp_vpc_component_comes_up_reads_back_and_goes() {
    let gcp = Gcp::new();
    gcp.write("vpc.toml", VPC);
    gcp.ok(&["up", "vpc.toml", "--yes"]);
    let made = gcp.calls();
    for insert in ["networks.insert", "subnetworks.insert", "firewalls.insert", "routers.insert"] {
        assert_eq!(made.get(&format!("compute:{insert}")), Some(&1), "{made:?}");
    }
    let (_, subnet) = gcp.compute("GET", "regions/us-central1/subnetworks/a3-subnet", Value::Null);
    assert_eq!(subnet["ipCidrRange"], "10.0.0.0/20");
    assert_eq!(subnet["privateIpGoogleAccess"], true);
    assert_eq!(
        subnet["secondaryIpRanges"][1],
        json!({ "rangeName": "services", "ipCidrRange": "10.8.0.0/20" })
    );
    assert!(subnet["network"].as_str().unwrap().ends_with("/global/networks/a3"));
    let (_, router) = gcp.compute("GET", "regions/us-central1/routers/a3-router", Value::Null);
    assert_eq!(router["nats"][0]["name"], "a3-nat");
    let (_, rule) = gcp.compute("GET", "global/firewalls/a3-internal", Value::Null);
    assert_eq!(rule["sourceRanges"], json!(["10.0.0.0/20", "10.4.0.0/14"]));
    let description = rule["description"].as_str().unwrap();
    assert!(
        description.starts_with(
            "Traffic between the nodes and pods of the network [forge:stack=gcp-vpc forge:address=gcp_vpc.main.internal forge:token="
        ),
        "{description}"
    );

    // A no-op plan and a drift check read one list per kind and write nothing.
    gcp.calls();
    let (code, stderr) = gcp.forge(&["plan", "vpc.toml", "--detailed-exitcode"]);
    assert_eq!(code, 0, "{stderr}");
    let (code, report) = gcp.drift("vpc.toml");
    assert_eq!(code, 0, "{report:#}");
    let reads = gcp.calls();
    assert!(writes(&reads).is_empty(), "{reads:?}");
    assert_eq!(reads.get("compute:networks.list"), Some(&2), "{reads:?}");
    assert_eq!(
        reads.values().sum::<u64>(),
        8,
        "one list per kind for plan, one for drift: {reads:?}"
    );

    let out = gcp.command(&["output", "vpc.toml", "gcp_vpc.main.subnetwork"]).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "a3-subnet");

    gcp.ok(&["destroy", "vpc.toml", "--yes"]);
    assert!(gcp.everything().values().all(Vec::is_empty), "{:?}", gcp.everything());
}

#[test]
fn each_kind_updates_in_place_replaces_reports_drift_and_is_destroyed() {
    let gcp = Gcp::new();
    gcp.write("kinds.toml", KINDS);
    gcp.ok(&["up", "kinds.toml", "--yes"]);
    gcp.calls();

    // In place: a firewall's ports, the routing mode, Private Google Access, a router's NATs.
    let vars = [
        "--var",
        r#"ports=["22", "443"]"#,
        "--var",
        "routing=GLOBAL",
        "--var",
        "google_access=true",
    ];
    let mut args = vec!["up", "kinds.toml", "--yes"];
    args.extend(vars);
    gcp.ok(&args);
    let changed = writes(&gcp.calls());
    assert_eq!(
        changed,
        BTreeMap::from([
            ("compute:firewalls.update".to_owned(), 1),
            ("compute:networks.patch".to_owned(), 1),
            ("compute:subnetworks.setPrivateIpGoogleAccess".to_owned(), 1),
        ]),
        "in place, nothing made or deleted"
    );
    let (_, rule) = gcp.compute("GET", "global/firewalls/ssh", Value::Null);
    assert_eq!(rule["allowed"][0]["ports"], json!(["22", "443"]));
    assert!(
        rule["description"]
            .as_str()
            .unwrap()
            .contains("forge:address=google_compute_firewall.ssh"),
        "the marker stays"
    );
    let (_, network) = gcp.compute("GET", "global/networks/net", Value::Null);
    assert_eq!(network["routingConfig"]["routingMode"], "GLOBAL");

    // Replace: a subnetwork's primary range cannot change in place.
    let mut args = vec!["up", "kinds.toml", "--yes", "--var", "cidr=10.2.0.0/24"];
    args.extend(vars);
    let stderr = gcp.ok(&args);
    assert!(stderr.contains("-/+ google_compute_subnetwork.sub"), "{stderr}");
    let replaced = writes(&gcp.calls());
    assert_eq!(replaced.get("compute:subnetworks.delete"), Some(&1), "{replaced:?}");
    assert_eq!(replaced.get("compute:subnetworks.insert"), Some(&1), "{replaced:?}");
    let (_, subnet) = gcp.compute("GET", "regions/us-central1/subnetworks/sub", Value::Null);
    assert_eq!(subnet["ipCidrRange"], "10.2.0.0/24");

    // Drift: a firewall rule widened by hand, the subnetwork deleted by hand, and a rule made by
    // hand that carries the stack's mark.
    gcp.compute("PATCH", "global/firewalls/ssh", json!({ "sourceRanges": ["0.0.0.0/0"] }));
    gcp.compute("DELETE", "regions/us-central1/subnetworks/sub", Value::Null);
    let marked = "copied [forge:stack=gcp-kinds forge:address=google_compute_firewall.copy forge:token=t]";
    let stray = json!({ "name": "stray", "network": "global/networks/net", "allowed": [{ "IPProtocol": "icmp" }], "description": marked });
    assert_eq!(gcp.compute("POST", "global/firewalls", stray).0, 200);
    std::thread::sleep(std::time::Duration::from_millis(800));
    gcp.calls();
    let mut drift_args = vec!["drift", "kinds.toml", "--json"];
    drift_args.extend(vars);
    drift_args.extend(["--var", "cidr=10.2.0.0/24"]);
    let out = gcp.command(&drift_args).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let r = &report["stacks"][0];
    assert_eq!(r["changed"].as_array().unwrap().len(), 1, "{r:#}");
    assert_eq!(r["changed"][0]["address"], "google_compute_firewall.ssh");
    assert_eq!(r["changed"][0]["attributes"][0]["attribute"], "source_ranges");
    assert_eq!(r["deleted"][0]["address"], "google_compute_subnetwork.sub", "{r:#}");
    assert_eq!(r["unmanaged"].as_array().unwrap().len(), 1, "{r:#}");
    assert_eq!(r["unmanaged"][0]["id"], format!("projects/{}/global/firewalls/stray", gcp.project));
    assert!(writes(&gcp.calls()).is_empty(), "drift writes nothing");

    // `up` brings both back, and drift is quiet again.
    let mut args = vec!["up", "kinds.toml", "--yes", "--var", "cidr=10.2.0.0/24"];
    args.extend(vars);
    gcp.ok(&args);
    gcp.compute("DELETE", "global/firewalls/stray", Value::Null);
    std::thread::sleep(std::time::Duration::from_millis(800));
    let out = gcp.command(&drift_args).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stdout));

    gcp.ok(&["destroy", "kinds.toml", "--yes"]);
    assert!(gcp.everything().values().all(Vec::is_empty), "{:?}", gcp.everything());
}

#[test]
fn a_lost_insert_answer_and_injected_faults_converge_to_one_of_each() {
    let gcp = Gcp::new();
    gcp.write("vpc.toml", VPC);
    // Every insert takes effect and its answer is lost; then a third of all calls are refused
    // (a 503 or a 429).
    gcp.faults(json!([{ "match": "compute:*.insert", "rate": 1.0, "kind": "5xx", "when": "after" }]));
    let (code, stderr) = gcp.forge(&["up", "vpc.toml", "--yes", "--max-attempts", "2"]);
    assert_ne!(code, 0, "{stderr}");
    gcp.faults(json!([
        { "match": "compute:*", "rate": 0.17, "kind": "5xx", "seed": 7 },
        { "match": "compute:*", "rate": 0.2, "kind": "throttle", "seed": 8 },
    ]));
    gcp.ok(&["up", "vpc.toml", "--yes", "--max-attempts", "12"]);
    let calls = gcp.calls();
    assert!(calls.keys().any(|k| k.starts_with("fault:")), "faults were injected: {calls:?}");
    gcp.faults(json!([]));
    let all = gcp.everything();
    assert_eq!(all["global/networks"], ["a3"]);
    assert_eq!(all["global/firewalls"], ["a3-internal"]);
    assert_eq!(all["regions/us-central1/subnetworks"], ["a3-subnet"]);
    assert_eq!(all["regions/us-central1/routers"], ["a3-router"]);
    let (code, stderr) = gcp.forge(&["plan", "vpc.toml", "--detailed-exitcode"]);
    assert_eq!(code, 0, "the state knows every object: {stderr}");
    gcp.ok(&["destroy", "vpc.toml", "--yes"]);
    assert!(gcp.everything().values().all(Vec::is_empty));
}

#[test]
fn a_failed_insert_operation_is_retried_under_a_new_request_id() {
    let gcp = Gcp::new();
    gcp.write("vpc.toml", VPC);
    gcp.faults(json!([{ "match": "compute:networks.insert", "rate": 1.0, "kind": "failed_operation", "seed": 1 }]));
    let (code, stderr) = gcp.forge(&["up", "vpc.toml", "--yes", "--max-attempts", "1"]);
    assert_ne!(code, 0);
    assert!(stderr.contains("networks.insert: the operation failed: INTERNAL_ERROR"), "{stderr}");
    gcp.faults(json!([]));
    gcp.ok(&["up", "vpc.toml", "--yes"]);
    assert_eq!(gcp.names("global/networks"), ["a3"]);
    gcp.ok(&["destroy", "vpc.toml", "--yes"]);
}

/// SIGKILL of `forge up` at seeded random moments, then a rerun: exactly one of each object.
#[test]
fn sigkill_during_up_then_rerun_leaves_exactly_one_of_each() {
    let gcp = Gcp::new();
    gcp.write("vpc.toml", VPC);
    crate::support::request(
        "POST",
        "/_forge/latency",
        &json!([{ "match": "compute:*.insert", "ms": 150, "account": gcp.project }]).to_string(),
    );
    let mut moments = crate::support::Moments::new(0x0005_eed0_f9c9);
    let mut killed_mid_call = 0;
    for round in 0..4 {
        let child = crate::support::quiet(&mut gcp.command(&["up", "vpc.toml", "--yes"]));
        crate::support::kill_after(child, moments.next(80, 700));
        let state = forge::state::LocalStore::new(gcp.dir.path().join("state/gcp-vpc.json"))
            .load("gcp-vpc")
            .unwrap()
            .state;
        killed_mid_call += usize::from(state.resources.values().any(|r| r.status == forge::state::Status::PendingCreate));
        if round == 2 {
            gcp.ok(&["destroy", "vpc.toml", "--yes"]);
        }
    }
    crate::support::request("POST", "/_forge/latency", "[]");
    assert!(killed_mid_call > 0, "at least one kill landed while an insert was in flight");
    gcp.ok(&["up", "vpc.toml", "--yes"]);
    let all = gcp.everything();
    assert_eq!(all.values().map(Vec::len).collect::<Vec<_>>(), [0, 1, 1, 0, 1, 1], "{all:?}");
    gcp.ok(&["destroy", "vpc.toml", "--yes"]);
    assert!(gcp.everything().values().all(Vec::is_empty));
}

#[test]
fn a_network_still_in_use_is_retried_then_reported_naming_the_blocker() {
    let gcp = Gcp::new();
    gcp.write("vpc.toml", VPC);
    gcp.ok(&["up", "vpc.toml", "--yes"]);
    // Someone adds a subnetwork by hand: the network cannot go while it exists.
    let (status, _) = gcp.compute(
        "POST",
        "regions/us-central1/subnetworks",
        json!({ "name": "by-hand", "network": format!("projects/{}/global/networks/a3", gcp.project), "ipCidrRange": "10.200.0.0/24" }),
    );
    assert_eq!(status, 200);
    std::thread::sleep(std::time::Duration::from_millis(800));
    let (code, stderr) = gcp.forge(&["destroy", "vpc.toml", "--yes", "--max-attempts", "2"]);
    assert_ne!(code, 0);
    assert!(stderr.contains("RESOURCE_IN_USE_BY_ANOTHER_RESOURCE"), "{stderr}");
    assert!(stderr.contains("subnetworks/by-hand"), "names the blocker: {stderr}");
    assert_eq!(gcp.names("global/networks"), ["a3"], "only the network is left");
    assert!(
        writes(&gcp.calls()).get("compute:networks.delete").is_some_and(|n| *n >= 2),
        "retried"
    );
    gcp.compute("DELETE", "regions/us-central1/subnetworks/by-hand", Value::Null);
    std::thread::sleep(std::time::Duration::from_millis(800));
    gcp.ok(&["destroy", "vpc.toml", "--yes"]);
    assert!(gcp.everything().values().all(Vec::is_empty));
}

#[test]
fn a_name_taken_by_someone_else_is_not_adopted() {
    let gcp = Gcp::new();
    gcp.write("vpc.toml", VPC);
    let (status, _) = gcp.compute(
        "POST",
        "global/networks",
        json!({ "name": "a3", "autoCreateSubnetworks": false, "description": "made by hand [forge:stack=gcp-vpc forge:address=gcp_vpc.main.network forge:token=not-this-one]" }),
    );
    assert_eq!(status, 200);
    std::thread::sleep(std::time::Duration::from_millis(800));
    let (code, stderr) = gcp.forge(&["up", "vpc.toml", "--yes"]);
    assert_ne!(code, 0);
    assert!(
        stderr.contains("a network named `a3` already exists and was not created by `gcp_vpc.main.network`"),
        "{stderr}"
    );
}

#[test]
fn an_answer_that_is_not_the_apis_reads_as_one_line() {
    let gcp = Gcp::new();
    gcp.write("vpc.toml", VPC);
    gcp.faults(json!([{ "match": "compute:networks.get", "rate": 1.0, "kind": "html" }]));
    let (code, stderr) = gcp.forge(&["up", "vpc.toml", "--yes", "--max-attempts", "1"]);
    gcp.faults(json!([]));
    assert_ne!(code, 0);
    assert!(
        stderr.contains("networks.get: HTTP 502, not an answer from the API: <html><body>Bad Gateway</body></html>"),
        "{stderr}"
    );
    assert!(stderr.contains(&format!("project {}", gcp.project)), "{stderr}");
    assert!(!stderr.contains("headers"), "no debug dump: {stderr}");
}

/// Project and region come from Google's environment when `[gcp]` leaves them out, and the
/// endpoint from `[gcp] endpoints` (as gcloud writes it, with the API version).
#[test]
fn project_and_region_from_the_environment_and_the_endpoint_from_the_file() {
    let gcp = Gcp::new();
    let endpoint = format!("{}/compute/v1/", crate::support::launcher_url());
    gcp.write(
        "net.toml",
        &format!("[stack]\nname = \"env\"\n[gcp]\nendpoints = {{ compute = \"{endpoint}\" }}\n[google_compute_subnetwork.s]\nname = \"s\"\nnetwork = \"${{google_compute_network.n.name}}\"\nip_cidr_range = \"10.3.0.0/24\"\n[google_compute_network.n]\nname = \"n\"\n"),
    );
    let with_env = |args: &[&str]| {
        let mut cmd = gcp.command(args);
        cmd.env_remove("CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE")
            .env("GOOGLE_CLOUD_PROJECT", &gcp.project)
            .env("CLOUDSDK_COMPUTE_REGION", "us-central1");
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "forge {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    with_env(&["up", "net.toml", "--yes"]);
    assert_eq!(gcp.names("regions/us-central1/subnetworks"), ["s"]);
    with_env(&["destroy", "net.toml", "--yes"]);
    assert!(gcp.everything().values().all(Vec::is_empty));
    // Without a project anywhere, the error says where to set one.
    let (code, stderr) = gcp.forge(&["up", "net.toml", "--yes"]);
    assert_ne!(code, 0);
    assert!(
        stderr.contains("no Google Cloud project: set `project` in `[gcp]`, or GOOGLE_CLOUD_PROJECT"),
        "{stderr}"
    );
}

/// A destroy right after a create whose insert answer was lost, while that insert still runs
/// (Compute shows the object only once it is DONE): the destroy finds the running insert, waits
/// for it and deletes what it made, so nothing is left behind unrecorded.
#[test]
fn a_destroy_while_an_interrupted_insert_still_runs_leaves_nothing() {
    let gcp = Gcp::new();
    gcp.write(
        "net.toml",
        "[stack]\nname = \"net\"\n[gcp]\nproject = \"PROJECT\"\nregion = \"us-central1\"\n[google_compute_network.n]\nname = \"lost\"\n",
    );
    gcp.faults(json!([{ "match": "compute:networks.insert", "rate": 1.0, "kind": "5xx", "when": "after" }]));
    let (code, stderr) = gcp.forge(&["up", "net.toml", "--yes", "--max-attempts", "1"]);
    gcp.faults(json!([]));
    assert_ne!(code, 0, "{stderr}");
    gcp.ok(&["destroy", "net.toml", "--yes"]);
    std::thread::sleep(std::time::Duration::from_millis(800));
    assert!(gcp.names("global/networks").is_empty(), "{:?}", gcp.names("global/networks"));
}

/// The NeMo-on-GKE seed stack with this test's project, and its state bucket
/// (`<project>-forge-state`, made here if this test has none yet).
fn seed_stack(gcp: &Gcp) -> String {
    let (status, answer) = crate::support::gcs_bucket(&gcp.project, &format!("{}-forge-state", gcp.project));
    assert!(status == 200 || status == 409, "{answer}");
    include_str!("../../../stacks/nemo-gke-a3.toml").replace("nemo-training", &gcp.project)
}

/// GKE's operations in us-central1 of this project: (type, target, start, end), oldest first.
fn gke_operations(gcp: &Gcp) -> Vec<(String, String, String, String)> {
    let list = gcp.located("container", "us-central1/operations");
    let mut ops: Vec<(String, String, String, String)> = list["operations"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|op| {
            let text = |key: &str| op[key].as_str().unwrap_or_default().to_owned();
            (text("operationType"), text("targetLink"), text("startTime"), text("endTime"))
        })
        .collect();
    ops.sort_by(|a, b| a.2.cmp(&b.2));
    ops
}

/// The NeMo-on-GKE stack: the A3 pool is wired for GPUDirect-TCPX as GKE documents it, the
/// system pool comes with the cluster (no throwaway default pool), a resize and a Filestore
/// growth happen in place, a shrink is refused without --allow-data-loss, and destroy leaves
/// nothing.
#[test]
fn the_nemo_gke_stack_comes_up_wired_for_gpudirect_and_goes() {
    let gcp = Gcp::new();
    gcp.write("nemo.toml", &seed_stack(&gcp));
    let (code, plan) = gcp.forge(&["plan", "nemo.toml"]);
    assert_eq!(code, 0, "{plan}");
    insta::assert_snapshot!("nemo_gke_a3_plan", crate::support::undated(&plan.replace(&gcp.project, "PROJECT")));
    gcp.ok(&["up", "nemo.toml", "--yes"]);
    let made = gcp.calls();
    assert_eq!(made.get("container:clusters.create"), Some(&1), "{made:?}");
    assert_eq!(
        made.get("container:clusters.nodePools.create"),
        Some(&1),
        "only the A3 pool: the system pool is made with the cluster: {made:?}"
    );
    assert_eq!(
        made.get("container:clusters.nodePools.delete"),
        None,
        "no default pool to delete: {made:?}"
    );

    let cluster = gcp.located("container", "us-central1/clusters/nemo");
    assert_eq!(cluster["networkConfig"]["datapathProvider"], "ADVANCED_DATAPATH");
    assert_eq!(cluster["networkConfig"]["enableMultiNetworking"], true);
    assert_eq!(cluster["ipAllocationPolicy"]["clusterSecondaryRangeName"], "pods");
    assert_eq!(
        cluster["workloadIdentityConfig"]["workloadPool"],
        format!("{}.svc.id.goog", gcp.project)
    );
    assert_eq!(cluster["addonsConfig"]["gcpFilestoreCsiDriverConfig"]["enabled"], true);
    let system = gcp.located("container", "us-central1/clusters/nemo/nodePools/system");
    assert_eq!(system["config"]["machineType"], "e2-standard-8");
    assert_eq!(system["initialNodeCount"], 4);
    let a3 = gcp.located("container", "us-central1/clusters/nemo/nodePools/a3");
    assert_eq!(a3["config"]["machineType"], "a3-highgpu-8g");
    assert_eq!(a3["locations"], json!(["us-central1-c"]), "one zone");
    assert_eq!(a3["placementPolicy"]["type"], "COMPACT");
    assert_eq!(a3["config"]["gvnic"]["enabled"], true);
    let accelerator = &a3["config"]["accelerators"][0];
    assert_eq!(accelerator["acceleratorType"], "nvidia-h100-80gb");
    assert_eq!(accelerator["acceleratorCount"], "8");
    assert_eq!(accelerator["gpuDriverInstallationConfig"]["gpuDriverVersion"], "LATEST");
    let extra = a3["networkConfig"]["additionalNodeNetworkConfigs"].as_array().unwrap();
    assert_eq!(extra.len(), 4, "{extra:?}");
    for (i, network) in extra.iter().enumerate() {
        let n = i + 1;
        assert_eq!(
            network,
            &json!({ "network": format!("nemo-gpu-{n}"), "subnetwork": format!("nemo-gpu-{n}-subnet") })
        );
        let (_, net) = gcp.compute("GET", &format!("global/networks/nemo-gpu-{n}"), Value::Null);
        assert_eq!(net["mtu"], 8244);
        let (_, subnet) = gcp.compute("GET", &format!("regions/us-central1/subnetworks/nemo-gpu-{n}-subnet"), Value::Null);
        assert_eq!(subnet["ipCidrRange"], format!("192.168.{n}.0/24"));
        let (_, rule) = gcp.compute("GET", &format!("global/firewalls/nemo-gpu-{n}-internal"), Value::Null);
        assert_eq!(rule["allowed"], json!([{ "IPProtocol": "all" }]));
    }
    let filestore = gcp.located("file", "us-central1/instances/shared");
    assert_eq!(filestore["tier"], "ENTERPRISE");
    assert_eq!(filestore["fileShares"][0]["capacityGb"], "1024");

    // Nothing to do, nothing drifted.
    let (code, stderr) = gcp.forge(&["plan", "nemo.toml", "--detailed-exitcode"]);
    assert_eq!(code, 0, "{stderr}");
    let (code, report) = gcp.drift("nemo.toml");
    assert_eq!(code, 0, "{report:#}");

    // A pool resized outside forge is drift (its size read from its instance group).
    let pool = format!(
        "/container/v1/projects/{}/locations/us-central1/clusters/nemo/nodePools/a3",
        gcp.project
    );
    let (status, body) = crate::support::request("POST", &format!("{pool}:setSize"), r#"{"nodeCount": 1}"#);
    assert_eq!(status, 200, "{body}");
    while gcp.located("container", "us-central1/clusters/nemo/nodePools/a3")["status"] != "RUNNING" {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let (code, report) = gcp.drift("nemo.toml");
    assert_eq!(code, 2, "{report:#}");
    assert_eq!(report["changed"][0]["address"], "gke.nemo.node_pools.a3", "{report:#}");
    assert_eq!(report["changed"][0]["attributes"][0]["attribute"], "node_count", "{report:#}");

    // The A3 pool resized and the share grown: in place.
    gcp.calls();
    let grown = seed_stack(&gcp)
        .replace("gpu_nodes = 4", "gpu_nodes = 2")
        .replace("capacity_gib = 1024", "capacity_gib = 1280");
    gcp.write("nemo.toml", &grown);
    gcp.ok(&["up", "nemo.toml", "--yes"]);
    let changed = writes(&gcp.calls());
    assert_eq!(
        changed,
        BTreeMap::from([
            ("container:clusters.nodePools.setSize".to_owned(), 1),
            ("file:instances.patch".to_owned(), 1)
        ]),
        "a resize and a growth, nothing made or deleted"
    );
    let filestore = gcp.located("file", "us-central1/instances/shared");
    assert_eq!(filestore["fileShares"][0]["capacityGb"], "1280");

    // A shrink replaces the share, which deletes its data: refused unless allowed.
    gcp.write("nemo.toml", &seed_stack(&gcp).replace("gpu_nodes = 4", "gpu_nodes = 2"));
    let (code, stderr) = gcp.forge(&["up", "nemo.toml", "--yes"]);
    assert_ne!(code, 0, "{stderr}");
    assert!(stderr.contains("DESTROYS DATA") || stderr.contains("--allow-data-loss"), "{stderr}");

    let out = gcp.command(&["kubeconfig", "nemo.toml", "gke.nemo", "--print"]).output().unwrap();
    let kubeconfig = String::from_utf8_lossy(&out.stdout);
    assert!(
        kubeconfig.contains(&format!("gke_{}_us-central1_nemo", gcp.project)),
        "{kubeconfig}"
    );
    assert!(kubeconfig.contains("command: gke-gcloud-auth-plugin"), "{kubeconfig}");

    gcp.ok(&["destroy", "nemo.toml", "--yes"]);
    let all = gcp.everything();
    assert!(all.values().all(Vec::is_empty), "{all:?}");
}

const MEGA: &str = r#"
[stack]
name = "mega"

[gcp]
project = "PROJECT"
region = "us-central1"

[gcp_vpc.main]
cidr = "10.0.0.0/20"
pods_cidr = "10.4.0.0/14"
services_cidr = "10.8.0.0/20"

[gke.train]
vpc = "gcp_vpc.main"

[gke.train.node_pools.system]
machine_type = "e2-standard-4"
size = 1

[gke.train.node_pools.mega]
machine_type = "a3-megagpu-8g"
size = 2
zone = "us-central1-a"

[gke.train.node_pools.high]
machine_type = "a3-highgpu-8g"
size = { min = 0, max = 4 }
zone = "us-central1-b"
"#;

/// An `a3-megagpu-8g` pool gets GPUDirect-TCPXO's 8 networks (an `a3-highgpu-8g` pool of the
/// same cluster shares the first 4), and the two pools created in one `up` never run their
/// operations at the same time: GKE takes one at a time per cluster.
#[test]
fn a_megagpu_pool_gets_eight_networks_and_pool_creates_never_overlap() {
    let gcp = Gcp::new();
    gcp.write("mega.toml", MEGA);
    crate::support::request(
        "POST",
        &format!("/_forge/operation_seconds?account={}", gcp.project),
        &json!([{ "match": "container:clusters.nodePools.create", "seconds": 1.5, "account": gcp.project }]).to_string(),
    );
    gcp.ok(&["up", "mega.toml", "--yes"]);
    let made = gcp.calls();
    assert_eq!(
        made.get("compute:networks.insert"),
        Some(&9),
        "the VPC's and 8 GPU networks: {made:?}"
    );
    assert_eq!(made.get("container:clusters.nodePools.create"), Some(&2), "{made:?}");
    let mega = gcp.located("container", "us-central1/clusters/train/nodePools/mega");
    assert_eq!(mega["networkConfig"]["additionalNodeNetworkConfigs"].as_array().unwrap().len(), 8);
    assert_eq!(mega["config"]["accelerators"][0]["acceleratorType"], "nvidia-h100-mega-80gb");
    let high = gcp.located("container", "us-central1/clusters/train/nodePools/high");
    assert_eq!(high["networkConfig"]["additionalNodeNetworkConfigs"].as_array().unwrap().len(), 4);
    assert_eq!(high["autoscaling"]["maxNodeCount"], 4);
    let creates: Vec<_> = gke_operations(&gcp).into_iter().filter(|op| op.0 == "CREATE_NODE_POOL").collect();
    assert_eq!(creates.len(), 2, "{creates:?}");
    assert!(
        creates[0].3 <= creates[1].2,
        "the second pool create started before the first ended: {creates:?}"
    );
    crate::support::request("POST", &format!("/_forge/operation_seconds?account={}", gcp.project), "[]");
    gcp.ok(&["destroy", "mega.toml", "--yes"]);
    assert!(gcp.everything().values().all(Vec::is_empty));
}

/// A pool create that ends in a stockout reports GKE's message with what to do, and leaves a
/// state that the next `up` finishes (the failed pool deleted and made again).
#[test]
fn a_stockout_fails_with_a_hint_and_the_next_up_finishes() {
    let gcp = Gcp::new();
    gcp.write("nemo.toml", &seed_stack(&gcp));
    gcp.faults(
        json!([{ "match": "container:clusters.nodePools.create", "kind": "failed_operation", "code": "GCE_STOCKOUT", "rate": 1.0 }]),
    );
    let (code, stderr) = gcp.forge(&["up", "nemo.toml", "--yes"]);
    assert_ne!(code, 0, "{stderr}");
    assert!(stderr.contains("ZONE_RESOURCE_POOL_EXHAUSTED"), "the cloud's message: {stderr}");
    assert!(stderr.contains("try another `zone`"), "a hint: {stderr}");
    let pool = gcp.located("container", "us-central1/clusters/nemo/nodePools/a3");
    assert_eq!(pool["status"], "ERROR");
    gcp.faults(json!([]));
    gcp.ok(&["up", "nemo.toml", "--yes"]);
    let pool = gcp.located("container", "us-central1/clusters/nemo/nodePools/a3");
    assert_eq!(pool["status"], "RUNNING");
    let (code, stderr) = gcp.forge(&["plan", "nemo.toml", "--detailed-exitcode"]);
    assert_eq!(code, 0, "{stderr}");
    gcp.ok(&["destroy", "nemo.toml", "--yes"]);
    assert!(gcp.everything().values().all(Vec::is_empty));
}

/// SIGKILL at random points of the GKE stack's `up`, then a rerun: exactly one of everything.
#[test]
fn sigkill_during_a_gke_up_then_rerun_leaves_exactly_one_of_each() {
    let gcp = Gcp::new();
    gcp.write("nemo.toml", &seed_stack(&gcp));
    let mut moments = crate::support::Moments::new(0x00c0_ffee);
    for _ in 0..5 {
        let child = crate::support::quiet(&mut gcp.command(&["up", "nemo.toml", "--yes"]));
        crate::support::kill_after(child, moments.next(200, 2500));
    }
    gcp.ok(&["up", "nemo.toml", "--yes"]);
    let all = gcp.everything();
    let counts: BTreeMap<&str, usize> = all.iter().map(|(k, v)| (*k, v.len())).collect();
    assert_eq!(
        counts,
        BTreeMap::from([
            ("clusters", 1),
            ("global/firewalls", 5),
            ("global/networks", 5),
            ("instances", 1),
            ("regions/us-central1/routers", 1),
            ("regions/us-central1/subnetworks", 5),
        ]),
        "{all:?}"
    );
    let pools = gcp.located("container", "us-central1/clusters/nemo/nodePools");
    assert_eq!(pools["nodePools"].as_array().unwrap().len(), 2, "{pools:#}");
    gcp.ok(&["destroy", "nemo.toml", "--yes"]);
    assert!(gcp.everything().values().all(Vec::is_empty));
}

const SMALL_GKE: &str = r#"
[stack]
name = "small"

[gcp]
project = "PROJECT"
region = "us-central1"

[gcp_vpc.main]
cidr = "10.0.0.0/20"
pods_cidr = "10.4.0.0/14"
services_cidr = "10.8.0.0/20"

[gke.small]
vpc = "gcp_vpc.main"

[gke.small.node_pools.system]
machine_type = "e2-standard-4"
size = 1
zone = "us-central1-a"

[gke.small.node_pools.gpu]
machine_type = "g2-standard-8"
size = 1
zone = "us-central1-a"
labels = { team = "ml" }
"#;

/// A pool create that outlives its `timeouts.create` leaves the create pending, and the next
/// `up` resumes waiting on the same pool instead of making another.
#[test]
fn a_wait_that_runs_out_is_resumed_by_the_next_up() {
    let gcp = Gcp::new();
    gcp.write(
        "small.toml",
        &SMALL_GKE.replace("[gke.small]\n", "[gke.small]\ntimeouts = { create = \"1s\" }\n"),
    );
    crate::support::request(
        "POST",
        &format!("/_forge/operation_seconds?account={}", gcp.project),
        &json!([{ "match": "container:clusters.nodePools.create", "seconds": 3, "account": gcp.project }]).to_string(),
    );
    let (code, stderr) = gcp.forge(&["up", "small.toml", "--yes"]);
    assert_ne!(code, 0, "{stderr}");
    assert!(stderr.contains("run `forge up` again to resume waiting"), "{stderr}");
    let state = forge::state::LocalStore::new(gcp.dir.path().join("state/small.json"))
        .load("small")
        .unwrap()
        .state;
    assert_eq!(
        state.resources["gke.small.node_pools.gpu"].status,
        forge::state::Status::PendingCreate,
        "the create stays pending"
    );
    crate::support::request("POST", &format!("/_forge/operation_seconds?account={}", gcp.project), "[]");
    // The default create timeout again: the resumed wait outlasts the rest of the operation
    // however soon this `up` gets to it.
    gcp.write("small.toml", SMALL_GKE);
    gcp.ok(&["up", "small.toml", "--yes"]);
    let calls = gcp.calls();
    assert_eq!(
        calls.get("container:clusters.nodePools.create"),
        Some(&1),
        "resumed, not made again: {calls:?}"
    );
    let pool = gcp.located("container", "us-central1/clusters/small/nodePools/gpu");
    assert_eq!(pool["status"], "RUNNING");
    gcp.ok(&["destroy", "small.toml", "--yes"]);
    assert!(gcp.everything().values().all(Vec::is_empty));
}

/// A label change of the `gpu` pool of `SMALL_GKE`, applied while an operation forge did not
/// start runs on the cluster — `start` starts it with the GKE call `call`, which lasts 3 seconds
/// — is refused at least once, retried until that operation ends, and done.
fn waits_out_another_operation(call: &str, start: impl FnOnce(&Gcp)) {
    let gcp = Gcp::new();
    gcp.write("small.toml", SMALL_GKE);
    gcp.ok(&["up", "small.toml", "--yes"]);
    crate::support::request(
        "POST",
        &format!("/_forge/operation_seconds?account={}", gcp.project),
        &json!([{ "match": call, "seconds": 3, "account": gcp.project }]).to_string(),
    );
    start(&gcp);
    gcp.calls();
    gcp.write("small.toml", &SMALL_GKE.replace("team = \"ml\"", "team = \"research\""));
    gcp.ok(&["up", "small.toml", "--yes"]);
    let calls = gcp.calls();
    assert!(
        calls.get("container:clusters.nodePools.update").is_some_and(|n| *n >= 2),
        "refused at least once while the other operation ran, then done: {calls:?}"
    );
    let gpu = gcp.located("container", "us-central1/clusters/small/nodePools/gpu");
    assert_eq!(gpu["config"]["labels"], json!({ "team": "research" }));
    crate::support::request("POST", &format!("/_forge/operation_seconds?account={}", gcp.project), "[]");
    gcp.ok(&["destroy", "small.toml", "--yes"]);
    assert!(gcp.everything().values().all(Vec::is_empty));
}

/// A change GKE refuses because an operation forge did not start runs on the cluster (an
/// auto-upgrade, someone's gcloud) is retried until that operation ends.
#[test]
fn a_change_refused_while_someone_elses_operation_runs_is_retried() {
    waits_out_another_operation("container:clusters.nodePools.setManagement", |gcp| {
        let management = json!({ "management": { "autoRepair": true, "autoUpgrade": true } });
        let (status, body) = gcp.container("POST", "clusters/small/nodePools/system:setManagement", management);
        assert_eq!(status, 200, "{body}");
    });
}

/// A change GKE refuses while the control plane upgrades — worded otherwise than "incompatible
/// operation", the same FAILED_PRECONDITION with an operation running on the cluster — is
/// retried until the upgrade ends.
#[test]
fn a_change_refused_while_the_control_plane_upgrades_is_waited_out() {
    waits_out_another_operation("container:clusters.update", |gcp| {
        let (status, body) = gcp.container("PUT", "clusters/small", json!({ "update": { "desiredMasterVersion": "1.33" } }));
        assert_eq!(status, 200, "{body}");
        let (status, body) = gcp.container("POST", "clusters/small/nodePools/gpu:setSize", json!({ "nodeCount": 1 }));
        assert_eq!((status, &body["error"]["status"]), (400, &json!("FAILED_PRECONDITION")), "{body}");
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("is currently upgrading cluster small") && !message.contains("incompatible operation"),
            "the other wording: {message}"
        );
    });
}

/// Autoscaling switched on outside forge on a pool of a fixed size is drift (its `node_count`
/// gone, the other mode's bounds there), and `up` switches it off and sets the size again.
#[test]
fn autoscaling_switched_on_outside_forge_is_drift_that_up_switches_off() {
    let gcp = Gcp::new();
    gcp.write("small.toml", SMALL_GKE);
    gcp.ok(&["up", "small.toml", "--yes"]);
    let autoscaling = json!({ "autoscaling": { "enabled": true, "minNodeCount": 1, "maxNodeCount": 5 } });
    let (status, body) = gcp.container("POST", "clusters/small/nodePools/gpu:setAutoscaling", autoscaling);
    assert_eq!(status, 200, "{body}");
    gcp.settled("clusters/small/nodePools/gpu");
    let (code, report) = gcp.drift("small.toml");
    assert_eq!(code, 2, "{report:#}");
    assert_eq!(report["changed"][0]["address"], "gke.small.node_pools.gpu", "{report:#}");
    assert_eq!(drifted(&report), ["node_count", "min_node_count", "max_node_count"], "{report:#}");
    gcp.calls();
    let stderr = gcp.ok(&["up", "small.toml", "--yes"]);
    assert!(stderr.contains("changed outside forge"), "{stderr}");
    assert_eq!(
        writes(&gcp.calls()),
        BTreeMap::from([
            ("container:clusters.nodePools.setAutoscaling".to_owned(), 1),
            ("container:clusters.nodePools.setSize".to_owned(), 1),
        ]),
        "autoscaling off, then the block's size"
    );
    let pool = gcp.located("container", "us-central1/clusters/small/nodePools/gpu");
    assert_ne!(pool["autoscaling"]["enabled"], true, "{pool:#}");
    let (code, report) = gcp.drift("small.toml");
    assert_eq!(code, 0, "{report:#}");
    gcp.ok(&["destroy", "small.toml", "--yes"]);
    assert!(gcp.everything().values().all(Vec::is_empty));
}

/// Autoscaling turned off outside forge on a pool with a `{ min, max }` size is drift (its
/// bounds gone), and `up` turns it on again with the block's bounds.
#[test]
fn autoscaling_turned_off_outside_forge_is_drift_that_up_turns_on() {
    let gcp = Gcp::new();
    let stack = SMALL_GKE.replace(
        "machine_type = \"g2-standard-8\"\nsize = 1",
        "machine_type = \"g2-standard-8\"\nsize = { min = 1, max = 3 }",
    );
    assert_ne!(stack, SMALL_GKE);
    gcp.write("small.toml", &stack);
    gcp.ok(&["up", "small.toml", "--yes"]);
    let (status, body) = gcp.container(
        "POST",
        "clusters/small/nodePools/gpu:setAutoscaling",
        json!({ "autoscaling": { "enabled": false } }),
    );
    assert_eq!(status, 200, "{body}");
    gcp.settled("clusters/small/nodePools/gpu");
    let (code, report) = gcp.drift("small.toml");
    assert_eq!(code, 2, "{report:#}");
    assert_eq!(report["changed"][0]["address"], "gke.small.node_pools.gpu", "{report:#}");
    assert_eq!(drifted(&report), ["min_node_count", "max_node_count"], "{report:#}");
    gcp.calls();
    gcp.ok(&["up", "small.toml", "--yes"]);
    assert_eq!(
        writes(&gcp.calls()),
        BTreeMap::from([("container:clusters.nodePools.setAutoscaling".to_owned(), 1)]),
    );
    let pool = gcp.located("container", "us-central1/clusters/small/nodePools/gpu");
    assert_eq!(
        (&pool["autoscaling"]["enabled"], &pool["autoscaling"]["maxNodeCount"]),
        (&json!(true), &json!(3)),
        "{pool:#}"
    );
    let (code, report) = gcp.drift("small.toml");
    assert_eq!(code, 0, "{report:#}");
    gcp.ok(&["destroy", "small.toml", "--yes"]);
    assert!(gcp.everything().values().all(Vec::is_empty));
}

/// What GKE would refuse at apply fails `forge plan`, naming the resource and attribute: a
/// cluster or node pool asked for an earlier minor version than it runs, and a pool turning
/// auto-upgrade off on a cluster in a release channel (REGULAR when the block names none).
#[test]
fn a_version_downgrade_and_auto_upgrade_off_in_a_release_channel_fail_the_plan() {
    let gcp = Gcp::new();
    gcp.write("small.toml", SMALL_GKE);
    gcp.ok(&["up", "small.toml", "--yes"]);
    let gpu_pool = "labels = { team = \"ml\" }";
    let refused = |stack: String, words: &[&str]| {
        assert_ne!(stack, SMALL_GKE);
        gcp.write("small.toml", &stack);
        let (code, stderr) = gcp.forge(&["plan", "small.toml"]);
        assert_ne!(code, 0, "{stderr}");
        let text = flat(&stderr);
        for word in words {
            assert!(text.contains(word), "{word}: {stderr}");
        }
    };
    refused(
        SMALL_GKE.replace("[gke.small]\n", "[gke.small]\nversion = \"1.31\"\n"),
        &["`gke.small.cluster.version`", "earlier minor version", "it runs 1.32."],
    );
    refused(
        SMALL_GKE.replace(gpu_pool, &format!("{gpu_pool}\nversion = \"1.31\"")),
        &["`gke.small.node_pools.gpu.version`", "earlier minor version"],
    );
    refused(
        SMALL_GKE.replace(gpu_pool, &format!("{gpu_pool}\nauto_upgrade = false")),
        &["`node_pools.gpu.auto_upgrade = false`", "REGULAR release channel"],
    );
    // Out of release channels a pool may turn auto-upgrade off; an earlier patch is no downgrade.
    gcp.write(
        "small.toml",
        &SMALL_GKE
            .replace(
                "[gke.small]\n",
                "[gke.small]\nrelease_channel = \"UNSPECIFIED\"\nversion = \"1.32.1\"\n",
            )
            .replace(gpu_pool, &format!("{gpu_pool}\nauto_upgrade = false")),
    );
    gcp.ok(&["plan", "small.toml"]);
    gcp.ok(&["destroy", "small.toml", "--yes"]);
    assert!(gcp.everything().values().all(Vec::is_empty));
}

/// A new MTU patches the network in place: nothing on it is replaced.
#[test]
fn an_mtu_change_updates_the_network_in_place() {
    let gcp = Gcp::new();
    let stack = |mtu: u32| {
        format!(
            "[stack]\nname = \"mtu\"\n[gcp]\nproject = \"PROJECT\"\nregion = \"us-central1\"\n[google_compute_network.net]\nname = \"jumbo\"\nmtu = {mtu}\n[google_compute_subnetwork.sub]\nname = \"jumbo-sub\"\nnetwork = \"${{google_compute_network.net.self_link}}\"\nip_cidr_range = \"10.5.0.0/24\"\n"
        )
    };
    gcp.write("mtu.toml", &stack(1460));
    gcp.ok(&["up", "mtu.toml", "--yes"]);
    gcp.write("mtu.toml", &stack(8896));
    let (code, plan) = gcp.forge(&["plan", "mtu.toml"]);
    assert_eq!(code, 0, "{plan}");
    assert!(plan.contains("~ google_compute_network.net") && !plan.contains("-/+"), "{plan}");
    gcp.calls();
    gcp.ok(&["up", "mtu.toml", "--yes"]);
    assert_eq!(writes(&gcp.calls()), BTreeMap::from([("compute:networks.patch".to_owned(), 1)]));
    let (_, network) = gcp.compute("GET", "global/networks/jumbo", Value::Null);
    assert_eq!(network["mtu"], 8896);
    let (code, stderr) = gcp.forge(&["plan", "mtu.toml", "--detailed-exitcode"]);
    assert_eq!(code, 0, "{stderr}");
    gcp.ok(&["destroy", "mtu.toml", "--yes"]);
    assert!(gcp.everything().values().all(Vec::is_empty));
}

/// The NeMo-on-GKE stack comes up ready for work: in the cluster, the `GKENetworkParamSet` and
/// `Network` pair of each GPU network (`vpc1`…`vpc4`, the names TCPX workloads use), the TCPX
/// NCCL installer and its config, the NRI device injector and the Filestore claim, Bound; `up`
/// waits until the A3 nodes report their 8 GPUs each. forge reaches the API server at the
/// endpoint and CA GKE reports, with the Google access token.
#[test]
fn the_nemo_gke_stack_comes_up_ready_for_gpudirect_work() {
    use kube::api::{Api, DynamicObject};
    let gcp = Gcp::new();
    gcp.write("nemo.toml", &seed_stack(&gcp));
    let stderr = gcp.ok(&["up", "nemo.toml", "--yes"]);
    assert!(stderr.contains("node pool `a3`: 4 nodes, each nvidia.com/gpu 8"), "{stderr}");
    assert!(stderr.contains("claim default/shared-pvc Bound"), "{stderr}");
    assert!(stderr.contains("queue `a3-queue` Active"), "{stderr}");
    let cluster = gcp.located("container", "us-central1/clusters/nemo");
    let endpoint = format!("https://{}", cluster["endpoint"].as_str().unwrap());
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let mut config = kube::Config::new(endpoint.parse().unwrap());
        config.accept_invalid_certs = true;
        config.auth_info.token = Some("test-reader".to_owned().into());
        let client = kube::Client::try_from(config).unwrap();
        let read_group = |group: &str, version: &str, kind: &str| {
            let client = client.clone();
            let gvk = kube::api::GroupVersionKind::gvk(group, version, kind);
            async move {
                let (resource, _) = kube::discovery::pinned_kind(&client, &gvk).await.unwrap();
                let api: Api<DynamicObject> = Api::all_with(client, &resource);
                api.list(&Default::default()).await.unwrap().items
            }
        };
        let read = |kind: &str| read_group("networking.gke.io", "v1", kind);
        let params = read("GKENetworkParamSet").await;
        let names: Vec<&str> = params.iter().filter_map(|p| p.metadata.name.as_deref()).collect();
        assert_eq!(names, ["vpc1", "vpc2", "vpc3", "vpc4"]);
        assert_eq!(params[0].data["spec"], json!({ "vpc": "nemo-gpu-1", "vpcSubnet": "nemo-gpu-1-subnet", "deviceMode": "NetDevice" }));
        let networks = read("Network").await;
        assert_eq!(networks.len(), 4);
        assert_eq!(networks[3].data["spec"]["parametersRef"]["name"], "vpc4");
        let daemonsets: Api<k8s_openapi::api::apps::v1::DaemonSet> = Api::namespaced(client.clone(), "kube-system");
        let installer = daemonsets.get("nccl-tcpx-installer").await.unwrap();
        let affinity = serde_json::to_value(installer.spec.template.spec.unwrap().affinity).unwrap();
        assert_eq!(
            affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"],
            json!(["nvidia-h100-80gb"])
        );
        assert!(daemonsets.get_opt("nri-device-injector").await.unwrap().is_some());
        let configs: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), "default");
        let nccl = configs.get("nccl-tcpx-config").await.unwrap().data.unwrap();
        assert_eq!(nccl["NCCL_GPUDIRECTTCPX_SOCKET_IFNAME"], "eth1,eth2,eth3,eth4");
        // Kueue from its release bundle, and a3-queue with the a3 pool's 4 × 8 GPUs as quota.
        let queues = read_group("kueue.x-k8s.io", "v1beta1", "ClusterQueue").await;
        assert_eq!(queues.len(), 1);
        let flavors = &queues[0].data["spec"]["resourceGroups"][0]["flavors"];
        assert_eq!(flavors[0]["name"], "a3-queue-a3");
        assert_eq!(flavors[0]["resources"][2], json!({ "name": "nvidia.com/gpu", "nominalQuota": 32 }));
        let flavor = &read_group("kueue.x-k8s.io", "v1beta1", "ResourceFlavor").await[0];
        assert_eq!(flavor.data["spec"]["nodeLabels"], json!({ "cloud.google.com/gke-nodepool": "a3" }));
        let local = &read_group("kueue.x-k8s.io", "v1beta1", "LocalQueue").await[0];
        assert_eq!((local.metadata.namespace.as_deref(), &local.data["spec"]["clusterQueue"]), (Some("default"), &json!("a3-queue")));
        let kueue_configs: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), "kueue-system");
        let manager = kueue_configs.get("kueue-manager-config").await.unwrap().data.unwrap();
        assert!(manager["controller_manager_config.yaml"].contains("${NAMESPACE}"), "a bundle's text is applied as it is");
    });
    let (_, log) = crate::support::request(
        "GET",
        &format!("/_forge/kubernetes/requests?cluster=gke/{}/us-central1/nemo", gcp.project),
        "",
    );
    let log: Value = serde_json::from_str(&log).unwrap();
    let tokens: std::collections::BTreeSet<&str> = log.as_array().unwrap().iter().filter_map(|r| r["token"].as_str()).collect();
    assert_eq!(
        tokens,
        ["emulator-token", "test-reader"].into_iter().collect(),
        "forge's calls carry the Google access token"
    );
    gcp.ok(&["destroy", "nemo.toml", "--yes"]);
}

/// An object of a kind the cluster does not serve — GKE's `networking.gke.io` on a cluster
/// without multi-networking — fails after the object's API wait, naming the group and the
/// likely cause; a private endpoint is noted in the plan.
#[test]
fn an_unserved_gke_networking_kind_fails_after_its_wait_naming_the_group() {
    let gcp = Gcp::new();
    let network = "\n[k8s_manifest.net]\ncluster = \"gke.small\"\nobjects = [{ apiVersion = \"networking.gke.io/v1\", kind = \"Network\", metadata = { name = \"vpc1\" }, spec = { type = \"Device\" } }]\n";
    let stack = SMALL_GKE.replace("[gke.small]\n", "[gke.small]\nkubernetes = { api_timeout = \"3s\" }\n");
    gcp.write("small.toml", &format!("{stack}{network}"));
    let (code, stderr) = gcp.forge(&["up", "small.toml", "--yes", "--no-wait-ready"]);
    let stderr = flat(&stderr);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("does not serve networking.gke.io/v1 (kind Network) after 3s, so Network vpc1 cannot be applied"),
        "{stderr}"
    );
    assert!(stderr.contains("multi-networking enabled"), "{stderr}");
    // The cloud side is all there; the object's create stays pending, for the next `up`.
    let state = forge::state::LocalStore::new(gcp.dir.path().join("state/small.json"))
        .load("small")
        .unwrap()
        .state;
    assert!(state.resources.contains_key("gke.small.cluster"));
    assert!(
        state
            .resources
            .iter()
            .filter(|(a, _)| a.starts_with("k8s_manifest.net"))
            .all(|(_, r)| r.status == forge::state::Status::PendingCreate)
    );
    let private = stack.replace("[gke.small]\n", "[gke.small]\nprivate_nodes = true\nprivate_endpoint = true\n");
    gcp.write("small.toml", &format!("{private}{network}"));
    let (_, plan) = gcp.forge(&["plan", "small.toml"]);
    assert!(flat(&plan).contains("`gke.small.cluster` has a private endpoint only"), "{plan}");
    gcp.write("small.toml", &stack);
    gcp.ok(&["destroy", "small.toml", "--yes"]);
}

/// A network made outside forge is read by its path, used by a subnetwork forge makes in it,
/// never written, and left by destroy.
#[test]
fn an_existing_network_is_read_used_and_left() {
    let gcp = Gcp::new();
    let (status, _) = gcp.compute(
        "POST",
        "global/networks",
        json!({ "name": "shared", "autoCreateSubnetworks": false, "mtu": 8896, "description": "the platform team's" }),
    );
    assert_eq!(status, 200);
    std::thread::sleep(std::time::Duration::from_millis(800));
    gcp.calls();
    gcp.write(
        "net.toml",
        r#"
[stack]
name = "gcp-existing"

[gcp]
project = "PROJECT"
region = "us-central1"

[google_compute_network.shared]
existing = "projects/PROJECT/global/networks/shared"

[google_compute_subnetwork.gpu]
name = "gpu"
network = "${google_compute_network.shared.self_link}"
ip_cidr_range = "10.8.0.0/20"

[outputs]
mtu = "${google_compute_network.shared.mtu}"
"#,
    );
    let out = gcp.ok(&["up", "net.toml", "--yes"]);
    assert!(
        out.contains(&format!(
            "<= google_compute_network.shared (google_compute_network, projects/{}/global/networks/shared)",
            gcp.project
        )),
        "{out}"
    );
    assert!(out.contains("mtu = 8896"), "{out}");
    let made = writes(&gcp.calls());
    assert_eq!(made.keys().collect::<Vec<_>>(), ["compute:subnetworks.insert"], "{made:?}");
    let (_, subnet) = gcp.compute("GET", "regions/us-central1/subnetworks/gpu", Value::Null);
    assert!(subnet["network"].as_str().unwrap().ends_with("/global/networks/shared"), "{subnet}");

    let (code, stderr) = gcp.forge(&["plan", "net.toml", "--detailed-exitcode"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(writes(&gcp.calls()).is_empty());

    let out = gcp.ok(&["destroy", "net.toml", "--yes"]);
    assert!(out.contains("- google_compute_network.shared (read only: no call)"), "{out}");
    let gone = writes(&gcp.calls());
    assert_eq!(gone.keys().collect::<Vec<_>>(), ["compute:subnetworks.delete"], "{gone:?}");
    assert_eq!(gcp.names("global/networks"), ["shared"]);
    let (_, network) = gcp.compute("GET", "global/networks/shared", Value::Null);
    assert_eq!(network["description"], "the platform team's", "no mark was added");
}

/// A network, its subnetwork (`cidr`) and a RUNNING GKE cluster on them, all named `name`, made
/// through the REST APIs as gcloud would, the cluster with `extra` fields besides.
fn made_by_hand(gcp: &Gcp, name: &str, cidr: &str, extra: Value) {
    let (status, _) = gcp.compute("POST", "global/networks", json!({ "name": name, "autoCreateSubnetworks": false }));
    assert_eq!(status, 200);
    std::thread::sleep(std::time::Duration::from_millis(800));
    let subnet = json!({ "name": name, "network": format!("projects/{}/global/networks/{name}", gcp.project), "ipCidrRange": cidr });
    let (status, body) = gcp.compute("POST", "regions/us-central1/subnetworks", subnet);
    assert_eq!(status, 200, "{body}");
    std::thread::sleep(std::time::Duration::from_millis(800));
    let mut cluster = json!({
        "name": name,
        "network": name,
        "subnetwork": name,
        "nodePools": [{ "name": "default-pool", "initialNodeCount": 1, "config": { "machineType": "e2-standard-4" } }],
    });
    cluster.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    let (status, body) = gcp.container("POST", "clusters", json!({ "cluster": cluster }));
    assert_eq!(status, 200, "{body}");
    gcp.settled(&format!("clusters/{name}"));
}

/// A GKE cluster made outside forge (here through the REST API, as gcloud would) gains a GPU
/// pool and its in-cluster objects, is never written, and keeps running after destroy.
#[test]
fn an_existing_gke_cluster_gains_a_pool_and_is_left_running() {
    let gcp = Gcp::new();
    made_by_hand(&gcp, "hand", "10.30.0.0/20", json!({}));
    gcp.calls();
    gcp.write(
        "hand.toml",
        r#"
[stack]
name = "on-hand"

[gcp]
project = "PROJECT"
region = "us-central1"

[gke.hand]
existing = "projects/PROJECT/locations/us-central1/clusters/hand"

[gke.hand.node_pools.gpu]
machine_type = "g2-standard-8"
size = 1
zone = "us-central1-a"
"#,
    );
    let out = gcp.ok(&["up", "hand.toml", "--yes"]);
    assert!(
        out.contains(&format!(
            "<= gke.hand.cluster (google_container_cluster, projects/{}/locations/us-central1/clusters/hand)",
            gcp.project
        )),
        "{out}"
    );
    assert!(out.contains("Ready: gke/"), "{out}");
    let made = writes(&gcp.calls());
    let on_the_cluster: Vec<&String> = made.keys().filter(|k| k.contains("clusters") && !k.contains("nodePools")).collect();
    assert!(on_the_cluster.is_empty(), "forge wrote to the cluster: {made:?}");
    let pools = gcp.located("container", "us-central1/clusters/hand/nodePools");
    let mut names: Vec<&str> = pools["nodePools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    names.sort_unstable();
    assert_eq!(names, ["default-pool", "gpu"]);

    let (code, stderr) = gcp.forge(&["plan", "hand.toml", "--detailed-exitcode"]);
    assert_eq!(code, 0, "{stderr}");

    let out = gcp.ok(&["destroy", "hand.toml", "--yes"]);
    assert!(out.contains("- gke.hand.cluster (read only: no call)"), "{out}");
    let cluster = gcp.located("container", "us-central1/clusters/hand");
    assert_eq!(cluster["status"], "RUNNING");
    let pools = gcp.located("container", "us-central1/clusters/hand/nodePools");
    let names: Vec<&str> = pools["nodePools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["default-pool"]);
}

/// `forge import` of a Filestore instance made outside forge: its description gains forge's
/// mark after its own, the next plan has nothing to do, and another stack may not take it.
#[test]
fn an_imported_filestore_instance_is_marked_in_its_description() {
    let gcp = Gcp::new();
    let (status, _) = gcp.compute(
        "POST",
        "global/networks",
        json!({ "name": "files", "autoCreateSubnetworks": false }),
    );
    assert_eq!(status, 200);
    std::thread::sleep(std::time::Duration::from_millis(800));
    let instance = json!({
        "tier": "BASIC_SSD",
        "description": "shared datasets",
        "fileShares": [{ "name": "data", "capacityGb": 2560 }],
        "networks": [{ "network": "files", "modes": ["MODE_IPV4"] }],
    });
    let path = format!(
        "/file/v1/projects/{}/locations/us-central1-a/instances?instanceId=datasets",
        gcp.project
    );
    let (status, body) = crate::support::request("POST", &path, &instance.to_string());
    assert_eq!(status, 200, "{body}");
    let id = format!("projects/{}/locations/us-central1-a/instances/datasets", gcp.project);
    while gcp.located("file", "us-central1-a/instances/datasets")["state"] != "READY" {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let stack = |name: &str| {
        format!(
            "[stack]\nname = \"{name}\"\n[gcp]\nproject = \"PROJECT\"\nregion = \"us-central1\"\n[google_filestore_instance.data]\nname = \"datasets\"\nlocation = \"us-central1-a\"\ntier = \"BASIC_SSD\"\nnetwork = \"files\"\nshare_name = \"data\"\ncapacity_gib = 2560\ndescription = \"shared datasets\"\n"
        )
    };
    gcp.write("files.toml", &stack("files"));
    let out = gcp.ok(&["import", "files.toml", "google_filestore_instance.data", &id]);
    assert!(out.contains("as `google_filestore_instance.data`"), "{out}");
    let description = gcp.located("file", "us-central1-a/instances/datasets")["description"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        description.starts_with("shared datasets [forge:stack=files forge:address=google_filestore_instance.data forge:token="),
        "{description}"
    );
    let (code, stderr) = gcp.forge(&["plan", "files.toml", "--detailed-exitcode"]);
    assert_eq!(code, 0, "{stderr}");

    gcp.write("other.toml", &stack("other"));
    let (code, stderr) = gcp.forge(&["import", "other.toml", "google_filestore_instance.data", &id]);
    assert_eq!(code, 1, "{stderr}");
    assert!(flat(&stderr).contains("belongs to the forge stack `files`"), "{stderr}");
}

/// GPUDirect pools on a cluster forge did not make: with its multi-networking off the plan
/// says so before anything is made; once it is on, the pool's networks are made as for a
/// cluster forge makes, and destroy takes them and the pool and leaves the cluster.
#[test]
fn a_gpudirect_pool_joins_an_existing_cluster_once_it_has_multi_networking() {
    let gcp = Gcp::new();
    let dataplane_v2 =
        json!({ "ipAllocationPolicy": { "useIpAliases": true }, "networkConfig": { "datapathProvider": "ADVANCED_DATAPATH" } });
    made_by_hand(&gcp, "wide", "10.40.0.0/20", dataplane_v2);
    gcp.write(
        "wide.toml",
        r#"
[stack]
name = "wide"

[gcp]
project = "PROJECT"
region = "us-central1"

[gke.wide]
existing = "projects/PROJECT/locations/us-central1/clusters/wide"

[gke.wide.node_pools.high]
machine_type = "a3-highgpu-8g"
size = 1
zone = "us-central1-b"
"#,
    );
    gcp.calls();
    let (code, stderr) = gcp.forge(&["plan", "wide.toml"]);
    assert_eq!(code, 1, "{stderr}");
    let flat = flat(&stderr);
    assert!(
        flat.contains("`gke.wide.node_pools.high`: node pool `high` talks GPUDirect over 4 additional networks, and cluster `wide` has multi-networking off"),
        "{stderr}"
    );
    assert!(flat.contains("--enable-multi-networking"), "{stderr}");
    assert!(writes(&gcp.calls()).is_empty(), "a plan writes nothing");

    let (status, body) = gcp.container(
        "PUT",
        "clusters/wide",
        json!({ "update": { "desiredEnableMultiNetworking": true } }),
    );
    assert_eq!(status, 200, "{body}");
    gcp.settled("clusters/wide");
    gcp.ok(&["up", "wide.toml", "--yes"]);
    let pool = gcp.located("container", "us-central1/clusters/wide/nodePools/high");
    let networks = pool["networkConfig"]["additionalNodeNetworkConfigs"].as_array().unwrap();
    assert_eq!(networks.len(), 4, "{pool:#}");
    let (code, stderr) = gcp.forge(&["plan", "wide.toml", "--detailed-exitcode"]);
    assert_eq!(code, 0, "{stderr}");

    gcp.ok(&["destroy", "wide.toml", "--yes"]);
    let (_, listed) = gcp.compute("GET", "global/networks", Value::Null);
    let names: Vec<&str> = listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["wide"], "the GPU networks go, the cluster's stays");
    assert_eq!(gcp.located("container", "us-central1/clusters/wide")["status"], "RUNNING");
}

/// A `gcp_vpc` block with `existing` reads a network and subnetwork made outside forge (with
/// the secondary ranges GKE needs); a cluster forge makes goes on them, and destroy leaves them.
#[test]
fn a_cluster_goes_on_an_existing_gcp_vpc_and_leaves_it() {
    let gcp = Gcp::new();
    let (status, _) = gcp.compute(
        "POST",
        "global/networks",
        json!({ "name": "shared", "autoCreateSubnetworks": false }),
    );
    assert_eq!(status, 200);
    std::thread::sleep(std::time::Duration::from_millis(800));
    let subnet = json!({
        "name": "shared-nodes",
        "network": format!("projects/{}/global/networks/shared", gcp.project),
        "ipCidrRange": "10.40.0.0/20",
        "secondaryIpRanges": [
            { "rangeName": "gke-pods", "ipCidrRange": "10.44.0.0/14" },
            { "rangeName": "gke-services", "ipCidrRange": "10.48.0.0/20" },
        ],
        "privateIpGoogleAccess": true,
    });
    let (status, body) = gcp.compute("POST", "regions/us-central1/subnetworks", subnet);
    assert_eq!(status, 200, "{body}");
    std::thread::sleep(std::time::Duration::from_millis(800));
    gcp.calls();
    gcp.write(
        "small.toml",
        &SMALL_GKE
            .replace(
                "cidr = \"10.0.0.0/20\"\npods_cidr = \"10.4.0.0/14\"\nservices_cidr = \"10.8.0.0/20\"",
                "existing = \"shared\"\nsubnetwork = \"shared-nodes\"\npods_range = \"gke-pods\"\nservices_range = \"gke-services\"",
            )
            .replace("[gke.small.node_pools.gpu]\nmachine_type = \"g2-standard-8\"\nsize = 1\nzone = \"us-central1-a\"\nlabels = { team = \"ml\" }\n", ""),
    );
    let out = gcp.ok(&["up", "small.toml", "--yes"]);
    assert!(out.contains("<= gcp_vpc.main.subnetwork (google_compute_subnetwork, "), "{out}");
    let made = writes(&gcp.calls());
    assert!(
        !made.keys().any(|k| k.starts_with("compute:")),
        "nothing written to Compute: {made:?}"
    );
    let cluster = gcp.located("container", "us-central1/clusters/small");
    assert_eq!(cluster["network"], "shared", "{cluster:#}");
    assert_eq!(
        cluster["ipAllocationPolicy"]["clusterSecondaryRangeName"], "gke-pods",
        "{cluster:#}"
    );
    gcp.ok(&["destroy", "small.toml", "--yes"]);
    assert_eq!(gcp.names("global/networks"), ["shared"]);
    assert_eq!(gcp.names("regions/us-central1/subnetworks"), ["shared-nodes"]);
}
