//! `k8s_manifest`: Kubernetes objects of the stack's own, from a YAML file (one or more
//! documents), inline `objects`, or a `url` (an upstream release's bundle, checked against
//! `sha256` when given, else against the digest the state recorded on the first apply),
//! applied into a cluster block of the stack. Each object is a `k8s_object` part, ordered as
//! [`manifests::ordered_parts`] says. Values of the file and the objects may reference forge
//! outputs (`${fsx.data.dns_name}`; `$${` writes `${`); a URL's are taken as they are.

use super::{Component, ComponentError, Expansion, Input, kubernetes, manifests};
use crate::schema::{Block, block};
use serde_json::{Map, Value};

/// The component's registration.
pub const COMPONENT: Component = Component {
    name: "k8s_manifest",
    schema: K8sManifest::FIELDS,
    expand,
};

block! {
    /// A `k8s_manifest` block (`file` holds the file's text: the loader reads it).
    struct K8sManifest {
        cluster: String,
        file: Option<String> as File,
        objects: Option<Vec<Value>>,
        url: Option<String>,
        sha256: Option<String>,
    }
}

fn expand(input: &Input) -> Result<Expansion, ComponentError> {
    let block: K8sManifest = input.block()?;
    let cluster_block = block.cluster.as_str();
    let cluster = match cluster_block.split_once('.').map(|(kind, _)| kind) {
        Some("eks") => input
            .named_block("cluster", Some(cluster_block), "eks")
            .map(|(a, _)| kubernetes::eks_cluster(a))?,
        Some("gke") => input
            .named_block("cluster", Some(cluster_block), "gke")
            .map(|(a, _)| kubernetes::gke_cluster(a))?,
        _ => {
            return Err(ComponentError::at(
                "cluster",
                format!("`cluster = \"{cluster_block}\"` names no cluster block"),
                "write `cluster = \"eks.<name>\"` or `cluster = \"gke.<name>\"`: a cluster block of this stack",
            ));
        }
    };
    let mut objects: Vec<Value> = Vec::new();
    if let Some(text) = &block.file {
        objects.extend(manifests::documents(&text.replace("$${", "${"), "file")?);
    }
    objects.extend(block.objects.unwrap_or_default());
    let mut fetched = true;
    if let Some(url) = &block.url {
        match manifests::bundle(input, url, block.sha256.as_deref(), "url")? {
            Some(bundle) => objects.extend(bundle),
            None => fetched = false,
        }
    } else if block.sha256.is_some() {
        return Err(ComponentError::at(
            "sha256",
            "`sha256` pins the bundle of `url`, and there is no `url`",
            "add the bundle's `url`, or remove `sha256`",
        ));
    }
    if objects.is_empty() && fetched {
        return Err(ComponentError::at(
            "file",
            "the manifest has no objects",
            "write `file = \"manifests/queue.yaml\"` (YAML documents), `objects = [{ apiVersion = \"v1\", kind = \"ConfigMap\", … }]` or `url = \"https://…\"`",
        ));
    }
    let parts = manifests::ordered_parts(input.address, "", &cluster, objects, "objects")?;
    Ok(Expansion {
        parts,
        outputs: Map::new(),
        ready: Vec::new(),
    })
}
