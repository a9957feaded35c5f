//! Components: one block that expands into several resources. A component is one function
//! from its config to resources and outputs; addresses of what it makes sit under its own.
//! The stack loader expands them; the ones built into forge are listed here, one file each.

pub mod null_layers;
#[cfg(feature = "aws")]
pub mod vpc;

use crate::provider::Field;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// A resource a component makes.
#[derive(Debug, Clone, PartialEq)]
pub struct Part {
    /// The address below the component's (`l0.n3` in `null_layers.r.l0.n3`).
    pub local: String,
    /// The kind.
    pub kind: &'static str,
    /// Its attributes, as a template (references use full addresses).
    pub config: Value,
    /// Full addresses it must follow besides its references.
    pub depends_on: Vec<String>,
}

/// What a component expands to.
#[derive(Debug, Clone, PartialEq)]
pub struct Expansion {
    /// The resources.
    pub parts: Vec<Part>,
    /// Outputs readable as `${<component address>.<name>}`: templates over the parts.
    pub outputs: Map<String, Value>,
}

/// Expands one component block (see [`Component::expand`]).
pub type ExpandFn = fn(address: &str, config: &Map<String, Value>, providers: &BTreeMap<String, Value>) -> Result<Expansion, String>;

/// A component type.
pub struct Component {
    /// The block type (`vpc`, `eks`, `null_layers`).
    pub name: &'static str,
    /// The attributes its block accepts.
    pub schema: &'static [Field],
    /// Expands one block: `address` is the component's own (`null_layers.r`), `config` its
    /// attributes with variables substituted, `providers` the stack's `[aws]`/`[gcp]`
    /// settings. An `Err` is a message about the config.
    pub expand: ExpandFn,
}

/// Every component built into this binary.
pub fn builtin() -> &'static [Component] {
    &[
        null_layers::COMPONENT,
        #[cfg(feature = "aws")]
        vpc::COMPONENT,
    ]
}

/// The component for a block type.
pub fn find(name: &str) -> Option<&'static Component> {
    builtin().iter().find(|c| c.name == name)
}
