//! ④ Apply: runs a plan's changes through the kinds. One coordinator owns the state: it
//! schedules operations whose dependencies are done (bounded by `parallelism`, and never two at
//! once that hold the same serialization key — see [`Lanes`]), records an
//! intent in the journal before every create or delete and the result after, marks the
//! dependents of a failure as skipped while independent branches go on, and on Ctrl-C stops
//! scheduling and waits for the calls in flight (a second Ctrl-C stops waiting).

mod ops;

use crate::plan::{Action, Change, Plan};
use crate::provider::{Cloud, Created, Ctx, Kind, Registry};
use crate::state::journal::{Ticket, Waiter};
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
fn record(state: &mut State, journal: &mut Journal, event: Event) -> Ticket {
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
    interrupts: watch::Receiver<u32>,
) -> Report {
    let started = Instant::now();
    record_dependency_updates(plan, state, journal);
    record_new_bundle_digests(plan, state, journal);
    record_reads(plan, state, journal);
    if let Err(failure) = import_objects(plan, state, journal, registry, options, &interrupts).await {
        return Report {
            failures: vec![failure],
            not_started: plan.changes.len() + plan.count(Action::Replace),
            elapsed: started.elapsed(),
            ..Report::default()
        };
    }
    let stopping = *interrupts.borrow() > 0;
    let run = Run {
        plan,
        registry,
        options,
        observer,
        cloud: options.cloud.clone(),
    };
    let mut coordinator = Coordinator::new(run, state, journal, stopping);
    coordinator.drive(interrupts).await;
    coordinator.conclude(started)
}

/// Records the new dependencies of the plan's unchanged resources (no cloud call needed), so
/// later deletes follow the stack's current order.
fn record_dependency_updates(plan: &Plan, state: &mut State, journal: &mut Journal) {
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
}

/// Records what the plan read of the `existing` blocks' objects (those whose record differs)
/// and drops the reads it forgets — no cloud call either way, and before any operation, whose
/// templates may refer to them.
fn record_reads(plan: &Plan, state: &mut State, journal: &mut Journal) {
    for read in &plan.reads {
        if state.resources.get(&read.address) != Some(read) {
            record(state, journal, Event::Put(read.clone()));
        }
    }
    for address in &plan.forgets {
        if state.resources.get(address).is_some_and(|r| r.status == Status::Read) {
            record(state, journal, Event::Remove(address.clone()));
        }
    }
}

/// Marks each object the plan imports as forge's own (its stack, address and token) and then
/// records it — the mark first, so an import cut short is done again by the next run, whose
/// plan finds the object marked for this address — before any change, which starts from them.
async fn import_objects(
    plan: &Plan,
    state: &mut State,
    journal: &mut Journal,
    registry: &Registry,
    options: &Options,
    interrupts: &watch::Receiver<u32>,
) -> Result<(), Failure> {
    for import in &plan.imports {
        if state.resources.get(&import.address).and_then(|r| r.id.as_ref()) == import.id.as_ref() {
            continue;
        }
        let failed = |message: String| Failure {
            address: import.address.clone(),
            phase: Phase::Update,
            message: format!("importing it: {message}"),
        };
        if *interrupts.borrow() > 0 {
            return Err(failed("interrupted before it was marked; nothing of it was changed".into()));
        }
        let kind = registry
            .get(&import.kind)
            .ok_or_else(|| failed(format!("this forge has no resource kind `{}`", import.kind)))?;
        let ctx = Ctx {
            stack: plan.stack.clone(),
            address: import.address.clone(),
            status: Arc::new(|_: &str| {}),
            cloud: options.cloud.clone(),
            resumed: false,
            quoted: None,
        };
        let (id, token) = (
            import.id.as_deref().unwrap_or_default(),
            import.token.as_deref().unwrap_or_default(),
        );
        // Held again to what the plan saw: still there, and no other stack's since (a saved
        // plan, or a confirmation, may have waited).
        let now = options
            .retry
            .run(|| kind.inspect(&options.cloud, id))
            .await
            .map_err(|e| failed(e.message))?
            .ok_or_else(|| failed(format!("`{id}` is gone since the plan; plan again")))?;
        if let Some((stack, address)) = now.mark.filter(|(s, a)| *s != plan.stack || *a != import.address) {
            return Err(failed(format!(
                "`{id}` carries the mark of `{address}` of the stack `{stack}` since the plan; plan again"
            )));
        }
        options
            .retry
            .run(|| kind.mark(&ctx, id, token))
            .await
            .map_err(|e| failed(e.message))?;
        record(state, journal, Event::Put(import.clone()));
    }
    Ok(())
}

