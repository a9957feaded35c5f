//! What the emulator-backed test binaries share: the launcher (tests/moto/launcher.py: moto
//! and the Google API emulators on one port), started once per binary, and plain HTTP
//! requests to it — its `/_forge/` control paths and, for Google, the REST APIs themselves.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::OnceLock;

/// The emulators for this test binary (AWS and Google on one port): `FORGE_MOTO_URL` if set,
/// else a launcher started once.
pub(crate) fn launcher_url() -> &'static str {
    static URL: OnceLock<String> = OnceLock::new();
    static CHILD: OnceLock<std::sync::Mutex<Child>> = OnceLock::new();
    URL.get_or_init(|| {
        if let Ok(url) = std::env::var("FORGE_MOTO_URL") {
            return url;
        }
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let python = root.join(".venv/bin/python");
        assert!(
            python.exists(),
            "no moto venv: run `scripts/setup-moto` (scripts/test does it for you)"
        );
        let mut child = std::process::Command::new(python)
            .arg(root.join("tests/moto/launcher.py"))
            .args(["--port", "0", "--phase-seconds", "0.3", "--exit-with-stdin"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the moto launcher");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let port = line
            .trim()
            .strip_prefix("port=")
            .unwrap_or_else(|| panic!("launcher said {line:?}"));
        // The launcher exits when this process ends and the pipe to its stdin closes.
        CHILD.get_or_init(|| std::sync::Mutex::new(child));
        format!("http://127.0.0.1:{port}")
    })
}

/// A 12-digit AWS account no other test of any binary uses (the launcher keeps each account's
/// objects apart, so tests run in parallel on one emulator).
pub(crate) fn fresh_account() -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    format!("{:06}{:06}", std::process::id() % 1_000_000, n)
}

/// Unless the test already failed: every request of `account` (an AWS account, or a Google
/// project) was one the API's model allows, and no emulator defect answered one
/// (GET /_forge/violations).
pub(crate) fn assert_faithful(account: &str) {
    if std::thread::panicking() {
        return;
    }
    let (status, body) = request("GET", &format!("/_forge/violations?account={account}"), "");
    let violations: Vec<serde_json::Value> =
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("GET /_forge/violations: {status} {e}: {body}"));
    assert!(
        violations.is_empty(),
        "account {account}: {} request(s) broke the API's model or met an emulator defect:\n{}",
        violations.len(),
        violations.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n")
    );
}

/// `METHOD path` with a JSON body to the launcher: the HTTP status and the body.
pub(crate) fn request(method: &str, path: &str, body: &str) -> (u16, String) {
    let url = launcher_url().strip_prefix("http://").unwrap();
    let mut stream = std::net::TcpStream::connect(url).unwrap();
    write!(
        stream,
        "{method} {path} HTTP/1.0\r\nHost: {url}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status = response.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (
        status,
        response.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default(),
    )
}

/// `forge ARGS` run in `dir`, pointed at the emulator through the standard AWS environment
/// only, as the 12-digit `account` (the launcher keeps each account's objects apart), with the
/// emulator's mirror of the Kubernetes bundles' release hosts and a price cache of its own.
pub(crate) fn aws_forge(dir: &Path, account: &str, args: &[&str]) -> std::process::Command {
    let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("forge"));
    cmd.current_dir(dir)
        .env("NO_COLOR", "1")
        .env("AWS_ENDPOINT_URL", launcher_url())
        .env("FORGE_BUNDLE_MIRROR", format!("{}/_forge/bundles", launcher_url()))
        .env("AWS_ACCESS_KEY_ID", account)
        .env("AWS_SECRET_ACCESS_KEY", "secret")
        .env("AWS_REGION", "us-west-2")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("AWS_CONFIG_FILE", "/dev/null")
        .env("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
        .env_remove("AWS_PROFILE")
        .env("XDG_CACHE_HOME", dir.join(".cache"))
        .args(args);
    cmd
}

/// Creates the S3 bucket `name` in us-west-2 (where every test's stack is) on the emulator.
#[cfg(feature = "aws")]
pub(crate) async fn s3_bucket(s3: &aws_sdk_s3::Client, name: &str) {
    s3.create_bucket()
        .bucket(name)
        .create_bucket_configuration(
            aws_sdk_s3::types::CreateBucketConfiguration::builder()
                .location_constraint(aws_sdk_s3::types::BucketLocationConstraint::UsWest2)
                .build(),
        )
        .send()
        .await
        .unwrap();
}

/// The OIDC issuer URL of the EKS cluster `name`, as EKS reports it.
#[cfg(feature = "aws")]
pub(crate) async fn oidc_issuer(eks: &aws_sdk_eks::Client, name: &str) -> String {
    let described = eks.describe_cluster().name(name).send().await.unwrap();
    let cluster = described.cluster().unwrap();
    cluster.identity().unwrap().oidc().unwrap().issuer().unwrap().to_owned()
}

/// Asks the emulator's Cloud Storage for the bucket `name` in `project`: the HTTP status (409
/// when it exists) and the answer.
pub(crate) fn gcs_bucket(project: &str, name: &str) -> (u16, String) {
    request(
        "POST",
        &format!("/storage/v1/b?project={project}"),
        &format!("{{\"name\": \"{name}\"}}"),
    )
}

/// The moments a crash test kills forge at: drawn from a seed (a linear congruential
/// generator), so a failing run can be replayed.
pub(crate) struct Moments(u64);

impl Moments {
    /// The moments of `seed`.
    pub(crate) fn new(seed: u64) -> Self {
        Moments(seed)
    }

    /// The next moment: `min` milliseconds and less than `spread` more.
    pub(crate) fn next(&mut self, min: u64, spread: u64) -> std::time::Duration {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        std::time::Duration::from_millis(min + (self.0 >> 33) % spread)
    }
}

/// Lets `child` run for `after`, then SIGKILLs it and reaps it.
pub(crate) fn kill_after(mut child: Child, after: std::time::Duration) {
    std::thread::sleep(after);
    let _ = child.kill();
    child.wait().unwrap();
}

/// `command` started with its output discarded, for [`kill_after`].
pub(crate) fn quiet(command: &mut std::process::Command) -> Child {
    command.stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap()
}

/// `text` with the date its prices were fetched (`fetched 2026-11-27`) as `fetched <date>`, for
/// snapshots of a plan's cost section.
pub(crate) fn undated(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("fetched ") {
        let (before, after) = rest.split_at(at + "fetched ".len());
        out.push_str(before);
        let date = after.get(..10).filter(|d| {
            d.chars()
                .enumerate()
                .all(|(i, c)| if i == 4 || i == 7 { c == '-' } else { c.is_ascii_digit() })
        });
        match date {
            Some(_) => {
                out.push_str("<date>");
                rest = &after[10..];
            }
            None => rest = after,
        }
    }
    out.push_str(rest);
    out
}
