//! Calendar-mode future reservations: requested, approved and shown in plans and drift; a GKE
//! A3 Ultra pool on the reservation one delivers comes up once it has started; destroy cancels
//! a request that has not started and forgets one that has.
use super::Gcp;
use serde_json::json;
use std::time::{Duration, SystemTime};

/// `when` as RFC 3339 to the second.
fn rfc3339(when: SystemTime) -> String {
    humantime::format_rfc3339_seconds(when).to_string()
}

/// The A3 Ultra seed stack with its pool of 2 on the future reservation `h200` (DRANET: no RDMA
/// networks to make), and a second request, `later`, that nothing uses yet.
fn stack(gcp: &Gcp, start: SystemTime) -> String {
    let day = Duration::from_secs(24 * 3600);
    let seed = include_str!("../../../stacks/nemo-gke-a3-ultra.toml")
        .replace("nemo-training", &gcp.project)
        .replace("gpu_nodes = 4", "gpu_nodes = 2")
        .replace("# rdma = \"dranet\"", "rdma = \"dranet\"")
        .replace(
            "reservation = \"nemo-a3u-reservation\"",
            "reservation = \"${google_compute_future_reservation.h200.reservation_name}\"",
        );
    format!(
        r#"{seed}
[google_compute_future_reservation.h200]
name = "h200"
zone = "us-central1-b"
machine_type = "a3-ultragpu-8g"
count = 2
start_time = "{start}"
end_time = "{end}"

[google_compute_future_reservation.later]
name = "later"
zone = "us-central1-b"
machine_type = "a3-ultragpu-8g"
count = 2
start_time = "{later_start}"
end_time = "{later_end}"
"#,
        start = rfc3339(start),
        end = rfc3339(start + 7 * day),
        later_start = rfc3339(start + 30 * day),
        later_end = rfc3339(start + 37 * day),
    )
}

/// Before its window the request is approved and the pool on its reservation cannot come up
/// (GKE refuses a reservation that has not started); once it has, `up` brings the pool up with
/// its GPUs, plan and drift say where each request stands, and destroy cancels and deletes the
/// request that has not started but forgets the one that has (it runs to its end).
#[test]
fn a_pool_on_a_future_reservation_comes_up_once_its_window_starts() {
    let gcp = Gcp::new();
    let now = SystemTime::now();
    let clock = format!("/_forge/clock?account={}", gcp.project);
    crate::support::request("POST", &clock, &json!({ "now": rfc3339(now) }).to_string());
    let start = now + Duration::from_secs(2 * 3600);
    gcp.write("fr.toml", &stack(&gcp, start));

    let (code, stderr) = gcp.forge(&["up", "fr.toml", "--yes"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(super::flat(&stderr).contains("reservation \"h200\" is not active"), "{stderr}");
    let (status, request) = gcp.compute("GET", "zones/us-central1-b/futureReservations/h200", json!(null));
    assert_eq!(status, 200, "{request}");
    assert_eq!(request["status"]["procurementStatus"], "APPROVED");
    assert_eq!(request["reservationMode"], "CALENDAR");
    let (code, plan) = gcp.forge(&["plan", "fr.toml"]);
    assert_eq!(code, 0, "{plan}");
    let plan = super::flat(&plan);
    assert!(
        plan.contains("`google_compute_future_reservation.h200` (projects/")
            && plan.contains("is APPROVED: reservation `h200` is delivered at"),
        "{plan}"
    );

    crate::support::request("POST", &clock, &json!({ "advance_seconds": 3 * 3600 }).to_string());
    gcp.ok(&["up", "fr.toml", "--yes"]);
    let pool = gcp.located("container", "us-central1/clusters/nemo-a3u/nodePools/a3u");
    assert_eq!(pool["status"], "RUNNING", "{pool}");
    assert_eq!(pool["config"]["reservationAffinity"]["values"], json!(["h200"]), "{pool}");
    let (code, report) = gcp.drift("fr.toml");
    assert_eq!(code, 0, "{report:#}");
    let lives = report["lives"].as_array().cloned().unwrap_or_default();
    let state = |address: &str| {
        lives
            .iter()
            .find(|l| l["address"] == address)
            .map(|l| l["state"].as_str().unwrap().to_owned())
    };
    assert!(
        state("google_compute_future_reservation.h200").is_some_and(|s| s.starts_with("FULFILLED")),
        "{report:#}"
    );
    assert!(
        state("google_compute_future_reservation.later").is_some_and(|s| s.starts_with("APPROVED")),
        "{report:#}"
    );

    gcp.calls();
    gcp.ok(&["destroy", "fr.toml", "--yes"]);
    let calls = gcp.calls();
    assert_eq!(calls.get("compute:futureReservations.cancel"), Some(&1), "{calls:?}");
    let left: Vec<String> = gcp.names("zones/us-central1-b/futureReservations");
    assert_eq!(left, vec!["h200".to_owned()], "the started request runs to its end");
}
