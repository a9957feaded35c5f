//! Google Cloud: the official google-cloud-rust clients made from `[gcp]` and Google's own
//! environment (project, region, endpoint overrides, credentials), error mapping, the wait on a
//! Compute operation, forge's ownership marker, and one file per resource kind.
//!
//! Compute networks, subnetworks, firewalls and routers take no labels, so forge marks the
//! objects it makes in their `description`: the block's own description, then
//! `[forge:stack=… forge:address=… forge:token=…]`. Only an object whose marker names this
//! stack, address and create token is ever adopted ([`made_by`]).

/// Every item of a Compute list call over all its pages, or the mapped error:
/// `list_all!(gcp, gcp.networks.list().set_project(&gcp.project), "networks.list")`.
macro_rules! list_all {
    ($gcp:expr, $request:expr, $what:literal) => {{
        use google_cloud_gax::paginator::ItemPaginator as _;
        let mut items = $request.by_item();
        let mut found = Vec::new();
        while let Some(item) = items.next().await {
            found.push(item.map_err(|e| $crate::provider::gcp::error($gcp, $what, e))?);
        }
        found
    }};
}

mod firewall;
mod network;
mod router;
mod subnetwork;

use super::{Cloud, Ctx, Observed, Poll, ProviderError, Registry, wait_until};
use google_cloud_compute_v1::client::{Firewalls, GlobalOperations, Networks, RegionOperations, Routers, Subnetworks};
use google_cloud_compute_v1::model::Operation;
use google_cloud_compute_v1::model::operation::Status;
use serde_json::Value;
use std::time::Duration;

/// Adds the Google Cloud kinds to a registry.
pub fn register(registry: Registry) -> Registry {
    registry
        .with(network::Network)
        .with(subnetwork::Subnetwork)
        .with(firewall::Firewall)
        .with(router::Router)
}

/// The Google API services forge calls, by the name gcloud's endpoint overrides use
/// (`CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE`) and `[gcp] endpoints` takes.
pub const SERVICES: &[&str] = &["compute"];

/// The clients of one run, and where they point.
pub struct Clients {
    /// The project every call names.
    pub project: String,
    /// The region of regional objects that name none.
    pub region: Option<String>,
    /// Compute networks.
    pub networks: Networks,
    /// Compute subnetworks.
    pub subnetworks: Subnetworks,
    /// Compute firewall rules.
    pub firewalls: Firewalls,
    /// Compute routers (Cloud NAT lives in them).
    pub routers: Routers,
    /// Compute operations on global objects.
    pub global_operations: GlobalOperations,
    /// Compute operations on regional objects.
    pub region_operations: RegionOperations,
    /// "project …, region …, endpoint …": said with every Google error so a wrong project or
    /// endpoint is obvious.
    pub context: String,
}

/// The first of `[gcp] key` and these environment variables that is set and not empty.
fn setting(settings: Option<&Value>, key: &str, variables: &[&str]) -> Option<String> {
    settings
        .and_then(|s| s.get(key))
        .and_then(Value::as_str)
        .map(str::to_owned)
        .or_else(|| variables.iter().find_map(|v| std::env::var(v).ok()))
        .filter(|v| !v.is_empty())
}

/// The root URL of `service`: `[gcp] endpoints.<service>`, else gcloud's
/// `CLOUDSDK_API_ENDPOINT_OVERRIDES_<SERVICE>`, else Google's own. A trailing API version
/// (`compute/v1/`, `v1/`), as gcloud takes these values, is not part of the root.
pub fn endpoint(settings: Option<&Value>, service: &str) -> String {
    let variable = format!("CLOUDSDK_API_ENDPOINT_OVERRIDES_{}", service.to_uppercase());
    let configured = settings
        .and_then(|s| s.get("endpoints"))
        .and_then(|e| e.get(service))
        .and_then(Value::as_str)
        .map(str::to_owned)
        .or_else(|| std::env::var(&variable).ok())
        .filter(|v| !v.is_empty());
    match configured {
        Some(url) => {
            let url = url.trim_end_matches('/');
            let url = url
                .strip_suffix(&format!("/{service}/v1"))
                .or_else(|| url.strip_suffix("/v1"))
                .unwrap_or(url);
            url.to_owned()
        }
        None => format!("https://{service}.googleapis.com"),
    }
}

