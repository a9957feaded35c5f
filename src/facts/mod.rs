//! Cloud facts, a stage of their own: what a parsed stack needs to know from outside
//! ([`Needs`]) and what it was told ([`Facts`]). Two sorts:
//! - EC2 instance types: how many EFA interfaces a type takes, whether the name exists, and
//!   which zones offer it. They come from AWS (`DescribeInstanceTypes`,
//!   `DescribeInstanceTypeOfferings`) when credentials work, else from a built-in table.
//! - Kubernetes bundles: the YAML an upstream project publishes at a release URL (Kueue's
//!   `manifests.yaml`), fetched once per load, with the sha256 of its bytes.
//!
//! [`gather`] asks the clouds; this module holds what they said and the built-in table.

pub mod gather;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

/// The cloud facts a stack needs checked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Needs {
    /// EC2 instance types its components name.
    pub instance_types: Vec<String>,
    /// The URLs of the bundles its components apply.
    pub bundles: Vec<String>,
}

/// A bundle as fetched: its text and the sha256 of its bytes (lowercase hex).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bundle {
    /// The YAML documents.
    pub text: Arc<str>,
    /// The sha256 of the bytes, lowercase hex.
    pub sha256: String,
}

/// One instance type's networking, accelerators and processors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InstanceType {
    /// Its EFA interfaces at most (`EfaInfo.MaximumEfaInterfaces`; 0: no EFA), at most one
    /// per network card.
    pub efa_interfaces: u32,
    /// Its network cards (`MaximumNetworkCards`); the first `network_cards - efa_interfaces`
    /// take ENA only (p6-b300's card 0).
    pub network_cards: u32,
    /// The cards that take one network interface only (bit `c` for card `c`): P6e-GB200's odd
    /// cards, from `NetworkCards[].MaximumNetworkInterfaces`.
    pub single_interface_cards: u64,
    /// Its GPUs, or its Neuron devices (0: none).
    pub accelerators: u32,
    /// Whether its processors are arm64 (Graviton, Grace).
    pub arm64: bool,
}

impl InstanceType {
    /// A type without EFA or accelerators, on one network card.
    pub const PLAIN: InstanceType = InstanceType {
        efa_interfaces: 0,
        network_cards: 1,
        single_interface_cards: 0,
        accelerators: 0,
        arm64: false,
    };

    /// An x86 type with EFA on each of its `cards`, and `accelerators`.
    const fn efa(cards: u32, accelerators: u32) -> InstanceType {
        InstanceType {
            efa_interfaces: cards,
            network_cards: cards,
            accelerators,
            ..InstanceType::PLAIN
        }
    }
}

/// What forge knows about a type name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    /// The type exists, with this networking.
    Known(InstanceType),
    /// There is no such type; maybe the name meant is this one.
    Unknown(Option<String>),
    /// The built-in table does not know the family and AWS was not asked.
    Unchecked,
}

/// Network cards, EFA interfaces and accelerators (GPUs, Neuron devices) of the EFA types, as
/// `DescribeInstanceTypes` gives them (`MaximumNetworkCards`, `NetworkCards[]`,
/// `EfaInfo.MaximumEfaInterfaces`, `GpuInfo`, `NeuronInfo`; the VPC CNI's limits table; EC2's
/// "EFA for accelerated instance types"): the offline fallback. p6-b300's 17 cards take EFA on
/// 16 (card 0 is ENA only); P6e-GB200's odd cards take one interface each, and its Grace CPUs
/// are arm64.
const EFA_TYPES: &[(&str, InstanceType)] = &[
    ("p4d.24xlarge", InstanceType::efa(4, 8)),
    ("p4de.24xlarge", InstanceType::efa(4, 8)),
    ("p5.48xlarge", InstanceType::efa(32, 8)),
    ("p5e.48xlarge", InstanceType::efa(32, 8)),
    ("p5en.48xlarge", InstanceType::efa(16, 8)),
    ("p6-b200.48xlarge", InstanceType::efa(8, 8)),
    (
        "p6-b300.48xlarge",
        InstanceType {
            network_cards: 17,
            ..InstanceType::efa(16, 8)
        },
    ),
    (
        "p6e-gb200.36xlarge",
        InstanceType {
            single_interface_cards: 0b0_1010_1010_1010_1010,
            arm64: true,
            ..InstanceType::efa(17, 4)
        },
    ),
    ("trn1.32xlarge", InstanceType::efa(8, 16)),
    ("trn1n.32xlarge", InstanceType::efa(16, 16)),
    ("trn2.48xlarge", InstanceType::efa(16, 16)),
    ("trn2u.48xlarge", InstanceType::efa(16, 16)),
];

