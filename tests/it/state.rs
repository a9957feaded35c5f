//! Remote state end to end, in S3 (`[state] backend = "s3"`, moto's S3) and in GCS (`backend =
//! "gcs"`, the launcher's Cloud Storage JSON API): the real `forge` binary, reached only
//! through the standard environment (`AWS_ENDPOINT_URL`, `STORAGE_EMULATOR_HOST`). Each test
//! has its own account (a GCS bucket's project) and bucket; the stacks are `null` resources, so
//! only the state is remote. Every behaviour is checked on both stores.
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// Which object store a test's state lives in.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Backend {
    S3,
    Gcs,
}

/// One test's world: an account with a bucket on the emulator, and a working directory.
struct Bucket {
    backend: Backend,
    account: String,
    name: String,
    dir: tempfile::TempDir,
    runtime: tokio::runtime::Runtime,
    s3: aws_sdk_s3::Client,
}

impl Bucket {
    fn new(backend: Backend) -> Self {
        let account = crate::support::fresh_account();
        let name = format!("forge-state-{account}");
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let s3 = runtime.block_on(async {
            let config = aws_config::defaults(aws_config::BehaviorVersion::latest())
                .endpoint_url(crate::support::launcher_url())
                .region(aws_config::Region::new("us-west-2"))
                .credentials_provider(aws_sdk_s3::config::Credentials::new(&account, "secret", None, None, "test"))
                .load()
                .await;
            aws_sdk_s3::Client::from_conf(aws_sdk_s3::config::Builder::from(&config).force_path_style(true).build())
        });
        match backend {
            Backend::S3 => runtime.block_on(crate::support::s3_bucket(&s3, &name)),
            Backend::Gcs => {
                let (status, body) = crate::support::gcs_bucket(&account, &name);
                assert_eq!(status, 200, "{body}");
            }
        }
        Bucket {
            backend,
            account,
            name,
            dir: tempfile::tempdir().unwrap(),
            runtime,
            s3,
        }
    }

