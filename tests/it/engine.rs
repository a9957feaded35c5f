//! Engine tests: the real stack → graph → plan → apply → state pipeline with an in-memory kind
//! that records every call, so ordering, the concurrency cap, failure pruning, cancel,
//! reversed deletes, pending intents and retries can be asserted exactly.

use forge::apply::{self, Observer, Options, Phase, Report, RetryPolicy};
use forge::plan::{self, Action, Mode, Plan};
use forge::provider::{Cloud, Created, Ctx, Declared, Field, FieldType, Observed, Output, ProviderError, Registry, Resource, Spec};
use forge::state::{LocalStore, State, Status};
use serde_json::{Value, json};
use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;

/// What the recording kind saw.
#[derive(Default)]
struct Log {
    calls: Mutex<Vec<String>>,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    attempts: AtomicUsize,
    hung: std::sync::atomic::AtomicBool,
    /// Tokens of every create that reached the "cloud" (even one that never returned).
    started_tokens: Mutex<std::collections::HashSet<String>>,
    /// Ids deleted "outside forge".
    gone: Mutex<HashSet<String>>,
    /// Calls in flight per `lane`, and the most seen at once in any lane.
    lanes: Mutex<std::collections::HashMap<String, usize>>,
    max_in_lane: AtomicUsize,
}

/// `rec`: sleeps `delay_ms`, fails when `fail = true`, fails retryably `flaky` times, hangs
/// forever on the first create with `hang = true` (a crash mid-call); id = the create token.
/// Calls of resources with the same `lane` must never overlap (its serialization key).
#[derive(Clone)]
struct Recorder(Arc<Log>);

const SPEC: Spec = Spec {
    name: "rec",
    fields: &[
        Field::optional("delay_ms", FieldType::Integer),
        Field::optional("fail", FieldType::Bool),
        Field::optional("flaky", FieldType::Integer),
        Field::optional("hang", FieldType::Bool),
        Field::optional("label", FieldType::String).replacing(),
        Field::optional("lane", FieldType::String),
    ],
    outputs: &[Output::cloud("id")],
};

impl Declared for Recorder {
    fn spec(&self) -> &'static Spec {
        &SPEC
    }
}

impl Recorder {
    async fn call(&self, what: &str, ctx: &Ctx, config: &Value) -> Result<(), ProviderError> {
        let log = &self.0;
        let now = log.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        log.max_in_flight.fetch_max(now, Ordering::SeqCst);
        let lane = config.get("lane").and_then(Value::as_str).map(str::to_owned);
        if let Some(lane) = &lane {
            let mut lanes = log.lanes.lock().unwrap();
            let in_lane = lanes.entry(lane.clone()).or_default();
            *in_lane += 1;
            log.max_in_lane.fetch_max(*in_lane, Ordering::SeqCst);
        }
        log.calls.lock().unwrap().push(format!("{what} {}", ctx.address));
        let ms = config.get("delay_ms").and_then(Value::as_u64).unwrap_or(0);
        tokio::time::sleep(Duration::from_millis(ms)).await;
        if config.get("hang") == Some(&json!(true)) && what == "create" && !log.hung.swap(true, Ordering::SeqCst) {
            std::future::pending::<()>().await;
        }
        log.in_flight.fetch_sub(1, Ordering::SeqCst);
        if let Some(lane) = &lane {
            *log.lanes.lock().unwrap().get_mut(lane).unwrap() -= 1;
        }
        let flaky = config.get("flaky").and_then(Value::as_u64).unwrap_or(0) as usize;
        if flaky > 0 && log.attempts.fetch_add(1, Ordering::SeqCst) < flaky {
            return Err(ProviderError::transient("Throttling: Rate exceeded"));
        }
        if config.get("fail") == Some(&json!(true)) && what == "create" {
            return Err(ProviderError::permanent("InvalidParameterValue: the cloud said no"));
        }
        Ok(())
    }
}

