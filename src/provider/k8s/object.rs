//! `k8s_object`: one Kubernetes object in a cluster forge reaches (see the module doc). Created
//! and updated by server-side apply with field manager `forge`; a kind the cluster does not serve
//! yet (a CRD not Established) and an admission webhook not serving yet are waited for, never
//! slept on; a CRD is waited for until Established, a DaemonSet or Deployment until rolled out.
//! The object carries forge's stack, address and token annotations: a resumed create adopts
//! only the object with its own token, and an object someone else made is never taken over.

use super::reach::REACH_TIMEOUT;
use super::{ADDRESS_ANNOTATION, ClusterRef, Connection, FIELD_MANAGER, Identity, STACK_ANNOTATION, TOKEN_ANNOTATION, Target};
use crate::provider::{Cloud, Created, Ctx, Observed, Poll, ProviderError, Resource, timeout, wait_until};
use crate::schema::attributes;
use kube::api::{DeleteParams, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// The `k8s_object` kind.
pub struct K8sObject;

attributes! {
    kind K8sObject, spec "k8s_object", outputs [id = computed planned_id, uid], extra [timeouts];
    struct Config {
        /// `eks/<name>` or `gke/projects/…/clusters/<name>`.
        cluster: String [replace],
        /// The object as written (`apiVersion`, `kind`, `metadata`, …).
        manifest: BTreeMap<String, Value>,
    }
}

const APPLY_TIMEOUT: Duration = Duration::from_secs(10 * 60);
const DELETE_TIMEOUT: Duration = Duration::from_secs(5 * 60);
/// How long an object waits for its cluster to serve its kind (`timeouts = { api = … }`).
const API_TIMEOUT: Duration = Duration::from_secs(2 * 60);

/// A config's cluster, object identity and manifest.
fn parts(ctx: &Ctx, config: &Value) -> Result<(ClusterRef, Identity, Value), ProviderError> {
    let Config { cluster, manifest } = crate::provider::parse(ctx, config)?;
    let manifest = Value::Object(manifest.into_iter().collect());
    let identity = Identity::of(&manifest).map_err(|e| ProviderError::permanent(format!("`{}`: {e}", ctx.address)))?;
    Ok((ClusterRef::parse(&cluster)?, identity, manifest))
}

/// The id: `<cluster>: <apiVersion> <kind> [<namespace>/]<name>`.
fn id_of(cluster: &ClusterRef, identity: &Identity) -> String {
    let place = match &identity.namespace {
        Some(ns) => format!("{ns}/{}", identity.name),
        None => identity.name.clone(),
    };
    format!("{cluster}: {} {} {place}", identity.api_version, identity.kind)
}

/// Reads an id back.
fn parse_id(id: &str) -> Result<(ClusterRef, Identity), ProviderError> {
    let bad = || {
        ProviderError::permanent(format!(
            "`{id}` is not a Kubernetes object id (`<cluster>: <apiVersion> <kind> [<namespace>/]<name>`)"
        ))
    };
    let (cluster, rest) = id.split_once(": ").ok_or_else(bad)?;
    let mut words = rest.split(' ');
    let (Some(api_version), Some(kind), Some(place), None) = (words.next(), words.next(), words.next(), words.next()) else {
        return Err(bad());
    };
    let (namespace, name) = match place.split_once('/') {
        Some((ns, name)) => (Some(ns.to_owned()), name.to_owned()),
        None => (None, place.to_owned()),
    };
    Ok((
        ClusterRef::parse(cluster)?,
        Identity {
            api_version: api_version.into(),
            kind: kind.into(),
            namespace,
            name,
        },
    ))
}

/// How long forge tries the object's cluster's endpoint (`timeouts = { reach = … }`).
fn reach_limit(config: &Value) -> Duration {
    timeout(config, "reach", REACH_TIMEOUT)
}

/// The connection to the cluster, which must exist for a create or update.
async fn reach(cloud: &Cloud, cluster: &ClusterRef, config: &Value) -> Result<Arc<Connection>, ProviderError> {
    super::connect(cloud, cluster, reach_limit(config))
        .await?
        .ok_or_else(|| ProviderError::permanent(format!("cluster `{cluster}` does not exist (any more)")))
}

/// Where the object `identity` names lives in `cluster`; `None` when the cluster is gone or no
/// longer serves its kind (then the object is gone too).
async fn locate(cloud: &Cloud, cluster: &ClusterRef, identity: &Identity, reach: Duration) -> Result<Option<Target>, ProviderError> {
    match super::connect(cloud, cluster, reach).await? {
        Some(connection) => connection.target(identity).await,
        None => Ok(None),
    }
}

/// An object's forge annotations, if it has them: (stack, address, token).
fn marks(obj: &DynamicObject) -> (Option<&str>, Option<&str>, Option<&str>) {
    let get = |key: &str| obj.metadata.annotations.as_ref().and_then(|a| a.get(key)).map(String::as_str);
    (get(STACK_ANNOTATION), get(ADDRESS_ANNOTATION), get(TOKEN_ANNOTATION))
}

/// The manifest with forge's annotations added.
fn marked(ctx: &Ctx, token: &str, manifest: &Value) -> Value {
    let mut manifest = manifest.clone();
    let annotations = &mut manifest["metadata"]["annotations"];
    if !annotations.is_object() {
        *annotations = json!({});
    }
    annotations[STACK_ANNOTATION] = json!(ctx.stack);
    annotations[ADDRESS_ANNOTATION] = json!(ctx.address);
    annotations[TOKEN_ANNOTATION] = json!(token);
    manifest
}

/// The live object, or `None`.
async fn get(target: &Target) -> Result<Option<DynamicObject>, ProviderError> {
    target
        .api
        .get_opt(&target.name)
        .await
        .map_err(|e| super::error(&target.connection, &format!("get {}", target.name), e))
}

/// Server-side applies the manifest (with forge's marks for `token`) once the cluster serves
/// its kind and its webhooks answer, refusing an object forge did not make; then waits for
/// what the kind needs to be usable.
async fn apply(ctx: &Ctx, config: &Value, token: Option<&str>) -> Result<Value, ProviderError> {
    let (cluster, identity, manifest) = parts(ctx, config)?;
    let connection = reach(&ctx.cloud, &cluster, config).await?;
    let limit = timeout(config, if token.is_some() { "create" } else { "update" }, APPLY_TIMEOUT);
    let serve_limit = timeout(config, "api", API_TIMEOUT);
    let asked = std::time::Instant::now();
    let label = identity.label();
    let applied = wait_until(ctx, limit, || async {
        let Some(target) = connection.target(&identity).await? else {
            if asked.elapsed() >= serve_limit {
                return Ok(Poll::Failed(not_served(&cluster, &identity, serve_limit)));
            }
            return Ok(Poll::Pending(format!(
                "waiting for the cluster to serve {} {} (up to {}s)",
                identity.api_version,
                identity.kind,
                serve_limit.as_secs()
            )));
        };
        let live = get(&target).await?;
        let token = match (&live, token) {
            (Some(obj), _) => {
                let (stack, address, live_token) = marks(obj);
                let ours = stack == Some(ctx.stack.as_str()) && address == Some(ctx.address.as_str());
                match (ours, live_token, token) {
                    (true, Some(t), Some(mine)) if t == mine => mine.to_owned(),
                    (true, Some(t), None) => t.to_owned(),
                    _ => {
                        return Ok(Poll::Failed(format!(
                            "{label} already exists in cluster `{cluster}` and forge did not make it for `{}`; delete it, or leave it out of the stack",
                            ctx.address
                        )));
                    }
                }
            }
            (None, Some(mine)) => mine.to_owned(),
            (None, None) => uuid::Uuid::new_v4().to_string(),
        };
        let body = marked(ctx, &token, &manifest);
        let params = PatchParams::apply(FIELD_MANAGER).force();
        match target.api.patch(&target.name, &params, &Patch::Apply(&body)).await {
            Ok(obj) => Ok(Poll::Done(obj)),
            Err(e) if super::is_webhook_not_ready(&e) => Ok(Poll::Pending("waiting for its admission webhook".into())),
            Err(e) => Err(super::error(&connection, &format!("apply {label}"), e)),
        }
    })
    .await?;
    settle(ctx, &connection, &identity, limit).await?;
    Ok(json!({
        "id": id_of(&cluster, &identity),
        "uid": applied.metadata.uid,
    }))
}

/// Server-side applies the manifest as a dry run (`dryRun=All`): the API server's own
/// validation and admission, nothing stored. `None` while the cluster or its kind does not
/// exist yet, the object's namespace is still to be made, or its webhook does not answer.
async fn dry_run(ctx: &Ctx, config: &Value) -> Result<Option<String>, ProviderError> {
    let (cluster, identity, manifest) = parts(ctx, config)?;
    let Some(target) = locate(&ctx.cloud, &cluster, &identity, reach_limit(config)).await? else {
        return Ok(None);
    };
    let body = marked(ctx, "dry-run", &manifest);
    let params = PatchParams::apply(FIELD_MANAGER).force().dry_run();
    match target.api.patch(&target.name, &params, &Patch::Apply(&body)).await {
        Ok(_) => Ok(None),
        Err(e) if super::is_webhook_not_ready(&e) || super::is_not_found(&e) => Ok(None),
        Err(kube::Error::Api(status)) if matches!(status.code, 400 | 403 | 422) => Ok(Some(status.message)),
        Err(e) => Err(super::error(&target.connection, &format!("dry-run {}", identity.label()), e)),
    }
}

/// Waits until the object is usable: a CRD Established (so its kind is served), a DaemonSet
/// or Deployment rolled out on the nodes it targets.
async fn settle(ctx: &Ctx, connection: &Arc<Connection>, identity: &Identity, limit: Duration) -> Result<(), ProviderError> {
    let check: fn(&Value) -> Option<String> = match identity.kind.as_str() {
        "CustomResourceDefinition" => established,
        "DaemonSet" | "Deployment" => rolled_out,
        _ => return Ok(()),
    };
    let Some(target) = connection.target(identity).await? else {
        return Ok(());
    };
    wait_until(ctx, limit, || async {
        let Some(obj) = get(&target).await? else {
            return Ok(Poll::Failed(format!("{} was deleted while forge waited for it", identity.label())));
        };
        let obj = serde_json::to_value(&obj).unwrap_or_default();
        Ok(match check(&obj) {
            None => Poll::Done(()),
            Some(waiting) => Poll::Pending(waiting),
        })
    })
    .await
}

/// The error of an object whose kind its cluster did not serve within `waited`: the
/// group/version, and what usually leaves it unserved.
fn not_served(cluster: &ClusterRef, identity: &Identity, waited: Duration) -> String {
    let group = identity.api_version.rsplit_once('/').map_or("", |(g, _)| g);
    let cause = match group {
        "networking.gke.io" => {
            "GKE serves `networking.gke.io` only on clusters with multi-networking enabled (`multi_networking = true` on the cluster; a `gke` block's GPUDirect pools turn it on), and only once it is ready"
        }
        _ => {
            "no CustomResourceDefinition provides it: the operator that installs it is missing, or its CRD is not in this stack (put it there and forge waits for it to be Established)"
        }
    };
    format!(
        "cluster `{cluster}` does not serve {} (kind {}) after {}s, so {} cannot be applied: {cause}. Raise the wait with `api_timeout` in the cluster block's `kubernetes` table (`timeouts = {{ api = \"10m\" }}` on a `k8s_object`)",
        identity.api_version,
        identity.kind,
        waited.as_secs(),
        identity.label()
    )
}

/// `None` once a CRD is Established, else what it waits for.
fn established(crd: &Value) -> Option<String> {
    let conditions = crd.pointer("/status/conditions").and_then(Value::as_array);
    let ok = conditions
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Established" && c["status"] == "True");
    (!ok).then(|| "waiting until Established".to_owned())
}

/// `None` once a DaemonSet or Deployment has rolled out its current generation, else where it is.
fn rolled_out(obj: &Value) -> Option<String> {
    let number = |path: &str| obj.pointer(path).and_then(Value::as_i64).unwrap_or(0);
    if number("/status/observedGeneration") < number("/metadata/generation") {
        return Some("waiting for its controller".into());
    }
    let (want, updated, available) = match obj["kind"].as_str() {
        Some("DaemonSet") => (
            number("/status/desiredNumberScheduled"),
            number("/status/updatedNumberScheduled"),
            number("/status/numberAvailable"),
        ),
        _ => (
            obj.pointer("/spec/replicas").and_then(Value::as_i64).unwrap_or(1),
            number("/status/updatedReplicas"),
            number("/status/availableReplicas"),
        ),
    };
    (updated < want || available < want).then(|| format!("rolling out: {available} of {want} available"))
}

/// A live object as drift compares it: without status and the fields the server keeps for
/// itself (uid, versions, managed fields, forge's own marks).
fn comparable_live(obj: &DynamicObject) -> Value {
    let mut value = serde_json::to_value(obj).unwrap_or_default();
    if let Some(map) = value.as_object_mut() {
        map.remove("status");
    }
    if let Some(meta) = value.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.retain(|k, _| matches!(k.as_str(), "name" | "namespace" | "labels" | "annotations"));
        if let Some(annotations) = meta.get_mut("annotations").and_then(Value::as_object_mut) {
            annotations.retain(|k, _| !k.starts_with("forge.dev/"));
        }
    }
    value
}

