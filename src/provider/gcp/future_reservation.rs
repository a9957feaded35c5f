//! `google_compute_future_reservation`: a calendar-mode future reservation — GPU machines
//! (A3 Ultra, A4, A4X, …) reserved in one zone for a fixed window of up to 90 days, Google's
//! answer to a Capacity Block. forge submits the request, waits for Compute to approve it
//! (a declined or failed request is an error with Compute's reason), and records its state.
//! At the start Compute delivers a reservation named `reservation_name` (the request's name
//! unless set) that node pools consume (`reservation = "${…reservation_name}"`); at the end it
//! is deleted with its VMs unless `auto_delete_auto_created_reservations = false`.
//!
//! A request that has not started is cancelled, then deleted, by `destroy` (nothing is charged
//! for it); one whose window has started cannot be cancelled: `destroy` says so and forgets
//! it, and it runs to its end. A request cannot change once approved: every attribute makes
//! a new one.

use super::collection::{self, Scope};
use super::marker::marked_description;
use super::operation::{OPERATION_TIMEOUT, fresh_request_id, wait_operation};
use crate::provider::{Cloud, Created, Ctx, Observed, Poll, ProviderError, Resource, parse, timeout, wait_until};
use crate::schema::attributes;
use google_cloud_compute_v1::model::future_reservation::{DeploymentType, PlanningStatus, ReservationMode};
use google_cloud_compute_v1::model::future_reservation_status::ProcurementStatus;
use google_cloud_compute_v1::model::{
    AllocationSpecificSKUAllocationReservedInstanceProperties, FutureReservation as Model, FutureReservationSpecificSKUProperties,
    FutureReservationTimeWindow,
};
use serde_json::{Value, json};
use std::time::Duration;

/// The `google_compute_future_reservation` kind.
pub(super) struct FutureReservation;

attributes! {
    kind FutureReservation, spec "google_compute_future_reservation",
        outputs [id, name = attribute, zone = attribute, reservation_name = computed delivered_name, self_link, state],
        extra [timeouts];
    struct Config {
        name: String [replace],
        zone: String [replace],
        machine_type: String [replace],
        count: i64 [replace],
        start_time: String [replace],
        end_time: String [replace],
        #[serde(default = "yes")] auto_delete_auto_created_reservations: bool [replace],
        reservation_name: Option<String> [replace],
        description: Option<String> [replace],
    }
}

fn yes() -> bool {
    true
}

/// The name of the reservation the request delivers: `reservation_name`, else its own name.
fn delivered_name(config: &Value, _prior: Option<&Value>) -> Value {
    config
        .get("reservation_name")
        .or_else(|| config.get("name"))
        .cloned()
        .unwrap_or(Value::Null)
}

compute_collection!(
    /// The future reservations of a zone.
    FutureReservations: Model, future_reservations.set_future_reservation, "future reservation", set_zone);

/// How long Compute may take to approve a request, by default.
const APPROVAL_TIMEOUT: Duration = Duration::from_secs(10 * 60);

/// A request's procurement status as Compute names it (`APPROVED`, `FULFILLED`, …).
fn state(r: &Model) -> Option<&str> {
    r.status.as_ref()?.procurement_status.as_ref()?.name()
}

fn outputs(id: &str, r: &Model) -> Value {
    json!({
        "id": id,
        "name": r.name,
        "zone": Scope::of_id(id).0.location(),
        "reservation_name": r.reservation_name.clone().or_else(|| r.name.clone()),
        "self_link": r.self_link,
        "state": state(r),
    })
}

