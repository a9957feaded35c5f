//! Kubernetes: the objects that make a cluster ready for its first job (device plugins, the
//! shared file system's volume and claim, GPUDirect networks, queues) are resources like the
//! cloud's, in the same graph, state and plan. This module is the engine that reaches a
//! cluster (through the endpoint and CA its cloud reports, with a token forge makes), finds
//! each kind's API (discovery, per group-version, cached once served) and maps API errors;
//! `object.rs` is the `k8s_object` kind; `teardown.rs` the `k8s_teardown` kind that clears
//! what Kubernetes made in the cloud before a cluster goes; `ready.rs` the checks `up` makes
//! at the end.

mod access;
pub mod reach;
pub mod bundle;
pub mod object;
pub mod ready;
pub mod teardown;

use crate::provider::{Cloud, ProviderError};
use kube::api::{Api, DynamicObject};
use kube::discovery::{ApiCapabilities, ApiResource, Scope};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The field manager of every server-side apply forge makes.
pub const FIELD_MANAGER: &str = "forge";

/// Annotations that tie an object to the resource that made it (the cloud tags' equivalent):
/// stack, address, and the create's token.
pub const STACK_ANNOTATION: &str = "forge.dev/stack";
/// See [`STACK_ANNOTATION`].
pub const ADDRESS_ANNOTATION: &str = "forge.dev/address";
/// See [`STACK_ANNOTATION`].
pub const TOKEN_ANNOTATION: &str = "forge.dev/token";

/// How long a client is used before forge makes a new one with a fresh token (an EKS token is
/// valid 15 minutes).
const CLIENT_LIFETIME: Duration = Duration::from_secs(10 * 60);

/// A cluster forge reaches: `eks/<name>` (in the run's AWS region) or
/// `gke/projects/<project>/locations/<location>/clusters/<name>`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ClusterRef {
    /// An EKS cluster, by name.
    Eks(String),
    /// A GKE cluster, by its full resource name.
    Gke(String),
}

impl ClusterRef {
    /// Reads `eks/<name>` or `gke/projects/…`.
    pub fn parse(text: &str) -> Result<ClusterRef, ProviderError> {
        match text.split_once('/') {
            Some(("eks", name)) if !name.is_empty() && !name.contains('/') => Ok(ClusterRef::Eks(name.to_owned())),
            Some(("gke", id)) if id.starts_with("projects/") && id.contains("/clusters/") => Ok(ClusterRef::Gke(id.to_owned())),
            _ => Err(ProviderError::permanent(format!(
                "`{text}` names no cluster: write `eks/<name>` or `gke/projects/<project>/locations/<location>/clusters/<name>`"
            ))),
        }
    }
}

impl fmt::Display for ClusterRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClusterRef::Eks(name) => write!(f, "eks/{name}"),
            ClusterRef::Gke(id) => write!(f, "gke/{id}"),
        }
    }
}

/// One cluster's client, who forge is to it, and the kinds discovery found served there.
pub struct Connection {
    /// The cluster it reaches (for errors).
    pub cluster: ClusterRef,
    /// The client, with its bearer token.
    pub client: kube::Client,
    /// Who forge is to the cluster (for 401 and 403 errors): see [`reach::identity`].
    pub identity: String,
    made: Instant,
    kinds: std::sync::Mutex<HashMap<(String, String), (ApiResource, ApiCapabilities)>>,
}

/// What one run knows of a cluster's API server.
enum Reached {
    /// Reached: the connection every object of the cluster shares.
    Open(Arc<Connection>),
    /// Not reached within the wait: the error every object of the cluster fails with, at once.
    Unreachable(ProviderError),
}

/// The clusters of one run, connected on first use; one slot per cluster, so a cluster that
/// does not answer holds up only its own objects.
#[derive(Default)]
pub struct Connections {
    slots: std::sync::Mutex<HashMap<ClusterRef, Arc<tokio::sync::Mutex<Option<Reached>>>>>,
}

/// The connection to `cluster`, or `None` when its cloud no longer has it. The first use in a
/// run tries the endpoint for up to `reach` ([`reach::probe`]); an endpoint that did not answer
/// fails every later use in the run at once, with the same error.
pub async fn connect(cloud: &Cloud, cluster: &ClusterRef, reach: Duration) -> Result<Option<Arc<Connection>>, ProviderError> {
    let slot = cloud
        .kubernetes
        .slots
        .lock()
        .expect("no panics while held")
        .entry(cluster.clone())
        .or_default()
        .clone();
    let mut slot = slot.lock().await;
    match &*slot {
        Some(Reached::Open(c)) if c.made.elapsed() < CLIENT_LIFETIME => return Ok(Some(c.clone())),
        Some(Reached::Unreachable(e)) => return Err(e.clone()),
        _ => {}
    }
    let Some(access) = access::access(cloud, cluster).await? else {
        *slot = None;
        return Ok(None);
    };
    let identity = reach::identity(cloud, cluster).await;
    let client = client(cluster, &access).await?;
    if let Err(e) = reach::probe(&client, cluster, &access.endpoint, reach, &identity).await {
        *slot = Some(Reached::Unreachable(e.clone()));
        return Err(e);
    }
    let connection = Arc::new(Connection {
        cluster: cluster.clone(),
        client,
        identity,
        made: Instant::now(),
        kinds: Default::default(),
    });
    *slot = Some(Reached::Open(connection.clone()));
    Ok(Some(connection))
}

