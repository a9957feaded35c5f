//! One thin file per subcommand: lock → load → graph → plan → confirm → apply → save. The
//! steps they share live here.

mod capacity;
mod completions;
mod cost;
mod destroy;
mod drift;
mod graph;
mod import;
mod kubeconfig;
mod output;
mod plan;
mod state;
mod up;
mod validate;

use crate::apply::{self, Options, RetryPolicy};
use crate::cli::{Cli, Command, Global};
use crate::error::{CommandError, Exit};
use crate::facts::{Facts, gather};
use crate::graph::ResourceGraph;
use crate::output::{Printer, format_duration};
use crate::plan::drift::{Drift, IgnoreRules, ReadError};
use crate::plan::{Action, Mode, Plan};
use crate::provider::budget::Budgets;
use crate::provider::settings::Providers;
use crate::provider::{Cloud, Registry};
use crate::stack::Stack;
use crate::state::lock::LockMode;
use crate::state::store::Loaded;
use crate::state::{Access, Backend, Held, LocalStore, StateError, Store};
use miette::Result;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

/// The context a kind is asked in at plan time (a dry run, a quote): no status, no resume.
fn planning_ctx(plan: &Plan, address: &str, cloud: &Arc<Cloud>) -> crate::provider::Ctx {
    crate::provider::Ctx {
        stack: plan.stack.clone(),
        address: address.to_owned(),
        status: Arc::new(|_: &str| {}),
        cloud: cloud.clone(),
        resumed: false,
        quoted: None,
    }
}

/// What the person running `up` or `destroy` agreed to up front.
#[derive(Debug, Clone, Copy)]
pub struct Consent {
    /// `--yes`: apply without asking.
    pub yes: bool,
    /// `--allow-data-loss`: changes that delete data may go ahead.
    pub data_loss: bool,
    /// `--allow-purchase`: creates that buy something (a Capacity Block) may go ahead.
    pub purchase: bool,
}

/// What every command needs: the flags, the printer, the kinds and the clouds.
pub struct Session {
    /// Global flags.
    pub global: Global,
    /// Output policy.
    pub printer: Printer,
    /// Resource kinds.
    pub registry: Registry,
    /// The rate budgets every cloud of the command draws on (`--api-rate`).
    budgets: Arc<Budgets>,
    /// The clouds made so far, by provider settings: refresh, the dry run, facts, apply and
    /// readiness share one, and stacks checked together with the same `[aws]` share one set of
    /// SDK clients and their connections.
    clouds: std::sync::Mutex<Vec<(Providers, Arc<Cloud>)>>,
}

/// Runs the parsed command line, on the runtime `main` built.
pub async fn run(cli: Cli) -> Result<Exit> {
    let printer = Printer::new(cli.global.quiet, cli.global.verbose, cli.global.no_color);
    let session = Session {
        budgets: Arc::new(Budgets::new(cli.global.api_rate)),
        global: cli.global,
        printer,
        registry: Registry::builtin(),
        clouds: Default::default(),
    };
    match cli.command {
        Command::Plan { file, options } => plan::run(&session, &file, &options).await,
        Command::Up {
            file,
            yes,
            allow_data_loss,
            allow_purchase,
            refresh,
            no_wait_ready,
            skip_in_cluster,
            no_cost,
        } => {
            let consent = Consent {
                yes,
                data_loss: allow_data_loss,
                purchase: allow_purchase,
            };
            let steps = up::Steps {
                refresh,
                wait_ready: !no_wait_ready,
                in_cluster: !skip_in_cluster,
                cost: !no_cost,
            };
            up::run(&session, &file, consent, steps).await
        }
        Command::Destroy { file, yes } => destroy::run(&session, &file, yes).await,
        Command::Cost { files, json, markdown } => {
            let format = match (json, markdown) {
                (true, _) => cost::Format::Json,
                (_, true) => cost::Format::Markdown,
                _ => cost::Format::Text,
            };
            cost::run(&session, &files, format).await
        }
        Command::Drift {
            files,
            json,
            markdown,
            ignore,
        } => {
            let format = match (json, markdown) {
                (true, _) => drift::Format::Json,
                (_, true) => drift::Format::Markdown,
                _ => drift::Format::Text,
            };
            drift::run(&session, &files, format, &ignore).await
        }
        Command::Graph { file, format } => graph::run(&session, &file, format).await,
        Command::Output { file, name, json } => output::run(&session, &file, name.as_deref(), json),
        Command::Kubeconfig {
            file,
            cluster,
            kubeconfig,
            print,
        } => kubeconfig::run(&session, &file, cluster.as_deref(), kubeconfig.as_deref(), print),
        Command::Capacity(crate::cli::CapacityCommand::Search(search)) => capacity::search(&session, &search).await,
        Command::Validate { file } => validate::run(&session, &file),
        Command::Import {
            file,
            address,
            id,
            dry_run,
        } => {
            let request = import::Request {
                file: &file,
                address: &address,
                id: &id,
                dry_run,
            };
            import::run(&session, request).await
        }
        Command::State(cmd) => state::run(&session, cmd),
        Command::Completions { shell } => completions::run(shell),
    }
}

