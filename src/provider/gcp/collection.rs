//! What every Compute kind does the same way, written once over its [`Collection`]: where its
//! objects live and how their ids read ([`Scope`]), getting one by name, the create that adopts
//! only the object an earlier try of the same create made, the batched read for drift and
//! refresh, the wait after a change, and the delete that retries while the object is in use.

use super::marker::{made_by, name_taken, observed, stack_filter};
use super::operation::{OPERATION_TIMEOUT, fresh_request_id, insert, wait_operation};
use super::{Clients, error, found};
use crate::provider::{Created, Ctx, Observed, ProviderError, timeout};
use google_cloud_compute_v1::model::Operation;
use serde_json::Value;
use std::collections::BTreeSet;
use std::future::Future;

/// A client call's own result.
type Sent<T> = Result<T, google_cloud_compute_v1::Error>;

/// Where a Compute object lives.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Scope {
    /// The project's global collection (networks, firewall rules).
    Global,
    /// One region's (subnetworks, routers).
    Region(String),
    /// One zone's (future reservations).
    Zone(String),
}

/// Where a collection's objects live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Location {
    /// In the project's global collection.
    Global,
    /// In regions.
    Region,
    /// In zones.
    Zone,
}

impl Scope {
    /// The id forge records for `name` in `collection`: its path below the API root,
    /// `projects/p/global/networks/n` or `projects/p/regions/r/subnetworks/n`.
    pub(super) fn id(&self, gcp: &Clients, collection: &str, name: &str) -> String {
        match self {
            Scope::Global => format!("projects/{}/global/{collection}/{name}", gcp.project),
            Scope::Region(region) => format!("projects/{}/regions/{region}/{collection}/{name}", gcp.project),
            Scope::Zone(zone) => format!("projects/{}/zones/{zone}/{collection}/{name}", gcp.project),
        }
    }

    /// The scope and the name an id names.
    pub(super) fn of_id(id: &str) -> (Scope, &str) {
        let segments: Vec<&str> = id.split('/').collect();
        let name = segments.last().copied().unwrap_or(id);
        // `projects/<project>/<global | regions/<region> | zones/<zone>>/<collection>/<name>`.
        let location = || segments.get(3).copied().unwrap_or_default().to_owned();
        match (segments.first(), segments.get(2)) {
            (Some(&"projects"), Some(&"zones")) => (Scope::Zone(location()), name),
            (Some(&"projects"), Some(&"regions")) => (Scope::Region(location()), name),
            _ => (Scope::Global, name),
        }
    }

    /// Where a block's object of `C` lives: the project's global collection, the region the
    /// block names (`location`), else the provider's, or the zone the block names.
    pub(super) fn of<C: Collection>(gcp: &Clients, location: Option<&str>) -> Result<Scope, ProviderError> {
        match C::LOCATION {
            Location::Global => Ok(Scope::Global),
            Location::Region => gcp.region_of(location).map(Scope::Region),
            Location::Zone => location
                .map(|zone| Scope::Zone(zone.to_owned()))
                .ok_or_else(|| ProviderError::permanent(format!("a {} lives in a zone: set `zone`", C::WHAT))),
        }
    }

    /// The scope of an object whose region or zone is `url` (none: global), in `C`.
    fn of_url<C: Collection>(url: Option<&str>) -> Scope {
        match (C::LOCATION, url.map(last_segment)) {
            (Location::Region, Some(region)) => Scope::Region(region.to_owned()),
            (Location::Zone, Some(zone)) => Scope::Zone(zone.to_owned()),
            _ => Scope::Global,
        }
    }

    /// The region or zone a collection's calls name ("" for a global one, whose calls name none).
    pub(super) fn location(&self) -> &str {
        match self {
            Scope::Region(location) | Scope::Zone(location) => location,
            Scope::Global => "",
        }
    }
}

