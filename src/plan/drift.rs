//! Drift: the live cloud against what forge last applied. One batched read per kind (by the
//! stack's tag or by id), kinds read concurrently, so the cost grows with the number of kinds,
//! not of resources. Only attributes a block declares are compared: what the cloud fills in by
//! itself never counts, nor what a kind cannot read. Where the presence of an attribute is
//! itself state (a fixed size against autoscaling), the kind says so and a side that leaves it
//! out counts as `null` (see [`crate::provider::Resource::presence`]). Reads only; `plan` and
//! `up` use the same reads to bring drifted resources back.

use crate::provider::{Cloud, Observed, ProviderError, Registry, RetryPolicy};
use crate::state::{ResourceRecord, State, Status};
use serde::Serialize;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;

/// A kind whose read failed.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
#[error("cannot read the live `{kind}` resources: {source}")]
#[diagnostic(help("check credentials and network, or plan from the state alone with `--refresh=false`"))]
pub struct ReadError {
    /// The kind.
    pub kind: String,
    /// The cloud's error.
    #[source]
    pub source: ProviderError,
}

/// One declared attribute whose live value differs from the applied one.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AttributeDrift {
    /// Its path, dot-separated (`tags.team`, `scaling.desired`).
    pub attribute: String,
    /// The value forge applied (`null`: the stack set none there).
    pub applied: Value,
    /// The live value (`null`: absent).
    pub live: Value,
    /// The path's segments (a tag key may hold dots).
    #[serde(skip)]
    pub path: Vec<String>,
}

/// A recorded resource someone changed outside forge.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Changed {
    /// Its address.
    pub address: String,
    /// Its kind.
    pub kind: String,
    /// The cloud's id.
    pub id: String,
    /// What differs, attribute by attribute.
    pub attributes: Vec<AttributeDrift>,
}

/// A recorded resource that no longer exists.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Deleted {
    /// Its address.
    pub address: String,
    /// Its kind.
    pub kind: String,
    /// The id it had.
    pub id: String,
}

/// An object tagged with this stack that the state does not know: an orphan, or a copy.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Unmanaged {
    /// Its kind.
    pub kind: String,
    /// The cloud's id.
    pub id: String,
    /// Its `forge:address` tag.
    pub tagged_address: String,
}

/// Where a recorded object is in a life the cloud runs by itself — a Capacity Block
/// `scheduled`, `active`, then `expired`; a future reservation approved, then fulfilled — as
/// its kind's read reports it under [`LIFE`]: said in plans and drift reports, never drift.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Life {
    /// Its address.
    pub address: String,
    /// Its kind.
    pub kind: String,
    /// The cloud's id.
    pub id: String,
    /// Its state and what it means, as the kind words it (`scheduled: starts …`).
    pub state: String,
}

/// The key of a read's attributes under which a kind reports an object's [`Life`].
pub const LIFE: &str = "life";

/// What the reads found.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Drift {
    /// Class 1: changed outside forge.
    pub changed: Vec<Changed>,
    /// Class 2: deleted outside forge.
    pub deleted: Vec<Deleted>,
    /// Class 3: unmanaged.
    pub unmanaged: Vec<Unmanaged>,
    /// Differences that ignore rules silenced.
    pub ignored: usize,
    /// Kinds read.
    pub kinds_read: usize,
    /// Resources compared.
    pub resources_read: usize,
    /// Where the objects with a life of their own stand (not drift).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub lives: Vec<Life>,
    /// Objects the stack reads (`existing = …`) whose attributes that the stack refers to
    /// changed since the last apply read them: the next `up` gives their new values to what
    /// uses them, and never changes the objects.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub read_changed: Vec<Changed>,
    /// Objects the stack reads that the last apply recorded and nothing matches now.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub read_gone: Vec<Deleted>,
    /// The one object each `existing` block matched, as read now (what the plan refers to).
    #[serde(skip)]
    pub found: BTreeMap<String, crate::provider::Found>,
}

impl Drift {
    /// True when nothing drifted.
    pub fn is_empty(&self) -> bool {
        self.changed.is_empty()
            && self.deleted.is_empty()
            && self.unmanaged.is_empty()
            && self.read_changed.is_empty()
            && self.read_gone.is_empty()
    }

    /// Addresses deleted outside forge.
    pub fn gone(&self) -> BTreeSet<String> {
        self.deleted.iter().map(|d| d.address.clone()).collect()
    }

