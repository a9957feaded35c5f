//! Components: one block that expands into several resources. A component is one function
//! from its config to resources and outputs; addresses of what it makes sit under its own.
//! The stack loader expands them; the ones built into forge are listed here, one file each.

#[cfg(feature = "aws")]
pub mod eks;
pub mod instance_types;
pub mod null_layers;
#[cfg(feature = "aws")]
pub mod vpc;

pub use instance_types::Facts;

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

/// What a component's expansion sees.
pub struct Input<'a> {
    /// The component's own address (`eks.train`).
    pub address: &'a str,
    /// Its attributes, with variables substituted.
    pub config: &'a Map<String, Value>,
    /// The stack's `[aws]` / `[gcp]` settings.
    pub providers: &'a BTreeMap<String, Value>,
    /// The other component blocks of the stack, by address, as written (so `eks` can check a
    /// zone against the `vpc` it names).
    pub components: &'a BTreeMap<String, Map<String, Value>>,
    /// What forge knows about instance types, from AWS or its built-in table.
    pub facts: &'a Facts,
}

/// A component's complaint about its config: what is wrong and, when one attribute is to
/// blame, its path in the block (`nodegroups.gpu.zone`), so the error points at it.
#[derive(Debug, Clone, PartialEq)]
pub struct ComponentError {
    /// The attribute's dotted path below the block, if one is to blame.
    pub key: Option<String>,
    /// What is wrong.
    pub message: String,
    /// How to fix it, when there is more to say than the message.
    pub hint: Option<String>,
}

impl ComponentError {
    /// An error about one attribute.
    pub fn at(key: impl Into<String>, message: impl Into<String>, hint: impl Into<String>) -> Self {
        ComponentError {
            key: Some(key.into()),
            message: message.into(),
            hint: Some(hint.into()),
        }
    }
}

impl From<String> for ComponentError {
    fn from(message: String) -> Self {
        ComponentError {
            key: None,
            message,
            hint: None,
        }
    }
}

impl From<&str> for ComponentError {
    fn from(message: &str) -> Self {
        message.to_owned().into()
    }
}

/// Expands one component block (see [`Component::expand`]).
pub type ExpandFn = fn(&Input) -> Result<Expansion, ComponentError>;

/// A component type.
pub struct Component {
    /// The block type (`vpc`, `eks`, `null_layers`).
    pub name: &'static str,
    /// The attributes its block accepts.
    pub schema: &'static [Field],
    /// Expands one block; an `Err` says what is wrong with its config.
    pub expand: ExpandFn,
}

/// Every component built into this binary.
pub fn builtin() -> &'static [Component] {
    &[
        null_layers::COMPONENT,
        #[cfg(feature = "aws")]
        vpc::COMPONENT,
        #[cfg(feature = "aws")]
        eks::COMPONENT,
    ]
}

/// The component for a block type.
pub fn find(name: &str) -> Option<&'static Component> {
    builtin().iter().find(|c| c.name == name)
}

/// Expands `config` with `expand` in an otherwise empty stack (for the components' unit tests).
#[cfg(test)]
pub(crate) fn expand_alone(
    expand: ExpandFn,
    address: &str,
    config: Value,
    providers: &BTreeMap<String, Value>,
) -> Result<Expansion, ComponentError> {
    let config = config.as_object().cloned().unwrap_or_default();
    expand(&Input {
        address,
        config: &config,
        providers,
        components: &BTreeMap::new(),
        facts: &Facts::builtin(),
    })
}
