//! FSx for Lustre: growing in place, refusing a shrink without `--allow-data-loss`, and a kill
//! during its wait.

use super::*;

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