/// The first five of `items`, and how many more there are.
/// The failures grouped by their message, in the order each first failed: a cluster that
/// cannot be reached fails all its objects with one error, said once.
fn failures_by_cause(failures: &[apply::Failure]) -> Vec<(&str, Vec<String>)> {
    let mut groups: Vec<(&str, Vec<String>)> = Vec::new();
    for f in failures {
        let what = match f.phase {
            apply::Phase::Create => "create",
            apply::Phase::Update => "update",
            apply::Phase::Destroy => "delete",
        };
        let change = format!("`{}`: {what}", f.address);
        match groups.iter_mut().find(|(message, _)| *message == f.message) {
            Some((_, changes)) => changes.push(change),
            None => groups.push((&f.message, vec![change])),
        }
    }
    groups
}

fn sample(items: impl ExactSizeIterator<Item = String>) -> String {
    let more = items.len().saturating_sub(5);
    let shown: Vec<String> = items.take(5).collect();
    if more > 0 {
        format!("{} and {more} more", shown.join(", "))
    } else {
        shown.join(", ")
    }
}

/// The state store `settings` name, handed what a remote one needs of the providers (the state
/// layer reaches none): GCS takes the GCP provider's root URL, credentials and wording of an
/// answer that is not the API's.
fn open_store(settings: &Backend) -> Result<Store, StateError> {
    let access = Access {
        #[cfg(feature = "gcp")]
        gcp_root_url: crate::provider::gcp::root_url,
        #[cfg(feature = "gcp")]
        gcp_credentials: crate::provider::gcp::credentials,
        #[cfg(feature = "gcp")]
        not_the_api: crate::provider::not_the_api,
    };
    Store::open(settings, &access)
}

/// A run's state that its remote store would not take (down, throttled, or changed by someone
/// else): written whole to the local rescue file, so the run never ends with state only in
/// memory, and the error says how to push it. A local state's error is returned as it is.
fn rescue(store: &Store, state: &crate::state::State, error: StateError, stack_file: &str) -> miette::Report {
    let Some(path) = store.rescue_path() else {
        return error.into();
    };
    let kept = LocalStore::new(path).compact(state);
    let push = format!("`forge state push {stack_file} --from {}`", path.display());
    let (lead, hint) = match (kept, &error) {
        (Ok(()), StateError::Conflict { .. }) => (
            format!("nothing is lost: the state is in `{}`", path.display()),
            format!(
                "find out who else wrote it; if this run's state is the one to keep, push it with {push} (a newer state is never overwritten), else remove the file; until then forge refuses to change this stack"
            ),
        ),
        (Ok(()), _) => (
            format!("nothing is lost: the state is in `{}`", path.display()),
            format!("when the bucket answers again, run {push}; until then forge refuses to change this stack"),
        ),
        (Err(e), _) => (
            format!("and it could not be kept locally either ({e})"),
            "keep this output: the journal segments written so far are in the bucket; run `forge up` again once it answers".to_owned(),
        ),
    };
    CommandError::new(format!("the state could not be saved: {error}\n{lead}"), hint).into()
}

impl Session {
    /// How cloud calls are retried (`--max-attempts`).
    fn retry_policy(&self) -> RetryPolicy {
        RetryPolicy {
            attempts: self.global.max_attempts,
            ..RetryPolicy::default()
        }
    }