/// Whether Compute has taken the request: approved (or further on), declined or failed (with
/// its reason), or still deciding.
fn approved(r: &Model) -> Poll<Model> {
    let status = r.status.as_ref().and_then(|s| s.procurement_status.clone());
    match status {
        Some(
            ProcurementStatus::Approved
            | ProcurementStatus::Committed
            | ProcurementStatus::Procuring
            | ProcurementStatus::Provisioning
            | ProcurementStatus::Fulfilled,
        ) => Poll::Done(r.clone()),
        Some(s @ (ProcurementStatus::Declined | ProcurementStatus::Failed | ProcurementStatus::Cancelled)) => Poll::Failed(format!(
            "Compute {} the future reservation `{}`: no capacity for that window; try another window or zone",
            match s {
                ProcurementStatus::Cancelled => "cancelled",
                ProcurementStatus::Declined => "declined",
                _ => "could not fulfil",
            },
            r.name.as_deref().unwrap_or_default()
        )),
        other => Poll::Pending(
            other
                .and_then(|s| s.name().map(str::to_owned))
                .unwrap_or_else(|| "PENDING_APPROVAL".into()),
        ),
    }
}

/// Where a request stands, in words: its procurement status and what it means.
fn life(r: &Model) -> String {
    let window = r.time_window.as_ref();
    let (start, end) = (
        window.and_then(|w| w.start_time.as_deref()).unwrap_or("?"),
        window.and_then(|w| w.end_time.as_deref()).unwrap_or("?"),
    );
    let reservation = r.reservation_name.as_deref().or(r.name.as_deref()).unwrap_or_default();
    match state(r).unwrap_or("PENDING_APPROVAL") {
        "APPROVED" => format!("APPROVED: reservation `{reservation}` is delivered at {start}, until {end}"),
        "FULFILLED" => format!("FULFILLED: reservation `{reservation}` runs until {end}"),
        other => format!("{other} ({start} → {end})"),
    }
}

/// Whether a request's window has started, by its status or its start time: Compute delivers,
/// and it can no longer be cancelled.
fn started(r: &Model) -> bool {
    let start = r
        .time_window
        .as_ref()
        .and_then(|w| humantime::parse_rfc3339_weak(w.start_time.as_deref()?).ok());
    start.is_some_and(|t| t <= std::time::SystemTime::now())
        || matches!(
            r.status.as_ref().and_then(|s| s.procurement_status.clone()),
            Some(ProcurementStatus::Provisioning | ProcurementStatus::Fulfilled | ProcurementStatus::FailedPartiallyFulfilled)
        )
}

/// An RFC 3339 time to the second in UTC (`2026-12-02T11:30:00Z`), however it was written
/// (`+00:00`, fractions); as written when it does not parse (the API refuses it then).
fn canonical(time: &str) -> String {
    humantime::parse_rfc3339_weak(time).map_or_else(|_| time.to_owned(), |t| humantime::format_rfc3339_seconds(t).to_string())
}

impl Resource for FutureReservation {
    /// The reservation it delivers bills its machines from its start, a price forge does not
    /// read yet.
    fn meter(&self, _sight: &crate::cost::Sight) -> Option<crate::cost::Meter> {
        Some(crate::cost::Meter::Unpriced {
            reason: "forge does not price future reservations yet".into(),
        })
    }
    /// The window's times as [`canonical`], as `read` reports them.
    fn comparable(&self, _id: &str, config: &Value) -> Value {
        let mut config = config.clone();
        for key in ["start_time", "end_time"] {
            if let Some(time) = config.get(key).and_then(Value::as_str) {
                config[key] = json!(canonical(time));
            }
        }
        config
    }

