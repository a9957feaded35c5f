//! The objects the stack's `existing` blocks read and forge never changes: looked up once per
//! command (one look-up per block, all at once), fed to the plan as values known before any
//! apply, and compared with what the last apply read — in the attributes the stack refers to
//! only, so a shared VPC's other changes are nobody's drift.

use super::drift::{AttributeDrift, Changed, Deleted, Drift, IgnoreRules, ReadError};
use crate::provider::{Cloud, Found, Registry, RetryPolicy, Selector};
use crate::stack::{Stack, StackError};
use crate::state::{State, Status};
use crate::template;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// What the look-ups of one stack's `existing` blocks found, by address.
pub type Matches = BTreeMap<String, Vec<Found>>;

/// Looks up every `existing` block of `stack` (at most `parallelism` at once); a look-up that
/// fails is a [`ReadError`] naming its kind.
pub async fn look_up(
    stack: &Stack,
    registry: &Registry,
    cloud: Arc<Cloud>,
    retry: &RetryPolicy,
    parallelism: usize,
) -> Result<Matches, ReadError> {
    let limit = Arc::new(tokio::sync::Semaphore::new(parallelism.max(1)));
    let mut reads = tokio::task::JoinSet::new();
    for r in &stack.resources {
        let (Some(existing), Some(kind)) = (&r.existing, registry.get(&r.kind).cloned()) else {
            continue;
        };
        let (cloud, retry, limit) = (cloud.clone(), retry.clone(), limit.clone());
        let (address, kind_name, selector) = (r.address.clone(), r.kind.clone(), existing.selector.clone());
        reads.spawn(async move {
            let _permit = limit.acquire_owned().await.expect("the semaphore is never closed");
            let found = retry.run(|| kind.look_up(&cloud, &selector)).await;
            (address, kind_name, found)
        });
    }
    let mut matches = Matches::new();
    while let Some(joined) = reads.join_next().await {
        let (address, kind, found) = joined.expect("look-ups do not panic");
        matches.insert(address, found.map_err(|source| ReadError { kind, source })?);
    }
    Ok(matches)
}

/// Puts what the look-ups found into `drift`: each block's one object in [`Drift::found`], the
/// attributes the stack uses that changed since the last apply read them in
/// [`Drift::read_changed`], and — when `gone_is_drift` (`forge drift`) — an object the state
/// recorded that matches nothing any more in [`Drift::read_gone`]; what `ignore` covers is left
/// out. Anything else that is not exactly one object is an error at the block's `existing`:
/// nothing to read, or several.
pub fn settle(
    stack: &Stack,
    state: &State,
    matches: Matches,
    drift: &mut Drift,
    gone_is_drift: bool,
    ignore: &IgnoreRules,
) -> Result<(), StackError> {
    for r in &stack.resources {
        let Some(existing) = &r.existing else { continue };
        let recorded = state.resources.get(&r.address).filter(|p| p.status == Status::Read);
        let mut found: Vec<Found> = matches
            .get(&r.address)
            .into_iter()
            .flatten()
            .filter(|f| carries(f, &existing.selector))
            .map(|f| Found {
                id: f.id.clone(),
                outputs: without_nulls(&f.outputs),
                attributes: without_nulls(&f.attributes),
            })
            .collect();
        match (found.len(), recorded) {
            (1, _) => {}
            (0, Some(_)) if gone_is_drift && ignore.covers(&r.address, "") => continue,
            (0, Some(record)) if gone_is_drift => {
                drift.read_gone.push(Deleted {
                    address: r.address.clone(),
                    kind: r.kind.clone(),
                    id: record.id.clone().unwrap_or_default(),
                });
                continue;
            }
            (0, _) => {
                return Err(stack.source.error(
                    Some(existing.span.clone()),
                    format!("`{}`: no `{}` matches {}", r.address, r.kind, existing.selector),
                    "matches nothing",
                    Some(match &existing.selector {
                        Selector::Id(_) => "check the id or name, and that the stack's provider settings (`[aws]`, `[gcp]`) point at the account, project and region that hold it".into(),
                        Selector::Tags { .. } | Selector::Where(_) => "check the names and values (they are case-sensitive), and that the stack's provider settings point at the account, project and region that hold the object".into(),
                    }),
                ));
            }
            (n, _) => {
                let ids: Vec<&str> = found.iter().map(|f| f.id.as_str()).collect();
                return Err(stack.source.error(
                    Some(existing.span.clone()),
                    format!(
                        "`{}`: {n} `{}` objects match {}: {}",
                        r.address,
                        r.kind,
                        existing.selector,
                        ids.join(", ")
                    ),
                    "matches several",
                    Some("an existing block reads exactly one object: name it by its id, or add a tag only it carries".into()),
                ));
            }
        }
        let now = found.remove(0);
        if let Some(record) = recorded {
            let mut attributes = changed_in_use(stack, &r.address, record, &now);
            attributes.retain(|a| !ignore.covers(&r.address, &a.attribute));
            if !attributes.is_empty() {
                drift.read_changed.push(Changed {
                    address: r.address.clone(),
                    kind: r.kind.clone(),
                    id: now.id.clone(),
                    attributes,
                });
            }
        }
        drift.found.insert(r.address.clone(), now);
    }
    Ok(())
}

/// Whether `found` has every tag or attribute value a selector names, value for value: a
/// cloud's filter may read `*` or `?` in a value as a wildcard, and match more than was written.
fn carries(found: &Found, selector: &Selector) -> bool {
    let has = |table: Option<&Value>, values: &BTreeMap<String, String>| {
        values
            .iter()
            .all(|(k, v)| table.and_then(|t| t.get(k)).and_then(Value::as_str) == Some(v.as_str()))
    };
    match selector {
        Selector::Id(_) => true,
        Selector::Tags { tags } => has(found.attributes.get("tags"), tags),
        Selector::Where(values) => has(Some(&found.attributes), values),
    }
}

/// `value` without the table entries that are `null` (what the object does not have): a
/// reference to one is then an error at plan time, not a value known only after apply.
fn without_nulls(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), without_nulls(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// The attributes of `address` that the stack refers to (`${aws_vpc.shared.cidr_block}` →
/// `cidr_block`) whose value `now` differs from the one `record` holds.
fn changed_in_use(stack: &Stack, address: &str, record: &crate::state::ResourceRecord, now: &Found) -> Vec<AttributeDrift> {
    let value = |outputs: &Value, attributes: &Value, path: &[String]| {
        super::attribute(address, outputs, attributes, path)
            .ok()
            .flatten()
            .unwrap_or(Value::Null)
    };
    used_paths(stack, address)
        .into_iter()
        .filter_map(|path| {
            let (applied, live) = (
                value(&record.outputs, &record.config, &path),
                value(&now.outputs, &now.attributes, &path),
            );
            (applied != live).then(|| AttributeDrift {
                attribute: path.join("."),
                applied,
                live,
                path,
            })
        })
        .collect()
}

/// The attribute paths of `address` that the stack's resources and outputs refer to.
fn used_paths(stack: &Stack, address: &str) -> BTreeSet<Vec<String>> {
    let templates = stack.resources.iter().map(|r| &r.config).chain(stack.outputs.values());
    templates
        .filter_map(|t| template::references(t).ok())
        .flatten()
        .filter_map(|reference| {
            let (_, (), path) = reference.resolve(|prefix| (prefix == address).then_some(()))?;
            (!path.is_empty()).then(|| path.to_vec())
        })
        .collect()
}