impl Resource for Recorder {
    fn serialization_key(&self, config: &Value) -> Option<String> {
        config.get("lane").and_then(Value::as_str).map(str::to_owned)
    }
    async fn create(&self, ctx: &Ctx, token: &str, config: &Value) -> Result<Created, ProviderError> {
        self.0.started_tokens.lock().unwrap().insert(token.to_owned());
        self.call("create", ctx, config).await?;
        Ok(Created {
            id: token.to_owned(),
            outputs: json!({ "id": token }),
        })
    }
    async fn read(&self, _cloud: &Cloud, _stack: &str, ids: &[String]) -> Result<Vec<Observed>, ProviderError> {
        let gone = self.0.gone.lock().unwrap().clone();
        Ok(Observed::existing(ids.iter().filter(|id| !gone.contains(*id)).cloned()))
    }
    async fn find(&self, ctx: &Ctx, token: &str, _config: &Value) -> Result<Option<String>, ProviderError> {
        self.0.calls.lock().unwrap().push(format!("find {}", ctx.address));
        Ok(self.0.started_tokens.lock().unwrap().contains(token).then(|| token.to_owned()))
    }
    async fn update(&self, ctx: &Ctx, id: &str, _old: &Value, new: &Value) -> Result<Value, ProviderError> {
        self.call("update", ctx, new).await?;
        Ok(json!({ "id": id }))
    }
    async fn delete(&self, ctx: &Ctx, _id: &str, config: &Value) -> Result<(), ProviderError> {
        self.call("delete", ctx, config).await
    }
}

struct Quiet;
impl Observer for Quiet {
    fn started(&self, _: &str, _: Phase) {}
    fn status(&self, _: &str, _: &str) {}
    fn finished(&self, _: &str, _: Phase, _: Duration, _: Option<&str>) {}
    fn interrupted(&self, _: usize, _: bool) {}
}

struct Fixture {
    dir: tempfile::TempDir,
    log: Arc<Log>,
    registry: Registry,
}

impl Fixture {
    fn new() -> Self {
        let log = Arc::new(Log::default());
        let registry = Registry::builtin().with(Recorder(log.clone()));
        Fixture {
            dir: tempfile::tempdir().unwrap(),
            log,
            registry,
        }
    }

    fn store(&self) -> LocalStore {
        LocalStore::new(self.dir.path().join("t.json"))
    }

    fn plan(&self, body: &str, mode: Mode) -> (Plan, State) {
        let stack = forge::stack::load_str(
            "t.toml",
            &format!("[stack]\nname = \"t\"\n{body}"),
            &[],
            &self.registry,
            &forge::facts::Facts::builtin(),
        )
        .unwrap();
        let graph = forge::graph::build(&stack).unwrap();
        let loaded = self.store().load("t").unwrap();
        let plan = plan::plan(
            &stack,
            &graph,
            &loaded.state,
            loaded.existed,
            mode,
            &self.registry,
            &Default::default(),
        )
        .unwrap();
        (plan, loaded.state)
    }

    fn calls(&self) -> Vec<String> {
        std::mem::take(&mut *self.log.calls.lock().unwrap())
    }

    /// Applies `body` and reloads the state from disk, as the next run would see it.
    async fn apply(&self, body: &str, mode: Mode, parallelism: usize, interrupts: watch::Receiver<u32>) -> (Report, State) {
        let (plan, mut state) = self.plan(body, mode);
        let store = self.store();
        let mut journal = store.journal().unwrap();
        let options = Options {
            parallelism,
            retry: RetryPolicy {
                attempts: 4,
                base: Duration::from_millis(1),
                max: Duration::from_millis(5),
                patience: Duration::from_millis(100),
            },
            cloud: Arc::new(Cloud::default()),
        };
        let report = apply::run(
            &plan,
            &mut state,
            &mut journal,
            &self.registry,
            &options,
            Arc::new(Quiet),
            interrupts,
        )
        .await;
        journal.close().unwrap();
        let reloaded = store.load("t").unwrap().state;
        assert_eq!(reloaded, state, "the journal holds exactly the in-memory state");
        (report, reloaded)
    }

    async fn up(&self, body: &str, parallelism: usize) -> (Report, State) {
        let (_tx, rx) = watch::channel(0);
        self.apply(body, Mode::Apply, parallelism, rx).await
    }
}

fn position(calls: &[String], call: &str) -> usize {
    calls
        .iter()
        .position(|c| c == call)
        .unwrap_or_else(|| panic!("{call} not in {calls:?}"))
}

const CHAIN: &str = r#"
[rec.c]
label = "${rec.b.id}"
[rec.b]
delay_ms = 20
depends_on = ["rec.a"]
[rec.a]
delay_ms = 20
"#;

