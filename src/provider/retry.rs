//! Retry with exponential backoff and full jitter, for errors a kind marks retryable
//! (throttling, 5xx, objects still in use). Written once for every kind and every call: the
//! SDKs' own retries are off, so a retried create always goes back through the kind, which
//! first looks for what an earlier attempt made.

use super::{BoxFuture, ProviderError};
use std::time::Duration;

/// How often and how patiently to retry.
#[derive(Debug, Clone)]
pub struct RetryPolicy {
    /// Calls in all, the first included.
    pub attempts: u32,
    /// The first backoff ceiling; it doubles after each retry.
    pub base: Duration,
    /// The largest backoff ceiling.
    pub max: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            attempts: 8,
            base: Duration::from_millis(250),
            max: Duration::from_secs(20),
        }
    }
}

impl RetryPolicy {
    /// Runs `call` until it succeeds, fails for good, or the attempts run out.
    pub async fn run<'a, T>(&self, mut call: impl FnMut() -> BoxFuture<'a, Result<T, ProviderError>>) -> Result<T, ProviderError> {
        let mut attempt = 1;
        loop {
            match call().await {
                Err(e) if e.retryable && attempt < self.attempts => {
                    let ceiling = self.base.saturating_mul(1 << (attempt - 1).min(16)).min(self.max);
                    let jitter = (uuid::Uuid::new_v4().as_u128() % 1_000_000) as f64 / 1_000_000.0;
                    tokio::time::sleep(ceiling.mul_f64(jitter)).await;
                    attempt += 1;
                }
                other => return other,
            }
        }
    }
}
