//! Client-side rate budgets: one token bucket per cloud API, shared by every operation of the
//! process (all stacks of a `forge drift stacks/*.toml` included), so forge paces its calls to
//! the cloud's own limits instead of sending them and being throttled.
//!
//! A budget starts at the documented rate of its API (the providers hold the tables), spends
//! its burst first, then hands out the refill rate. A throttling answer means the account's
//! bucket is emptier than forge thought (another tool, another forge, a lower limit): the rate
//! drops by [`DECREASE`], at most once per round of calls already under way, and the tokens go.
//! Each success raises it again by [`RECOVERY`] of the documented rate, up to that rate.
//! The `--api-rate` option scales the documented refill rates (an account with raised limits)
//! or turns pacing off; `--parallelism` stays an upper bound on calls in flight.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex, RwLock};
use std::time::Duration;
use tokio::time::Instant;

/// What a throttling answer multiplies the rate by.
pub const DECREASE: f64 = 0.7;
/// What each success adds back, as a share of the documented rate.
pub const RECOVERY: f64 = 0.02;
/// The lowest rate, as a share of the documented rate: a budget never stops handing out.
pub const FLOOR: f64 = 0.05;

/// A token bucket as a cloud documents it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rate {
    /// Calls the full bucket allows at once.
    pub burst: f64,
    /// Tokens added back each second.
    pub per_second: f64,
}

impl Rate {
    /// A bucket of `burst` tokens refilled at `per_second`.
    pub const fn new(burst: f64, per_second: f64) -> Self {
        Rate { burst, per_second }
    }

    fn refilled_faster(self, scale: f64) -> Rate {
        Rate::new(self.burst, self.per_second * scale)
    }
}

/// How forge paces its cloud calls, for the whole process (`--api-rate`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Pacing {
    /// Documented refill rates times this factor (1 unless the account's limits were raised).
    Scale(f64),
    /// No pacing: calls go as fast as `--parallelism` lets them.
    Off,
}

impl std::str::FromStr for Pacing {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text.parse::<f64>() {
            _ if text == "off" => Ok(Pacing::Off),
            Ok(scale) if scale.is_finite() && scale > 0.0 => Ok(Pacing::Scale(scale)),
            _ => Err(format!("`{text}` is neither a positive factor (1, 2.5) nor `off`")),
        }
    }
}

/// A budget's scope (account and region) and API (`ec2:CreateSecurityGroup`).
type BudgetKey = (String, String);

static PACING: RwLock<Pacing> = RwLock::new(Pacing::Scale(1.0));

/// Sets how the process paces its calls; budgets made before keep their rates.
pub fn set_pacing(pacing: Pacing) {
    *PACING.write().unwrap_or_else(|e| e.into_inner()) = pacing;
}

/// The budget of one API, shared by every caller in the process: `scope` names the account
/// and region (calls to two accounts do not share), `api` the service and action, `rate` its
/// documented bucket. `None` when pacing is off.
pub fn budget(scope: &str, api: &str, rate: Rate) -> Option<Arc<Budget>> {
    static BUDGETS: LazyLock<Mutex<HashMap<BudgetKey, Arc<Budget>>>> = LazyLock::new(Default::default);
    let scale = match *PACING.read().unwrap_or_else(|e| e.into_inner()) {
        Pacing::Off => return None,
        Pacing::Scale(scale) => scale,
    };
    let mut budgets = BUDGETS.lock().unwrap_or_else(|e| e.into_inner());
    let budget = budgets
        .entry((scope.to_owned(), api.to_owned()))
        .or_insert_with(|| Arc::new(Budget::new(rate.refilled_faster(scale))));
    Some(budget.clone())
}

/// One API's bucket as forge keeps it.
#[derive(Debug)]
pub struct Budget {
    documented: Rate,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    /// Tokens left; below zero, calls have reserved tokens not yet refilled.
    tokens: f64,
    /// The rate handed out now.
    per_second: f64,
    /// When `tokens` was last brought up to date.
    at: Instant,
    /// Raised at each decrease: a call reserved before it was sent at the old rate, and its
    /// throttling answer does not lower the rate again.
    round: u64,
}

/// A call's place in its budget, to report how it came out.
#[derive(Debug, Clone, Copy)]
pub struct Ticket {
    round: u64,
}

