//! AWS: the SDK clients made from `[aws]` and the standard AWS chain (credentials, region,
//! `AWS_ENDPOINT_URL`), error mapping and tagging, here; the rate budgets' pacing (`pacing`,
//! `rates`), the instance-type facts (`instance_types`) and the list prices (`pricing`) beside them; and one folder per
//! service (`ec2/`, `iam/`, `eks/`, `autoscaling/`, `fsx/`, `efs/`, `pcs/`, `cloudformation/`), its `mod.rs`
//! holding the service's own helpers and one file per resource kind.

/// Every item a paginated call returns over all its pages, or the mapped error:
/// `all_pages!(aws, aws.fsx.describe_file_systems(), file_systems, "DescribeFileSystems")`.
macro_rules! all_pages {
    ($aws:expr, $request:expr, $items:ident, $what:literal) => {{
        let mut found = Vec::new();
        let mut pages = $request.into_paginator().send();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| $crate::provider::aws::error($aws, $what, e))?;
            found.extend(page.$items().iter().cloned());
        }
        found
    }};
}

/// The members a list call returns for one cluster, all pages; `None` when the cluster is
/// gone: `members!(eks aws, list_addons, addons, cluster)` (names), `members!(pcs aws,
/// list_queues, queues, cluster)` (ids).
macro_rules! members {
    (eks $aws:expr, $call:ident, $items:ident, $cluster:expr) => {
        members!(@list $aws, eks, $call, cluster_name($cluster), $items, String::clone)
    };
    (pcs $aws:expr, $call:ident, $items:ident, $cluster:expr) => {
        members!(@list $aws, pcs, $call, cluster_identifier($cluster), $items, |item| item.id().to_owned())
    };
    (@list $aws:expr, $service:ident, $call:ident, $key:ident($cluster:expr), $items:ident, $member:expr) => {{
        let mut members = Vec::new();
        let mut pages = $aws.$service.$call().$key($cluster).into_paginator().send();
        loop {
            match pages.next().await {
                None => break Ok(Some(members)),
                Some(Ok(page)) => members.extend(page.$items().iter().map($member)),
                Some(Err(e)) if $crate::provider::aws::code(&e) == Some($crate::provider::aws::$service::NOT_FOUND) => break Ok(None),
                Some(Err(e)) => break Err($crate::provider::aws::error($aws, stringify!($call), e)),
            }
        }
    }};
}

/// Removes and sets tags with a service's own two calls, each skipped when it has nothing to
/// do: `retag!(aws, eks, untag_resource, tag_resource, resource_arn(arn), removed, set)`, with
/// `removed` the keys to remove and `set` `Some(tags)` when tags are to be set.
macro_rules! retag {
    ($aws:expr, $client:ident, $untag:ident, $tag:ident, $key:ident($id:expr), $removed:expr, $set:expr) => {{
        let removed: Vec<String> = $removed;
        if !removed.is_empty() {
            $aws.$client
                .$untag()
                .$key($id)
                .set_tag_keys(Some(removed))
                .send()
                .await
                .map_err(|e| $crate::provider::aws::error($aws, stringify!($untag), e))?;
        }
        if let Some(tags) = $set {
            $aws.$client
                .$tag()
                .$key($id)
                .set_tags(Some(tags))
                .send()
                .await
                .map_err(|e| $crate::provider::aws::error($aws, stringify!($tag), e))?;
        }
    }};
}

mod autoscaling;
mod cloudformation;
mod ec2;
mod efs;
mod eks;
mod fsx;
mod iam;
pub mod capacity;
pub mod instance_types;
pub mod pricing;
mod pacing;
mod pcs;
mod rates;

pub use eks::cluster::describe as describe_eks_cluster;
pub use fsx::lustre::DEFAULT_DEPLOYMENT as FSX_DEFAULT_DEPLOYMENT;

pub use crate::provider::{Poll, wait_gone, wait_until};
pub use crate::provider::{TOKEN_TAG, made_by, parse};

