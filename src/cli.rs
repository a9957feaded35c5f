//! The command line (clap types only).

use crate::graph::render::Format;
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;
use std::time::Duration;

/// forge: one declarative TOML file, one command, a GPU training cluster.
///
/// A stack file declares resources; forge turns it into a dependency graph, diffs it against
/// the recorded state and applies the changes concurrently in dependency order.
///
/// Clouds are reached through their own standard environment, never anything forge-specific:
/// AWS through the AWS chain (`AWS_PROFILE`, `AWS_REGION`, `AWS_ENDPOINT_URL`, …); Google Cloud
/// through `GOOGLE_CLOUD_PROJECT`, `CLOUDSDK_COMPUTE_REGION`, gcloud's
/// `CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE`, and `GOOGLE_OAUTH_ACCESS_TOKEN` or Application
/// Default Credentials. `[aws]` and `[gcp]` in the stack file take precedence.
///
/// Exit codes: 0 success (or no changes), 1 error, 2 changes present (`plan --detailed-exitcode`)
/// or drift (`drift`), 3 only pending changes (`drift`).
#[derive(Debug, Parser)]
#[command(name = "forge", version, propagate_version = true, max_term_width = 100)]
pub struct Cli {
    /// Global options.
    #[command(flatten)]
    pub global: Global,
    /// The command.
    #[command(subcommand)]
    pub command: Command,
}

/// Options every command takes.
#[derive(Debug, Args)]
pub struct Global {
    /// Set a stack variable declared under `[vars]`: `--var gpu_nodes=4` (repeatable; the value is
    /// read as TOML, so `4`, `true` and `[1, 2]` keep their types; anything else is a string).
    #[arg(long = "var", value_name = "NAME=VALUE", global = true, value_parser = parse_var)]
    pub vars: Vec<(String, String)>,
    /// At most this many cloud calls in flight at once during apply and destroy, and kinds read
    /// at once by refresh and `drift`: an upper bound; `--api-rate` paces the calls themselves.
    #[arg(long, value_name = "N", default_value_t = 512, global = true, value_parser = clap::value_parser!(u16).range(1..))]
    pub parallelism: u16,
    /// How many times a cloud call that failed with a retryable error (throttling, 5xx, an object
    /// still in use while its dependents go) is tried, with exponential backoff, before the
    /// resource fails.
    #[arg(long, value_name = "N", default_value_t = 8, global = true, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_attempts: u32,
    /// Pace cloud calls to each API's documented rate limit (EC2: 50 at once, then 5 a second
    /// for each mutating action), one budget per account and API shared by every stack of this
    /// run; it slows down when the cloud throttles and recovers after successes. A factor multiplies
    /// the documented refill rates (`2` for an account whose limits were raised to twice the default);
    /// `off` sends calls as fast as `--parallelism` lets them.
    #[arg(long, value_name = "FACTOR|off", default_value = "1", global = true, env = "FORGE_API_RATE")]
    pub api_rate: crate::provider::budget::Pacing,
    /// How long to wait for a state lock held by another run (`30s`, `5m`); 0 fails at once.
    #[arg(long, value_name = "DURATION", default_value = "0s", global = true, value_parser = humantime::parse_duration)]
    pub lock_timeout: Duration,
    /// Print nothing but errors and requested output.
    #[arg(long, short, global = true)]
    pub quiet: bool,
    /// Print more detail (lock, state and journal activity).
    #[arg(long, short, global = true)]
    pub verbose: bool,
    /// Never colour the output (also set by `NO_COLOR`).
    #[arg(long, global = true)]
    pub no_color: bool,
}

fn parse_var(s: &str) -> Result<(String, String), String> {
    let (k, v) = s.split_once('=').ok_or_else(|| format!("`{s}` is not NAME=VALUE"))?;
    Ok((k.trim().to_owned(), v.to_owned()))
}