impl Budget {
    /// A full bucket at the documented rate.
    pub fn new(documented: Rate) -> Self {
        Budget {
            documented,
            state: Mutex::new(State {
                tokens: documented.burst,
                per_second: documented.per_second,
                at: Instant::now(),
                round: 0,
            }),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes a token, waiting until the bucket has one for this call; calls wait in the order
    /// they asked.
    pub async fn acquire(&self) -> Ticket {
        let (wait, ticket) = {
            let mut state = self.state();
            let now = Instant::now();
            let refilled = state.tokens + now.duration_since(state.at).as_secs_f64() * state.per_second;
            state.tokens = refilled.min(self.documented.burst) - 1.0;
            state.at = now;
            let wait = if state.tokens >= 0.0 {
                0.0
            } else {
                -state.tokens / state.per_second
            };
            (Duration::from_secs_f64(wait), Ticket { round: state.round })
        };
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
        ticket
    }

    /// The cloud throttled a call: slower from now on, and no tokens left.
    pub fn throttled(&self, ticket: Ticket) {
        let mut state = self.state();
        if ticket.round == state.round {
            state.round += 1;
            state.per_second = (state.per_second * DECREASE).max(self.documented.per_second * FLOOR);
            state.tokens = state.tokens.min(0.0);
        }
    }

    /// A call went through: a little faster, up to the documented rate.
    pub fn succeeded(&self) {
        let mut state = self.state();
        state.per_second = (state.per_second + self.documented.per_second * RECOVERY).min(self.documented.per_second);
    }

    /// The rate handed out now, in calls per second.
    #[cfg(test)]
    fn per_second(&self) -> f64 {
        self.state().per_second
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// How long `calls` calls take to get their tokens, on tokio's paused clock.
    async fn time_for(budget: &Budget, calls: usize) -> Duration {
        let start = Instant::now();
        for _ in 0..calls {
            budget.acquire().await;
        }
        start.elapsed()
    }

    #[tokio::test(start_paused = true)]
    async fn the_burst_goes_at_once_then_the_refill_rate() {
        let budget = Budget::new(Rate::new(50.0, 5.0));
        assert_eq!(time_for(&budget, 50).await, Duration::ZERO);
        let next = time_for(&budget, 10).await.as_secs_f64();
        assert!((next - 2.0).abs() < 0.01, "10 calls past the burst took {next} s, not 2 s");
    }

    #[tokio::test(start_paused = true)]
    async fn throttling_slows_it_and_success_brings_it_back() {
        let budget = Budget::new(Rate::new(10.0, 10.0));
        let ticket = budget.acquire().await;
        budget.throttled(ticket);
        assert!((budget.per_second() - 7.0).abs() < 1e-9);
        // A second answer to a call sent before the decrease does not lower it again.
        budget.throttled(ticket);
        assert!((budget.per_second() - 7.0).abs() < 1e-9);
        // The tokens went with the throttling answer: the next call waits for a refill.
        let waited = time_for(&budget, 1).await.as_secs_f64();
        assert!((waited - 1.0 / 7.0).abs() < 0.01, "waited {waited} s");
        for _ in 0..14 {
            budget.succeeded();
        }
        assert!(budget.per_second() < 10.0, "15 successes bring 7 back to 10 (2% of 10 each)");
        budget.succeeded();
        budget.succeeded();
        assert_eq!(budget.per_second(), 10.0, "success recovers to the documented rate and no further");
    }

    #[tokio::test(start_paused = true)]
    async fn throttling_never_stops_it() {
        let budget = Budget::new(Rate::new(1.0, 20.0));
        for _ in 0..100 {
            let ticket = budget.acquire().await;
            budget.throttled(ticket);
        }
        assert!((budget.per_second() - 20.0 * FLOOR).abs() < 1e-9);
        let waited = time_for(&budget, 1).await.as_secs_f64();
        assert!(waited <= 1.0 / (20.0 * FLOOR) + 0.01, "waited {waited} s");
    }

    #[tokio::test(start_paused = true)]
    async fn callers_in_one_process_share_a_budget_per_scope_and_api() {
        let rate = Rate::new(2.0, 1.0);
        let first = budget("account-a us-east-1", "ec2:CreateSecurityGroup", rate).unwrap();
        let again = budget("account-a us-east-1", "ec2:CreateSecurityGroup", rate).unwrap();
        let other_api = budget("account-a us-east-1", "ec2:DeleteSecurityGroup", rate).unwrap();
        let other_account = budget("account-b us-east-1", "ec2:CreateSecurityGroup", rate).unwrap();
        assert!(Arc::ptr_eq(&first, &again));
        assert!(!Arc::ptr_eq(&first, &other_api) && !Arc::ptr_eq(&first, &other_account));
        // Two stacks drawing on one budget: four calls against a burst of two and one a second.
        let (a, b) = tokio::join!(time_for(&first, 2), time_for(&again, 2));
        assert!((a.max(b).as_secs_f64() - 2.0).abs() < 0.01, "took {a:?} and {b:?}");
    }

    #[test]
    fn api_rate_reads_a_factor_or_off() {
        assert_eq!("2.5".parse::<Pacing>(), Ok(Pacing::Scale(2.5)));
        assert_eq!("off".parse::<Pacing>(), Ok(Pacing::Off));
        for bad in ["0", "-1", "fast", "inf"] {
            assert!(bad.parse::<Pacing>().is_err(), "{bad}");
        }
    }
}