/// A bearer token given as it is (`GOOGLE_OAUTH_ACCESS_TOKEN`, as Terraform's Google provider
/// reads it; CI passes `gcloud auth print-access-token` this way).
#[derive(Debug)]
struct StaticToken {
    header: http::HeaderValue,
    tag: google_cloud_auth::credentials::EntityTag,
}

impl google_cloud_auth::credentials::CredentialsProvider for StaticToken {
    async fn headers(
        &self,
        extensions: http::Extensions,
    ) -> Result<google_cloud_auth::credentials::CacheableResource<http::HeaderMap>, google_cloud_auth::errors::CredentialsError> {
        use google_cloud_auth::credentials::{CacheableResource, EntityTag};
        if extensions.get::<EntityTag>() == Some(&self.tag) {
            return Ok(CacheableResource::NotModified);
        }
        let mut data = http::HeaderMap::new();
        data.insert(http::header::AUTHORIZATION, self.header.clone());
        Ok(CacheableResource::New {
            entity_tag: self.tag.clone(),
            data,
        })
    }

    async fn universe_domain(&self) -> Option<String> {
        None
    }
}

/// The credentials: `GOOGLE_OAUTH_ACCESS_TOKEN` when set, else Application Default
/// Credentials as Google's clients find them.
fn credentials() -> Result<google_cloud_auth::credentials::Credentials, String> {
    match std::env::var("GOOGLE_OAUTH_ACCESS_TOKEN").ok().filter(|t| !t.is_empty()) {
        Some(token) => {
            let header = http::HeaderValue::from_str(&format!("Bearer {token}"))
                .map_err(|_| "GOOGLE_OAUTH_ACCESS_TOKEN holds characters no HTTP header may carry".to_owned())?;
            Ok(StaticToken {
                header,
                tag: Default::default(),
            }
            .into())
        }
        None => google_cloud_auth::credentials::Builder::default().build().map_err(|e| {
            format!("no Google credentials: {e}; run `gcloud auth application-default login`, or set GOOGLE_OAUTH_ACCESS_TOKEN")
        }),
    }
}

impl Clients {
    /// Makes the clients: project and region from `[gcp]`, else `GOOGLE_CLOUD_PROJECT` /
    /// `CLOUDSDK_CORE_PROJECT` and `CLOUDSDK_COMPUTE_REGION`; endpoints from [`endpoint`];
    /// credentials from [`credentials`].
    pub async fn connect(settings: Option<&Value>) -> Result<Clients, ProviderError> {
        let fail = |message: String| ProviderError { message, retryable: false };
        let project = setting(settings, "project", &["GOOGLE_CLOUD_PROJECT", "CLOUDSDK_CORE_PROJECT"])
            .ok_or_else(|| fail("no Google Cloud project: set `project` in `[gcp]`, or GOOGLE_CLOUD_PROJECT".into()))?;
        let region = setting(settings, "region", &["CLOUDSDK_COMPUTE_REGION"]);
        let compute = endpoint(settings, "compute");
        let context = format!(
            "project {project}, region {}, endpoint {compute}",
            region.as_deref().unwrap_or("(none)")
        );
        let credentials = credentials().map_err(fail)?;
        macro_rules! client {
            ($client:ty) => {
                <$client>::builder()
                    .with_endpoint(&compute)
                    .with_credentials(credentials.clone())
                    .build()
                    .await
                    .map_err(|e| fail(format!("cannot make the {} client: {e} ({context})", stringify!($client))))?
            };
        }
        Ok(Clients {
            networks: client!(Networks),
            subnetworks: client!(Subnetworks),
            firewalls: client!(Firewalls),
            routers: client!(Routers),
            global_operations: client!(GlobalOperations),
            region_operations: client!(RegionOperations),
            project,
            region,
            context,
        })
    }