/// Families the built-in table knows to have no EFA at any size (system node groups).
const PLAIN_FAMILIES: &[&str] = &[
    "c5", "c5a", "c6a", "c6i", "c7a", "c7i", "m5", "m5a", "m6a", "m6i", "m7a", "m7i", "r5", "r5a", "r6a", "r6i", "r7a", "r7i", "t3", "t3a",
];

/// Sizes of the plain families.
const SIZES: &[&str] = &[
    "nano", "micro", "small", "medium", "large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge", "32xlarge",
    "48xlarge", "metal",
];

/// What AWS said about the types a stack named.
#[derive(Debug, Clone, Default)]
pub struct LiveFacts {
    /// The types that exist, by name (a name asked for and absent here does not exist).
    pub types: BTreeMap<String, InstanceType>,
    /// The zones offering each type.
    pub zones: BTreeMap<String, BTreeSet<String>>,
}

/// The facts one load of a stack uses; it remembers which types were asked about (see
/// [`Facts::probe`]).
#[derive(Debug, Default)]
pub struct Facts {
    live: Option<LiveFacts>,
    asked: Mutex<BTreeSet<String>>,
    bundles: BTreeMap<String, Bundle>,
    /// The bundles asked for, with the digest the stack pins for each, if any.
    wanted: Mutex<BTreeMap<String, Option<String>>>,
    /// Answers "unchecked" for names the built-in table does not know, so that an expansion
    /// goes on and asks about every type it names.
    probing: bool,
}

impl Facts {
    /// Facts from the built-in table only.
    pub fn builtin() -> Facts {
        Facts::default()
    }

    /// The built-in table, but a name it does not know is not an error: what learns every type
    /// a stack names before the cloud is asked about them.
    pub fn probe() -> Facts {
        Facts {
            probing: true,
            ..Facts::default()
        }
    }

    /// Facts from AWS.
    pub fn live(live: LiveFacts) -> Facts {
        Facts {
            live: Some(live),
            ..Facts::default()
        }
    }

    /// These facts, with the bundles fetched for the stack.
    pub fn with_bundles(self, bundles: BTreeMap<String, Bundle>) -> Facts {
        Facts { bundles, ..self }
    }

    /// The bundle at `url`, which the stack pins to `pin` (a sha256) or not: `None` when it was
    /// not fetched (a probe, or a command that leaves bundles out). The component checks the pin.
    pub fn bundle(&self, url: &str, pin: Option<&str>) -> Option<&Bundle> {
        self.wanted
            .lock()
            .expect("never poisoned")
            .insert(url.to_owned(), pin.map(str::to_owned));
        self.bundles.get(url)
    }

    /// The URLs of the bundles asked for so far.
    pub fn bundles_asked(&self) -> Vec<String> {
        self.wanted.lock().expect("never poisoned").keys().cloned().collect()
    }

    /// The digests of the bundles used without a pin: what the state records on first apply
    /// and the next plans hold them to.
    pub fn unpinned_digests(&self) -> BTreeMap<String, String> {
        let wanted = self.wanted.lock().expect("never poisoned");
        wanted
            .iter()
            .filter(|(_, pin)| pin.is_none())
            .filter_map(|(url, _)| Some((url.clone(), self.bundles.get(url)?.sha256.clone())))
            .collect()
    }

    /// Whether these facts came from AWS.
    pub fn is_live(&self) -> bool {
        self.live.is_some()
    }

    /// The type names looked up so far.
    pub fn asked(&self) -> Vec<String> {
        self.asked.lock().expect("never poisoned").iter().cloned().collect()
    }

    /// What is known about `name`.
    pub fn instance_type(&self, name: &str) -> Lookup {
        match self.look_up(name) {
            Lookup::Unknown(_) if self.probing => Lookup::Unchecked,
            found => found,
        }
    }

