//! ④ Apply: runs a plan's changes through the kinds. One coordinator owns the state: it
//! schedules operations whose dependencies are done (bounded by `parallelism`, and never two at
//! once that hold the same serialization key — see [`Lanes`]), records an
//! intent in the journal before every create or delete and the result after, marks the
//! dependents of a failure as skipped while independent branches go on, and on Ctrl-C stops
//! scheduling and waits for the calls in flight (a second Ctrl-C stops waiting).

mod ops;

use crate::plan::{Action, Plan};
use crate::provider::{Cloud, Created, Ctx, Kind, Registry};
use crate::state::{Entry, Event, Journal, ResourceRecord, State, Status};
use crate::template;
use ops::OpGraph;
pub use ops::Phase;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tokio::task::JoinSet;

pub use crate::provider::RetryPolicy;

/// What the person watching is told while apply runs (the CLI draws progress from it).
pub trait Observer: Send + Sync {
    /// An operation started.
    fn started(&self, address: &str, phase: Phase);
    /// A kind reported status text for a running operation.
    fn status(&self, address: &str, text: &str);
    /// An operation ended; `error` is set when it failed.
    fn finished(&self, address: &str, phase: Phase, elapsed: Duration, error: Option<&str>);
    /// Ctrl-C was received; `in_flight` calls are being waited for.
    fn interrupted(&self, in_flight: usize, second: bool);
}

/// Apply settings.
#[derive(Clone)]
pub struct Options {
    /// How many cloud calls may run at once.
    pub parallelism: usize,
    /// How retryable errors are retried.
    pub retry: RetryPolicy,
    /// The clouds the kinds call: the command's, shared with its refresh and readiness.
    pub cloud: Arc<Cloud>,
}

/// A resource that failed: the root cause of everything skipped behind it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The resource.
    pub address: String,
    /// What was being done.
    pub phase: Phase,
    /// The cloud's or forge's message.
    pub message: String,
}

/// What an apply did.
#[derive(Debug, Default)]
pub struct Report {
    /// Completed changes per action.
    pub done: HashMap<Action, usize>,
    /// Root-cause failures.
    pub failures: Vec<Failure>,
    /// Resources not attempted because something they depend on failed: (address, root cause).
    pub skipped: Vec<(String, String)>,
    /// Operations never started because of Ctrl-C.
    pub not_started: usize,
    /// Resources whose change was not started because the state could not store its intent
    /// (its backend stopped answering): the cloud was not called for them.
    pub unrecorded: Vec<String>,
    /// Whether Ctrl-C ended the run early.
    pub interrupted: bool,
    /// Wall time.
    pub elapsed: Duration,
}

impl Report {
    /// Completed changes of one action.
    pub fn count(&self, action: Action) -> usize {
        self.done.get(&action).copied().unwrap_or(0)
    }

    /// True when every change was made.
    pub fn complete(&self) -> bool {
        self.failures.is_empty() && self.skipped.is_empty() && self.unrecorded.is_empty() && self.not_started == 0 && !self.interrupted
    }
}

/// The outcome of one spawned operation.
enum Outcome {
    Created(Created, Value),
    Updated(Value, Value),
    Deleted,
    Failed(String),
    /// Not started: its intent could not be made durable.
    Unrecorded,
}

/// Writes one event to the in-memory state and the journal.
fn record(state: &mut State, journal: &mut Journal, event: Event) -> crate::state::journal::Ticket {
    state.apply(event.clone());
    journal.append(&Entry {
        lineage: state.lineage,
        serial: state.serial,
        event,
    })
}

/// Evaluates a template (a change's config, an output) against the state as applied so far.
pub fn evaluate(state: &State, config: &Value) -> Result<Value, String> {
    let mut lookup = |r: &template::Reference| {
        let Some((address, rec, path)) = r.resolve(|address| state.resources.get(address)) else {
            return Err(format!("`{}` names a resource that does not exist", r.path()));
        };
        crate::plan::attribute(&address, &rec.outputs, &rec.config, path)?
            .map(Some)
            .ok_or_else(|| format!("`{}` is not known yet", r.path()))
    };
    template::evaluate(config, &mut lookup).map_err(|e| format!("cannot evaluate `{}`: {}", e.reference, e.message))
}