use super::settings::AwsSettings;
use super::{Ctx, ProviderError, Registry};
use aws_sdk_ec2::config::http::HttpResponse;
use aws_sdk_ec2::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use serde_json::Value;
use std::collections::BTreeMap;

/// Adds the AWS kinds to a registry.
pub fn register(registry: Registry) -> Registry {
    registry
        .with(ec2::vpc::Vpc)
        .with(ec2::subnet::Subnet)
        .with(ec2::internet_gateway::InternetGateway)
        .with(ec2::eip::Eip)
        .with(ec2::nat_gateway::NatGateway)
        .with(ec2::route_table::RouteTable)
        .with(ec2::security_group::SecurityGroup)
        .with(ec2::security_group_ingress::SecurityGroupIngress)
        .with(ec2::placement_group::PlacementGroup)
        .with(ec2::capacity_block::CapacityBlock)
        .with(ec2::capacity_reservation::CapacityReservationKind)
        .with(ec2::launch_template::LaunchTemplate)
        .with(iam::role::IamRole)
        .with(iam::policy::IamPolicy)
        .with(iam::instance_profile::IamInstanceProfile)
        .with(iam::oidc_provider::IamOidcProvider)
        .with(eks::cluster::EksCluster)
        .with(eks::nodegroup::EksNodegroup)
        .with(eks::addon::EksAddon)
        .with(eks::access_entry::EksAccessEntry)
        .with(autoscaling::schedule::AutoscalingSchedule)
        .with(fsx::lustre::FsxLustre)
        .with(fsx::data_repository_association::FsxDataRepositoryAssociation)
        .with(efs::file_system::EfsFileSystem)
        .with(efs::mount_target::EfsMountTarget)
        .with(cloudformation::stack::CloudFormationStack)
        .with(pcs::cluster::PcsCluster)
        .with(pcs::compute_node_group::PcsComputeNodeGroup)
        .with(pcs::queue::PcsQueue)
}

/// The SDK clients of one run.
pub struct Clients {
    /// EC2.
    pub ec2: aws_sdk_ec2::Client,
    /// IAM.
    pub iam: aws_sdk_iam::Client,
    /// EKS.
    pub eks: aws_sdk_eks::Client,
    /// FSx.
    pub fsx: aws_sdk_fsx::Client,
    /// EFS.
    pub efs: aws_sdk_efs::Client,
    /// CloudFormation.
    pub cloudformation: aws_sdk_cloudformation::Client,
    /// Parallel Computing Service.
    pub pcs: aws_sdk_pcs::Client,
    /// EC2 Auto Scaling: the scheduled actions on node groups' Auto Scaling groups.
    pub autoscaling: aws_sdk_autoscaling::Client,
    /// STS: who forge is, for the errors of a cluster that refuses it.
    pub sts: aws_sdk_sts::Client,
    /// "region …, profile …, endpoint …": said with every AWS error so a wrong account or
    /// endpoint is obvious.
    pub context: String,
    /// The loaded configuration (region, credentials), for what forge signs itself: the EKS
    /// cluster token.
    pub sdk: aws_config::SdkConfig,
}

