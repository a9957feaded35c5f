//! The create of an object that a long operation makes and that shows a status — a GKE cluster
//! or node pool, a Filestore instance — written once: such APIs take no request id, so a create
//! that ran before (a retry after a lost answer, a run killed mid-wait, a create that failed) is
//! recognised by forge's mark on the object.

use super::marker::name_taken;
use crate::provider::{Ctx, ProviderError};
use std::future::Future;

/// How a create call ended.
pub(super) enum Sent {
    /// The operation it started is done.
    Made,
    /// The API answered that the object exists (HTTP 409): an earlier try's, or someone's.
    Exists,
}

/// The calls of one kind's create, as closures over its client, id and config.
pub(super) struct Steps<Get, Owned, Failed, Ready, Delete, Send> {
    /// Reads the object, if it exists.
    pub get: Get,
    /// Whether an object carries the mark of this create.
    pub owned: Owned,
    /// Whether an object is left in ERROR by a failed create (it cannot be repaired: it is
    /// deleted and made again).
    pub failed: Failed,
    /// Waits until the object is ready and returns it.
    pub ready: Ready,
    /// Deletes the object and waits until it is gone.
    pub delete: Delete,
    /// Sends the create and waits for its operation.
    pub send: Send,
}

impl<Get, Owned, Failed, Ready, Delete, Send> Steps<Get, Owned, Failed, Ready, Delete, Send> {
    /// Creates the `what` named `name`, or resumes the create that made it: an object of that
    /// name is waited for when it carries this create's mark (after deleting it when its
    /// create failed), and is someone else's otherwise.
    pub(super) async fn run<T, GetF, ReadyF, DeleteF, SendF>(self, ctx: &Ctx, what: &str, name: &str) -> Result<T, ProviderError>
    where
        Get: Fn() -> GetF,
        GetF: Future<Output = Result<Option<T>, ProviderError>>,
        Owned: Fn(&T) -> bool,
        Failed: Fn(&T) -> bool,
        Ready: Fn() -> ReadyF,
        ReadyF: Future<Output = Result<T, ProviderError>>,
        Delete: Fn() -> DeleteF,
        DeleteF: Future<Output = Result<(), ProviderError>>,
        Send: Fn() -> SendF,
        SendF: Future<Output = Result<Sent, ProviderError>>,
    {
        if let Some(existing) = (self.get)().await? {
            if !(self.owned)(&existing) {
                return Err(name_taken(ctx, what, name));
            }
            if !(self.failed)(&existing) {
                return (self.ready)().await;
            }
            (ctx.status)(&format!("deleting the {what} its failed create left"));
            (self.delete)().await?;
        }
        if let Sent::Exists = (self.send)().await?
            && !(self.get)().await?.is_some_and(|object| (self.owned)(&object))
        {
            return Err(name_taken(ctx, what, name));
        }
        (self.ready)().await
    }
}