/// The planned `id`: the cluster and the object's identity, known when both are; else as
/// recorded.
fn planned_id(config: &Value, prior: Option<&Value>) -> Value {
    config
        .get("cluster")
        .and_then(Value::as_str)
        .and_then(|c| ClusterRef::parse(c).ok())
        .zip(config.get("manifest").and_then(|m| Identity::of(m).ok()))
        .map_or_else(|| crate::provider::prior_output(prior, "id"), |(c, i)| json!(id_of(&c, &i)))
}

impl Resource for K8sObject {
    fn forces_replacement(&self, attribute: &str, before: Option<&Value>, after: Option<&Value>) -> bool {
        if attribute != "manifest" {
            return SPEC.replaces(attribute);
        }
        // Another name, namespace or kind is another object; the group's version is not.
        let identity = |v: Option<&Value>| {
            v.and_then(|m| Identity::of(m).ok()).map(|i| {
                let group = i.api_version.rsplit_once('/').map(|(g, _)| g.to_owned()).unwrap_or_default();
                (group, i.kind, i.namespace, i.name)
            })
        };
        identity(before) != identity(after)
    }

    async fn create(&self, ctx: &Ctx, token: &str, config: &Value) -> Result<Created, ProviderError> {
        let outputs = apply(ctx, config, Some(token)).await?;
        Ok(Created {
            id: outputs["id"].as_str().unwrap_or_default().to_owned(),
            outputs,
        })
    }