/// One Compute collection (networks, subnetworks, firewalls, routers): its object and its four
/// calls, so that everything else about its objects is written once, in this module.
pub(super) trait Collection {
    /// The API's object.
    type Object: Clone + Send + Sync;
    /// The collection in ids and in the names of its calls (`subnetworks`).
    const PATH: &'static str;
    /// One object, in messages (`subnetwork`).
    const WHAT: &'static str;
    /// Where its objects live.
    const LOCATION: Location;
    /// An object's name, description and region or zone (a URL, for a regional or zonal one).
    fn fields(object: &Self::Object) -> (&str, Option<&str>, Option<&str>);
    /// Gets the object named `name`.
    fn get(gcp: &Clients, scope: &Scope, name: &str) -> impl Future<Output = Sent<Self::Object>> + Send;
    /// Every object the list `filter` matches, all pages.
    fn list(gcp: &Clients, scope: &Scope, filter: String) -> impl Future<Output = Result<Vec<Self::Object>, ProviderError>> + Send;
    /// Inserts `body` under the request id `request`.
    fn insert(gcp: &Clients, scope: &Scope, request: String, body: Self::Object) -> impl Future<Output = Sent<Operation>> + Send;
    /// Deletes the object named `name` under the request id `request`.
    fn delete(gcp: &Clients, scope: &Scope, name: &str, request: String) -> impl Future<Output = Sent<Operation>> + Send;
}

