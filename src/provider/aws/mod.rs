//! AWS: the SDK clients made from `[aws]` and the standard AWS chain (credentials, region,
//! `AWS_ENDPOINT_URL`), error mapping, tagging, and one file per resource kind.

/// Reads one EC2 kind for drift and refresh: every object tagged `forge:stack = stack` in one
/// filtered Describe (all pages), then by id, in chunks, the recorded ones that did not show
/// (someone removed the tag; a filter never fails on an id that is gone). Each object becomes an
/// [`Observed`](crate::provider::Observed) with the attributes `$attributes(&item)` reads:
/// `observe_ec2!(aws, stack, ids, describe_vpcs, "vpc-id", vpcs, vpc_id, |v: &Vpc| json!({…}))`.
/// Extra `$filter`s (a NAT gateway's live states) go on both reads; `once` in front is for the
/// Describes that have no pages, `filter` for the one whose parameter is `Filter`, not `Filters`.
macro_rules! observe_ec2 {
    (once $($rest:tt)*) => { observe_ec2!(@read once set_filters $($rest)*) };
    (filter $($rest:tt)*) => { observe_ec2!(@read paged set_filter $($rest)*) };
    ($aws:expr, $($rest:tt)*) => { observe_ec2!(@read paged set_filters $aws, $($rest)*) };
    (@page paged, $request:expr, $aws:expr, $call:ident, $items:ident) => {{
        let mut items = Vec::new();
        let mut pages = $request.into_paginator().send();
        while let Some(page) = pages.next().await {
            items.extend(page.map_err(|e| $crate::provider::aws::error($aws, stringify!($call), e))?.$items().iter().cloned());
        }
        items
    }};
    (@page once, $request:expr, $aws:expr, $call:ident, $items:ident) => {
        $request.send().await.map_err(|e| $crate::provider::aws::error($aws, stringify!($call), e))?.$items().to_vec()
    };
    (@read $mode:ident $setter:ident $aws:expr, $stack:expr, $ids:expr, $call:ident, $id_filter:literal, $items:ident, $id:ident, $attributes:expr $(, $filter:expr)*) => {{
        use aws_sdk_ec2::types::Filter;
        let mut seen: Vec<$crate::provider::Observed> = Vec::new();
        let mut asks = vec![vec![Filter::builder().name("tag:forge:stack").values($stack).build()]];
        let mut asked_by_id = false;
        while let Some(filters) = asks.pop() {
            let filters: Vec<Filter> = filters.into_iter().chain([$($filter),*]).collect();
            let request = $aws.ec2.$call().$setter(Some(filters));
            for item in observe_ec2!(@page $mode, request, $aws, $call, $items) {
                let id = item.$id().unwrap_or_default().to_owned();
                if !seen.iter().any(|o| o.id == id) {
                    seen.push($crate::provider::Observed {
                        id,
                        address: $crate::provider::aws::address_in(&$crate::provider::aws::ec2_tags(item.tags()), $stack),
                        attributes: ($attributes)(&item),
                    });
                }
            }
            if asks.is_empty() && !asked_by_id {
                asked_by_id = true;
                let missing: Vec<String> = $ids.iter().filter(|id| !seen.iter().any(|o| &o.id == *id)).cloned().collect();
                asks = missing
                    .chunks(100)
                    .map(|chunk| vec![Filter::builder().name($id_filter).set_values(Some(chunk.to_vec())).build()])
                    .collect();
            }
        }
        Ok(seen)
    }};
}

/// The EC2 object the create with `token` made, if any: one Describe filtered by forge's stack,
/// address and token tags (and any extra `$filter`s), and then forge's ownership check
/// ([`ec2_made_by`]) on each object it returns — a filter the server ignores or widens must
/// never make forge adopt someone else's object:
/// `find_own!(ctx, aws, token, describe_vpcs, vpcs, "DescribeVpcs")` is an `Option<Vpc>`.
/// `filter` in front is for the Describe whose parameter is `Filter`, not `Filters`.
macro_rules! find_own {
    (filter $($rest:tt)*) => { find_own!(@find set_filter $($rest)*) };
    ($ctx:expr, $($rest:tt)*) => { find_own!(@find set_filters $ctx, $($rest)*) };
    (@find $setter:ident $ctx:expr, $aws:expr, $token:expr, $call:ident, $items:ident, $what:literal $(, $filter:expr)*) => {{
        let filters = $crate::provider::aws::own_filters($ctx, $token).into_iter().chain([$($filter),*]).collect();
        let found = $aws.ec2.$call().$setter(Some(filters)).send().await.map_err(|e| $crate::provider::aws::error($aws, $what, e))?;
        found.$items().iter().find(|item| $crate::provider::aws::ec2_made_by($ctx, $token, item.tags())).cloned()
    }};
}

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