    async fn read(&self, cloud: &Cloud, stack: &str, ids: &[String]) -> Result<Vec<Observed>, ProviderError> {
        let mut seen = Vec::new();
        for id in ids {
            let (cluster, identity) = parse_id(id)?;
            let Some(target) = locate(cloud, &cluster, &identity, REACH_TIMEOUT).await? else {
                continue;
            };
            if let Some(obj) = get(&target).await? {
                let (tagged_stack, address, _) = marks(&obj);
                seen.push(Observed {
                    id: id.clone(),
                    address: address.filter(|_| tagged_stack == Some(stack)).map(str::to_owned),
                    attributes: json!({ "manifest": comparable_live(&obj) }),
                });
            }
        }
        Ok(seen)
    }

    async fn find(&self, ctx: &Ctx, token: &str, config: &Value) -> Result<Option<String>, ProviderError> {
        let (cluster, identity, _) = parts(ctx, config)?;
        let Some(target) = locate(&ctx.cloud, &cluster, &identity, reach_limit(config)).await? else {
            return Ok(None);
        };
        let mine = get(&target)
            .await?
            .is_some_and(|obj| marks(&obj) == (Some(ctx.stack.as_str()), Some(ctx.address.as_str()), Some(token)));
        Ok(mine.then(|| id_of(&cluster, &identity)))
    }

