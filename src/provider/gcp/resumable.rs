//! What the kinds whose objects a long operation makes and that show a status — a GKE cluster or
//! node pool, a Filestore instance — do the same way, written once over their [`Tracked`] calls:
//! the get by id, the wait until ready, the delete that waits until the object is gone, and the
//! create. Such APIs take no request id, so a create that ran before (a retry after a lost
//! answer, a run killed mid-wait, a create that failed) is recognised by forge's mark on the
//! object.

use super::marker::name_taken;
use super::{Clients, found};
use crate::provider::{Ctx, Poll, ProviderError, wait_gone, wait_until};
use std::future::Future;
use std::time::Duration;

/// A client call's own result.
type Sent<T> = Result<T, google_cloud_compute_v1::Error>;

/// One such kind: its calls by id and how its objects' status reads, so that everything else
/// about its objects is written once, in this module.
pub(super) trait Tracked {
    /// The API's object.
    type Object;
    /// The API's long-running operation.
    type Operation;
    /// One object, in messages (`GKE cluster`).
    const WHAT: &'static str;
    /// The collection in the names of its calls (`clusters`).
    const PATH: &'static str;
    /// The state shown while a create is waited for, when the API names none.
    const MAKING: &'static str;
    /// The state shown while a delete is waited for, when the API names none.
    const GOING: &'static str;
    /// Maps the error of a failed call (`what`: `clusters.get`).
    fn error(gcp: &Clients, what: &str, err: google_cloud_compute_v1::Error) -> ProviderError;
    /// Maps the error of a refused change of the object `id` (`what`: `clusters.delete`),
    /// which may ask the API why (a GKE cluster busy with another operation); by default as
    /// [`Tracked::error`].
    fn refused(gcp: &Clients, _id: &str, what: &str, err: google_cloud_compute_v1::Error) -> impl Future<Output = ProviderError> + Send {
        std::future::ready(Self::error(gcp, what, err))
    }
    /// Gets the object `id` names.
    fn get(gcp: &Clients, id: &str) -> impl Future<Output = Sent<Self::Object>> + Send;
    /// Deletes the object `id` names.
    fn delete(gcp: &Clients, id: &str) -> impl Future<Output = Sent<Self::Operation>> + Send;
    /// Waits until `op`, started by the call `what`, is done (at most `limit`), and fails with
    /// its error if it has one.
    fn wait(
        ctx: &Ctx,
        gcp: &Clients,
        what: &str,
        op: Self::Operation,
        limit: Duration,
    ) -> impl Future<Output = Result<(), ProviderError>> + Send;
    /// The object's state, as the API names it.
    fn state(object: &Self::Object) -> Option<&str>;
    /// Whether the object is ready for use.
    fn ready(object: &Self::Object) -> bool;
    /// Whether the object is in ERROR (as a failed create leaves it: it cannot be repaired).
    fn broken(object: &Self::Object) -> bool;
    /// The message for the object `id` in ERROR.
    fn failure(gcp: &Clients, id: &str, object: &Self::Object) -> String;
}

/// The object `id` names, or `None`.
pub(super) async fn get<K: Tracked>(gcp: &Clients, id: &str) -> Result<Option<K::Object>, ProviderError> {
    found(K::get(gcp, id).await, |e| K::error(gcp, &format!("{}.get", K::PATH), e))
}

/// Waits until the object `id` is ready and returns it; one in ERROR fails with the API's
/// message.
pub(super) async fn wait_ready<K: Tracked>(ctx: &Ctx, gcp: &Clients, id: &str, limit: Duration) -> Result<K::Object, ProviderError> {
    wait_until(ctx, limit, || async {
        Ok(match get::<K>(gcp, id).await? {
            Some(o) if K::ready(&o) => Poll::Done(o),
            Some(o) if K::broken(&o) => Poll::Failed(K::failure(gcp, id, &o)),
            Some(o) => Poll::Pending(K::state(&o).unwrap_or(K::MAKING).to_owned()),
            None => Poll::Failed(format!("{} `{id}` disappeared while forge waited for it", K::WHAT)),
        })
    })
    .await
}

/// Deletes the object `id` and waits until it is gone; one already gone is a success.
pub(super) async fn delete<K: Tracked>(ctx: &Ctx, gcp: &Clients, id: &str, limit: Duration) -> Result<(), ProviderError> {
    let what = format!("{}.delete", K::PATH);
    let op = match K::delete(gcp, id).await {
        Ok(op) => op,
        Err(e) if super::not_found(&e) => return Ok(()),
        Err(e) => return Err(K::refused(gcp, id, &what, e).await),
    };
    K::wait(ctx, gcp, &what, op, limit).await?;
    wait_gone(ctx, limit, || async {
        Ok(get::<K>(gcp, id).await?.map(|o| K::state(&o).unwrap_or(K::GOING).to_owned()))
    })
    .await
}

/// Creates the object `id` (named `name`), or resumes the create that made it, and returns it
/// ready: an object of that name is waited for when `owned` finds the mark of this create on it
/// (after deleting it when its create failed), and is someone else's otherwise. `send` makes
/// the create call (or the error of a block that cannot be sent), which the API answers with
/// an operation, or HTTP 409 when the object exists: an earlier try's, or someone's.
pub(super) async fn create<K: Tracked, F>(
    ctx: &Ctx,
    gcp: &Clients,
    id: &str,
    name: &str,
    limit: Duration,
    owned: impl Fn(&K::Object) -> bool,
    send: impl FnOnce() -> Result<F, ProviderError>,
) -> Result<K::Object, ProviderError>
where
    F: Future<Output = Sent<K::Operation>>,
{
    if let Some(existing) = get::<K>(gcp, id).await? {
        if !owned(&existing) {
            return Err(name_taken(ctx, K::WHAT, name));
        }
        if !K::broken(&existing) {
            return wait_ready::<K>(ctx, gcp, id, limit).await;
        }
        (ctx.status)(&format!("deleting the {} its failed create left", K::WHAT));
        delete::<K>(ctx, gcp, id, limit).await?;
    }
    let what = format!("{}.create", K::PATH);
    match send()?.await {
        Ok(op) => K::wait(ctx, gcp, &what, op, limit).await?,
        Err(e) if e.http_status_code() == Some(409) => {
            if !get::<K>(gcp, id).await?.is_some_and(|object| owned(&object)) {
                return Err(name_taken(ctx, K::WHAT, name));
            }
        }
        Err(e) => return Err(K::refused(gcp, id, &what, e).await),
    }
    wait_ready::<K>(ctx, gcp, id, limit).await
}

/// `id`, when the object it names carries the mark of this create (`owned`).
pub(super) async fn find<K: Tracked>(
    gcp: &Clients,
    id: String,
    owned: impl Fn(&K::Object) -> bool,
) -> Result<Option<String>, ProviderError> {
    Ok(get::<K>(gcp, &id).await?.filter(|object| owned(object)).map(|_| id))
}
