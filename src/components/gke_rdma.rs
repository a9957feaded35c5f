//! GPUDirect-RDMA of a `gke` block's A3 Ultra (`a3-ultragpu-8g`), A4 (`a4-highgpu-8g`) and
//! A4X (`a4x-highgpu-4g`) pools, as Google documents it: each GPU has an RDMA NIC (RoCE,
//! `MRDMA`), the machine a second gVNIC besides the primary one. A pool's `rdma` chooses how
//! those NICs are wired:
//! - `"networks"` (A3 Ultra's and A4's default): forge makes, once per cluster, one more gVNIC
//!   network and, in the pools' zone, one RDMA VPC with that zone's `<zone>-vpc-roce` network
//!   profile (MTU 8896, zonal, RDMA NICs only, implicit allow rules) with one subnetwork per
//!   NIC; the pools attach them as additional node networks, and the cluster gets the
//!   `GKENetworkParamSet` / `Network` pairs pods name: `gvnic-1` (`NetDevice`) and `rdma-0` …
//!   (`RDMA`).
//! - `"dranet"` (A4X's default): GKE's managed DRANET (`acceleratorNetworkProfile = "auto"`)
//!   wires the NICs itself and hands them to pods through DRA (DeviceClass `mrdma.google.com`);
//!   it needs GKE 1.34.1-gke.1829001 or later.
//!
//! Either way the nodes get Google's gIB NCCL plugin from an installer DaemonSet. A4X pools
//! (NVL72 racks of 18 machines) also need a workload policy (`HIGH_THROUGHPUT`, accelerator
//! topology `1x72`) as their placement, and NVIDIA's DRA driver for their IMEX domains, which
//! needs GKE 1.34.

use super::cidr::Cidr;
use super::{ComponentError, Part, kubernetes};
use serde_json::{Value, json};

/// A machine type whose GPUs talk GPUDirect-RDMA.
pub struct RdmaMachine {
    /// The machine type.
    pub name: &'static str,
    /// Its RDMA NICs: one per GPU.
    pub nics: usize,
    /// Whether GKE's `gpuDirectStrategy = RDMA` applies to it (A3 Ultra and A4).
    pub strategy: bool,
    /// Arm (A4X's Grace CPUs): the gIB installer's arm64 image.
    pub arm64: bool,
    /// An NVL72 rack machine (A4X): placed by a workload policy, with IMEX through NVIDIA's
    /// DRA driver.
    pub rack: bool,
    /// Whether its boot disk must be Hyperdisk (A3 Ultra, A4, A4X: they take no Persistent Disk).
    pub hyperdisk: bool,
}

/// The RDMA machine types.
pub const MACHINES: [RdmaMachine; 3] = [
    RdmaMachine {
        name: "a3-ultragpu-8g",
        nics: 8,
        strategy: true,
        arm64: false,
        rack: false,
        hyperdisk: true,
    },
    RdmaMachine {
        name: "a4-highgpu-8g",
        nics: 8,
        strategy: true,
        arm64: false,
        rack: false,
        hyperdisk: true,
    },
    RdmaMachine {
        name: "a4x-highgpu-4g",
        nics: 4,
        strategy: false,
        arm64: true,
        rack: true,
        hyperdisk: true,
    },
];

/// The RDMA machine `machine_type` is, if it is one.
pub fn machine(machine_type: &str) -> Option<&'static RdmaMachine> {
    MACHINES.iter().find(|m| m.name == machine_type)
}

/// How a pool's RDMA NICs are wired (its `rdma`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Wiring {
    /// forge's RDMA VPC and gVNIC network, attached as additional node networks.
    Networks,
    /// GKE's managed DRANET.
    Dranet,
}

/// The earliest GKE version with managed DRANET.
pub const DRANET_VERSION: &str = "1.34.1-gke.1829001";

/// The earliest GKE version whose DRA the NVIDIA DRA driver of A4X pools needs.
pub const DRA_VERSION: &str = "1.34";

/// The MTU of the RDMA VPC and the gVNIC network.
pub const MTU: i64 = 8896;

/// The gIB installer's image for Arm nodes, else for x86 ones.
fn gib_image(arm64: bool) -> (&'static str, &'static str) {
    kubernetes::GIB_IMAGES[usize::from(arm64)]
}

