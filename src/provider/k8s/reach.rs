//! Whether forge reaches a cluster's API server, and when it does not, why and what to do.
//! Before its first request to a cluster, forge asks the endpoint for its API list (`GET /api`,
//! which any authenticated caller may read), trying for a bounded time (`timeouts = { reach =
//! "…" }` on the in-cluster objects, a minute by default): a private endpoint seen from
//! outside its network, a firewall, a name that does not resolve, a certificate that does not
//! match or credentials the cluster does not take end in one error that names the cluster, the
//! endpoint, the kind of failure, forge's identity where it matters, and the ways to get
//! through — instead of each object retrying its own connection errors for ten minutes.

use super::ClusterRef;
use crate::provider::ProviderError;
use std::time::{Duration, Instant};

/// How long forge tries a cluster's endpoint before its in-cluster objects fail.
pub const REACH_TIMEOUT: Duration = Duration::from_secs(60);

/// The longest single connection attempt (kube's own default is 30 s).
pub(super) const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a request did not reach the API server, as a user fixes it.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Failure {
    /// Nothing listens there (or a firewall rejects): `connection refused`.
    Refused,
    /// Nothing answers (a private address seen from outside, a firewall that drops).
    TimedOut,
    /// The endpoint's name does not resolve (a private hosted zone seen from outside).
    Dns,
    /// The TLS handshake failed (a proxy in the way, a CA that does not match).
    Tls(String),
    /// The API server does not take forge's credentials (401).
    Unauthorized,
    /// Anything else the transport said.
    Other(String),
}

impl Failure {
    /// What a user reads.
    fn describe(&self) -> String {
        match self {
            Failure::Refused => "connection refused".into(),
            Failure::TimedOut => "connection timed out".into(),
            Failure::Dns => "its name does not resolve (DNS)".into(),
            Failure::Tls(why) => format!("TLS handshake failed ({why})"),
            Failure::Unauthorized => "401 Unauthorized: it does not accept forge's credentials".into(),
            Failure::Other(why) => why.clone(),
        }
    }
}

/// Reads a failed request: the transport's error chain (`io::Error` kinds, DNS and TLS
/// errors by their sources) or the API server's 401.
pub(super) fn classify(err: &kube::Error) -> Failure {
    if let kube::Error::Api(status) = err {
        return if status.code == 401 {
            Failure::Unauthorized
        } else {
            Failure::Other(format!("HTTP {} {}", status.code, status.message))
        };
    }
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(err);
    let mut words = Vec::new();
    while let Some(e) = source {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            match io.kind() {
                std::io::ErrorKind::ConnectionRefused => return Failure::Refused,
                std::io::ErrorKind::TimedOut => return Failure::TimedOut,
                _ => {}
            }
        }
        words.push(e.to_string());
        source = e.source();
    }
    let said = words.join(": ");
    let lower = said.to_lowercase();
    if lower.contains("dns error") || lower.contains("failed to lookup address") || lower.contains("name or service not known") {
        Failure::Dns
    } else if lower.contains("certificate") || lower.contains("tls") || lower.contains("handshake") {
        Failure::Tls(words.last().cloned().unwrap_or(said))
    } else if lower.contains("timed out") || lower.contains("elapsed") || lower.contains("timeout") {
        Failure::TimedOut
    } else {
        Failure::Other(said)
    }
}

/// Asks the endpoint for its API list until it answers, a 401 says it never will, or `limit`
/// is up; `status` shows each failed try. The error names the endpoint, the failure and the
/// ways through.
pub(super) async fn probe(
    client: &kube::Client,
    cluster: &ClusterRef,
    endpoint: &str,
    limit: Duration,
    identity: &str,
) -> Result<(), ProviderError> {
    let started = Instant::now();
    let mut pause = Duration::from_millis(500);
    loop {
        let failure = match client.list_core_api_versions().await {
            Ok(_) => return Ok(()),
            Err(e) => classify(&e),
        };
        if failure == Failure::Unauthorized {
            return Err(ProviderError::permanent(refused(cluster, endpoint, identity)));
        }
        if started.elapsed() + pause > limit {
            return Err(ProviderError::permanent(unreachable(
                cluster,
                endpoint,
                &failure,
                started.elapsed(),
            )));
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_secs(8));
    }
}

/// The error of an endpoint forge could not reach.
fn unreachable(cluster: &ClusterRef, endpoint: &str, failure: &Failure, tried: Duration) -> String {
    let ways = match cluster {
        ClusterRef::Eks(_) => {
            "run forge where the endpoint is reachable (inside the cluster's VPC, or a CI runner there), or open its public endpoint to where forge runs (`endpoint = \"both\"` with `public_access_cidrs = [\"<your address>/32\"]` on the `eks` block)"
        }
        ClusterRef::Gke(_) => {
            "run forge where the endpoint is reachable (inside the cluster's VPC, or a CI runner there), or give the cluster a public endpoint open to where forge runs (`private_endpoint = false` and `authorized_networks` on the `gke` block)"
        }
    };
    format!(
        "cannot reach the API server of cluster `{cluster}` at {endpoint}: {} (tried for {}s). Its in-cluster objects were not applied; the cloud resources are. To get through: {ways}; then run `forge up` again. To apply only the cloud side from here, use `forge up --skip-in-cluster`; raise the wait with `reach_timeout = \"5m\"` in the cluster block's `kubernetes` table (`timeouts = {{ reach = \"5m\" }}` on a `k8s_object`)",
        failure.describe(),
        tried.as_secs()
    )
}