/// The stack outputs a complete apply of `plan` leaves: its templates evaluated against `state`
/// (none after a destroy, whose plans carry no outputs). An output that cannot be evaluated is
/// left out.
pub fn evaluate_outputs(plan: &Plan, state: &State) -> serde_json::Map<String, Value> {
    plan.outputs
        .iter()
        .filter_map(|(k, t)| evaluate(state, t).ok().map(|v| (k.clone(), v)))
        .collect()
}

/// Why an operation whose intent could not be made durable was not started.
const NOT_RECORDED: &str =
    "not {verb}: the state could not record the intent first, so the cloud was not called (the state error below says why)";

/// Runs `plan` to completion (or failure, or Ctrl-C). `interrupts` counts Ctrl-C presses.
pub async fn run(
    plan: &Plan,
    state: &mut State,
    journal: &mut Journal,
    registry: &Registry,
    options: &Options,
    observer: Arc<dyn Observer>,
    mut interrupts: watch::Receiver<u32>,
) -> Report {
    let started = Instant::now();
    let mut graph = OpGraph::build(plan);
    let mut report = Report::default();
    let mut tasks: JoinSet<Outcome> = JoinSet::new();
    let mut running: HashMap<tokio::task::Id, (usize, Option<String>)> = HashMap::new();
    let mut stopping = *interrupts.borrow() > 0;
    let mut signals_open = true;
    let parallelism = options.parallelism.max(1);
    for (address, dependencies) in &plan.dependency_updates {
        if let Some(prior) = state.resources.get(address).cloned() {
            record(
                state,
                journal,
                Event::Put(ResourceRecord {
                    dependencies: dependencies.clone(),
                    ..prior
                }),
            );
        }
    }
    let unrecorded: BTreeMap<String, String> = plan
        .bundles
        .iter()
        .filter(|(url, sha256)| state.bundles.get(*url) != Some(*sha256))
        .map(|(url, sha256)| (url.clone(), sha256.clone()))
        .collect();
    if !unrecorded.is_empty() {
        record(state, journal, Event::Bundles(unrecorded));
    }
    let run = Run {
        plan,
        registry,
        options,
        observer: observer.clone(),
        cloud: options.cloud.clone(),
    };

    let mut lanes = Lanes::default();
    loop {
        // The state cannot record intents any more (its backend is down): start nothing new,
        // and let the calls in flight finish.
        stopping |= journal.failed();
        while !stopping && running.len() < parallelism {
            let Some(op) = lanes.next_free().or_else(|| graph.next_ready()) else {
                break;
            };
            let config = applied_config(&run, op, &graph, state);
            let key = serialization_key(&run, op, &graph, config.as_ref().ok());
            if !lanes.enter(op, key.clone()) {
                continue;
            }
            graph.restart_clock(op);
            match dispatch(&run, op, &graph, state, journal, config) {
                Ok(task) => {
                    let handle = tasks.spawn(task);
                    running.insert(handle.id(), (op, key));
                }
                Err(message) => {
                    lanes.leave(key.as_deref());
                    let (address, phase) = graph.describe(plan, op);
                    observer.finished(&address, phase, Duration::ZERO, Some(&message));
                    fail(plan, &mut graph, &mut report, op, message);
                }
            }
        }
        if tasks.is_empty() {
            break;
        }
        tokio::select! {
            joined = tasks.join_next_with_id() => {
                let (id, outcome) = match joined.expect("tasks is not empty") {
                    Ok((id, outcome)) => (id, outcome),
                    Err(e) if e.is_panic() => (e.id(), Outcome::Failed("the kind's code panicked (a bug in forge); the state records the call as pending".into())),
                    Err(e) => (e.id(), Outcome::Failed("stopped by a second Ctrl-C; the state records the call as pending".into())),
                };
                let (op, key) = running.remove(&id).expect("every task is tracked");
                lanes.leave(key.as_deref());
                finish(plan, op, outcome, &mut graph, state, journal, &mut report, &observer);
            }
            changed = interrupts.changed(), if signals_open => {
                if changed.is_err() {
                    signals_open = false;
                    continue;
                }
                let presses = *interrupts.borrow();
                stopping = true;
                report.interrupted = true;
                observer.interrupted(running.len(), presses >= 2);
                if presses >= 2 {
                    tasks.abort_all();
                }
            }
        }
    }
    report.not_started = graph.unfinished_count() + lanes.parked();
    report.elapsed = started.elapsed();
    if report.complete() {
        let outputs = evaluate_outputs(plan, state);
        if outputs != state.outputs {
            record(state, journal, Event::Outputs(outputs));
        }
    }
    report
}