    /// The applied config of a changed resource with its drifted attributes set to their live
    /// values: the `before` of the update that brings it back.
    pub fn live_config(&self, record: &ResourceRecord, registry: &Registry) -> Option<Value> {
        let changed = self.changed.iter().find(|c| c.address == record.address)?;
        let kind = registry.get(&record.kind)?;
        let id = record.id.as_deref().unwrap_or_default();
        let comparable = kind.comparable(id, &record.config);
        let mut live = record.config.clone();
        for attribute in &changed.attributes {
            let top = &attribute.path[0];
            if live.get(top) == record.config.get(top) {
                // First drift in this attribute: start from its comparable form.
                live[top] = comparable.get(top).cloned().unwrap_or(Value::Null);
            }
            set_path(&mut live, &attribute.path, &attribute.live);
        }
        Some(live)
    }
}

/// Which differences to leave out: per address, attribute paths (`tags.team`), or `""` for
/// the whole resource.
#[derive(Debug, Clone, Default)]
pub struct IgnoreRules {
    by_address: BTreeMap<String, Vec<String>>,
}

impl IgnoreRules {
    /// The stack's `ignore_changes`, block by block.
    pub fn of_stack(stack: &crate::stack::Stack) -> Self {
        let mut rules = IgnoreRules::default();
        for r in &stack.resources {
            for path in &r.ignore_changes {
                rules.add(&r.address, path);
            }
        }
        rules
    }

    /// Adds `path` (empty: everything) for `address`.
    pub fn add(&mut self, address: &str, path: &str) {
        self.by_address.entry(address.to_owned()).or_default().push(path.to_owned());
    }

    /// Whether `attribute` of `address` is ignored (a rule covers it and everything under it).
    pub fn covers(&self, address: &str, attribute: &str) -> bool {
        self.by_address
            .get(address)
            .is_some_and(|rules| rules.iter().any(|r| r.is_empty() || covers(r, attribute)))
    }
}

/// Reads the live objects of every kind the state records or `kinds` names (at most
/// `parallelism` reads at once) and compares them with the state.
pub async fn observe(
    state: &State,
    kinds: &BTreeSet<String>,
    registry: &Registry,
    cloud: Arc<Cloud>,
    retry: &RetryPolicy,
    ignore: &IgnoreRules,
    parallelism: usize,
) -> Result<Drift, ReadError> {
    let mut ids: BTreeMap<&str, Vec<String>> = kinds.iter().map(|k| (k.as_str(), Vec::new())).collect();
    // What the stack only reads is looked up, not refreshed.
    for r in state.resources.values().filter(|r| r.status != Status::Read) {
        let entry = ids.entry(r.kind.as_str()).or_default();
        if let (Status::Created, Some(id)) = (r.status, &r.id) {
            entry.push(id.clone());
        }
    }
    let limit = Arc::new(tokio::sync::Semaphore::new(parallelism.max(1)));
    let mut reads = tokio::task::JoinSet::new();
    for (kind, ids) in ids {
        let Some(k) = registry.get(kind).cloned() else { continue };
        let (cloud, kind, retry, limit, stack) = (cloud.clone(), kind.to_owned(), retry.clone(), limit.clone(), state.stack.clone());
        reads.spawn(async move {
            let _permit = limit.acquire_owned().await.expect("the semaphore is never closed");
            let seen = retry.run(|| k.read(&cloud, &stack, &ids)).await;
            (kind, seen)
        });
    }
    let mut observed: BTreeMap<String, Vec<Observed>> = BTreeMap::new();
    while let Some(joined) = reads.join_next().await {
        let (kind, seen) = joined.expect("reads do not panic");
        let seen = seen.map_err(|source| ReadError {
            kind: kind.clone(),
            source,
        })?;
        observed.insert(kind, seen);
    }
    Ok(compare(state, registry, &observed, ignore))
}