/// A pool's `rdma`, checked: its wiring, by default DRANET for rack machines, else networks.
pub fn wiring(rdma: Option<&str>, machine: Option<&RdmaMachine>, machine_type: &str, at: &str) -> Result<Option<Wiring>, ComponentError> {
    let hint = "write `rdma = \"networks\"` (RDMA networks forge makes) or `rdma = \"dranet\"` (GKE's managed DRANET, GKE 1.34.1-gke.1829001 or later)";
    match (rdma, machine) {
        (None, None) => Ok(None),
        (Some(_), None) => Err(ComponentError::at(
            at,
            format!("`{machine_type}` has no RDMA NICs: `rdma` applies to a3-ultragpu-8g, a4-highgpu-8g and a4x-highgpu-4g pools"),
            "remove `rdma`",
        )),
        (None, Some(m)) => Ok(Some(if m.rack { Wiring::Dranet } else { Wiring::Networks })),
        (Some("networks"), Some(_)) => Ok(Some(Wiring::Networks)),
        (Some("dranet"), Some(_)) => Ok(Some(Wiring::Dranet)),
        (Some(other), Some(_)) => Err(ComponentError::at(
            at,
            format!("`rdma = \"{other}\"` is not a wiring forge knows"),
            hint,
        )),
    }
}

/// A GKE version's numbers (`1.34.1-gke.1829001` → 1, 34, 1, 1829001), the ones it leaves out
/// `missing`: as high as they go for a version a block pins (`1.34` is the newest 1.34 GKE
/// has), 0 for a minimum (`1.34` is any 1.34); `None` for a reference or text that is no
/// version.
fn version_numbers(text: &str, missing: u64) -> Option<[u64; 4]> {
    let (release, build) = text.split_once("-gke.").map_or((text, None), |(r, b)| (r, Some(b)));
    let mut numbers = [missing; 4];
    for (i, part) in release.split('.').enumerate() {
        *numbers.get_mut(i)? = part.parse().ok()?;
    }
    if let Some(build) = build {
        numbers[3] = build.parse().ok()?;
    }
    Some(numbers)
}

/// Whether the cluster's version `given` is `minimum` or later, for `what`: an error at
/// `version` when it is older, at `unpinned` (the key that asks for it) when the cluster pins
/// none; a version that is a reference passes (GKE checks it).
pub fn check_version(given: Option<&Value>, minimum: &str, unpinned: &str, what: &str) -> Result<(), ComponentError> {
    let pin = format!("pin the cluster's `version = \"{minimum}\"` or later (`\"1.34\"` takes GKE's newest 1.34)");
    let text = match given {
        None => {
            return Err(ComponentError::at(
                unpinned,
                format!(
                    "{what} needs GKE {minimum} or later, and the cluster pins no `version`: its release channel's default may be older"
                ),
                pin,
            ));
        }
        Some(Value::String(text)) => text,
        Some(_) => return Ok(()),
    };
    let (Some(have), Some(need)) = (version_numbers(text, u64::MAX), version_numbers(minimum, 0)) else {
        return Ok(());
    };
    if have < need {
        return Err(ComponentError::at(
            "version",
            format!("{what} needs GKE {minimum} or later; `version = \"{text}\"` is older"),
            pin,
        ));
    }
    Ok(())
}

/// The RDMA networks of a cluster: the one zone of its `rdma = "networks"` pools, and the
/// subnetworks its RDMA VPC needs (the most NICs of those pools' machines).
pub struct Networks {
    /// The zone of the RDMA VPC (its network profile's).
    pub zone: String,
    /// Its subnetworks, one per RDMA NIC.
    pub nics: usize,
}

