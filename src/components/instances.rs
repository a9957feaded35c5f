//! What the components that launch EC2 nodes (`eks`, `slurm`) know of their instance types —
//! that each exists (else the nearest name), its EFA interfaces and its accelerators, from the
//! facts stage — and the EFA layout of a launch template's network interfaces, made from the
//! type's network cards as EC2 documents it ("EFA for accelerated instance types").

use super::ComponentError;
use crate::facts::{Facts, InstanceType, Lookup};
use serde_json::{Value, json};

/// What the facts say of a node group's instance types.
#[derive(Debug, Clone, Copy, Default)]
pub struct Types {
    /// The first known type's networking, processors and accelerators (`None`: no type was
    /// known).
    pub first: Option<InstanceType>,
    /// The fewest GPUs or Neuron devices any known type has (`None`: no type was known).
    pub accelerators: Option<u32>,
}

impl Types {
    /// The first known type's EFA interfaces at most (`None`: no type was known).
    pub fn efa_interfaces(&self) -> Option<u32> {
        self.first.map(|t| t.efa_interfaces)
    }
}

/// Looks `types` up; an unknown name is an error at `key`, with the nearest known name.
pub fn look_up(facts: &Facts, key: &str, types: &[&str]) -> Result<Types, ComponentError> {
    let mut found = Types::default();
    for t in types {
        match facts.instance_type(t) {
            Lookup::Known(info) => {
                found.first = found.first.or(Some(info));
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

/// Instance families sold only as UltraServers, from Capacity Blocks.
const ULTRASERVER_FAMILIES: &[&str] = &["p6e-gb200.", "p6e-gb300."];

/// Whether `instance_type` comes only as UltraServers (P6e-GB200: 9 or 18 instances sharing
/// one NVLink domain).
pub fn ultraserver(instance_type: &str) -> bool {
    ULTRASERVER_FAMILIES.iter().any(|f| instance_type.starts_with(f))
}

/// How a launch template lays out a type's EFA interfaces (`efa_layout`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// EC2's layout for accelerated types since 2025: the primary interface is ENA (it takes
    /// the node's one VPC address); EFA goes on `efa-only` interfaces, which take none.
    EfaOnly,
    /// The older layout, for AMIs that need it: an `efa` interface (each with an address) on
    /// every card, card 0 device 0 and the others device 1.
    Efa,
}

impl Style {
    /// The style `efa_layout` names (default `"efa-only"`).
    fn parse(value: Option<&str>, key: &str) -> Result<Style, ComponentError> {
        match value {
            None | Some("efa-only") => Ok(Style::EfaOnly),
            Some("efa") => Ok(Style::Efa),
            Some(other) => Err(ComponentError::at(
                key,
                format!("`efa_layout = \"{other}\"` is not an EFA layout"),
                "expected \"efa-only\" (EC2's current layout, the default) or \"efa\" (an `efa` interface on every card)",
            )),
        }
    }
}

/// One network interface of a launch template.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Nic {
    /// `NetworkCardIndex`.
    pub card: u32,
    /// `DeviceIndex`.
    pub device: u32,
    /// `interface` (ENA), `efa` (EFA and ENA, with an address) or `efa-only` (no address).
    pub kind: &'static str,
}

/// The network interfaces of a node of type `t` with EFA, laid out in `style`, from its facts:
/// the first `network_cards - efa_interfaces` cards take ENA only, a card that takes one
/// interface takes one.
/// - `EfaOnly`: on a type whose cards take one interface each on some cards (P6e-GB200), `efa`
///   on the others and `efa-only` on those; else the primary `interface` at card 0 device 0,
///   an `efa-only` at card 0 device 1 when card 0 takes EFA, and an `efa-only` at device 0 on
///   every further EFA card (p6-b300: card 0 ENA, cards 1–16 `efa-only`).
/// - `Efa`: `efa` on every card, card 0 device 0 and the others device 1; a type whose card 0
///   takes no EFA cannot have it.
pub fn efa_layout(name: &str, t: &InstanceType, style: Style) -> Result<Vec<Nic>, String> {
    let cards = t.network_cards.max(t.efa_interfaces);
    let ena_only = cards - t.efa_interfaces.min(cards);
    let single = |card: u32| card < 64 && t.single_interface_cards & (1 << card) != 0;
    let nic = |card, device, kind| Nic { card, device, kind };
    match style {
        Style::Efa if ena_only > 0 => Err(format!(
            "`efa_layout = \"efa\"` puts an EFA interface on network card 0, and card 0 of `{name}` takes ENA only"
        )),
        Style::Efa => Ok((0..cards).map(|card| nic(card, u32::from(card > 0), "efa")).collect()),
        Style::EfaOnly if t.single_interface_cards != 0 => Ok((0..cards)
            .map(|card| nic(card, 0, if single(card) { "efa-only" } else { "efa" }))
            .collect()),
        Style::EfaOnly => {
            let mut nics = vec![nic(0, 0, "interface")];
            if ena_only == 0 {
                nics.push(nic(0, 1, "efa-only"));
            }
            nics.extend((ena_only.max(1)..cards).map(|card| nic(card, 0, "efa-only")));
            Ok(nics)
        }
    }
}

/// The network interfaces of a node of `instance_type` (`looked` up) with EFA, in the layout
/// its `efa_layout` names as `written` ([`efa_layout`]); none without EFA. A layout the type
/// cannot take is an error at `key`.
pub fn nics(instance_type: &str, looked: &Types, efa: bool, written: Option<&str>, key: &str) -> Result<Vec<Nic>, ComponentError> {
    let style = Style::parse(written, key)?;
    match looked.first {
        Some(t) if efa => efa_layout(instance_type, &t, style).map_err(|e| {
            ComponentError::at(
                key,
                e,
                "leave `efa_layout` out: forge lays the interfaces out as EC2 documents for the type",
            )
        }),
        _ => Ok(Vec::new()),
    }
}

/// How many EFA devices a node with `nics` has.
pub fn efa_devices(nics: &[Nic]) -> u32 {
    nics.iter().filter(|n| n.kind != "interface").count().try_into().unwrap_or(u32::MAX)
}

/// How many VPC addresses `nics` take before any pod: one per interface but `efa-only`.
pub fn addresses(nics: &[Nic]) -> usize {
    nics.iter().filter(|n| n.kind != "efa-only").count()
}

/// The launch template's `network_interfaces`, each with `security_groups`.
pub fn interfaces(nics: &[Nic], security_groups: &Value) -> Vec<Value> {
    nics.iter()
        .map(|n| {
            json!({
                "network_card_index": n.card,
                "device_index": n.device,
                "interface_type": n.kind,
                "security_groups": security_groups,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::Facts;

    fn layout(name: &str, style: Style) -> Result<Vec<Nic>, String> {
        let Lookup::Known(t) = Facts::builtin().instance_type(name) else {
            panic!("{name} is in the table")
        };
        efa_layout(name, &t, style)
    }

    fn kinds(nics: &[Nic]) -> Vec<(u32, u32, &str)> {
        nics.iter().map(|n| (n.card, n.device, n.kind)).collect()
    }

    #[test]
    fn a_p5_has_an_ena_primary_and_32_efa_only_interfaces_taking_one_address() {
        let nics = layout("p5.48xlarge", Style::EfaOnly).unwrap();
        assert_eq!(nics.len(), 33);
        assert_eq!(kinds(&nics[..3]), [(0, 0, "interface"), (0, 1, "efa-only"), (1, 0, "efa-only")]);
        assert!(
            nics[2..]
                .iter()
                .enumerate()
                .all(|(i, n)| (n.card, n.device, n.kind) == (i as u32 + 1, 0, "efa-only"))
        );
        assert_eq!((efa_devices(&nics), addresses(&nics)), (32, 1));
        let old = layout("p5.48xlarge", Style::Efa).unwrap();
        assert_eq!(kinds(&old[..2]), [(0, 0, "efa"), (1, 1, "efa")]);
        assert_eq!((efa_devices(&old), addresses(&old)), (32, 32));
    }

    #[test]
    fn a_p6_b300_keeps_card_zero_ena_only() {
        let nics = layout("p6-b300.48xlarge", Style::EfaOnly).unwrap();
        assert_eq!(nics.len(), 17);
        assert_eq!(kinds(&nics[..2]), [(0, 0, "interface"), (1, 0, "efa-only")]);
        assert_eq!(
            nics[16],
            Nic {
                card: 16,
                device: 0,
                kind: "efa-only"
            }
        );
        assert_eq!(efa_devices(&nics), 16);
        assert!(
            layout("p6-b300.48xlarge", Style::Efa)
                .unwrap_err()
                .contains("card 0 of `p6-b300.48xlarge` takes ENA only")
        );
    }

    #[test]
    fn a_p6e_gb200_alternates_efa_and_efa_only() {
        let nics = layout("p6e-gb200.36xlarge", Style::EfaOnly).unwrap();
        assert_eq!(nics.len(), 17);
        assert!(
            nics.iter()
                .all(|n| n.device == 0 && n.kind == if n.card % 2 == 0 { "efa" } else { "efa-only" })
        );
        assert_eq!(efa_devices(&nics), 17);
    }

    #[test]
    fn the_other_new_types_follow_the_p5_rule() {
        for (name, efa) in [
            ("p5en.48xlarge", 16),
            ("p6-b200.48xlarge", 8),
            ("trn2.48xlarge", 16),
            ("p4d.24xlarge", 4),
        ] {
            let nics = layout(name, Style::EfaOnly).unwrap();
            assert_eq!(
                (nics.len() as u32, efa_devices(&nics), addresses(&nics)),
                (efa + 1, efa, 1),
                "{name}"
            );
        }
    }
}