impl Clients {
    /// Loads the AWS configuration: `region` and `profile` from `[aws]` when set, everything
    /// else from the standard chain; the SDK's own retries off, so forge's retry
    /// ([`crate::provider::RetryPolicy`]) is the only one: a call is sent `--max-attempts` times
    /// at most, and a retried create always goes back through the kind, which first looks for
    /// what an earlier attempt made (no SDK-level resend can make a second object when the
    /// first try succeeded but its answer was lost). Every call is paced by its API's rate
    /// budget ([`pacing`]).
    pub async fn connect(settings: Option<&AwsSettings>, budgets: std::sync::Arc<crate::provider::budget::Budgets>) -> Clients {
        let profile = settings.and_then(|s| s.profile.clone());
        let mut loader = aws_config::defaults(aws_config::BehaviorVersion::latest())
            .retry_config(aws_config::retry::RetryConfig::disabled())
            .identity_cache(pacing::PacedIdentityCache::new());
        if let Some(region) = settings.and_then(|s| s.region.clone()) {
            loader = loader.region(aws_config::Region::new(region));
        }
        if let Some(profile) = profile.clone() {
            loader = loader.profile_name(profile);
        }
        let config = loader.load().await;
        let context = format!(
            "region {}, profile {}, endpoint {}",
            config.region().map_or("(none)", |r| r.as_ref()),
            profile
                .or_else(|| std::env::var("AWS_PROFILE").ok())
                .unwrap_or_else(|| "default".into()),
            config.endpoint_url().unwrap_or("AWS")
        );
        let pacer = pacing::Pacer {
            scope: context.clone(),
            budgets,
        };
        // Each service's client with the pacer: `paced!(aws_sdk_ec2)`.
        macro_rules! paced {
            ($sdk:ident) => {
                $sdk::Client::from_conf($sdk::config::Builder::from(&config).interceptor(pacer.clone()).build())
            };
        }
        Clients {
            ec2: paced!(aws_sdk_ec2),
            iam: paced!(aws_sdk_iam),
            eks: paced!(aws_sdk_eks),
            fsx: paced!(aws_sdk_fsx),
            efs: paced!(aws_sdk_efs),
            cloudformation: paced!(aws_sdk_cloudformation),
            pcs: paced!(aws_sdk_pcs),
            autoscaling: paced!(aws_sdk_autoscaling),
            sts: paced!(aws_sdk_sts),
            context,
            sdk: config,
        }
    }
}

/// Error codes for a call refused for its request rate (EC2's, the query APIs', the JSON
/// APIs', S3's): nothing was done, and the rate budget paces the next try. Not
/// `LimitExceededException`, which several services answer for a quota.
const THROTTLING: &[&str] = &[
    "RequestLimitExceeded",
    "Throttling",
    "ThrottlingException",
    "TooManyRequestsException",
    "RequestThrottledException",
    "SlowDown",
];

/// Error codes besides [`THROTTLING`] that a later call may not hit: server errors, and objects
/// still in use while their dependents are being deleted.
const RETRYABLE: &[&str] = &[
    "InternalError",
    "InternalFailure",
    "ServiceUnavailable",
    "Unavailable",
    "DependencyViolation",
    "ServiceFailure",
    "ConcurrentModification",
];

/// The error code of an SDK error, if the service sent one.
pub fn code<E: ProvideErrorMetadata, R>(err: &SdkError<E, R>) -> Option<&str> {
    err.code()
}

/// Maps an SDK error to a [`ProviderError`]: the service's code and message verbatim, whether it
/// is worth retrying, and the region, profile and endpoint in use.
pub fn error<E>(clients: &Clients, what: &str, err: SdkError<E, HttpResponse>) -> ProviderError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    let transport = matches!(
        err,
        SdkError::TimeoutError(_) | SdkError::DispatchFailure(_) | SdkError::ResponseError(_)
    ) || err.raw_response().is_some_and(|r| r.status().as_u16() >= 500);
    let code = err.code().unwrap_or_default().to_owned();
    let throttled = THROTTLING.contains(&code.as_str());
    let message = match (err.message(), err.raw_response()) {
        (Some(message), _) => message.to_owned(),
        // No code and no message: not the service's own answer (an HTML page from a proxy or a
        // wrong endpoint). One line, not the SDK's dump of the raw response.
        (None, Some(raw)) if code.is_empty() => crate::provider::not_the_api(raw.status().as_u16(), raw.body().bytes().unwrap_or_default()),
        (None, _) => DisplayErrorContext(&err).to_string(),
    };
    let hint = if code == "DependencyViolation" {
        " — something still uses it"
    } else {
        ""
    };
    ProviderError {
        message: format!(
            "{what}: {}{message}{hint} ({})",
            if code.is_empty() { String::new() } else { format!("{code}: ") },
            clients.context
        ),
        retryable: transport || throttled || RETRYABLE.contains(&code.as_str()),
        throttled,
    }
}