/// Declares a [`Collection`] from its client's calls, which differ between collections only in
/// the client, the setter of an object's name, and whether they name a region or a zone:
/// `compute_collection!(Subnetworks: Subnetwork, subnetworks.set_subnetwork, "subnetwork", set_region)`
/// (`set_zone` for a zonal collection).
macro_rules! compute_collection {
    ($(#[$doc:meta])* $name:ident: $model:ty, $client:ident.$set_name:ident, $what:literal $(, $set_region:ident)?) => {
        $(#[$doc])*
        struct $name;

        #[allow(unused_variables)]
        impl $crate::provider::gcp::collection::Collection for $name {
            type Object = $model;
            const PATH: &'static str = stringify!($client);
            const WHAT: &'static str = $what;
            const LOCATION: $crate::provider::gcp::collection::Location = compute_collection!(@location $($set_region)?);

            fn fields(object: &$model) -> (&str, Option<&str>, Option<&str>) {
                let region: Option<&str> = compute_collection!(@where object $($set_region)?);
                (object.name.as_deref().unwrap_or_default(), object.description.as_deref(), region)
            }

            async fn get(gcp: &$crate::provider::gcp::Clients, scope: &$crate::provider::gcp::collection::Scope, name: &str) -> Result<$model, google_cloud_compute_v1::Error> {
                gcp.$client.get().set_project(&gcp.project)$(.$set_region(scope.location()))?.$set_name(name).send().await
            }

            async fn list(gcp: &$crate::provider::gcp::Clients, scope: &$crate::provider::gcp::collection::Scope, filter: String) -> Result<Vec<$model>, $crate::provider::ProviderError> {
                use google_cloud_gax::paginator::ItemPaginator as _;
                let call = gcp.$client.list().set_project(&gcp.project)$(.$set_region(scope.location()))?;
                let mut items = call.set_filter(filter).by_item();
                let mut found = Vec::new();
                while let Some(item) = items.next().await {
                    found.push(item.map_err(|e| $crate::provider::gcp::error(gcp, concat!(stringify!($client), ".list"), e))?);
                }
                Ok(found)
            }

            async fn insert(gcp: &$crate::provider::gcp::Clients, scope: &$crate::provider::gcp::collection::Scope, request: String, body: $model) -> Result<google_cloud_compute_v1::model::Operation, google_cloud_compute_v1::Error> {
                let call = gcp.$client.insert().set_project(&gcp.project)$(.$set_region(scope.location()))?;
                call.set_request_id(request).set_body(body).send().await
            }

            async fn delete(gcp: &$crate::provider::gcp::Clients, scope: &$crate::provider::gcp::collection::Scope, name: &str, request: String) -> Result<google_cloud_compute_v1::model::Operation, google_cloud_compute_v1::Error> {
                let call = gcp.$client.delete().set_project(&gcp.project)$(.$set_region(scope.location()))?;
                call.$set_name(name).set_request_id(request).send().await
            }
        }
    };
    (@location) => { $crate::provider::gcp::collection::Location::Global };
    (@location set_region) => { $crate::provider::gcp::collection::Location::Region };
    (@location set_zone) => { $crate::provider::gcp::collection::Location::Zone };
    (@where $object:ident) => { None };
    (@where $object:ident set_region) => { $object.region.as_deref() };
    (@where $object:ident set_zone) => { $object.zone.as_deref() };
}

/// The object named `name` in `scope`, or `None`.
pub(super) async fn get<C: Collection>(gcp: &Clients, scope: &Scope, name: &str) -> Result<Option<C::Object>, ProviderError> {
    found(C::get(gcp, scope, name).await, |e| error(gcp, &format!("{}.get", C::PATH), e))
}

/// The object an `existing` block names (see [`crate::provider::Resource::look_up`]), by name
/// or path ([`named`]): none or one, its outputs by `outputs`, its attributes by `attributes`
/// (given its own part of the description).
pub(super) async fn look_up<C: Collection>(
    gcp: &Clients,
    selector: &crate::provider::Selector,
    outputs: impl Fn(&str, &C::Object) -> Value,
    attributes: impl Fn(&C::Object, &str) -> Value,
) -> Result<Vec<crate::provider::Found>, ProviderError> {
    let crate::provider::Selector::Id(name) = selector else {
        return Err(ProviderError::permanent(format!(
            "a Compute {} is found by its name or path",
            C::WHAT
        )));
    };
    let found = named::<C>(gcp, name).await?;
    Ok(found
        .map(|(id, object)| crate::provider::Found {
            outputs: outputs(&id, &object),
            attributes: attributes(&object, C::fields(&object).1.unwrap_or_default()),
            id,
        })
        .into_iter()
        .collect())
}

/// The object named — by name in the provider's project (and region), or by its path,
/// `projects/p/global/networks/n`, or self link — with the id forge records for it.
async fn named<C: Collection>(gcp: &Clients, named: &str) -> Result<Option<(String, C::Object)>, ProviderError> {
    // A self link is the API's URL of the path.
    let path = named.split_once("/compute/v1/").map_or(named, |(_, path)| path);
    let (scope, name) = match path.strip_prefix("projects/") {
        Some(rest) => {
            let segments: Vec<&str> = rest.split('/').collect();
            let shaped = match C::LOCATION {
                Location::Global => segments.len() == 4 && segments[1] == "global",
                Location::Region => segments.len() == 5 && segments[1] == "regions",
                Location::Zone => segments.len() == 5 && segments[1] == "zones",
            };
            if !shaped || segments[segments.len() - 2] != C::PATH {
                return Err(ProviderError::permanent(format!(
                    "`{named}` is not the path of a {}: write its name, or its path below `projects/`",
                    C::WHAT
                )));
            }
            if segments[0] != gcp.project {
                return Err(ProviderError::permanent(format!(
                    "`{named}` is in the project `{}`; forge reads existing objects in the stack's project, `{}` (`[gcp] project`)",
                    segments[0], gcp.project
                )));
            }
            Scope::of_id(path)
        }
        None => (Scope::of::<C>(gcp, None)?, path),
    };
    Ok(get::<C>(gcp, &scope, name)
        .await?
        .map(|object| (scope.id(gcp, C::PATH, name), object)))
}

/// The object `id` names, which a change just left: an error if it cannot be read.
pub(super) async fn reread<C: Collection>(gcp: &Clients, id: &str) -> Result<C::Object, ProviderError> {
    let (scope, name) = Scope::of_id(id);
    get::<C>(gcp, &scope, name).await?.ok_or_else(|| {
        ProviderError::transient(format!(
            "the {} `{name}` was changed but cannot be read back; run `forge up` again ({})",
            C::WHAT,
            gcp.context
        ))
    })
}

/// Creates the object `body` describes in `scope`, and returns its id and the `outputs` of the
/// object read back. An object of that name that an earlier try of this create made (its mark
/// carries `token`) is adopted instead; anyone else's is an error.
pub(super) async fn create<C: Collection>(
    ctx: &Ctx,
    gcp: &Clients,
    token: &str,
    scope: &Scope,
    body: C::Object,
    config: &Value,
    outputs: impl Fn(&str, &C::Object) -> Value,
) -> Result<Created, ProviderError> {
    let name = C::fields(&body).0.to_owned();
    let id = scope.id(gcp, C::PATH, &name);
    let object = match get::<C>(gcp, scope, &name).await? {
        Some(object) if made_by(ctx, token, C::fields(&object).1) => object,
        Some(_) => return Err(name_taken(ctx, C::WHAT, &name)),
        None => {
            let what = format!("{}.insert", C::PATH);
            let limit = timeout(config, "create", OPERATION_TIMEOUT);
            insert(ctx, gcp, &what, token, limit, |request| {
                C::insert(gcp, scope, request, body.clone())
            })
            .await?;
            reread::<C>(gcp, &id).await?
        }
    };
    Ok(Created {
        outputs: outputs(&id, &object),
        id,
    })
}

/// The id of the object named `name` (where [`Scope::of`] puts it, given the block's `region`)
/// when the create with `token` made it. Compute shows an object only once its insert is DONE,
/// so an insert of that name still running is waited for first: a create interrupted mid-insert
/// must not look like one that made nothing.
pub(super) async fn find<C: Collection>(ctx: &Ctx, token: &str, name: &str, region: Option<&str>) -> Result<Option<String>, ProviderError> {
    let gcp = ctx.cloud.gcp().await?;
    let scope = &Scope::of::<C>(gcp, region)?;
    let mut found = get::<C>(gcp, scope, name).await?;
    if found.is_none() {
        if let Some(op) = running_insert::<C>(gcp, scope, name).await? {
            // An insert that fails made nothing; one that succeeds made what the get below finds.
            let _ = wait_operation(ctx, gcp, &format!("{}.insert", C::PATH), op, OPERATION_TIMEOUT).await;
        }
        // Look again either way: an insert that ended between the get and the list of running
        // ones shows only now.
        found = get::<C>(gcp, scope, name).await?;
    }
    Ok(found
        .filter(|object| made_by(ctx, token, C::fields(object).1))
        .map(|_| scope.id(gcp, C::PATH, name)))
}

/// An insert of the object `name` in `scope` that is not DONE yet, if any.
async fn running_insert<C: Collection>(gcp: &Clients, scope: &Scope, name: &str) -> Result<Option<Operation>, ProviderError> {
    use google_cloud_gax::paginator::ItemPaginator as _;
    let filter = format!("(operationType eq insert) (status ne DONE) (targetLink eq '.*/{}/{name}')", C::PATH);
    let first = match scope {
        Scope::Global => {
            let mut ops = gcp.global_operations.list().set_project(&gcp.project).set_filter(filter).by_item();
            ops.next().await
        }
        Scope::Region(region) => {
            let call = gcp.region_operations.list().set_project(&gcp.project).set_region(region);
            let mut ops = call.set_filter(filter).by_item();
            ops.next().await
        }
        Scope::Zone(zone) => {
            let call = gcp.zone_operations.list().set_project(&gcp.project).set_zone(zone);
            let mut ops = call.set_filter(filter).by_item();
            ops.next().await
        }
    };
    first.transpose().map_err(|e| error(gcp, "operations.list", e))
}

/// Reads a collection for drift and refresh: one list per scope (the recorded ids' and, for a
/// regional collection, the provider's region; a zonal collection's recorded zones only), filtered by the stack's mark, then by id the
/// recorded objects the list did not show (someone edited the description). `attributes`
/// gives what the kind compares of an object, given its own part of the description.
pub(super) async fn read<C: Collection>(
    gcp: &Clients,
    stack: &str,
    ids: &[String],
    attributes: impl Fn(&C::Object, &str) -> Value,
) -> Result<Vec<Observed>, ProviderError> {
    let mut scopes: BTreeSet<Scope> = ids.iter().map(|id| Scope::of_id(id).0).collect();
    match (C::LOCATION, &gcp.region) {
        (Location::Region, Some(region)) => scopes.insert(Scope::Region(region.clone())),
        (Location::Global, _) => scopes.insert(Scope::Global),
        _ => false,
    };
    let mut listed = Vec::new();
    for scope in &scopes {
        listed.extend(C::list(gcp, scope, stack_filter(stack)).await?);
    }
    let mut seen: Vec<Observed> = Vec::new();
    let observe = |object: &C::Object, seen: &mut Vec<Observed>| {
        let (name, description, region) = C::fields(object);
        let id = Scope::of_url::<C>(region).id(gcp, C::PATH, name);
        if !seen.iter().any(|o| o.id == id) {
            seen.extend(observed(stack, ids, id, description.unwrap_or_default(), |own| {
                attributes(object, own)
            }));
        }
    };
    for object in &listed {
        observe(object, &mut seen);
    }
    let missing: Vec<&String> = ids.iter().filter(|id| !seen.iter().any(|o| &&o.id == id)).collect();
    for id in missing {
        let (scope, name) = Scope::of_id(id);
        if let Some(object) = get::<C>(gcp, &scope, name).await? {
            observe(&object, &mut seen);
        }
    }
    Ok(seen)
}

/// Waits for the operation of a change (`what`: `networks.patch`) that the call `sent` starts,
/// and returns the `outputs` of the object `id` read back.
pub(super) async fn changed<C: Collection>(
    ctx: &Ctx,
    gcp: &Clients,
    what: &str,
    id: &str,
    sent: impl Future<Output = Sent<Operation>>,
    config: &Value,
    outputs: impl Fn(&str, &C::Object) -> Value,
) -> Result<Value, ProviderError> {
    let op = sent.await.map_err(|e| error(gcp, what, e))?;
    wait_operation(ctx, gcp, what, op, timeout(config, "update", OPERATION_TIMEOUT)).await?;
    Ok(outputs(id, &reread::<C>(gcp, id).await?))
}

/// Deletes the object `id` names: one already gone is a success; one still in use fails its
/// operation retryably (the apply retries it while its users go, then reports it naming them).
pub(super) async fn delete<C: Collection>(ctx: &Ctx, gcp: &Clients, id: &str, config: &Value) -> Result<(), ProviderError> {
    let (scope, name) = Scope::of_id(id);
    let what = format!("{}.delete", C::PATH);
    let Some(op) = found(C::delete(gcp, &scope, name, fresh_request_id()).await, |e| error(gcp, &what, e))? else {
        return Ok(());
    };
    wait_operation(ctx, gcp, &what, op, timeout(config, "delete", OPERATION_TIMEOUT))
        .await
        .map(drop)
}

/// A network as the API takes it: a name becomes the project's network of that name.
pub(super) fn network_url(gcp: &Clients, network: &str) -> String {
    if network.contains('/') {
        network.to_owned()
    } else {
        format!("projects/{}/global/networks/{network}", gcp.project)
    }
}

/// A block's attributes with its `network` by name, as the kinds read it back: a block may
/// name its network by name or by link.
pub(super) fn network_by_name(config: &Value) -> Value {
    let mut config = config.clone();
    if let Some(network) = config.get("network").and_then(Value::as_str) {
        config["network"] = Value::String(last_segment(network).to_owned());
    }
    config
}

/// The last segment of a resource URL (`…/global/networks/main` → `main`).
pub(super) fn last_segment(url: &str) -> &str {
    url.rsplit('/').next().unwrap_or(url)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_name_their_scope() {
        assert_eq!(Scope::of_id("projects/p/global/networks/main"), (Scope::Global, "main"));
        assert_eq!(
            Scope::of_id("projects/p/regions/us-central1/subnetworks/main-subnet"),
            (Scope::Region("us-central1".into()), "main-subnet")
        );
        assert_eq!(
            Scope::of_id("projects/p/zones/us-central1-a/futureReservations/h200"),
            (Scope::Zone("us-central1-a".into()), "h200")
        );
        assert_eq!(Scope::of_id("projects/p/global/networks/zones"), (Scope::Global, "zones"));
        assert_eq!(
            Scope::of_id("projects/regions/zones/us-central1-a/futureReservations/h200"),
            (Scope::Zone("us-central1-a".into()), "h200")
        );
    }
}