/// Sorts what the reads saw into the three classes.
pub fn compare(state: &State, registry: &Registry, observed: &BTreeMap<String, Vec<Observed>>, ignore: &IgnoreRules) -> Drift {
    let mut drift = Drift {
        kinds_read: observed.len(),
        ..Drift::default()
    };
    for r in state.resources.values().filter(|r| r.status == Status::Created) {
        let (Some(id), Some(kind)) = (&r.id, registry.get(&r.kind)) else {
            continue;
        };
        if ignore.covers(&r.address, "") {
            continue;
        }
        drift.resources_read += 1;
        let Some(live) = observed.get(&r.kind).and_then(|seen| seen.iter().find(|o| &o.id == id)) else {
            drift.deleted.push(Deleted {
                address: r.address.clone(),
                kind: r.kind.clone(),
                id: id.clone(),
            });
            continue;
        };
        if let Some(state) = live.attributes.get(LIFE).and_then(Value::as_str) {
            drift.lives.push(Life {
                address: r.address.clone(),
                kind: r.kind.clone(),
                id: id.clone(),
                state: state.to_owned(),
            });
        }
        let defaults = kind.ignored_by_default(&r.config);
        let applied = kind.comparable(id, &r.config);
        let mut attributes = compared(&applied, &live.attributes, kind.presence());
        let before = attributes.len();
        attributes.retain(|a| !ignore.covers(&r.address, &a.attribute) && !defaults.iter().any(|d| covers(d, &a.attribute)));
        drift.ignored += before - attributes.len();
        if !attributes.is_empty() {
            drift.changed.push(Changed {
                address: r.address.clone(),
                kind: r.kind.clone(),
                id: id.clone(),
                attributes,
            });
        }
    }
    let recorded: HashSet<(&str, &str)> = state
        .resources
        .values()
        .filter_map(|r| Some((r.kind.as_str(), r.id.as_deref()?)))
        .collect();
    for (kind, seen) in observed {
        for o in seen {
            let Some(address) = &o.address else { continue };
            // Its own record; an object another resource made for itself (an EKS cluster's
            // security group carries the cluster's tags); or an interrupted create that the next
            // `up` adopts.
            let known = recorded.contains(&(kind.as_str(), o.id.as_str()))
                || state
                    .resources
                    .get(address)
                    .is_some_and(|r| &r.kind != kind || r.status == Status::PendingCreate);
            if !known && !ignore.covers(address, "") {
                drift.unmanaged.push(Unmanaged {
                    kind: kind.clone(),
                    id: o.id.clone(),
                    tagged_address: address.clone(),
                });
            }
        }
    }
    drift
}

/// The differences between the applied attributes (in the kind's comparable form) and the live
/// ones: an attribute is compared when the stack sets it and the read reports it, and an
/// attribute of `presence` also when only one side has it (the other's is `null`): set but not
/// reported is gone from the cloud, reported but not set is the cloud's other mode.
fn compared(applied: &Value, live: &Value, presence: &[&str]) -> Vec<AttributeDrift> {
    let empty = serde_json::Map::new();
    let (applied, live) = (applied.as_object().unwrap_or(&empty), live.as_object().unwrap_or(&empty));
    let unset = presence.iter().copied().filter(|name| !applied.contains_key(*name));
    let mut out = Vec::new();
    for name in applied.keys().map(String::as_str).chain(unset) {
        let (set, seen) = (applied.get(name), live.get(name));
        if (set.is_some() && seen.is_some()) || presence.contains(&name) {
            let none = Value::Null;
            differences(vec![name.to_owned()], set.unwrap_or(&none), seen.unwrap_or(&none), &mut out);
        }
    }
    out
}

/// Whether the rule path `rule` covers `attribute`: the same path, or one under it.
fn covers(rule: &str, attribute: &str) -> bool {
    attribute == rule || attribute.strip_prefix(rule).is_some_and(|rest| rest.starts_with('.'))
}

/// Appends the differences between an applied value and the live one: tables key by key (only
/// the keys the stack set), lists of tables of the same length item by item (so what a server
/// fills into each item — a container's defaults — never counts), anything else as a whole.
fn differences(path: Vec<String>, applied: &Value, live: &Value, out: &mut Vec<AttributeDrift>) {
    match (applied, live) {
        (Value::Object(applied), _) => {
            let empty = serde_json::Map::new();
            let live = live.as_object().unwrap_or(&empty);
            for (key, value) in applied {
                let mut inner = path.clone();
                inner.push(key.clone());
                differences(inner, value, live.get(key).unwrap_or(&Value::Null), out);
            }
        }
        (Value::Array(applied), Value::Array(items)) if applied.len() == items.len() && applied.iter().all(Value::is_object) => {
            for (i, (value, now)) in applied.iter().zip(items).enumerate() {
                let mut inner = path.clone();
                inner.push(i.to_string());
                differences(inner, value, now, out);
            }
        }
        _ if applied != live => out.push(AttributeDrift {
            attribute: path.join("."),
            applied: applied.clone(),
            live: live.clone(),
            path,
        }),
        _ => {}
    }
}