    /// The region of a regional object: its block's `region`, else the provider's.
    pub fn region_of(&self, region: Option<&str>) -> Result<String, ProviderError> {
        region
            .map(str::to_owned)
            .or_else(|| self.region.clone())
            .ok_or_else(|| ProviderError {
                message: "no region: set `region` on the block or in `[gcp]`, or CLOUDSDK_COMPUTE_REGION".into(),
                retryable: false,
            })
    }
}

impl Cloud {
    /// The Google Cloud clients, made from `[gcp]` and Google's environment on first use.
    pub async fn gcp(&self) -> Result<&Clients, ProviderError> {
        self.gcp
            .get_or_init(|| Clients::connect(self.settings.get("gcp")))
            .await
            .as_ref()
            .map_err(Clone::clone)
    }
}

/// Whether a failed call found nothing (HTTP 404; Compute's error bodies carry no status).
pub fn not_found(err: &google_cloud_compute_v1::Error) -> bool {
    err.http_status_code() == Some(404)
}

/// Maps a client error to a [`ProviderError`]: the service's message verbatim, or, for an
/// answer that is not the service's own (an HTML page from a proxy or a wrong endpoint), one
/// line with the HTTP status and the first words of the body; whether it is worth retrying
/// (rate limits, server errors, transport failures); and the project, region and endpoint.
pub fn error(gcp: &Clients, what: &str, err: google_cloud_compute_v1::Error) -> ProviderError {
    let status = err.http_status_code();
    let retryable = matches!(status, Some(429) | Some(500..)) || err.is_transport() || err.is_timeout() || err.is_io() || err.is_connect();
    let message = match (err.status(), status) {
        (Some(s), _) if !s.message.is_empty() => s.message.clone(),
        (_, Some(code)) => {
            let body = err
                .http_payload()
                .map(|b| String::from_utf8_lossy(b).into_owned())
                .unwrap_or_default();
            let words: String = body.split_whitespace().collect::<Vec<_>>().join(" ").chars().take(80).collect();
            format!("HTTP {code}, not an answer from the API: {words}")
        }
        _ => err.to_string(),
    };
    ProviderError {
        message: format!("{what}: {message} ({})", gcp.context),
        retryable,
    }
}

/// Compute's "in use" failure: a delete that another object still blocks (the message names it).
const IN_USE: &str = "RESOURCE_IN_USE_BY_ANOTHER_RESOURCE";

/// Operation error codes a later try may not hit: the object is in use while its dependents go,
/// an internal error, or a resource not ready yet.
const RETRYABLE: &[&str] = &[IN_USE, "INTERNAL_ERROR", "RESOURCE_NOT_READY", "RATE_LIMIT_EXCEEDED"];

/// How long an operation on a network object may take by default.
pub const OPERATION_TIMEOUT: Duration = Duration::from_secs(10 * 60);

