//! How forge reaches a cluster's API server: the endpoint and CA the cloud reports for the
//! cluster (EKS DescribeCluster, GKE clusters.get) and a bearer token forge makes itself — on
//! EKS the `k8s-aws-v1.` presigned STS `GetCallerIdentity` URL (aws-iam-authenticator's format),
//! on GKE the Google access token of forge's own credentials. No kubectl, no cloud CLI.

use super::ClusterRef;
use crate::provider::{Cloud, ProviderError};

/// What a client needs to talk to one cluster's API server.
pub(super) struct Access {
    /// `https://host:port`.
    pub endpoint: String,
    /// The cluster CA, base64 of its PEM, as both clouds report it.
    pub ca: String,
    /// The bearer token.
    pub token: String,
}

/// The access to `cluster`, or `None` when the cloud no longer has it.
pub(super) async fn access(cloud: &Cloud, cluster: &ClusterRef) -> Result<Option<Access>, ProviderError> {
    match cluster {
        #[cfg(feature = "aws")]
        ClusterRef::Eks(name) => eks(cloud, name).await,
        #[cfg(feature = "gcp")]
        ClusterRef::Gke(id) => gke(cloud, id).await,
        #[allow(unreachable_patterns)]
        other => Err(ProviderError::permanent(format!(
            "this forge was built without the cloud of cluster `{other}`"
        ))),
    }
}

/// Whether the cloud still has `cluster` (without making a token).
pub(super) async fn exists(cloud: &Cloud, cluster: &ClusterRef) -> Result<bool, ProviderError> {
    match cluster {
        #[cfg(feature = "aws")]
        ClusterRef::Eks(name) => Ok(crate::provider::aws::describe_eks_cluster(cloud.aws().await, name).await?.is_some()),
        #[cfg(feature = "gcp")]
        ClusterRef::Gke(id) => Ok(crate::provider::gcp::get_cluster(cloud.gcp().await?, id).await?.is_some()),
        #[allow(unreachable_patterns)]
        other => Err(ProviderError::permanent(format!(
            "this forge was built without the cloud of cluster `{other}`"
        ))),
    }
}

/// An EKS cluster: DescribeCluster, and the presigned-STS token.
#[cfg(feature = "aws")]
async fn eks(cloud: &Cloud, name: &str) -> Result<Option<Access>, ProviderError> {
    let aws = cloud.aws().await;
    let Some(cluster) = crate::provider::aws::describe_eks_cluster(aws, name).await? else {
        return Ok(None);
    };
    let (Some(endpoint), Some(ca)) = (cluster.endpoint(), cluster.certificate_authority().and_then(|c| c.data())) else {
        return Err(ProviderError::transient(format!(
            "EKS cluster `{name}` reports no endpoint or CA yet ({})",
            aws.context
        )));
    };
    Ok(Some(Access {
        endpoint: endpoint.to_owned(),
        ca: ca.to_owned(),
        token: eks_token(aws, name).await?,
    }))
}

/// The EKS bearer token for cluster `name`: `k8s-aws-v1.` and the base64url (no padding) of an
/// STS `GetCallerIdentity` URL presigned for 60 s with the signed header `x-k8s-aws-id: <name>`,
/// which the cluster's authenticator sends to STS to learn who calls.
#[cfg(feature = "aws")]
async fn eks_token(aws: &crate::provider::aws::Clients, name: &str) -> Result<String, ProviderError> {
    use aws_credential_types::provider::ProvideCredentials;
    use aws_sigv4::http_request::{SignableBody, SignableRequest, SignatureLocation, SigningSettings, sign};
    use base64::Engine;
    let region = aws
        .sdk
        .region()
        .map(std::string::ToString::to_string)
        .ok_or_else(|| ProviderError::permanent("no AWS region: set `region` in `[aws]` or AWS_REGION"))?;
    let credentials = aws
        .sdk
        .credentials_provider()
        .ok_or_else(|| ProviderError::permanent("no AWS credentials to sign the cluster token with"))?
        .provide_credentials()
        .await
        .map_err(|e| ProviderError::permanent(format!("cannot load AWS credentials for the cluster token: {e} ({})", aws.context)))?;
    let identity = credentials.into();
    let mut settings = SigningSettings::default();
    settings.signature_location = SignatureLocation::QueryParams;
    settings.expires_in = Some(std::time::Duration::from_secs(60));
    let params = aws_sigv4::sign::v4::SigningParams::builder()
        .identity(&identity)
        .region(&region)
        .name("sts")
        .time(std::time::SystemTime::now())
        .settings(settings)
        .build()
        .map_err(|e| ProviderError::permanent(format!("cannot sign the cluster token: {e}")))?
        .into();
    let url = format!("https://sts.{region}.amazonaws.com/?Action=GetCallerIdentity&Version=2011-06-15");
    let signable = SignableRequest::new("GET", &url, [("x-k8s-aws-id", name)].into_iter(), SignableBody::Bytes(&[]))
        .map_err(|e| ProviderError::permanent(format!("cannot sign the cluster token: {e}")))?;
    let (instructions, _) = sign(signable, &params)
        .map_err(|e| ProviderError::permanent(format!("cannot sign the cluster token: {e}")))?
        .into_parts();
    let mut request = http::Request::builder()
        .uri(&url)
        .header("x-k8s-aws-id", name)
        .body(())
        .map_err(|e| ProviderError::permanent(format!("cannot sign the cluster token: {e}")))?;
    instructions.apply_to_request_http1x(&mut request);
    let presigned = request.uri().to_string();
    Ok(format!(
        "k8s-aws-v1.{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(presigned)
    ))
}

/// A GKE cluster (`projects/…/locations/…/clusters/…`): clusters.get, and the access token of
/// the credentials forge's Google clients use.
#[cfg(feature = "gcp")]
async fn gke(cloud: &Cloud, id: &str) -> Result<Option<Access>, ProviderError> {
    let gcp = cloud.gcp().await?;
    let Some(cluster) = crate::provider::gcp::get_cluster(gcp, id).await? else {
        return Ok(None);
    };
    let ca = cluster
        .master_auth
        .as_ref()
        .map(|a| a.cluster_ca_certificate.clone())
        .unwrap_or_default();
    if cluster.endpoint.is_empty() || ca.is_empty() {
        return Err(ProviderError::transient(format!(
            "GKE cluster `{id}` reports no endpoint or CA yet ({})",
            gcp.container_context
        )));
    }
    Ok(Some(Access {
        endpoint: format!("https://{}", cluster.endpoint),
        ca,
        token: gcp.access_token().await?,
    }))
}
