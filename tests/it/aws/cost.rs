//! What a plan costs, from the emulator's AWS Price List API (its records and decoys in
//! tests/moto/emulator/pricing.py): the seed stack's total is the sum of its resources' list
//! prices, a resize plans its difference, `forge cost` after `up` says what the plan said, a
//! second plan reads the cache, and a price list that fails leaves the plan whole.
use super::Aws;
use serde_json::Value;

/// The emulator's us-west-2 list prices, USD: an hour of p5.48xlarge and c5.2xlarge (Linux,
/// shared, on demand), of an EKS cluster in extended support (1.31 is past standard support
/// since 2025-11-26: the $0.10 cluster hour and the $0.50 surcharge), of a NAT gateway; a
/// GB-month of FSx for Lustre PERSISTENT_2 at 250 MB/s/TiB.
const P5: f64 = 55.04;
const C5: f64 = 0.34;
const EKS_EXTENDED: f64 = 0.60;
const NAT: f64 = 0.045;
const FSX_PERSISTENT_2_250: f64 = 0.21;

/// The seed stack's hourly cost by hand: its cluster, 2 × p5, 2 × c5 system nodes, one NAT
/// gateway and 1200 GB of FSx for Lustre (a 730-hour month).
fn seed_hourly(gpu_nodes: f64) -> f64 {
    EKS_EXTENDED + gpu_nodes * P5 + 2.0 * C5 + NAT + 1200.0 * FSX_PERSISTENT_2_250 / 730.0
}

impl Aws {
    /// `forge plan FILE --json`'s cost section.
    fn plan_cost(&self, file: &str) -> Value {
        let (code, stdout, stderr) = self.run(&["plan", file, "--json"]);
        assert_eq!(code, 0, "{stderr}");
        let plan: Value = serde_json::from_str(&stdout).unwrap();
        plan["cost"].clone()
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-6
}

/// The line of `address` in an estimate.
fn line<'e>(estimate: &'e Value, address: &str) -> &'e Value {
    estimate["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["address"] == address)
        .unwrap_or_else(|| panic!("no cost line for {address}: {estimate}"))
}

#[test]
fn the_seed_stacks_plan_costs_the_sum_of_its_resources_list_prices() {
    let aws = Aws::new();
    aws.write("p5.toml", include_str!("../../../stacks/nemo-eks-p5.toml"));
    let cost = aws.plan_cost("p5.toml");
    let after = &cost["after"];
    assert!(close(after["hourly"].as_f64().unwrap(), seed_hourly(2.0)), "{cost}");
    assert!(close(cost["change_hourly"].as_f64().unwrap(), seed_hourly(2.0)), "{cost}");
    assert_eq!(after["unknown"], 0, "{cost}");
    assert!(close(
        line(after, "eks.nemo.nodegroups.gpu.nodegroup")["hourly"].as_f64().unwrap(),
        2.0 * P5
    ));
    assert!(close(line(after, "eks.nemo.cluster")["hourly"].as_f64().unwrap(), EKS_EXTENDED));
    // The text says the same, after the resource list.
    let (_, _, text) = aws.run(&["plan", "p5.toml"]);
    let total = seed_hourly(2.0);
    let expected = format!("Cost: +${total:.2}/h (+${}/month at 730 h)", super::grouped(total * 730.0, 0));
    assert!(text.contains(&expected), "{expected}\n{text}");
    assert!(text.find("Plan: 35 to add").unwrap() < text.find("Cost: +").unwrap(), "{text}");
}

/// The other AWS seed stacks, each plan's total against its resources' list prices by hand.
#[test]
fn every_aws_seed_stack_plans_the_sum_of_its_list_prices() {
    const P4DE: f64 = 27.447;
    const TRN1: f64 = 21.50;
    const C6I: f64 = 0.34;
    const FSX_PERSISTENT_2_125: f64 = 0.145;
    let fsx = |per_gb_month: f64| 1200.0 * per_gb_month / 730.0;
    let seeds = [
        // The cluster, 2 × p4de, 2 × c5 system nodes, a NAT gateway, 1.2 TB of FSx at 250 MB/s/TiB.
        (
            "nemo-eks-p4de.toml",
            include_str!("../../../stacks/nemo-eks-p4de.toml"),
            EKS_EXTENDED + 2.0 * P4DE + 2.0 * C5 + NAT + fsx(FSX_PERSISTENT_2_250),
            0,
        ),
        // The cluster, 2 × trn1, one c5 system node, a NAT gateway, 1.2 TB of FSx at 125 MB/s/TiB.
        (
            "bert-eks-trn1.toml",
            include_str!("../../../stacks/bert-eks-trn1.toml"),
            EKS_EXTENDED + 2.0 * TRN1 + C5 + NAT + fsx(FSX_PERSISTENT_2_125),
            0,
        ),
        // The login node, a p5 queue of 0–2 (none as planned), a NAT gateway, FSx; PCS's own
        // controller fee is not priced, so listed as unknown.
        (
            "nemo-slurm-p5.toml",
            include_str!("../../../stacks/nemo-slurm-p5.toml"),
            C6I + NAT + fsx(FSX_PERSISTENT_2_250),
            1,
        ),
    ];
    for (file, text, expected, unknown) in seeds {
        let aws = Aws::new();
        aws.write(file, text);
        let cost = aws.plan_cost(file);
        assert!(close(cost["after"]["hourly"].as_f64().unwrap(), expected), "{file}: {cost}");
        assert_eq!(cost["after"]["unknown"], unknown, "{file}: {cost}");
    }
}