/// Waits until `op` is DONE (at most `limit`), polling it through the global or regional
/// operations client, and returns it; an operation that ends with an error (Compute's way of
/// failing an insert, or of refusing to delete something in use) is an error naming `what`.
pub async fn wait_operation(ctx: &Ctx, gcp: &Clients, what: &str, op: Operation, limit: Duration) -> Result<Operation, ProviderError> {
    let name = op.name.clone().unwrap_or_default();
    let region = op.region.as_deref().map(|r| last_segment(r).to_owned());
    let mut first = Some(op);
    let done = wait_until(ctx, limit, || {
        let seen = first.take().filter(|op| op.status == Some(Status::Done));
        let (name, region) = (name.clone(), region.clone());
        async move {
            if let Some(op) = seen {
                return Ok(Poll::Done(op));
            }
            let next = match &region {
                Some(region) => {
                    gcp.region_operations
                        .get()
                        .set_project(&gcp.project)
                        .set_region(region)
                        .set_operation(&name)
                        .send()
                        .await
                }
                None => {
                    gcp.global_operations
                        .get()
                        .set_project(&gcp.project)
                        .set_operation(&name)
                        .send()
                        .await
                }
            }
            .map_err(|e| error(gcp, "operations.get", e))?;
            Ok(match next.status {
                Some(Status::Done) => Poll::Done(next),
                ref s => Poll::Pending(s.as_ref().and_then(|s| s.name()).unwrap_or("PENDING").to_owned()),
            })
        }
    })
    .await?;
    let errors = done.error.as_ref().map(|e| e.errors.as_slice()).unwrap_or_default();
    if errors.is_empty() {
        return Ok(done);
    }
    let codes: Vec<&str> = errors.iter().filter_map(|e| e.code.as_deref()).collect();
    let text: Vec<String> = errors
        .iter()
        .map(|e| {
            format!(
                "{}: {}",
                e.code.as_deref().unwrap_or("ERROR"),
                e.message.as_deref().unwrap_or_default()
            )
        })
        .collect();
    let hint = if codes.contains(&IN_USE) {
        " — delete what uses it first, or wait for it to go"
    } else {
        ""
    };
    Err(ProviderError {
        message: format!("{what}: the operation failed: {}{hint} ({})", text.join("; "), gcp.context),
        retryable: codes.iter().any(|c| RETRYABLE.contains(c)),
    })
}

/// Inserts an object and waits for it: the create's `token` is the `requestId`, so a repeated
/// insert (a retry after a lost answer, a resumed create) gets the first one's operation instead
/// of a second object. When that operation had already failed (a repeat of a failed insert),
/// the insert is sent once more under a fresh id: the failed one made nothing.
pub async fn insert<F, Fut>(ctx: &Ctx, gcp: &Clients, what: &str, token: &str, limit: Duration, send: F) -> Result<Operation, ProviderError>
where
    F: Fn(String) -> Fut,
    Fut: std::future::Future<Output = Result<Operation, google_cloud_compute_v1::Error>>,
{
    let op = send(token.to_owned()).await.map_err(|e| error(gcp, what, e))?;
    let op = if op.status == Some(Status::Done) && op.error.is_some() {
        send(fresh_request_id()).await.map_err(|e| error(gcp, what, e))?
    } else {
        op
    };
    wait_operation(ctx, gcp, what, op, limit).await
}

/// What a create finds under its name: `Ok(None)` when nothing, `Ok(Some(object))` when an
/// earlier try of this create made it (adopt it), an error when it is someone else's.
pub fn claim<T>(
    ctx: &Ctx,
    token: &str,
    what: &str,
    name: &str,
    found: Option<T>,
    description: impl Fn(&T) -> Option<&str>,
) -> Result<Option<T>, ProviderError> {
    match found {
        Some(object) if made_by(ctx, token, description(&object)) => Ok(Some(object)),
        Some(_) => Err(name_taken(ctx, what, name)),
        None => Ok(None),
    }
}

/// The error for an object that its finished operation made but a read cannot find.
pub fn vanished(gcp: &Clients, what: &str, name: &str) -> ProviderError {
    ProviderError {
        message: format!(
            "the {what} `{name}` was made but cannot be read back; run `forge up` again ({})",
            gcp.context
        ),
        retryable: true,
    }
}

