//! `forge kubeconfig FILE [CLUSTER]`: a kubeconfig context for an EKS or GKE cluster of the
//! stack, merged into the user's kubeconfig the way `aws eks update-kubeconfig` and `gcloud
//! container clusters get-credentials` do it — entries named by the cluster's ARN or
//! `gke_<project>_<location>_<name>`, authentication through `aws eks get-token` or
//! `gke-gcloud-auth-plugin`, other contexts untouched.

use super::Session;
use crate::error::{CommandError, Exit};
use crate::state::lock::LockMode;
use crate::state::{ResourceRecord, Status};
use miette::Result;
use serde_json::Value;
use serde_yaml_ng::{Mapping, Value as Yaml};
use std::path::{Path, PathBuf};

/// Runs `forge kubeconfig`.
pub(super) fn run(session: &Session, file: &Path, cluster: Option<&str>, target: Option<&Path>, print: bool) -> Result<Exit> {
    let (stack, _) = session.load(file)?;
    let clusters: Vec<&str> = stack
        .resources
        .iter()
        .filter(|r| CLUSTER_KINDS.contains(&r.kind.as_str()))
        .map(|r| r.address.as_str())
        .collect();
    let address = match cluster {
        Some(wanted) => clusters
            .iter()
            .find(|a| **a == wanted || **a == format!("{wanted}.cluster"))
            .copied()
            .ok_or_else(|| {
                CommandError::new(
                    format!("`{}` has no cluster `{wanted}`", stack.source.name),
                    crate::schema::suggestion(wanted, &clusters),
                )
            })?,
        None => match clusters.as_slice() {
            [one] => one,
            [] => {
                return Err(CommandError::new(
                    format!("`{}` declares no Kubernetes cluster", stack.source.name),
                    "add an `[eks.<name>]` or `[gke.<name>]` block",
                )
                .into());
            }
            many => {
                return Err(CommandError::new(
                    format!("`{}` declares {} clusters", stack.source.name, many.len()),
                    format!("name one: {}", many.iter().map(|a| format!("`{a}`")).collect::<Vec<_>>().join(", ")),
                )
                .into());
            }
        },
    };
    let (_store, _lock, loaded) = session.open_state(&stack.state, &stack.name, &stack.source.name, LockMode::Shared, "kubeconfig")?;
    let record = loaded
        .state
        .resources
        .get(address)
        // forge's own cluster, or an existing one the stack reads.
        .filter(|r| matches!(r.status, Status::Created | Status::Read))
        .ok_or_else(|| {
            CommandError::new(
                format!("`{address}` is not created yet"),
                format!("run `forge up {}` first", file.display()),
            )
        })?;
    let profile = stack.providers.aws.as_ref().and_then(|a| a.profile.as_deref());
    let entries = Entries::of(record, profile)?;
    if print {
        let mut config = empty();
        entries.merge_into(&mut config);
        print!("{}", serde_yaml_ng::to_string(&config).expect("YAML values serialize"));
        return Ok(Exit::Ok);
    }
    let path = target.map_or_else(default_path, Path::to_owned);
    let unreadable = |why: String| {
        CommandError::new(
            format!("cannot read the kubeconfig `{}`: {why}", path.display()),
            "fix or move the file, or write elsewhere with `--kubeconfig PATH`; forge changes nothing in a file it cannot read",
        )
    };
    let mut config = match std::fs::read_to_string(&path) {
        Ok(text) => match serde_yaml_ng::from_str::<Yaml>(&text).map_err(|e| unreadable(e.to_string()))? {
            Yaml::Null => empty(),
            mapping @ Yaml::Mapping(_) => mapping,
            _ => return Err(unreadable("it is not a YAML mapping".into()).into()),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => empty(),
        Err(e) => return Err(CommandError::new(format!("cannot read `{}`: {e}", path.display()), "check its permissions").into()),
    };
    entries.merge_into(&mut config);
    write(&path, &config)?;
    session.printer.info(&format!(
        "Context `{}` for `{address}` is in {} and is now the current context; try `kubectl get nodes`.",
        entries.name,
        path.display()
    ));
    Ok(Exit::Ok)
}

/// The kinds whose clusters get kubeconfig entries.
const CLUSTER_KINDS: &[&str] = &["aws_eks_cluster", "google_container_cluster"];

/// The cluster, user and context entries for one cluster, all named alike (an EKS cluster's
/// ARN, `gke_<project>_<location>_<name>` for GKE, as the clouds' own tools name them).
struct Entries {
    name: String,
    cluster: Yaml,
    user: Yaml,
}

impl Entries {
    fn of(record: &ResourceRecord, profile: Option<&str>) -> Result<Entries> {
        if record.kind == "google_container_cluster" {
            return Self::gke(record);
        }
        let output = |key: &str| record.outputs.get(key).and_then(Value::as_str).map(str::to_owned);
        // arn:aws:eks:<region>:<account>:cluster/<name>: the region the cluster is in.
        let region = output("arn").and_then(|arn| arn.split(':').nth(3).map(str::to_owned));
        let (Some(name), Some(arn), Some(endpoint), Some(ca), Some(region)) = (
            output("name"),
            output("arn"),
            output("endpoint"),
            output("certificate_authority"),
            region,
        ) else {
            return Err(incomplete(record));
        };
        let cluster = yaml(serde_json::json!({ "server": endpoint, "certificate-authority-data": ca }));
        let mut exec = serde_json::json!({
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": "aws",
            "args": ["--region", region, "eks", "get-token", "--cluster-name", name, "--output", "json"],
        });
        if let Some(profile) = profile {
            exec["env"] = serde_json::json!([{ "name": "AWS_PROFILE", "value": profile }]);
        }
        Ok(Entries {
            name: arn,
            cluster,
            user: yaml(serde_json::json!({ "exec": exec })),
        })
    }

    /// A GKE cluster's entries, as `gcloud container clusters get-credentials` writes them.
    fn gke(record: &ResourceRecord) -> Result<Entries> {
        let output = |key: &str| record.outputs.get(key).and_then(Value::as_str).map(str::to_owned);
        // projects/<project>/locations/<location>/clusters/<name>
        let id = output("id").unwrap_or_default();
        let segments: Vec<&str> = id.split('/').collect();
        let (Some(endpoint), Some(ca), [_, project, _, location, _, name]) =
            (output("endpoint"), output("certificate_authority"), segments.as_slice())
        else {
            return Err(incomplete(record));
        };
        let exec = serde_json::json!({
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": "gke-gcloud-auth-plugin",
            "installHint": "Install gke-gcloud-auth-plugin for use with kubectl: `gcloud components install gke-gcloud-auth-plugin`",
            "provideClusterInfo": true,
        });
        Ok(Entries {
            name: format!("gke_{project}_{location}_{name}"),
            cluster: yaml(serde_json::json!({ "server": format!("https://{endpoint}"), "certificate-authority-data": ca })),
            user: yaml(serde_json::json!({ "exec": exec })),
        })
    }

    /// Replaces this cluster's entries (or adds them) and makes its context current.
    fn merge_into(&self, config: &mut Yaml) {
        let map = config.as_mapping_mut().expect("a kubeconfig is a mapping");
        let context = yaml(serde_json::json!({ "cluster": self.name, "user": self.name }));
        for (list, key, value) in [
            ("clusters", "cluster", &self.cluster),
            ("users", "user", &self.user),
            ("contexts", "context", &context),
        ] {
            let entries = map.entry(list.into()).or_insert_with(|| Yaml::Sequence(Vec::new()));
            if !entries.is_sequence() {
                *entries = Yaml::Sequence(Vec::new());
            }
            let seq = entries.as_sequence_mut().expect("made a sequence above");
            seq.retain(|e| e.get("name").and_then(Yaml::as_str) != Some(self.name.as_str()));
            let mut entry = Mapping::new();
            entry.insert("name".into(), self.name.clone().into());
            entry.insert(key.into(), value.clone());
            seq.push(Yaml::Mapping(entry));
        }
        map.insert("current-context".into(), self.name.clone().into());
    }
}

/// The error for a cluster whose recorded outputs lack what a kubeconfig needs.
fn incomplete(record: &ResourceRecord) -> miette::Report {
    CommandError::new(
        format!("the state of `{}` lacks the cluster's endpoint or certificate", record.address),
        "run `forge up` again to read them",
    )
    .into()
}

fn yaml(value: Value) -> Yaml {
    serde_yaml_ng::to_value(value).expect("JSON values are YAML values")
}

fn empty() -> Yaml {
    yaml(serde_json::json!({ "apiVersion": "v1", "kind": "Config", "preferences": {}, "clusters": [], "users": [], "contexts": [] }))
}

/// `$KUBECONFIG`'s first file, else `~/.kube/config` (as kubectl picks).
fn default_path() -> PathBuf {
    if let Some(first) = std::env::var_os("KUBECONFIG").and_then(|k| std::env::split_paths(&k).next()) {
        return first;
    }
    let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_default();
    home.join(".kube").join("config")
}

/// Writes the file whole or not at all (a temporary file renamed over it), readable by its
/// owner only: it names credentials commands.
fn write(path: &Path, config: &Yaml) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let failed = |e: std::io::Error| {
        CommandError::new(
            format!("cannot write the kubeconfig `{}`: {e}", path.display()),
            "check the directory's permissions",
        )
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(failed)?;
    }
    let tmp = path.with_extension("forge-tmp");
    // A leftover from a crash would keep its old permissions: start afresh.
    let _ = std::fs::remove_file(&tmp);
    let text = serde_yaml_ng::to_string(config).expect("YAML values serialize");
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(failed)?;
    file.write_all(text.as_bytes()).and_then(|()| file.sync_all()).map_err(failed)?;
    std::fs::rename(&tmp, path).map_err(failed)?;
    Ok(())
}
