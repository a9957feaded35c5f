//! ③ The plan: desired stack × recorded state → a list of changes. Plain serde data, so it can
//! be saved with `--out`, shown, and applied exactly. Never writes state.

pub mod diff;
pub mod drift;
pub mod existing;
pub mod in_cluster;
pub mod render;

use crate::graph::ResourceGraph;
use crate::provider::settings::Providers;
use crate::provider::{Kind, Registry};
use crate::stack::{Stack, StackError};
use crate::state::{Backend, ResourceRecord, State, Status};
use crate::template::{self, Reference};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use uuid::Uuid;

/// The plan file format this forge writes and reads.
pub const PLAN_FORMAT: u32 = 2;

/// What the plan is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Make the cloud match the stack.
    Apply,
    /// Delete everything the state holds.
    Destroy,
}

/// What happens to one resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// `+`
    Create,
    /// `~` in place.
    Update,
    /// `-/+`: delete, then create.
    Replace,
    /// `-`
    Delete,
}

impl Action {
    /// The symbol shown in plans.
    pub fn symbol(self) -> &'static str {
        match self {
            Action::Create => "+",
            Action::Update => "~",
            Action::Replace => "-/+",
            Action::Delete => "-",
        }
    }
}

/// One planned change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Change {
    /// The resource's address.
    pub address: String,
    /// Its kind.
    pub kind: String,
    /// What happens.
    pub action: Action,
    /// The attributes as last applied (none for a create).
    pub before: Option<Value>,
    /// The attributes after the change as far as known now: `null` means known after apply.
    pub after: Option<Value>,
    /// The template apply evaluates against the outputs of what it has applied (none for a
    /// delete).
    pub config: Option<Value>,
    /// Addresses this resource depends on in the stack.
    pub depends_on: Vec<String>,
    /// Addresses it depended on when last applied (deletes follow these in reverse).
    pub prior_depends_on: Vec<String>,
    /// Attributes whose change forces the replacement.
    pub replace_because: Vec<String>,
    /// Why, when the state itself asks for the change (an interrupted call).
    pub reason: Option<String>,
    /// The change deletes an object that holds data (a replaced or removed file system).
    #[serde(default)]
    pub destroys_data: bool,
    /// What the create buys, priced when planned (a Capacity Block): `up` makes it only with
    /// `--allow-purchase`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub purchase: Option<crate::provider::Purchase>,
}

/// A plan: everything `forge up PLAN` needs, without the stack file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// [`PLAN_FORMAT`].
    pub format_version: u32,
    /// Apply or destroy.
    pub mode: Mode,
    /// The stack's name.
    pub stack: String,
    /// The stack file the plan was made from.
    pub stack_file: String,
    /// Where the state lives.
    pub state: Backend,
    /// The state's lineage when planned (`None`: there was no state).
    pub state_lineage: Option<Uuid>,
    /// The state's serial when planned.
    pub state_serial: u64,
    /// Provider settings.
    pub providers: Providers,
    /// Output templates, evaluated after apply.
    pub outputs: BTreeMap<String, Value>,
    /// The changes: creates and updates in dependency order, then deletes.
    pub changes: Vec<Change>,
    /// Resources that need nothing.
    pub unchanged: usize,
    /// Unchanged resources whose dependencies changed (a `depends_on` edit): apply records the
    /// new ones, without a cloud call, so later deletes follow the stack's current order.
    #[serde(default)]
    pub dependency_updates: BTreeMap<String, Vec<String>>,
    /// The readiness checks `up` makes after the apply (templates over the state; see
    /// [`crate::stack::Stack::readiness`]), so a saved plan waits as `up FILE` does.
    #[serde(default)]
    pub readiness: Vec<crate::readiness::Check>,
    /// The digests of the stack's unpinned bundles, by URL, that apply records in the state.
    #[serde(default)]
    pub bundles: BTreeMap<String, String>,
    /// What the changes need that they do not show: a cluster endpoint forge may not reach
    /// ([`in_cluster::endpoint_notes`]).
    #[serde(default)]
    pub notes: Vec<String>,
    /// In-cluster changes (and what must follow them) left for a run that reaches the
    /// clusters: `--skip-in-cluster` ([`Plan::skip_in_cluster`]).
    #[serde(default)]
    pub deferred: Vec<Change>,
    /// The objects the stack reads and never changes (`existing = …`), as read when planned:
    /// apply records each one whose record differs, before any call (`<= read`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reads: Vec<ResourceRecord>,
    /// Recorded reads the stack no longer declares (all of them when destroying): apply drops
    /// their records and leaves the objects as they are.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub forgets: Vec<String>,
    /// Objects the stack's `[[import]]` entries take over, as read when planned (each with the
    /// token to mark it with): apply marks and records them before any change, which is
    /// planned from them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub imports: Vec<ResourceRecord>,
    /// What the stack costs to run once applied and what the plan changes, at the clouds' list
    /// prices (`None`: not priced, `--no-cost`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<crate::cost::PlanCost>,
}