    async fn create(&self, ctx: &Ctx, token: &str, config: &Value) -> Result<Created, ProviderError> {
        let cfg: Config = parse(ctx, config)?;
        let gcp = ctx.cloud.gcp().await?;
        let scope = Scope::of::<FutureReservations>(gcp, Some(&cfg.zone))?;
        let body = Model::new()
            .set_name(&cfg.name)
            .set_description(marked_description(ctx, token, cfg.description.as_deref()))
            .set_specific_sku_properties(
                FutureReservationSpecificSKUProperties::new()
                    .set_instance_properties(
                        AllocationSpecificSKUAllocationReservedInstanceProperties::new().set_machine_type(&cfg.machine_type),
                    )
                    .set_total_count(cfg.count),
            )
            .set_time_window(
                FutureReservationTimeWindow::new()
                    .set_start_time(&cfg.start_time)
                    .set_end_time(&cfg.end_time),
            )
            .set_planning_status(PlanningStatus::Submitted)
            .set_reservation_mode(ReservationMode::Calendar)
            .set_deployment_type(DeploymentType::Dense)
            .set_specific_reservation_required(true)
            .set_auto_delete_auto_created_reservations(cfg.auto_delete_auto_created_reservations)
            .set_reservation_name(cfg.reservation_name.as_deref().unwrap_or(&cfg.name));
        let created = collection::create::<FutureReservations>(ctx, gcp, token, &scope, body, config, outputs).await?;
        let limit = timeout(config, "create", APPROVAL_TIMEOUT);
        let request = wait_until(ctx, limit, || async {
            let live = collection::reread::<FutureReservations>(gcp, &created.id).await?;
            Ok(approved(&live))
        })
        .await?;
        Ok(Created {
            outputs: outputs(&created.id, &request),
            id: created.id,
        })
    }

    async fn read(&self, cloud: &Cloud, stack: &str, ids: &[String]) -> Result<Vec<Observed>, ProviderError> {
        collection::read::<FutureReservations>(cloud.gcp().await?, stack, ids, |r, own| {
            let sku = r.specific_sku_properties.as_ref();
            let window = r.time_window.as_ref();
            json!({
                "name": r.name,
                "zone": r.zone.as_deref().map(collection::last_segment),
                "machine_type": sku.and_then(|s| s.instance_properties.as_ref()?.machine_type.clone()),
                "count": sku.and_then(|s| s.total_count),
                "start_time": window.and_then(|w| w.start_time.as_deref()).map(canonical),
                "end_time": window.and_then(|w| w.end_time.as_deref()).map(canonical),
                "auto_delete_auto_created_reservations": r.auto_delete_auto_created_reservations,
                "description": own,
                (crate::plan::drift::LIFE): life(r),
            })
        })
        .await
    }

    async fn find(&self, ctx: &Ctx, token: &str, config: &Value) -> Result<Option<String>, ProviderError> {
        let cfg: Config = parse(ctx, config)?;
        collection::find::<FutureReservations>(ctx, token, &cfg.name, Some(&cfg.zone)).await
    }

    /// Never called: every attribute makes a new request.
    async fn update(&self, _ctx: &Ctx, id: &str, _old: &Value, _new: &Value) -> Result<Value, ProviderError> {
        Err(ProviderError::permanent(format!(
            "future reservation `{id}` cannot change once approved; forge replaces it"
        )))
    }

    /// Cancels a request that has not started, then deletes it; forgets one that has (Compute
    /// cannot cancel it: it runs to its end).
    async fn delete(&self, ctx: &Ctx, id: &str, config: &Value) -> Result<(), ProviderError> {
        let gcp = ctx.cloud.gcp().await?;
        let (scope, name) = Scope::of_id(id);
        let Some(live) = collection::get::<FutureReservations>(gcp, &scope, name).await? else {
            return Ok(());
        };
        if started(&live) {
            (ctx.status)(&format!(
                "future reservation {name} has started and cannot be cancelled: forgotten; it runs until its end"
            ));
            return Ok(());
        }
        let cancelled = matches!(
            live.status.as_ref().and_then(|s| s.procurement_status.clone()),
            Some(ProcurementStatus::Cancelled | ProcurementStatus::Failed | ProcurementStatus::Declined | ProcurementStatus::Drafting)
        );
        if !cancelled {
            let op = gcp
                .future_reservations
                .cancel()
                .set_project(&gcp.project)
                .set_zone(scope.location())
                .set_future_reservation(name)
                .set_request_id(fresh_request_id())
                .send()
                .await
                .map_err(|e| super::error(gcp, "futureReservations.cancel", e))?;
            wait_operation(
                ctx,
                gcp,
                "futureReservations.cancel",
                op,
                timeout(config, "delete", OPERATION_TIMEOUT),
            )
            .await?;
        }
        collection::delete::<FutureReservations>(ctx, gcp, id, config).await
    }
}