/// A create's claim on a name that is unique in its scope (IAM, EKS and PCS names are): when
/// the name is taken, the object holding it is adopted if the create with `token` made it (an
/// earlier try whose answer was lost, or a resumed create), and refused otherwise. The one
/// adopt-or-refuse rule of the AWS kinds.
pub struct Claim<'a> {
    /// The resource making the claim.
    pub ctx: &'a Ctx,
    /// Its create's token.
    pub token: &'a str,
    /// What is named, for the refusal: `EKS cluster`, `IAM role`.
    pub what: &'a str,
    /// The name.
    pub name: &'a str,
}

impl<'a> Claim<'a> {
    /// The claim of the create with `token` of `ctx`'s resource on the `what` named `name`.
    pub fn new(ctx: &'a Ctx, token: &'a str, what: &'a str, name: &'a str) -> Self {
        Claim { ctx, token, what, name }
    }

    /// Whether the object holding the name carries this create's tags (`tag` reads one).
    pub fn adopts<'t>(&self, tag: impl Fn(&str) -> Option<&'t str>) -> bool {
        made_by(self.ctx, self.token, tag)
    }

    /// The object holding the name when it is this create's own (`found`: it, and whether its
    /// tags say so), else the refusal.
    pub fn adopt<T>(&self, found: Option<(T, bool)>) -> Result<T, ProviderError> {
        match found {
            Some((object, true)) => Ok(object),
            _ => Err(self.refusal()),
        }
    }

    /// The error for a name held by an object this create did not make.
    pub fn refusal(&self) -> ProviderError {
        ProviderError::permanent(format!(
            "{} `{}` already exists and was not created by `{}` in stack `{}`; pick another name, or delete it if it is a leftover",
            self.what, self.name, self.ctx.address, self.ctx.stack
        ))
    }
}

/// An object whose status forge reads while it waits for it (EKS, PCS, EFS, FSx).
pub(crate) trait Status {
    /// Its status as the service names it (`ACTIVE`, `DELETING`, `available`, …), when it
    /// shows one.
    fn status_name(&self) -> Option<&str>;
}

/// Waits until the object `get` reads is where `settled` says it should be, and returns it as it
/// is then. `settled` reads it as `Done(())` (there), `Pending(state)`, or `Failed(why)` (it
/// never will be), `why` following `what` ("EFS file system fs-1" "is in error"); an object that
/// disappears is an error too.
pub(crate) async fn wait_for<O, G, GFut>(
    ctx: &Ctx,
    what: &str,
    limit: std::time::Duration,
    get: G,
    settled: impl Fn(&O) -> Poll,
) -> Result<O, ProviderError>
where
    G: Fn() -> GFut,
    GFut: std::future::Future<Output = Result<Option<O>, ProviderError>>,
{
    wait_until(ctx, limit, || async {
        let Some(found) = get().await? else {
            return Ok(Poll::Failed(format!("{what} disappeared while forge waited for it")));
        };
        Ok(match settled(&found) {
            Poll::Done(()) => Poll::Done(found),
            Poll::Pending(state) => Poll::Pending(state),
            Poll::Failed(why) => Poll::Failed(format!("{what} {why}")),
        })
    })
    .await
}

/// Waits until the object `get` reads is gone, its status (none reads as DELETING) on the
/// progress line.
pub(crate) async fn wait_deleted<O, G, GFut>(ctx: &Ctx, limit: std::time::Duration, get: G) -> Result<(), ProviderError>
where
    O: Status,
    G: Fn() -> GFut,
    GFut: std::future::Future<Output = Result<Option<O>, ProviderError>>,
{
    wait_gone(ctx, limit, || async {
        Ok(get().await?.map(|found| found.status_name().unwrap_or("DELETING").to_owned()))
    })
    .await
}