impl Plan {
    /// How many changes of `action`.
    pub fn count(&self, action: Action) -> usize {
        self.changes.iter().filter(|c| c.action == action).count()
    }

    /// The changes that delete data (see [`Change::destroys_data`]).
    pub fn data_losses(&self) -> impl Iterator<Item = &Change> {
        self.changes.iter().filter(|c| c.destroys_data)
    }

    /// The changes that buy something (see [`Change::purchase`]).
    pub fn purchases(&self) -> impl Iterator<Item = (&Change, &crate::provider::Purchase)> {
        self.changes.iter().filter_map(|c| Some((c, c.purchase.as_ref()?)))
    }

    /// True when applying would change nothing (outputs aside).
    pub fn is_empty(&self) -> bool {
        self.changes.is_empty() && self.imports.is_empty()
    }

    /// Whether applying would change the state without a cloud call: dependencies recorded
    /// anew, reads that differ from their records, reads forgotten.
    pub fn updates_records(&self, state: &State) -> bool {
        !self.dependency_updates.is_empty()
            || !self.forgets.is_empty()
            || self.reads.iter().any(|r| state.resources.get(&r.address) != Some(r))
    }

    /// Leaves the in-cluster changes, and what must follow them, for a later run
    /// ([`in_cluster::defer`]), with the readiness checks (they read the clusters too).
    pub fn skip_in_cluster(&mut self) {
        self.deferred = in_cluster::defer(&mut self.changes);
        self.readiness.clear();
    }
}

/// A resource as it will be after apply, for evaluating references to it.
struct Planned {
    config: Value,
    outputs: Value,
}

/// Looks up `address.attr…` among planned resources: outputs first, then attributes.
/// `Ok(None)` while unknown.
fn lookup(planned: &HashMap<&str, Planned>, r: &Reference) -> Result<Option<Value>, String> {
    match r.resolve(|address| planned.get(address)) {
        Some((address, p, path)) => attribute(&address, &p.outputs, &p.config, path),
        None => Err(format!("`{}` is not in the plan", r.path())),
    }
}

/// Reads an attribute path from a resource's outputs or config; `Ok(None)` when it passes
/// through an unknown value.
pub fn attribute(address: &str, outputs: &Value, config: &Value, path: &[String]) -> Result<Option<Value>, String> {
    let root = outputs.get(&path[0]).or_else(|| config.get(&path[0]));
    let mut cur = root;
    for (depth, seg) in path.iter().enumerate().skip(1) {
        cur = match cur {
            Some(Value::Null) => return Ok(None),
            Some(v) => template::get_path(v, std::slice::from_ref(seg)),
            None => break,
        };
        if cur.is_none() {
            return Err(format!("`{address}` has no attribute `{}`", path[..=depth].join(".")));
        }
    }
    match cur {
        None => Err(format!("`{address}` has no attribute `{}`", path[0])),
        Some(Value::Null) => Ok(None),
        Some(v) => Ok(Some(v.clone())),
    }
}