impl Networks {
    /// The RDMA networks of the pools `(name, zone, machine)` wired with `rdma = "networks"`:
    /// none without such pools; an error when they are in more than one zone (the cluster's
    /// `rdma-0` … objects name one RDMA VPC, and such a VPC is zonal).
    pub fn of<'a>(pools: impl Iterator<Item = (&'a str, &'a str, &'static RdmaMachine)>) -> Result<Option<Networks>, ComponentError> {
        let mut networks: Option<(&str, Networks)> = None;
        for (pool, zone, machine) in pools {
            match &mut networks {
                None => {
                    networks = Some((
                        pool,
                        Networks {
                            zone: zone.to_owned(),
                            nics: machine.nics,
                        },
                    ))
                }
                Some((first, n)) if n.zone != zone => {
                    return Err(ComponentError::at(
                        format!("node_pools.{pool}.zone"),
                        format!(
                            "pools `{first}` and `{pool}` wire RDMA networks in two zones ({} and {zone}): an RDMA VPC is zonal, and the cluster's `rdma-0` … networks name one",
                            n.zone
                        ),
                        format!("put the RDMA pools in one zone, or give `{pool}` `rdma = \"dranet\"` (GKE's managed DRANET, per pool)"),
                    ));
                }
                Some((_, n)) => n.nics = n.nics.max(machine.nics),
            }
        }
        Ok(networks.map(|(_, n)| n))
    }

    /// The RDMA VPC's name for the cluster `cluster`.
    fn name(&self, cluster: &str) -> String {
        format!("{cluster}-rdma-{}", self.zone)
    }

    /// The gVNIC network (its subnetwork cut from `gvnic`, a rule letting the nodes reach each
    /// other on it) and the RDMA VPC of the zone's `<zone>-vpc-roce` profile with one
    /// subnetwork per range of `rdma`, of the cluster `cluster` in `region`; `reference` names
    /// an output of another part of the block.
    pub fn parts(&self, cluster: &str, region: &str, gvnic: Cidr, rdma: &[Cidr], reference: &dyn Fn(&str, &str) -> Value) -> Vec<Part> {
        let gvnic_name = format!("{cluster}-gvnic");
        let gvnic_network = reference("gvnic_network", "self_link");
        let rdma_name = self.name(cluster);
        let mut parts = vec![
            Part::new(
                "gvnic_network",
                "google_compute_network",
                json!({ "name": gvnic_name, "mtu": MTU, "description": format!("the second gVNIC network of GKE cluster {cluster}'s RDMA nodes") }),
            ),
            Part::new(
                "gvnic_subnetwork",
                "google_compute_subnetwork",
                json!({ "name": format!("{gvnic_name}-subnet"), "region": region, "network": gvnic_network, "ip_cidr_range": gvnic.to_string() }),
            ),
            Part::new(
                "gvnic_firewall",
                "google_compute_firewall",
                json!({
                    "name": format!("{gvnic_name}-internal"),
                    "network": gvnic_network,
                    "description": "traffic between the RDMA nodes on their second gVNIC",
                    "allow": [{ "protocol": "all" }],
                    "source_ranges": [gvnic.to_string()],
                }),
            ),
            Part::new(
                "rdma_network",
                "google_compute_network",
                json!({
                    "name": rdma_name,
                    "mtu": MTU,
                    "network_profile": format!("{}-vpc-roce", self.zone),
                    "description": format!("the RDMA network of GKE cluster {cluster} in {}", self.zone),
                }),
            ),
        ];
        let rdma_network = reference("rdma_network", "self_link");
        parts.extend(rdma.iter().enumerate().map(|(i, cidr)| {
            Part::new(
                format!("rdma_subnetwork_{i}"),
                "google_compute_subnetwork",
                json!({ "name": format!("{rdma_name}-{i}"), "region": region, "network": rdma_network, "ip_cidr_range": cidr.to_string() }),
            )
        }));
        parts
    }

    /// The additional node networks of a pool of `machine`: the gVNIC network, then one RDMA
    /// subnetwork per NIC.
    pub fn attached(machine: &RdmaMachine, reference: &dyn Fn(&str, &str) -> Value) -> Value {
        let mut networks =
            vec![json!({ "network": reference("gvnic_network", "name"), "subnetwork": reference("gvnic_subnetwork", "name") })];
        networks.extend((0..machine.nics).map(
            |i| json!({ "network": reference("rdma_network", "name"), "subnetwork": reference(&format!("rdma_subnetwork_{i}"), "name") }),
        ));
        Value::Array(networks)
    }

    /// The `GKENetworkParamSet` / `Network` pairs of the cluster `cluster_ref`: `gvnic-1` and
    /// `rdma-0` ….
    pub fn objects(&self, cluster_ref: &str, reference: &dyn Fn(&str, &str) -> Value) -> Vec<Part> {
        let mut networks = vec![(
            "gvnic-1".to_owned(),
            reference("gvnic_network", "name"),
            reference("gvnic_subnetwork", "name"),
            "NetDevice",
        )];
        networks.extend((0..self.nics).map(|i| {
            (
                format!("rdma-{i}"),
                reference("rdma_network", "name"),
                reference(&format!("rdma_subnetwork_{i}"), "name"),
                "RDMA",
            )
        }));
        networks
            .into_iter()
            .flat_map(|(name, vpc, subnetwork, mode)| {
                let (params, network) = kubernetes::gpu_network(&name, vpc, subnetwork, mode);
                let local = name.replace('-', "_");
                [
                    kubernetes::object(format!("k8s.rdma.{local}.params"), cluster_ref, params, vec![]),
                    kubernetes::object(format!("k8s.rdma.{local}.network"), cluster_ref, network, vec![]),
                ]
            })
            .collect()
    }
}