/// Records the digests of the plan's bundles that the state does not hold yet.
fn record_new_bundle_digests(plan: &Plan, state: &mut State, journal: &mut Journal) {
    let unrecorded: BTreeMap<String, String> = plan
        .bundles
        .iter()
        .filter(|(url, sha256)| state.bundles.get(*url) != Some(*sha256))
        .map(|(url, sha256)| (url.clone(), sha256.clone()))
        .collect();
    if !unrecorded.is_empty() {
        record(state, journal, Event::Bundles(unrecorded));
    }
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

type Task = std::pin::Pin<Box<dyn std::future::Future<Output = Outcome> + Send>>;

/// What stays the same for every operation of one run.
struct Run<'a> {
    plan: &'a Plan,
    registry: &'a Registry,
    options: &'a Options,
    observer: Arc<dyn Observer>,
    cloud: Arc<Cloud>,
}

impl Run<'_> {
    /// What the cloud call of `change` (at `address`) needs: its kind, a context that reports
    /// status to the observer, and the retry policy.
    fn call(&self, change: &Change, address: &str) -> Result<Call, String> {
        let kind: Arc<dyn Kind> = self
            .registry
            .get(&change.kind)
            .cloned()
            .ok_or_else(|| format!("this forge has no resource kind `{}`", change.kind))?;
        let status_observer = self.observer.clone();
        let status_address = address.to_owned();
        let ctx = Ctx {
            stack: self.plan.stack.clone(),
            address: address.to_owned(),
            status: Arc::new(move |text: &str| status_observer.status(&status_address, text)),
            cloud: self.cloud.clone(),
            resumed: false,
            quoted: change.purchase.clone(),
        };
        Ok(Call {
            kind,
            ctx,
            retry: self.options.retry.clone(),
        })
    }
}

/// One operation's cloud call, owned by the task that makes it.
struct Call {
    kind: Arc<dyn Kind>,
    ctx: Ctx,
    retry: RetryPolicy,
}

impl Call {
    /// Creates with `token` once the pending create (`ticket`) is durable.
    fn create(self, mut waiter: Waiter, ticket: Ticket, token: String, config: Value) -> Task {
        let Call { kind, ctx, retry } = self;
        Box::pin(async move {
            if waiter.wait(ticket).await.is_err() {
                return Outcome::Unrecorded;
            }
            match retry.run(|| kind.create(&ctx, &token, &config)).await {
                Ok(created) => Outcome::Created(created, config),
                Err(e) => Outcome::Failed(e.message),
            }
        })
    }

    /// Updates object `id` from `before` to `config` (an update records no intent).
    fn update(self, id: String, before: Value, config: Value) -> Task {
        let Call { kind, ctx, retry } = self;
        Box::pin(async move {
            match retry.run(|| kind.update(&ctx, &id, &before, &config)).await {
                Ok(outputs) => Outcome::Updated(outputs, config),
                Err(e) => Outcome::Failed(e.message),
            }
        })
    }

    /// Deletes `prior`'s object once the pending delete (`ticket`) is durable; for an
    /// interrupted create, first finds by its token whatever it made, if anything.
    fn delete(self, mut waiter: Waiter, ticket: Ticket, prior: ResourceRecord) -> Task {
        let Call { kind, ctx, retry } = self;
        Box::pin(async move {
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
        })
    }
}

/// The one coordinator of a run: the only writer of the state and the journal, it starts the
/// operations whose dependencies are done and records what each one did.
struct Coordinator<'a> {
    run: Run<'a>,
    state: &'a mut State,
    journal: &'a mut Journal,
    graph: OpGraph,
    lanes: Lanes,
    tasks: JoinSet<Outcome>,
    /// The operation (and serialization key) of every spawned task.
    running: HashMap<tokio::task::Id, (usize, Option<String>)>,
    report: Report,
    /// Set by Ctrl-C or a failed journal: start nothing new.
    stopping: bool,
    /// How many operations may run at once (at least one).
    parallelism: usize,
}