    /// Reads the live objects of the stack's kinds (one batched read per kind; the in-cluster
    /// kinds only when `in_cluster`) and shows what changed or went outside forge; `plan`
    /// brings it back.
    /// The objects the stack's `existing` blocks name are read whatever `live` says (the plan
    /// needs their values); the live read of the recorded objects only when `live`.
    pub async fn refresh(&self, state: &crate::state::State, stack: &Stack, in_cluster: bool, live: bool) -> Result<Drift> {
        let mut drift = Drift::default();
        if live && !state.resources.is_empty() {
            let started = std::time::Instant::now();
            drift = self.observe(state, stack, &IgnoreRules::of_stack(stack), in_cluster).await?;
            self.printer.detail(&format!(
                "refresh: {} resources of {} kinds read in {}",
                drift.resources_read,
                drift.kinds_read,
                format_duration(started.elapsed())
            ));
        }
        self.read_existing(stack, state, &mut drift, false, &IgnoreRules::of_stack(stack))
            .await?;
        if !drift.is_empty() {
            let mut counts = format!(
                "drift: {} changed outside forge, {} deleted outside forge, {} unmanaged",
                drift.changed.len(),
                drift.deleted.len(),
                drift.unmanaged.len()
            );
            if !drift.read_changed.is_empty() {
                counts.push_str(&format!(", {} existing object(s) read with new values", drift.read_changed.len()));
            }
            self.printer.warn(&counts);
            self.printer.plan(&crate::plan::render::drift(&drift));
        }
        Ok(drift)
    }

    /// Asks the APIs that have a dry run (Kubernetes; IAM's one OIDC provider per issuer)
    /// whether they would take the plan's creates and updates whose values are all known, `--parallelism` at once; a refusal fails the
    /// command before anything is applied, naming the resource and the API's reason. An API
    /// that cannot be asked is a warning: the apply will tell.
    pub async fn dry_run(&self, plan: &Plan) -> Result<()> {
        let cloud = self.cloud(&plan.providers);
        let checks = plan.changes.iter().filter_map(|change| {
            let after = change.after.as_ref().filter(|a| crate::template::is_known(a))?;
            let kind = self.registry.get(&change.kind)?.clone();
            let ctx = planning_ctx(plan, &change.address, &cloud);
            Some(async move { (ctx.address.clone(), kind.dry_run(&ctx, after).await) })
        });
        let parallelism = usize::from(self.global.parallelism);
        let answers: Vec<(String, std::result::Result<Option<String>, crate::provider::ProviderError>)> =
            futures::StreamExt::collect(futures::StreamExt::buffer_unordered(futures::stream::iter(checks), parallelism)).await;
        let mut refused: Vec<String> = Vec::new();
        let mut unasked: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (address, answer) in answers {
            match answer {
                Ok(None) => {}
                Ok(Some(why)) => refused.push(format!("`{address}`: {why}")),
                Err(e) => unasked.entry(e.message).or_default().push(format!("`{address}`")),
            }
        }
        for (why, addresses) in unasked {
            self.printer
                .warn(&format!("could not dry-run {}: {why}", sample(addresses.into_iter())));
        }
        if refused.is_empty() {
            return Ok(());
        }
        refused.sort();
        Err(CommandError::new(
            format!(
                "{} of the planned objects would be refused (asked before anything is applied):\n{}",
                refused.len(),
                refused.join("\n")
            ),
            "fix them in the stack; nothing was applied",
        )
        .into())
    }