#[tokio::test]
async fn creates_follow_dependencies_and_destroy_reverses_them() {
    let f = Fixture::new();
    let (report, state) = f.up(CHAIN, 64).await;
    assert!(report.complete());
    assert_eq!(f.calls(), ["create rec.a", "create rec.b", "create rec.c"]);
    let b_id = state.resources["rec.b"].id.clone().unwrap();
    assert_eq!(
        state.resources["rec.c"].config["label"],
        json!(b_id),
        "references resolve to the applied outputs"
    );
    assert_eq!(state.resources["rec.c"].dependencies, ["rec.b"]);

    let (_tx, rx) = watch::channel(0);
    let (report, state) = f.apply(CHAIN, Mode::Destroy, 64, rx).await;
    assert_eq!(report.count(Action::Delete), 3);
    assert_eq!(f.calls(), ["delete rec.c", "delete rec.b", "delete rec.a"]);
    assert!(state.resources.is_empty());
}

#[tokio::test]
async fn resources_removed_from_the_file_are_deleted_dependents_first() {
    let f = Fixture::new();
    f.up(CHAIN, 64).await;
    f.calls();
    let (report, state) = f.up("[rec.a]\ndelay_ms = 20\n", 64).await;
    assert_eq!(report.count(Action::Delete), 2);
    assert_eq!(f.calls(), ["delete rec.c", "delete rec.b"]);
    assert_eq!(state.resources.keys().collect::<Vec<_>>(), ["rec.a"]);
}

/// Operations that share a serialization key (GKE's one operation per cluster) never overlap,
/// on create, update and delete, while the others run beside them at full width.
#[tokio::test]
async fn operations_with_one_serialization_key_never_overlap() {
    let f = Fixture::new();
    let lanes = |delay: u32| -> String {
        (0..6)
            .map(|i| format!("[rec.a{i}]\nlane = \"a\"\ndelay_ms = {delay}\n[rec.b{i}]\nlane = \"b\"\ndelay_ms = {delay}\n[rec.free{i}]\ndelay_ms = {delay}\n"))
            .collect()
    };
    let (report, _) = f.up(&lanes(20), 64).await;
    assert_eq!(report.count(Action::Create), 18);
    assert_eq!(f.log.max_in_lane.load(Ordering::SeqCst), 1, "one call at a time per lane");
    assert!(
        f.log.max_in_flight.load(Ordering::SeqCst) >= 8,
        "the six free resources and both lanes ran side by side"
    );
    let (report, _) = f.up(&lanes(10), 64).await;
    assert_eq!(report.count(Action::Update), 18);
    let (report, _) = f.apply(&lanes(10), Mode::Destroy, 64, watch::channel(0).1).await;
    assert_eq!(report.count(Action::Delete), 18);
    assert!(report.complete());
    assert_eq!(f.log.max_in_lane.load(Ordering::SeqCst), 1, "nor on update and delete");
}

#[tokio::test]
async fn the_concurrency_cap_holds() {
    let f = Fixture::new();
    let body: String = (0..24).map(|i| format!("[rec.r{i}]\ndelay_ms = 30\n")).collect();
    let (report, _) = f.up(&body, 4).await;
    assert_eq!(report.count(Action::Create), 24);
    assert_eq!(f.log.max_in_flight.load(Ordering::SeqCst), 4);
    let g = Fixture::new();
    g.up(&body, 64).await;
    assert_eq!(
        g.log.max_in_flight.load(Ordering::SeqCst),
        24,
        "independent resources all run at once under a wide cap"
    );
}

#[tokio::test]
async fn a_failure_skips_its_dependents_and_independent_branches_finish() {
    let f = Fixture::new();
    let body = r#"
[rec.bad]
fail = true
[rec.after_bad]
label = "${rec.bad.id}"
[rec.after_after]
depends_on = ["rec.after_bad"]
[rec.fine]
delay_ms = 30
"#;
    let (report, state) = f.up(body, 64).await;
    assert_eq!(report.failures.len(), 1, "only the root cause is a failure");
    assert_eq!(report.failures[0].address, "rec.bad");
    assert!(report.failures[0].message.contains("the cloud said no"));
    let mut skipped = report.skipped.clone();
    skipped.sort();
    assert_eq!(
        skipped,
        [
            ("rec.after_after".to_owned(), "rec.bad".to_owned()),
            ("rec.after_bad".to_owned(), "rec.bad".to_owned())
        ]
    );
    assert_eq!(state.resources["rec.fine"].status, Status::Created);
    assert_eq!(
        state.resources["rec.bad"].status,
        Status::PendingCreate,
        "a failed create stays pending with its token"
    );
    assert!(!state.resources.contains_key("rec.after_bad"));
}