/// Reads one kind for drift and refresh from `listed` (the kind's list filtered by the stack's
/// marker, see [`stack_filter`]), then by id, with `get`, the recorded ids the list did not
/// show (someone edited the description). `key` gives an object's id and description,
/// `attributes` what the kind compares, given the object and its own description.
pub async fn observe<T, G, GF>(
    stack: &str,
    ids: &[String],
    listed: Vec<T>,
    get: G,
    key: impl Fn(&T) -> (String, Option<String>),
    attributes: impl Fn(&T, &str) -> Value,
) -> Result<Vec<Observed>, ProviderError>
where
    G: Fn(String) -> GF,
    GF: std::future::Future<Output = Result<Option<T>, ProviderError>>,
{
    let mut seen: Vec<Observed> = Vec::new();
    let mut missing: Vec<String> = Vec::new();
    let add = |item: &T, seen: &mut Vec<Observed>| {
        let (id, description) = key(item);
        if let Some(found) = observed(stack, ids, id, description.as_deref(), |own| attributes(item, own)) {
            seen.push(found);
        }
    };
    for item in &listed {
        add(item, &mut seen);
    }
    missing.extend(ids.iter().filter(|id| !seen.iter().any(|o| &o.id == *id)).cloned());
    for id in missing {
        if let Some(item) = get(id).await? {
            add(&item, &mut seen);
        }
    }
    Ok(seen)
}

/// The regions a regional kind's objects may be in: those of the recorded ids
/// (`projects/p/regions/<region>/…`) and the provider's.
pub fn regions(gcp: &Clients, ids: &[String]) -> std::collections::BTreeSet<String> {
    ids.iter()
        .filter_map(|id| id.split('/').skip_while(|s| *s != "regions").nth(1).map(str::to_owned))
        .chain(gcp.region.clone())
        .collect()
}

/// The marker forge writes into a description: `[forge:stack=… forge:address=… forge:token=…]`.
fn marker(ctx: &Ctx, token: &str) -> String {
    format!("[forge:stack={} forge:address={} forge:token={token}]", ctx.stack, ctx.address)
}

/// The description an object is created with: the block's own, then forge's marker.
pub fn marked_description(ctx: &Ctx, token: &str, own: Option<&str>) -> String {
    with_marker(own, &marker(ctx, token))
}

/// The description an update sends: the block's own, then the marker the live object carries.
pub fn remarked_description(live: Option<&str>, own: Option<&str>) -> String {
    let live = live.unwrap_or_default();
    with_marker(own, live.rfind("[forge:stack=").map_or("", |start| &live[start..]))
}

fn with_marker(own: Option<&str>, marker: &str) -> String {
    match own.filter(|d| !d.is_empty()) {
        Some(own) => format!("{own} {marker}").trim_end().to_owned(),
        None => marker.to_owned(),
    }
}

/// Finishes a delete that `sent`: an object already gone is a success; otherwise the operation
/// is waited for (an object still in use fails it, retryably).
pub async fn deleted(
    ctx: &Ctx,
    gcp: &Clients,
    what: &str,
    config: &Value,
    sent: Result<Operation, google_cloud_compute_v1::Error>,
) -> Result<(), ProviderError> {
    match sent {
        Err(e) if not_found(&e) => Ok(()),
        Err(e) => Err(error(gcp, what, e)),
        Ok(op) => wait_operation(ctx, gcp, what, op, super::timeout(config, "delete", OPERATION_TIMEOUT))
            .await
            .map(drop),
    }
}

