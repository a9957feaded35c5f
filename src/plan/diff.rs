//! The generic attribute diff, written once for every kind: which top-level attributes
//! changed, and whether any of them forces replacement.

use super::{Action, Change};
use crate::provider::Kind;
use crate::stack::Resource;
use crate::state::{ResourceRecord, Status};
use crate::template::is_known;
use serde_json::Value;
use std::collections::BTreeSet;

/// Attributes that steer how forge waits, not what the object is: a change of them is never a
/// change of the resource (raising a timeout must not replace a half-made cluster).
pub const SETTINGS: &[&str] = &["timeouts"];

/// Top-level attributes that differ between `before` and `after` (unknowns count as changed),
/// [`SETTINGS`] aside.
pub fn changed_attributes(before: &Value, after: &Value) -> BTreeSet<String> {
    let empty = serde_json::Map::new();
    let b = before.as_object().unwrap_or(&empty);
    let a = after.as_object().unwrap_or(&empty);
    b.keys()
        .chain(a.keys())
        .filter(|k| !SETTINGS.contains(&k.as_str()))
        .filter(|k| match (b.get(*k), a.get(*k)) {
            (Some(x), Some(y)) => x != y || !is_known(y),
            _ => true,
        })
        .cloned()
        .collect()
}

/// Decides what happens to a declared resource; `None` when nothing does.
pub fn classify(r: &Resource, kind: &dyn Kind, prior: Option<&ResourceRecord>, after: &Value) -> Option<Change> {
    let change = |action, before: Option<&Value>, replace_because: Vec<String>, reason: Option<&str>| Change {
        address: r.address.clone(),
        kind: r.kind.clone(),
        action,
        before: before.cloned(),
        after: Some(after.clone()),
        config: Some(r.config.clone()),
        depends_on: r.depends_on.clone(),
        prior_depends_on: prior.map(|p| p.dependencies.clone()).unwrap_or_default(),
        replace_because,
        reason: reason.map(str::to_owned),
        destroys_data: false,
        purchase: None,
    };
    let Some(prior) = prior else {
        return Some(change(Action::Create, None, vec![], None));
    };
    match prior.status {
        // What an interrupted purchase bought cannot be deleted: it is found by its token or
        // bought, never bought beside it.
        Status::PendingCreate if kind.paid_for() => {
            return Some(change(
                Action::Create,
                None,
                vec![],
                Some("resuming an interrupted purchase (same token): what it bought is found before anything is bought"),
            ));
        }
        Status::PendingCreate if !changed_attributes(&prior.config, after).is_empty() => {
            return Some(change(
                Action::Replace,
                Some(&prior.config),
                vec![],
                Some("an interrupted create used other attributes: whatever it made is deleted first"),
            ));
        }
        Status::PendingCreate => {
            return Some(change(
                Action::Create,
                None,
                vec![],
                Some("resuming an interrupted create (same idempotency token)"),
            ));
        }
        // Deleting a paid-for object only forgets it: it is still there.
        Status::PendingDelete if kind.paid_for() => {}
        Status::PendingDelete => {
            return Some(change(
                Action::Replace,
                Some(&prior.config),
                vec![],
                Some("an interrupted delete may have removed it"),
            ));
        }
        // The block read an existing object until now: forge makes its own, the other stays.
        Status::Read => {
            return Some(change(
                Action::Create,
                None,
                vec![],
                Some("the block read an existing object until now; forge makes its own and leaves that one"),
            ));
        }
        Status::Created => {}
    }
    if prior.kind != r.kind {
        return Some(change(Action::Replace, Some(&prior.config), vec![], Some("its kind changed")));
    }
    let mut changed = changed_attributes(&prior.config, after);
    changed.retain(|a| !kind.spec().create_only(a));
    if changed.is_empty() {
        return None;
    }
    let forcing: Vec<String> = changed
        .iter()
        .filter(|a| kind.forces_replacement(a, prior.config.get(a.as_str()), after.get(a.as_str())))
        .cloned()
        .collect();
    let action = if forcing.is_empty() { Action::Update } else { Action::Replace };
    Some(change(action, Some(&prior.config), forcing, None))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unknown_values_count_as_changes() {
        let changed = changed_attributes(
            &json!({"a": 1, "b": {"x": "1"}, "c": 3}),
            &json!({"a": 1, "b": {"x": null}, "d": 4}),
        );
        assert_eq!(changed.into_iter().collect::<Vec<_>>(), ["b", "c", "d"]);
    }
}