    async fn update(&self, ctx: &Ctx, _id: &str, _old: &Value, new: &Value) -> Result<Value, ProviderError> {
        apply(ctx, new, None).await
    }

    async fn delete(&self, ctx: &Ctx, id: &str, config: &Value) -> Result<(), ProviderError> {
        let (cluster, identity) = parse_id(id)?;
        let Some(target) = locate(&ctx.cloud, &cluster, &identity, reach_limit(config)).await? else {
            return Ok(());
        };
        match target.api.delete(&target.name, &DeleteParams::background()).await {
            Err(e) if super::is_not_found(&e) => return Ok(()),
            Err(e) => return Err(super::error(&target.connection, &format!("delete {}", identity.label()), e)),
            Ok(_) => {}
        }
        crate::provider::wait_gone(ctx, timeout(config, "delete", DELETE_TIMEOUT), || async {
            Ok(get(&target).await?.map(|_| "deleting".to_owned()))
        })
        .await
    }

    async fn dry_run(&self, ctx: &Ctx, config: &Value) -> Result<Option<String>, ProviderError> {
        dry_run(ctx, config).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_read_back() {
        let identity = Identity {
            api_version: "apps/v1".into(),
            kind: "DaemonSet".into(),
            namespace: Some("kube-system".into()),
            name: "nvidia-device-plugin".into(),
        };
        let cluster = ClusterRef::Gke("projects/p/locations/us-central1/clusters/a3".into());
        let id = id_of(&cluster, &identity);
        assert_eq!(
            id,
            "gke/projects/p/locations/us-central1/clusters/a3: apps/v1 DaemonSet kube-system/nvidia-device-plugin"
        );
        assert_eq!(parse_id(&id).unwrap(), (cluster, identity));
        assert!(parse_id("eks/x: v1 Namespace").is_err());
    }

    #[test]
    fn rollouts_count_the_current_generation_only() {
        let ds = |generation: i64, observed: i64, available: i64| {
            json!({ "kind": "DaemonSet", "metadata": { "generation": generation },
                    "status": { "observedGeneration": observed, "desiredNumberScheduled": 2, "updatedNumberScheduled": available, "numberAvailable": available } })
        };
        assert_eq!(rolled_out(&ds(2, 2, 2)), None);
        assert!(rolled_out(&ds(2, 1, 2)).is_some());
        assert_eq!(rolled_out(&ds(1, 1, 1)).as_deref(), Some("rolling out: 1 of 2 available"));
    }

    #[test]
    fn only_identity_changes_replace() {
        let m = |name: &str, version: &str| json!({ "apiVersion": version, "kind": "Network", "metadata": { "name": name } });
        let kind = K8sObject;
        assert!(!kind.forces_replacement(
            "manifest",
            Some(&m("vpc1", "networking.gke.io/v1")),
            Some(&m("vpc1", "networking.gke.io/v1beta1"))
        ));
        assert!(kind.forces_replacement(
            "manifest",
            Some(&m("vpc1", "networking.gke.io/v1")),
            Some(&m("vpc2", "networking.gke.io/v1"))
        ));
    }
}