/// Plans `mode` for `stack` against `state`; `drift` is what a refresh found: resources deleted
/// outside forge are created again, changed ones updated back from their live values.
pub fn plan(
    stack: &Stack,
    graph: &ResourceGraph,
    state: &State,
    state_existed: bool,
    mode: Mode,
    registry: &Registry,
    drift: &drift::Drift,
) -> Result<Plan, StackError> {
    if mode == Mode::Apply {
        check_bundles(stack, state)?;
    }
    let DeclaredChanges {
        mut changes,
        unchanged,
        dependency_updates,
        reads,
    } = if mode == Mode::Apply {
        plan_declared(stack, graph, state, registry, drift)?
    } else {
        DeclaredChanges::default()
    };
    let (doomed, forgets) = deletes(stack, state, mode);
    changes.extend(doomed);
    check_reads_survive(stack, state, &reads, &changes)?;
    mark_data_losses(&mut changes, state, registry);
    let mut notes = in_cluster::endpoint_notes(stack, &changes);
    notes.extend(unseen_purchases(registry, drift));
    notes.extend(drift.lives.iter().map(|l| format!("`{}` ({}) is {}", l.address, l.id, l.state)));
    Ok(Plan {
        format_version: PLAN_FORMAT,
        mode,
        stack: stack.name.clone(),
        stack_file: stack.source.name.clone(),
        state: stack.state.clone(),
        state_lineage: state_existed.then_some(state.lineage),
        state_serial: state.serial,
        providers: stack.providers.clone(),
        outputs: if mode == Mode::Apply {
            stack.outputs.clone()
        } else {
            BTreeMap::new()
        },
        changes,
        unchanged,
        dependency_updates,
        readiness: if mode == Mode::Apply { stack.readiness.clone() } else { Vec::new() },
        bundles: if mode == Mode::Apply {
            stack.bundles.clone()
        } else {
            BTreeMap::new()
        },
        notes,
        deferred: Vec::new(),
        reads,
        forgets,
        imports: Vec::new(),
        cost: None,
    })
}

/// Refuses a plan that deletes an object the stack reads: one forge made under another address
/// (a block renamed into an `existing` one, a tag look-up that matched forge's own object).
fn check_reads_survive(stack: &Stack, state: &State, reads: &[ResourceRecord], changes: &[Change]) -> Result<(), StackError> {
    for c in changes.iter().filter(|c| matches!(c.action, Action::Delete | Action::Replace)) {
        let Some(made) = state.resources.get(&c.address).filter(|r| r.status != Status::Read) else {
            continue;
        };
        let Some(read) = reads.iter().find(|r| r.kind == made.kind && r.id.is_some() && r.id == made.id) else {
            continue;
        };
        let span = stack
            .resources
            .iter()
            .find(|r| r.address == read.address)
            .and_then(|r| r.existing.as_ref())
            .map(|e| e.span.clone());
        return Err(stack.source.error(
            span,
            format!(
                "`{}` reads {}, which forge made as `{}` and this plan would delete",
                read.address,
                read.id.as_deref().unwrap_or_default(),
                c.address
            ),
            "read here",
            Some(format!(
                "to keep the object and only read it from now on, let go of forge's record first: `forge state rm {}` (the object stays), then plan again",
                c.address
            )),
        ));
    }
    Ok(())
}

/// What the refresh did not see of the objects forge paid for (see [`Kind::paid_for`]): kept as
/// recorded, never bought again by itself, and said once each.
fn unseen_purchases(registry: &Registry, drift: &drift::Drift) -> Vec<String> {
    drift
        .deleted
        .iter()
        .filter(|d| registry.get(&d.kind).is_some_and(|k| k.paid_for()))
        .map(|d| {
            format!(
                "`{}` ({}) is not shown by the cloud: a purchase shows only after some seconds, and an ended one is purged after a while. forge keeps it as recorded and does not buy it again; to buy another, `forge state rm {}` first.",
                d.address, d.id, d.address
            )
        })
        .collect()
}