    /// Puts the cost section in `plan`: what the state runs, what the stack will run once the
    /// plan is applied, at the clouds' list prices ([`crate::provider::prices`]), and what its
    /// purchases charge up front. Never fails: prices that cannot be read are said to be
    /// unavailable, and why.
    pub async fn cost(&self, plan: &mut Plan, state: &crate::state::State) {
        let kinds = state
            .resources
            .values()
            .map(|r| &r.kind)
            .chain(plan.changes.iter().map(|c| &c.kind));
        let region = self.aws_region(&plan.providers, kinds.clone().any(|k| k.starts_with("aws_"))).await;
        let before = crate::cost::view::of_state(state, &self.registry, region.as_deref());
        let after = crate::cost::view::of_plan(plan, state, &self.registry, region.as_deref());
        let upfront: f64 = plan.purchases().map(|(_, purchase)| purchase.upfront).sum();
        if before.is_empty() && after.is_empty() && upfront == 0.0 {
            return;
        }
        let rates = crate::cost::rates(before.iter().chain(&after).map(|(_, _, meter)| meter));
        let prices = crate::provider::prices::prices(&self.cloud(&plan.providers), &rates).await;
        plan.cost = Some(crate::cost::PlanCost::new(&before, &after, &prices, upfront));
    }

    /// The region of the stack's AWS kinds, when it has some (`aws`): `[aws] region`, else the
    /// standard chain's (`AWS_REGION`, the profile's `region`).
    #[cfg_attr(not(feature = "aws"), allow(unused_variables))]
    pub async fn aws_region(&self, providers: &Providers, aws: bool) -> Option<String> {
        if let Some(region) = providers.aws_region() {
            return Some(region.to_owned());
        }
        #[cfg(feature = "aws")]
        if aws {
            return self.cloud(providers).aws().await.sdk.region().map(ToString::to_string);
        }
        None
    }

    /// Prices what the plan's creates and updates buy (see [`crate::provider::Resource::quote`]),
    /// all at once, into their changes; a kind that cannot price its change (nothing on sale
    /// within its ceiling) fails the plan, naming the resource. A resumed purchase whose block an
    /// interrupted run bought (found by its token in `state`) buys nothing: it is adopted.
    pub async fn quote(&self, plan: &mut Plan, state: &crate::state::State) -> Result<()> {
        let cloud = self.cloud(&plan.providers);
        let quotes = plan.changes.iter().enumerate().filter_map(|(i, change)| {
            let after = change
                .after
                .as_ref()
                .filter(|_| matches!(change.action, Action::Create | Action::Replace | Action::Update))?;
            let kind = self.registry.get(&change.kind).filter(|k| k.paid_for())?.clone();
            let ctx = planning_ctx(plan, &change.address, &cloud);
            let record = state.resources.get(&change.address);
            let token = record
                .filter(|r| r.status == crate::state::Status::PendingCreate)
                .and_then(|r| r.token.clone());
            // An update buys on the object it changes (a Capacity Block's extension).
            let existing = record.filter(|_| change.action == Action::Update).and_then(|r| r.id.clone());
            // Priced only with every value known: a kind that buys refuses to be unpriced.
            let priced = if crate::template::is_known(after) {
                after.clone()
            } else {
                serde_json::Value::Null
            };
            Some(async move {
                let adopted = match &token {
                    Some(token) => kind.find(&ctx, token, after).await.map(|found| found.is_some()),
                    None => Ok(false),
                };
                let answer = match adopted {
                    Ok(true) => Ok(None),
                    Ok(false) => kind.quote(&ctx, &priced, existing.as_deref()).await,
                    Err(e) => Err(e),
                };
                (i, ctx.address.clone(), answer)
            })
        });
        let answers: Vec<_> = futures::StreamExt::collect(futures::StreamExt::buffer_unordered(futures::stream::iter(quotes), 8)).await;
        let mut failed = Vec::new();
        for (i, address, answer) in answers {
            match answer {
                Ok(purchase) => plan.changes[i].purchase = purchase,
                Err(e) => failed.push(format!("`{address}`: {}", e.message)),
            }
        }
        if failed.is_empty() {
            return Ok(());
        }
        failed.sort();
        Err(CommandError::new(
            format!("cannot price what the plan buys:\n{}", failed.join("\n")),
            "nothing was bought or changed; fix the block (its ceiling, size, dates or zone) and plan again",
        )
        .into())
    }

