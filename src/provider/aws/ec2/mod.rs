//! EC2: the network and instance kinds (VPCs, subnets, gateways, route tables, security
//! groups, placement groups, launch templates), one file each, and what they share here:
//! reading a kind by forge's tags (`observe_ec2!`), finding what an interrupted create made
//! (`find_own!`), tags, and naming what still uses an object that will not go.

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
                        address: $crate::provider::aws::address_in(&$crate::provider::aws::ec2::ec2_tags(item.tags()), $stack),
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
        let filters = $crate::provider::aws::ec2::own_filters($ctx, $token).into_iter().chain([$($filter),*]).collect();
        let found = $aws.ec2.$call().$setter(Some(filters)).send().await.map_err(|e| $crate::provider::aws::error($aws, $what, e))?;
        found.$items().iter().find(|item| $crate::provider::aws::ec2::ec2_made_by($ctx, $token, item.tags())).cloned()
    }};
}

/// The EC2 objects an `existing` block names ([`crate::provider::Resource::look_up`]): one
/// paged Describe filtered by the id (`$id_filter`) or by every tag of the selector, each item
/// made a [`crate::provider::Found`] by `$found`:
/// `look_up_ec2!(aws, selector, describe_vpcs, "vpc-id", vpcs, found)`.
macro_rules! look_up_ec2 {
    ($aws:expr, $selector:expr, $call:ident, $id_filter:literal, $items:ident, $found:expr) => {{
        use aws_sdk_ec2::types::Filter;
        let filters: Vec<Filter> = match $selector {
            $crate::provider::Selector::Id(id) => vec![Filter::builder().name($id_filter).values(id).build()],
            $crate::provider::Selector::Tags { tags } => tags
                .iter()
                .map(|(k, v)| Filter::builder().name(format!("tag:{k}")).values(v).build())
                .collect(),
            // The attributes EC2 filters by (`vpc_id` → `vpc-id`); the kind judges the others.
            $crate::provider::Selector::Where(values) => values
                .iter()
                .filter(|(k, _)| super::FILTERED.contains(&k.as_str()))
                .map(|(k, v)| Filter::builder().name(k.replace('_', "-")).values(v).build())
                .collect(),
        };
        let mut found: Vec<$crate::provider::Found> = Vec::new();
        let mut pages = $aws.ec2.$call().set_filters(Some(filters)).into_paginator().send();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| $crate::provider::aws::error($aws, stringify!($call), e))?;
            found.extend(page.$items().iter().map($found));
        }
        Ok(found)
    }};
}

/// The EC2 object `id` for `forge import` ([`crate::provider::Resource::inspect`]): one
/// Describe filtered by `$id_filter`, its outputs from `$outputs`, its attributes from
/// `$attributes` and the forge mark its tags carry:
/// `inspect_ec2!(aws, id, describe_vpcs, "vpc-id", vpcs, outputs, attributes)`.
/// Extra `$filter`s (a NAT gateway's live states) go on the Describe; `filter` in front is for
/// the Describe whose parameter is `Filter`, not `Filters`.
macro_rules! inspect_ec2 {
    (filter $($rest:tt)*) => { inspect_ec2!(@inspect filter $($rest)*) };
    ($aws:expr, $($rest:tt)*) => { inspect_ec2!(@inspect filters $aws, $($rest)*) };
    (@inspect $setter:ident $aws:expr, $id:expr, $call:ident, $id_filter:literal, $items:ident, $outputs:expr, $attributes:expr $(, $filter:expr)*) => {{
        use aws_sdk_ec2::types::Filter;
        let answer = $aws
            .ec2
            .$call()
            .$setter(Filter::builder().name($id_filter).values($id).build())
            $(.$setter($filter))*
            .send()
            .await
            .map_err(|e| $crate::provider::aws::error($aws, stringify!($call), e))?;
        Ok(answer.$items().first().map(|item| $crate::provider::Inspected {
            outputs: ($outputs)(item),
            attributes: ($attributes)(item),
            mark: $crate::provider::aws::ec2::mark_of(item.tags()),
        }))
    }};
}

/// `importable` and `inspect` of an EC2 kind `forge import` takes whose `inspect` is one
/// Describe by id: the arguments are [`inspect_ec2!`]'s after `id`:
/// `importable_ec2!(describe_subnets, "subnet-id", subnets, live_outputs, read_attributes);`
macro_rules! importable_ec2 {
    (@methods [$($mode:ident)?] $($rest:tt)*) => {
        fn importable(&self) -> bool {
            true
        }

        async fn inspect(
            &self,
            cloud: &$crate::provider::Cloud,
            id: &str,
        ) -> Result<Option<$crate::provider::Inspected>, $crate::provider::ProviderError> {
            let aws = cloud.aws().await;
            inspect_ec2!($($mode)? aws, id, $($rest)*)
        }
    };
    (filter $($rest:tt)*) => { importable_ec2!(@methods [filter] $($rest)*); };
    ($($rest:tt)*) => { importable_ec2!(@methods [] $($rest)*); };
}