#[tokio::test]
async fn ctrl_c_stops_scheduling_and_waits_for_calls_in_flight() {
    let f = Fixture::new();
    let body: String = (0..10).map(|i| format!("[rec.r{i}]\ndelay_ms = 150\n")).collect();
    let (tx, rx) = watch::channel(0);
    let run = f.apply(&body, Mode::Apply, 2, rx);
    let press = async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        tx.send(1).unwrap();
    };
    let ((report, state), ()) = tokio::join!(run, press);
    assert!(report.interrupted);
    assert_eq!(report.count(Action::Create), 2, "the two calls in flight finished");
    assert_eq!(report.not_started, 8);
    assert_eq!(state.resources.values().filter(|r| r.status == Status::Created).count(), 2);
}

#[tokio::test]
async fn a_second_ctrl_c_stops_waiting_and_leaves_pending_intents() {
    let f = Fixture::new();
    let body = "[rec.slow]\nhang = true\n[rec.next]\ndepends_on = [\"rec.slow\"]\n";
    let (tx, rx) = watch::channel(0);
    let run = f.apply(body, Mode::Apply, 4, rx);
    let press = async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        tx.send(1).unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        tx.send(2).unwrap();
    };
    let ((report, state), ()) = tokio::join!(run, press);
    assert!(report.interrupted);
    let slow = &state.resources["rec.slow"];
    assert_eq!(slow.status, Status::PendingCreate);
    assert!(slow.token.is_some());
}

#[tokio::test]
async fn an_interrupted_create_is_resumed_with_the_same_token() {
    let f = Fixture::new();
    // A "crash": the create hangs after its intent is durable, and the whole run is dropped.
    let body = "[rec.a]\nhang = true\n";
    let crash = tokio::time::timeout(Duration::from_millis(200), f.up(body, 4)).await;
    assert!(crash.is_err(), "the run never finished");
    let state = f.store().load("t").unwrap().state;
    let token = state.resources["rec.a"]
        .token
        .clone()
        .expect("the intent was durable before the call");
    assert_eq!(state.resources["rec.a"].status, Status::PendingCreate);

    let (plan, _) = f.plan(body, Mode::Apply);
    assert_eq!(plan.changes[0].action, Action::Create);
    assert!(plan.changes[0].reason.as_deref().unwrap().contains("interrupted create"));
    let (report, state) = f.up(body, 4).await;
    assert!(report.complete());
    assert_eq!(
        state.resources["rec.a"].id.as_deref(),
        Some(token.as_str()),
        "the resumed create adopted the first one's object"
    );
}

#[tokio::test]
async fn an_interrupted_create_whose_attributes_changed_is_replaced() {
    let f = Fixture::new();
    let _ = tokio::time::timeout(Duration::from_millis(200), f.up("[rec.a]\nhang = true\nlabel = \"old\"\n", 4)).await;
    f.calls();
    let (plan, _) = f.plan("[rec.a]\nlabel = \"new\"\n", Mode::Apply);
    assert_eq!(plan.changes[0].action, Action::Replace);
    let (report, state) = f.up("[rec.a]\nlabel = \"new\"\n", 4).await;
    assert!(report.complete());
    assert_eq!(
        f.calls(),
        ["find rec.a", "delete rec.a", "create rec.a"],
        "the half-made object is found and deleted before the new create"
    );
    assert_eq!(state.resources["rec.a"].config["label"], json!("new"));
}

#[tokio::test]
async fn an_interrupted_create_no_longer_declared_is_found_then_deleted() {
    let f = Fixture::new();
    let _ = tokio::time::timeout(Duration::from_millis(200), f.up("[rec.a]\nhang = true\n", 4)).await;
    f.calls();
    let (report, state) = f.up("", 4).await;
    assert!(report.complete());
    assert_eq!(
        f.calls(),
        ["find rec.a", "delete rec.a"],
        "found by its token, deleted, never created again"
    );
    assert!(state.resources.is_empty());
}

#[tokio::test]
async fn retryable_errors_are_retried_and_permanent_ones_are_not() {
    let f = Fixture::new();
    let (report, state) = f.up("[rec.a]\nflaky = 2\n", 4).await;
    assert!(report.complete());
    assert_eq!(f.log.attempts.load(Ordering::SeqCst), 3);
    assert_eq!(state.resources["rec.a"].status, Status::Created);
    let g = Fixture::new();
    g.up("[rec.a]\nfail = true\n", 4).await;
    assert_eq!(g.calls().len(), 1);
}