/// Deletes an object and waits until it is gone ([`wait_deleted`]). `get` reads it; the delete
/// is skipped when the object is gone or already DELETING (after a run that ran out of time;
/// EFS says `deleting`). `delete` sends it and answers whether there is anything left to wait
/// for.
pub(crate) async fn delete_then_wait<O, G, GFut, D, DFut>(
    ctx: &Ctx,
    limit: std::time::Duration,
    get: G,
    delete: D,
) -> Result<(), ProviderError>
where
    O: Status,
    G: Fn() -> GFut,
    GFut: std::future::Future<Output = Result<Option<O>, ProviderError>>,
    D: FnOnce() -> DFut,
    DFut: std::future::Future<Output = Result<bool, ProviderError>>,
{
    match get().await? {
        None => return Ok(()),
        Some(found) if found.status_name().is_some_and(|s| s.eq_ignore_ascii_case("DELETING")) => {}
        Some(_) => {
            if !delete().await? {
                return Ok(());
            }
        }
    }
    wait_deleted(ctx, limit, get).await
}

/// What the answer to a delete leaves to wait for ([`delete_then_wait`]): the object unless the
/// service answers `gone`. `busy` is its code for "still in use" — a cluster whose node groups
/// are still going, an object mid-update, a file system with mount targets —, retried with
/// backoff.
pub(crate) fn deleted<T, E>(
    aws: &Clients,
    operation: &str,
    gone: &str,
    busy: &str,
    answer: Result<T, SdkError<E, HttpResponse>>,
) -> Result<bool, ProviderError>
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    match answer {
        Ok(_) => Ok(true),
        Err(e) if code(&e) == Some(gone) => Ok(false),
        Err(e) if code(&e) == Some(busy) => Err(ProviderError {
            retryable: true,
            ..error(aws, operation, e)
        }),
        Err(e) => Err(error(aws, operation, e)),
    }
}

/// A read of one object by its id or name: the answer, or `None` when the service answers
/// `not_found` (the object is gone).
pub(crate) fn found<T, E>(
    aws: &Clients,
    what: &str,
    answer: Result<T, SdkError<E, HttpResponse>>,
    not_found: &str,
) -> Result<Option<T>, ProviderError>
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    match answer {
        Ok(out) => Ok(Some(out)),
        Err(e) if e.code() == Some(not_found) => Ok(None),
        Err(e) => Err(error(aws, what, e)),
    }
}

/// A call whose listed error codes mean "already so" — deleting what is gone, attaching what
/// is attached — and so count as success.
pub fn tolerate<T, E>(aws: &Clients, what: &str, result: Result<T, SdkError<E, HttpResponse>>, codes: &[&str]) -> Result<(), ProviderError>
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    match result {
        Err(e) if !e.code().is_some_and(|c| codes.contains(&c)) => Err(error(aws, what, e)),
        _ => Ok(()),
    }
}

/// The tags an object is created with: the block's and forge's (see [`Ctx::tags`]) and
/// `forge:token`, which ties it to the create that made it.
pub fn create_tags(ctx: &Ctx, token: &str, config: &Value) -> BTreeMap<String, String> {
    let mut tags = ctx.tags(config);
    tags.insert(TOKEN_TAG.into(), token.into());
    tags
}

/// forge's mark for `forge import` ([`crate::provider::Resource::mark`]): the stack, address
/// and token tags every create gives its object.
pub fn mark_tags<'a>(ctx: &'a Ctx, token: &'a str) -> [(&'static str, &'a str); 3] {
    [
        ("forge:stack", ctx.stack.as_str()),
        ("forge:address", ctx.address.as_str()),
        (TOKEN_TAG, token),
    ]
}

/// The ARN of the object `forge import` marks (`what`, as the error names it), or the error
/// that it went since it was read.
pub fn still_there<'a>(what: &str, arn: Option<&'a str>) -> Result<&'a str, ProviderError> {
    arn.ok_or_else(|| ProviderError::permanent(format!("{what} no longer exists")))
}