impl<'a> Coordinator<'a> {
    /// A coordinator for `run`'s plan, nothing started yet.
    fn new(run: Run<'a>, state: &'a mut State, journal: &'a mut Journal, stopping: bool) -> Self {
        Coordinator {
            graph: OpGraph::build(run.plan),
            parallelism: run.options.parallelism.max(1),
            run,
            state,
            journal,
            lanes: Lanes::default(),
            tasks: JoinSet::new(),
            running: HashMap::new(),
            report: Report::default(),
            stopping,
        }
    }

    /// Starts what may start and collects what finishes until nothing runs; Ctrl-C stops the
    /// starting, a second one aborts the calls in flight.
    async fn drive(&mut self, mut interrupts: watch::Receiver<u32>) {
        let mut signals_open = true;
        loop {
            // The state cannot record intents any more (its backend is down): start nothing new,
            // and let the calls in flight finish.
            self.stopping |= self.journal.failed();
            self.start_ready();
            if self.tasks.is_empty() {
                break;
            }
            tokio::select! {
                joined = self.tasks.join_next_with_id() => self.task_ended(joined.expect("tasks is not empty")),
                changed = interrupts.changed(), if signals_open => {
                    if changed.is_err() {
                        signals_open = false;
                        continue;
                    }
                    let presses = *interrupts.borrow();
                    self.interrupt(presses);
                }
            }
        }
    }

    /// Starts ready operations (parked ones whose key was released first) while a
    /// parallelism slot is free and the run is not stopping.
    fn start_ready(&mut self) {
        while !self.stopping && self.running.len() < self.parallelism {
            let Some(op) = self.lanes.next_free().or_else(|| self.graph.next_ready()) else {
                break;
            };
            self.start(op);
        }
    }

    /// Starts `op` unless another operation holds its serialization key (then it is parked);
    /// an operation that cannot be dispatched fails at once.
    fn start(&mut self, op: usize) {
        let config = applied_config(&self.run, op, &self.graph, self.state);
        let key = serialization_key(&self.run, op, &self.graph, config.as_ref().ok());
        if !self.lanes.enter(op, key.clone()) {
            return;
        }
        self.graph.restart_clock(op);
        match self.dispatch(op, config) {
            Ok(task) => {
                let handle = self.tasks.spawn(task);
                self.running.insert(handle.id(), (op, key));
            }
            Err(message) => {
                self.lanes.leave(key.as_deref());
                let (address, phase) = self.graph.describe(self.run.plan, op);
                self.run.observer.finished(&address, phase, Duration::ZERO, Some(&message));
                self.fail(op, message);
            }
        }
    }

    /// Records the intent and returns the future that makes the cloud call with `config` (see
    /// [`applied_config`]).
    fn dispatch(&mut self, op: usize, config: Result<Value, String>) -> Result<Task, String> {
        let plan = self.run.plan;
        let (address, phase) = self.graph.describe(plan, op);
        let change = &plan.changes[self.graph.change_of(op)];
        let call = self.run.call(change, &address)?;
        self.run.observer.started(&address, phase);
        let prior = self.state.resources.get(&address).cloned();
        match phase {
            Phase::Create => Ok(self.intend_create(call, change, address, prior, config?)),
            Phase::Update => {
                let prior = prior.ok_or("the resource is not in the state any more")?;
                let config = config?;
                let id = prior.id.clone().unwrap_or_default();
                // The plan's `before`: what was applied, or, for a resource changed outside forge,
                // its live values, so the update undoes what someone else did.
                let before = change.before.clone().unwrap_or_else(|| prior.config.clone());
                Ok(call.update(id, before, config))
            }
            Phase::Destroy => Ok(self.intend_delete(call, prior)),
        }
    }

    /// Records a pending create, with the token of an interrupted one (so the kind adopts what
    /// that made) or a new one, and returns the create that waits for it to be durable.
    fn intend_create(&mut self, mut call: Call, change: &Change, address: String, prior: Option<ResourceRecord>, config: Value) -> Task {
        let resumed = prior.filter(|p| p.status == Status::PendingCreate).and_then(|p| p.token);
        call.ctx.resumed = resumed.is_some();
        let token = resumed.unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        let intent = ResourceRecord {
            address,
            kind: change.kind.clone(),
            status: Status::PendingCreate,
            id: None,
            token: Some(token.clone()),
            config: config.clone(),
            outputs: Value::Object(Default::default()),
            dependencies: change.depends_on.clone(),
        };
        let waiter = self.journal.waiter();
        let ticket = record(self.state, self.journal, Event::Put(intent));
        call.create(waiter, ticket, token, config)
    }