    /// Reads the objects `stack`'s `existing` blocks name (see [`crate::plan::existing`]) into
    /// `drift` (what `ignore` covers left out); one that matches nothing or several is an
    /// error at its block, unless `gone_is_drift` and the state recorded it (then it is drift).
    pub async fn read_existing(
        &self,
        stack: &Stack,
        state: &crate::state::State,
        drift: &mut Drift,
        gone_is_drift: bool,
        ignore: &IgnoreRules,
    ) -> Result<()> {
        if stack.resources.iter().all(|r| r.existing.is_none()) {
            return Ok(());
        }
        let cloud = self.cloud(&stack.providers);
        let parallelism = usize::from(self.global.parallelism);
        let matches = crate::plan::existing::look_up(stack, &self.registry, cloud, &self.retry_policy(), parallelism).await?;
        crate::plan::existing::settle(stack, state, matches, drift, gone_is_drift, ignore)?;
        Ok(())
    }

    /// The cloud of these provider settings, made on first use.
    pub fn cloud(&self, providers: &Providers) -> Arc<Cloud> {
        let mut clouds = self.clouds.lock().expect("no panics while the lock is held");
        if let Some((_, cloud)) = clouds.iter().find(|(settings, _)| settings == providers) {
            return cloud.clone();
        }
        let cloud = Arc::new(Cloud::new(providers.clone(), self.budgets.clone()));
        clouds.push((providers.clone(), cloud.clone()));
        cloud
    }

    /// The drift of `stack` against `state`, read with `--parallelism` reads at once; the
    /// in-cluster kinds are left unread unless `in_cluster`.
    pub async fn observe(
        &self,
        state: &crate::state::State,
        stack: &Stack,
        ignore: &IgnoreRules,
        in_cluster: bool,
    ) -> Result<Drift, ReadError> {
        let kinds = stack
            .resources
            .iter()
            .filter(|r| in_cluster || !crate::plan::in_cluster::is_in_cluster(&r.kind))
            // A kind the stack only reads is looked up, not refreshed (its recorded objects,
            // if any, still are).
            .filter(|r| r.existing.is_none())
            .map(|r| r.kind.clone())
            .collect();
        let cloud = self.cloud(&stack.providers);
        let parallelism = usize::from(self.global.parallelism);
        crate::plan::drift::observe(state, &kinds, &self.registry, cloud, &self.retry_policy(), ignore, parallelism).await
    }

    /// Loads and checks the stack file and builds its graph; instance types are checked
    /// against forge's built-in table, and bundles are not fetched, so their objects are left
    /// out: for the commands that work from the state (destroy, output, state, kubeconfig).
    pub fn load(&self, file: &Path) -> Result<(Stack, ResourceGraph)> {
        let stack = crate::stack::load(file, &self.global.vars, &self.registry, &Facts::builtin())?;
        let graph = crate::graph::build(&stack)?;
        Ok((stack, graph))
    }

    /// Like [`Session::load`], but with the facts the stack's components need gathered
    /// ([`crate::facts::gather`]): the Kubernetes bundles they apply, and when `online` the
    /// instance types they name, from AWS. The file is read and parsed once, the facts it
    /// needs are gathered, then the checks that need them run.
    pub async fn load_checked(&self, file: &Path, online: bool) -> Result<(Stack, ResourceGraph)> {
        let parsed = crate::stack::parse(file, &self.global.vars, &self.registry)?;
        let needs = parsed.needs(&self.registry);
        let mut notes = Vec::new();
        let gathered = gather::gather(&self.cloud(parsed.providers()), &needs, online, &mut notes).await;
        for note in notes {
            match note {
                gather::Note::Detail(line) => self.printer.detail(&line),
                gather::Note::Warning(line) => self.printer.warn(&line),
            }
        }
        let facts = gathered.map_err(|e| CommandError::new(e.message, e.hint))?;
        let stack = parsed.finish(&self.registry, &facts)?;
        let graph = crate::graph::build(&stack)?;
        Ok((stack, graph))
    }

    /// Says which stack and which state the command uses.
    pub fn announce(&self, stack: &str, file: &str, state: &Backend) {
        self.printer
            .info(&format!("stack `{stack}` ({file}) · state {} ({})", state.location(), state.name()));
    }