/// Refuses a bundle whose contents changed since the state recorded its digest (an upstream
/// release re-tagged, a mirror serving something else): trust on first use, as a lock file.
fn check_bundles(stack: &Stack, state: &State) -> Result<(), StackError> {
    for (url, sha256) in &stack.bundles {
        match state.bundles.get(url) {
            Some(recorded) if recorded != sha256 => {
                return Err(stack.source.error(
                    None,
                    format!("the bundle at {url} changed since it was first applied: sha256 {sha256}, recorded {recorded}"),
                    "",
                    Some(format!(
                        "if the new contents are expected, pin them in the stack: `sha256 = \"{sha256}\"` beside the bundle's url or version"
                    )),
                ));
            }
            _ => {}
        }
    }
    Ok(())
}

/// What planning the declared resources found (see [`plan_declared`]).
#[derive(Default)]
struct DeclaredChanges {
    /// Creates, updates and replaces, in dependency order.
    changes: Vec<Change>,
    /// Resources that need nothing.
    unchanged: usize,
    /// Unchanged resources whose recorded dependencies differ from the stack's.
    dependency_updates: BTreeMap<String, Vec<String>>,
    /// The `existing` blocks' objects as read, as records (see [`Plan::reads`]).
    reads: Vec<ResourceRecord>,
}

impl DeclaredChanges {
    /// Adds one resource's change, or counts it unchanged (noting a `depends_on` edit).
    fn add(&mut self, r: &crate::stack::Resource, change: Option<Change>, prior: Option<&ResourceRecord>) {
        match change {
            Some(c) => self.changes.push(c),
            None => {
                self.unchanged += 1;
                if let Some(p) = prior.filter(|p| p.dependencies != r.depends_on) {
                    self.dependency_updates.insert(p.address.clone(), r.depends_on.clone());
                }
            }
        }
    }
}

/// Plans every declared resource in dependency order, so each one's references resolve against
/// what the resources before it will be after apply.
fn plan_declared(
    stack: &Stack,
    graph: &ResourceGraph,
    state: &State,
    registry: &Registry,
    drift: &drift::Drift,
) -> Result<DeclaredChanges, StackError> {
    let mut planner = Planner {
        stack,
        state,
        registry,
        drift,
        gone: drift
            .deleted
            .iter()
            .filter(|d| !registry.get(&d.kind).is_some_and(|k| k.paid_for()))
            .map(|d| d.address.clone())
            .collect(),
        planned: HashMap::with_capacity(stack.resources.len()),
    };
    let mut declared = DeclaredChanges::default();
    for &i in graph.order() {
        let r = &stack.resources[i];
        if let Some(existing) = &r.existing {
            declared.reads.push(planner.plan_read(r, existing)?);
            continue;
        }
        let (change, prior) = planner.plan_resource(r)?;
        declared.add(r, change, prior);
    }
    Ok(declared)
}

/// What planning one declared resource reads, and the resources planned before it.
struct Planner<'a> {
    stack: &'a Stack,
    state: &'a State,
    registry: &'a Registry,
    drift: &'a drift::Drift,
    /// Addresses the refresh found deleted outside forge.
    gone: BTreeSet<String>,
    /// The resources planned so far, as they will be after apply.
    planned: HashMap<&'a str, Planned>,
}

impl<'a> Planner<'a> {
    /// Plans `r`: its change (none when it needs nothing) and its record (none when it was never
    /// made or is gone); `r` joins the planned resources later ones refer to.
    fn plan_resource(&mut self, r: &'a crate::stack::Resource) -> Result<(Option<Change>, Option<&'a ResourceRecord>), StackError> {
        let kind = self.registry.get(&r.kind).expect("kinds are checked when the stack loads");
        let after = self.desired_config(r, kind.as_ref())?;
        let state: &'a State = self.state;
        let prior = state.resources.get(&r.address).filter(|_| !self.gone.contains(&r.address));
        let change = self.change(r, kind.as_ref(), prior, &after);
        self.check_update(r, kind.as_ref(), change.as_ref(), prior)?;
        let outputs = match (&change, prior) {
            (None, Some(p)) => p.outputs.clone(),
            (Some(c), Some(p)) if c.action == Action::Update => kind.planned_outputs(&after, Some(&p.outputs)),
            _ => kind.planned_outputs(&after, None),
        };
        self.planned.insert(&r.address, Planned { config: after, outputs });
        Ok((change, prior))
    }