/// The gIB installers of the cluster `cluster_ref` for its RDMA pools' `(machine, accelerator)`:
/// one DaemonSet per CPU architecture they use, on the nodes of their accelerators.
pub fn gib_installers(cluster_ref: &str, pools: &[(&RdmaMachine, &str)]) -> Vec<Part> {
    [false, true]
        .into_iter()
        .filter_map(|arm64| {
            let mut accelerators: Vec<String> = Vec::new();
            for (_, accelerator) in pools.iter().filter(|(m, _)| m.arm64 == arm64) {
                if !accelerators.iter().any(|a| a == accelerator) {
                    accelerators.push((*accelerator).to_owned());
                }
            }
            if accelerators.is_empty() {
                return None;
            }
            let (arch, image) = gib_image(arm64);
            Some(kubernetes::object(
                format!("k8s.rdma.gib_installer_{arch}"),
                cluster_ref,
                kubernetes::gib_installer(arch, image, &accelerators),
                vec![],
            ))
        })
        .collect()
}

/// The workload policy of the cluster `cluster`'s A4X pools in `region`: their machines make
/// up whole NVL72 racks.
pub fn workload_policy(cluster: &str, region: &str) -> Part {
    Part::new(
        "workload_policy",
        "google_compute_resource_policy",
        json!({
            "name": format!("{cluster}-nvl72"),
            "region": region,
            "description": format!("NVL72 racks of GKE cluster {cluster}'s A4X pools"),
            "workload_policy": { "type": "HIGH_THROUGHPUT", "accelerator_topology": "1x72" },
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_compare_by_their_numbers_and_a_short_one_is_its_newest() {
        let ok = |v: &str| check_version(Some(&json!(v)), DRANET_VERSION, "node_pools.gpu.rdma", "DRANET").is_ok();
        assert!(ok("1.34.1-gke.1829001"));
        assert!(ok("1.34.2-gke.1000"));
        assert!(ok("1.34"));
        assert!(ok("1.35.0-gke.1"));
        assert!(!ok("1.34.1-gke.1829000"));
        assert!(!ok("1.34.0-gke.1662000"));
        assert!(!ok("1.33"));
        assert!(ok("${var.version}"), "a reference is GKE's to check");
        let dra = |v: &str| check_version(Some(&json!(v)), DRA_VERSION, "node_pools.gpu.machine_type", "DRA").is_ok();
        assert!(dra("1.34.1-gke.1829001") && dra("1.34.0-gke.1662000") && dra("1.34"));
        assert!(!dra("1.33.3-gke.1136000") && !dra("1.33"));
        let unpinned = check_version(None, DRANET_VERSION, "node_pools.gpu.rdma", "DRANET").err().unwrap();
        assert_eq!(unpinned.key.as_deref(), Some("node_pools.gpu.rdma"));
    }

    #[test]
    fn rdma_networks_are_one_zone_with_the_most_nics() {
        let [ultra, _, a4x] = &MACHINES;
        let networks = Networks::of([("a", "us-central1-b", a4x), ("b", "us-central1-b", ultra)].into_iter())
            .unwrap()
            .unwrap();
        assert_eq!((networks.zone.as_str(), networks.nics), ("us-central1-b", 8));
        let err = Networks::of([("a", "us-central1-b", ultra), ("b", "us-central1-c", ultra)].into_iter())
            .err()
            .unwrap();
        assert_eq!(err.key.as_deref(), Some("node_pools.b.zone"));
    }

    #[test]
    fn the_default_wiring_is_dranet_for_racks_and_networks_otherwise() {
        let at = "node_pools.gpu.rdma";
        assert_eq!(
            wiring(None, machine("a4x-highgpu-4g"), "a4x-highgpu-4g", at).unwrap(),
            Some(Wiring::Dranet)
        );
        assert_eq!(
            wiring(None, machine("a4-highgpu-8g"), "a4-highgpu-8g", at).unwrap(),
            Some(Wiring::Networks)
        );
        assert!(wiring(Some("dranet"), None, "a3-highgpu-8g", at).is_err());
        assert!(wiring(Some("roce"), machine("a4-highgpu-8g"), "a4-highgpu-8g", at).is_err());
    }
}