/// The stack and address of the forge mark an object carries, `tag` reading one of its tags.
pub fn mark_in<'t>(tag: impl Fn(&str) -> Option<&'t str>) -> Option<(String, String)> {
    Some((tag("forge:stack")?.to_owned(), tag("forge:address").unwrap_or_default().to_owned()))
}

/// What a tag update does: the keys to remove, and the tags to set (new or with a new value).
pub fn tag_changes(ctx: &Ctx, old: &Value, new: &Value) -> (Vec<String>, BTreeMap<String, String>) {
    let (before, after) = (ctx.tags(old), ctx.tags(new));
    let removed = before.keys().filter(|k| !after.contains_key(*k)).cloned().collect();
    let changed = after.into_iter().filter(|(k, v)| before.get(k) != Some(v)).collect();
    (removed, changed)
}

/// A tag list as a table.
pub fn tag_table<'t>(tags: impl Iterator<Item = (Option<&'t str>, Option<&'t str>)>) -> Value {
    Value::Object(
        tags.filter_map(|(k, v)| Some((k?.to_owned(), Value::String(v.unwrap_or_default().to_owned()))))
            .collect(),
    )
}

/// The recorded `ids` that a whole-account list shows (`listed`: its objects' ids or names), as
/// [`Observed`](crate::provider::Observed)s without attributes: the read of the kinds whose lists
/// tell nothing more than existence.
pub(crate) fn existing<'a>(ids: &[String], listed: impl IntoIterator<Item = &'a str>) -> Vec<crate::provider::Observed> {
    let live = listed.into_iter().filter(|id| ids.iter().any(|x| x == id)).map(str::to_owned);
    crate::provider::Observed::existing(live.collect::<Vec<_>>())
}

/// An object of a whole-account list (FSx, EFS, CloudFormation) as an
/// [`Observed`](crate::provider::Observed) when it is recorded (`ids`) or carries the stack's
/// tag, with the attributes `attributes` reads given its tag table.
pub fn listed(
    stack: &str,
    ids: &[String],
    id: String,
    tags: Value,
    attributes: impl FnOnce(Value) -> Value,
) -> Option<crate::provider::Observed> {
    let address = address_in(&tags, stack);
    (ids.contains(&id) || address.is_some()).then(|| crate::provider::Observed {
        attributes: attributes(tags),
        id,
        address,
    })
}

/// The `forge:address` in a tag table (see [`tag_table`]) when the tags name `stack`.
pub fn address_in(tags: &Value, stack: &str) -> Option<String> {
    let tag = |key: &str| tags.get(key).and_then(Value::as_str);
    (tag("forge:stack") == Some(stack)).then(|| tag("forge:address").unwrap_or_default().to_owned())
}

/// The id of an object that lives in a parent (an EKS node group or add-on in its cluster, an
/// EFS mount target in its file system): `<parent>/<name>`.
pub fn child_id(parent: &str, name: &str) -> String {
    format!("{parent}/{name}")
}

/// A child id's parent and name (neither may hold a `/`).
pub fn split(id: &str) -> (&str, &str) {
    id.split_once('/').unwrap_or((id, id))
}

/// Which child `ids` still exist: one `list` (all pages) per parent they name; `list` gives
/// `None` when the parent itself is gone.
pub async fn live_children<F, Fut>(ids: &[String], list: F) -> Result<std::collections::HashSet<String>, ProviderError>
where
    F: Fn(String) -> Fut,
    Fut: std::future::Future<Output = Result<Option<Vec<String>>, ProviderError>>,
{
    let parents: std::collections::BTreeSet<&str> = ids.iter().map(|id| split(id).0).collect();
    let mut live = std::collections::HashSet::new();
    for parent in parents {
        for name in list(parent.to_owned()).await?.unwrap_or_default() {
            live.insert(child_id(parent, &name));
        }
    }
    live.retain(|id| ids.contains(id));
    Ok(live)
}