/// forge's commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Show what `up` would change, without changing anything.
    Plan {
        /// The stack file.
        file: PathBuf,
        /// What to plan and how to report it.
        #[command(flatten)]
        options: PlanOptions,
    },
    /// Create or update everything the stack declares, and delete what it no longer does.
    Up {
        /// A stack file, or a plan saved with `forge plan --out`.
        file: PathBuf,
        /// Do not ask for confirmation.
        #[arg(long, short)]
        yes: bool,
        /// Go ahead with changes the plan marks `(DESTROYS DATA)`: replacing or removing a file
        /// system deletes everything on it. Without this flag `up` refuses them, even with `--yes`.
        #[arg(long)]
        allow_data_loss: bool,
        /// Go ahead with changes the plan marks `BUYS`: a Capacity Block, or its extension, is
        /// charged up front and not refunded. Without this flag `up` refuses them, even with `--yes`.
        #[arg(long)]
        allow_purchase: bool,
        /// Read the live resources first (one batched read per kind): what changed outside
        /// forge is shown and brought back, what was deleted is made again;
        /// `--refresh=false` plans from the state alone.
        #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
        refresh: bool,
        /// Do not wait for the clusters to be ready for work. By default `up` ends by waiting
        /// (per cluster, `kubernetes = { wait_ready = "30m" }`) until every node of each GPU
        /// group reports its GPUs, EFA or Neuron devices and every shared-storage claim is
        /// Bound, and prints what it found.
        #[arg(long)]
        no_wait_ready: bool,
        /// Apply only the cloud side: leave the in-cluster objects (and whatever must follow
        /// them) for a run that reaches the clusters' API servers, and do not read them or wait
        /// for readiness. For clusters whose endpoint forge cannot reach from here (a private
        /// EKS endpoint, GKE authorized networks): run this from anywhere, then `forge up` from
        /// a runner inside the VPC.
        #[arg(long)]
        skip_in_cluster: bool,
        /// Leave out the cost section: what the stack costs an hour at the clouds' list prices
        /// (AWS Price List, Google Cloud Billing Catalog; cached a week) and what the plan changes.
        #[arg(long)]
        no_cost: bool,
    },
    /// Delete every resource the state holds, dependents first.
    Destroy {
        /// The stack file.
        file: PathBuf,
        /// Do not ask for confirmation.
        #[arg(long, short)]
        yes: bool,
    },
    /// Compare the live cloud with what forge last applied, changing nothing.
    ///
    /// Strictly read-only: no state write, no create, update or delete, no lock (a run that
    /// holds the write lock is reported as "apply in progress since …"). Each kind is read in one
    /// batched call per page (by the stack's `forge:stack` tag or by id), kinds in parallel.
    ///
    /// Four classes, per resource: changed outside forge (only attributes the stack declares,
    /// `before -> after`), deleted outside forge, unmanaged (tagged with the stack's
    /// `forge:stack` but unknown to its state), and pending changes (the stack file differs
    /// from what was applied: not drift, reported apart).
    ///
    /// Ignore rules: `ignore_changes = ["tags.team"]` on any block, `--ignore` here; a node
    /// group whose size is a range ignores `scaling.desired` (the autoscaler owns it).
    ///
    /// Exit codes: 0 nothing, 2 drift, 3 only pending changes, 1 error; with several stacks,
    /// the worst of them (an error, then drift, then pending).
    Drift {
        /// Stack files; several are checked concurrently and end with one summary table.
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
        /// Print the report as JSON on stdout (`format_version` 1, see docs/drift.md).
        #[arg(long, conflicts_with = "markdown")]
        json: bool,
        /// Print the report as Markdown, ready for a pull request or issue comment.
        #[arg(long)]
        markdown: bool,
        /// Leave out a resource (`aws_vpc.main`) or one of its attributes
        /// (`aws_vpc.main.tags.team`, `eks.train.nodegroup.gpu.scaling.desired`); repeatable.
        #[arg(long, value_name = "ADDR[.ATTR]")]
        ignore: Vec<String>,
    },
    /// What each stack's recorded resources cost to run now, at the clouds' list prices.
    ///
    /// Per resource: what it is billed for (`2 × p5.48xlarge at $55.04/hour`) and its $/hour
    /// (an autoscaled group: as sized, with its min–max; spot: the on-demand price, the most it
    /// costs); a price unknown is listed, never counted as zero. Prices come from the AWS Price
    /// List Query API and the Google Cloud Billing Catalog API, cached a week under
    /// `$XDG_CACHE_HOME/forge` (`FORGE_PRICES_MAX_AGE` changes that). Read-only; prices that
    /// cannot be read are said to be unavailable, and why. See docs/cost.md.
    Cost {
        /// Stack files.
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
        /// Print the report as JSON on stdout (`format_version` 1, see docs/cost.md).
        #[arg(long, conflicts_with = "markdown")]
        json: bool,
        /// Print the report as Markdown, ready for a pull request or issue comment.
        #[arg(long)]
        markdown: bool,
    },
    /// Print the stack's dependency graph.
    Graph {
        /// The stack file.
        file: PathBuf,
        /// Output format.
        #[arg(long, value_enum, default_value = "text")]
        format: Format,
    },
    /// Print the stack's outputs as of the last apply.
    ///
    /// NAME is an `[outputs]` entry, a component's output (`fsx.data.pv_yaml`, ready for
    /// `kubectl apply -f -`) or a resource's attribute (`aws_vpc.main.id`), read from the state.
    Output {
        /// The stack file.
        file: PathBuf,
        /// One output; its value alone is printed (strings without quotes).
        name: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Write a kubeconfig context for an EKS or GKE cluster of the stack.
    ///
    /// Merges the cluster, user and context (named by the cluster's ARN, authenticating with
    /// `aws eks get-token`, as `aws eks update-kubeconfig` does; for GKE named
    /// `gke_<project>_<location>_<name>`, authenticating with `gke-gcloud-auth-plugin`, as
    /// `gcloud container clusters get-credentials` does) into `--kubeconfig`, else the
    /// first file of `$KUBECONFIG`, else `~/.kube/config`, and makes it the current context.
    /// Other contexts are kept; the file is replaced whole or not at all.
    Kubeconfig {
        /// The stack file.
        file: PathBuf,
        /// The cluster: an `eks` or `gke` block (`eks.train`, `gke.nemo`) or a cluster's
        /// address; needed only when the stack has several.
        cluster: Option<String>,
        /// The kubeconfig file to merge into.
        #[arg(long, value_name = "PATH")]
        kubeconfig: Option<PathBuf>,
        /// Print a kubeconfig with just this cluster instead of merging.
        #[arg(long)]
        print: bool,
    },
    /// Take an object that exists into the stack, as the block at ADDRESS.
    ///
    /// Reads the object, holds it to the block (an attribute that would force its
    /// replacement is refused), marks it as forge's own (the forge:stack, forge:address and
    /// forge:token tags every create gives), records it in the state and prints the plan that
    /// brings it to the block's values — which the next `forge up` applies. An object another
    /// forge stack marked is refused, naming that stack. Kinds: aws_vpc, aws_subnet,
    /// aws_security_group. To only read an object and never manage it, give its block
    /// `existing = "<id>"` instead.
    Import {
        /// The stack file.
        file: PathBuf,
        /// The block's address: `aws_vpc.main`, or a component's resource (`vpc.main.vpc`).
        address: String,
        /// The object's id: `vpc-0abc…`, `sg-…`, `subnet-…`.
        id: String,
        /// Show what would be marked and recorded, and the plan after it; change nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Find the capacity GPU clusters run on: `forge capacity search` lists the EC2 Capacity
    /// Blocks for ML on sale for an instance type, a count and a duration.
    #[command(subcommand)]
    Capacity(CapacityCommand),
    /// Check a stack file without reading state or calling a cloud.
    Validate {
        /// The stack file.
        file: PathBuf,
    },
    /// Inspect or repair the state.
    #[command(subcommand)]
    State(StateCommand),
    /// Print a shell completion script: `forge completions bash > /etc/bash_completion.d/forge`.
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
}

/// `forge plan` options.
#[derive(Debug, Args)]
pub struct PlanOptions {
    /// Save the plan; `forge up PLAN` applies exactly it (or refuses it once the state moved on).
    #[arg(long, value_name = "PLAN")]
    pub out: Option<PathBuf>,
    /// Print the plan as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Exit 2 when there are changes, 0 when there are none, 1 on error.
    #[arg(long)]
    pub detailed_exitcode: bool,
    /// Plan the destruction of everything in the state.
    #[arg(long)]
    pub destroy: bool,
    /// Read the live resources first (one batched read per kind): what changed outside forge is
    /// shown and planned back, what was deleted is planned again; `--refresh=false` plans from
    /// the state alone.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    pub refresh: bool,
    /// Plan only the cloud side, as `forge up --skip-in-cluster` applies it: the in-cluster
    /// objects are shown as pending and not read.
    #[arg(long, conflicts_with = "destroy")]
    pub skip_in_cluster: bool,
    /// Leave out the cost section: what the stack costs an hour at the clouds' list prices
    /// (AWS Price List, Google Cloud Billing Catalog; cached a week) and what the plan changes.
    #[arg(long)]
    pub no_cost: bool,
}

/// `forge state …`
#[derive(Debug, Subcommand)]
pub enum StateCommand {
    /// List the resources in the state.
    List {
        /// The stack file.
        file: PathBuf,
    },
    /// Print one resource's record as JSON.
    Show {
        /// The stack file.
        file: PathBuf,
        /// The resource's address.
        address: String,
    },
    /// Forget a resource without deleting it in the cloud.
    Rm {
        /// The stack file.
        file: PathBuf,
        /// The resource's address.
        address: String,
    },
    /// Release a lock left by a run that is gone.
    Unlock {
        /// The stack file.
        file: PathBuf,
        /// The lock id from the message that reported the lock.
        lock_id: String,
        /// Release it even if its holder still runs on this host.
        #[arg(long)]
        force: bool,
    },
    /// Copy the local state file (`[state] path`) to the stack's remote state, to move a stack
    /// to a bucket: set `[state] backend` first. Lineage and serial are kept; a remote state of
    /// another lineage, or a newer one, is never overwritten. With `--from`, push another file:
    /// the rescue file a run leaves when its bucket stopped answering
    /// (`state/<stack>.rescue.json`), which is removed once pushed.
    Push {
        /// The stack file.
        file: PathBuf,
        /// The local state file to push (default `[state] path`).
        #[arg(long, value_name = "STATE_FILE")]
        from: Option<PathBuf>,
    },
    /// Copy the stack's remote state to the local state file (`[state] path`), to move a stack
    /// back to a file or to keep a copy. A local state of another lineage, or a newer one, is
    /// never overwritten.
    Pull {
        /// The stack file.
        file: PathBuf,
    },
}

/// `forge capacity …`.
#[derive(Debug, Subcommand)]
pub enum CapacityCommand {
    /// List the Capacity Block offerings EC2 has for an instance type, a count and a duration,
    /// cheapest first: zone, start and end (UTC; every block starts and ends at 11:30), hours,
    /// instances, the upfront fee and the offering id. Buys nothing.
    ///
    /// Blocks last 1 to 14 days, then whole weeks up to 182 days, and hold 1 to 64 instances
    /// (UltraServer types: whole UltraServers, 18 `p6e-gb200.36xlarge` or 4 `trn2u.48xlarge`
    /// each). A request EC2 would refuse is an error before any call. The fee is charged up
    /// front when a block is bought and is not refunded.
    ///
    /// Example: `forge capacity search --instance-type p5.48xlarge --count 2 --days 7 --region us-east-2`
    Search(CapacitySearch),
}

/// `forge capacity search`'s options.
#[derive(Debug, Args)]
pub struct CapacitySearch {
    /// The instance type (`p5.48xlarge`, `p5en.48xlarge`, `p6-b200.48xlarge`, `trn2.48xlarge`,
    /// `p6e-gb200.36xlarge` for GB200 UltraServers).
    #[arg(long, value_name = "TYPE")]
    pub instance_type: String,
    /// How many instances.
    #[arg(long, value_name = "N")]
    pub count: u32,
    /// How many days: 1 to 14, or 21, 28, … 182.
    #[arg(long, value_name = "DAYS")]
    pub days: u32,
    /// Only offerings in these zones (`--zones us-east-2a,us-east-2b`).
    #[arg(long, value_name = "ZONE,…", value_delimiter = ',')]
    pub zones: Vec<String>,
    /// Only offerings that start on or after this date (`2026-12-01`) or time (RFC 3339).
    #[arg(long, value_name = "DATE")]
    pub start_after: Option<String>,
    /// The region; default: the `[aws] region` of `--file`, else the AWS environment's.
    #[arg(long)]
    pub region: Option<String>,
    /// A stack file whose `[aws]` says where to look (region, profile).
    #[arg(long, value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// Print the offerings as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}
