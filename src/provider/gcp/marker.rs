//! forge's mark on the Compute objects it makes. Networks, subnetworks, firewall rules and
//! routers take no labels, so the mark goes at the end of their `description`:
//! `[forge:stack=… forge:address=… forge:token=…]`, after the block's own description. Only an
//! object whose mark names this stack, address and create token is ever adopted ([`made_by`]);
//! a read reports the objects whose mark names this stack ([`observed`]).

use crate::provider::{Ctx, Observed, ProviderError};
use serde_json::Value;

/// The marker forge writes into a description: `[forge:stack=… forge:address=… forge:token=…]`.
fn marker(ctx: &Ctx, token: &str) -> String {
    format!("[forge:stack={} forge:address={} forge:token={token}]", ctx.stack, ctx.address)
}

/// The description an object is created with: the block's own, then forge's marker.
pub(super) fn marked_description(ctx: &Ctx, token: &str, own: Option<&str>) -> String {
    with_marker(own, &marker(ctx, token))
}

/// The description an update sends: the block's own, then the marker the live object carries.
pub(super) fn remarked_description(live: Option<&str>, own: Option<&str>) -> String {
    let live = live.unwrap_or_default();
    with_marker(own, live.rfind("[forge:stack=").map_or("", |start| &live[start..]))
}

fn with_marker(own: Option<&str>, marker: &str) -> String {
    match own.filter(|d| !d.is_empty()) {
        Some(own) => format!("{own} {marker}").trim_end().to_owned(),
        None => marker.to_owned(),
    }
}

/// A live description split into the block's own part and forge's marker fields, if marked.
pub(super) fn split_description(description: &str) -> (String, Option<std::collections::BTreeMap<String, String>>) {
    let Some(start) = description.rfind("[forge:stack=").filter(|_| description.ends_with(']')) else {
        return (description.to_owned(), None);
    };
    let fields = description[start + 1..description.len() - 1]
        .split(' ')
        .filter_map(|f| f.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    (description[..start].trim_end().to_owned(), Some(fields))
}

/// What a read reports of the listed object `id` with this `description`: the object, when it
/// is recorded (`ids`) or carries the mark of `stack`, with the address its mark names and the
/// `attributes` its kind reads of it (given the block's own part of the description).
pub(super) fn observed(
    stack: &str,
    ids: &[String],
    id: String,
    description: &str,
    attributes: impl FnOnce(&str) -> Value,
) -> Option<Observed> {
    let (own, mark) = split_description(description);
    let address = mark
        .filter(|m| m.get("forge:stack").map(String::as_str) == Some(stack))
        .map(|m| m.get("forge:address").cloned().unwrap_or_default());
    (ids.contains(&id) || address.is_some()).then(|| Observed {
        attributes: attributes(&own),
        id,
        address,
    })
}

/// Whether an object with this description was made by the create with `token` (forge's one
/// ownership check on Google Cloud: see [`crate::provider::made_by`]).
pub(super) fn made_by(ctx: &Ctx, token: &str, description: Option<&str>) -> bool {
    let (_, fields) = split_description(description.unwrap_or_default());
    fields.is_some_and(|f| crate::provider::made_by(ctx, token, |k| f.get(k).map(String::as_str)))
}

/// The stack and address of the forge mark a description carries, if any (`forge import`).
pub(super) fn mark_of(description: &str) -> Option<(String, String)> {
    let (_, fields) = split_description(description);
    let fields = fields?;
    Some((
        fields.get("forge:stack")?.clone(),
        fields.get("forge:address").cloned().unwrap_or_default(),
    ))
}

/// The error for a name taken by an object this resource did not create.
pub(super) fn name_taken(ctx: &Ctx, what: &str, name: &str) -> ProviderError {
    ProviderError::permanent(format!(
        "a {what} named `{name}` already exists and was not created by `{}` in stack `{}`; pick another name, or delete it if it is a leftover",
        ctx.address, ctx.stack
    ))
}

/// The list filter for the objects of `stack`: those whose description carries its marker.
pub(super) fn stack_filter(stack: &str) -> String {
    let escaped: String = stack
        .chars()
        .flat_map(|c| if c.is_ascii_alphanumeric() { vec![c] } else { vec!['\\', c] })
        .collect();
    format!("description eq '.*\\[forge:stack={escaped} .*'")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_marker_splits_from_the_description() {
        let (own, fields) = split_description("GPU network [forge:stack=nemo forge:address=gcp_vpc.main.network forge:token=t1]");
        assert_eq!(own, "GPU network");
        let fields = fields.unwrap();
        assert_eq!(fields["forge:stack"], "nemo");
        assert_eq!(fields["forge:address"], "gcp_vpc.main.network");
        assert_eq!(split_description("made by hand"), ("made by hand".to_owned(), None));
        assert_eq!(stack_filter("nemo-a3"), "description eq '.*\\[forge:stack=nemo\\-a3 .*'");
    }
}