    /// Takes the state lock and loads the state, reporting a stale lock taken over. A write
    /// (`Exclusive`) is refused while an earlier run's rescue file waits to be pushed.
    pub fn open_state(
        &self,
        settings: &Backend,
        stack: &str,
        file: &str,
        mode: LockMode,
        operation: &str,
    ) -> Result<(Store, Held, Loaded)> {
        let store = open_store(settings)?;
        let (lock, stale) = store.lock(mode, operation, self.global.lock_timeout)?;
        if let Some(info) = stale
            && mode == LockMode::Exclusive
        {
            self.printer
                .warn(&format!("took over a stale lock: {info} — that process no longer exists"));
        }
        let loaded = store.load(stack)?;
        if !matches!(settings, Backend::Local { .. }) && !loaded.existed && settings.path().exists() {
            // Starting an empty remote state beside a local one would make every resource again.
            return Err(CommandError::new(
                format!(
                    "`{}` has no state yet, but the local state `{}` does: forge will not start an empty one beside it",
                    settings.location(),
                    settings.path().display()
                ),
                format!("move it to the bucket with `forge state push {file}`, or keep `[state] backend = \"local\"` for this stack"),
            )
            .into());
        }
        if let Some(rescue) = store.rescue_path().filter(|r| mode == LockMode::Exclusive && r.exists()) {
            // A run that lost its backend left the latest state there; running on from the
            // bucket's older copy would fork the state.
            return Err(CommandError::new(
                format!(
                    "an earlier run could not save the state to `{}` and left it in `{}`",
                    settings.location(),
                    rescue.display()
                ),
                format!(
                    "push it first: `forge state push {file} --from {}` (it is removed once pushed); remove it by hand only if it is stale",
                    rescue.display()
                ),
            )
            .into());
        }
        if loaded.dropped_tail {
            self.printer
                .warn("the state journal ended in a torn write (a crash mid-write); that last partial line was ignored");
            if mode == LockMode::Exclusive {
                // Fold the good lines into the snapshot now, so nothing is ever appended after the torn bytes.
                store.compact(&loaded.state)?;
            }
        }
        self.printer.detail(&format!(
            "state: {} resources, serial {}, lineage {}",
            loaded.state.resources.len(),
            loaded.state.serial,
            loaded.state.lineage
        ));
        Ok((store, lock, loaded))
    }

    /// Whether the plan may go ahead: a data loss needs `--allow-data-loss`, any change a `yes`
    /// (asked on a terminal, else `--yes`).
    fn agreed(&self, plan: &Plan, consent: Consent) -> Result<()> {
        let losses: Vec<&str> = plan.data_losses().map(|c| c.address.as_str()).collect();
        if !losses.is_empty() && !consent.data_loss {
            return Err(CommandError::new(
                format!(
                    "refusing to apply: it deletes data in {} (marked DESTROYS DATA above); nothing was changed",
                    losses.join(", ")
                ),
                "undo the change that forces the replacement (a file system can grow but not shrink, and keeps its deployment type, subnet and security groups), or back the data up and run again with `--allow-data-loss`",
            )
            .into());
        }
        let purchases: Vec<String> = plan
            .purchases()
            .map(|(c, p)| format!("`{}` ({} upfront)", c.address, crate::plan::render::money(p.upfront, &p.currency)))
            .collect();
        if !purchases.is_empty() && !consent.purchase {
            return Err(CommandError::new(
                format!(
                    "refusing to apply: it buys {} (marked BUYS above; not refundable); nothing was bought or changed",
                    purchases.join(", ")
                ),
                "review the fee, then run again with `--allow-purchase` (the blocks' `max_upfront_usd` caps what forge pays)",
            )
            .into());
        }
        if !plan.is_empty() && !consent.yes {
            let verb = if plan.mode == Mode::Destroy { "destroy" } else { "apply" };
            match self
                .printer
                .confirm(&format!("Do you want to {verb} these changes to `{}`?", plan.stack))
            {
                Some(true) => {}
                Some(false) => {
                    return Err(CommandError::new(format!("{verb} cancelled; nothing was changed"), "answer `yes` to proceed").into());
                }
                None => {
                    return Err(CommandError::new(
                        format!("refusing to {verb} without confirmation: there is no terminal to ask on"),
                        "review the plan, then run again with `--yes` (or save it with `forge plan --out` and apply that file)",
                    )
                    .into());
                }
            }
        }
        Ok(())
    }

