//! What a GKE plan costs, from the emulator's Cloud Billing Catalog (its SKUs and decoys in
//! tests/moto/emulator/gcp_billing.py): an A3 pool is its machines' vCPUs, memory and GPUs at
//! the A3 family's on-demand SKUs, never a Spot, commitment or DWS one.
use super::Gcp;
use serde_json::Value;

/// The emulator's on-demand prices in the Americas, USD: an A3 vCPU-hour, GiB-hour and H100
/// hour; an E2 vCPU-hour and GiB-hour; GKE's cluster hour; an Enterprise Filestore GiB-month.
const A3_CORE: f64 = 0.02550;
const A3_RAM: f64 = 0.002220;
const H100: f64 = 9.79655;
const E2_CORE: f64 = 0.021811;
const E2_RAM: f64 = 0.002923;
const GKE_CLUSTER: f64 = 0.10;
const FILESTORE_ENTERPRISE: f64 = 0.45;

#[test]
fn a_gke_a3_pool_is_priced_from_its_gpu_core_and_ram_skus() {
    let gcp = Gcp::new();
    gcp.write("nemo.toml", &super::seed_stack(&gcp));
    let out = gcp.command(&["plan", "nemo.toml", "--json"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    let after = &plan["cost"]["after"];
    let hourly = |address: &str| {
        let line = after["resources"].as_array().unwrap().iter().find(|l| l["address"] == address);
        line.and_then(|l| l["hourly"].as_f64())
            .unwrap_or_else(|| panic!("{address} unpriced: {after}"))
    };
    // a3-highgpu-8g: 208 vCPUs, 1872 GiB, 8 H100s; four nodes in one zone.
    let a3 = 4.0 * (208.0 * A3_CORE + 1872.0 * A3_RAM + 8.0 * H100);
    // e2-standard-8: 8 vCPUs, 32 GiB; four nodes.
    let system = 4.0 * (8.0 * E2_CORE + 32.0 * E2_RAM);
    let filestore = 1024.0 * FILESTORE_ENTERPRISE / 730.0;
    let close = |a: f64, b: f64| (a - b).abs() < 1e-6;
    assert!(close(hourly("gke.nemo.node_pools.a3"), a3), "{after}");
    assert!(close(hourly("gke.nemo.node_pools.system"), system), "{after}");
    assert!(close(hourly("gke.nemo.cluster"), GKE_CLUSTER), "{after}");
    assert!(close(hourly("filestore.shared.instance"), filestore), "{after}");
    let total = after["hourly"].as_f64().unwrap();
    assert!(close(total, a3 + system + GKE_CLUSTER + filestore), "{after}");
    assert_eq!(after["unknown"], 0, "{after}");
}
