//! Google Cloud: the official google-cloud-rust clients made from `[gcp]` and Google's own
//! environment (project, region, endpoint overrides, credentials) and error mapping, here;
//! Compute operations (`operation`), forge's mark on the objects it makes (`marker`), what every
//! Compute kind does the same way (`collection`), GKE's operations and shared rules (`gke`),
//! what the objects made by a long operation share (`resumable`), the list prices (`billing`),
//! and one file per resource kind.

pub mod billing;
#[macro_use]
mod collection;
mod container_cluster;
mod container_node_pool;
mod filestore_instance;
mod firewall;
mod future_reservation;
mod gke;
mod marker;
mod network;
mod operation;
mod resource_policy;
mod resumable;
mod router;
mod subnetwork;

pub use container_cluster::get as get_cluster;

use super::settings::GcpSettings;
use super::{Cloud, ProviderError, Registry};
use google_cloud_compute_v1::client::{
    Firewalls, FutureReservations, GlobalOperations, InstanceGroupManagers, Networks, RegionOperations, ResourcePolicies, Routers,
    Subnetworks, ZoneOperations,
};
use google_cloud_container_v1::client::ClusterManager;
use google_cloud_filestore_v1::client::CloudFilestoreManager;

/// Adds the Google Cloud kinds to a registry.
pub fn register(registry: Registry) -> Registry {
    registry
        .with(network::Network)
        .with(subnetwork::Subnetwork)
        .with(firewall::Firewall)
        .with(router::Router)
        .with(resource_policy::ResourcePolicy)
        .with(future_reservation::FutureReservation)
        .with(container_cluster::ContainerCluster)
        .with(container_node_pool::ContainerNodePool)
        .with(filestore_instance::FilestoreInstance)
}

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
    /// Compute resource policies (GKE node pools' workload policies).
    pub resource_policies: ResourcePolicies,
    /// Compute future reservations (calendar mode).
    pub future_reservations: FutureReservations,
    /// Compute operations on global objects.
    pub global_operations: GlobalOperations,
    /// Compute operations on regional objects.
    pub region_operations: RegionOperations,
    /// Compute operations on zonal objects.
    pub zone_operations: ZoneOperations,
    /// Compute's managed instance groups (a GKE node pool's size lives there).
    pub instance_group_managers: InstanceGroupManagers,
    /// GKE: clusters, node pools and their operations.
    pub container: ClusterManager,
    /// Filestore: instances and their operations.
    pub filestore: CloudFilestoreManager,
    /// "project …, region …, endpoint …" of Compute: said with every Google error so a wrong
    /// project or endpoint is obvious.
    pub context: String,
    /// The same for GKE's endpoint.
    pub container_context: String,
    /// The same for Filestore's endpoint.
    pub filestore_context: String,
    /// The credentials every client uses; their access token is forge's GKE bearer token too.
    pub credentials: google_cloud_auth::credentials::Credentials,
}

/// The first of the `[gcp]` setting `given` and these environment variables that is set and
/// not empty.
fn setting(given: Option<&str>, variables: &[&str]) -> Option<String> {
    given
        .map(str::to_owned)
        .into_iter()
        .chain(variables.iter().filter_map(|v| std::env::var(v).ok()))
        .find(|v| !v.is_empty())
}

/// The API version each service's paths start with, as gcloud's endpoint overrides end with it
/// (`https://compute.googleapis.com/compute/v1/`, `https://container.googleapis.com/v1/`).
fn version_path(service: &str) -> &'static str {
    match service {
        "compute" => "/compute/v1",
        "storage" => "/storage/v1",
        _ => "/v1",
    }
}

/// The root URL of `service`: `[gcp] endpoints.<service>`, else gcloud's
/// `CLOUDSDK_API_ENDPOINT_OVERRIDES_<SERVICE>`, else Google's own. A trailing API version
/// (`compute/v1/`, `v1/`), as gcloud takes these values, is not part of the root; anything before
/// it is (a proxy's path prefix).
pub fn endpoint(settings: Option<&GcpSettings>, service: &str) -> String {
    let configured = settings
        .and_then(|s| s.endpoints.as_ref())
        .and_then(|e| e.get(service))
        .map(str::to_owned);
    root_url(configured, service)
}

