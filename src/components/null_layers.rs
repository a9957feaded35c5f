//! `null_layers`: a layered graph of `null` resources, to rehearse how long a stack of a given
//! shape takes to apply. Node `j` of layer `i` follows nodes `j` and `j+1` (wrapping) of layer
//! `i-1`, so the critical path is `layers × delay_ms`.

use super::{Component, ComponentError, Expansion, Input, Part};
use crate::schema::{Block, block};
use serde_json::{Map, Value, json};

/// The component's registration.
pub const COMPONENT: Component = Component {
    name: "null_layers",
    schema: NullLayers::FIELDS,
    expand,
};

block! {
    /// A `null_layers` block.
    struct NullLayers {
        layers: i64,
        width: i64,
        delay_ms: Option<i64>,
    }
}

const MAX_NODES: u64 = 100_000;

fn expand(input: &Input) -> Result<Expansion, ComponentError> {
    let block: NullLayers = input.block()?;
    Ok(layers(input.address, &block)?)
}

fn layers(address: &str, block: &NullLayers) -> Result<Expansion, String> {
    let number = |n: i64| u64::try_from(n).ok();
    let (Some(layers), Some(width)) = (number(block.layers), number(block.width)) else {
        return Err("`layers` and `width` must be whole numbers of at least 1".into());
    };
    if layers == 0 || width == 0 || layers.checked_mul(width).is_none_or(|n| n > MAX_NODES) {
        return Err(format!(
            "`layers × width` must be between 1 and {MAX_NODES}, got {layers} × {width}"
        ));
    }
    let delay = block.delay_ms.and_then(number).unwrap_or(0);
    let node = |i: u64, j: u64| format!("l{i}.n{j}");
    let mut parts = Vec::new();
    for i in 0..layers {
        for j in 0..width {
            let depends_on = if i == 0 {
                vec![]
            } else {
                let mut deps = vec![format!("{address}.{}", node(i - 1, j))];
                if width > 1 {
                    deps.push(format!("{address}.{}", node(i - 1, (j + 1) % width)));
                }
                deps
            };
            parts.push(Part {
                local: node(i, j),
                kind: "null",
                config: json!({ "triggers": { "layer": i, "node": j }, "delay_ms": delay }),
                depends_on,
                existing: None,
            });
        }
    }
    let last: Vec<Value> = (0..width)
        .map(|j| json!(format!("${{{address}.{}.id}}", node(layers - 1, j))))
        .collect();
    let mut outputs = Map::new();
    outputs.insert("last_ids".into(), Value::Array(last));
    Ok(Expansion {
        parts,
        outputs,
        ready: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::components::expand_alone;
    use crate::provider::settings::Providers;

    #[test]
    fn expands_layers_with_two_parents_each() {
        let out = expand_alone(expand, "null_layers.r", json!({"layers": 3, "width": 4}), &Providers::default()).unwrap();
        assert_eq!(out.parts.len(), 12);
        let last = &out.parts[11];
        assert_eq!(last.local, "l2.n3");
        assert_eq!(last.depends_on, ["null_layers.r.l1.n3", "null_layers.r.l1.n0"]);
        assert_eq!(out.outputs["last_ids"][0], json!("${null_layers.r.l2.n0.id}"));
        assert!(expand_alone(expand, "null_layers.r", json!({"layers": 0, "width": 4}), &Providers::default()).is_err());
    }
}
