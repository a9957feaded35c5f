//! Client-side rate budgets: one token bucket per cloud API, shared by every operation of the
//! command (all stacks of a `forge drift stacks/*.toml` included: [`Budgets`] lives in the
//! session), so forge paces its calls to the cloud's own limits instead of sending them and
//! being throttled.
//!
//! A budget starts at the documented rate of its API (the providers hold the tables), spends
//! its burst first, then hands out the refill rate. A throttling answer means the account's
//! bucket is emptier than forge thought (another tool, another forge, a lower limit): the rate
//! drops by [`DECREASE`], at most once per round of calls already under way, and the tokens go.
//! Each success raises it again by [`RECOVERY`] of the documented rate, up to that rate.
//! The `--api-rate` option scales the documented refill rates (an account with raised limits)
//! or turns pacing off; `--parallelism` stays an upper bound on calls in flight.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
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

/// Every rate budget of one command, by scope and API, and how they pace (`--api-rate`): the
/// session's clouds share one, so all stacks of a `forge drift a.toml b.toml` that reach the
/// same account draw on the same buckets.
#[derive(Debug)]
pub struct Budgets {
    pacing: Pacing,
    budgets: Mutex<HashMap<BudgetKey, Arc<Budget>>>,
}

impl Default for Budgets {
    /// The documented rates, unscaled.
    fn default() -> Self {
        Budgets::new(Pacing::Scale(1.0))
    }
}

impl Budgets {
    /// No budgets yet; each is made on first use, paced by `pacing`.
    pub fn new(pacing: Pacing) -> Self {
        Budgets {
            pacing,
            budgets: Mutex::default(),
        }
    }

    /// The budget of one API, shared by every caller: `scope` names the account and region
    /// (calls to two accounts do not share), `api` the service and action, `rate` its
    /// documented bucket. `None` when pacing is off.
    pub fn budget(&self, scope: &str, api: &str, rate: Rate) -> Option<Arc<Budget>> {
        let Pacing::Scale(scale) = self.pacing else {
            return None;
        };
        let mut budgets = self.budgets.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let budget = budgets
            .entry((scope.to_owned(), api.to_owned()))
            .or_insert_with(|| Arc::new(Budget::new(rate.refilled_faster(scale))));
        Some(budget.clone())
    }
}

/// One API's bucket as forge keeps it.
#[derive(Debug)]
pub struct Budget {
    documented: Rate,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    /// Tokens in the bucket (never below zero: a waiting call holds a place in `queue`).
    tokens: f64,
    /// The rate handed out now.
    per_second: f64,
    /// When `tokens` was last brought up to date.
    at: Instant,
    /// Raised at each decrease: a call admitted before it was sent at the old rate, and its
    /// throttling answer does not lower the rate again.
    round: u64,
    /// The calls waiting for a token, in the order they get one: the retries of throttled
    /// calls first, in the order they came back, then the others in the order they asked.
    queue: VecDeque<Waiter>,
    /// The next waiter's id.
    next: u64,
}

/// A call waiting in a budget's queue.
#[derive(Debug, Clone, Copy)]
struct Waiter {
    id: u64,
    retry: bool,
}

impl State {
    /// Brings `tokens` up to now, at most `burst`.
    fn refill(&mut self, burst: f64) {
        let now = Instant::now();
        self.tokens = (self.tokens + now.duration_since(self.at).as_secs_f64() * self.per_second).min(burst);
        self.at = now;
    }
}

/// A call's place in its budget, to report how it came out.
#[derive(Debug, Clone, Copy)]
pub struct Ticket {
    round: u64,
}

tokio::task_local! {
    /// Set while a call the cloud throttled is tried again: its budgets serve it first.
    static RETRYING_THROTTLED: ();
}

/// Runs `call`, the retry of a call the cloud throttled, at the front of its budgets' queues:
/// it was admitted once, and waiting behind every call that asked since would add the whole
/// queue's time to it.
pub async fn retrying_throttled<T>(call: impl std::future::Future<Output = T>) -> T {
    RETRYING_THROTTLED.scope((), call).await
}

/// Removes a waiter whose call was dropped (cancelled) from the queue, so it holds up no one.
struct Place<'b> {
    budget: &'b Budget,
    id: u64,
}

