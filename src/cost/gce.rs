//! What Compute Engine bills a machine type for: its vCPUs, memory and GPUs, each at its
//! family's price-list rate (Google bills A3 and the general-purpose families this way;
//! https://cloud.google.com/compute/vm-instance-pricing).

use super::Rate;

/// GPU machine types: vCPUs, memory (GiB), the family's name in the price list, the GPU's
/// name there and how many (https://cloud.google.com/compute/docs/gpus#h100-gpus,
/// /accelerator-optimized-machines#a3-vms, #g2-vms).
const GPU_MACHINES: &[(&str, u32, u32, &str, &str, u32)] = &[
    ("a3-highgpu-1g", 26, 234, "A3", "Nvidia H100 80GB GPU", 1),
    ("a3-highgpu-2g", 52, 468, "A3", "Nvidia H100 80GB GPU", 2),
    ("a3-highgpu-4g", 104, 936, "A3", "Nvidia H100 80GB GPU", 4),
    ("a3-highgpu-8g", 208, 1872, "A3", "Nvidia H100 80GB GPU", 8),
    ("a3-edgegpu-8g", 208, 1872, "A3", "Nvidia H100 80GB GPU", 8),
    ("a3-megagpu-8g", 208, 1872, "A3Plus", "Nvidia H100 80GB Mega GPU", 8),
    ("g2-standard-4", 4, 16, "G2", "Nvidia L4 GPU", 1),
    ("g2-standard-8", 8, 32, "G2", "Nvidia L4 GPU", 1),
    ("g2-standard-12", 12, 48, "G2", "Nvidia L4 GPU", 1),
    ("g2-standard-16", 16, 64, "G2", "Nvidia L4 GPU", 1),
    ("g2-standard-24", 24, 96, "G2", "Nvidia L4 GPU", 2),
    ("g2-standard-32", 32, 128, "G2", "Nvidia L4 GPU", 1),
    ("g2-standard-48", 48, 192, "G2", "Nvidia L4 GPU", 4),
    ("g2-standard-96", 96, 384, "G2", "Nvidia L4 GPU", 8),
];

/// General-purpose families: the family's name in the price list, and GiB of memory per vCPU
/// of its `standard`, `highmem` and `highcpu` shapes
/// (https://cloud.google.com/compute/docs/general-purpose-machines).
const CPU_FAMILIES: &[(&str, &str, [f64; 3])] = &[
    ("e2", "E2", [4.0, 8.0, 1.0]),
    ("n2", "N2", [4.0, 8.0, 1.0]),
    ("n2d", "N2D AMD", [4.0, 8.0, 1.0]),
    ("n1", "N1 Predefined", [3.75, 6.5, 0.9]),
];

/// What one machine of `machine_type` in `region` is billed for an hour: each rate with its
/// units (vCPUs, GiB, GPUs). An error says why it cannot be priced.
pub fn machine(region: &str, machine_type: &str) -> Result<Vec<(Rate, f64)>, String> {
    let core = |family: &str| Rate::GceCore {
        region: region.to_owned(),
        family: family.to_owned(),
    };
    let ram = |family: &str| Rate::GceRam {
        region: region.to_owned(),
        family: family.to_owned(),
    };
    if let Some((_, cpus, gib, family, gpu, gpus)) = GPU_MACHINES.iter().find(|m| m.0 == machine_type) {
        let gpu = Rate::GceGpu {
            region: region.to_owned(),
            gpu: (*gpu).to_owned(),
        };
        return Ok(vec![
            (core(family), f64::from(*cpus)),
            (ram(family), f64::from(*gib)),
            (gpu, f64::from(*gpus)),
        ]);
    }
    let mut parts = machine_type.splitn(3, '-');
    let (family, shape, cpus) = (parts.next(), parts.next(), parts.next().and_then(|n| n.parse::<u32>().ok()));
    let found = CPU_FAMILIES.iter().find(|f| Some(f.0) == family);
    let per_cpu = match (found, shape) {
        (Some((_, _, sizes)), Some("standard")) => Some(sizes[0]),
        (Some((_, _, sizes)), Some("highmem")) => Some(sizes[1]),
        (Some((_, _, sizes)), Some("highcpu")) => Some(sizes[2]),
        _ => None,
    };
    match (found, per_cpu, cpus) {
        (Some((_, name, _)), Some(per_cpu), Some(cpus)) => Ok(vec![(core(name), f64::from(cpus)), (ram(name), f64::from(cpus) * per_cpu)]),
        _ => Err(format!(
            "forge does not know what Google bills `{machine_type}` for yet (A3 Ultra, A4 and A4X are billed as whole machines, not read yet)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_a3_machine_is_its_cores_memory_and_eight_gpus() {
        let parts = machine("us-central1", "a3-highgpu-8g").unwrap();
        let units: Vec<f64> = parts.iter().map(|(_, n)| *n).collect();
        assert_eq!(units, [208.0, 1872.0, 8.0]);
        let e2 = machine("us-central1", "e2-standard-8").unwrap();
        assert_eq!(e2.iter().map(|(_, n)| *n).collect::<Vec<_>>(), [8.0, 32.0]);
        assert!(machine("us-central1", "a4-highgpu-8g").is_err());
    }
}