    /// Records a pending delete of `prior` and returns the delete that waits for it to be
    /// durable; with nothing recorded there is nothing to delete.
    fn intend_delete(&mut self, call: Call, prior: Option<ResourceRecord>) -> Task {
        let Some(prior) = prior else {
            return Box::pin(async { Outcome::Deleted });
        };
        let waiter = self.journal.waiter();
        let ticket = record(
            self.state,
            self.journal,
            Event::Put(ResourceRecord {
                status: Status::PendingDelete,
                ..prior.clone()
            }),
        );
        call.delete(waiter, ticket, prior)
    }

    /// Takes a joined task's outcome (a panic or an abort is a failure), frees its
    /// serialization key and records the outcome.
    fn task_ended(&mut self, joined: Result<(tokio::task::Id, Outcome), tokio::task::JoinError>) {
        let (id, outcome) = match joined {
            Ok((id, outcome)) => (id, outcome),
            Err(e) if e.is_panic() => (
                e.id(),
                Outcome::Failed("the kind's code panicked (a bug in forge); the state records the call as pending".into()),
            ),
            Err(e) => (
                e.id(),
                Outcome::Failed("stopped by a second Ctrl-C; the state records the call as pending".into()),
            ),
        };
        let (op, key) = self.running.remove(&id).expect("every task is tracked");
        self.lanes.leave(key.as_deref());
        self.finish(op, outcome);
    }

    /// Ctrl-C was pressed (`presses` times in all): stop starting operations; from the second
    /// press on, abort the calls in flight.
    fn interrupt(&mut self, presses: u32) {
        self.stopping = true;
        self.report.interrupted = true;
        self.run.observer.interrupted(self.running.len(), presses >= 2);
        if presses >= 2 {
            self.tasks.abort_all();
        }
    }

    /// Records an operation's result and releases its dependents.
    fn finish(&mut self, op: usize, outcome: Outcome) {
        let plan = self.run.plan;
        let (address, phase) = self.graph.describe(plan, op);
        let change = &plan.changes[self.graph.change_of(op)];
        let elapsed = self.graph.elapsed(op);
        match outcome {
            Outcome::Failed(message) => {
                self.run.observer.finished(&address, phase, elapsed, Some(&message));
                self.fail(op, message);
                return;
            }
            Outcome::Unrecorded => {
                // Left unfinished in the graph: the run is stopping, and the next one starts it.
                self.run.observer.finished(&address, phase, elapsed, Some(NOT_RECORDED));
                self.report.unrecorded.push(address);
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
                record(self.state, self.journal, Event::Put(rec));
            }
            Outcome::Updated(outputs, config) => {
                if let Some(prior) = self.state.resources.get(&address).cloned() {
                    record(
                        self.state,
                        self.journal,
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
                record(self.state, self.journal, Event::Remove(address.clone()));
            }
        }
        self.run.observer.finished(&address, phase, elapsed, None);
        if self.graph.complete(op) {
            *self.report.done.entry(change.action).or_default() += 1;
        }
    }

    /// Records `op`'s failure, the root cause of the dependents it skips.
    fn fail(&mut self, op: usize, message: String) {
        let plan = self.run.plan;
        let (address, phase) = self.graph.describe(plan, op);
        for skipped in self.graph.prune(op) {
            let (skipped_address, _) = self.graph.describe(plan, skipped);
            if skipped_address != address && !self.report.skipped.iter().any(|(a, _)| a == &skipped_address) {
                self.report.skipped.push((skipped_address, address.clone()));
            }
        }
        self.report.failures.push(Failure { address, phase, message });
    }

    /// Ends the run: counts the operations never started and, when every change was made,
    /// records the stack outputs.
    fn conclude(mut self, started: Instant) -> Report {
        self.report.not_started = self.graph.unfinished_count() + self.lanes.parked();
        self.report.elapsed = started.elapsed();
        if self.report.complete() {
            let outputs = evaluate_outputs(self.run.plan, self.state);
            if outputs != self.state.outputs {
                record(self.state, self.journal, Event::Outputs(outputs));
            }
        }
        self.report
    }
}