/// The error of an API server that does not take forge's credentials (401).
fn refused(cluster: &ClusterRef, endpoint: &str, identity: &str) -> String {
    format!(
        "the API server of cluster `{cluster}` at {endpoint} answers 401 Unauthorized: it does not accept forge's identity, {identity}. {}",
        grant(cluster, identity)
    )
}

/// How to give `identity` access to `cluster`.
pub(super) fn grant(cluster: &ClusterRef, identity: &str) -> String {
    match cluster {
        ClusterRef::Eks(name) => format!(
            "Give that principal access with an EKS access entry (`aws eks create-access-entry --cluster-name {name} --principal-arn <its role ARN>`, then `aws eks associate-access-policy --cluster-name {name} --principal-arn <its role ARN> --policy-arn arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy --access-scope type=cluster`), or run forge as the principal that created the cluster"
        ),
        ClusterRef::Gke(_) => format!(
            "Grant {identity} a role on the cluster's project that covers Kubernetes objects (`roles/container.admin`, or `roles/container.developer` with RBAC for what forge applies): `gcloud projects add-iam-policy-binding <project> --member=<that account> --role=roles/container.admin`"
        ),
    }
}

/// Who forge is to a cluster: the IAM principal behind an EKS token (STS
/// `GetCallerIdentity`), the Google account behind a GKE token.
pub(super) async fn identity(cloud: &crate::provider::Cloud, cluster: &ClusterRef) -> String {
    match cluster {
        #[cfg(feature = "aws")]
        ClusterRef::Eks(_) => match cloud.aws().await.sts.get_caller_identity().send().await {
            Ok(who) => format!("the IAM principal {}", who.arn().unwrap_or("(unnamed)")),
            Err(e) => format!(
                "the IAM principal of forge's AWS credentials (STS could not say which: {})",
                aws_sdk_sts::error::DisplayErrorContext(&e)
            ),
        },
        #[cfg(feature = "gcp")]
        ClusterRef::Gke(_) => google_account(),
        #[allow(unreachable_patterns)]
        _ => {
            let _ = cloud;
            "forge's credentials".into()
        }
    }
}

/// The Google account of forge's credentials, as far as they say without a call:
/// `GOOGLE_OAUTH_ACCESS_TOKEN`'s, a service account key's `client_email`, or the gcloud user
/// of Application Default Credentials.
#[cfg(feature = "gcp")]
fn google_account() -> String {
    if std::env::var_os("GOOGLE_OAUTH_ACCESS_TOKEN").is_some() {
        return "the Google account of the token in GOOGLE_OAUTH_ACCESS_TOKEN".into();
    }
    let file = std::env::var_os("GOOGLE_APPLICATION_CREDENTIALS")
        .map(std::path::PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|home| std::path::Path::new(&home).join(".config/gcloud/application_default_credentials.json"))
        });
    let key: Option<serde_json::Value> = file
        .and_then(|f| std::fs::read_to_string(f).ok())
        .and_then(|text| serde_json::from_str(&text).ok());
    match key.as_ref().and_then(|k| k.get("client_email")).and_then(serde_json::Value::as_str) {
        Some(email) => format!("the service account {email}"),
        None => "the Google account of Application Default Credentials (`gcloud auth application-default login`)".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unreachable_endpoint_says_where_and_how_through() {
        let text = unreachable(
            &ClusterRef::Eks("gpu".into()),
            "https://ABC.gr7.us-west-2.eks.amazonaws.com",
            &Failure::Refused,
            Duration::from_secs(61),
        );
        assert!(text.contains("`eks/gpu` at https://ABC.gr7.us-west-2.eks.amazonaws.com: connection refused (tried for 61s)"));
        assert!(text.contains("public_access_cidrs"));
        assert!(text.contains("--skip-in-cluster"));
        let gke = unreachable(
            &ClusterRef::Gke("projects/p/locations/l/clusters/a3".into()),
            "https://10.0.0.2",
            &Failure::Dns,
            Duration::ZERO,
        );
        assert!(gke.contains("authorized_networks") && gke.contains("DNS"));
    }

    #[test]
    fn a_refused_connection_is_read_from_the_error_chain() {
        let io = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        assert_eq!(classify(&kube::Error::Service(Box::new(io))), Failure::Refused);
        let dns = std::io::Error::other("dns error: failed to lookup address information");
        assert_eq!(classify(&kube::Error::Service(Box::new(dns))), Failure::Dns);
    }
}
