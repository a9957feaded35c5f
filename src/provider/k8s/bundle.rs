//! Bundles: the YAML an upstream project publishes at a release URL (Kueue's
//! `manifests.yaml`, the MPI operator's `mpi-operator.yaml`), fetched over HTTPS when a stack
//! loads, with the sha256 of the bytes. `FORGE_BUNDLE_MIRROR` serves sites without a way out:
//! `https://<host>/<path>` is then fetched from `<mirror>/<host>/<path>`; the digest is that of
//! the bytes, wherever they came from, so a mirror cannot change what a pinned or recorded
//! digest lets through.

use crate::facts::Bundle;
use crate::provider::ProviderError;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::time::Duration;

/// The environment variable naming a mirror of the bundles' hosts.
pub const MIRROR_VARIABLE: &str = "FORGE_BUNDLE_MIRROR";

/// The largest bundle forge reads (Kueue's, the largest it names, is under 1 MiB).
const MAX_BYTES: usize = 32 << 20;

/// How many times a fetch is tried when the server or the network fails.
const ATTEMPTS: u32 = 3;

/// Fetches every bundle at `urls` at once.
pub async fn fetch(urls: &[String]) -> Result<BTreeMap<String, Bundle>, ProviderError> {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .user_agent(concat!("forge/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| ProviderError::permanent(format!("cannot make an HTTPS client: {e}")))?;
    let mirror = std::env::var(MIRROR_VARIABLE).ok().filter(|m| !m.is_empty());
    let fetched = futures::future::try_join_all(urls.iter().map(|url| fetch_one(&client, mirror.as_deref(), url))).await?;
    Ok(urls.iter().cloned().zip(fetched).collect())
}

/// Where the bundle at `url` is fetched from: the URL itself, or its place on the mirror.
fn source(url: &str, mirror: Option<&str>) -> Result<String, ProviderError> {
    let Some(mirror) = mirror else {
        return Ok(url.to_owned());
    };
    let rest = url
        .strip_prefix("https://")
        .ok_or_else(|| ProviderError::permanent(format!("the bundle URL {url} is not https://, so {MIRROR_VARIABLE} cannot map it")))?;
    Ok(format!("{}/{rest}", mirror.trim_end_matches('/')))
}

async fn fetch_one(client: &reqwest::Client, mirror: Option<&str>, url: &str) -> Result<Bundle, ProviderError> {
    let from = source(url, mirror)?;
    let via = if from == url { String::new() } else { format!(" (from {from})") };
    let mut attempt = 1;
    let bytes = loop {
        let failure = match client.get(&from).send().await {
            Ok(response) if response.status().is_success() => match response.bytes().await {
                Ok(bytes) => break bytes,
                Err(e) => format!("the download broke off: {e}"),
            },
            Ok(response) if response.status().is_server_error() => format!("HTTP {}", response.status()),
            Ok(response) => {
                return Err(ProviderError::permanent(format!(
                    "cannot fetch the bundle {url}{via}: HTTP {}; check the URL or version",
                    response.status()
                )));
            }
            Err(e) => format!("{e}"),
        };
        if attempt == ATTEMPTS {
            return Err(ProviderError::permanent(format!(
                "cannot fetch the bundle {url}{via} ({ATTEMPTS} tries): {failure}; without a way to the internet, set {MIRROR_VARIABLE} to a mirror of its host"
            )));
        }
        tokio::time::sleep(Duration::from_secs(u64::from(attempt))).await;
        attempt += 1;
    };
    if bytes.len() > MAX_BYTES {
        return Err(ProviderError::permanent(format!(
            "the bundle {url}{via} is {} bytes, more than the {MAX_BYTES} forge reads",
            bytes.len()
        )));
    }
    let sha256 = format!("{:x}", Sha256::digest(&bytes));
    let text = String::from_utf8(bytes.to_vec())
        .map_err(|_| ProviderError::permanent(format!("the bundle {url}{via} is not UTF-8 text, so not YAML")))?;
    Ok(Bundle { text: text.into(), sha256 })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mirror_serves_each_host_below_its_own_path() {
        let url = "https://github.com/kubernetes-sigs/kueue/releases/download/v0.14.1/manifests.yaml";
        assert_eq!(source(url, None).unwrap(), url);
        assert_eq!(
            source(url, Some("http://mirror.internal/bundles/")).unwrap(),
            "http://mirror.internal/bundles/github.com/kubernetes-sigs/kueue/releases/download/v0.14.1/manifests.yaml"
        );
        assert!(source("http://example.com/a.yaml", Some("http://m")).is_err());
    }
}
