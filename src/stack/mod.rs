//! ① The stack file: TOML → a validated [`Stack`]. Reads the file and nothing else.
//!
//! Loading checks every section, key, type, name and reference against the kinds and
//! components forge knows, substitutes `${var.…}`, expands components into resources and
//! inlines references to component outputs, so that what leaves this module is a flat list of
//! resources whose templates refer only to other resources.

pub mod diagnostic;
mod load;

pub use diagnostic::{SourceFile, StackError};
pub use load::{LoadError, Parsed, load, load_str, parse, parse_str};

use crate::provider::settings::Providers;
use crate::state::Backend;
use serde_json::Value;

use std::collections::BTreeMap;
use std::ops::Range;

/// A validated stack: what `forge` builds.
#[derive(Debug, Clone)]
pub struct Stack {
    /// `[stack] name`: names the state and tags every resource.
    pub name: String,
    /// `[stack] description`.
    pub description: Option<String>,
    /// The file it came from, for errors that point into it.
    pub source: SourceFile,
    /// Provider settings (`[aws]`, `[gcp]`).
    pub providers: Providers,
    /// Where the state lives (`[state]`).
    pub state: Backend,
    /// `[outputs]`: templates evaluated against the state after `up`.
    pub outputs: BTreeMap<String, Value>,
    /// Every resource, components expanded, in file order.
    pub resources: Vec<Resource>,
    /// Each component's outputs by its address (`fsx.data`): templates over its resources.
    pub component_outputs: BTreeMap<String, serde_json::Map<String, Value>>,
    /// What `up` checks at the end before it calls the clusters ready: the components'
    /// readiness checks, templates over their resources (see `provider::k8s::ready`).
    pub readiness: Vec<crate::readiness::Check>,
    /// The sha256 of each bundle its components apply without a pinned digest, by URL: the
    /// state records them on the first apply, and a later plan refuses a bundle that changed.
    pub bundles: BTreeMap<String, String>,
    /// `[[import]]`: objects to take over as blocks' own on the next `up`.
    pub imports: Vec<Import>,
}

/// One `[[import]]`: `to = "aws_vpc.main"`, `id = "vpc-…"` — `forge import` as data, which
/// `plan` shows and `up` performs, and which is done once the state records the object there.
#[derive(Debug, Clone)]
pub struct Import {
    /// The block's address.
    pub to: String,
    /// The object's id.
    pub id: String,
    /// Where the entry is written.
    pub span: Range<usize>,
}

/// One resource the stack declares.
#[derive(Debug, Clone)]
pub struct Resource {
    /// `null.a`, or `<component>.<name>.<local>` for a component's resources.
    pub address: String,
    /// The kind's name (`null`).
    pub kind: String,
    /// The attributes, as a template whose references name other resources.
    pub config: Value,
    /// Addresses this resource must follow: its references and `depends_on`, sorted, unique.
    pub depends_on: Vec<String>,
    /// `ignore_changes`: attribute paths (`tags.team`) whose live changes drift leaves out
    /// (a component's apply to each resource it makes).
    pub ignore_changes: Vec<String>,
    /// The block header (or the component's) in the file.
    pub span: Range<usize>,
    /// `existing = …`: the block reads this object and forge never changes it; its config is
    /// not used (at most the provider's default tags), its values are what the read finds.
    pub existing: Option<Existing>,
}

/// Why what `existing = …` says cannot name an object when the stack loads.
#[derive(Debug, Clone, PartialEq)]
pub enum Unnamed {
    /// An empty string.
    Empty,
    /// A reference to another block (as written), known only once that block is applied.
    Reference(String),
}

/// What `existing = …` says (its variables substituted), checked for what every `existing`
/// needs — on a resource block or a component block alike: known when the stack loads, since
/// forge reads the object when it plans, and not empty.
pub fn existing_literal(written: &Value) -> Result<Value, Unnamed> {
    let literal = crate::template::evaluate(written, &mut |_| Err(String::new())).map_err(|e| Unnamed::Reference(e.reference))?;
    match &literal {
        Value::String(id) if id.trim().is_empty() => Err(Unnamed::Empty),
        _ => Ok(literal),
    }
}

/// The object an `existing` block reads.
#[derive(Debug, Clone)]
pub struct Existing {
    /// How the block names it.
    pub selector: crate::provider::Selector,
    /// Where `existing` is written, for errors about what the read found.
    pub span: Range<usize>,
}