    fn look_up(&self, name: &str) -> Lookup {
        self.asked.lock().expect("never poisoned").insert(name.to_owned());
        if let Some(live) = &self.live {
            return match live.types.get(name) {
                Some(known) => Lookup::Known(*known),
                None => Lookup::Unknown(near(name)),
            };
        }
        if let Some((_, known)) = EFA_TYPES.iter().find(|(n, _)| *n == name) {
            return Lookup::Known(*known);
        }
        match name.split_once('.') {
            Some((family, size)) if PLAIN_FAMILIES.contains(&family) && SIZES.contains(&size) => Lookup::Known(InstanceType::PLAIN),
            Some((family, _))
                if PLAIN_FAMILIES.contains(&family) || EFA_TYPES.iter().any(|(n, ..)| n.starts_with(&format!("{family}."))) =>
            {
                Lookup::Unknown(near(name))
            }
            Some((family, size)) if !family.is_empty() && !size.is_empty() => Lookup::Unchecked,
            _ => Lookup::Unknown(near(name)),
        }
    }

    /// Whether `zone` offers `name`; `None` when AWS was not asked.
    pub fn offered(&self, name: &str, zone: &str) -> Option<bool> {
        let live = self.live.as_ref()?;
        Some(live.zones.get(name).is_some_and(|zones| zones.contains(zone)))
    }

    /// The zones that offer `name`, when AWS was asked.
    pub fn zones(&self, name: &str) -> Option<Vec<String>> {
        let live = self.live.as_ref()?;
        Some(live.zones.get(name).map(|z| z.iter().cloned().collect()).unwrap_or_default())
    }
}

/// The best-known type name near `name`, for "did you mean".
fn near(name: &str) -> Option<String> {
    let plain = PLAIN_FAMILIES.iter().flat_map(|f| SIZES.iter().map(move |s| format!("{f}.{s}")));
    EFA_TYPES
        .iter()
        .map(|(n, ..)| (*n).to_owned())
        .chain(plain)
        .map(|candidate| (strsim::jaro_winkler(name, &candidate), candidate))
        .filter(|(score, _)| *score > 0.85)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, candidate)| candidate)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_table_knows_efa_types_and_catches_typos() {
        let facts = Facts::builtin();
        assert_eq!(
            facts.instance_type("p5.48xlarge"),
            Lookup::Known(InstanceType {
                efa_interfaces: 32,
                network_cards: 32,
                single_interface_cards: 0,
                accelerators: 8,
                arm64: false,
            })
        );
        assert!(matches!(facts.instance_type("c5.2xlarge"), Lookup::Known(t) if t.efa_interfaces == 0));
        assert_eq!(facts.instance_type("p5.48xlage"), Lookup::Unknown(Some("p5.48xlarge".into())));
        assert_eq!(facts.instance_type("x2idn.24xlarge"), Lookup::Unchecked);
        assert_eq!(facts.offered("p5.48xlarge", "us-west-2a"), None);
        assert_eq!(facts.asked(), ["c5.2xlarge", "p5.48xlage", "p5.48xlarge", "x2idn.24xlarge"]);
    }

    #[test]
    fn a_probe_lets_unknown_names_through_and_records_them() {
        let probe = Facts::probe();
        assert_eq!(probe.instance_type("c7i.metal-24xl"), Lookup::Unchecked);
        assert!(matches!(probe.instance_type("p5.48xlarge"), Lookup::Known(t) if t.efa_interfaces == 32));
        assert_eq!(probe.asked(), ["c7i.metal-24xl", "p5.48xlarge"]);
    }

    #[test]
    fn live_facts_are_exact() {
        let live = LiveFacts {
            types: BTreeMap::from([(
                "g5.48xlarge".to_owned(),
                InstanceType {
                    efa_interfaces: 1,
                    accelerators: 8,
                    ..InstanceType::PLAIN
                },
            )]),
            zones: BTreeMap::from([("g5.48xlarge".to_owned(), BTreeSet::from(["us-west-2b".to_owned()]))]),
        };
        let facts = Facts::live(live);
        assert!(matches!(facts.instance_type("g5.48xlarge"), Lookup::Known(t) if t.efa_interfaces == 1));
        assert!(matches!(facts.instance_type("x2idn.24xlarge"), Lookup::Unknown(_)));
        assert_eq!(facts.offered("g5.48xlarge", "us-west-2a"), Some(false));
        assert_eq!(facts.offered("g5.48xlarge", "us-west-2b"), Some(true));
    }
}
