//! The resources a state runs, or will run once a plan is applied, as their kinds meter them.

use super::{Meter, Sight};
use crate::plan::{Action, Plan};
use crate::provider::Registry;
use crate::state::{State, Status};
use serde_json::Value;
use std::collections::BTreeMap;

/// A metered resource: its address, its kind and its meter.
pub type Metered = (String, String, Meter);

/// One resource as the meters see it.
struct Seen<'a> {
    kind: &'a str,
    /// Its attributes as known.
    known: &'a Value,
    /// The block's template, where references are still unresolved (a planned create).
    template: Option<&'a Value>,
    /// The cloud's id, once made.
    id: Option<&'a str>,
}

/// What the state's resources cost (the objects forge made; not those it only reads).
pub fn of_state(state: &State, registry: &Registry, aws_region: Option<&str>) -> Vec<Metered> {
    meter(&recorded(state), registry, aws_region)
}

/// What the stack will run once `plan` is applied to `state`.
pub fn of_plan(plan: &Plan, state: &State, registry: &Registry, aws_region: Option<&str>) -> Vec<Metered> {
    let mut view = recorded(state);
    for change in &plan.changes {
        match (change.action, &change.after) {
            (Action::Delete, _) | (_, None) => {
                view.remove(change.address.as_str());
            }
            (_, Some(after)) => {
                let id = state.resources.get(&change.address).and_then(|r| r.id.as_deref());
                let seen = Seen {
                    kind: &change.kind,
                    known: after,
                    template: change.config.as_ref(),
                    id: id.filter(|_| change.action == Action::Update),
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
        .filter(|r| r.status != Status::Read)
        .map(|r| {
            let seen = Seen {
                kind: &r.kind,
                known: &r.config,
                template: None,
                id: r.id.as_deref(),
            };
            (r.address.as_str(), seen)
        })
        .collect()
}

fn meter(view: &BTreeMap<&str, Seen>, registry: &Registry, aws_region: Option<&str>) -> Vec<Metered> {
    view.iter()
        .filter(|(_, seen)| !matches!(registry.get(seen.kind).map(|k| k.paid_for()), Some(true)))
        .filter_map(|(address, seen)| {
            let kind = registry.get(seen.kind)?;
            let follow = |key: &str, attribute: &str| followed(view, seen, key, attribute);
            let sight = Sight {
                config: seen.known,
                aws_region,
                follow: &follow,
            };
            Some(((*address).to_owned(), seen.kind.to_owned(), kind.meter(&sight)?))
        })
        .collect()
}

/// `attribute` of the resource `seen`'s `key` names: by a `${…}` reference in its block, or by
/// the id it holds.
fn followed(view: &BTreeMap<&str, Seen>, seen: &Seen, key: &str, attribute: &str) -> Option<Value> {
    let raw = seen.template.and_then(|t| t.get(key)).or_else(|| seen.known.get(key))?;
    let target = match crate::template::references(raw).ok().and_then(|refs| refs.into_iter().next()) {
        Some(reference) => reference.resolve(|address| view.get(address)).map(|(_, target, _)| target)?,
        None => {
            let id = raw.as_str()?;
            view.values().find(|other| other.id == Some(id))?
        }
    };
    target.known.get(attribute).filter(|v| !v.is_null()).cloned()
}