    /// `s3` or `gs`, as state locations are written.
    fn scheme(&self) -> &'static str {
        match self.backend {
            Backend::S3 => "s3",
            Backend::Gcs => "gs",
        }
    }

    fn backend_name(&self) -> &'static str {
        match self.backend {
            Backend::S3 => "s3",
            Backend::Gcs => "gcs",
        }
    }

    /// Writes a stack file whose `[state]` is this bucket, with `[state]` lines `extra`.
    fn stack(&self, file: &str, name: &str, extra: &str, body: &str) -> PathBuf {
        let text = format!(
            "[stack]\nname = \"{name}\"\n\n[state]\nbackend = \"{}\"\nbucket = \"{}\"\n{extra}\n{body}",
            self.backend_name(),
            self.name
        );
        let path = self.dir.path().join(file);
        std::fs::write(&path, text).unwrap();
        path
    }

    fn command(&self, args: &[&str]) -> std::process::Command {
        let mut cmd = crate::support::aws_forge(self.dir.path(), &self.account, args);
        cmd.env("STORAGE_EMULATOR_HOST", crate::support::launcher_url())
            .env("GOOGLE_OAUTH_ACCESS_TOKEN", "emulator-token")
            .env_remove("CLOUDSDK_API_ENDPOINT_OVERRIDES_STORAGE");
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

    fn spawn(&self, args: &[&str]) -> Child {
        self.command(args).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap()
    }

    /// The bucket's keys, sorted.
    fn keys(&self) -> Vec<String> {
        let mut keys: Vec<String> = match self.backend {
            Backend::S3 => self.runtime.block_on(async {
                let listed = self.s3.list_objects_v2().bucket(&self.name).send().await.unwrap();
                listed.contents().iter().filter_map(|o| o.key().map(str::to_owned)).collect()
            }),
            Backend::Gcs => {
                let (status, body) = crate::support::request("GET", &format!("/storage/v1/b/{}/o", self.name), "");
                assert_eq!(status, 200, "{body}");
                let listed: serde_json::Value = serde_json::from_str(&body).unwrap();
                let items = listed["items"].as_array().cloned().unwrap_or_default();
                items.iter().map(|o| o["name"].as_str().unwrap().to_owned()).collect()
            }
        };
        keys.sort();
        keys
    }

    fn get(&self, key: &str) -> Option<Vec<u8>> {
        match self.backend {
            Backend::S3 => self.runtime.block_on(async {
                let out = self.s3.get_object().bucket(&self.name).key(key).send().await.ok()?;
                Some(out.body.collect().await.unwrap().into_bytes().to_vec())
            }),
            Backend::Gcs => {
                let path = format!("/storage/v1/b/{}/o/{}?alt=media", self.name, key.replace('/', "%2F"));
                let (status, body) = crate::support::request("GET", &path, "");
                (status == 200).then(|| body.into_bytes())
            }
        }
    }

    /// Whether the lock is free: absent, or written empty by its last holder.
    fn unlocked(&self, key: &str) -> bool {
        self.get(&format!("{key}.lock")).is_none_or(|b| b.is_empty())
    }

    fn put(&self, key: &str, bytes: Vec<u8>) {
        match self.backend {
            Backend::S3 => self.runtime.block_on(async {
                self.s3
                    .put_object()
                    .bucket(&self.name)
                    .key(key)
                    .body(bytes.into())
                    .send()
                    .await
                    .unwrap();
            }),
            Backend::Gcs => {
                let path = format!(
                    "/upload/storage/v1/b/{}/o?uploadType=media&name={}",
                    self.name,
                    key.replace('/', "%2F")
                );
                let (status, body) = crate::support::request("POST", &path, std::str::from_utf8(&bytes).unwrap());
                assert_eq!(status, 200, "{body}");
            }
        }
    }

    /// The state as stored: snapshot folded with its journal segments, through forge's reader.
    fn state(&self, file: &str) -> serde_json::Value {
        let out = self.command(&["state", "list", file]).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let lines: Vec<String> = String::from_utf8_lossy(&out.stdout).lines().map(str::to_owned).collect();
        serde_json::json!(lines)
    }

    /// The calls this account made (`s3:METHOD /{}/{}`, `storage:objects.insert`); clears the
    /// counter.
    fn calls(&self) -> std::collections::BTreeMap<String, u64> {
        let (_, body) = crate::support::request("GET", &format!("/_forge/calls?account={}", self.account), "");
        crate::support::request("POST", &format!("/_forge/reset?account={}", self.account), "{}");
        serde_json::from_str(&body).unwrap()
    }

    /// The store's writes among `calls`.
    fn writes(&self, calls: &std::collections::BTreeMap<String, u64>) -> u64 {
        calls
            .iter()
            .filter(|(name, _)| name.starts_with("s3:PUT") || name.starts_with("s3:DELETE") || name.starts_with("storage:objects.insert"))
            .map(|(_, n)| n)
            .sum()
    }

    /// Makes every call of this account's store fail (`Some(kind)`: "5xx") or heals it (`None`).
    fn outage(&self, kind: Option<&str>) {
        let service = match self.backend {
            Backend::S3 => "s3:*",
            Backend::Gcs => "storage:*",
        };
        let rules = match kind {
            Some(kind) => format!(
                "[{{\"account\": \"{}\", \"match\": \"{service}\", \"kind\": \"{kind}\"}}]",
                self.account
            ),
            None => "[]".into(),
        };
        crate::support::request("POST", &format!("/_forge/faults?account={}", self.account), &rules);
    }

    fn wait_for_lock(&self, key: &str) {
        let start = Instant::now();
        while self.unlocked(key) {
            assert!(start.elapsed() < Duration::from_secs(20), "the first run never took the lock");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// An error as one line: miette wraps it at 80 columns behind a `│` gutter.
fn flat(stderr: &str) -> String {
    stderr.split_whitespace().filter(|w| *w != "│").collect::<Vec<_>>().join(" ")
}

/// Runs a test on each store.
macro_rules! on_both {
    ($test:ident: $s3:ident, $gcs:ident) => {
        #[test]
        fn $s3() {
            $test(Backend::S3);
        }
        #[test]
        fn $gcs() {
            $test(Backend::Gcs);
        }
    };
}

const LAYERS: &str = "[null_layers.g]\nlayers = 3\nwidth = 10\ndelay_ms = 20\n";

/// `up` keeps the snapshot in the bucket (the journal segments folded in, the lock released), a
/// no-op `plan` and `drift` only read, and `destroy` empties the state; a missing bucket is a
/// clear error; a local state is moved in with `state push` and back with `state pull`.
fn written_read_and_folded(backend: Backend) {
    let b = Bucket::new(backend);
    let scheme = b.scheme();
    b.stack("s.toml", "remote", "", LAYERS);
    let out = b.ok(&["up", "s.toml", "--yes"]);
    assert!(
        out.contains(&format!("state {scheme}://{}/remote/state.json ({})", b.name, b.backend_name())),
        "{out}"
    );
    let keys = b.keys();
    let segments = keys.iter().filter(|k| k.starts_with("remote/state.json.journal/")).count();
    match backend {
        // S3 deletes folded segments; the GCS crate deletes only over gRPC, so they stay.
        Backend::S3 => assert_eq!(segments, 0, "{keys:?}"),
        Backend::Gcs => assert!(segments > 0, "{keys:?}"),
    }
    assert!(keys.contains(&"remote/state.json.backup".to_owned()), "{keys:?}");
    assert!(b.unlocked("remote/state.json"), "the lock released");
    let snapshot: serde_json::Value = serde_json::from_slice(&b.get("remote/state.json").unwrap()).unwrap();
    assert_eq!(snapshot["resources"].as_array().unwrap().len(), 30);
    b.calls();
    let (code, stderr) = b.forge(&["plan", "s.toml", "--detailed-exitcode"]);
    assert_eq!(code, 0, "{stderr}");
    let out = b.command(&["drift", "s.toml"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains(&format!("state: {scheme}://{}/remote/state.json ({})", b.name, b.backend_name())),
        "drift says which state it read: {stdout}"
    );
    let reads = b.calls();
    assert!(!reads.is_empty());
    assert_eq!(b.writes(&reads), 0, "plan and drift only read: {reads:?}");
    b.ok(&["destroy", "s.toml", "--yes"]);
    let snapshot: serde_json::Value = serde_json::from_slice(&b.get("remote/state.json").unwrap()).unwrap();
    assert!(snapshot["resources"].as_array().unwrap().is_empty());
    assert!(b.get("remote/state.json.backup").is_some(), "the previous snapshot kept");

    // A bucket that does not exist: a clear error naming it, and nothing written anywhere.
    std::fs::write(
        b.dir.path().join("missing.toml"),
        format!(
            "[stack]\nname = \"missing\"\n[state]\nbackend = \"{}\"\nbucket = \"no-such-{}\"\n{LAYERS}",
            b.backend_name(),
            b.name
        ),
    )
    .unwrap();
    let (code, stderr) = b.forge(&["up", "missing.toml", "--yes"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains(&format!("{scheme}://no-such-{}/missing/state.json", b.name)),
        "{stderr}"
    );
    assert!(
        stderr.contains("create the bucket first") && stderr.contains("endpoint http://"),
        "{stderr}"
    );
    match backend {
        Backend::S3 => assert!(stderr.contains("NoSuchBucket") && stderr.contains("region us-west-2"), "{stderr}"),
        Backend::Gcs => assert!(
            stderr.contains("The specified bucket does not exist") && stderr.contains("project"),
            "{stderr}"
        ),
    }
    assert!(!b.dir.path().join("state").exists(), "nothing local");

    // A stack whose state is local, switched to the bucket: refused, not started empty.
    std::fs::write(b.dir.path().join("moved.toml"), format!("[stack]\nname = \"moved\"\n{LAYERS}")).unwrap();
    b.ok(&["up", "moved.toml", "--yes"]);
    b.stack("moved.toml", "moved", "", LAYERS);
    let (code, stderr) = b.forge(&["up", "moved.toml", "--yes"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("forge will not start an empty one beside it"), "{stderr}");
    assert!(stderr.contains("forge state push moved.toml"), "{stderr}");
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
on_both!(written_read_and_folded: an_s3_state_is_written_read_and_folded, a_gcs_state_is_written_read_and_folded);

/// Two `up` at once on one state: exactly one proceeds, the other fails at once naming the
/// holder, or waits for it with `--lock-timeout`.
fn second_run_names_the_holder(backend: Backend) {
    let b = Bucket::new(backend);
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
on_both!(second_run_names_the_holder: a_second_run_fails_naming_the_holder_of_the_s3_lock, a_second_run_fails_naming_the_holder_of_the_gcs_lock);

/// A lock whose lease ran out is taken over, by exactly one of two runs that both find it.
fn expired_lease_taken_over_once(backend: Backend) {
    let b = Bucket::new(backend);
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
    assert!(b.unlocked("lease/state.json"), "released");
}
on_both!(expired_lease_taken_over_once: an_expired_s3_lease_is_taken_over_by_exactly_one_run, an_expired_gcs_lease_is_taken_over_by_exactly_one_run);

/// SIGKILL of `up` and `destroy` at random points, then a rerun: the state holds every
/// resource once, and a killed run's lock (a dead process of this host) is taken over.
fn sigkill_converges(backend: Backend) {
    let b = Bucket::new(backend);
    b.stack("s.toml", "crash", "", "[null_layers.g]\nlayers = 4\nwidth = 10\ndelay_ms = 60\n");
    let mut moments = crate::support::Moments::new(0x0005_3ee0_f9c9);
    for round in 0..6 {
        let command = if round % 3 == 2 { "destroy" } else { "up" };
        crate::support::kill_after(b.spawn(&[command, "s.toml", "--yes"]), moments.next(100, 900));
    }
    let out = b.ok(&["up", "s.toml", "--yes"]);
    assert!(!out.contains("Error"), "{out}");
    let listed = b.state("s.toml");
    let rows = listed.as_array().unwrap();
    assert_eq!(rows.len(), 40, "{listed:#}");
    assert!(rows.iter().all(|r| r.as_str().unwrap().contains("\tcreated\t")), "{listed:#}");
    let (code, stderr) = b.forge(&["plan", "s.toml", "--detailed-exitcode"]);
    assert_eq!(code, 0, "converged: {stderr}");
    // The lock is free, and every segment left is one the snapshot already holds (below its
    // serial, never read again): left by a kill during a snapshot's write, or, on GCS, every
    // folded one.
    assert!(b.unlocked("crash/state.json"));
    let snapshot: serde_json::Value = serde_json::from_slice(&b.get("crash/state.json").unwrap()).unwrap();
    let serial = snapshot["serial"].as_u64().unwrap();
    for key in b.keys() {
        match key.rsplit_once('/') {
            _ if ["crash/state.json", "crash/state.json.backup", "crash/state.json.lock"].contains(&key.as_str()) => {}
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
on_both!(sigkill_converges: sigkill_at_random_points_with_s3_state_converges, sigkill_at_random_points_with_gcs_state_converges);

/// `forge state unlock FILE ID` releases a lock left by a run on another host, and only with
/// its id.
fn unlock_by_id(backend: Backend) {
    let b = Bucket::new(backend);
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
    assert!(b.unlocked("held/state.json"));
    b.ok(&["up", "s.toml", "--yes"]);
}
on_both!(unlock_by_id: state_unlock_releases_an_s3_lock_by_its_id, state_unlock_releases_a_gcs_lock_by_its_id);

/// The store fails every call for a while in the middle of an apply: no cloud call is made
/// without its intent stored, the run stops and leaves its whole state in the rescue file, the
/// stack is refused until that is pushed, and after the push nothing is missing or doubled.
fn outage_rescued(backend: Backend) {
    let b = Bucket::new(backend);
    b.stack("s.toml", "outage", "", "[null_layers.g]\nlayers = 4\nwidth = 10\ndelay_ms = 300\n");
    let run = b.spawn(&["up", "s.toml", "--yes"]);
    b.wait_for_lock("outage/state.json");
    std::thread::sleep(Duration::from_millis(500));
    b.outage(Some("5xx"));
    let out = run.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let said = flat(&stderr);
    assert!(said.contains("the state could not be saved"), "{stderr}");
    assert!(
        said.contains("nothing is lost: the state is in `state/outage.rescue.json`"),
        "{stderr}"
    );
    assert!(
        said.contains("when the bucket answers again, run `forge state push s.toml --from"),
        "{stderr}"
    );
    assert!(stderr.contains("Apply stopped"), "{stderr}");
    assert!(
        said.contains("whose intent the state could not store first, so the cloud was not called"),
        "{stderr}"
    );
    assert!(!stderr.contains("create failed"), "nothing the cloud refused: {stderr}");
    let rescued: serde_json::Value =
        serde_json::from_slice(&std::fs::read(b.dir.path().join("state/outage.rescue.json")).unwrap()).unwrap();
    let made = rescued["resources"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["status"] == "created")
        .count();
    assert!(made > 0 && made < 40, "the outage hit mid-apply: {made} created");
    b.outage(None);
    // Until it is pushed, forge refuses to change the stack (a plan still reads).
    let (code, stderr) = b.forge(&["up", "s.toml", "--yes"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("left it in `state/outage.rescue.json`"), "{stderr}");
    assert!(flat(&stderr).contains("push it first: `forge state push s.toml --from"), "{stderr}");
    b.ok(&["plan", "s.toml"]);
    b.ok(&["state", "push", "s.toml", "--from", "state/outage.rescue.json"]);
    assert!(!b.dir.path().join("state/outage.rescue.json").exists(), "removed once pushed");
    let pushed: serde_json::Value = serde_json::from_slice(&b.get("outage/state.json").unwrap()).unwrap();
    assert_eq!(pushed["serial"], rescued["serial"]);
    // Each resource the interrupted run created is known by its id; the rest are made once.
    let out = b.ok(&["up", "s.toml", "--yes"]);
    assert!(out.contains(&format!("{} added", 40 - made)), "{out}");
    let rows = b.state("s.toml");
    assert_eq!(rows.as_array().unwrap().len(), 40, "{rows:#}");
}
on_both!(outage_rescued: an_s3_outage_mid_apply_is_rescued_then_pushed, a_gcs_outage_mid_apply_is_rescued_then_pushed);

/// Someone writes the snapshot while a run holds the lock (a run that stalled past its lease,
/// a hand edit): the run's compare-and-swap fails, it says so, and the other snapshot stands.
fn snapshot_conflict(backend: Backend) {
    let b = Bucket::new(backend);
    b.stack("s.toml", "cas", "", "[null.slow]\ndelay_ms = 1500\n");
    let run = b.spawn(&["up", "s.toml", "--yes"]);
    b.wait_for_lock("cas/state.json");
    let start = Instant::now();
    let mut other: serde_json::Value = loop {
        if let Some(bytes) = b.get("cas/state.json") {
            break serde_json::from_slice(&bytes).unwrap();
        }
        assert!(start.elapsed() < Duration::from_secs(20), "no first snapshot");
        std::thread::sleep(Duration::from_millis(20));
    };
    other["serial"] = serde_json::json!(1000);
    b.put("cas/state.json", serde_json::to_vec(&other).unwrap());
    let out = run.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let said = flat(&stderr);
    assert!(said.contains("was changed by another run since this one read it"), "{stderr}");
    assert!(
        said.contains("nothing is lost: the state is in `state/cas.rescue.json`"),
        "{stderr}"
    );
    let stored: serde_json::Value = serde_json::from_slice(&b.get("cas/state.json").unwrap()).unwrap();
    assert_eq!(stored["serial"], 1000, "the other writer's snapshot stands");
    // Pushing the rescue over the newer snapshot is refused.
    let (code, stderr) = b.forge(&["state", "push", "s.toml", "--from", "state/cas.rescue.json"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("is newer"), "{stderr}");
}
on_both!(snapshot_conflict: a_changed_s3_snapshot_is_a_conflict, a_changed_gcs_snapshot_is_a_conflict);

/// A third of the store's writes land but lose their answer (a server error after the write):
/// the clients retry them, the retried conditional writes fail their own condition, and forge
/// recognises its own bytes instead of taking them for another run's. The apply completes.
fn lost_answers(backend: Backend) {
    let b = Bucket::new(backend);
    b.stack("s.toml", "lost", "", LAYERS);
    let writes = match backend {
        Backend::S3 => "s3:PUT*",
        Backend::Gcs => "storage:objects.insert",
    };
    let rules = format!(
        "[{{\"account\": \"{}\", \"match\": \"{writes}\", \"kind\": \"5xx\", \"when\": \"after\", \"rate\": 0.33, \"seed\": 7}}]",
        b.account
    );
    crate::support::request("POST", &format!("/_forge/faults?account={}", b.account), &rules);
    b.calls();
    b.ok(&["up", "s.toml", "--yes"]);
    let calls = b.calls();
    let lost: u64 = calls.iter().filter(|(n, _)| n.starts_with("fault:")).map(|(_, n)| n).sum();
    assert!(lost >= 3, "answers were lost: {calls:?}");
    b.outage(None);
    let (code, stderr) = b.forge(&["plan", "s.toml", "--detailed-exitcode"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(b.state("s.toml").as_array().unwrap().len(), 30);
}
on_both!(lost_answers: lost_s3_answers_are_recognised_as_forges_own_writes, lost_gcs_answers_are_recognised_as_forges_own_writes);
