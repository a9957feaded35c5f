//! State in S3 (`[state] backend = "s3"`) end to end: the real `forge` binary against moto's S3
//! (served by tests/moto/launcher.py), through the standard AWS environment only. Each test has
//! its own account and bucket; the stacks are `null` resources, so only the state is remote.
#![cfg(feature = "aws")]

use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

mod support;

/// One test's world: an account with a bucket on the emulator, and a working directory.
struct Bucket {
    account: String,
    name: String,
    dir: tempfile::TempDir,
    runtime: tokio::runtime::Runtime,
    s3: aws_sdk_s3::Client,
}

impl Bucket {
    fn new() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(500);
        let n = NEXT.fetch_add(1, Ordering::SeqCst);
        let account = format!("{:06}{:06}", std::process::id() % 1_000_000, n);
        let name = format!("forge-state-{account}");
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let s3 = runtime.block_on(async {
            let config = aws_config::defaults(aws_config::BehaviorVersion::latest())
                .endpoint_url(support::launcher_url())
                .region(aws_config::Region::new("us-west-2"))
                .credentials_provider(aws_sdk_s3::config::Credentials::new(&account, "secret", None, None, "test"))
                .load()
                .await;
            let s3 = aws_sdk_s3::Client::from_conf(aws_sdk_s3::config::Builder::from(&config).force_path_style(true).build());
            s3.create_bucket()
                .bucket(&name)
                .create_bucket_configuration(
                    aws_sdk_s3::types::CreateBucketConfiguration::builder()
                        .location_constraint(aws_sdk_s3::types::BucketLocationConstraint::UsWest2)
                        .build(),
                )
                .send()
                .await
                .unwrap();
            s3
        });
        Bucket {
            account,
            name,
            dir: tempfile::tempdir().unwrap(),
            runtime,
            s3,
        }
    }

    /// Writes a stack file whose `[state]` is this bucket, with `[state]` lines `extra`.
    fn stack(&self, file: &str, name: &str, extra: &str, body: &str) -> PathBuf {
        let text = format!(
            "[stack]\nname = \"{name}\"\n\n[state]\nbackend = \"s3\"\nbucket = \"{}\"\n{extra}\n{body}",
            self.name
        );
        let path = self.dir.path().join(file);
        std::fs::write(&path, text).unwrap();
        path
    }

    fn command(&self, args: &[&str]) -> std::process::Command {
        support::aws_forge(self.dir.path(), &self.account, args)
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

    fn spawn(&self, args: &[&str]) -> Child {
        self.command(args).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap()
    }

    /// The bucket's keys, sorted.
    fn keys(&self) -> Vec<String> {
        self.runtime.block_on(async {
            let listed = self.s3.list_objects_v2().bucket(&self.name).send().await.unwrap();
            let mut keys: Vec<String> = listed.contents().iter().filter_map(|o| o.key().map(str::to_owned)).collect();
            keys.sort();
            keys
        })
    }

    fn get(&self, key: &str) -> Option<Vec<u8>> {
        self.runtime.block_on(async {
            let out = self.s3.get_object().bucket(&self.name).key(key).send().await.ok()?;
            Some(out.body.collect().await.unwrap().into_bytes().to_vec())
        })
    }

    fn put(&self, key: &str, bytes: Vec<u8>) {
        self.runtime.block_on(async {
            self.s3
                .put_object()
                .bucket(&self.name)
                .key(key)
                .body(bytes.into())
                .send()
                .await
                .unwrap();
        });
    }

    /// The state as stored: snapshot folded with its journal segments, through forge's reader.
    fn state(&self, file: &str) -> serde_json::Value {
        let out = self.command(&["state", "list", file]).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let lines: Vec<String> = String::from_utf8_lossy(&out.stdout).lines().map(str::to_owned).collect();
        serde_json::json!(lines)
    }

    /// S3 calls this account made, by `s3:METHOD /{}/{}`; clears the counter.
    fn calls(&self) -> std::collections::BTreeMap<String, u64> {
        let (_, body) = support::request("GET", &format!("/_forge/calls?account={}", self.account), "");
        support::request("POST", &format!("/_forge/reset?account={}", self.account), "{}");
        serde_json::from_str(&body).unwrap()
    }

    fn wait_for_lock(&self, key: &str) {
        let start = Instant::now();
        while self.get(&format!("{key}.lock")).is_none() {
            assert!(start.elapsed() < Duration::from_secs(20), "the first run never took the lock");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

const LAYERS: &str = "[null_layers.g]\nlayers = 3\nwidth = 10\ndelay_ms = 20\n";

/// `up` keeps the snapshot in the bucket (the journal segments folded in and deleted, the lock
/// released), a no-op `plan` and `drift` only read, and `destroy` empties the state.
#[test]
fn an_s3_state_is_written_read_and_folded() {
    let b = Bucket::new();
    b.stack("s.toml", "remote", "", LAYERS);
    let out = b.ok(&["up", "s.toml", "--yes"]);
    assert!(out.contains(&format!("state s3://{}/remote/state.json (s3)", b.name)), "{out}");
    assert_eq!(
        b.keys(),
        ["remote/state.json", "remote/state.json.backup"],
        "the segments folded and deleted, the lock released"
    );
    let snapshot: serde_json::Value = serde_json::from_slice(&b.get("remote/state.json").unwrap()).unwrap();
    assert_eq!(snapshot["resources"].as_array().unwrap().len(), 30);
    let writes = |calls: &std::collections::BTreeMap<String, u64>| -> u64 {
        calls
            .iter()
            .filter(|(name, _)| name.starts_with("s3:PUT") || name.starts_with("s3:DELETE"))
            .map(|(_, n)| n)
            .sum()
    };
    b.calls();
    let (code, stderr) = b.forge(&["plan", "s.toml", "--detailed-exitcode"]);
    assert_eq!(code, 0, "{stderr}");
    let out = b.command(&["drift", "s.toml"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains(&format!("state: s3://{}/remote/state.json (s3)", b.name)),
        "drift says which state it read: {stdout}"
    );
    let reads = b.calls();
    assert_eq!(writes(&reads), 0, "plan and drift only read: {reads:?}");
    b.ok(&["destroy", "s.toml", "--yes"]);
    let snapshot: serde_json::Value = serde_json::from_slice(&b.get("remote/state.json").unwrap()).unwrap();
    assert!(snapshot["resources"].as_array().unwrap().is_empty());
    assert!(b.get("remote/state.json.backup").is_some(), "the previous snapshot kept");

    // A bucket that does not exist: a clear error naming it, and nothing written anywhere.
    std::fs::write(
        b.dir.path().join("missing.toml"),
        format!(
            "[stack]\nname = \"missing\"\n[state]\nbackend = \"s3\"\nbucket = \"no-such-{}\"\n{LAYERS}",
            b.name
        ),
    )
    .unwrap();
    let (code, stderr) = b.forge(&["up", "missing.toml", "--yes"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains(&format!("s3://no-such-{}/missing/state.json", b.name)), "{stderr}");
    assert!(
        stderr.contains("NoSuchBucket") && stderr.contains("create the bucket first"),
        "{stderr}"
    );
    assert!(
        stderr.contains("region us-west-2") && stderr.contains("endpoint http://"),
        "{stderr}"
    );
    assert!(!b.dir.path().join("state").exists(), "nothing local");

    // A stack whose state is local, switched to the bucket: refused, not started empty.
    std::fs::write(b.dir.path().join("moved.toml"), format!("[stack]\nname = \"moved\"\n{LAYERS}")).unwrap();
    b.ok(&["up", "moved.toml", "--yes"]);
    b.stack("moved.toml", "moved", "", LAYERS);
    let (code, stderr) = b.forge(&["up", "moved.toml", "--yes"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("forge will not start an empty one beside it"), "{stderr}");
    assert!(b.get("moved/state.json").is_none(), "nothing written to the bucket");

    // `state push` moves it, keeping lineage and serial: the bucket's state is the local one.
    let local: serde_json::Value = serde_json::from_slice(&std::fs::read(b.dir.path().join("state/moved.json")).unwrap()).unwrap();
    b.ok(&["state", "push", "moved.toml"]);
    let pushed: serde_json::Value = serde_json::from_slice(&b.get("moved/state.json").unwrap()).unwrap();
    assert_eq!((&pushed["lineage"], &pushed["serial"]), (&local["lineage"], &local["serial"]));
    let (code, stderr) = b.forge(&["plan", "moved.toml", "--detailed-exitcode"]);
    assert_eq!(code, 0, "the stack runs from the bucket with nothing to do: {stderr}");
    // The bucket's state moves on; pushing the older local one is refused, pulling works.
    b.stack("moved.toml", "moved", "", &format!("{LAYERS}[null.extra]\n"));
    b.ok(&["up", "moved.toml", "--yes"]);
    let (code, stderr) = b.forge(&["state", "push", "moved.toml"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("is newer"), "{stderr}");
    b.ok(&["state", "pull", "moved.toml"]);
    let pulled: serde_json::Value = serde_json::from_slice(&std::fs::read(b.dir.path().join("state/moved.json")).unwrap()).unwrap();
    let remote: serde_json::Value = serde_json::from_slice(&b.get("moved/state.json").unwrap()).unwrap();
    assert_eq!(pulled, remote);
}

/// Two `up` at once on one S3 state: exactly one proceeds, the other fails at once naming the
/// holder, or waits for it with `--lock-timeout`.
#[test]
fn a_second_run_fails_naming_the_holder_of_the_s3_lock() {
    let b = Bucket::new();
    b.stack("s.toml", "slow", "", "[null.slow]\ndelay_ms = 2500\n");
    let mut first = b.spawn(&["up", "s.toml", "--yes"]);
    b.wait_for_lock("slow/state.json");
    let started = Instant::now();
    let (code, stderr) = b.forge(&["up", "s.toml", "--yes"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(started.elapsed() < Duration::from_secs(2), "it failed at once");
    assert!(
        stderr.contains("the state is locked: `up` by") && stderr.contains(&format!("(pid {})", first.id())),
        "{stderr}"
    );
    // A plan reads without waiting for the apply.
    let (code, stderr) = b.forge(&["plan", "s.toml"]);
    assert_eq!(code, 0, "{stderr}");
    b.ok(&["up", "s.toml", "--yes", "--lock-timeout", "30s"]);
    assert!(first.wait().unwrap().success());
}

/// A lock whose lease ran out is taken over, by exactly one of two runs that both find it.
#[test]
fn an_expired_lease_is_taken_over_by_exactly_one_run() {
    let b = Bucket::new();
    b.stack("s.toml", "lease", "lease = \"30s\"", "[null.slow]\ndelay_ms = 1500\n");
    let expired = serde_json::json!({
        "id": "0f0e0d0c-0000-4000-8000-000000000000", "who": "ci@elsewhere", "host": "elsewhere", "pid": 1,
        "operation": "up", "started": "2026-01-01T00:00:00Z", "expires": 1,
    });
    b.put("lease/state.json.lock", serde_json::to_vec(&expired).unwrap());
    let runs: Vec<Child> = (0..2).map(|_| b.spawn(&["up", "s.toml", "--yes"])).collect();
    let outcomes: Vec<(bool, String)> = runs
        .into_iter()
        .map(|child| {
            let out = child.wait_with_output().unwrap();
            (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
        })
        .collect();
    let winners: Vec<&String> = outcomes.iter().filter(|(ok, _)| *ok).map(|(_, e)| e).collect();
    let losers: Vec<&String> = outcomes.iter().filter(|(ok, _)| !*ok).map(|(_, e)| e).collect();
    assert_eq!(winners.len(), 1, "{outcomes:#?}");
    assert!(
        winners[0].contains("took over a stale lock: `up` by ci@elsewhere"),
        "{}",
        winners[0]
    );
    assert!(losers[0].contains("the state is locked: `up` by"), "{}", losers[0]);
    assert!(b.get("lease/state.json.lock").is_none(), "released");
}

/// SIGKILL of `up` and `destroy` at random points with S3 state, then a rerun: the state holds
/// every resource once, and a killed run's lock (a dead process of this host) is taken over.
#[test]
fn sigkill_at_random_points_with_s3_state_converges() {
    let b = Bucket::new();
    b.stack("s.toml", "crash", "", "[null_layers.g]\nlayers = 4\nwidth = 10\ndelay_ms = 60\n");
    let mut seed: u64 = 0x0005_3ee0_f9c9;
    for round in 0..6 {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let command = if round % 3 == 2 { "destroy" } else { "up" };
        let mut child = b.spawn(&[command, "s.toml", "--yes"]);
        std::thread::sleep(Duration::from_millis(100 + (seed >> 33) % 900));
        let _ = child.kill();
        child.wait().unwrap();
    }
    let out = b.ok(&["up", "s.toml", "--yes"]);
    assert!(!out.contains("Error"), "{out}");
    let listed = b.state("s.toml");
    let rows = listed.as_array().unwrap();
    assert_eq!(rows.len(), 40, "{listed:#}");
    assert!(rows.iter().all(|r| r.as_str().unwrap().contains("\tcreated\t")), "{listed:#}");
    let (code, stderr) = b.forge(&["plan", "s.toml", "--detailed-exitcode"]);
    assert_eq!(code, 0, "converged: {stderr}");
    // No lock is left, and every segment left is one a kill during a snapshot's write kept
    // after the snapshot held it: below the snapshot's serial, never read again.
    let snapshot: serde_json::Value = serde_json::from_slice(&b.get("crash/state.json").unwrap()).unwrap();
    let serial = snapshot["serial"].as_u64().unwrap();
    for key in b.keys() {
        match key.rsplit_once('/') {
            _ if key == "crash/state.json" || key == "crash/state.json.backup" => {}
            Some((prefix, first)) if prefix.starts_with("crash/state.json.journal/") => {
                assert!(
                    first.parse::<u64>().unwrap() <= serial,
                    "an unfolded segment {key} (snapshot serial {serial})"
                );
            }
            _ => panic!("unexpected object {key}"),
        }
    }
}

/// `forge state unlock FILE ID` releases an S3 lock left by a run on another host, and only
/// with its id.
#[test]
fn state_unlock_releases_an_s3_lock_by_its_id() {
    let b = Bucket::new();
    b.stack("s.toml", "held", "", "[null.a]\n");
    let held = serde_json::json!({
        "id": "1a2b3c4d-0000-4000-8000-000000000000", "who": "ci@elsewhere", "host": "elsewhere", "pid": 1,
        "operation": "up", "started": "2026-01-01T00:00:00Z", "expires": 4_000_000_000u64,
    });
    b.put("held/state.json.lock", serde_json::to_vec(&held).unwrap());
    let (code, stderr) = b.forge(&["up", "s.toml", "--yes"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("the state is locked: `up` by ci@elsewhere"), "{stderr}");
    let (code, stderr) = b.forge(&["state", "unlock", "s.toml", "not-the-id"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("does not match the lock held"), "{stderr}");
    b.ok(&["state", "unlock", "s.toml", "1a2b3c4d-0000-4000-8000-000000000000"]);
    assert!(b.get("held/state.json.lock").is_none());
    b.ok(&["up", "s.toml", "--yes"]);
}