    /// `r`, which reads an existing object: its record as read now, whose values the resources
    /// after it refer to. A block whose object forge made is refused: reading another object
    /// there would leave forge's behind, unmanaged, and reading forge's own would leave its
    /// marks on an object it no longer manages.
    fn plan_read(&mut self, r: &'a crate::stack::Resource, existing: &crate::stack::Existing) -> Result<ResourceRecord, StackError> {
        let Some(found) = self.drift.found.get(&r.address) else {
            return Err(self.stack.source.error(
                Some(existing.span.clone()),
                format!("`{}`: the existing object was not read", r.address),
                "not read",
                Some("a bug in forge: every `existing` block is read before planning; please report it".into()),
            ));
        };
        if let Some(made) = self.state.resources.get(&r.address).filter(|p| p.status != Status::Read) {
            return Err(self.stack.source.error(
                Some(existing.span.clone()),
                format!(
                    "`{}` is recorded as forge's own {} ({}), so it cannot read {} here",
                    r.address,
                    made.kind,
                    made.id.as_deref().unwrap_or("an interrupted create"),
                    found.id
                ),
                "forge's own",
                Some(format!(
                    "first let go of forge's object: remove `existing` and the block, and `forge up` deletes it; or `forge state rm {}` leaves it in the cloud (remove its forge:* tags or labels by hand, or `forge drift` reports it unmanaged); then add `existing`",
                    r.address
                )),
            ));
        }
        self.planned.insert(
            &r.address,
            Planned {
                config: found.attributes.clone(),
                outputs: found.outputs.clone(),
            },
        );
        Ok(ResourceRecord {
            address: r.address.clone(),
            kind: r.kind.clone(),
            status: Status::Read,
            id: Some(found.id.clone()),
            token: None,
            config: found.attributes.clone(),
            outputs: found.outputs.clone(),
            dependencies: r.depends_on.clone(),
        })
    }

    /// `r`'s config with its references resolved against the resources planned before it,
    /// checked against the field types of its kind.
    fn desired_config(&self, r: &crate::stack::Resource, kind: &dyn Kind) -> Result<Value, StackError> {
        let stack = self.stack;
        let after = template::evaluate(&r.config, &mut |reference| lookup(&self.planned, reference)).map_err(|e| {
            stack.source.error(
                Some(r.span.clone()),
                format!("cannot evaluate `{}` in `{}`", e.reference, r.address),
                "in this block",
                Some(e.message),
            )
        })?;
        if let Some(field) = crate::schema::mistyped(kind.spec().fields, &after) {
            return Err(stack.source.error(
                Some(r.span.clone()),
                format!(
                    "`{}.{}` must be {}, not {}",
                    r.address,
                    field.name,
                    field.ty.describe(),
                    crate::schema::describe(&after[field.name])
                ),
                "in this block",
                Some("the value comes from a reference; point it at an attribute of the right type".into()),
            ));
        }
        Ok(after)
    }

    /// Fails the plan when `change` updates `r` in a way its cloud refuses (see
    /// [`crate::provider::Resource::refusal`]), naming the attribute and how to get there.
    fn check_update(
        &self,
        r: &crate::stack::Resource,
        kind: &dyn Kind,
        change: Option<&Change>,
        prior: Option<&ResourceRecord>,
    ) -> Result<(), StackError> {
        let (Some(change), Some(prior)) = (change.filter(|c| c.action == Action::Update), prior) else {
            return Ok(());
        };
        let (Some(before), Some(after)) = (&change.before, &change.after) else {
            return Ok(());
        };
        match kind.refusal(before, after, &prior.outputs) {
            None => Ok(()),
            Some(refusal) => Err(self.stack.source.error(
                Some(r.span.clone()),
                format!("`{}.{}`: {}", r.address, refusal.attribute, refusal.message),
                "in this block",
                Some(refusal.hint),
            )),
        }
    }

