//! Waiting on slow cloud operations, for every cloud: one poll loop that shows the state and
//! the time waited on the resource's progress line, and gives up after the block's timeout
//! with a message that says the next `forge up` resumes the wait.

use super::{Ctx, ProviderError};

/// What one look at a slow operation saw.
pub enum Poll<T = ()> {
    /// Finished, with what the look saw (the object as it is now), so no second read is needed.
    Done(T),
    /// Still going, in this state (`pending`, `CREATING`).
    Pending(String),
    /// Ended badly, with the cloud's reason.
    Failed(String),
}

/// Polls until `poll` reports done and returns what it saw then, showing the state and elapsed
/// time on the resource's progress line. Polls quickly at first, then every few seconds.
pub async fn wait_until<T, F, Fut>(ctx: &Ctx, timeout: std::time::Duration, mut poll: F) -> Result<T, ProviderError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Poll<T>, ProviderError>>,
{
    let started = std::time::Instant::now();
    let mut interval = std::time::Duration::from_millis(100);
    loop {
        match poll().await? {
            Poll::Done(seen) => return Ok(seen),
            Poll::Failed(reason) => {
                return Err(ProviderError::permanent(reason));
            }
            Poll::Pending(state) if started.elapsed() >= timeout => {
                return Err(ProviderError::permanent(format!(
                    "still {state} after {}s; the cloud is still working: run `forge up` again to resume waiting",
                    started.elapsed().as_secs()
                )));
            }
            Poll::Pending(state) => (ctx.status)(&format!("{state} {}s", started.elapsed().as_secs())),
        }
        tokio::time::sleep(interval).await;
        interval = (interval * 2).min(std::time::Duration::from_secs(5));
    }
}

/// Waits until `status` finds the object gone (`None`), showing the state it reports meanwhile.
pub async fn wait_gone<F, Fut>(ctx: &Ctx, timeout: std::time::Duration, status: F) -> Result<(), ProviderError>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<Option<String>, ProviderError>>,
{
    wait_until(ctx, timeout, || async {
        Ok(match status().await? {
            None => Poll::Done(()),
            Some(state) => Poll::Pending(state),
        })
    })
    .await
}