/// The root URL of `service` given its configured value, else gcloud's
/// `CLOUDSDK_API_ENDPOINT_OVERRIDES_<SERVICE>`, else Google's own; see [`endpoint`].
pub fn root_url(configured: Option<String>, service: &str) -> String {
    let variable = format!("CLOUDSDK_API_ENDPOINT_OVERRIDES_{}", service.to_uppercase());
    match configured.or_else(|| std::env::var(&variable).ok()).filter(|v| !v.is_empty()) {
        Some(url) => {
            let url = url.trim_end_matches('/');
            url.strip_suffix(version_path(service)).unwrap_or(url).to_owned()
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
pub fn credentials() -> Result<google_cloud_auth::credentials::Credentials, String> {
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
    pub async fn connect(settings: Option<&GcpSettings>) -> Result<Clients, ProviderError> {
        let fail = |message: String| ProviderError::permanent(message);
        let project = setting(
            settings.and_then(|s| s.project.as_deref()),
            &["GOOGLE_CLOUD_PROJECT", "CLOUDSDK_CORE_PROJECT"],
        )
        .ok_or_else(|| fail("no Google Cloud project: set `project` in `[gcp]`, or GOOGLE_CLOUD_PROJECT".into()))?;
        let region = setting(settings.and_then(|s| s.region.as_deref()), &["CLOUDSDK_COMPUTE_REGION"]);
        let at = |service: &str| {
            let url = endpoint(settings, service);
            let context = format!(
                "project {project}, region {}, endpoint {url}",
                region.as_deref().unwrap_or("(none)")
            );
            (url, context)
        };
        let (compute, context) = at("compute");
        let (container, container_context) = at("container");
        let (file, filestore_context) = at("file");
        let credentials = credentials().map_err(fail)?;
        macro_rules! client {
            ($client:ty) => {
                client!($client, compute)
            };
            ($client:ty, $url:ident) => {
                <$client>::builder()
                    .with_endpoint(&$url)
                    .with_credentials(credentials.clone())
                    .with_retry_policy(google_cloud_gax::retry_policy::NeverRetry)
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
            resource_policies: client!(ResourcePolicies),
            future_reservations: client!(FutureReservations),
            global_operations: client!(GlobalOperations),
            region_operations: client!(RegionOperations),
            zone_operations: client!(ZoneOperations),
            instance_group_managers: client!(InstanceGroupManagers),
            container: client!(ClusterManager, container),
            filestore: client!(CloudFilestoreManager, file),
            project,
            region,
            context,
            container_context,
            filestore_context,
            credentials,
        })
    }

    /// The access token of [`Clients::credentials`]: what a GKE cluster's API server takes as
    /// a bearer token.
    pub async fn access_token(&self) -> Result<String, ProviderError> {
        use google_cloud_auth::credentials::CacheableResource;
        let fail = |message: String| ProviderError::permanent(format!("{message} ({})", self.container_context));
        let headers = match self.credentials.headers(http::Extensions::new()).await {
            Ok(CacheableResource::New { data, .. }) => data,
            Ok(CacheableResource::NotModified) => return Err(fail("the Google credentials gave no access token".into())),
            Err(e) => return Err(fail(format!("cannot get a Google access token: {e}"))),
        };
        headers
            .get(http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::to_owned)
            .ok_or_else(|| fail("the Google credentials gave no bearer token".into()))
    }

    /// The region of a regional object: its block's `region`, else the provider's.
    pub fn region_of(&self, region: Option<&str>) -> Result<String, ProviderError> {
        region
            .map(str::to_owned)
            .or_else(|| self.region.clone())
            .ok_or_else(|| ProviderError::permanent("no region: set `region` on the block or in `[gcp]`, or CLOUDSDK_COMPUTE_REGION"))
    }
}

impl Cloud {
    /// The Google Cloud clients, made from `[gcp]` and Google's environment on first use.
    pub async fn gcp(&self) -> Result<&Clients, ProviderError> {
        self.gcp
            .get_or_init(|| Clients::connect(self.settings.gcp.as_ref()))
            .await
            .as_ref()
            .map_err(Clone::clone)
    }
}

/// Whether a failed call found nothing (HTTP 404; Compute's error bodies carry no status).
pub fn not_found(err: &google_cloud_compute_v1::Error) -> bool {
    err.http_status_code() == Some(404)
}

/// A call's answer about one object, with an object that is not there (HTTP 404) as `None`
/// and any other failure mapped by `error`.
fn found<T>(
    sent: Result<T, google_cloud_compute_v1::Error>,
    error: impl FnOnce(google_cloud_compute_v1::Error) -> ProviderError,
) -> Result<Option<T>, ProviderError> {
    match sent {
        Ok(answer) => Ok(Some(answer)),
        Err(e) if not_found(&e) => Ok(None),
        Err(e) => Err(error(e)),
    }
}

/// Error reasons of Compute's that a later try may not hit besides rate limits: an object still
/// in use by another (HTTP 400, the synchronous form of the failed "in use" operation).
const RETRYABLE_REASONS: &[&str] = &["resourceInUseByAnotherResource"];

/// The `errors[].reason`s of a call refused for its request rate (with HTTP 403).
const RATE_LIMIT_REASONS: &[&str] = &["rateLimitExceeded", "userRateLimitExceeded"];

/// Maps a client error to a [`ProviderError`]: the service's message verbatim, or, for an
/// answer that is not the service's own (an HTML page from a proxy or a wrong endpoint), one
/// line with the HTTP status and the first words of the body; whether it is worth retrying
/// (rate limits, server errors, transport failures); and the project, region and endpoint.
pub fn error(gcp: &Clients, what: &str, err: google_cloud_compute_v1::Error) -> ProviderError {
    error_in(&gcp.context, what, err)
}

/// [`error`] for a call to the service whose context (project, region, endpoint) is `context`.
pub fn error_in(context: &str, what: &str, err: google_cloud_compute_v1::Error) -> ProviderError {
    let status = err.http_status_code();
    let body = err
        .http_payload()
        .map(|b| String::from_utf8_lossy(b).into_owned())
        .unwrap_or_default();
    // Compute names a rate limit (403) and an object in use (400) only in `errors[].reason`.
    let reason = |reasons: &[&str]| {
        reasons
            .iter()
            .any(|r| body.contains(&format!("\"reason\": \"{r}\"")) || body.contains(&format!("\"reason\":\"{r}\"")))
    };
    let throttled = status == Some(429) || reason(RATE_LIMIT_REASONS);
    let retryable = matches!(status, Some(500..))
        || throttled
        || reason(RETRYABLE_REASONS)
        || err.is_transport()
        || err.is_timeout()
        || err.is_io()
        || err.is_connect();
    let message = match (err.status(), status) {
        (Some(s), _) if !s.message.is_empty() => s.message.clone(),
        (_, Some(code)) => {
            let body = err.http_payload().map(std::convert::AsRef::as_ref).unwrap_or_default();
            crate::provider::not_the_api(code, body)
        }
        _ => err.to_string(),
    };
    ProviderError {
        message: format!("{what}: {message} ({context})"),
        retryable,
        throttled,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `[gcp]` with only `endpoints`, read as the loader reads it.
    fn with_endpoints(endpoints: serde_json::Value) -> GcpSettings {
        serde_json::from_value(serde_json::json!({ "endpoints": endpoints })).expect("known APIs")
    }

    #[test]
    fn endpoints_drop_the_api_version_as_gcloud_writes_them() {
        let settings = with_endpoints(serde_json::json!({ "compute": "http://127.0.0.1:9/compute/v1/" }));
        assert_eq!(endpoint(Some(&settings), "compute"), "http://127.0.0.1:9");
        let settings = with_endpoints(serde_json::json!({ "compute": "https://psc.example/compute/v1" }));
        assert_eq!(endpoint(Some(&settings), "compute"), "https://psc.example");
        let settings = with_endpoints(serde_json::json!({ "container": "http://127.0.0.1:9/container/v1/" }));
        assert_eq!(endpoint(Some(&settings), "container"), "http://127.0.0.1:9/container");
    }
}
