//! `forge capacity search` against the emulator's Capacity Block offerings: what EC2 sells,
//! cheapest first, checked against EC2's rules before any call.
use super::Aws;
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
        let out = self.command(&all).output().unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
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

/// An UltraServer type is searched by whole UltraServers; a type EC2 sells no blocks of finds
/// none and says what to try.
#[test]
fn ultraservers_are_sold_whole_and_other_types_find_nothing() {
    let aws = Aws::new();
    aws.clock("2026-12-01T00:00:00Z");
    let (code, stdout, stderr) = aws.search(&["--instance-type", "p6e-gb200.36xlarge", "--count", "18", "--days", "14", "--json"]);
    assert_eq!(code, 0, "{stderr}");
    let found = offerings(&stdout);
    assert!(!found.is_empty(), "{stdout}");
    assert!(
        found.iter().all(|o| o["ultraservers"] == serde_json::json!(["u-p6e-gb200x72", 1])),
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