    /// `r`'s change from its record, or from its live values when it changed outside forge,
    /// with the reason when drift caused it.
    fn change(&self, r: &crate::stack::Resource, kind: &dyn Kind, prior: Option<&ResourceRecord>, after: &Value) -> Option<Change> {
        let live = prior.and_then(|p| {
            Some(ResourceRecord {
                config: self.drift.live_config(p, self.registry)?,
                ..p.clone()
            })
        });
        let mut change = diff::classify(r, kind, live.as_ref().or(prior), after);
        if let Some(c) = change.as_mut() {
            if self.gone.contains(&r.address) {
                c.reason = Some("deleted outside forge".into());
            } else if live.is_some() {
                c.reason = Some("changed outside forge: brought back to the stack's values".into());
            }
        }
        change
    }
}

/// Marks the replaces and deletes that destroy data (see [`Change::destroys_data`]).
fn mark_data_losses(changes: &mut [Change], state: &State, registry: &Registry) {
    // Only an object that was made (not an interrupted create) can hold data.
    for c in changes.iter_mut().filter(|c| matches!(c.action, Action::Replace | Action::Delete)) {
        let made = state.resources.get(&c.address).is_some_and(|r| r.status == Status::Created);
        c.destroys_data = made && registry.get(&c.kind).is_some_and(|k| k.holds_data());
    }
}

/// Deletes for recorded resources the stack no longer declares (all of them when destroying),
/// ordered so that dependents come first; and the reads among them, which are only forgotten.
fn deletes(stack: &Stack, state: &State, mode: Mode) -> (Vec<Change>, Vec<String>) {
    let declared: std::collections::HashSet<&str> = stack.resources.iter().map(|r| r.address.as_str()).collect();
    let (forgotten, doomed): (Vec<&ResourceRecord>, Vec<&ResourceRecord>) = state
        .resources
        .values()
        .filter(|r| mode == Mode::Destroy || !declared.contains(r.address.as_str()))
        .partition(|r| r.status == Status::Read);
    let forgets = forgotten.into_iter().map(|r| r.address.clone()).collect();
    // Dependents first: Kahn's algorithm over the recorded dependencies among the doomed (the
    // op graph enforces the order; this only makes the plan read in it). A cycle in a damaged
    // state falls back to address order.
    let index: HashMap<&str, usize> = doomed.iter().enumerate().map(|(i, r)| (r.address.as_str(), i)).collect();
    let mut dependents_left = vec![0usize; doomed.len()];
    for r in &doomed {
        for d in r.dependencies.iter().filter_map(|d| index.get(d.as_str())) {
            dependents_left[*d] += 1;
        }
    }
    let mut ready: std::collections::BTreeSet<(&str, usize)> = (0..doomed.len())
        .filter(|&i| dependents_left[i] == 0)
        .map(|i| (doomed[i].address.as_str(), i))
        .collect();
    let mut ordered = Vec::with_capacity(doomed.len());
    while let Some((_, i)) = ready.pop_first() {
        ordered.push((i, doomed[i]));
        for d in doomed[i].dependencies.iter().filter_map(|d| index.get(d.as_str())) {
            dependents_left[*d] -= 1;
            if dependents_left[*d] == 0 {
                ready.insert((doomed[*d].address.as_str(), *d));
            }
        }
    }
    let placed: std::collections::HashSet<usize> = ordered.iter().map(|(i, _)| *i).collect();
    ordered.extend((0..doomed.len()).filter(|i| !placed.contains(i)).map(|i| (i, doomed[i])));
    let changes = ordered
        .into_iter()
        .map(|(_, r)| Change {
            address: r.address.clone(),
            kind: r.kind.clone(),
            action: Action::Delete,
            before: Some(r.config.clone()),
            after: None,
            config: None,
            depends_on: vec![],
            prior_depends_on: r.dependencies.clone(),
            replace_because: vec![],
            reason: match r.status {
                Status::PendingCreate => Some("an interrupted create: whatever it made is deleted".into()),
                _ if mode == Mode::Apply => Some("no longer in the stack".into()),
                _ => None,
            },
            destroys_data: false,
            purchase: None,
        })
        .collect();
    (changes, forgets)
}
