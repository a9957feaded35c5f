//! The `forge` binary end to end on `null` stacks: the lifecycle, saved plans, locks between
//! processes, SIGKILL at random points followed by a converging rerun, and every bad input.

use assert_cmd::Command;
use forge::state::{LocalStore, State, Status};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

struct Dir(tempfile::TempDir);

impl Dir {
    fn new() -> Self {
        Dir(tempfile::tempdir().unwrap())
    }

    fn path(&self) -> &Path {
        self.0.path()
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    fn forge(&self, args: &[&str]) -> Command {
        let mut cmd = Command::cargo_bin("forge").unwrap();
        cmd.current_dir(self.path()).env("NO_COLOR", "1").args(args);
        cmd
    }

    /// Runs forge; returns (exit code, stdout, stderr).
    fn run(&self, args: &[&str]) -> (i32, String, String) {
        let out = self.forge(args).output().unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    fn ok(&self, args: &[&str]) -> String {
        let (code, stdout, stderr) = self.run(args);
        assert_eq!(code, 0, "forge {args:?} failed:\n{stderr}");
        stdout + &stderr
    }

    fn spawn(&self, args: &[&str]) -> Child {
        std::process::Command::new(assert_cmd::cargo::cargo_bin("forge"))
            .current_dir(self.path())
            .env("NO_COLOR", "1")
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    fn state(&self, stack: &str) -> State {
        LocalStore::new(self.path().join(format!("state/{stack}.json")))
            .load(stack)
            .unwrap()
            .state
    }
}

const STACK: &str = r#"
[stack]
name = "demo"

[vars]
nodes = 2

[outputs]
first = "${null.a.id}"
label = "nodes-${var.nodes}"

[null.a]
triggers = { nodes = "${var.nodes}" }
delay_ms = 10
depends_on = ["null.b"]

[null.b]
triggers = { v = "1" }

[null.c]
triggers = { from_a = "${null.a.id}" }
"#;

#[test]
fn lifecycle_up_noop_update_replace_remove_destroy() {
    let d = Dir::new();
    d.write("s.toml", STACK);
    let out = d.ok(&["up", "s.toml", "--yes"]);
    assert!(out.contains("stack `demo` (s.toml) · state state/demo.json (local)"), "{out}");
    assert!(out.contains("Plan: 3 to add, 0 to change, 0 to replace, 0 to destroy."), "{out}");
    assert!(out.contains("Apply complete: 3 added, 0 changed, 0 destroyed"), "{out}");
    let state = d.state("demo");
    assert_eq!(state.resources.len(), 3);
    let a_id = state.resources["null.a"].id.clone().unwrap();
    assert_eq!(state.resources["null.c"].config["triggers"]["from_a"], a_id.as_str());
    assert_eq!(state.outputs["first"], a_id.as_str());
    let mode = std::fs::metadata(d.path().join("state/demo.json")).unwrap().permissions();
    assert_eq!(std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777, 0o600);

    let (code, _, stderr) = d.run(&["plan", "s.toml", "--detailed-exitcode"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("No changes. The stack matches its state (3 resources)."));

    assert_eq!(d.ok(&["output", "s.toml", "label"]).lines().next(), Some("nodes-2"));
    let (_, json, _) = d.run(&["output", "s.toml", "--json"]);
    let outputs: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(outputs["first"], a_id.as_str());

    d.write("s.toml", &STACK.replace("delay_ms = 10", "delay_ms = 20"));
    let (code, _, stderr) = d.run(&["plan", "s.toml", "--detailed-exitcode"]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("~ null.a (null)") && stderr.contains("~ delay_ms = 10 -> 20"),
        "{stderr}"
    );
    d.ok(&["up", "s.toml", "--yes"]);
    assert_eq!(
        d.state("demo").resources["null.a"].id.as_deref(),
        Some(a_id.as_str()),
        "an update keeps the id"
    );

    let out = d.ok(&["up", "s.toml", "--yes", "--var", "nodes=3"]);
    assert!(out.contains("-/+ null.a (null), replaced because triggers changed"), "{out}");
    assert!(out.contains("~ triggers.nodes = 2 -> 3   # forces replacement"), "{out}");
    assert!(
        out.contains("-/+ null.c (null), replaced because triggers changed"),
        "c depends on a's new id: {out}"
    );
    let state = d.state("demo");
    assert_ne!(state.resources["null.a"].id.as_deref(), Some(a_id.as_str()));
    assert_eq!(
        state.resources["null.c"].config["triggers"]["from_a"],
        state.resources["null.a"].id.clone().unwrap().as_str()
    );

    d.write("s.toml", "[stack]\nname = \"demo\"\n[null.b]\ntriggers = { v = \"1\" }\n");
    let out = d.ok(&["up", "s.toml", "--yes"]);
    assert!(out.contains("- null.c (null) — no longer in the stack"), "{out}");
    assert!(
        out.find("- null.c: deleted").unwrap() < out.find("- null.a: deleted").unwrap(),
        "dependents go first: {out}"
    );
    assert_eq!(d.state("demo").resources.keys().collect::<Vec<_>>(), ["null.b"]);

    let out = d.ok(&["destroy", "s.toml", "--yes"]);
    assert!(out.contains("Destroy complete: 0 added, 0 changed, 1 destroyed"), "{out}");
    assert!(d.state("demo").resources.is_empty());
    assert!(
        d.ok(&["destroy", "s.toml", "--yes"])
            .contains("No changes. The state holds no resources to destroy.")
    );
}

#[test]
fn saved_plans_apply_exactly_and_stale_ones_are_refused() {
    let d = Dir::new();
    d.write("s.toml", STACK);
    d.ok(&["plan", "s.toml", "--out", "first.plan"]);
    d.ok(&["plan", "s.toml", "--out", "second.plan"]);
    d.write("s.toml", &STACK.replace("[null.c]", "[null.d]\n[null.c]"));
    let out = d.ok(&["up", "first.plan"]);
    assert!(
        out.contains("Apply complete: 3 added"),
        "the saved plan, not the edited file: {out}"
    );
    assert!(!d.state("demo").resources.contains_key("null.d"));
    let (code, _, stderr) = d.run(&["up", "second.plan"]);
    assert_eq!(code, 1);
    assert!(stderr.contains("saved plan is stale"), "{stderr}");
    assert_eq!(d.state("demo").resources.len(), 3, "nothing was applied");

    let (_, json, _) = d.run(&["plan", "s.toml", "--json", "--destroy"]);
    let plan: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(plan["mode"], "destroy");
    assert_eq!(plan["changes"].as_array().unwrap().len(), 3);
    assert_eq!(plan["changes"][0]["address"], "null.c", "dependents are deleted first");
}

#[test]
fn a_torn_journal_tail_is_repaired_before_anything_is_appended() {
    let d = Dir::new();
    d.write("s.toml", STACK);
    d.ok(&["up", "s.toml", "--yes"]);
    let journal = d.path().join("state/demo.json.journal");
    std::fs::write(&journal, br#"{"lineage":"torn-mid-wri"#).unwrap();
    let out = d.ok(&["up", "s.toml", "--yes", "--var", "nodes=5"]);
    assert!(out.contains("warning: the state journal ended in a torn write"), "{out}");
    assert_eq!(std::fs::read(&journal).unwrap(), b"", "folded into the snapshot, torn bytes gone");
    assert_eq!(d.state("demo").resources["null.a"].config["triggers"]["nodes"], 5);
}

#[test]
fn a_plan_is_never_saved_under_a_stack_file_name() {
    let d = Dir::new();
    d.write("s.toml", STACK);
    let (code, _, stderr) = d.run(&["plan", "s.toml", "--out", "p.toml"]);
    assert_eq!(code, 1);
    assert!(stderr.contains("refusing to save a plan as `p.toml`"), "{stderr}");
}

#[test]
fn up_without_a_terminal_needs_yes() {
    let d = Dir::new();
    d.write("s.toml", STACK);
    let (code, _, stderr) = d.run(&["up", "s.toml"]);
    assert_eq!(code, 1);
    assert!(
        stderr.contains("refusing to apply without confirmation") && stderr.contains("--yes"),
        "{stderr}"
    );
    assert!(!d.path().join("state/demo.json").exists(), "nothing was written");
}

fn wait_for_lock_holder(d: &Dir, stack: &str) {
    let lock = d.path().join(format!("state/{stack}.json.lock"));
    let start = Instant::now();
    while std::fs::metadata(&lock).map_or(0, |m| m.len()) == 0 {
        assert!(start.elapsed() < Duration::from_secs(20), "the first run never took the lock");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_second_run_fails_at_once_naming_the_holder_or_waits_with_lock_timeout() {
    let d = Dir::new();
    d.write("s.toml", "[stack]\nname = \"slow\"\n[null.slow]\ndelay_ms = 2500\n");
    let mut first = d.spawn(&["up", "s.toml", "--yes"]);
    wait_for_lock_holder(&d, "slow");
    let started = Instant::now();
    let (code, _, stderr) = d.run(&["up", "s.toml", "--yes"]);
    assert_eq!(code, 1);
    assert!(started.elapsed() < Duration::from_secs(2), "it failed at once");
    assert!(
        stderr.contains("the state is locked: `up` by") && stderr.contains(&format!("(pid {})", first.id())),
        "{stderr}"
    );
    assert!(stderr.contains("lock id"), "{stderr}");
    let (code, _, stderr) = d.run(&["plan", "s.toml"]);
    assert_eq!(code, 1, "a plan does not read a state that is being written: {stderr}");
    let out = d.ok(&["plan", "s.toml", "--lock-timeout", "30s"]);
    assert!(out.contains("No changes"), "it waited for the first run: {out}");
    assert!(first.wait().unwrap().success());
}

#[test]
fn ctrl_c_waits_for_calls_in_flight_saves_state_and_the_rerun_finishes() {
    let d = Dir::new();
    let body: String = (0..6).map(|i| format!("[null.r{i}]\ndelay_ms = 1200\n")).collect();
    d.write("s.toml", &format!("[stack]\nname = \"int\"\n{body}"));
    let child = d.spawn(&["up", "s.toml", "--yes", "--parallelism", "2"]);
    wait_for_lock_holder(&d, "int");
    std::thread::sleep(Duration::from_millis(400));
    // SAFETY: sends SIGINT to our own child process.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("interrupted: starting nothing new, waiting for 2 call(s) in flight"),
        "{stderr}"
    );
    assert!(stderr.contains("interrupted: 4 change(s) not started"), "{stderr}");
    let state = d.state("int");
    assert_eq!(
        state.resources.values().filter(|r| r.status == Status::Created).count(),
        2,
        "the calls in flight finished and were saved"
    );
    let out = d.ok(&["up", "s.toml", "--yes"]);
    assert!(out.contains("Plan: 4 to add"), "{out}");
    assert_eq!(d.state("int").resources.len(), 6);
}

#[test]
fn outputs_follow_the_stack_without_resource_changes() {
    let d = Dir::new();
    d.write("s.toml", STACK);
    d.ok(&["up", "s.toml", "--yes"]);
    d.write(
        "s.toml",
        &STACK.replace("label = \"nodes-${var.nodes}\"", "label = \"n=${var.nodes}\""),
    );
    d.ok(&["up", "s.toml", "--yes"]);
    assert_eq!(d.ok(&["output", "s.toml", "label", "-q"]).trim(), "n=2");
}

#[test]
fn a_lock_left_by_a_dead_process_is_taken_over_and_can_be_unlocked() {
    let d = Dir::new();
    d.write("s.toml", "[stack]\nname = \"stale\"\n[null.a]\n");
    let mut dead = std::process::Command::new("true").spawn().unwrap();
    let pid = dead.id();
    dead.wait().unwrap();
    std::fs::create_dir_all(d.path().join("state")).unwrap();
    let info = serde_json::json!({"id": "1234", "who": "ci@box", "host": forge::state::lock::hostname(), "pid": pid, "operation": "up", "started": "2026-11-21T10:00:00Z"});
    let lock = d.path().join("state/stale.json.lock");
    std::fs::write(&lock, info.to_string()).unwrap();
    let (code, _, stderr) = d.run(&["state", "unlock", "s.toml", "wrong"]);
    assert_eq!(code, 1);
    assert!(stderr.contains("lock id `wrong` does not match"), "{stderr}");
    let out = d.ok(&["state", "unlock", "s.toml", "1234"]);
    assert!(out.contains("Released the lock held by `up` by ci@box"), "{out}");

    std::fs::write(&lock, info.to_string()).unwrap();
    let out = d.ok(&["up", "s.toml", "--yes"]);
    assert!(
        out.contains(&format!("warning: took over a stale lock: `up` by ci@box (pid {pid})")),
        "{out}"
    );
}

#[test]
fn state_list_show_and_rm() {
    let d = Dir::new();
    d.write("s.toml", STACK);
    d.ok(&["up", "s.toml", "--yes"]);
    let (_, list, _) = d.run(&["state", "list", "s.toml"]);
    assert_eq!(
        list.lines().map(|l| l.split('\t').next().unwrap()).collect::<Vec<_>>(),
        ["null.a", "null.b", "null.c"]
    );
    let (_, show, _) = d.run(&["state", "show", "s.toml", "null.b"]);
    let record: serde_json::Value = serde_json::from_str(&show).unwrap();
    assert_eq!(record["status"], "created");
    let (code, _, stderr) = d.run(&["state", "show", "s.toml", "null.bb"]);
    assert_eq!(code, 1);
    assert!(stderr.contains("did you mean `null.b`?"), "{stderr}");
    let out = d.ok(&["state", "rm", "s.toml", "null.c"]);
    assert!(out.contains("Removed `null.c` from the state"), "{out}");
    assert!(d.ok(&["plan", "s.toml"]).contains("+ null.c (null)"));
}

#[test]
fn graph_renders_in_every_format() {
    let d = Dir::new();
    d.write("s.toml", STACK);
    for format in ["text", "dot", "mermaid", "json"] {
        let (code, out, _) = d.run(&["graph", "s.toml", "--format", format]);
        assert_eq!(code, 0);
        insta::assert_snapshot!(format!("graph_{format}"), out);
    }
}

#[test]
fn plan_rendering() {
    let d = Dir::new();
    d.write("s.toml", STACK);
    d.ok(&["up", "s.toml", "--yes"]);
    d.write(
        "s.toml",
        &STACK
            .replace("delay_ms = 10", "delay_ms = 20")
            .replace("v = \"1\"", "v = \"1\", w = true")
            .replace("[null.c]", "[null.e]\n[null.c]"),
    );
    let (_, _, stderr) = d.run(&["plan", "s.toml"]);
    let plan = stderr.lines().skip(1).collect::<Vec<_>>().join("\n");
    insta::assert_snapshot!("plan_text", plan);
}

/// Kills `forge up` (or `destroy`) with SIGKILL at seeded random moments, then reruns it and
/// checks convergence: every resource created exactly once, nothing pending, nothing orphaned
/// in the state, and resources finished before the kill kept their ids.
#[test]
fn sigkill_at_random_points_then_rerun_converges() {
    let d = Dir::new();
    d.write(
        "s.toml",
        "[stack]\nname = \"crash\"\n[null_layers.g]\nlayers = 6\nwidth = 25\ndelay_ms = 60\n",
    );
    let mut moments = crate::support::Moments::new(0x5eed_f0e9);
    for round in 0..6 {
        let command = if round % 3 == 2 { "destroy" } else { "up" };
        let child = d.spawn(&[command, "s.toml", "--yes", "--parallelism", "16"]);
        crate::support::kill_after(child, moments.next(20, 600));
        let crashed = d.state("crash");
        let before_rerun: Vec<(String, String)> = crashed
            .resources
            .values()
            .filter(|r| r.status == Status::Created)
            .map(|r| (r.address.clone(), r.id.clone().unwrap()))
            .collect();
        let pending_tokens: Vec<(String, String)> = crashed
            .resources
            .values()
            .filter(|r| r.status == Status::PendingCreate)
            .map(|r| (r.address.clone(), r.token.clone().unwrap()))
            .collect();

        d.ok(&[command, "s.toml", "--yes"]);
        let state = d.state("crash");
        if command == "destroy" {
            assert!(state.resources.is_empty(), "round {round}: destroy converged to nothing");
            continue;
        }
        assert_eq!(state.resources.len(), 150, "round {round}");
        assert!(
            state.resources.values().all(|r| r.status == Status::Created),
            "round {round}: nothing left pending"
        );
        let ids: std::collections::HashSet<_> = state.resources.values().map(|r| r.id.clone().unwrap()).collect();
        assert_eq!(ids.len(), 150, "round {round}: no duplicate ids");
        for (address, id) in before_rerun {
            assert_eq!(
                state.resources[&address].id.as_deref(),
                Some(id.as_str()),
                "round {round}: `{address}` was not created twice"
            );
        }
        for (address, token) in pending_tokens {
            assert_eq!(
                state.resources[&address].id.as_deref(),
                Some(token.as_str()),
                "round {round}: `{address}` resumed with its token"
            );
        }
        let (code, _, stderr) = d.run(&["plan", "s.toml", "--detailed-exitcode"]);
        assert_eq!(code, 0, "round {round}: converged to no changes: {stderr}");
    }
}

/// Every kind of bad input: a clear error with file:line:column, the key highlighted and a
/// hint, exit code 1, and nothing written.
#[test]
fn bad_input_errors() {
    let header = "[stack]\nname = \"bad\"\n";
    let cases: &[(&str, String, &[&str])] = &[
        ("malformed_toml", format!("{header}[null.a\n"), &[]),
        ("no_stack_section", "[null.a]\n".into(), &[]),
        ("invalid_stack_name", "[stack]\nname = \"Bad_Name\"\n".into(), &[]),
        ("unknown_section", format!("{header}[nul.a]\n"), &[]),
        ("unknown_key", format!("{header}[null.a]\ntrigers = {{}}\n"), &[]),
        ("unknown_stack_key", "[stack]\nname = \"bad\"\ndescriptoin = \"x\"\n".into(), &[]),
        ("wrong_type", format!("{header}[null.a]\ndelay_ms = \"soon\"\n"), &[]),
        ("missing_required", format!("{header}[null_layers.g]\nlayers = 2\n"), &[]),
        ("invalid_block_name", format!("{header}[null.\"Has Space\"]\n"), &[]),
        ("duplicate_address", format!("{header}[null.a]\n[null.b]\n[null.a]\n"), &[]),
        (
            "unknown_reference_block",
            format!("{header}[null.a]\n[null.b]\ntriggers = {{ x = \"${{null.aa.id}}\" }}\n"),
            &[],
        ),
        (
            "unknown_reference_attribute",
            format!("{header}[null.a]\n[null.b]\ntriggers = {{ x = \"${{null.a.idd}}\" }}\n"),
            &[],
        ),
        (
            "unknown_variable",
            format!("{header}[vars]\nnodes = 2\n[null.a]\ntriggers = {{ n = \"${{var.node}}\" }}\n"),
            &[],
        ),
        (
            "bad_reference_syntax",
            format!("{header}[null.a]\ntriggers = {{ n = \"${{null.b\" }}\n"),
            &[],
        ),
        (
            "depends_on_missing",
            format!("{header}[null.a]\ndepends_on = [\"null.c\"]\n[null.b]\n"),
            &[],
        ),
        (
            "cycle",
            format!(
                "{header}[null.a]\ndepends_on = [\"null.c\"]\n[null.b]\ndepends_on = [\"null.a\"]\n[null.c]\ntriggers = {{ x = \"${{null.b.id}}\" }}\n"
            ),
            &[],
        ),
        ("var_undeclared", format!("{header}[vars]\nnodes = 2\n"), &["--var", "node=3"]),
        ("var_wrong_type", format!("{header}[vars]\nnodes = 2\n"), &["--var", "nodes=many"]),
        ("unsupported_backend", format!("{header}[state]\nbackend = \"consul\"\n"), &[]),
        ("s3_state_without_bucket", format!("{header}[state]\nbackend = \"s3\"\n"), &[]),
        ("bucket_for_a_local_state", format!("{header}[state]\nbucket = \"b\"\n"), &[]),
        (
            "gcs_prefix_for_an_s3_state",
            format!("{header}[state]\nbackend = \"s3\"\nbucket = \"b\"\nprefix = \"team\"\n"),
            &[],
        ),
        (
            "s3_region_for_a_gcs_state",
            format!("{header}[state]\nbackend = \"gcs\"\nbucket = \"b\"\nregion = \"us-west-2\"\n"),
            &[],
        ),
        (
            "state_lease_not_a_duration",
            format!("{header}[state]\nbackend = \"s3\"\nbucket = \"b\"\nlease = \"soon\"\n"),
            &[],
        ),
        ("component_config", format!("{header}[null_layers.g]\nlayers = 0\nwidth = 3\n"), &[]),
        (
            "component_overflow",
            format!("{header}[null_layers.g]\nlayers = 4294967296\nwidth = 4294967296\n"),
            &[],
        ),
        (
            "var_ending_in_dollar",
            format!("{header}[vars]\ncur = \"US$\"\n[null.b]\n[null.a]\ntriggers = {{ x = \"${{var.cur}}${{null.b.id}}\" }}\n"),
            &[],
        ),
        (
            "var_type_after_substitution",
            format!("{header}[vars]\nd = \"soon\"\n[null.a]\ndelay_ms = \"${{var.d}}\"\n"),
            &[],
        ),
        (
            "var_float_for_integer",
            format!("{header}[vars]\nnodes = 2\n"),
            &["--var", "nodes=1.5"],
        ),
        (
            "ignore_changes_not_a_list",
            format!("{header}[null.a]\nignore_changes = \"triggers\"\n"),
            &[],
        ),
        (
            "ignore_changes_unknown_attribute",
            format!("{header}[null.a]\nignore_changes = [\"triggers.x\", \"trigers\"]\n"),
            &[],
        ),
    ];
    let d = Dir::new();
    for (name, text, extra) in cases {
        let file = format!("{name}.toml");
        d.write(&file, text);
        let mut args = vec!["plan", file.as_str()];
        args.extend_from_slice(extra);
        let (code, stdout, stderr) = d.run(&args);
        assert_eq!(code, 1, "{name}: {stderr}");
        assert!(stdout.is_empty(), "{name}");
        assert!(!stderr.contains("panicked"), "{name}: {stderr}");
        insta::assert_snapshot!(format!("error_{name}"), stderr);
    }
    assert!(!d.path().join("state").exists(), "no bad input wrote state");
}

#[test]
fn bad_state_files_are_refused_and_left_untouched() {
    let d = Dir::new();
    d.write("s.toml", "[stack]\nname = \"st\"\n[null.a]\n");
    std::fs::create_dir_all(d.path().join("state")).unwrap();
    let cases = [
        ("newer", r#"{"version": 7, "lineage": "x"}"#.to_owned()),
        ("corrupt", "{\"version\": 1, \"resou".to_owned()),
    ];
    for (name, text) in cases {
        let path = d.write("state/st.json", &text);
        let (code, _, stderr) = d.run(&["up", "s.toml", "--yes"]);
        assert_eq!(code, 1);
        insta::assert_snapshot!(format!("state_{name}"), stderr.replace(&d.path().display().to_string(), "<tmp>"));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text, "nothing overwritten");
    }
    d.write(
        "other.toml",
        "[stack]\nname = \"other\"\n[state]\npath = \"state/st2.json\"\n[null.a]\n",
    );
    d.ok(&["up", "other.toml", "--yes"]);
    d.write("s2.toml", "[stack]\nname = \"st\"\n[state]\npath = \"state/st2.json\"\n");
    let (code, _, stderr) = d.run(&["plan", "s2.toml"]);
    assert_eq!(code, 1);
    assert!(stderr.contains("belongs to stack `other`, not `st`"), "{stderr}");
}

#[test]
fn help_and_completions() {
    let d = Dir::new();
    let help = d.ok(&["--help"]);
    for command in [
        "plan",
        "up",
        "destroy",
        "graph",
        "output",
        "kubeconfig",
        "validate",
        "state",
        "completions",
        "Exit codes",
    ] {
        assert!(help.contains(command), "{command} in --help");
    }
    assert!(d.ok(&["completions", "bash"]).contains("forge"));
    d.write("s.toml", STACK);
    assert!(
        d.ok(&["validate", "s.toml"])
            .contains("The stack `demo` is valid: 3 resources of 1 kind(s), 2 dependencies, no cycles.")
    );
}

/// The `vpc` component's plan-time checks point at the component block.
#[cfg(feature = "aws")]
#[test]
fn vpc_component_errors() {
    let d = Dir::new();
    let cases = [
        (
            "vpc_host_bits",
            "[stack]\nname = \"v\"\n[aws]\nregion = \"us-west-2\"\n[vpc.main]\ncidr = \"10.0.0.1/16\"\nzones = [\"us-west-2a\"]\n",
        ),
        (
            "vpc_zone_region",
            "[stack]\nname = \"v\"\n[aws]\nregion = \"us-west-2\"\n[vpc.main]\ncidr = \"10.0.0.0/16\"\nzones = [\"us-east-1a\"]\n",
        ),
        (
            "vpc_too_small",
            "[stack]\nname = \"v\"\n[vpc.main]\ncidr = \"10.0.0.0/24\"\nzones = [\"us-west-2a\", \"us-west-2b\", \"us-west-2c\"]\nprivate_subnet_bits = 2\npublic_subnet_bits = 3\n",
        ),
    ];
    for (name, text) in cases {
        d.write("v.toml", text);
        let (code, _, stderr) = d.run(&["validate", "v.toml"]);
        assert_eq!(code, 1, "{name}");
        insta::assert_snapshot!(format!("error_{name}"), stderr);
    }
}

/// The `gcp_vpc` component's ranges and the `[gcp]` section are checked at load time, each
/// error pointing at its key.
#[cfg(feature = "gcp")]
#[test]
fn gcp_vpc_component_errors() {
    let d = Dir::new();
    let stack = |body: &str| format!("[stack]\nname = \"g\"\n[gcp]\nproject = \"p\"\nregion = \"us-central1\"\n[gcp_vpc.main]\n{body}\n");
    let cases = [
        (
            "gcp_vpc_overlap",
            stack("cidr = \"10.0.0.0/20\"\npods_cidr = \"10.0.0.0/14\"\nservices_cidr = \"10.8.0.0/20\""),
        ),
        (
            "gcp_vpc_pods_too_small",
            stack("cidr = \"10.0.0.0/20\"\npods_cidr = \"10.4.0.0/24\"\nservices_cidr = \"10.8.0.0/20\""),
        ),
        (
            "gcp_vpc_bad_cidr",
            stack("cidr = \"10.0.0/20\"\npods_cidr = \"10.4.0.0/14\"\nservices_cidr = \"10.8.0.0/20\""),
        ),
        (
            "gcp_unknown_endpoint",
            "[stack]\nname = \"g\"\n[gcp]\nproject = \"p\"\nendpoints = { compte = \"http://127.0.0.1:1\" }\n".to_owned(),
        ),
    ];
    for (name, text) in cases {
        d.write("g.toml", &text);
        let (code, _, stderr) = d.run(&["validate", "g.toml"]);
        assert_eq!(code, 1, "{name}");
        insta::assert_snapshot!(format!("error_{name}"), stderr);
    }
}

/// The `gke` and `filestore` components' load-time checks point at the attribute to blame.
#[cfg(feature = "gcp")]
#[test]
fn gke_and_filestore_component_errors() {
    let d = Dir::new();
    let vpc = "[gcp_vpc.main]\ncidr = \"10.0.0.0/20\"\npods_cidr = \"10.4.0.0/14\"\nservices_cidr = \"10.8.0.0/20\"\n";
    let stack = |body: &str| format!("[stack]\nname = \"g\"\n[gcp]\nproject = \"p\"\nregion = \"us-central1\"\n{vpc}{body}\n");
    let gke = |pool: &str| stack(&format!("[gke.nemo]\nvpc = \"gcp_vpc.main\"\n[gke.nemo.node_pools.gpu]\n{pool}"));
    let cases = [
        ("gke_gpudirect_without_zone", gke("machine_type = \"a3-highgpu-8g\"\nsize = 2")),
        (
            "gke_zone_outside_region",
            gke("machine_type = \"a3-highgpu-8g\"\nsize = 2\nzone = \"europe-west4-a\""),
        ),
        (
            "gke_accelerator_on_fixed_gpus",
            gke(
                "machine_type = \"a3-highgpu-8g\"\nsize = 2\nzone = \"us-central1-c\"\naccelerator = { type = \"nvidia-tesla-t4\", count = 1 }",
            ),
        ),
        ("gke_unknown_machine_type", gke("machine_type = \"a3-highgpu-8\"\nsize = 2")),
        (
            "gke_size_order",
            gke("machine_type = \"e2-standard-8\"\nsize = { min = 4, max = 2 }"),
        ),
        (
            "gke_reservation_with_spot",
            gke("machine_type = \"e2-standard-8\"\nsize = 2\nreservation = \"r\"\nspot = true"),
        ),
        ("gke_rdma_without_zone", gke("machine_type = \"a3-ultragpu-8g\"\nsize = 2")),
        (
            "gke_rdma_on_a_machine_without_rdma",
            gke("machine_type = \"a3-megagpu-8g\"\nsize = 2\nzone = \"us-central1-c\"\nrdma = \"dranet\""),
        ),
        (
            "gke_dranet_without_a_version",
            gke("machine_type = \"a4-highgpu-8g\"\nsize = 2\nzone = \"us-central1-b\"\nrdma = \"dranet\""),
        ),
        (
            "gke_dranet_below_its_version",
            stack(
                "[gke.nemo]\nvpc = \"gcp_vpc.main\"\nversion = \"1.34.0-gke.1662000\"\n[gke.nemo.node_pools.gpu]\nmachine_type = \"a3-ultragpu-8g\"\nsize = 2\nzone = \"us-central1-b\"\nrdma = \"dranet\"",
            ),
        ),
        (
            "gke_a4x_below_dra",
            stack(
                "[gke.nemo]\nvpc = \"gcp_vpc.main\"\nversion = \"1.33\"\n[gke.nemo.node_pools.gpu]\nmachine_type = \"a4x-highgpu-4g\"\nsize = 18\nzone = \"us-central1-b\"\nrdma = \"networks\"",
            ),
        ),
        (
            "gke_rdma_networks_in_two_zones",
            stack(
                "[gke.nemo]\nvpc = \"gcp_vpc.main\"\n[gke.nemo.node_pools.ultra]\nmachine_type = \"a3-ultragpu-8g\"\nsize = 2\nzone = \"us-central1-b\"\n[gke.nemo.node_pools.a4]\nmachine_type = \"a4-highgpu-8g\"\nsize = 2\nzone = \"us-central1-c\"",
            ),
        ),
        (
            "gke_dra_driver_without_an_a4x_pool",
            stack(
                "[gke.nemo]\nvpc = \"gcp_vpc.main\"\nkubernetes = { nvidia_dra_driver = true }\n[gke.nemo.node_pools.gpu]\nmachine_type = \"e2-standard-8\"\nsize = 1",
            ),
        ),
        (
            "gke_reservation_block_without_reservation",
            gke("machine_type = \"a3-ultragpu-8g\"\nsize = 2\nzone = \"us-central1-b\"\nreservation_block = \"block-1\""),
        ),
        (
            "gke_reservation_sub_block_without_block",
            gke(
                "machine_type = \"a3-ultragpu-8g\"\nsize = 2\nzone = \"us-central1-b\"\nreservation = \"res\"\nreservation_sub_block = \"sub-1\"",
            ),
        ),
        (
            "gke_gpu_networks_overlap_the_vpc",
            stack(
                "[gke.nemo]\nvpc = \"gcp_vpc.main\"\ngpu_networks_cidr = \"10.0.0.0/16\"\n[gke.nemo.node_pools.gpu]\nmachine_type = \"a3-megagpu-8g\"\nsize = 2\nzone = \"us-central1-c\"",
            ),
        ),
        (
            "filestore_capacity_below_tier",
            stack("[filestore.shared]\nvpc = \"gcp_vpc.main\"\ntier = \"BASIC_SSD\"\nzone = \"us-central1-c\"\ncapacity_gib = 1024"),
        ),
        (
            "filestore_capacity_step",
            stack("[filestore.shared]\nvpc = \"gcp_vpc.main\"\ntier = \"ENTERPRISE\"\ncapacity_gib = 1100"),
        ),
        (
            "filestore_zonal_tier_without_zone",
            stack("[filestore.shared]\nvpc = \"gcp_vpc.main\"\ntier = \"ZONAL\"\ncapacity_gib = 1024"),
        ),
        (
            "filestore_regional_tier_with_zone",
            stack("[filestore.shared]\nvpc = \"gcp_vpc.main\"\ntier = \"ENTERPRISE\"\nzone = \"us-central1-c\"\ncapacity_gib = 1024"),
        ),
        (
            "filestore_unknown_client",
            stack(
                "[filestore.shared]\nvpc = \"gcp_vpc.main\"\ncapacity_gib = 1024\nclients = [\"gke.nem\"]\n[gke.nemo]\nvpc = \"gcp_vpc.main\"\nnode_pools.system = { machine_type = \"e2-standard-8\", size = 1 }",
            ),
        ),
    ];
    for (name, text) in cases {
        d.write("g.toml", &text);
        let (code, _, stderr) = d.run(&["validate", "g.toml"]);
        assert_eq!(code, 1, "{name}: {stderr}");
        insta::assert_snapshot!(format!("error_{name}"), stderr);
    }
}

/// The `eks` component's plan-time checks point at the attribute to blame (offline: the
/// built-in instance table).
#[cfg(feature = "aws")]
#[test]
fn eks_component_errors() {
    let d = Dir::new();
    let stack = |nodegroup: &str| {
        format!(
            "[stack]\nname = \"e\"\n[aws]\nregion = \"us-west-2\"\n[vpc.main]\ncidr = \"10.0.0.0/16\"\nzones = [\"us-west-2a\", \"us-west-2b\"]\n[eks.train]\nvpc = \"vpc.main\"\n[eks.train.nodegroups.gpu]\n{nodegroup}\n"
        )
    };
    let cases = [
        ("eks_efa_without_zone", stack("instance_type = \"p5.48xlarge\"\nsize = 2")),
        (
            "eks_dra_driver_without_an_ultraserver_group",
            stack("instance_type = \"c5.2xlarge\"\nsize = 1").replace(
                "[eks.train]\n",
                "[eks.train]\nkubernetes = { nvidia_dra_driver = true }\n",
            ),
        ),
        (
            "eks_zone_not_in_vpc",
            stack("instance_type = \"p5.48xlarge\"\nsize = 2\nzone = \"us-west-2c\""),
        ),
        ("eks_efa_unsupported", stack("instance_type = \"c5.2xlarge\"\nsize = 2\nefa = true")),
        (
            "eks_unknown_instance_type",
            stack("instance_type = \"p5.48xlage\"\nsize = 2\nzone = \"us-west-2a\""),
        ),
        (
            "eks_size_order",
            stack("instance_type = \"c5.2xlarge\"\nsize = { min = 3, max = 4, desired = 2 }"),
        ),
        (
            "eks_placement_with_reservation",
            stack(
                "instance_type = \"p5.48xlarge\"\nsize = 2\nzone = \"us-west-2a\"\ncapacity_reservation_id = \"cr-0123\"\nplacement_group = true",
            ),
        ),
        (
            "eks_efa_with_instance_types",
            stack("instance_types = [\"p5.48xlarge\"]\nsize = 2\nzone = \"us-west-2a\"\nefa = true"),
        ),
        (
            "eks_ultraserver_without_capacity_block",
            stack("instance_type = \"p6e-gb200.36xlarge\"\nsize = 9\nzone = \"us-west-2a\""),
        ),
        (
            "eks_ultraserver_on_kubernetes_1_32",
            stack(
                "instance_type = \"p6e-gb200.36xlarge\"\nsize = 9\nzone = \"us-west-2a\"\ncapacity_type = \"CAPACITY_BLOCK\"\ncapacity_reservation_id = \"cr-0123\"",
            )
            .replace("vpc = \"vpc.main\"\n[eks", "vpc = \"vpc.main\"\nversion = \"1.32\"\n[eks"),
        ),
        (
            "eks_efa_layout_efa_on_an_ena_only_card",
            stack("instance_type = \"p6-b300.48xlarge\"\nsize = 1\nzone = \"us-west-2a\"\nefa_layout = \"efa\""),
        ),
        (
            "eks_unknown_vpc",
            stack("instance_type = \"c5.2xlarge\"\nsize = 1").replace("vpc = \"vpc.main\"", "vpc = \"vpc.mian\""),
        ),
    ];
    for (name, text) in cases {
        d.write("e.toml", &text);
        let (code, _, stderr) = d.run(&["validate", "e.toml"]);
        assert_eq!(code, 1, "{name}: {stderr}");
        insta::assert_snapshot!(format!("error_{name}"), stderr);
    }
}

#[test]
#[cfg(feature = "aws")]
fn storage_component_errors() {
    let d = Dir::new();
    let stack = |storage: &str| {
        format!(
            "[stack]\nname = \"s\"\n[aws]\nregion = \"us-west-2\"\n[vpc.main]\ncidr = \"10.0.0.0/16\"\nzones = [\"us-west-2a\", \"us-west-2b\"]\n[eks.train]\nvpc = \"vpc.main\"\n[eks.train.nodegroups.gpu]\ninstance_type = \"p5.48xlarge\"\nsize = 2\nzone = \"us-west-2a\"\n{storage}\n"
        )
    };
    let fsx = |extra: &str| {
        stack(&format!(
            "[fsx.data]\nvpc = \"vpc.main\"\nzone = \"us-west-2a\"\nclients = [\"eks.train\"]\n{extra}"
        ))
    };
    let cases = [
        ("fsx_capacity_step", fsx("capacity_gib = 3000")),
        (
            "fsx_throughput_for_deployment",
            fsx("deployment = \"PERSISTENT_1\"\nthroughput_per_tib = 250"),
        ),
        (
            "fsx_throughput_on_scratch",
            fsx("deployment = \"SCRATCH_2\"\nthroughput_per_tib = 125"),
        ),
        (
            "fsx_zone_away_from_the_gpus",
            fsx("").replace("zone = \"us-west-2a\"\nclients", "zone = \"us-west-2b\"\nclients"),
        ),
        (
            "fsx_s3_needs_persistent_2",
            fsx("deployment = \"SCRATCH_2\"\ns3 = { path = \"s3://bucket/data\" }"),
        ),
        (
            "fsx_unknown_client",
            fsx("").replace("clients = [\"eks.train\"]", "clients = [\"eks.trian\"]"),
        ),
        ("efs_unknown_vpc", stack("[efs.home]\nvpc = \"vpc.mian\"")),
        (
            "cloudformation_template_missing",
            stack("[aws_cloudformation_stack.ng]\nname = \"ng\"\ntemplate_file = \"missing.yaml\""),
        ),
    ];
    for (name, text) in cases {
        d.write("s.toml", &text);
        let (code, _, stderr) = d.run(&["validate", "s.toml"]);
        assert_eq!(code, 1, "{name}: {stderr}");
        insta::assert_snapshot!(format!("error_{name}"), stderr);
    }
}

#[test]
#[cfg(feature = "aws")]
fn slurm_component_errors() {
    let d = Dir::new();
    let stack = |slurm: &str, queue: &str| {
        format!(
            "[stack]\nname = \"s\"\n[aws]\nregion = \"us-west-2\"\n[vpc.main]\ncidr = \"10.0.0.0/16\"\nzones = [\"us-west-2a\", \"us-west-2b\"]\n[slurm.nemo]\nvpc = \"vpc.main\"\n{slurm}\n[slurm.nemo.queues.gpu]\n{queue}\n"
        )
    };
    let ok_slurm = "version = \"25.05\"\nami_id = \"ami-0123456789abcdef0\"";
    let ok_queue = "instance_type = \"p5.48xlarge\"\nnodes = { min = 0, max = 2 }\nzone = \"us-west-2a\"";
    let cases = [
        (
            "slurm_efa_queue_without_zone",
            stack(ok_slurm, "instance_type = \"p5.48xlarge\"\nnodes = 2"),
        ),
        (
            "slurm_zone_outside_the_vpc",
            stack(ok_slurm, &ok_queue.replace("us-west-2a", "us-west-2d")),
        ),
        (
            "slurm_unknown_instance_type",
            stack(ok_slurm, &ok_queue.replace("p5.48xlarge", "p5.48xlage")),
        ),
        (
            "slurm_nodes_out_of_order",
            stack(ok_slurm, &ok_queue.replace("min = 0, max = 2", "min = 3, max = 2")),
        ),
        (
            "slurm_reservation_with_spot",
            stack(
                ok_slurm,
                &format!("{ok_queue}\ncapacity_type = \"SPOT\"\ncapacity_reservation_id = \"cr-0123\""),
            ),
        ),
        ("slurm_unsupported_version", stack(&ok_slurm.replace("25.05", "23.11"), ok_queue)),
        ("slurm_missing_ami", stack("version = \"25.05\"", ok_queue)),
        (
            "slurm_too_many_nodes_for_the_size",
            stack(&format!("{ok_slurm}\nsize = \"SMALL\""), &ok_queue.replace("max = 2", "max = 40")),
        ),
        (
            "slurm_ultraserver_on_demand",
            stack(ok_slurm, &ok_queue.replace("p5.48xlarge", "p6e-gb200.36xlarge")),
        ),
        (
            "slurm_ultraserver_on_slurm_24_11",
            stack(
                &ok_slurm.replace("25.05", "24.11"),
                &format!(
                    "{}\ncapacity_type = \"CAPACITY_BLOCK\"\ncapacity_reservation_id = \"cr-0123\"",
                    ok_queue.replace("p5.48xlarge", "p6e-gb200.36xlarge")
                ),
            ),
        ),
    ];
    for (name, text) in cases {
        d.write("s.toml", &text);
        let (code, _, stderr) = d.run(&["validate", "s.toml"]);
        assert_eq!(code, 1, "{name}: {stderr}");
        insta::assert_snapshot!(format!("error_{name}"), stderr);
    }
}

/// `forge drift` without a cloud (`null` resources exist as recorded): 0 when the file matches
/// what was applied, 3 when it only has unapplied edits, the worst code of several stacks, 1
/// with every stack still reported when one does not load; Markdown and JSON for CI.
#[test]
fn drift_exit_codes_and_formats_on_local_stacks() {
    let d = Dir::new();
    d.write("a.toml", "[stack]\nname = \"a\"\n[null.x]\ntriggers = { v = \"1\" }\n");
    d.write("b.toml", "[stack]\nname = \"b\"\n[null.y]\n");
    d.ok(&["up", "a.toml", "--yes"]);
    d.ok(&["up", "b.toml", "--yes"]);
    let (code, stdout, stderr) = d.run(&["drift", "a.toml", "b.toml"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.contains("stack `a` (a.toml): no drift"), "{stdout}");

    d.write("a.toml", "[stack]\nname = \"a\"\n[null.x]\ntriggers = { v = \"2\" }\n");
    let (code, stdout, _) = d.run(&["drift", "a.toml", "b.toml"]);
    assert_eq!(code, 3, "{stdout}");
    assert!(stdout.contains("-/+ null.x (null): triggers"), "{stdout}");
    assert!(stdout.contains("pending changes only"), "{stdout}");

    let (code, stdout, _) = d.run(&["drift", "a.toml", "b.toml", "--markdown"]);
    assert_eq!(code, 3);
    assert!(stdout.starts_with("## forge drift\n\n| stack | changed |"), "{stdout}");
    assert!(stdout.contains("### `a` — pending changes only"), "{stdout}");

    let (code, stdout, _) = d.run(&["drift", "a.toml", "b.toml", "--json"]);
    assert_eq!(code, 3);
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["format_version"], 1);
    assert_eq!(report["exit_code"], 3);
    assert_eq!(report["stacks"][0]["outcome"], "pending");
    assert_eq!(report["stacks"][0]["pending"][0]["action"], "replace");
    assert_eq!(report["stacks"][1]["outcome"], "clean");

    d.write("broken.toml", "[stack]\nname = \"broken\"\n[nul.x]\n");
    let (code, stdout, _) = d.run(&["drift", "a.toml", "broken.toml"]);
    assert_eq!(code, 1, "an error is worse than pending changes: {stdout}");
    assert!(
        stdout.contains("stack `broken` (broken.toml): error") && stdout.contains("unknown section `nul`"),
        "{stdout}"
    );
    assert!(stdout.contains("stack `a` (a.toml): pending changes only"), "{stdout}");
    let (code, _, stderr) = d.run(&["drift", "broken.toml"]);
    assert_eq!(code, 1);
    assert!(
        stderr.contains("unknown section `nul`") && stderr.contains("help:"),
        "one stack: the diagnostic itself: {stderr}"
    );

    let (code, _, stderr) = d.run(&["drift", "b.toml", "--ignore", "null.z"]);
    assert_eq!(code, 1);
    assert!(stderr.contains("`--ignore null.z` names no resource"), "{stderr}");
    assert!(d.path().join("state/a.json").exists());
    assert!(!d.path().join("state/a.json.lock").exists() || std::fs::read(d.path().join("state/a.json.lock")).unwrap().is_empty());
}

/// The nightly-drift examples run `forge drift` with arguments this forge accepts, and their
/// YAML and JSON parse.
#[test]
fn nightly_drift_examples_are_valid() {
    use clap::Parser;
    use serde::Deserialize;
    for text in [
        include_str!("../../examples/nightly-drift/github-workflow.yml"),
        include_str!("../../examples/nightly-drift/cronjob.yaml"),
    ] {
        for doc in serde_yaml_ng::Deserializer::from_str(text) {
            serde_yaml_ng::Value::deserialize(doc).unwrap();
        }
        let commands: Vec<&str> = text.lines().map(str::trim).filter(|l| l.starts_with("forge drift")).collect();
        assert_eq!(commands.len(), 2, "{text}");
        for command in commands {
            let words: Vec<&str> = command.split(['>', '|']).next().unwrap().split_whitespace().collect();
            forge::cli::Cli::try_parse_from(&words).unwrap_or_else(|e| panic!("{command}: {e}"));
        }
    }
    let policy: serde_json::Value = serde_json::from_str(include_str!("../../examples/nightly-drift/readonly-policy.json")).unwrap();
    let actions = policy["Statement"][0]["Action"].as_array().unwrap();
    assert!(actions.iter().all(|a| {
        ["Describe", "List", "Get"]
            .iter()
            .any(|r| a.as_str().unwrap().split(':').nth(1).unwrap().starts_with(r))
    }));
}

/// `existing` is checked when the stack loads: a kind that cannot read, an attribute beside
/// it, a reference forge cannot know yet, a form the kind does not read; each error points at
/// its key.
#[cfg(feature = "aws")]
#[test]
fn existing_errors() {
    let d = Dir::new();
    let stack = |body: &str| format!("[stack]\nname = \"e\"\n[aws]\nregion = \"us-west-2\"\n{body}\n");
    let cases = [
        ("existing_unsupported_kind", "[aws_launch_template.gpu]\nexisting = \"lt-0abc\"\n"),
        (
            "existing_with_attributes",
            "[aws_vpc.shared]\nexisting = \"vpc-0abc\"\ncidr_block = \"10.0.0.0/16\"\n",
        ),
        (
            "existing_reference",
            "[aws_vpc.a]\ncidr_block = \"10.0.0.0/16\"\n[aws_vpc.shared]\nexisting = \"${aws_vpc.a.id}\"\n",
        ),
        (
            "existing_tags_on_a_role",
            "[aws_iam_role.nodes]\nexisting = { tags = { team = \"ml\" } }\n",
        ),
        ("existing_empty_tags", "[aws_vpc.shared]\nexisting = { tags = {} }\n"),
        (
            "existing_cluster_reference",
            "[aws_iam_role.r]\nexisting = \"r\"\n[eks.x]\nexisting = \"${aws_iam_role.r.name}\"\n[eks.x.nodegroups.a]\ninstance_type = \"c5.2xlarge\"\nsize = 1\n",
        ),
        (
            "existing_vpc_with_cidr",
            "[vpc.main]\nexisting = \"vpc-0abc\"\ncidr = \"10.0.0.0/16\"\nzones = [\"us-west-2a\"]\n",
        ),
        (
            "existing_cluster_depends_on",
            "[aws_vpc.a]\ncidr_block = \"10.0.0.0/16\"\n[eks.x]\nexisting = \"nemo\"\ndepends_on = [\"aws_vpc.a\"]\n[eks.x.nodegroups.a]\ninstance_type = \"c5.2xlarge\"\nsize = 1\n",
        ),
        (
            "existing_depends_on",
            "[aws_vpc.a]\ncidr_block = \"10.0.0.0/16\"\n[aws_vpc.shared]\nexisting = \"vpc-0abc\"\ndepends_on = [\"aws_vpc.a\"]\n",
        ),
        (
            "existing_vpc_login_without_public_subnets",
            "[vpc.main]\nexisting = \"vpc-0abc\"\nzones = [\"us-west-2a\"]\n[slurm.train]\nvpc = \"vpc.main\"\nversion = \"25.05\"\nami_id = \"ami-0abc\"\nlogin = { ssh_cidrs = [\"203.0.113.0/24\"] }\n[slurm.train.queues.cpu]\ninstance_type = \"c6i.2xlarge\"\nnodes = 1\nzone = \"us-west-2a\"\n",
        ),
    ];
    for (name, body) in cases {
        d.write("e.toml", &stack(body));
        let (code, _, stderr) = d.run(&["validate", "e.toml"]);
        assert_eq!(code, 1, "{name}: {stderr}");
        insta::assert_snapshot!(format!("error_{name}"), stderr);
    }
    // With its public subnets read, the login node may be public.
    d.write(
        "e.toml",
        &stack("[vpc.main]\nexisting = \"vpc-0abc\"\nzones = [\"us-west-2a\"]\npublic = true\n[slurm.train]\nvpc = \"vpc.main\"\nversion = \"25.05\"\nami_id = \"ami-0abc\"\nlogin = { ssh_cidrs = [\"203.0.113.0/24\"] }\n[slurm.train.queues.cpu]\ninstance_type = \"c6i.2xlarge\"\nnodes = 1\nzone = \"us-west-2a\"\n"),
    );
    let (code, _, stderr) = d.run(&["validate", "e.toml"]);
    assert_eq!(code, 0, "{stderr}");
    // Only `ignore_changes` may stand beside `existing`, and a required attribute is not missed.
    d.write(
        "e.toml",
        &stack("[aws_vpc.shared]\nexisting = \"vpc-0abc\"\nignore_changes = [\"tags.Name\"]\n"),
    );
    let (code, _, stderr) = d.run(&["validate", "e.toml"]);
    assert_eq!(code, 0, "{stderr}");
}