/// A client of the endpoint, CA and token in `access`, without kube's own retries.
async fn client(cluster: &ClusterRef, access: &access::Access) -> Result<kube::Client, ProviderError> {
    let kubeconfig: kube::config::Kubeconfig = serde_json::from_value(json!({
        "clusters": [{ "name": "c", "cluster": { "server": access.endpoint, "certificate-authority-data": access.ca } }],
        "users": [{ "name": "forge", "user": { "token": access.token } }],
        "contexts": [{ "name": "c", "context": { "cluster": "c", "user": "forge" } }],
        "current-context": "c",
    }))
    .map_err(|e| fail(cluster, format!("cannot make its client configuration: {e}")))?;
    let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .map_err(|e| fail(cluster, format!("cannot read its endpoint or CA: {e}")))?;
    // forge's retry is the only one (`provider::retry`): kube's own would resend 429s and
    // 503s under it.
    config.default_retry = false;
    config.connect_timeout = Some(reach::CONNECT_TIMEOUT);
    kube::Client::try_from(config).map_err(|e| fail(cluster, format!("cannot make its client: {e}")))
}

fn fail(cluster: &ClusterRef, message: String) -> ProviderError {
    ProviderError::permanent(format!("cluster `{cluster}`: {message}"))
}

/// Where one object lives: its cluster, its API and name.
pub struct Target {
    /// The cluster's connection.
    pub connection: Arc<Connection>,
    /// The object's API, namespaced or cluster-wide as discovery says.
    pub api: Api<DynamicObject>,
    /// Its name.
    pub name: String,
}

/// An object's identity, read off its manifest: `apiVersion`, `kind`, namespace and name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// `apps/v1`, `v1`.
    pub api_version: String,
    /// `DaemonSet`.
    pub kind: String,
    /// Its namespace, if it names one.
    pub namespace: Option<String>,
    /// Its name.
    pub name: String,
}

impl Identity {
    /// The identity a manifest declares, or what it lacks.
    pub fn of(manifest: &Value) -> Result<Identity, String> {
        let text = |path: &[&str]| {
            let mut v = manifest;
            for key in path {
                v = v.get(key)?;
            }
            v.as_str().filter(|s| !s.is_empty()).map(str::to_owned)
        };
        Ok(Identity {
            api_version: text(&["apiVersion"]).ok_or("the manifest has no `apiVersion`")?,
            kind: text(&["kind"]).ok_or("the manifest has no `kind`")?,
            namespace: text(&["metadata", "namespace"]),
            name: text(&["metadata", "name"]).ok_or("the manifest has no `metadata.name`")?,
        })
    }

    /// `DaemonSet kube-system/nvidia-device-plugin`, as plans and errors show it.
    pub fn label(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{} {ns}/{}", self.kind, self.name),
            None => format!("{} {}", self.kind, self.name),
        }
    }
}

impl Connection {
    /// The API of `identity`'s kind and the object's name; `Ok(None)` while the cluster does
    /// not serve the kind (its CRD not yet Established).
    pub async fn target(self: &Arc<Self>, identity: &Identity) -> Result<Option<Target>, ProviderError> {
        let key = (identity.api_version.clone(), identity.kind.clone());
        let known = self.kinds.lock().expect("no panics while held").get(&key).cloned();
        let (resource, capabilities) = match known {
            Some(found) => found,
            None => {
                let (group, version) = identity.api_version.rsplit_once('/').unwrap_or(("", &identity.api_version));
                let gvk = kube::api::GroupVersionKind::gvk(group, version, &identity.kind);
                match kube::discovery::pinned_kind(&self.client, &gvk).await {
                    Ok(found) => {
                        self.kinds.lock().expect("no panics while held").insert(key, found.clone());
                        found
                    }
                    Err(kube::Error::Discovery(_)) => return Ok(None),
                    Err(kube::Error::Api(status)) if status.code == 404 => return Ok(None),
                    Err(e) => return Err(error(self, "discovery", e)),
                }
            }
        };
        let api = match (capabilities.scope, &identity.namespace) {
            (Scope::Namespaced, Some(ns)) => Api::namespaced_with(self.client.clone(), ns, &resource),
            (Scope::Namespaced, None) => Api::default_namespaced_with(self.client.clone(), &resource),
            (Scope::Cluster, _) => Api::all_with(self.client.clone(), &resource),
        };
        Ok(Some(Target {
            connection: self.clone(),
            api,
            name: identity.name.clone(),
        }))
    }
}

/// Whether an API error is the API server's 404.
pub fn is_not_found(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(s) if s.code == 404)
}

/// Whether an API error is an admission webhook that is not serving yet (its pods still
/// starting): worth trying again, never worth a fixed sleep.
pub fn is_webhook_not_ready(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(s) if s.code >= 500 && s.message.contains("failed calling webhook"))
}

/// Maps an API error to a [`ProviderError`]: the server's message verbatim, what forge was
/// doing, and the cluster; a 401 or 403 names forge's identity and how to grant it access;
/// throttling, server errors and transport failures may be retried.
pub fn error(connection: &Connection, what: &str, err: kube::Error) -> ProviderError {
    let cluster = &connection.cluster;
    let retryable = match &err {
        kube::Error::Api(s) => s.code == 429 || s.code >= 500,
        kube::Error::HyperError(_) | kube::Error::Service(_) => true,
        _ => false,
    };
    let message = match &err {
        kube::Error::Api(s) if matches!(s.code, 401 | 403) => format!(
            "{} ({}) — the API server refuses forge's identity, {}. {}",
            s.message,
            s.reason,
            connection.identity,
            reach::grant(cluster, &connection.identity)
        ),
        kube::Error::Api(s) if !s.message.is_empty() => format!("{} ({})", s.message, s.reason),
        other => other.to_string(),
    };
    ProviderError {
        message: format!("{what}: {message} (cluster `{cluster}`)"),
        retryable,
        throttled: matches!(&err, kube::Error::Api(s) if s.code == 429),
    }
}
