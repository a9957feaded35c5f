//! `forge import FILE ADDRESS ID`: take an object that exists into the stack. It is read, held
//! to the block (an attribute that would force its replacement is refused), marked as forge's
//! own, recorded, and the plan that brings it to the block's values is shown.

use super::Session;
use crate::error::{CommandError, Exit};
use crate::plan::drift::{Drift, IgnoreRules};
use crate::plan::{Action, Mode, Plan};
use crate::provider::{Ctx, Inspected, Kind};
use crate::stack::Stack;
use crate::state::lock::LockMode;
use crate::state::{Event, ResourceRecord, State, Status};
use miette::Result;
use serde_json::Value;
use std::path::Path;
use std::sync::Arc;

/// What `forge import` is asked to do.
pub(super) struct Request<'a> {
    /// The stack file.
    pub file: &'a Path,
    /// The block's address.
    pub address: &'a str,
    /// The object's id.
    pub id: &'a str,
    /// Show what would happen; change nothing.
    pub dry_run: bool,
}

/// Runs `forge import`.
pub(super) async fn run(session: &Session, request: Request<'_>) -> Result<Exit> {
    let Request {
        file,
        address,
        id,
        dry_run,
    } = request;
    let (stack, graph) = session.load_checked(file, true).await?;
    session.announce(&stack.name, &stack.source.name, &stack.state);
    importable(session, &stack, address)?;
    let mode = if dry_run { LockMode::Shared } else { LockMode::Exclusive };
    let (store, _lock, loaded) = session.open_state(&stack.state, &stack.name, &stack.source.name, mode, "import")?;
    let rules = IgnoreRules::of_stack(&stack);
    let mut drift = session.observe(&loaded.state, &stack, &rules, false).await?;
    session.read_existing(&stack, &loaded.state, &mut drift, false, &rules).await?;
    let record = prepare(session, &stack, &referable(&loaded.state, &drift), address, id).await?;
    let mut imported = loaded.state.clone();
    imported.resources.insert(address.to_owned(), record.clone());
    let mut plan = crate::plan::plan(&stack, &graph, &imported, true, Mode::Apply, &session.registry, &drift)?;
    held_to_blocks(&mut plan, std::slice::from_ref(&record))?;
    if dry_run {
        session.printer.info(&format!(
            "Would mark {} `{id}` as forge's `{address}` and record it; then `forge up` would do this:",
            record.kind
        ));
        session.printer.plan(&crate::plan::render::render(&plan));
        return Ok(Exit::Ok);
    }
    // The mark first: an import cut short after it is done again (the object carries this
    // stack's mark at this address, which a second import accepts), never half-recorded.
    let kind = session.registry.get(&record.kind).expect("checked above");
    let token = record.token.as_deref().unwrap_or_default();
    kind.mark(&marking_ctx(&stack.name, address, session.cloud(&stack.providers)), id, token)
        .await
        .map_err(|e| {
            CommandError::new(
                format!("cannot mark `{id}` as forge's: {}", e.message),
                "nothing was recorded; run the import again",
            )
        })?;
    let mut state = loaded.state;
    store.record(&mut state, vec![Event::Put(record.clone())])?;
    store.compact(&state)?;
    session.printer.info(&format!(
        "Imported {} `{id}` as `{address}`. `forge up` then does this:",
        record.kind
    ));
    session.printer.plan(&crate::plan::render::render(&plan));
    Ok(Exit::Ok)
}

/// The context an import marks its object in.
fn marking_ctx(stack: &str, address: &str, cloud: Arc<crate::provider::Cloud>) -> Ctx {
    Ctx {
        stack: stack.to_owned(),
        address: address.to_owned(),
        status: Arc::new(|_: &str| {}),
        cloud,
        resumed: false,
        quoted: None,
    }
}