#[tokio::test]
async fn replacing_a_dependency_replaces_in_the_right_order() {
    let f = Fixture::new();
    let v1 = "[rec.x]\nlabel = \"1\"\n[rec.y]\nlabel = \"${rec.x.id}\"\n";
    f.up(v1, 64).await;
    f.calls();
    let v2 = v1.replace("label = \"1\"", "label = \"2\"");
    let (plan, _) = f.plan(&v2, Mode::Apply);
    let actions: Vec<_> = plan.changes.iter().map(|c| (c.address.as_str(), c.action)).collect();
    assert_eq!(
        actions,
        [("rec.x", Action::Replace), ("rec.y", Action::Replace)],
        "y's label is unknown until x is re-created, and label forces replacement"
    );
    let (report, state) = f.up(&v2, 64).await;
    assert!(report.complete());
    let calls = f.calls();
    assert!(position(&calls, "delete rec.y") < position(&calls, "delete rec.x"));
    assert!(position(&calls, "create rec.x") < position(&calls, "create rec.y"));
    assert_eq!(
        state.resources["rec.y"].config["label"],
        json!(state.resources["rec.x"].id.clone().unwrap())
    );
}

#[tokio::test]
async fn updates_in_place_keep_the_id() {
    let f = Fixture::new();
    let (_, before) = f.up("[rec.a]\ndelay_ms = 1\n", 4).await;
    f.calls();
    let (plan, _) = f.plan("[rec.a]\ndelay_ms = 2\n", Mode::Apply);
    assert_eq!(plan.changes[0].action, Action::Update);
    let (_, after) = f.up("[rec.a]\ndelay_ms = 2\n", 4).await;
    assert_eq!(f.calls(), ["update rec.a"]);
    assert_eq!(before.resources["rec.a"].id, after.resources["rec.a"].id);
    assert_eq!(after.resources["rec.a"].config["delay_ms"], json!(2));
}

#[tokio::test]
async fn a_depends_on_edit_is_recorded_so_destroy_follows_the_new_order() {
    let f = Fixture::new();
    f.up("[rec.a]\ndepends_on = [\"rec.b\"]\n[rec.b]\n", 4).await;
    let (plan, _) = f.plan("[rec.a]\n[rec.b]\ndepends_on = [\"rec.a\"]\ndelay_ms = 1\n", Mode::Apply);
    assert_eq!(
        plan.dependency_updates.get("rec.a"),
        Some(&vec![]),
        "a is unchanged but its recorded dependencies are not"
    );
    let (_, state) = f.up("[rec.a]\n[rec.b]\ndepends_on = [\"rec.a\"]\ndelay_ms = 1\n", 4).await;
    assert!(state.resources["rec.a"].dependencies.is_empty());
    f.calls();
    let (_tx, rx) = watch::channel(0);
    let (report, state) = f.apply("[rec.a]\n[rec.b]\ndepends_on = [\"rec.a\"]\n", Mode::Destroy, 4, rx).await;
    assert!(report.complete() && state.resources.is_empty());
    assert_eq!(f.calls(), ["delete rec.b", "delete rec.a"]);
}

#[tokio::test]
async fn an_update_that_stops_using_a_removed_resource_never_deadlocks() {
    let f = Fixture::new();
    f.up(
        "[rec.base]\nlabel = \"1\"\n[rec.mid]\ndepends_on = [\"rec.base\"]\n[rec.top]\ndepends_on = [\"rec.mid\"]\n",
        4,
    )
    .await;
    // base is replaced, mid removed, top now depends on base and changes in place.
    let (report, state) = f
        .up(
            "[rec.base]\nlabel = \"2\"\n[rec.top]\ndepends_on = [\"rec.base\"]\ndelay_ms = 1\n",
            4,
        )
        .await;
    assert!(report.complete(), "not started: {}", report.not_started);
    assert_eq!(state.resources.keys().collect::<Vec<_>>(), ["rec.base", "rec.top"]);
}

#[test]
fn a_referenced_value_of_the_wrong_type_is_a_plan_error() {
    let f = Fixture::new();
    let stack = forge::stack::load_str(
        "t.toml",
        "[stack]\nname = \"t\"\n[rec.a]\nlabel = \"x\"\n[rec.b]\ndelay_ms = \"${rec.a.label}\"\n",
        &[],
        &f.registry,
        &forge::facts::Facts::builtin(),
    )
    .unwrap();
    let graph = forge::graph::build(&stack).unwrap();
    let err = plan::plan(
        &stack,
        &graph,
        &State::new("t"),
        false,
        Mode::Apply,
        &f.registry,
        &Default::default(),
    )
    .unwrap_err();
    assert_eq!(err.message, "`rec.b.delay_ms` must be an integer, not a string");
}