/// The names an EKS list call returns for one cluster, all pages; `None` when the cluster is
/// gone: `eks_names!(aws, list_addons, addons, cluster)`.
macro_rules! eks_names {
    ($aws:expr, $call:ident, $items:ident, $cluster:expr) => {{
        let mut names = Vec::new();
        let mut pages = $aws.eks.$call().cluster_name($cluster).into_paginator().send();
        loop {
            match pages.next().await {
                None => break Ok(Some(names)),
                Some(Ok(page)) => names.extend(page.$items().iter().cloned()),
                Some(Err(e)) if $crate::provider::aws::code(&e) == Some($crate::provider::aws::eks::NOT_FOUND) => break Ok(None),
                Some(Err(e)) => break Err($crate::provider::aws::error($aws, stringify!($call), e)),
            }
        }
    }};
}

/// The ids a PCS list call returns for one cluster, all pages; `None` when the cluster is
/// gone: `pcs_members!(aws, list_queues, queues, cluster)`.
macro_rules! pcs_members {
    ($aws:expr, $call:ident, $items:ident, $cluster:expr) => {{
        let mut ids = Vec::new();
        let mut pages = $aws.pcs.$call().cluster_identifier($cluster).into_paginator().send();
        loop {
            match pages.next().await {
                None => break Ok(Some(ids)),
                Some(Ok(page)) => ids.extend(page.$items().iter().map(|item| item.id().to_owned())),
                Some(Err(e)) if $crate::provider::aws::code(&e) == Some($crate::provider::aws::pcs::NOT_FOUND) => break Ok(None),
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

/// Applies an IAM tag update (see [`iam_tag_changes`]) with the kind's own calls:
/// `sync_iam_tags!(ctx, aws, old, new, untag_role, tag_role, role_name(id))`.
macro_rules! sync_iam_tags {
    ($ctx:expr, $aws:expr, $old:expr, $new:expr, $untag:ident, $tag:ident, $key:ident($id:expr)) => {{
        let (removed, set) = $crate::provider::aws::iam_tag_changes($ctx, $old, $new);
        retag!($aws, iam, $untag, $tag, $key($id), removed, set);
    }};
}

mod efs_file_system;
mod efs_mount_target;
mod cloudformation_stack;
mod eip;
mod eks;
mod eks_addon;
mod eks_cluster;
mod eks_nodegroup;
mod fsx;
mod fsx_data_repository_association;
mod fsx_lustre;
mod iam_instance_profile;
mod iam_oidc_provider;
mod iam_policy;
mod iam_role;
pub mod instance_types;
mod internet_gateway;
mod launch_template;
mod nat_gateway;
mod pacing;
mod pcs;
mod pcs_cluster;
mod pcs_compute_node_group;
mod pcs_queue;
mod placement_group;
mod rates;
mod route_table;
mod security_group;
mod security_group_ingress;
mod subnet;
mod vpc;

pub use eks_cluster::describe as describe_eks_cluster;
pub use fsx_lustre::DEFAULT_DEPLOYMENT as FSX_DEFAULT_DEPLOYMENT;

pub use crate::provider::{Poll, wait_gone, wait_until};
pub use crate::provider::{TOKEN_TAG, made_by, parse};

use super::{Ctx, ProviderError, Registry};
use aws_sdk_ec2::config::http::HttpResponse;
use aws_sdk_ec2::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_ec2::types::{Filter, ResourceType, Tag, TagSpecification};
use serde_json::Value;
use std::collections::BTreeMap;

/// Adds the AWS kinds to a registry.
pub fn register(registry: Registry) -> Registry {
    registry
        .with(vpc::Vpc)
        .with(subnet::Subnet)
        .with(internet_gateway::InternetGateway)
        .with(eip::Eip)
        .with(nat_gateway::NatGateway)
        .with(route_table::RouteTable)
        .with(security_group::SecurityGroup)
        .with(security_group_ingress::SecurityGroupIngress)
        .with(placement_group::PlacementGroup)
        .with(launch_template::LaunchTemplate)
        .with(iam_role::IamRole)
        .with(iam_policy::IamPolicy)
        .with(iam_instance_profile::IamInstanceProfile)
        .with(iam_oidc_provider::IamOidcProvider)
        .with(eks_cluster::EksCluster)
        .with(eks_nodegroup::EksNodegroup)
        .with(eks_addon::EksAddon)
        .with(fsx_lustre::FsxLustre)
        .with(fsx_data_repository_association::FsxDataRepositoryAssociation)
        .with(efs_file_system::EfsFileSystem)
        .with(efs_mount_target::EfsMountTarget)
        .with(cloudformation_stack::CloudFormationStack)
        .with(pcs_cluster::PcsCluster)
        .with(pcs_compute_node_group::PcsComputeNodeGroup)
        .with(pcs_queue::PcsQueue)
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
    pub async fn connect(settings: Option<&Value>, budgets: std::sync::Arc<crate::provider::budget::Budgets>) -> Clients {
        let setting = |key: &str| settings.and_then(|s| s.get(key)).and_then(Value::as_str).map(str::to_owned);
        let mut loader = aws_config::defaults(aws_config::BehaviorVersion::latest())
            .retry_config(aws_config::retry::RetryConfig::disabled())
            .identity_cache(pacing::PacedIdentityCache::new());
        if let Some(region) = setting("region") {
            loader = loader.region(aws_config::Region::new(region));
        }
        if let Some(profile) = setting("profile") {
            loader = loader.profile_name(profile);
        }
        let config = loader.load().await;
        let context = format!(
            "region {}, profile {}, endpoint {}",
            config.region().map_or("(none)", |r| r.as_ref()),
            setting("profile")
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

/// Deletes an object of a service that shows a status (EKS, PCS) and waits until it is gone.
/// `status` reads its status (`None`: gone); `delete` sends the delete, which is skipped when
/// the object is gone or already DELETING (after a run that ran out of time). `busy` is the
/// service's code for "still in use" — a cluster whose node groups are still going, an object
/// mid-update —, retried with backoff; `ResourceNotFoundException` is success.
pub async fn delete_and_wait<S, SFut, T, E, D, DFut>(
    ctx: &Ctx,
    aws: &Clients,
    operation: &str,
    busy: &str,
    limit: std::time::Duration,
    status: S,
    delete: D,
) -> Result<(), ProviderError>
where
    S: Fn() -> SFut,
    SFut: std::future::Future<Output = Result<Option<String>, ProviderError>>,
    D: FnOnce() -> DFut,
    DFut: std::future::Future<Output = Result<T, SdkError<E, HttpResponse>>>,
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    match status().await?.as_deref() {
        None => return Ok(()),
        Some("DELETING") => {}
        Some(_) => match delete().await {
            Ok(_) => {}
            Err(e) if code(&e) == Some("ResourceNotFoundException") => return Ok(()),
            Err(e) if code(&e) == Some(busy) => {
                return Err(ProviderError {
                    retryable: true,
                    ..error(aws, operation, e)
                });
            }
            Err(e) => return Err(error(aws, operation, e)),
        },
    }
    wait_gone(ctx, limit, status).await
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

/// The tags an EC2 object is created with (`forge:token` included), as a TagSpecification.
pub fn tag_spec(ctx: &Ctx, token: &str, resource: ResourceType, config: &Value) -> TagSpecification {
    let tags = create_tags(ctx, token, config)
        .into_iter()
        .map(|(k, v)| Tag::builder().key(k).value(v).build());
    TagSpecification::builder()
        .resource_type(resource)
        .set_tags(Some(tags.collect()))
        .build()
}

/// Whether an EC2 object with these tags was made by the create with `token` (see [`made_by`]).
pub fn ec2_made_by(ctx: &Ctx, token: &str, tags: &[Tag]) -> bool {
    made_by(ctx, token, |k| tags.iter().find(|t| t.key() == Some(k)).and_then(|t| t.value()))
}

/// Filters that find the object the create with `token` made: its stack, address and token tags.
pub fn own_filters(ctx: &Ctx, token: &str) -> Vec<Filter> {
    [
        ("forge:stack", ctx.stack.as_str()),
        ("forge:address", ctx.address.as_str()),
        (TOKEN_TAG, token),
    ]
    .into_iter()
    .map(|(k, v)| Filter::builder().name(format!("tag:{k}")).values(v).build())
    .collect()
}

/// Maps a failed delete of a VPC, subnet or security group; on `DependencyViolation` it names
/// the network interfaces still in it (load balancers, EKS, leftover ENIs), found with
/// `filter` (`vpc-id`, `subnet-id`, `group-id`) = `id`.
pub async fn delete_error<E>(aws: &Clients, what: &str, filter: &str, id: &str, err: SdkError<E, HttpResponse>) -> ProviderError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    let in_use = err.code() == Some("DependencyViolation");
    let mut mapped = error(aws, what, err);
    if in_use {
        let found = aws
            .ec2
            .describe_network_interfaces()
            .filters(Filter::builder().name(filter).values(id).build())
            .send()
            .await;
        let users: Vec<String> = found
            .map(|out| {
                out.network_interfaces()
                    .iter()
                    .map(|n| {
                        format!(
                            "{} ({})",
                            n.network_interface_id().unwrap_or("?"),
                            n.description().filter(|d| !d.is_empty()).unwrap_or("no description")
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        if !users.is_empty() {
            mapped.message = format!(
                "{}; still in use by {}: delete what created them (Kubernetes load balancers and services, instances) or wait for them to go, then run `forge destroy` again",
                mapped.message,
                users.join(", ")
            );
        }
    }
    mapped
}

/// What a tag update does: the keys to remove, and the tags to set (new or with a new value).
pub fn tag_changes(ctx: &Ctx, old: &Value, new: &Value) -> (Vec<String>, BTreeMap<String, String>) {
    let (before, after) = (ctx.tags(old), ctx.tags(new));
    let removed = before.keys().filter(|k| !after.contains_key(*k)).cloned().collect();
    let changed = after.into_iter().filter(|(k, v)| before.get(k) != Some(v)).collect();
    (removed, changed)
}

/// Brings an EC2 object's tags from `old` to `new` config (`default_tags` and forge's own
/// included) with one CreateTags and one DeleteTags at most.
pub async fn sync_tags(ctx: &Ctx, clients: &Clients, id: &str, old: &Value, new: &Value) -> Result<(), ProviderError> {
    let (removed, changed) = tag_changes(ctx, old, new);
    let removed: Vec<Tag> = removed.iter().map(|k| Tag::builder().key(k).build()).collect();
    let changed: Vec<Tag> = changed.iter().map(|(k, v)| Tag::builder().key(k).value(v).build()).collect();
    if !removed.is_empty() {
        clients
            .ec2
            .delete_tags()
            .resources(id)
            .set_tags(Some(removed))
            .send()
            .await
            .map_err(|e| error(clients, "DeleteTags", e))?;
    }
    if !changed.is_empty() {
        clients
            .ec2
            .create_tags()
            .resources(id)
            .set_tags(Some(changed))
            .send()
            .await
            .map_err(|e| error(clients, "CreateTags", e))?;
    }
    Ok(())
}

/// EC2 tags as a table, as the stack writes them (forge's own included: drift compares only
/// the keys a block declares).
pub fn ec2_tags(tags: &[Tag]) -> Value {
    tag_table(tags.iter().map(|t| (t.key(), t.value())))
}

/// A tag list as a table.
pub fn tag_table<'t>(tags: impl Iterator<Item = (Option<&'t str>, Option<&'t str>)>) -> Value {
    Value::Object(
        tags.filter_map(|(k, v)| Some((k?.to_owned(), Value::String(v.unwrap_or_default().to_owned()))))
            .collect(),
    )
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

/// The tags an IAM object is created with.
pub fn iam_tags(ctx: &Ctx, config: &Value) -> Vec<aws_sdk_iam::types::Tag> {
    ctx.tags(config)
        .into_iter()
        .filter_map(|(k, v)| aws_sdk_iam::types::Tag::builder().key(k).value(v).build().ok())
        .collect()
}

/// The tags an IAM object is created with: [`create_tags`].
pub fn iam_create_tags(ctx: &Ctx, token: &str, config: &Value) -> Vec<aws_sdk_iam::types::Tag> {
    create_tags(ctx, token, config)
        .into_iter()
        .filter_map(|(k, v)| aws_sdk_iam::types::Tag::builder().key(k).value(v).build().ok())
        .collect()
}

/// Whether an existing IAM object was made by the create with `token` (see [`made_by`]).
pub fn iam_owned(ctx: &Ctx, token: &str, tags: &[aws_sdk_iam::types::Tag]) -> bool {
    made_by(ctx, token, |k| tags.iter().find(|t| t.key() == k).map(|t| t.value()))
}

/// The error for an IAM name taken by an object this resource did not create.
pub fn iam_name_taken(ctx: &Ctx, what: &str, name: &str) -> ProviderError {
    ProviderError::permanent(format!(
        "an IAM {what} named `{name}` already exists and was not created by `{}` in stack `{}`; pick another name, or delete it if it is a leftover",
        ctx.address, ctx.stack
    ))
}

/// What an IAM tag update does: the keys to remove, and the full tag set to apply when
/// anything changed.
pub fn iam_tag_changes(ctx: &Ctx, old: &Value, new: &Value) -> (Vec<String>, Option<Vec<aws_sdk_iam::types::Tag>>) {
    let (before, after) = (ctx.tags(old), ctx.tags(new));
    let removed = before.keys().filter(|k| !after.contains_key(*k)).cloned().collect();
    (removed, (before != after).then(|| iam_tags(ctx, new)))
}

/// IAM's default path for roles, policies and instance profiles.
pub fn iam_root_path() -> String {
    "/".into()
}

/// A policy document (a TOML table) as the JSON string IAM takes.
pub fn policy_json(document: &Value) -> String {
    serde_json::to_string(document).expect("JSON values serialize")
}