/// The record of the object `id` as the block `address` will hold it, read and checked: the
/// address and the object not recorded yet, the object there and not another stack's (nor
/// this one's at another address), the block's references recorded. It holds the object as
/// it is, in the attributes the block sets, with a fresh token to mark it with.
pub(super) async fn prepare(session: &Session, stack: &Stack, state: &State, address: &str, id: &str) -> Result<ResourceRecord> {
    let (resource, kind) = importable(session, stack, address)?;
    unrecorded(state, address, &resource.kind, id, &stack.source.name)?;
    let cloud = session.cloud(&stack.providers);
    let inspected = kind
        .inspect(&cloud, id)
        .await
        .map_err(|e| {
            CommandError::new(
                format!("cannot read `{id}`: {}", e.message),
                "check the id, and that the stack's `[aws]` or `[gcp]` settings point where it lives",
            )
        })?
        .ok_or_else(|| {
            CommandError::new(
                format!("there is no {} `{id}` where the stack's provider settings point", resource.kind),
                "check the id, the account or project, and the region",
            )
        })?;
    unowned(stack, address, id, &inspected)?;
    let desired = crate::template::evaluate(&resource.config, &mut |r| {
        let (target, record, path) = r
            .resolve(|a| state.resources.get(a))
            .ok_or_else(|| format!("`{}` is not recorded yet: import or create it first", r.path()))?;
        crate::plan::attribute(&target, &record.outputs, &record.config, path)
    })
    .map_err(|e| {
        CommandError::new(
            format!("cannot import into `{address}`: {}", e.message),
            "import the objects it refers to first, in the order of their references",
        )
    })?;
    Ok(ResourceRecord {
        address: address.to_owned(),
        kind: resource.kind.clone(),
        status: Status::Created,
        id: Some(id.to_owned()),
        token: Some(uuid::Uuid::new_v4().to_string()),
        config: readable(
            kind.as_ref(),
            &desired,
            as_it_is(&desired, &held_to(kind.as_ref(), &desired), &inspected.attributes, |config| {
                kind.comparable(id, config)
            }),
        ),
        outputs: inspected.outputs,
        dependencies: resource.depends_on.clone(),
    })
}

/// The stack's `[[import]]` entries not done yet, each read and checked as `forge import`
/// does (see [`prepare`]): one the state records at its address with its id is done; another
/// object there is an error at the entry.
pub(super) async fn pending(session: &Session, stack: &Stack, state: &State, drift: &Drift) -> Result<Vec<ResourceRecord>> {
    let mut records: Vec<ResourceRecord> = Vec::new();
    // References may name what the stack's `existing` blocks read, and the entries before.
    let mut known = referable(state, drift).into_owned();
    for import in &stack.imports {
        // An address the state records is done: imported, or replaced since.
        if state.resources.contains_key(&import.to) {
            continue;
        }
        let record = prepare(session, stack, &known, &import.to, &import.id).await?;
        known.resources.insert(record.address.clone(), record.clone());
        records.push(record);
    }
    Ok(records)
}

/// `state` with what the stack's `existing` blocks read (in `drift`) as read records: what a
/// block to import may refer to.
pub(super) fn referable<'s>(state: &'s State, drift: &Drift) -> std::borrow::Cow<'s, State> {
    if drift.found.is_empty() {
        return std::borrow::Cow::Borrowed(state);
    }
    let mut state = state.clone();
    for (address, found) in &drift.found {
        state.resources.entry(address.clone()).or_insert_with(|| ResourceRecord {
            address: address.clone(),
            kind: String::new(),
            status: Status::Read,
            id: Some(found.id.clone()),
            token: None,
            config: found.attributes.clone(),
            outputs: found.outputs.clone(),
            dependencies: Vec::new(),
        });
    }
    std::borrow::Cow::Owned(state)
}

/// `state` as it will be once the `imported` objects are recorded: what the plan starts from.
pub(super) fn with_imports<'s>(state: &'s State, imported: &[ResourceRecord]) -> std::borrow::Cow<'s, State> {
    if imported.is_empty() {
        return std::borrow::Cow::Borrowed(state);
    }
    let mut state = state.clone();
    for record in imported {
        state.resources.insert(record.address.clone(), record.clone());
    }
    std::borrow::Cow::Owned(state)
}

/// Refuses a plan that would replace one of the `imported` objects (showing block and object
/// side by side), and says of the others' changes that they bring them to their blocks.
pub(super) fn held_to_blocks(plan: &mut Plan, imported: &[ResourceRecord]) -> Result<()> {
    for record in imported {
        let Some(change) = plan.changes.iter_mut().find(|c| c.address == record.address) else {
            continue;
        };
        if change.action == Action::Replace {
            let shown = |side: &Option<Value>, key: &str, absent: &str| {
                side.as_ref()
                    .and_then(|v| v.get(key))
                    .map_or_else(|| absent.to_owned(), crate::plan::render::value)
            };
            let differences: Vec<String> = change
                .replace_because
                .iter()
                .map(|key| {
                    let block = shown(&change.after, key, "(left out: the kind's default)");
                    format!("  {key}: {block} -> {}", shown(&change.before, key, "(none)"))
                })
                .collect();
            return Err(CommandError::new(
                format!(
                    "`{}` is not what `{}` describes, and {} cannot change in place (block -> object):\n{}",
                    record.id.as_deref().unwrap_or_default(),
                    record.address,
                    change.replace_because.join(", "),
                    differences.join("\n")
                ),
                "make the block match the object, or import another object; nothing was changed",
            )
            .into());
        }
        change.reason = Some("imported: brought to the block's values".into());
    }
    Ok(())
}

