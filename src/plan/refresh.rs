//! Refresh: which recorded resources still exist. One batched read per kind, kinds read
//! concurrently, so the cost grows with the number of kinds, not of resources.

use crate::provider::{Cloud, ProviderError, Registry, RetryPolicy};
use crate::state::{State, Status};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// A kind whose read failed.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
#[error("cannot read the live `{kind}` resources: {source}")]
#[diagnostic(help("check credentials and network, or plan from the state alone with `--refresh=false`"))]
pub struct RefreshError {
    /// The kind.
    pub kind: String,
    /// The cloud's error.
    #[source]
    pub source: ProviderError,
}

/// Addresses of created resources that no longer exist in the cloud.
pub async fn gone(state: &State, registry: &Registry, cloud: Arc<Cloud>, retry: &RetryPolicy) -> Result<BTreeSet<String>, RefreshError> {
    let mut by_kind: BTreeMap<&str, Vec<(&str, String)>> = BTreeMap::new();
    for r in state.resources.values().filter(|r| r.status == Status::Created) {
        if let Some(id) = &r.id {
            by_kind.entry(r.kind.as_str()).or_default().push((r.address.as_str(), id.clone()));
        }
    }
    let mut reads = tokio::task::JoinSet::new();
    for (kind, records) in &by_kind {
        let Some(k) = registry.get(kind).cloned() else { continue };
        let ids: Vec<String> = records.iter().map(|(_, id)| id.clone()).collect();
        let (cloud, kind, retry) = (cloud.clone(), kind.to_string(), retry.clone());
        reads.spawn(async move {
            let live = retry.run(|| k.live_ids(&cloud, &ids)).await;
            (kind, live)
        });
    }
    let mut gone = BTreeSet::new();
    while let Some(joined) = reads.join_next().await {
        let (kind, live) = joined.expect("refresh reads do not panic");
        let live = live.map_err(|source| RefreshError {
            kind: kind.clone(),
            source,
        })?;
        gone.extend(
            by_kind[kind.as_str()]
                .iter()
                .filter(|(_, id)| !live.contains(id))
                .map(|(address, _)| (*address).to_owned()),
        );
    }
    Ok(gone)
}
