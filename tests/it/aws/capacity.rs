//! `forge capacity search` against the emulator's Capacity Block offerings: what EC2 sells,
//! cheapest first, checked against EC2's rules before any call.
use super::Aws;
use aws_sdk_ec2::primitives::{DateTime, DateTimeFormat};
use serde_json::Value;
use std::collections::BTreeSet;

impl Aws {
    /// Sets this account's clock on the emulator (Capacity Block offerings start after it).
    fn clock(&self, now: &str) {
        self.control(
            "POST",
            &format!("/_forge/clock?account={}", self.account),
            &serde_json::json!({ "now": now }).to_string(),
        );
    }

    /// `forge capacity search ARGS`: the exit code, stdout and stderr.
    fn search(&self, args: &[&str]) -> (i32, String, String) {
        let mut all = vec!["capacity", "search"];
        all.extend_from_slice(args);
        self.run(&all)
    }
}

/// The offerings of a search's JSON answer.
fn offerings(json: &str) -> Vec<Value> {
    let answer: Value = serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {json}"));
    answer["offerings"].as_array().unwrap().clone()
}

/// The search lists exactly the offerings EC2 answers for the request, cheapest first, each
/// of the duration and size asked for, starting at 11:30 UTC; `--zones` narrows them, and the
/// table shows the fee as money and says it is not refunded.
#[test]
fn capacity_search_lists_the_offerings_cheapest_first_with_their_fees() {
    let aws = Aws::new();
    aws.clock("2026-12-01T00:00:00Z");
    let (code, stdout, stderr) = aws.search(&["--instance-type", "p5.48xlarge", "--count", "2", "--days", "7", "--json"]);
    assert_eq!(code, 0, "{stderr}");
    let found = offerings(&stdout);
    assert!(!found.is_empty(), "{stdout}");
    let fees: Vec<f64> = found.iter().map(|o| o["upfront_fee"].as_f64().unwrap()).collect();
    assert!(fees.windows(2).all(|w| w[0] <= w[1]), "cheapest first: {fees:?}");
    for o in &found {
        assert_eq!((o["hours"].as_i64(), o["count"].as_i64()), (Some(168), Some(2)), "{o}");
        assert!(o["start"].as_str().unwrap().ends_with("T11:30:00Z"), "{o}");
        assert!(o["offering_id"].as_str().unwrap().starts_with("cb-"), "{o}");
    }
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let sold: BTreeSet<(String, String)> = runtime.block_on(async {
        let answer = aws
            .ec2()
            .describe_capacity_block_offerings()
            .instance_type("p5.48xlarge")
            .instance_count(2)
            .capacity_duration_hours(168)
            .send()
            .await
            .unwrap();
        answer
            .capacity_block_offerings()
            .iter()
            .map(|o| {
                (
                    o.capacity_block_offering_id().unwrap().to_owned(),
                    o.upfront_fee().unwrap().to_owned(),
                )
            })
            .collect()
    });
    let listed: BTreeSet<(String, String)> = found
        .iter()
        .map(|o| {
            (
                o["offering_id"].as_str().unwrap().to_owned(),
                format!("{:.2}", o["upfront_fee"].as_f64().unwrap()),
            )
        })
        .collect();
    let sold_rounded: BTreeSet<(String, String)> = sold
        .into_iter()
        .map(|(id, fee)| (id, format!("{:.2}", fee.parse::<f64>().unwrap())))
        .collect();
    assert_eq!(listed, sold_rounded, "what EC2 sells, no more, no less");

    let zone = found[0]["zone"].as_str().unwrap().to_owned();
    let (code, stdout, stderr) = aws.search(&[
        "--instance-type",
        "p5.48xlarge",
        "--count",
        "2",
        "--days",
        "7",
        "--zones",
        &zone,
        "--json",
    ]);
    assert_eq!(code, 0, "{stderr}");
    let narrowed = offerings(&stdout);
    assert!(
        !narrowed.is_empty() && narrowed.iter().all(|o| o["zone"] == zone.as_str()),
        "{stdout}"
    );

    let (code, table, stderr) = aws.search(&["--instance-type", "p5.48xlarge", "--count", "2", "--days", "7"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        table.contains("2 × p5.48xlarge, 7 days (168 h), in us-west-2, cheapest first"),
        "{table}"
    );
    assert!(table.contains(found[0]["offering_id"].as_str().unwrap()), "{table}");
    assert!(table.contains("$") && table.contains("not refunded"), "{table}");
}

/// An UltraServer type is searched by whole UltraServers of each size the count makes up (18
/// P6e-GB200: one x72 or two x36; 9: one x36); a type EC2 sells no blocks of finds none and
/// says what to try.
#[test]
fn ultraservers_are_sold_whole_and_other_types_find_nothing() {
    let aws = Aws::new();
    aws.clock("2026-12-01T00:00:00Z");
    let (code, stdout, stderr) = aws.search(&["--instance-type", "p6e-gb200.36xlarge", "--count", "18", "--days", "14", "--json"]);
    assert_eq!(code, 0, "{stderr}");
    let found = offerings(&stdout);
    assert!(!found.is_empty(), "{stdout}");
    let kinds: BTreeSet<String> = found.iter().map(|o| o["ultraservers"].to_string()).collect();
    assert_eq!(
        kinds,
        BTreeSet::from([r#"["u-p6e-gb200x36",2]"#.to_owned(), r#"["u-p6e-gb200x72",1]"#.to_owned()]),
        "18 instances are one x72 or two x36: {stdout}"
    );
    let (code, stdout, stderr) = aws.search(&["--instance-type", "p6e-gb200.36xlarge", "--count", "9", "--days", "14", "--json"]);
    assert_eq!(code, 0, "{stderr}");
    let found = offerings(&stdout);
    assert!(
        !found.is_empty() && found.iter().all(|o| o["ultraservers"] == serde_json::json!(["u-p6e-gb200x36", 1])),
        "{stdout}"
    );
    let (code, table, stderr) = aws.search(&["--instance-type", "c5.2xlarge", "--count", "2", "--days", "1"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(table.starts_with("No Capacity Block offerings for 2 × c5.2xlarge"), "{table}");
}

/// A request EC2 would refuse is an error that says what EC2 sells, before any call.
#[test]
fn a_request_ec2_would_refuse_is_an_error_before_any_call() {
    let aws = Aws::new();
    aws.calls();
    for (args, says) in [
        (["--count", "2", "--days", "15"], "use 14 or 21"),
        (["--count", "65", "--days", "7"], "1 to 64 instances"),
    ] {
        let mut all = vec!["--instance-type", "p5.48xlarge"];
        all.extend_from_slice(&args);
        let (code, _, stderr) = aws.search(&all);
        assert_eq!(code, 1, "{stderr}");
        assert!(stderr.contains(says), "{stderr}");
    }
    let (code, _, stderr) = aws.search(&["--instance-type", "p6e-gb200.36xlarge", "--count", "20", "--days", "7"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("whole u-p6e-gb200x72 UltraServers (18 instances each)"), "{stderr}");
    let calls = aws.calls();
    assert!(!calls.keys().any(|c| c.contains("CapacityBlock")), "no call: {calls:?}");
}

const BLOCK: &str = r#"
[stack]
name = "blocks"

[aws]
region = "us-west-2"

[aws_ec2_capacity_block.p5]
instance_type = "p5.48xlarge"
count = 2
days = 7
max_upfront_usd = 20000
timeouts = { create = "10s" }
"#;

impl Aws {
    /// What this account bought on the emulator: (capacity reservation, offering) each.
    fn purchases(&self) -> Vec<(String, String)> {
        self.bought("purchases", "CapacityBlockOfferingId")
    }

    /// The emulator's list `list` of what this account bought (`purchases`, `extensions`):
    /// (capacity reservation, the offering under `offering`) each.
    fn bought(&self, list: &str, offering: &str) -> Vec<(String, String)> {
        let body = self.control("GET", &format!("/_forge/capacity?account={}", self.account), "");
        let answer: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
        answer[list]
            .as_array()
            .unwrap_or_else(|| panic!("no `{list}` in {body}"))
            .iter()
            .map(|p| {
                (
                    p["CapacityReservationId"].as_str().unwrap().to_owned(),
                    p[offering].as_str().unwrap().to_owned(),
                )
            })
            .collect()
    }

    /// The cheapest offering `forge capacity search` lists for BLOCK's block: its id and fee.
    fn cheapest(&self) -> (String, f64) {
        let (code, stdout, stderr) = self.search(&["--instance-type", "p5.48xlarge", "--count", "2", "--days", "7", "--json"]);
        assert_eq!(code, 0, "{stderr}");
        let first = offerings(&stdout)[0].clone();
        (
            first["offering_id"].as_str().unwrap().to_owned(),
            first["upfront_fee"].as_f64().unwrap(),
        )
    }
}

/// The fee written as the plan writes it (`$10,571.90`).
fn dollars(fee: f64) -> String {
    format!("${}", super::grouped(fee, 2))
}

/// A Capacity Block is priced in the plan at the cheapest offering on sale; `up` refuses to
/// buy it without `--allow-purchase` (nothing bought), buys exactly that offering with it, then
/// re-plans to nothing; `destroy` forgets it without a cancel call, as a block cannot be
/// cancelled.
#[test]
fn a_capacity_block_is_priced_in_the_plan_and_bought_only_with_allow_purchase() {
    let aws = Aws::new();
    aws.clock("2026-12-01T00:00:00Z");
    aws.write("blocks.toml", BLOCK);
    let (offering, fee) = aws.cheapest();
    let (code, plan) = aws.forge(&["plan", "blocks.toml"]);
    assert_eq!(code, 0, "{plan}");
    let price = dollars(fee);
    assert!(plan.contains(&format!("(BUYS: {price} upfront, not refundable)")), "{plan}");
    assert!(plan.contains(&format!("offering {offering}")), "{plan}");
    assert!(plan.contains(&format!("Purchases: {price} upfront, not refundable")), "{plan}");
    assert!(
        plan.contains(&format!("; Capacity Block: {price} upfront, non-refundable")),
        "{plan}"
    );

    let (code, stderr) = aws.forge(&["up", "blocks.toml", "--yes"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains(&format!("it buys `aws_ec2_capacity_block.p5` ({price} upfront)")),
        "{stderr}"
    );
    assert!(aws.purchases().is_empty(), "nothing bought");

    aws.ok(&["up", "blocks.toml", "--yes", "--allow-purchase"]);
    let bought = aws.purchases();
    assert_eq!(bought.len(), 1, "{bought:?}");
    assert_eq!(bought[0].1, offering, "the offering the plan showed");
    assert_eq!(aws.ids("blocks.toml")["aws_ec2_capacity_block.p5"], bought[0].0);
    let (code, stderr) = aws.forge(&["plan", "blocks.toml", "--detailed-exitcode"]);
    assert_eq!(code, 0, "{stderr}");
    let (code, report) = aws.drift(&["blocks.toml"]);
    assert_eq!(code, 0, "{report:#}");

    aws.calls();
    aws.ok(&["destroy", "blocks.toml", "--yes"]);
    let calls = aws.calls();
    assert!(!calls.keys().any(|c| c.contains("Cancel")), "no cancel call: {calls:?}");
    assert!(aws.ids("blocks.toml").is_empty());
    assert_eq!(aws.purchases().len(), 1, "the block runs on, paid");
}

/// A ceiling below every offering on sale fails the plan, naming the cheapest.
#[test]
fn a_ceiling_below_every_offering_is_a_plan_error_naming_the_cheapest() {
    let aws = Aws::new();
    aws.clock("2026-12-01T00:00:00Z");
    aws.write("blocks.toml", &BLOCK.replace("max_upfront_usd = 20000", "max_upfront_usd = 1000"));
    let (_, fee) = aws.cheapest();
    let (code, stderr) = aws.forge(&["plan", "blocks.toml"]);
    assert_eq!(code, 1, "{stderr}");
    let text = stderr.replace('│', " ").split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        text.contains(&format!(
            "the cheapest Capacity Block for 2 × p5.48xlarge for 7 days costs {} upfront",
            dollars(fee)
        )),
        "{text}"
    );
    assert!(text.contains("above `max_upfront_usd = 1000`"), "{text}");
}

/// SIGKILL of `forge up --allow-purchase` at seeded moments, with EC2 showing a purchase only
/// two seconds after it, then a rerun: exactly one block bought, and it is the one recorded.
#[test]
fn sigkill_during_a_purchase_then_rerun_buys_exactly_one_block() {
    let aws = Aws::new();
    aws.clock("2026-12-01T00:00:00Z");
    aws.control(
        "POST",
        &format!("/_forge/capacity?account={}", aws.account),
        r#"{"visible_after_seconds": 2}"#,
    );
    aws.write("blocks.toml", BLOCK);
    let mut moments = crate::support::Moments::new(0x00b1_0c45);
    for _ in 0..5 {
        let child = crate::support::quiet(&mut aws.command(&["up", "blocks.toml", "--yes", "--allow-purchase"]));
        crate::support::kill_after(child, moments.next(100, 1500));
    }
    aws.ok(&["up", "blocks.toml", "--yes", "--allow-purchase"]);
    let bought = aws.purchases();
    assert_eq!(bought.len(), 1, "{bought:?}");
    assert_eq!(aws.ids("blocks.toml")["aws_ec2_capacity_block.p5"], bought[0].0);
    let (code, stderr) = aws.forge(&["plan", "blocks.toml", "--detailed-exitcode"]);
    assert_eq!(code, 0, "{stderr}");
}

/// A block EC2 does not show yet (a purchase shows only after some seconds) is not bought
/// again: the plan keeps it as recorded and says so, and `forge drift` reports it.
#[test]
fn a_block_the_refresh_does_not_see_is_never_bought_again() {
    let aws = Aws::new();
    aws.clock("2026-12-01T00:00:00Z");
    aws.control(
        "POST",
        &format!("/_forge/capacity?account={}", aws.account),
        r#"{"visible_after_seconds": 60}"#,
    );
    aws.write("blocks.toml", BLOCK);
    aws.ok(&["up", "blocks.toml", "--yes", "--allow-purchase"]);
    let (code, plan) = aws.forge(&["plan", "blocks.toml", "--detailed-exitcode"]);
    assert_eq!(code, 0, "nothing to buy: {plan}");
    let text = plan.replace('│', " ").split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        text.contains("is not shown by the cloud") && text.contains("does not buy it again"),
        "{text}"
    );
    aws.ok(&["up", "blocks.toml", "--yes", "--allow-purchase"]);
    assert_eq!(aws.purchases().len(), 1);
    let (code, report) = aws.drift(&["blocks.toml"]);
    assert_eq!(code, 2, "reported: {report:#}");
}

const RESERVATION: &str = r#"
[stack]
name = "odcr"

[aws]
region = "us-west-2"

[aws_placement_group.p5]
name = "odcr-p5"

[aws_ec2_capacity_reservation.p5]
instance_type = "p5.48xlarge"
zone = "us-west-2a"
count = 2
placement_group = "${aws_placement_group.p5.name}"
"#;

/// An On-Demand Capacity Reservation comes up in its cluster placement group (named; EC2 takes
/// its ARN), its count changes in place (one ModifyCapacityReservation, nothing made or
/// cancelled), a re-plan changes nothing, and destroy cancels it.
#[test]
fn an_on_demand_reservation_changes_its_count_in_place_and_destroy_cancels_it() {
    let aws = Aws::new();
    aws.write("odcr.toml", RESERVATION);
    aws.ok(&["up", "odcr.toml", "--yes"]);
    let id = aws.ids("odcr.toml")["aws_ec2_capacity_reservation.p5"].clone();
    assert!(id.starts_with("cr-"), "{id}");
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let live = |aws: &Aws| {
        runtime.block_on(async {
            let answer = aws
                .ec2()
                .describe_capacity_reservations()
                .capacity_reservation_ids(&id)
                .send()
                .await
                .unwrap();
            let r = answer.capacity_reservations()[0].clone();
            assert!(
                r.placement_group_arn().is_some_and(|arn| arn.ends_with(":placement-group/odcr-p5")),
                "{r:?}"
            );
            (r.total_instance_count(), r.state().map(|s| s.as_str().to_owned()))
        })
    };
    assert_eq!(live(&aws), (Some(2), Some("active".into())));
    aws.write("odcr.toml", &RESERVATION.replace("count = 2", "count = 4"));
    aws.calls();
    aws.ok(&["up", "odcr.toml", "--yes"]);
    let calls = aws.calls();
    assert_eq!(calls.get("ec2:ModifyCapacityReservation"), Some(&1), "{calls:?}");
    assert!(
        !calls
            .keys()
            .any(|c| c.contains("CreateCapacityReservation") || c.contains("Cancel")),
        "{calls:?}"
    );
    assert_eq!(live(&aws).0, Some(4));
    let (code, stderr) = aws.forge(&["plan", "odcr.toml", "--detailed-exitcode"]);
    assert_eq!(code, 0, "{stderr}");
    aws.ok(&["destroy", "odcr.toml", "--yes"]);
    assert_eq!(live(&aws).1.as_deref(), Some("cancelled"));
}

/// A purchase whose answer is lost fails saying it may have gone through, and is not retried;
/// the next plan, even with another ceiling, finds by its token the block it bought and buys
/// nothing (no `--allow-purchase` needed); `up` adopts it.
#[test]
fn a_purchase_whose_answer_is_lost_is_found_and_adopted_not_bought_again() {
    let aws = Aws::new();
    aws.clock("2026-12-01T00:00:00Z");
    aws.write("blocks.toml", BLOCK);
    let rule =
        serde_json::json!([{ "match": "ec2:PurchaseCapacityBlock", "kind": "5xx", "when": "after", "rate": 1.0, "account": aws.account }]);
    aws.control("POST", &format!("/_forge/faults?account={}", aws.account), &rule.to_string());
    let (code, stderr) = aws.forge(&["up", "blocks.toml", "--yes", "--allow-purchase"]);
    aws.control("POST", &format!("/_forge/faults?account={}", aws.account), "[]");
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("it may have gone through"), "{stderr}");
    assert_eq!(aws.purchases().len(), 1, "bought once, answer lost");
    aws.write("blocks.toml", &BLOCK.replace("max_upfront_usd = 20000", "max_upfront_usd = 25000"));
    let (code, plan) = aws.forge(&["plan", "blocks.toml"]);
    assert_eq!(code, 0, "{plan}");
    assert!(
        plan.contains("resuming an interrupted purchase") && !plan.contains("BUYS"),
        "{plan}"
    );
    aws.ok(&["up", "blocks.toml", "--yes"]);
    let bought = aws.purchases();
    assert_eq!(bought.len(), 1, "{bought:?}");
    assert_eq!(aws.ids("blocks.toml")["aws_ec2_capacity_block.p5"], bought[0].0);
}

/// An EKS cluster whose p5 group runs on the Capacity Block the stack buys, in `ZONE`.
const EKS_ON_BLOCK: &str = r#"
[stack]
name = "on-block"

[aws]
region = "us-west-2"

[aws_ec2_capacity_block.p5]
instance_type = "p5.48xlarge"
count = 2
days = 7
zone = "ZONE"
max_upfront_usd = 20000

[vpc.main]
cidr = "10.0.0.0/16"
zones = ["us-west-2a", "us-west-2b", "us-west-2c"]
nat = "single"

[eks.train]
version = "1.31"
vpc = "vpc.main"

[eks.train.nodegroups.gpu]
instance_type = "p5.48xlarge"
size = 2
zone = "ZONE"
capacity_type = "CAPACITY_BLOCK"
capacity_reservation_id = "${aws_ec2_capacity_block.p5.id}"
"#;

impl Aws {
    /// The Capacity Block extensions this account bought on the emulator: (reservation, offering).
    fn extensions(&self) -> Vec<(String, String)> {
        self.bought("extensions", "CapacityBlockExtensionOfferingId")
    }

    /// Moves this account's clock on the emulator by `seconds`.
    fn advance(&self, seconds: i64) {
        self.control(
            "POST",
            &format!("/_forge/clock?account={}", self.account),
            &serde_json::json!({ "advance_seconds": seconds }).to_string(),
        );
    }

    /// The scheduled actions on `group`: (name, start, desired capacity), by start.
    fn scheduled(&self, group: &str) -> Vec<(String, String, i32)> {
        let answer = super::runtime()
            .block_on(
                self.autoscaling()
                    .describe_scheduled_actions()
                    .auto_scaling_group_name(group)
                    .send(),
            )
            .unwrap();
        let mut actions: Vec<(String, String, i32)> = answer
            .scheduled_update_group_actions()
            .iter()
            .map(|a| {
                (
                    a.scheduled_action_name().unwrap().to_owned(),
                    a.start_time().unwrap().fmt(DateTimeFormat::DateTime).unwrap(),
                    a.desired_capacity().unwrap(),
                )
            })
            .collect();
        actions.sort_by(|a, b| a.1.cmp(&b.1));
        actions
    }

    /// The `train` cluster's `gpu` node group: its Auto Scaling group and its (min, max, desired).
    fn gpu_group(&self) -> (String, (i32, i32, i32)) {
        let group = super::runtime()
            .block_on(self.eks().describe_nodegroup().cluster_name("train").nodegroup_name("gpu").send())
            .unwrap()
            .nodegroup()
            .unwrap()
            .clone();
        let scaling = group.scaling_config().unwrap();
        let asg = group.resources().unwrap().auto_scaling_groups()[0].name().unwrap().to_owned();
        (
            asg,
            (
                scaling.min_size().unwrap(),
                scaling.max_size().unwrap(),
                scaling.desired_size().unwrap(),
            ),
        )
    }
}

/// A node group on the stack's Capacity Block is made at 0 nodes with two scheduled actions on
/// its Auto Scaling group — its size at the block's start, 0 thirty minutes before its end —
/// and `up` does not wait for nodes the block has not started; when the block starts the group
/// scales up and the next plan has nothing to do; more days buy an extension (only with
/// `--allow-purchase`) and move the scale-down, fewer are refused; destroy forgets the block
/// (no cancel call).
#[test]
fn a_node_group_on_a_capacity_block_starts_at_zero_scales_on_its_schedule_and_follows_its_extension() {
    let aws = Aws::new();
    // Readiness compares the block's start with this machine's clock: the emulator's agrees.
    let now = std::time::SystemTime::now();
    aws.clock(&humantime::format_rfc3339_seconds(now).to_string());
    let now = now.duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
    // Which zones have blocks on sale follows the clock: the block and its group go where
    // the cheapest is.
    let (code, stdout, stderr) = aws.search(&["--instance-type", "p5.48xlarge", "--count", "2", "--days", "7", "--json"]);
    assert_eq!(code, 0, "{stderr}");
    let zone = offerings(&stdout)[0]["zone"].as_str().unwrap().to_owned();
    let stack = |days: &str| EKS_ON_BLOCK.replace("ZONE", &zone).replace("days = 7", days);
    aws.write("on-block.toml", &stack("days = 7"));
    let stderr = aws.ok(&["up", "on-block.toml", "--yes", "--allow-purchase"]);
    assert_eq!(aws.purchases().len(), 1);
    let block = super::runtime()
        .block_on(
            aws.ec2()
                .describe_capacity_reservations()
                .capacity_reservation_ids(aws.ids("on-block.toml")["aws_ec2_capacity_block.p5"].clone())
                .send(),
        )
        .unwrap()
        .capacity_reservations()[0]
        .clone();
    let date = |d: Option<&DateTime>| d.unwrap().fmt(DateTimeFormat::DateTime).unwrap();
    let (start, end) = (date(block.start_date()), date(block.end_date()));
    assert!(
        stderr.contains(&format!("runs on a Capacity Block that starts at {start}")),
        "{stderr}"
    );

    let (asg, scaling) = aws.gpu_group();
    assert_eq!(scaling, (0, 2, 0), "nothing runs before the block starts");
    let end_less_30 = DateTime::from_secs(block.end_date().unwrap().secs() - 30 * 60)
        .fmt(DateTimeFormat::DateTime)
        .unwrap();
    assert_eq!(
        aws.scheduled(&asg),
        vec![
            ("forge-block_start".to_owned(), start.clone(), 2),
            ("forge-block_end".to_owned(), end_less_30, 0)
        ],
        "block {start} → {end}"
    );

    // The block starts: the start action runs (and is gone, as EC2 Auto Scaling deletes a
    // one-time action once it has run); the group has its two nodes; nothing to plan.
    aws.advance(block.start_date().unwrap().secs() - now + 60);
    let (_, scaling) = aws.gpu_group();
    assert_eq!(scaling.2, 2, "scaled up at the start");
    assert_eq!(aws.scheduled(&asg).len(), 1, "the end action remains");
    let (code, plan) = aws.forge(&["plan", "on-block.toml", "--detailed-exitcode"]);
    assert_eq!(code, 0, "{plan}");
    let out = aws.command(&["drift", "on-block.toml", "--markdown"]).output().unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{report}");
    assert!(
        report.contains("- `aws_ec2_capacity_block.p5` (`") && report.contains(&format!("is active until {end}")),
        "the block's state, in a report with no drift: {report}"
    );

    // Raising `days` on the live block buys an extension, priced in the plan and bought only
    // with `--allow-purchase`; the scale-down follows the new end; shortening is refused.
    aws.write("on-block.toml", &stack("days = 14"));
    let (code, plan) = aws.forge(&["plan", "on-block.toml"]);
    assert_eq!(code, 0, "{plan}");
    assert!(
        plan.contains("(BUYS: $") && plan.contains("an extension of Capacity Block"),
        "{plan}"
    );
    let (code, stderr) = aws.forge(&["up", "on-block.toml", "--yes"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(aws.extensions().is_empty(), "nothing bought without --allow-purchase");
    aws.ok(&["up", "on-block.toml", "--yes", "--allow-purchase"]);
    assert_eq!(aws.extensions().len(), 1);
    let new_end = block.start_date().unwrap().secs() + 14 * 24 * 3600;
    let drain_at = DateTime::from_secs(new_end - 30 * 60).fmt(DateTimeFormat::DateTime).unwrap();
    assert_eq!(aws.scheduled(&asg), vec![("forge-block_end".to_owned(), drain_at, 0)]);
    let (code, plan) = aws.forge(&["plan", "on-block.toml", "--detailed-exitcode"]);
    assert_eq!(code, 0, "{plan}");
    aws.write("on-block.toml", &stack("days = 3"));
    let (code, stderr) = aws.forge(&["plan", "on-block.toml"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("a Capacity Block cannot be shortened (14 → 3 days)"), "{stderr}");
    aws.write("on-block.toml", &stack("days = 14"));

    aws.calls();
    aws.ok(&["destroy", "on-block.toml", "--yes"]);
    let calls = aws.calls();
    assert!(!calls.keys().any(|c| c.contains("CancelCapacityReservation")), "{calls:?}");
    assert!(calls.keys().any(|c| c.contains("DeleteScheduledAction")), "{calls:?}");
    assert_eq!(aws.purchases().len(), 1, "the block runs on, paid");
}

/// A node group or a Slurm queue that would outgrow the stack's Capacity Block it runs on is a
/// load error at its size, naming the block and its count.
#[test]
fn a_group_larger_than_its_capacity_block_is_refused_at_its_size() {
    let aws = Aws::new();
    aws.write(
        "big.toml",
        &EKS_ON_BLOCK
            .replace("ZONE", "us-west-2c")
            .replace("size = 2\nzone", "size = 4\nzone"),
    );
    let (code, stderr) = aws.forge(&["validate", "big.toml"]);
    assert_eq!(code, 1, "{stderr}");
    let flat = stderr.replace('│', " ").split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        flat.contains("`nodegroups.gpu.size` reaches 4 nodes, but its Capacity Block `aws_ec2_capacity_block.p5` holds 2 instances"),
        "{stderr}"
    );
    let slurm = include_str!("../../../stacks/nemo-slurm-p5.toml");
    let on_block =
        format!("{slurm}\n[aws_ec2_capacity_block.p5]\ninstance_type = \"p5.48xlarge\"\ncount = 1\ndays = 7\nmax_upfront_usd = 20000\n");
    let reservation_line = slurm
        .lines()
        .find(|l| l.trim_start().starts_with("# capacity_reservation_id"))
        .expect("the Slurm seed shows where a queue names its reservation");
    aws.write(
        "slurm.toml",
        &on_block.replacen(
            reservation_line,
            "capacity_reservation_id = \"${aws_ec2_capacity_block.p5.id}\"\ncapacity_type = \"CAPACITY_BLOCK\"",
            1,
        ),
    );
    let (code, stderr) = aws.forge(&["validate", "slurm.toml"]);
    assert_eq!(code, 1, "{stderr}");
    let flat = stderr.replace('│', " ").split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        flat.contains("but its Capacity Block `aws_ec2_capacity_block.p5` holds 1 instances"),
        "{stderr}"
    );
}