/// The object as it is, in the block's terms: the object's values of the attributes the block
/// sets (a table, such as tags, only in the keys the block sets; `null` where the object has
/// none), and of those the block leaves to a default (`defaults`: the block with the kind's
/// defaults) where the object differs from it — so the plan goes from the object to the block,
/// defaults included. An attribute the kind does not read is taken as the block has it; where
/// the two differ only in how they are written (a rule list grouped or one permission per
/// rule: the same in the kind's `comparable` form; ids in another order), the block's.
fn as_it_is(desired: &Value, defaults: &Value, live: &Value, comparable: impl Fn(&Value) -> Value) -> Value {
    let Some(wanted) = desired.as_object() else {
        return desired.clone();
    };
    let mut as_is: serde_json::Map<String, Value> = wanted
        .iter()
        .map(|(key, wanted)| {
            let value = match (wanted, live.get(key)) {
                (Value::Object(keys), Some(Value::Object(have))) if key == "tags" => {
                    Value::Object(keys.keys().filter_map(|k| Some((k.clone(), have.get(k)?.clone()))).collect())
                }
                (_, Some(have)) => have.clone(),
                _ => wanted.clone(),
            };
            (key.clone(), value)
        })
        .collect();
    let (same, seen) = (comparable(desired), comparable(&Value::Object(as_is.clone())));
    for (key, value) in wanted {
        if same.get(key) == seen.get(key) || same_members(key, value, &as_is[key]) {
            as_is.insert(key.clone(), value.clone());
        }
    }
    // What the block leaves to a default and the object has otherwise: an update brings it
    // to the default, so the plan shows it.
    let left_out = defaults
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(key, _)| !wanted.contains_key(*key) && *key != "tags");
    for (key, default) in left_out {
        match live.get(key) {
            Some(have) if have != default && !same_members(key, default, have) => {
                as_is.insert(key.clone(), have.clone());
            }
            _ => {}
        }
    }
    Value::Object(as_is)
}

/// `recorded` with each `null` the kind cannot read (an attribute it holds as a value, which
/// the object lacks) taken as the block has it, or left out: a record the kind can always
/// parse.
fn readable(kind: &dyn Kind, desired: &Value, mut recorded: Value) -> Value {
    let nulls: Vec<String> = recorded
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(_, v)| v.is_null())
        .map(|(k, _)| k.clone())
        .collect();
    for key in nulls {
        if kind.accepts(&recorded) {
            break;
        }
        match desired.get(&key) {
            Some(wanted) => recorded[&key] = wanted.clone(),
            None => {
                recorded.as_object_mut().map(|r| r.remove(&key));
            }
        }
    }
    recorded
}

/// The block with the kind's defaults for what it leaves out ([`Kind::with_defaults`]), but
/// for the attributes whose live values an update keeps ([`Kind::kept_when_left_out`]).
fn held_to(kind: &dyn Kind, desired: &Value) -> Value {
    let mut defaults = kind.with_defaults(desired);
    if let Some(table) = defaults.as_object_mut() {
        for key in kind.kept_when_left_out().iter().filter(|k| desired.get(**k).is_none()) {
            table.remove(*key);
        }
    }
    defaults
}

/// Whether `key`, a list of ids or ARNs (`subnet_ids`, `managed_policy_arns`: what the clouds
/// keep unordered), holds the same ones in the block as on the object, in another order.
fn same_members(key: &str, block: &Value, object: &Value) -> bool {
    if !(key.ends_with("_ids") || key.ends_with("_arns")) {
        return false;
    }
    let ids = |v: &Value| -> Option<Vec<String>> {
        let mut ids: Vec<String> = v.as_array()?.iter().map(|i| i.as_str().map(str::to_owned)).collect::<Option<_>>()?;
        ids.sort_unstable();
        Some(ids)
    };
    ids(block).is_some_and(|b| Some(b) == ids(object))
}

