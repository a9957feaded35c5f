//! Retry with exponential backoff and full jitter, for errors a kind marks retryable
//! (throttling, 5xx, objects still in use). Written once for every kind and every call: the
//! SDKs' own retries are off, so a retried create always goes back through the kind, which
//! first looks for what an earlier attempt made. A throttled call is not an attempt: the
//! rate budget ([`super::budget`]) paces it, serving it before the calls that have not been
//! throttled, and it is tried again until the cloud has throttled it without a break for
//! [`RetryPolicy::patience`].

use super::{BoxFuture, ProviderError};
use std::time::Duration;
use tokio::time::Instant;

/// A random share in [0, 1), for full jitter.
fn jitter() -> f64 {
    (uuid::Uuid::new_v4().as_u128() % 1_000_000) as f64 / 1_000_000.0
}

/// How often and how patiently to retry.
#[derive(Debug, Clone)]
pub struct RetryPolicy {
    /// Calls in all, the first included.
    pub attempts: u32,
    /// The first backoff ceiling; it doubles after each retry.
    pub base: Duration,
    /// The largest backoff ceiling.
    pub max: Duration,
    /// How long one call may keep being throttled before it fails.
    pub patience: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            attempts: 8,
            base: Duration::from_millis(250),
            max: Duration::from_secs(20),
            patience: Duration::from_secs(600),
        }
    }
}

impl RetryPolicy {
    /// Runs `call` until it succeeds, fails for good, or the attempts run out.
    pub async fn run<'a, T>(&self, mut call: impl FnMut() -> BoxFuture<'a, Result<T, ProviderError>>) -> Result<T, ProviderError> {
        let (mut attempt, mut throttled_since) = (1, None::<Instant>);
        loop {
            let answer = match throttled_since {
                Some(_) => super::budget::retrying_throttled(call()).await,
                None => call().await,
            };
            match answer {
                Err(e) if e.throttled && throttled_since.get_or_insert_with(Instant::now).elapsed() < self.patience => {
                    tokio::time::sleep(self.base.mul_f64(jitter())).await;
                }
                Err(e) if e.retryable && attempt < self.attempts => {
                    let ceiling = self.base.saturating_mul(1 << (attempt - 1).min(16)).min(self.max);
                    tokio::time::sleep(ceiling.mul_f64(jitter())).await;
                    (attempt, throttled_since) = (attempt + 1, None);
                }
                other => return other,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    fn policy(patience: Duration) -> RetryPolicy {
        RetryPolicy {
            attempts: 2,
            patience,
            ..RetryPolicy::default()
        }
    }

    /// A call throttled `throttles` times, then answering `then`.
    async fn run(policy: &RetryPolicy, throttles: u32, then: Result<(), ProviderError>) -> (Result<(), ProviderError>, u32) {
        let calls = AtomicU32::new(0);
        let result = policy
            .run(|| {
                let n = calls.fetch_add(1, Ordering::SeqCst);
                let answer = if n < throttles {
                    Err(ProviderError {
                        message: "RequestLimitExceeded".into(),
                        retryable: true,
                        throttled: true,
                    })
                } else {
                    then.clone()
                };
                Box::pin(async move { answer })
            })
            .await;
        (result, calls.load(Ordering::SeqCst))
    }

    #[tokio::test(start_paused = true)]
    async fn a_throttled_call_is_not_an_attempt() {
        let (result, calls) = run(&policy(Duration::from_secs(600)), 30, Ok(())).await;
        assert!(
            result.is_ok(),
            "30 throttling answers and then success, with 2 attempts: {result:?}"
        );
        assert_eq!(calls, 31);
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_throttled_past_its_patience_fails() {
        let (result, calls) = run(&policy(Duration::from_secs(2)), u32::MAX, Ok(())).await;
        assert!(result.unwrap_err().throttled);
        // Throttled for 2 s at ≤ 250 ms a try, then the policy's 2 attempts.
        assert!(calls > 8, "{calls} calls");
    }

    #[tokio::test(start_paused = true)]
    async fn other_errors_still_count() {
        let busy = ProviderError::transient("DependencyViolation");
        let (result, calls) = run(&policy(Duration::from_secs(600)), 0, Err(busy)).await;
        assert!(result.is_err());
        assert_eq!(calls, 2);
    }
}
