//! An `eks` block's `access` tables: IAM principals given access to the cluster, each an EKS
//! access entry (`aws_eks_access_entry`) with its access policies — on a cluster forge makes
//! or on an existing one.
//!
//! ```toml
//! [eks.train.access.ci]
//! principal = "arn:aws:iam::111122223333:role/ci-deploy"
//! policies = ["AmazonEKSClusterAdminPolicy"]   # EKS access policies, by name or ARN
//! # namespaces = ["team-a"]                     # the policies' scope; default: the cluster
//! # groups = ["ops"]                            # Kubernetes groups, for your own RBAC
//! # username = "ci"                             # default: EKS's (a role's session ARN)
//! ```

use super::ComponentError;
use crate::schema::block;
use serde_json::{Map, Value, json};

block! {
    /// An `access.<name>` table of an `eks` block.
    struct AccessBlock {
        principal: String,
        policies: Option<Vec<String>>,
        namespaces: Option<Vec<String>>,
        groups: Option<Vec<String>>,
        username: Option<String>,
    }
}

/// Where EKS's access policies live: `<prefix><name>`.
const POLICY_PREFIX: &str = "arn:aws:eks::aws:cluster-access-policy/";

/// The access entries of `access` (name → table) on the cluster `cluster_name` (a reference),
/// as `(local name, config)` of `aws_eks_access_entry` parts; `mode` is the authentication
/// mode of a cluster forge makes (`None`: the cluster's own, which EKS checks).
pub fn entries(
    access: &Map<String, Value>,
    cluster_name: &Value,
    tags: &Value,
    mode: Option<&str>,
) -> Result<Vec<(String, Value)>, ComponentError> {
    if let (Some("CONFIG_MAP"), Some(name)) = (mode, access.keys().next()) {
        return Err(ComponentError::at(
            format!("access.{name}"),
            "access entries need a cluster whose `authentication_mode` is `API` or `API_AND_CONFIG_MAP`, and this one is `CONFIG_MAP`",
            "set `authentication_mode = \"API_AND_CONFIG_MAP\"` (the default), or grant access in the `aws-auth` ConfigMap instead",
        ));
    }
    let mut entries = Vec::new();
    for (name, body) in access {
        let at = format!("access.{name}");
        let example = "`[eks.<name>.access.ci]` with `principal = \"arn:aws:iam::…:role/…\"` and `policies = [\"AmazonEKSViewPolicy\"]`";
        let entry: AccessBlock = super::read(body, &at, &format!("access entry `{name}`"), example)?;
        if !is_principal(&entry.principal) {
            return Err(ComponentError::at(
                format!("{at}.principal"),
                format!("`{}` is not an IAM role or user ARN", entry.principal),
                "write `principal = \"arn:aws:iam::<account>:role/<name>\"` (or `:user/<name>`)",
            ));
        }
        let namespaces = entry.namespaces.unwrap_or_default();
        let policies: Vec<Value> = entry
            .policies
            .unwrap_or_default()
            .iter()
            .map(|p| {
                let arn = if p.starts_with("arn:") {
                    p.clone()
                } else {
                    format!("{POLICY_PREFIX}{p}")
                };
                json!({ "arn": arn, "namespaces": namespaces })
            })
            .collect();
        if policies.is_empty() && !namespaces.is_empty() {
            return Err(ComponentError::at(
                format!("{at}.namespaces"),
                "`namespaces` scopes the entry's `policies`, and it has none",
                "add `policies = [\"AmazonEKSEditPolicy\"]`, or remove `namespaces`",
            ));
        }
        let mut config = json!({
            "cluster_name": cluster_name,
            "principal_arn": entry.principal,
            "kubernetes_groups": entry.groups.unwrap_or_default(),
            "policies": policies,
            "tags": tags,
        });
        if let Some(username) = entry.username {
            config["username"] = json!(username);
        }
        entries.push((format!("access.{name}"), config));
    }
    Ok(entries)
}

/// Whether `arn` names an IAM role or user (`arn:<partition>:iam::<account>:role/…`).
fn is_principal(arn: &str) -> bool {
    let parts: Vec<&str> = arn.splitn(6, ':').collect();
    matches!(parts[..], ["arn", partition, "iam", "", account, resource]
        if partition.starts_with("aws")
            && account.len() == 12
            && account.bytes().all(|b| b.is_ascii_digit())
            && (resource.starts_with("role/") || resource.starts_with("user/")))
        || arn.starts_with("${")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(access: Value, mode: Option<&str>) -> Result<Vec<(String, Value)>, String> {
        entries(access.as_object().unwrap(), &json!("${eks.x.cluster.name}"), &json!({}), mode).map_err(|e| e.message)
    }

    #[test]
    fn policies_by_name_become_arns_scoped_to_the_namespaces() {
        let made = run(
            json!({ "ci": { "principal": "arn:aws:iam::111122223333:role/ci/deploy", "policies": ["AmazonEKSEditPolicy"], "namespaces": ["team-a"] } }),
            None,
        )
        .unwrap();
        assert_eq!(made[0].0, "access.ci");
        assert_eq!(
            made[0].1["policies"],
            json!([{ "arn": "arn:aws:eks::aws:cluster-access-policy/AmazonEKSEditPolicy", "namespaces": ["team-a"] }])
        );
    }

    #[test]
    fn refuses_what_eks_would() {
        let ci = json!({ "ci": { "principal": "arn:aws:iam::111122223333:role/ci", "policies": ["AmazonEKSViewPolicy"] } });
        assert!(run(ci.clone(), Some("CONFIG_MAP")).unwrap_err().contains("`CONFIG_MAP`"));
        assert!(run(ci, Some("API")).is_ok());
        assert!(
            run(json!({ "ci": { "principal": "ci-role" } }), None)
                .unwrap_err()
                .contains("not an IAM role or user ARN")
        );
        assert!(
            run(
                json!({ "ci": { "principal": "arn:aws:iam::111122223333:role/ci", "namespaces": ["a"] } }),
                None
            )
            .unwrap_err()
            .contains("has none")
        );
        assert!(
            run(
                json!({ "ci": { "principal": "arn:aws:iam::111122223333:role/ci", "policy": [] } }),
                None
            )
            .is_err()
        );
    }
}