impl Drop for Place<'_> {
    fn drop(&mut self) {
        self.budget.state().queue.retain(|w| w.id != self.id);
    }
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
                queue: VecDeque::new(),
                next: 0,
            }),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Takes a token, waiting until the bucket has one for this call: calls wait in the order
    /// they asked, except that the retry of a throttled call (see [`retrying_throttled`]) goes
    /// before every call that has not been throttled.
    pub async fn acquire(&self) -> Ticket {
        let retry = RETRYING_THROTTLED.try_with(|()| ()).is_ok();
        let id = {
            let mut state = self.state();
            state.refill(self.documented.burst);
            if state.queue.is_empty() && state.tokens >= 1.0 {
                state.tokens -= 1.0;
                return Ticket { round: state.round };
            }
            let id = state.next;
            state.next += 1;
            let at = if retry {
                state.queue.iter().take_while(|w| w.retry).count()
            } else {
                state.queue.len()
            };
            state.queue.insert(at, Waiter { id, retry });
            id
        };
        let _place = Place { budget: self, id };
        loop {
            let wait = {
                let mut state = self.state();
                state.refill(self.documented.burst);
                let place = state.queue.iter().position(|w| w.id == id).expect("a waiting call keeps its place");
                // Tokens for this call and every one before it: its turn has come.
                let short = place as f64 + 1.0 - state.tokens;
                if short <= 1e-9 {
                    state.tokens -= 1.0;
                    state.queue.remove(place);
                    return Ticket { round: state.round };
                }
                Duration::from_secs_f64(short / state.per_second)
            };
            // Woken at its turn, or earlier when the queue changed before it: it looks again.
            tokio::time::sleep(wait).await;
        }
    }

    /// The cloud throttled a call: slower from now on, and no tokens left (the calls waiting
    /// keep their places).
    pub fn throttled(&self, ticket: Ticket) {
        let mut state = self.state();
        if ticket.round == state.round {
            state.refill(self.documented.burst);
            state.round += 1;
            state.per_second = (state.per_second * DECREASE).max(self.documented.per_second * FLOOR);
            state.tokens = 0.0;
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

    /// The order in which calls asking at `asks` (seconds after the burst went; `true`: the
    /// retry of a throttled call) get their tokens, at one token a second.
    async fn served(asks: &[(&'static str, f64, bool)]) -> Vec<&'static str> {
        let budget = Arc::new(Budget::new(Rate::new(1.0, 1.0)));
        budget.acquire().await;
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut calls = tokio::task::JoinSet::new();
        for &(name, at, retry) in asks {
            let (budget, order) = (budget.clone(), order.clone());
            calls.spawn(async move {
                tokio::time::sleep(Duration::from_secs_f64(at)).await;
                if retry {
                    retrying_throttled(budget.acquire()).await
                } else {
                    budget.acquire().await
                };
                order.lock().unwrap().push(name);
            });
        }
        calls.join_all().await;
        Arc::try_unwrap(order).unwrap().into_inner().unwrap()
    }

    #[tokio::test(start_paused = true)]
    async fn the_retry_of_a_throttled_call_goes_before_the_queue() {
        let order = served(&[
            ("a", 0.0, false),
            ("b", 0.1, false),
            ("c", 0.2, false),
            ("retry", 0.5, true),
            ("retry2", 0.6, true),
        ])
        .await;
        assert_eq!(order, ["retry", "retry2", "a", "b", "c"]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_cancelled_call_holds_up_no_one() {
        let budget = Budget::new(Rate::new(1.0, 1.0));
        budget.acquire().await;
        assert!(tokio::time::timeout(Duration::from_millis(100), budget.acquire()).await.is_err());
        let waited = time_for(&budget, 1).await.as_secs_f64();
        assert!(
            (waited - 0.9).abs() < 0.01,
            "the next call waited {waited} s, not the 0.9 s left of its token"
        );
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
    async fn callers_of_one_command_share_a_budget_per_scope_and_api() {
        let rate = Rate::new(2.0, 1.0);
        let budgets = Budgets::default();
        let budget = |scope: &str, api: &str, rate: Rate| budgets.budget(scope, api, rate);
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
    fn pacing_off_makes_no_budget_and_a_factor_scales_the_refill() {
        assert!(Budgets::new(Pacing::Off).budget("a", "ec2:X", Rate::new(2.0, 1.0)).is_none());
        let scaled = Budgets::new(Pacing::Scale(4.0)).budget("a", "ec2:X", Rate::new(2.0, 1.0)).unwrap();
        assert_eq!(scaled.documented, Rate::new(2.0, 4.0));
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
