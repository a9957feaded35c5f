"""A mirror of the release hosts that forge fetches Kubernetes bundles from, as a site without a
way out keeps one (forge's FORGE_BUNDLE_MIRROR): GET /_forge/bundles/<host>/<path> answers what
https://<host>/<path> would. The upstream bundles are not copied here: each is written by this
module with the objects forge and the emulated API server care about (the same kinds, names,
namespaces, API groups and images as the release), and nothing else. POST /_forge/bundles
{"path", "text"} serves a text of a test's own at a path (a bundle that changed upstream, a
rendered training operator).
"""

import re
import threading

import yaml

OVERRIDES = {}  # "<host>/<path>" -> text
LOCK = threading.Lock()


def crd(group, kind, plural, version, namespaced):
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "names": {"kind": kind, "plural": plural, "singular": kind.lower(), "listKind": f"{kind}List"},
            "scope": "Namespaced" if namespaced else "Cluster",
            "versions": [{"name": version, "served": True, "storage": True,
                          "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                          "subresources": {"status": {}}}],
        },
    }


def controller(name, namespace, image, args):
    """A controller's ServiceAccount, ClusterRole, binding and Deployment."""
    labels = {"app.kubernetes.io/name": name}
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": namespace}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": name},
         "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["get", "list", "watch", "update", "patch"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": name},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
         "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": namespace, "labels": labels},
         "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                  "template": {"metadata": {"labels": labels},
                               "spec": {"serviceAccountName": name,
                                        "containers": [{"name": name, "image": image, "args": args}]}}}},
    ]


def kueue(version):
    group = "kueue.x-k8s.io"
    objects = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kueue-system"}}]
    objects += [crd(group, kind, plural, "v1beta1", namespaced) for kind, plural, namespaced in (
        ("ResourceFlavor", "resourceflavors", False), ("ClusterQueue", "clusterqueues", False),
        ("LocalQueue", "localqueues", True), ("Workload", "workloads", True))]
    # The manager's configuration, as the release keeps it: a YAML text in a ConfigMap, whose
    # `${…}`-looking text forge must leave as it is.
    objects.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kueue-manager-config", "namespace": "kueue-system"},
                    "data": {"controller_manager_config.yaml": "apiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\n"
                             "namespace: kueue-system\n# the release notes write ${NAMESPACE} here\n"}})
    objects += controller("kueue-controller-manager", "kueue-system", f"registry.k8s.io/kueue/kueue:{version}",
                          ["--config=/controller_manager_config.yaml", "--zap-log-level=2"])
    objects.append({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "kueue-webhook-service", "namespace": "kueue-system"},
                    "spec": {"ports": [{"port": 443, "targetPort": 9443}], "selector": {"app.kubernetes.io/name": "kueue-controller-manager"}}})
    objects.append({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
                    "metadata": {"name": "kueue-validating-webhook-configuration"}, "webhooks": []})
    return objects


def mpi_operator(version):
    objects = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "mpi-operator"}},
               crd("kubeflow.org", "MPIJob", "mpijobs", "v2beta1", True)]
    objects += controller("mpi-operator", "mpi-operator", f"mpioperator/mpi-operator:{version.lstrip('v')}",
                          ["-alsologtostderr", "--lock-namespace=mpi-operator"])
    return objects


RELEASES = [
    (re.compile(r"github\.com/kubernetes-sigs/kueue/releases/download/(v[^/]+)/manifests\.yaml"), kueue),
    (re.compile(r"raw\.githubusercontent\.com/kubeflow/mpi-operator/(v[^/]+)/deploy/v2beta1/mpi-operator\.yaml"), mpi_operator),
]


def serve(path):
    """The text at `<host>/<path>`, or None when the mirror has nothing there."""
    with LOCK:
        if path in OVERRIDES:
            return OVERRIDES[path]
    for pattern, make in RELEASES:
        match = pattern.fullmatch(path)
        if match:
            return yaml.safe_dump_all(make(match.group(1)), sort_keys=False)
    return None


def put(path, text):
    with LOCK:
        OVERRIDES[path] = text
