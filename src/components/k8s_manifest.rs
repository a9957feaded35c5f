//! `k8s_manifest`: Kubernetes objects of the stack's own, from a YAML file (one or more
//! documents), inline `objects`, or a `url` (an upstream release's bundle, checked against
//! `sha256` when given, else against the digest the state recorded on the first apply),
//! applied into a cluster block of the stack. Each object is a `k8s_object` part, ordered as
//! [`manifests::ordered_parts`] says. Values of the file and the objects may reference forge
//! outputs (`${fsx.data.dns_name}`; `$${` writes `${`); a URL's are taken as they are.

use super::{Component, ComponentError, Expansion, Input, kubernetes, manifests};
use crate::schema::{Field, FieldType};
use serde_json::{Map, Value};

/// The component's registration.
pub const COMPONENT: Component = Component {
    name: "k8s_manifest",
    schema: &[
        Field::required("cluster", FieldType::String),
        Field::optional("file", FieldType::File),
        Field::optional("objects", FieldType::List),
        Field::optional("url", FieldType::String),
        Field::optional("sha256", FieldType::String),
    ],
    expand,
};

fn expand(input: &Input) -> Result<Expansion, ComponentError> {
    let cluster_block = input.text("cluster").unwrap_or_default();
    let cluster = match cluster_block.split_once('.').map(|(kind, _)| kind) {
        Some("eks") => input.named_block("cluster", "eks").map(|(a, _)| kubernetes::eks_cluster(a))?,
        Some("gke") => input.named_block("cluster", "gke").map(|(a, _)| kubernetes::gke_cluster(a))?,
        _ => {
            return Err(ComponentError::at(
                "cluster",
                format!("`cluster = \"{cluster_block}\"` names no cluster block"),
                "write `cluster = \"eks.<name>\"` or `cluster = \"gke.<name>\"`: a cluster block of this stack",
            ));
        }
    };
    let mut objects: Vec<Value> = Vec::new();
    if let Some(text) = input.text("file") {
        objects.extend(manifests::documents(&text.replace("$${", "${"), "file")?);
    }
    objects.extend(input.config.get("objects").and_then(Value::as_array).cloned().unwrap_or_default());
    let mut fetched = true;
    if let Some(url) = input.text("url") {
        match manifests::bundle(input, url, input.text("sha256"), "url")? {
            Some(bundle) => objects.extend(bundle),
            None => fetched = false,
        }
    } else if input.config.contains_key("sha256") {
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
