//! The resources a state runs, or will run once a plan is applied, as their kinds meter them.

use super::{Meter, Sight};
use crate::plan::{Action, Plan};
use crate::provider::Registry;
use crate::state::{ResourceRecord, State, Status};
use serde_json::Value;
use std::collections::BTreeMap;

/// A metered resource: its address, its kind and its meter.
pub type Metered = (String, String, Meter);

/// One resource as the meters see it.
struct Seen<'a> {
    kind: &'a str,
    /// Its attributes as known.
    known: &'a Value,
    /// What the cloud returned, once made.
    outputs: Option<&'a Value>,
    /// The block's template, where references are still unresolved (a planned change).
    template: Option<&'a Value>,
    /// The cloud's id, once made.
    id: Option<&'a str>,
    /// Whether it costs the stack money: not an object the stack only reads (`existing`),
    /// which is seen only for what the stack's own resources take from it.
    metered: bool,
}

impl<'a> Seen<'a> {
    fn recorded(record: &'a ResourceRecord) -> Seen<'a> {
        Seen {
            kind: &record.kind,
            known: &record.config,
            outputs: Some(&record.outputs),
            template: None,
            id: record.id.as_deref(),
            metered: record.status != Status::Read,
        }
    }
}

/// What the state's resources cost: the objects forge made (not those it only reads, nor a
/// create that may not have reached the cloud).
pub fn of_state(state: &State, registry: &Registry, aws_region: Option<&str>) -> Vec<Metered> {
    meter(&recorded(state), registry, aws_region)
}

/// What the stack will run once `plan` is applied to `state`.
pub fn of_plan(plan: &Plan, state: &State, registry: &Registry, aws_region: Option<&str>) -> Vec<Metered> {
    let mut view = recorded(state);
    for read in &plan.reads {
        view.insert(&read.address, Seen::recorded(read));
    }
    for change in &plan.changes {
        match (change.action, &change.after) {
            (Action::Delete, _) | (_, None) => {
                view.remove(change.address.as_str());
            }
            (_, Some(after)) => {
                let record = state.resources.get(&change.address).filter(|_| change.action == Action::Update);
                let seen = Seen {
                    kind: &change.kind,
                    known: after,
                    outputs: record.map(|r| &r.outputs),
                    template: change.config.as_ref(),
                    id: record.and_then(|r| r.id.as_deref()),
                    metered: true,
                };
                view.insert(&change.address, seen);
            }
        }
    }
    meter(&view, registry, aws_region)
}

fn recorded(state: &State) -> BTreeMap<&str, Seen<'_>> {
    state
        .resources
        .values()
        .filter(|r| r.status != Status::PendingCreate)
        .map(|r| (r.address.as_str(), Seen::recorded(r)))
        .collect()
}

/// The meters of the view's resources that cost the stack money; a kind that buys up front
/// (a Capacity Block) is the plan's purchase, not an hourly cost.
fn meter(view: &BTreeMap<&str, Seen>, registry: &Registry, aws_region: Option<&str>) -> Vec<Metered> {
    view.iter()
        .filter(|(_, seen)| seen.metered)
        .filter_map(|(address, seen)| {
            let kind = registry.get(seen.kind).filter(|k| !k.paid_for())?;
            let follow = |key: &str, attribute: &str| followed(view, seen, key, attribute);
            let sight = Sight {
                config: seen.known,
                outputs: seen.outputs,
                aws_region,
                follow: &follow,
            };
            Some(((*address).to_owned(), seen.kind.to_owned(), kind.meter(&sight)?))
        })
        .collect()
}

/// `attribute` of the resource `seen`'s `key` names — by a `${…}` reference in its block, or by
/// the id it holds — as known, else as its block writes it (a reference not resolved yet).
fn followed(view: &BTreeMap<&str, Seen>, seen: &Seen, key: &str, attribute: &str) -> Option<Value> {
    let known = |v: Option<&Value>| v.filter(|v| !v.is_null()).cloned();
    let raw = known(seen.template.and_then(|t| t.get(key))).or_else(|| known(seen.known.get(key)))?;
    let target = match crate::template::references(&raw).ok().and_then(|refs| refs.into_iter().next()) {
        Some(reference) => reference.resolve(|address| view.get(address)).map(|(_, target, _)| target)?,
        None => {
            let id = raw.as_str()?;
            view.values().find(|other| other.id == Some(id))?
        }
    };
    known(target.known.get(attribute)).or_else(|| known(target.template.and_then(|t| t.get(attribute))))
}
