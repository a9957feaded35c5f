//! Long-running operations: the poll every service's wait is made of ([`wait_done`]), and
//! Compute's: the wait on one, which checks how it ended (Compute reports a failed insert or an
//! in-use delete as a DONE operation with an `error`), and the insert whose `requestId` makes a
//! repeated create get the first one's operation.

use super::{Clients, error};
use crate::provider::{Ctx, Poll, ProviderError, wait_until};
use google_cloud_compute_v1::model::Operation;
use google_cloud_compute_v1::model::operation::Status;
use std::future::Future;
use std::time::Duration;

/// Compute's "in use" failure: a delete that another object still blocks (the message names it).
const IN_USE: &str = "RESOURCE_IN_USE_BY_ANOTHER_RESOURCE";

/// Operation error codes a later try may not hit: the object is in use while its dependents go,
/// an internal error, or a resource not ready yet.
const RETRYABLE: &[&str] = &[IN_USE, "INTERNAL_ERROR", "RESOURCE_NOT_READY", "RATE_LIMIT_EXCEEDED"];

/// How long an operation on a network object may take by default.
pub(super) const OPERATION_TIMEOUT: Duration = Duration::from_secs(10 * 60);

/// Waits (at most `limit`) until a long-running operation of any service is done, and returns
/// it as it ended: `op` itself when it already is, else what `get` reads of it, polled while
/// `done` says it is not and shown meanwhile as `state` names it.
pub(super) async fn wait_done<Op, Fut>(
    ctx: &Ctx,
    limit: Duration,
    op: Op,
    done: impl Fn(&Op) -> bool,
    state: impl Fn(&Op) -> String,
    get: impl Fn() -> Fut,
) -> Result<Op, ProviderError>
where
    Fut: Future<Output = Result<Op, ProviderError>>,
{
    let (done, state, get) = (&done, &state, &get);
    let mut first = Some(op).filter(|op| done(op));
    wait_until(ctx, limit, || {
        let seen = first.take();
        async move {
            if let Some(op) = seen {
                return Ok(Poll::Done(op));
            }
            let next = get().await?;
            Ok(if done(&next) {
                Poll::Done(next)
            } else {
                Poll::Pending(state(&next))
            })
        }
    })
    .await
}

/// Waits until `op` is DONE (at most `limit`), polling it through the global, regional or
/// zonal operations client, and returns it; an operation that ends with an error (Compute's way of
/// failing an insert, or of refusing to delete something in use) is an error naming `what`.
pub(super) async fn wait_operation(
    ctx: &Ctx,
    gcp: &Clients,
    what: &str,
    op: Operation,
    limit: Duration,
) -> Result<Operation, ProviderError> {
    let name = op.name.clone().unwrap_or_default();
    let region = op.region.as_deref().map(|r| super::collection::last_segment(r).to_owned());
    let zone = op.zone.as_deref().map(|z| super::collection::last_segment(z).to_owned());
    let done = wait_done(
        ctx,
        limit,
        op,
        |op| op.status == Some(Status::Done),
        |op| op.status.as_ref().and_then(|s| s.name()).unwrap_or("PENDING").to_owned(),
        || async {
            let sent = match (&region, &zone) {
                (_, Some(zone)) => {
                    gcp.zone_operations
                        .get()
                        .set_project(&gcp.project)
                        .set_zone(zone)
                        .set_operation(&name)
                        .send()
                        .await
                }
                (Some(region), None) => {
                    gcp.region_operations
                        .get()
                        .set_project(&gcp.project)
                        .set_region(region)
                        .set_operation(&name)
                        .send()
                        .await
                }
                (None, None) => {
                    gcp.global_operations
                        .get()
                        .set_project(&gcp.project)
                        .set_operation(&name)
                        .send()
                        .await
                }
            };
            sent.map_err(|e| error(gcp, "operations.get", e))
        },
    )
    .await?;
    let errors = done.error.as_ref().map(|e| e.errors.as_slice()).unwrap_or_default();
    if errors.is_empty() {
        return Ok(done);
    }
    let codes: Vec<&str> = errors.iter().filter_map(|e| e.code.as_deref()).collect();
    let text: Vec<String> = errors
        .iter()
        .map(|e| {
            format!(
                "{}: {}",
                e.code.as_deref().unwrap_or("ERROR"),
                e.message.as_deref().unwrap_or_default()
            )
        })
        .collect();
    let hint = if codes.contains(&IN_USE) {
        " — delete what uses it first, or wait for it to go"
    } else {
        ""
    };
    Err(ProviderError {
        message: format!("{what}: the operation failed: {}{hint} ({})", text.join("; "), gcp.context),
        retryable: codes.iter().any(|c| RETRYABLE.contains(c)),
        throttled: false,
    })
}

/// Inserts an object and waits for it: the create's `token` is the `requestId`, so a repeated
/// insert (a retry after a lost answer, a resumed create) gets the first one's operation instead
/// of a second object. When that operation had already failed (a repeat of a failed insert),
/// the insert is sent once more under a fresh id: the failed one made nothing.
pub(super) async fn insert<F, Fut>(
    ctx: &Ctx,
    gcp: &Clients,
    what: &str,
    token: &str,
    limit: Duration,
    send: F,
) -> Result<Operation, ProviderError>
where
    F: Fn(String) -> Fut,
    Fut: std::future::Future<Output = Result<Operation, google_cloud_compute_v1::Error>>,
{
    let op = send(token.to_owned()).await.map_err(|e| error(gcp, what, e))?;
    let op = if op.status == Some(Status::Done) && op.error.is_some() {
        send(fresh_request_id()).await.map_err(|e| error(gcp, what, e))?
    } else {
        op
    };
    wait_operation(ctx, gcp, what, op, limit).await
}

/// A fresh request id, for calls whose repeat is harmless (updates, deletes): a repeated
/// `requestId` answers the first call's operation, which a retry after a failure must not get.
pub(super) fn fresh_request_id() -> String {
    uuid::Uuid::new_v4().to_string()
}