/// The stack and address of the forge mark these tags carry, if any.
pub(super) fn mark_of(tags: &[Tag]) -> Option<(String, String)> {
    super::mark_in(|k| tags.iter().find(|t| t.key() == Some(k)).and_then(|t| t.value()))
}

/// Puts forge's mark on the EC2 object `id` ([`crate::provider::Resource::mark`]): one
/// CreateTags of its stack, address and token tags.
pub(super) async fn mark(ctx: &Ctx, aws: &Clients, id: &str, token: &str) -> Result<(), ProviderError> {
    let tags = super::mark_tags(ctx, token).map(|(k, v)| Tag::builder().key(k).value(v).build());
    aws.ec2
        .create_tags()
        .resources(id)
        .set_tags(Some(tags.to_vec()))
        .send()
        .await
        .map_err(|e| error(aws, "CreateTags", e))?;
    Ok(())
}

/// The attributes of an `existing = { … }` look-up that EC2's Describe filters by, as the
/// filter names them with `-` for `_`.
const FILTERED: &[&str] = &["vpc_id", "availability_zone"];

pub(super) mod capacity_block;
pub(super) mod capacity_extension;
pub(super) mod capacity_reservation;
pub(super) mod eip;
pub(super) mod internet_gateway;
pub(super) mod launch_template;
pub(super) mod nat_gateway;
pub(super) mod placement_group;
pub(super) mod route_table;
pub(super) mod security_group;
pub(super) mod security_group_ingress;
pub(super) mod subnet;
pub(super) mod vpc;

use super::{Clients, TOKEN_TAG, create_tags, error, made_by, tag_changes, tag_table};
use crate::provider::{Ctx, ProviderError};
use aws_sdk_ec2::config::http::HttpResponse;
use aws_sdk_ec2::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_ec2::types::{Filter, ResourceType, Tag, TagSpecification};
use serde_json::Value;

/// An EC2 time as RFC 3339, to the second (`2026-12-02T11:30:00Z`), when there is one.
pub(super) fn rfc3339(time: Option<&aws_sdk_ec2::primitives::DateTime>) -> Option<String> {
    time.and_then(|t| t.fmt(aws_sdk_ec2::primitives::DateTimeFormat::DateTime).ok())
}

/// The tags an EC2 object is created with (`forge:token` included), as a TagSpecification.
pub(super) fn tag_spec(ctx: &Ctx, token: &str, resource: ResourceType, config: &Value) -> TagSpecification {
    let tags = create_tags(ctx, token, config)
        .into_iter()
        .map(|(k, v)| Tag::builder().key(k).value(v).build());
    TagSpecification::builder()
        .resource_type(resource)
        .set_tags(Some(tags.collect()))
        .build()
}

/// Whether an EC2 object with these tags was made by the create with `token` (see [`made_by`]).
pub(super) fn ec2_made_by(ctx: &Ctx, token: &str, tags: &[Tag]) -> bool {
    made_by(ctx, token, |k| tags.iter().find(|t| t.key() == Some(k)).and_then(|t| t.value()))
}

/// Filters that find the object the create with `token` made: its stack, address and token tags.
pub(super) fn own_filters(ctx: &Ctx, token: &str) -> Vec<Filter> {
    [
        ("forge:stack", ctx.stack.as_str()),
        ("forge:address", ctx.address.as_str()),
        (TOKEN_TAG, token),
    ]
    .into_iter()
    .map(|(k, v)| Filter::builder().name(format!("tag:{k}")).values(v).build())
    .collect()
}

/// The result of a delete (`what`) of the VPC, subnet or security group `id`: one that is gone
/// (`gone`, EC2's code for that) is deleted; on `DependencyViolation` the error names the network
/// interfaces still in it (load balancers, EKS, leftover ENIs), found with `filter` (`vpc-id`,
/// `subnet-id`, `group-id`) = `id`.
pub(super) async fn delete_outcome<T, E>(
    aws: &Clients,
    what: &str,
    gone: &str,
    filter: &str,
    id: &str,
    result: Result<T, SdkError<E, HttpResponse>>,
) -> Result<(), ProviderError>
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    let err = match result {
        Ok(_) => return Ok(()),
        Err(e) if e.code() == Some(gone) => return Ok(()),
        Err(e) => e,
    };
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
    Err(mapped)
}

/// Brings an EC2 object's tags from `old` to `new` config (`default_tags` and forge's own
/// included) with one CreateTags and one DeleteTags at most.
pub(super) async fn sync_tags(ctx: &Ctx, clients: &Clients, id: &str, old: &Value, new: &Value) -> Result<(), ProviderError> {
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
pub(super) fn ec2_tags(tags: &[Tag]) -> Value {
    tag_table(tags.iter().map(|t| (t.key(), t.value())))
}