    /// Says what an apply did: the counts, each failure with its cause, what was skipped
    /// behind a failure, and what was not started for want of a recorded intent.
    fn tell(&self, plan: &Plan, report: &apply::Report) {
        let replaced = report.count(Action::Replace);
        let verb = if report.complete() { "complete" } else { "stopped" };
        let heading = if plan.mode == Mode::Destroy { "Destroy" } else { "Apply" };
        self.printer.info(&format!(
            "{heading} {verb}: {} added, {} changed, {} destroyed in {}",
            report.count(Action::Create) + replaced,
            report.count(Action::Update),
            report.count(Action::Delete) + replaced,
            format_duration(report.elapsed)
        ));
        for (message, failed) in failures_by_cause(&report.failures) {
            let headline = match failed.as_slice() {
                [one] => format!("{one} failed"),
                many => format!("{} changes failed the same way: {}", many.len(), sample(many.iter().cloned())),
            };
            self.printer.error(&headline, message);
        }
        if !report.skipped.is_empty() {
            let causes = report.skipped.iter().map(|(a, cause)| format!("`{a}` (after `{cause}`)"));
            self.printer.info(&format!(
                "skipped {} resource(s) whose dependencies failed: {}",
                report.skipped.len(),
                sample(causes)
            ));
        }
        if !report.unrecorded.is_empty() {
            self.printer.info(&format!(
                "not started: {} change(s) whose intent the state could not store first, so the cloud was not called for them: {} (the error below says why)",
                report.unrecorded.len(),
                sample(report.unrecorded.iter().map(|a| format!("`{a}`")))
            ));
        }
    }

    /// Shows the plan, asks for confirmation, applies it and saves the state; returns the state
    /// as saved (an error when anything failed).
    pub async fn apply(&self, plan: &Plan, store: &Store, loaded: Loaded, consent: Consent) -> Result<crate::state::State> {
        self.printer.plan(&crate::plan::render::render(plan));
        let state_only = apply::evaluate_outputs(plan, &loaded.state) != loaded.state.outputs || plan.updates_records(&loaded.state);
        if plan.is_empty() && !state_only {
            return Ok(loaded.state);
        }
        self.agreed(plan, consent)?;
        let mut state = loaded.state;
        // Read records make a state version 2: its snapshot says so before its journal holds
        // one, so a forge that knows only version 1 refuses the state rather than stopping at
        // a journal line it cannot read and dropping the lines after it.
        if !plan.reads.is_empty() && state.version < crate::state::STATE_VERSION {
            state.version = crate::state::STATE_VERSION;
            store.compact(&state)?;
        }
        let mut journal = store.journal(&state)?;
        let (tx, rx) = tokio::sync::watch::channel(0u32);
        let progress = Arc::new(self.printer.progress(plan.changes.len() + plan.count(Action::Replace)));
        let options = Options {
            parallelism: usize::from(self.global.parallelism),
            retry: self.retry_policy(),
            cloud: self.cloud(&plan.providers),
        };
        let signals = tokio::spawn(async move {
            while tokio::signal::ctrl_c().await.is_ok() {
                tx.send_modify(|n| *n += 1);
            }
        });
        let report = apply::run(plan, &mut state, &mut journal, &self.registry, &options, progress.clone(), rx).await;
        signals.abort();
        progress.finish();
        let saved = journal
            .close()
            .and_then(|()| store.compact(&state))
            .map_err(|e| rescue(store, &state, e, &plan.stack_file));
        self.tell(plan, &report);
        saved?;
        if report.complete() {
            if plan.mode == Mode::Apply && !state.outputs.is_empty() {
                for (name, value) in &state.outputs {
                    self.printer.info(&format!("  {name} = {}", crate::plan::render::value(value)));
                }
            }
            return Ok(state);
        }
        let message = if report.interrupted {
            format!("interrupted: {} change(s) not started", report.not_started)
        } else if report.failures.is_empty() {
            format!(
                "{} change(s) could not be ordered and were not started: a bug in forge; please report it with `forge plan --json`",
                report.not_started
            )
        } else {
            format!("{} resource(s) failed", report.failures.len())
        };
        Err(CommandError::new(
            message,
            "the state records everything that finished and every call that may be in flight; run the same command again to resume",
        )
        .into())
    }
}