/// The block at `address` and its kind, when forge can import into it.
fn importable<'s>(session: &Session, stack: &'s Stack, address: &str) -> Result<(&'s crate::stack::Resource, Arc<dyn Kind>)> {
    let Some(resource) = stack.resources.iter().find(|r| r.address == address) else {
        let known: Vec<&str> = stack.resources.iter().map(|r| r.address.as_str()).collect();
        return Err(CommandError::new(
            format!("the stack has no resource `{address}`"),
            crate::schema::suggestion(address, &known),
        )
        .into());
    };
    if resource.existing.is_some() {
        return Err(CommandError::new(
            format!("`{address}` reads an existing object (`existing`): forge never manages it"),
            "drop `existing` from the block to import the object into it",
        )
        .into());
    }
    let kind = session
        .registry
        .get(&resource.kind)
        .expect("kinds are checked when the stack loads")
        .clone();
    if !kind.importable() {
        let kinds: Vec<&str> = session
            .registry
            .names()
            .filter(|n| session.registry.get(n).is_some_and(|k| k.importable()))
            .collect();
        return Err(CommandError::new(
            format!("forge cannot import a `{}` yet", resource.kind),
            format!("the kinds it imports: {}", kinds.join(", ")),
        )
        .into());
    }
    Ok((resource, kind))
}

/// Refuses an address the state records, or an object it records under another address.
fn unrecorded(state: &State, address: &str, kind: &str, id: &str, file: &str) -> Result<()> {
    if let Some(record) = state.resources.get(address) {
        return Err(CommandError::new(
            format!(
                "`{address}` is recorded already ({})",
                record.id.as_deref().unwrap_or("an interrupted create")
            ),
            format!("to put another object there, `forge state rm {file} {address}` first"),
        )
        .into());
    }
    if let Some(other) = state.resources.values().find(|r| r.kind == kind && r.id.as_deref() == Some(id)) {
        return Err(CommandError::new(
            format!("`{id}` is recorded already, as `{}`", other.address),
            "one object, one block",
        )
        .into());
    }
    Ok(())
}

/// Refuses an object another stack marked, or this stack under another address.
fn unowned(stack: &Stack, address: &str, id: &str, inspected: &Inspected) -> Result<()> {
    match &inspected.mark {
        Some((owner, at)) if owner != &stack.name => Err(CommandError::new(
            format!("`{id}` belongs to the forge stack `{owner}` (as `{at}`): importing it here would make two stacks manage it"),
            "that stack must let go of it first (`forge state rm` there, then remove its forge:* tags or labels), or import another object",
        )
        .into()),
        Some((_, at)) if at != address => Err(CommandError::new(
            format!("`{id}` carries this stack's mark as `{at}`, not `{address}`"),
            format!("import it as `{at}`, or remove its forge:* tags or labels first"),
        )
        .into()),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn as_is(block: Value, defaults: Value, live: Value) -> Value {
        as_it_is(&block, &defaults, &live, Clone::clone)
    }

    #[test]
    fn the_object_is_recorded_in_the_blocks_terms() {
        // Set by the block: the object's value, `null` where it has none; tags in the block's keys.
        let recorded = as_is(
            json!({ "description": "x", "vpc_id": "vpc-1", "tags": { "a": "1" } }),
            json!({}),
            json!({ "description": null, "vpc_id": "vpc-2", "tags": { "a": "2", "b": "3" } }),
        );
        assert_eq!(recorded, json!({ "description": null, "vpc_id": "vpc-2", "tags": { "a": "2" } }));
        // Not read by the kind: the block's.
        assert_eq!(as_is(json!({ "role": "r" }), json!({}), json!({})), json!({ "role": "r" }));
    }

    #[test]
    fn what_the_block_leaves_out_is_held_to_its_default() {
        let block = json!({ "name": "c" });
        let defaults = json!({ "name": "c", "mode": "API_AND_CONFIG_MAP", "path": "/", "tags": {} });
        let live = json!({ "name": "c", "mode": "CONFIG_MAP", "path": "/", "tags": { "x": "1" } });
        // A default the object lacks is recorded as the object has it, so the plan changes it;
        // one it has, and tags, are not.
        assert_eq!(as_is(block, defaults, live), json!({ "name": "c", "mode": "CONFIG_MAP" }));
    }

    #[test]
    fn only_id_lists_match_in_another_order() {
        let recorded = as_is(
            json!({ "subnet_ids": ["s-1", "s-2"], "instance_types": ["p5.48xlarge", "p4d.24xlarge"] }),
            json!({}),
            json!({ "subnet_ids": ["s-2", "s-1"], "instance_types": ["p4d.24xlarge", "p5.48xlarge"] }),
        );
        assert_eq!(recorded["subnet_ids"], json!(["s-1", "s-2"]));
        assert_eq!(
            recorded["instance_types"],
            json!(["p4d.24xlarge", "p5.48xlarge"]),
            "order is On-Demand priority"
        );
    }
}
