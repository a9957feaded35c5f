//! What the components that launch EC2 nodes (`eks`, `slurm`) know of their instance types —
//! that each exists (else the nearest name), its EFA interfaces and its accelerators, from the
//! facts stage — and the EFA layout of a launch template's network interfaces.

use super::ComponentError;
use crate::facts::{Facts, Lookup};
use serde_json::{Value, json};

/// What the facts say of a node group's instance types.
#[derive(Debug, Clone, Copy, Default)]
pub struct Types {
    /// The first known type's EFA interfaces (`None`: no type was known).
    pub efa_interfaces: Option<u32>,
    /// The fewest GPUs or Neuron devices any known type has (`None`: no type was known).
    pub accelerators: Option<u32>,
}

/// Looks `types` up; an unknown name is an error at `key`, with the nearest known name.
pub fn look_up(facts: &Facts, key: &str, types: &[&str]) -> Result<Types, ComponentError> {
    let mut found = Types::default();
    for t in types {
        match facts.instance_type(t) {
            Lookup::Known(info) => {
                found.efa_interfaces = found.efa_interfaces.or(Some(info.efa_interfaces));
                found.accelerators = Some(found.accelerators.map_or(info.accelerators, |a| a.min(info.accelerators)));
            }
            Lookup::Unknown(near) => {
                let source = if facts.is_live() {
                    "AWS does not know it"
                } else {
                    "forge's built-in table does not know it"
                };
                return Err(ComponentError::at(
                    key,
                    format!("`{t}` is not an EC2 instance type ({source})"),
                    near.map_or("check the name, e.g. `p5.48xlarge`".to_owned(), |n| format!("did you mean `{n}`?")),
                ));
            }
            Lookup::Unchecked => {}
        }
    }
    Ok(found)
}

/// One EFA interface per network card — card 0 device 0 (the primary), every further card
/// device 1 — each with `security_groups`.
pub fn efa_interfaces(count: u32, security_groups: &Value) -> Vec<Value> {
    (0..count)
        .map(|card| {
            json!({
                "network_card_index": card,
                "device_index": if card == 0 { 0 } else { 1 },
                "interface_type": "efa",
                "security_groups": security_groups,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn efa_layout_is_card_zero_device_zero_then_device_one() {
        let nics = efa_interfaces(32, &json!(["sg-1"]));
        assert_eq!(nics.len(), 32);
        assert_eq!(
            (nics[0]["network_card_index"].clone(), nics[0]["device_index"].clone()),
            (json!(0), json!(0))
        );
        for (card, nic) in nics.iter().enumerate().skip(1) {
            assert_eq!(nic["network_card_index"], json!(card));
            assert_eq!(nic["device_index"], json!(1));
            assert_eq!(nic["interface_type"], json!("efa"));
        }
    }
}