/// Sets `path` in `value` (tables made on the way; `null` removes the key).
fn set_path(value: &mut Value, path: &[String], to: &Value) {
    let (last, parents) = path.split_last().expect("paths are never empty");
    let mut cur = value;
    for segment in parents {
        // An item of a list (drift compares lists of tables item by item).
        if let Some(i) = segment
            .parse::<usize>()
            .ok()
            .filter(|i| cur.as_array().is_some_and(|a| *i < a.len()))
        {
            cur = &mut cur[i];
            continue;
        }
        if !cur.get(segment).is_some_and(|v| v.is_object() || v.is_array()) {
            cur[segment.as_str()] = Value::Object(Default::default());
        }
        cur = &mut cur[segment.as_str()];
    }
    if let Some(table) = cur.as_object_mut() {
        if to.is_null() {
            table.remove(last);
        } else {
            table.insert(last.clone(), to.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn lists_of_tables_compare_item_by_item() {
        let applied = json!({ "containers": [{ "name": "plugin", "image": "a:1" }] });
        let defaulted = json!({ "containers": [{ "name": "plugin", "image": "a:1", "imagePullPolicy": "IfNotPresent" }] });
        let mut out = Vec::new();
        differences(vec!["spec".into()], &applied, &defaulted, &mut out);
        assert!(out.is_empty(), "what the server fills in is no drift: {out:?}");
        let changed = json!({ "containers": [{ "name": "plugin", "image": "a:2" }] });
        differences(vec!["spec".into()], &applied, &changed, &mut out);
        assert_eq!(out[0].attribute, "spec.containers.0.image");
        let mut live = applied.clone();
        set_path(&mut live, &out[0].path[1..], &out[0].live);
        assert_eq!(live, changed, "the live value lands in the list's item");
        let mut more = Vec::new();
        differences(vec!["spec".into()], &applied, &json!({ "containers": [] }), &mut more);
        assert_eq!(more[0].attribute, "spec.containers", "another length: the list as a whole");
    }

    #[test]
    fn only_declared_keys_of_tables_compare() {
        let mut out = Vec::new();
        differences(
            vec!["tags".into()],
            &json!({"team": "ml", "cost": "gpu"}),
            &json!({"team": "ops", "cost": "gpu", "aws:created": "x"}),
            &mut out,
        );
        assert_eq!(out.len(), 1);
        assert_eq!(
            (out[0].attribute.as_str(), &out[0].applied, &out[0].live),
            ("tags.team", &json!("ml"), &json!("ops"))
        );
        let mut none = Vec::new();
        differences(vec!["labels".into()], &json!({}), &Value::Null, &mut none);
        assert!(none.is_empty());
    }

    #[test]
    fn presence_attributes_compare_when_one_side_leaves_them_out() {
        let presence = &["node_count", "min_node_count", "max_node_count"];
        let fixed = json!({ "name": "a3", "node_count": 2, "secret": "x" });
        let autoscaled = json!({ "name": "a3", "min_node_count": 1, "max_node_count": 5 });
        let found = |applied: &Value, live: &Value| -> Vec<(String, Value, Value)> {
            compared(applied, live, presence)
                .into_iter()
                .map(|d| (d.attribute, d.applied, d.live))
                .collect()
        };
        assert_eq!(
            found(&fixed, &autoscaled),
            [
                ("node_count".to_owned(), json!(2), Value::Null),
                ("min_node_count".to_owned(), Value::Null, json!(1)),
                ("max_node_count".to_owned(), Value::Null, json!(5)),
            ],
            "a fixed size switched to autoscaling"
        );
        assert_eq!(found(&autoscaled, &json!({ "name": "a3", "node_count": 3 }))[0].0, "min_node_count");
        assert!(
            found(&fixed, &json!({ "name": "a3", "node_count": 2 })).is_empty(),
            "`secret` is not read: no drift"
        );
        assert!(
            compared(&fixed, &json!({ "name": "a3" }), &[]).is_empty(),
            "without presence, only both sides compare"
        );
    }

    #[test]
    fn ignore_rules_cover_paths_and_what_is_under_them() {
        let mut rules = IgnoreRules::default();
        rules.add("aws_vpc.main", "tags.team");
        rules.add("aws_subnet.a", "");
        assert!(rules.covers("aws_vpc.main", "tags.team"));
        assert!(rules.covers("aws_vpc.main", "tags.team.x"));
        assert!(!rules.covers("aws_vpc.main", "tags.teams"));
        assert!(!rules.covers("aws_vpc.main", "cidr_block"));
        assert!(rules.covers("aws_subnet.a", "cidr_block"));
    }

    #[test]
    fn set_path_makes_and_removes_keys() {
        let mut v = json!({"tags": {"team": "ml"}});
        set_path(&mut v, &["tags".into(), "team".into()], &json!("ops"));
        set_path(&mut v, &["tags".into(), "gone".into()], &Value::Null);
        set_path(&mut v, &["scaling".into(), "desired".into()], &json!(4));
        assert_eq!(v, json!({"tags": {"team": "ops"}, "scaling": {"desired": 4}}));
    }
}