/// The serialization keys held by running operations, and the ready operations parked behind
/// them: an operation whose key is held waits, without holding a parallelism slot, until the
/// holder finishes; operations without a key, or with another, run meanwhile.
#[derive(Default)]
struct Lanes {
    held: HashSet<String>,
    parked: HashMap<String, VecDeque<usize>>,
    free: VecDeque<usize>,
}

impl Lanes {
    /// A parked operation whose key was released, to be dispatched before newly ready ones.
    fn next_free(&mut self) -> Option<usize> {
        self.free.pop_front()
    }

    /// Takes `key` for `op`; false (and `op` parked) when another operation holds it.
    fn enter(&mut self, op: usize, key: Option<String>) -> bool {
        let Some(key) = key else { return true };
        if self.held.contains(&key) {
            self.parked.entry(key).or_default().push_back(op);
            return false;
        }
        self.held.insert(key);
        true
    }

    /// Releases `key`, freeing the next operation parked behind it.
    fn leave(&mut self, key: Option<&str>) {
        let Some(key) = key else { return };
        self.held.remove(key);
        if let Some(next) = self.parked.get_mut(key).and_then(VecDeque::pop_front) {
            self.free.push_back(next);
        }
    }

    /// Operations still parked (or freed but not dispatched) when the run ends.
    fn parked(&self) -> usize {
        self.parked.values().map(VecDeque::len).sum::<usize>() + self.free.len()
    }
}

/// The config an operation applies, evaluated once: the change's against the state as applied
/// so far (create, update), or the one recorded (delete; `null` when nothing is recorded).
fn applied_config(run: &Run, op: usize, graph: &OpGraph, state: &State) -> Result<Value, String> {
    let change = &run.plan.changes[graph.change_of(op)];
    match (graph.describe(run.plan, op).1, &change.config) {
        (Phase::Destroy, _) => Ok(state.resources.get(&change.address).map_or(Value::Null, |r| r.config.clone())),
        (Phase::Create | Phase::Update, Some(config)) => evaluate(state, config),
        (Phase::Create | Phase::Update, None) => Err("a create or update without a config: a bug in forge's plan".into()),
    }
}

/// The serialization key of an operation: its kind's, given the config it applies.
fn serialization_key(run: &Run, op: usize, graph: &OpGraph, config: Option<&Value>) -> Option<String> {
    let kind = run.registry.get(&run.plan.changes[graph.change_of(op)].kind)?;
    kind.serialization_key(config?)
}

fn fail(plan: &Plan, graph: &mut OpGraph, report: &mut Report, op: usize, message: String) {
    let (address, phase) = graph.describe(plan, op);
    for skipped in graph.prune(op) {
        let (skipped_address, _) = graph.describe(plan, skipped);
        if skipped_address != address && !report.skipped.iter().any(|(a, _)| a == &skipped_address) {
            report.skipped.push((skipped_address, address.clone()));
        }
    }
    report.failures.push(Failure { address, phase, message });
}

type Task = std::pin::Pin<Box<dyn std::future::Future<Output = Outcome> + Send>>;

/// What stays the same for every operation of one run.
struct Run<'a> {
    plan: &'a Plan,
    registry: &'a Registry,
    options: &'a Options,
    observer: Arc<dyn Observer>,
    cloud: Arc<Cloud>,
}