#[test]
fn a_resize_plans_its_difference_forge_cost_says_what_up_runs_and_the_cache_spares_the_calls() {
    let aws = Aws::new();
    let stack = include_str!("../../../stacks/nemo-eks-p5.toml");
    aws.write("p5.toml", stack);
    aws.ok(&["up", "p5.toml", "--yes", "--no-wait-ready"]);
    let asked = aws.calls().get("pricing:GetProducts").copied().unwrap_or(0);
    assert!((1..=5).contains(&asked), "one GetProducts per service and region, {asked} made");

    // What the state runs now is what the plan said it would.
    let (code, stdout, stderr) = aws.run(&["cost", "p5.toml", "--json"]);
    assert_eq!(code, 0, "{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert!(close(report["hourly"].as_f64().unwrap(), seed_hourly(2.0)), "{report}");
    assert!(close(report["stacks"][0]["monthly"].as_f64().unwrap(), seed_hourly(2.0) * 730.0));
    let (_, text, _) = aws.run(&["cost", "p5.toml"]);
    assert!(text.contains("2 × p5.48xlarge at $55.04/hour"), "{text}");
    let (_, markdown, _) = aws.run(&["cost", "p5.toml", "--markdown"]);
    assert!(
        markdown.contains("| `eks.nemo.nodegroups.gpu.nodegroup` | aws_eks_nodegroup |"),
        "{markdown}"
    );

    // Two more p5 nodes: the plan adds twice the p5 hour, and asks no price list (the cache
    // is a week old at most).
    aws.write("p5.toml", &stack.replace("gpu_nodes = 2", "gpu_nodes = 4"));
    let cost = aws.plan_cost("p5.toml");
    assert!(close(cost["change_hourly"].as_f64().unwrap(), 2.0 * P5), "{cost}");
    assert!(close(cost["after"]["hourly"].as_f64().unwrap(), seed_hourly(4.0)), "{cost}");
    let calls = aws.calls();
    assert!(!calls.keys().any(|c| c.starts_with("pricing:")), "{calls:?}");
    aws.ok(&["destroy", "p5.toml", "--yes"]);
}

#[test]
fn a_price_list_that_fails_leaves_the_plan_whole_and_says_why() {
    let aws = Aws::new();
    aws.write("p5.toml", include_str!("../../../stacks/nemo-eks-p5.toml"));
    let rule = serde_json::json!([{ "match": "pricing:GetProducts", "rate": 1.0, "kind": "error", "account": aws.account }]);
    aws.control("POST", &format!("/_forge/faults?account={}", aws.account), &rule.to_string());
    let (code, _, stderr) = aws.run(&["plan", "p5.toml"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("Prices unavailable: the AWS Price List API answered"), "{stderr}");
    assert!(stderr.contains("price unknown: the AWS price list was not read"), "{stderr}");
    assert!(stderr.contains("Plan: 35 to add"), "{stderr}");
    // Nothing was cached: with the API back, the next plan asks again and prices it all.
    aws.control("POST", &format!("/_forge/faults?account={}", aws.account), "[]");
    aws.calls();
    let cost = aws.plan_cost("p5.toml");
    assert!(close(cost["after"]["hourly"].as_f64().unwrap(), seed_hourly(2.0)), "{cost}");
    assert!(aws.calls().contains_key("pricing:GetProducts"));
    // --no-cost: no cost section, no price call.
    let (code, _, stderr) = aws.run(&["plan", "p5.toml", "--no-cost"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(!stderr.contains("Cost:"), "{stderr}");
    assert!(!aws.calls().keys().any(|c| c.starts_with("pricing:")));
}

#[test]
fn spot_is_an_upper_bound_and_an_autoscaled_group_a_range() {
    let aws = Aws::new();
    let stack = r#"[stack]
name = "spot"
[aws]
region = "us-west-2"
[vpc.main]
cidr = "10.4.0.0/16"
zones = ["us-west-2a", "us-west-2b"]
nat = "none"
[eks.spot]
version = "1.34"
vpc = "vpc.main"
[eks.spot.nodegroups.cpu]
instance_type = "c5.2xlarge"
capacity_type = "SPOT"
size = { min = 1, max = 4, desired = 2 }
"#;
    aws.write("spot.toml", stack);
    let cost = aws.plan_cost("spot.toml");
    let group = line(&cost["after"], "eks.spot.nodegroups.cpu.nodegroup");
    assert!(close(group["hourly"].as_f64().unwrap(), 2.0 * C5), "{group}");
    assert_eq!(group["range"], serde_json::json!([C5, 4.0 * C5]), "{group}");
    assert_eq!(group["upper_bound"], "spot, priced on demand", "{group}");
}
