//! `k8s_teardown`: what Kubernetes made in the cloud — load balancers for Services of type
//! LoadBalancer and for Ingresses, volumes for dynamically provisioned claims — deleted before
//! the cluster's nodes go, as eksctl does, so that the VPC and subnets delete cleanly; whoever
//! made those objects (forge or `kubectl`). Nothing happens on create: the resource marks the
//! point in the graph (after the node groups and add-ons) where a destroy starts.

use super::{ClusterRef, Connection};
use crate::provider::{Cloud, Created, Ctx, Observed, ProviderError, Resource, timeout};
use crate::schema::attributes;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Service};
use k8s_openapi::api::networking::v1::Ingress;
use kube::api::{Api, DeleteParams, ListParams};
use serde_json::{Value, json};
use std::time::Duration;

/// The `k8s_teardown` kind.
pub struct K8sTeardown;

attributes! {
    kind K8sTeardown, spec "k8s_teardown", outputs [id = attribute cluster], extra [timeouts];
    struct Config {
        /// `eks/<name>` or `gke/projects/…/clusters/<name>`.
        cluster: String [replace],
    }
}

const DELETE_TIMEOUT: Duration = Duration::from_secs(15 * 60);

/// The objects whose cloud resources must go first: (kind, namespace, name).
async fn leftovers(connection: &Connection) -> Result<Vec<(&'static str, String, String)>, ProviderError> {
    let client = connection.client.clone();
    let place = |m: &kube::api::ObjectMeta| (m.namespace.clone().unwrap_or_default(), m.name.clone().unwrap_or_default());
    let mut found = Vec::new();
    let services: Api<Service> = Api::all(client.clone());
    for s in services
        .list(&ListParams::default())
        .await
        .map_err(|e| super::error(connection, "list services", e))?
    {
        if s.spec.as_ref().and_then(|spec| spec.type_.as_deref()) == Some("LoadBalancer") {
            let (ns, name) = place(&s.metadata);
            found.push(("Service", ns, name));
        }
    }
    let ingresses: Api<Ingress> = Api::all(client.clone());
    for i in ingresses
        .list(&ListParams::default())
        .await
        .map_err(|e| super::error(connection, "list ingresses", e))?
    {
        let (ns, name) = place(&i.metadata);
        found.push(("Ingress", ns, name));
    }
    let claims: Api<PersistentVolumeClaim> = Api::all(client);
    for c in claims
        .list(&ListParams::default())
        .await
        .map_err(|e| super::error(connection, "list claims", e))?
    {
        // A claim with a storage class was provisioned dynamically: its volume is the cloud's.
        let class = c.spec.as_ref().and_then(|s| s.storage_class_name.as_deref()).unwrap_or_default();
        if !class.is_empty() {
            let (ns, name) = place(&c.metadata);
            found.push(("PersistentVolumeClaim", ns, name));
        }
    }
    Ok(found)
}

/// Deletes one leftover (gone already is fine).
async fn delete_one(connection: &Connection, kind: &str, namespace: &str, name: &str) -> Result<(), ProviderError> {
    let client = connection.client.clone();
    let params = DeleteParams::background();
    let result = match kind {
        "Service" => Api::<Service>::namespaced(client, namespace)
            .delete(name, &params)
            .await
            .map(|_| ()),
        "Ingress" => Api::<Ingress>::namespaced(client, namespace)
            .delete(name, &params)
            .await
            .map(|_| ()),
        _ => Api::<PersistentVolumeClaim>::namespaced(client, namespace)
            .delete(name, &params)
            .await
            .map(|_| ()),
    };
    match result {
        Err(e) if !super::is_not_found(&e) => Err(super::error(connection, &format!("delete {kind} {namespace}/{name}"), e)),
        _ => Ok(()),
    }
}

impl Resource for K8sTeardown {
    async fn create(&self, ctx: &Ctx, _token: &str, config: &Value) -> Result<Created, ProviderError> {
        let Config { cluster } = crate::provider::parse(ctx, config)?;
        ClusterRef::parse(&cluster)?;
        Ok(Created {
            id: cluster.clone(),
            outputs: json!({ "id": cluster }),
        })
    }

    async fn read(&self, cloud: &Cloud, _stack: &str, ids: &[String]) -> Result<Vec<Observed>, ProviderError> {
        let mut live = Vec::new();
        for id in ids {
            if super::access::exists(cloud, &ClusterRef::parse(id)?).await? {
                live.push(id.clone());
            }
        }
        Ok(Observed::existing(live))
    }

    async fn find(&self, _ctx: &Ctx, _token: &str, _config: &Value) -> Result<Option<String>, ProviderError> {
        // Nothing in the cloud is made: a resumed create simply runs again.
        Ok(None)
    }

    async fn update(&self, _ctx: &Ctx, id: &str, _old: &Value, _new: &Value) -> Result<Value, ProviderError> {
        Ok(json!({ "id": id }))
    }

    async fn delete(&self, ctx: &Ctx, id: &str, config: &Value) -> Result<(), ProviderError> {
        let cluster = ClusterRef::parse(id)?;
        let Some(connection) = super::connect(&ctx.cloud, &cluster, super::reach::REACH_TIMEOUT).await? else {
            return Ok(());
        };
        let found = leftovers(&connection).await?;
        for (kind, namespace, name) in &found {
            delete_one(&connection, kind, namespace, name).await?;
        }
        crate::provider::wait_until(ctx, timeout(config, "delete", DELETE_TIMEOUT), || async {
            let left = leftovers(&connection).await?;
            Ok(match left.first() {
                None => crate::provider::Poll::Done(()),
                Some((kind, ns, name)) => {
                    crate::provider::Poll::Pending(format!("waiting for {kind} {ns}/{name} and {} more to go", left.len() - 1))
                }
            })
        })
        .await
    }
}