/// Records the intent and returns the future that makes the cloud call with `config` (see
/// [`applied_config`]).
fn dispatch(
    run: &Run,
    op: usize,
    graph: &OpGraph,
    state: &mut State,
    journal: &mut Journal,
    config: Result<Value, String>,
) -> Result<Task, String> {
    let Run {
        plan,
        registry,
        options,
        observer,
        cloud,
    } = run;
    let (address, phase) = graph.describe(plan, op);
    let change = &plan.changes[graph.change_of(op)];
    let kind: Arc<dyn Kind> = registry
        .get(&change.kind)
        .cloned()
        .ok_or_else(|| format!("this forge has no resource kind `{}`", change.kind))?;
    let status_observer = observer.clone();
    let status_address = address.clone();
    let ctx = Ctx {
        stack: plan.stack.clone(),
        address: address.clone(),
        status: Arc::new(move |text: &str| status_observer.status(&status_address, text)),
        cloud: cloud.clone(),
    };
    let retry = options.retry.clone();
    let mut waiter = journal.waiter();
    observer.started(&address, phase);
    let prior = state.resources.get(&address).cloned();
    match phase {
        Phase::Create => {
            let config = config?;
            let token = prior
                .filter(|p| p.status == Status::PendingCreate)
                .and_then(|p| p.token)
                .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
            let intent = ResourceRecord {
                address: address.clone(),
                kind: change.kind.clone(),
                status: Status::PendingCreate,
                id: None,
                token: Some(token.clone()),
                config: config.clone(),
                outputs: Value::Object(Default::default()),
                dependencies: change.depends_on.clone(),
            };
            let ticket = record(state, journal, Event::Put(intent));
            Ok(Box::pin(async move {
                if waiter.wait(ticket).await.is_err() {
                    return Outcome::Unrecorded;
                }
                match retry.run(|| kind.create(&ctx, &token, &config)).await {
                    Ok(created) => Outcome::Created(created, config),
                    Err(e) => Outcome::Failed(e.message),
                }
            }))
        }
        Phase::Update => {
            let prior = prior.ok_or("the resource is not in the state any more")?;
            let config = config?;
            let id = prior.id.clone().unwrap_or_default();
            // The plan's `before`: what was applied, or, for a resource changed outside forge,
            // its live values, so the update undoes what someone else did.
            let before = change.before.clone().unwrap_or_else(|| prior.config.clone());
            Ok(Box::pin(async move {
                match retry.run(|| kind.update(&ctx, &id, &before, &config)).await {
                    Ok(outputs) => Outcome::Updated(outputs, config),
                    Err(e) => Outcome::Failed(e.message),
                }
            }))
        }
        Phase::Destroy => {
            let Some(prior) = prior else {
                return Ok(Box::pin(async { Outcome::Deleted }));
            };
            let ticket = record(
                state,
                journal,
                Event::Put(ResourceRecord {
                    status: Status::PendingDelete,
                    ..prior.clone()
                }),
            );
            Ok(Box::pin(async move {
                if waiter.wait(ticket).await.is_err() {
                    return Outcome::Unrecorded;
                }
                let id = match (&prior.id, &prior.token) {
                    (Some(id), _) => id.clone(),
                    // An interrupted create: delete whatever it made, if anything.
                    (None, Some(token)) => match retry.run(|| kind.find(&ctx, token, &prior.config)).await {
                        Ok(Some(id)) => id,
                        Ok(None) => return Outcome::Deleted,
                        Err(e) => return Outcome::Failed(format!("looking for what an interrupted create made: {}", e.message)),
                    },
                    (None, None) => return Outcome::Deleted,
                };
                match retry.run(|| kind.delete(&ctx, &id, &prior.config)).await {
                    Ok(()) => Outcome::Deleted,
                    Err(e) => Outcome::Failed(e.message),
                }
            }))
        }
    }
}

/// Records an operation's result and releases its dependents.
#[allow(clippy::too_many_arguments)]
fn finish(
    plan: &Plan,
    op: usize,
    outcome: Outcome,
    graph: &mut OpGraph,
    state: &mut State,
    journal: &mut Journal,
    report: &mut Report,
    observer: &Arc<dyn Observer>,
) {
    let (address, phase) = graph.describe(plan, op);
    let change = &plan.changes[graph.change_of(op)];
    let elapsed = graph.elapsed(op);
    match outcome {
        Outcome::Failed(message) => {
            observer.finished(&address, phase, elapsed, Some(&message));
            fail(plan, graph, report, op, message);
            return;
        }
        Outcome::Unrecorded => {
            // Left unfinished in the graph: the run is stopping, and the next one starts it.
            observer.finished(&address, phase, elapsed, Some(NOT_RECORDED));
            report.unrecorded.push(address);
            return;
        }
        Outcome::Created(created, config) => {
            let rec = ResourceRecord {
                address: address.clone(),
                kind: change.kind.clone(),
                status: Status::Created,
                id: Some(created.id),
                token: None,
                config,
                outputs: created.outputs,
                dependencies: change.depends_on.clone(),
            };
            record(state, journal, Event::Put(rec));
        }
        Outcome::Updated(outputs, config) => {
            if let Some(prior) = state.resources.get(&address).cloned() {
                record(
                    state,
                    journal,
                    Event::Put(ResourceRecord {
                        config,
                        outputs,
                        dependencies: change.depends_on.clone(),
                        ..prior
                    }),
                );
            }
        }
        Outcome::Deleted => {
            record(state, journal, Event::Remove(address.clone()));
        }
    }
    observer.finished(&address, phase, elapsed, None);
    if graph.complete(op) {
        *report.done.entry(change.action).or_default() += 1;
    }
}