/// A live description split into the block's own part and forge's marker fields, if marked.
pub fn split_description(description: &str) -> (String, Option<std::collections::BTreeMap<String, String>>) {
    let Some(start) = description.rfind("[forge:stack=").filter(|_| description.ends_with(']')) else {
        return (description.to_owned(), None);
    };
    let fields = description[start + 1..description.len() - 1]
        .split(' ')
        .filter_map(|f| f.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    (description[..start].trim_end().to_owned(), Some(fields))
}

/// Whether an object with this description was made by the create with `token` (forge's one
/// ownership check on Google Cloud: see [`crate::provider::made_by`]).
pub fn made_by(ctx: &Ctx, token: &str, description: Option<&str>) -> bool {
    let (_, fields) = split_description(description.unwrap_or_default());
    fields.is_some_and(|f| crate::provider::made_by(ctx, token, |k| f.get(k).map(String::as_str)))
}

/// The error for a name taken by an object this resource did not create.
pub fn name_taken(ctx: &Ctx, what: &str, name: &str) -> ProviderError {
    ProviderError {
        message: format!(
            "a {what} named `{name}` already exists and was not created by `{}` in stack `{}`; pick another name, or delete it if it is a leftover",
            ctx.address, ctx.stack
        ),
        retryable: false,
    }
}

/// The list filter for the objects of `stack`: those whose description carries its marker.
pub fn stack_filter(stack: &str) -> String {
    let escaped: String = stack
        .chars()
        .flat_map(|c| if c.is_ascii_alphanumeric() { vec![c] } else { vec!['\\', c] })
        .collect();
    format!("description eq '.*\\[forge:stack={escaped} .*'")
}

/// One listed object as an [`Observed`] when it is recorded (`ids`) or carries the stack's
/// marker: its id, the address its marker names, and `attributes(own description)`.
pub fn observed(
    stack: &str,
    ids: &[String],
    id: String,
    description: Option<&str>,
    attributes: impl FnOnce(&str) -> Value,
) -> Option<Observed> {
    let (own, fields) = split_description(description.unwrap_or_default());
    let address = fields
        .filter(|f| f.get("forge:stack").map(String::as_str) == Some(stack))
        .map(|f| f.get("forge:address").cloned().unwrap_or_default());
    (ids.contains(&id) || address.is_some()).then(|| Observed {
        attributes: attributes(&own),
        id,
        address,
    })
}

/// A network as the API takes it: a name becomes the project's network of that name.
pub fn network_url(gcp: &Clients, network: &str) -> String {
    if network.contains('/') {
        network.to_owned()
    } else {
        format!("projects/{}/global/networks/{network}", gcp.project)
    }
}

/// A block's attributes with its `network` by name, as the kinds read it back: a block may
/// name its network by name or by link.
pub fn network_by_name(config: &Value) -> Value {
    let mut config = config.clone();
    if let Some(network) = config.get("network").and_then(Value::as_str) {
        config["network"] = Value::String(last_segment(network).to_owned());
    }
    config
}

/// The region and name in a regional object's id (`projects/p/regions/<region>/…/<name>`).
pub fn regional_parts(id: &str) -> (&str, &str) {
    let mut segments = id.rsplit('/');
    let name = segments.next().unwrap_or(id);
    (segments.nth(1).unwrap_or_default(), name)
}

/// The last segment of a resource URL (`…/global/networks/main` → `main`).
pub fn last_segment(url: &str) -> &str {
    url.rsplit('/').next().unwrap_or(url)
}

/// A fresh request id, for calls whose repeat is harmless (updates, deletes): a repeated
/// `requestId` answers the first call's operation, which a retry after a failure must not get.
pub fn fresh_request_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_drop_the_api_version_as_gcloud_writes_them() {
        let settings = serde_json::json!({ "endpoints": { "compute": "http://127.0.0.1:9/compute/v1/" } });
        assert_eq!(endpoint(Some(&settings), "compute"), "http://127.0.0.1:9");
        let settings = serde_json::json!({ "endpoints": { "compute": "https://psc.example/v1/" } });
        assert_eq!(endpoint(Some(&settings), "compute"), "https://psc.example");
    }

    #[test]
    fn the_marker_splits_from_the_description() {
        let (own, fields) = split_description("GPU network [forge:stack=nemo forge:address=gcp_vpc.main.network forge:token=t1]");
        assert_eq!(own, "GPU network");
        let fields = fields.unwrap();
        assert_eq!(fields["forge:stack"], "nemo");
        assert_eq!(fields["forge:address"], "gcp_vpc.main.network");
        assert_eq!(split_description("made by hand"), ("made by hand".to_owned(), None));
        assert_eq!(stack_filter("nemo-a3"), "description eq '.*\\[forge:stack=nemo\\-a3 .*'");
    }
}
