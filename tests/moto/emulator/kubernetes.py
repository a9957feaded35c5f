"""A Kubernetes API server for the emulated clusters (EKS, GKE), enough for forge's in-cluster
engine and the machine's kubectl:
  * one server per cluster (`serve(key)`), on its own port, over TLS with the cluster's own CA
    (an EC P-256 CA and a server certificate for 127.0.0.1 and localhost); any bearer token is
    accepted and each request is logged with it (`requests(key)`); `set_reach(key, mode)` makes
    the endpoint refuse connections, or answer 401 or 403 to everything;
  * discovery: /version, /api, /apis, /api/v1, /apis/{group}/{version} (namespaced, verbs,
    shortNames), the built-in kinds forge applies (KINDS, as Kubernetes 1.33 serves them, DRA's
    resource.k8s.io/v1beta1 among them), the kinds the cloud serves besides as it sets them
    (`set_kinds(key, kinds)`: GKE's multi-networking ones while the cluster has it on) and the
    custom resources of every CRD once it is Established;
  * get, list (labelSelector `k=v,k2=v2`, `k`, `!k`), create (POST: 409 AlreadyExists), server-side
    apply (PATCH application/apply-patch+yaml with fieldManager and force: creates when absent,
    keeps managedFields per manager, answers 409 Conflict naming the fields another manager owns
    with another value, unless `force`), merge patch, delete (404 NotFound), real `Status` bodies;
  * CRDs: Established CRD_SECONDS after they are made; until then their resources are 404 (and
    absent from discovery); a webhook that is not ready for a group (`webhook_down(key, group,
    seconds)`) answers 500 "failed calling webhook" to writes of its resources, as an API server
    whose admission webhook has no endpoints yet;
  * status that becomes ready: a DaemonSet is scheduled on the Nodes its nodeSelector, required node affinity and
    tolerations allow and ready after ROLLOUT_SECONDS; a Deployment's replicas are ready after
    ROLLOUT_SECONDS; a PersistentVolumeClaim naming a PersistentVolume (`volumeName`) binds to it;
  * Nodes, made by the cloud's node groups (`set_nodes(key, nodes)`), whose allocatable gains a
    device once a device plugin DaemonSet runs on them (DEVICE_PLUGINS: by image).
"""

import copy
import datetime
import ipaddress
import json
import re
import ssl
import tempfile
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote_plus

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

CRD_SECONDS = 0.5
ROLLOUT_SECONDS = 0.5

# (group, version, plural, kind, namespaced, shortNames)
KINDS = [
    ("", "v1", "namespaces", "Namespace", False, ["ns"]),
    ("", "v1", "nodes", "Node", False, ["no"]),
    ("", "v1", "configmaps", "ConfigMap", True, ["cm"]),
    ("", "v1", "secrets", "Secret", True, []),
    ("", "v1", "serviceaccounts", "ServiceAccount", True, ["sa"]),
    ("", "v1", "services", "Service", True, ["svc"]),
    ("", "v1", "persistentvolumes", "PersistentVolume", False, ["pv"]),
    ("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True, ["pvc"]),
    ("", "v1", "pods", "Pod", True, ["po"]),
    ("apps", "v1", "daemonsets", "DaemonSet", True, ["ds"]),
    ("apps", "v1", "deployments", "Deployment", True, ["deploy"]),
    ("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False, []),
    ("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False, []),
    ("rbac.authorization.k8s.io", "v1", "roles", "Role", True, []),
    ("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", True, []),
    ("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False, ["crd", "crds"]),
    ("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False, ["pc"]),
    ("storage.k8s.io", "v1", "storageclasses", "StorageClass", False, ["sc"]),
    ("networking.k8s.io", "v1", "ingresses", "Ingress", True, ["ing"]),
    ("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations", "ValidatingWebhookConfiguration", False, []),
    ("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations", "MutatingWebhookConfiguration", False, []),
    # Dynamic Resource Allocation, as Kubernetes 1.33 serves it.
    ("resource.k8s.io", "v1beta1", "deviceclasses", "DeviceClass", False, []),
    ("resource.k8s.io", "v1beta1", "resourceclaimtemplates", "ResourceClaimTemplate", True, []),
    ("resource.k8s.io", "v1beta1", "resourceclaims", "ResourceClaim", True, []),
    ("resource.k8s.io", "v1beta1", "resourceslices", "ResourceSlice", False, []),
]
# The groups of KINDS: the API server's own, which no admission webhook guards.
BUILT_IN_GROUPS = {group for group, *_ in KINDS if group}
VERBS = ["create", "delete", "get", "list", "patch", "update"]
# What metadata.name may be: a lowercase RFC 1123 subdomain.
NAME = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?")
# A device plugin's image repository (its last path segment) -> the extended resource it
# advertises and the node label that tells how many devices a node has.
DEVICE_PLUGINS = [
    ("k8s-device-plugin", "nvidia.com/gpu", "forge.emulator/gpus"),
    ("aws-efa-k8s-device-plugin", "vpc.amazonaws.com/efa", "forge.emulator/efa"),
    ("neuron-device-plugin", "aws.amazon.com/neuron", "forge.emulator/neuron"),
]


def repository(image):
    """`nvcr.io/nvidia/k8s-device-plugin:v0.20.0` -> `k8s-device-plugin`."""
    return image.rsplit("/", 1)[-1].split("@")[0].split(":")[0]


def matches(labels, requirement):
    """One node selector requirement (In, NotIn, Exists, DoesNotExist) against a node's labels."""
    key, operator, values = requirement.get("key"), requirement.get("operator"), requirement.get("values") or []
    if operator == "In":
        return labels.get(key) in values
    if operator == "NotIn":
        return labels.get(key) not in values
    if operator == "Exists":
        return key in labels
    if operator == "DoesNotExist":
        return key not in labels
    return False


def affinity_allows(labels, pod_spec):
    """The pod's required node affinity: any term whose expressions all match."""
    required = (((pod_spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    terms = required.get("nodeSelectorTerms")
    if not terms:
        return True
    return any(all(matches(labels, r) for r in term.get("matchExpressions") or []) for term in terms)


def now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class ApiError(Exception):
    """A Kubernetes `Status` failure."""

    def __init__(self, code, reason, message, details=None):
        super().__init__(message)
        self.code, self.reason, self.message, self.details = code, reason, message, details

    def body(self):
        status = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": self.message,
                  "reason": self.reason, "code": self.code}
        if self.details:
            status["details"] = self.details
        return status


def not_found(plural, group, name):
    resource = f"{plural}.{group}" if group else plural
    return ApiError(404, "NotFound", f'{resource} "{name}" not found', {"name": name, "group": group, "kind": plural})


def defaults(kind, obj):
    """What a real API server fills into a workload it stores, as drift checks meet it."""
    if kind not in ("DaemonSet", "Deployment"):
        return
    spec = obj.setdefault("spec", {})
    spec.setdefault("revisionHistoryLimit", 10)
    if kind == "Deployment":
        spec.setdefault("replicas", 1)
    pod = spec.setdefault("template", {}).setdefault("spec", {})
    for key, value in (("restartPolicy", "Always"), ("dnsPolicy", "ClusterFirst"), ("schedulerName", "default-scheduler"),
                       ("terminationGracePeriodSeconds", 30), ("securityContext", {})):
        pod.setdefault(key, value)
    for container in pod.get("initContainers", []) + pod.get("containers", []):
        image = container.get("image", "")
        container.setdefault("imagePullPolicy", "Always" if image.endswith(":latest") or ":" not in image.rsplit("/", 1)[-1] else "IfNotPresent")
        container.setdefault("terminationMessagePath", "/dev/termination-log")
        container.setdefault("terminationMessagePolicy", "File")
        container.setdefault("resources", {})


def leaves(value, prefix=()):
    """The leaf paths of an object's fields (lists are atomic), as managed fields track them."""
    if isinstance(value, dict) and value:
        for key, inner in value.items():
            yield from leaves(inner, prefix + (key,))
    else:
        yield prefix, value


def lookup(obj, path):
    for key in path:
        if not isinstance(obj, dict) or key not in obj:
            return None
        obj = obj[key]
    return obj


def merge(target, patch):
    """JSON merge patch (RFC 7386), also how an apply's fields land on the live object."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            merge(target[key], value)
        else:
            target[key] = copy.deepcopy(value)
    return target


def selected(labels, selector):
    for term in filter(None, (selector or "").split(",")):
        if term.startswith("!"):
            if term[1:] in labels:
                return False
        elif "=" in term:
            key, value = term.replace("==", "=").split("=", 1)
            if key.endswith("!"):
                if labels.get(key[:-1]) == value:
                    return False
            elif labels.get(key) != value:
                return False
        elif term not in labels:
            return False
    return True


def certificates():
    """(CA PEM, server certificate PEM, server key PEM): a CA of this cluster's own, and a
    certificate it signs for 127.0.0.1 and localhost."""
    def name(cn):
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    start = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(minutes=5)
    end = start + datetime.timedelta(days=30)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (x509.CertificateBuilder().subject_name(name("kubernetes")).issuer_name(name("kubernetes"))
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number()).not_valid_before(start).not_valid_after(end)
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                                       key_encipherment=False, data_encipherment=False, key_agreement=False, encipher_only=False,
                                       decipher_only=False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder().subject_name(name("kube-apiserver")).issuer_name(ca.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number()).not_valid_before(start).not_valid_after(end)
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]),
                           critical=False)
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    pem = serialization.Encoding.PEM
    return (ca.public_bytes(pem), cert.public_bytes(pem),
            key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))


class Cluster:
    """One cluster's objects and its API server."""

    def __init__(self, key):
        self.key = key
        self.lock = threading.Lock()
        self.objects = {}  # (group, plural, namespace, name) -> object
        self.version = 1
        self.log = []  # (method, path, bearer token)
        self.webhooks = {}  # group -> when it becomes ready (epoch seconds)
        self.stalls = {}  # path substring -> seconds a write to it waits before its answer
        self.cloud_kinds = []  # what the cloud serves besides KINDS (set_kinds)
        self.refusal = None  # None, or the status every request gets (401, 403): set_reach
        self.ca, cert, key_pem = certificates()
        self.tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        with tempfile.NamedTemporaryFile() as c, tempfile.NamedTemporaryFile() as k:
            c.write(cert), k.write(key_pem)
            c.flush(), k.flush()
            self.tls.load_cert_chain(c.name, k.name)
        self.server = None
        self.listen(0)
        self.endpoint = f"https://127.0.0.1:{self.port}"

    def listen(self, port):
        """Serves the API on `port` (0: any free one), over TLS."""
        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.cluster = self
        self.server.daemon_threads = True
        self.server.socket = self.tls.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        """Closes the listening socket: connections to the endpoint are refused."""
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None

    # --- kinds ----------------------------------------------------------------------------------

    def kinds(self):
        """Every kind served now: the built-in ones, the cloud's own (`set_kinds`) and the
        custom resources of Established CRDs."""
        served = list(KINDS) + self.cloud_kinds
        for crd in self.list_of("apiextensions.k8s.io", "customresourcedefinitions", None):
            if not self.established(crd):
                continue
            spec = crd.get("spec", {})
            names = spec.get("names", {})
            for version in spec.get("versions", []):
                if version.get("served", True):
                    served.append((spec.get("group", ""), version["name"], names.get("plural", ""), names.get("kind", ""),
                                   spec.get("scope") == "Namespaced", names.get("shortNames", [])))
        return served

    def kind(self, group, version, plural):
        for k in self.kinds():
            if (k[0], k[1], k[2]) == (group, version, plural):
                return k
        raise ApiError(404, "NotFound", "the server could not find the requested resource")

    def established(self, crd):
        return time.time() >= crd["metadata"].get("_established", 0)

    # --- objects --------------------------------------------------------------------------------

    def list_of(self, group, plural, namespace, selector=None):
        return [o for (g, p, ns, _), o in sorted(self.objects.items())
                if g == group and p == plural and (namespace is None or ns == namespace)
                and selected(o["metadata"].get("labels", {}), selector)]

    def visible(self, obj):
        """An object as answered: with its status brought up to date, without private fields."""
        self.refresh(obj)
        shown = copy.deepcopy(obj)
        shown["metadata"] = {k: v for k, v in shown["metadata"].items() if not k.startswith("_")}
        return shown

    def stamp(self, obj, kind, namespace, name):
        group, version, _, kind_name, namespaced, _ = kind
        self.version += 1
        meta = obj.setdefault("metadata", {})
        meta.update(name=name, resourceVersion=str(self.version))
        if namespaced:
            meta["namespace"] = namespace
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", now())
        obj["apiVersion"] = f"{group}/{version}" if group else version
        obj["kind"] = kind_name

    def store(self, kind, namespace, name, obj, created, dry_run=False):
        """Validates and admits `obj`, then stores it unless this is a dry run (`dryRun=All`),
        which answers as the store would without changing anything."""
        group, _, plural, kind_name, namespaced, _ = kind
        if not NAME.fullmatch(name or "") or len(name) > 253:
            raise ApiError(422, "Invalid", f'{kind_name} "{name}" is invalid: metadata.name: Invalid value: "{name}": a lowercase RFC 1123 '
                           "subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an "
                           "alphanumeric character", {"name": name, "kind": kind_name})
        if namespaced and namespace and kind_name != "Namespace" and (("", "namespaces", None, namespace) not in self.objects):
            raise ApiError(404, "NotFound", f'namespaces "{namespace}" not found', {"name": namespace, "kind": "namespaces"})
        if group and group not in BUILT_IN_GROUPS:
            ready = self.webhooks.get(group)
            if ready is not None and time.time() < ready:
                raise ApiError(500, "InternalError", f'Internal error occurred: failed calling webhook "validate.{group}": failed to call '
                               f'webhook: Post "https://webhook-service.{group}.svc:443/validate?timeout=10s": no endpoints available for service')
        if dry_run:
            shown = copy.deepcopy(obj)
            self.stamp(shown, kind, namespace, name)
            self.version -= 1
            return shown
        defaults(kind_name, obj)
        meta = obj["metadata"]
        if created or obj.get("spec") != meta.get("_spec"):
            meta["generation"] = meta.get("generation", 0) + 1
            meta["_spec"] = copy.deepcopy(obj.get("spec"))
            meta["_changed"] = time.time()
        if kind_name == "CustomResourceDefinition" and created:
            meta["_established"] = time.time() + CRD_SECONDS
        self.stamp(obj, kind, namespace, name)
        self.objects[(group, plural, namespace if namespaced else None, name)] = obj
        return obj

    def refresh(self, obj):
        """Status as the controllers would have written it by now."""
        kind, meta, spec = obj.get("kind"), obj["metadata"], obj.get("spec") or {}
        settled = time.time() >= meta.get("_changed", 0) + ROLLOUT_SECONDS
        if kind == "CustomResourceDefinition":
            established = "True" if self.established(obj) else "False"
            obj["status"] = {"conditions": [{"type": "NamesAccepted", "status": "True"}, {"type": "Established", "status": established}],
                             "acceptedNames": spec.get("names", {})}
        elif kind == "DaemonSet":
            nodes = self.nodes_for(spec.get("template", {}).get("spec", {}))
            ready = len(nodes) if settled else 0
            obj["status"] = {"desiredNumberScheduled": len(nodes), "currentNumberScheduled": len(nodes), "numberReady": ready,
                             "numberAvailable": ready, "updatedNumberScheduled": ready, "numberMisscheduled": 0,
                             "observedGeneration": meta.get("generation", 1) if settled else meta.get("generation", 1) - 1}
        elif kind == "Deployment":
            replicas = spec.get("replicas", 1)
            ready = replicas if settled else 0
            obj["status"] = {"replicas": replicas, "readyReplicas": ready, "availableReplicas": ready, "updatedReplicas": ready,
                             "observedGeneration": meta.get("generation", 1) if settled else meta.get("generation", 1) - 1}
        elif kind == "PersistentVolumeClaim":
            volume = self.objects.get(("", "persistentvolumes", None, spec.get("volumeName", "")))
            obj["status"] = {"phase": "Bound" if volume else "Pending"}
            if volume:
                obj["status"]["capacity"] = volume.get("spec", {}).get("capacity", {})
        elif kind == "PersistentVolume":
            claim = spec.get("claimRef") or {}
            bound = any(c.get("spec", {}).get("volumeName") == meta["name"] for c in self.list_of("", "persistentvolumeclaims", None))
            obj["status"] = {"phase": "Bound" if bound or claim else "Available"}
        elif kind == "Node":
            self.node_devices(obj)
        elif kind == "ClusterQueue":
            obj["status"] = {"conditions": [self.queue_condition(spec)]}

    def queue_condition(self, spec):
        """A ClusterQueue's Active condition as Kueue's controller sets it: once the controller runs
        (a rolled-out Deployment of the `kueue` image) and every flavor it names exists."""
        running = any(repository(c.get("image", "")) == "kueue" and time.time() >= d["metadata"].get("_changed", 0) + ROLLOUT_SECONDS
                      for d in self.list_of("apps", "deployments", None)
                      for c in d.get("spec", {}).get("template", {}).get("spec", {}).get("containers", []))
        if not running:
            return {"type": "Active", "status": "False", "reason": "Pending", "message": "no Kueue controller has taken it up"}
        names = [f["name"] for g in spec.get("resourceGroups", []) for f in g.get("flavors", [])]
        missing = [n for n in names if ("kueue.x-k8s.io", "resourceflavors", None, n) not in self.objects]
        if missing:
            return {"type": "Active", "status": "False", "reason": "FlavorNotFound",
                    "message": f"Can't admit new workloads: references missing ResourceFlavor(s): {missing}."}
        return {"type": "Active", "status": "True", "reason": "Ready", "message": "Can admit new workloads"}

    def nodes_for(self, pod_spec):
        """The Nodes a pod template schedules on: its nodeSelector and required node affinity, and taints it tolerates."""
        chosen = []
        for node in self.list_of("", "nodes", None):
            labels = node["metadata"].get("labels", {})
            if any(labels.get(k) != v for k, v in (pod_spec.get("nodeSelector") or {}).items()):
                continue
            if not affinity_allows(labels, pod_spec):
                continue
            tolerations = pod_spec.get("tolerations") or []
            taints = node.get("spec", {}).get("taints") or []
            if all(any(t.get("operator") == "Exists" and not t.get("key") or
                       (t.get("key") == taint["key"] and (t.get("operator") == "Exists" or t.get("value") == taint.get("value")))
                       for t in tolerations) for taint in taints):
                chosen.append(node)
        return chosen

    def node_devices(self, node):
        """A Node's allocatable: its base resources, and each device its plugin advertises."""
        labels = node["metadata"].get("labels", {})
        allocatable = dict(node["metadata"].get("_base", {}))
        for ds in self.list_of("apps", "daemonsets", None):
            if time.time() < ds["metadata"].get("_changed", 0) + ROLLOUT_SECONDS:
                continue
            pod = ds.get("spec", {}).get("template", {}).get("spec", {})
            if node not in self.nodes_for(pod):
                continue
            images = {repository(c.get("image", "")) for c in pod.get("containers", [])}
            for image, resource, count_label in DEVICE_PLUGINS:
                if image in images and labels.get(count_label, "0") != "0":
                    allocatable[resource] = labels[count_label]
        node.setdefault("status", {})["allocatable"] = allocatable
        node["status"]["capacity"] = allocatable
        node["status"]["conditions"] = [{"type": "Ready", "status": "True"}]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        self.serve("GET")

    def do_POST(self):
        self.serve("POST")

    def do_PUT(self):
        self.serve("PUT")

    def do_PATCH(self):
        self.serve("PATCH")

    def do_DELETE(self):
        self.serve("DELETE")

    def answer(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def serve(self, method):
        cluster = self.server.cluster
        path, _, raw_query = self.path.partition("?")
        query = {}
        for pair in filter(None, raw_query.split("&")):
            key, _, value = pair.partition("=")
            query[unquote_plus(key)] = unquote_plus(value)
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        token = (self.headers.get("Authorization") or "").removeprefix("Bearer ")
        with cluster.lock:
            cluster.log.append((method, self.path, token))
            try:
                if cluster.refusal is not None:
                    raise refusal(cluster.refusal, method, path)
                status, body = route(cluster, method, path.rstrip("/") or "/", query, raw, self.headers.get("Content-Type", ""))
            except ApiError as e:
                status, body = e.code, e.body()
            stall = next((seconds for part, seconds in cluster.stalls.items() if method != "GET" and part in path), 0)
        # A stalled write has taken effect; its answer comes late (a client killed meanwhile
        # never learns of it).
        time.sleep(stall)
        self.answer(status, body)


PATH = re.compile(r"/(?:api/(?P<core>v1)|apis/(?P<group>[^/]+)/(?P<version>[^/]+))"
                  r"(?:/namespaces/(?P<namespace>[^/]+))?/(?P<plural>[^/]+)(?:/(?P<name>[^/]+))?(?:/(?P<sub>status))?")


def route(cluster, method, path, query, raw, content_type):
    if path == "/version":
        return 200, {"major": "1", "minor": "33", "gitVersion": "v1.33.0-forge-emulator", "platform": "linux/amd64"}
    if path == "/api":
        return 200, {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}
    if path == "/apis":
        groups = {}
        for group, version, *_ in cluster.kinds():
            if group:
                groups.setdefault(group, [])
                if version not in groups[group]:
                    groups[group].append(version)
        return 200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": [
            {"name": g, "versions": [{"groupVersion": f"{g}/{v}", "version": v} for v in vs],
             "preferredVersion": {"groupVersion": f"{g}/{vs[0]}", "version": vs[0]}} for g, vs in groups.items()]}
    discovery = re.fullmatch(r"/(?:api/(v1)|apis/([^/]+)/([^/]+))", path)
    if discovery and method == "GET":
        group, version = (discovery[2] or ""), (discovery[1] or discovery[3])
        resources = [{"name": p, "singularName": k.lower(), "namespaced": ns, "kind": k, "verbs": VERBS, "shortNames": short}
                     for g, v, p, k, ns, short in cluster.kinds() if (g, v) == (group, version)]
        if not resources:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        return 200, {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": f"{group}/{version}" if group else version,
                     "resources": resources}
    match = PATH.fullmatch(path)
    if not match:
        raise ApiError(404, "NotFound", "the server could not find the requested resource")
    group, version = ("", "v1") if match["core"] else (match["group"], match["version"])
    kind = cluster.kind(group, version, match["plural"])
    namespace, name, plural = match["namespace"], match["name"], match["plural"]
    namespaced = kind[4]
    key = (group, plural, namespace if namespaced else None, name)
    if name is None:
        if method == "GET":
            items = [cluster.visible(o) for o in cluster.list_of(group, plural, namespace if namespaced else None, query.get("labelSelector"))]
            return 200, {"kind": f"{kind[3]}List", "apiVersion": f"{group}/{version}" if group else version,
                         "metadata": {"resourceVersion": str(cluster.version)}, "items": items}
        if method == "POST":
            obj = parse(raw)
            name = obj.get("metadata", {}).get("name") or ""
            key = (group, plural, namespace if namespaced else None, name)
            if key in cluster.objects:
                raise ApiError(409, "AlreadyExists", f'{plural}.{group or "core"} "{name}" already exists', {"name": name, "kind": plural})
            obj["metadata"]["managedFields"] = [managed(query.get("fieldManager", "unknown"), "Update", obj)]
            return 201, cluster.visible(cluster.store(kind, namespace, name, obj, True))
        raise ApiError(405, "MethodNotAllowed", f"{method} is not allowed on a collection")
    current = cluster.objects.get(key)
    if method == "GET":
        if current is None:
            raise not_found(plural, group, name)
        return 200, cluster.visible(current)
    if method == "DELETE":
        if current is None:
            raise not_found(plural, group, name)
        del cluster.objects[key]
        return 200, cluster.visible(current)
    if method == "PATCH" and content_type.startswith("application/apply-patch"):
        return apply(cluster, kind, key, namespace, name, parse(raw), query)
    if method == "PATCH":
        if current is None:
            raise not_found(plural, group, name)
        patched = merge(copy.deepcopy(current), parse(raw))
        return 200, cluster.visible(cluster.store(kind, namespace, name, patched, False))
    if method == "PUT":
        if current is None:
            raise not_found(plural, group, name)
        obj = parse(raw)
        obj["metadata"] = merge(copy.deepcopy(current["metadata"]), obj.get("metadata", {}))
        return 200, cluster.visible(cluster.store(kind, namespace, name, obj, False))
    raise ApiError(405, "MethodNotAllowed", f"{method} is not allowed")


def parse(raw):
    try:
        obj = json.loads(raw) if raw.strip().startswith(b"{") else yaml.safe_load(raw)
    except (ValueError, yaml.YAMLError) as e:
        raise ApiError(400, "BadRequest", f"the body of the request was in an unknown format: {e}")
    if not isinstance(obj, dict):
        raise ApiError(400, "BadRequest", "the body of the request must be an object")
    obj.setdefault("metadata", {})
    return obj


def managed(manager, operation, obj):
    """A managedFields entry: the leaf fields `manager` set (metadata's own aside)."""
    fields = {}
    for path, _ in leaves({k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata", "status")}):
        node = fields
        for part in path:
            node = node.setdefault(f"f:{part}", {})
    return {"manager": manager, "operation": operation, "apiVersion": obj.get("apiVersion", ""), "time": now(),
            "fieldsType": "FieldsV1", "fieldsV1": fields}


def owned(entry):
    """The leaf paths a managedFields entry holds."""
    def walk(node, prefix):
        if not node:
            yield prefix
        for key, inner in node.items():
            yield from walk(inner, prefix + (key[2:],))
    return set(walk(entry.get("fieldsV1", {}), ()))


def apply(cluster, kind, key, namespace, name, applied, query):
    """Server-side apply: the applied fields are `manager`'s; a field another manager owns with
    another value is a conflict unless `force`, which takes it over."""
    manager = query.get("fieldManager")
    if not manager:
        raise ApiError(400, "BadRequest", "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch")
    force = query.get("force") == "true"
    current = cluster.objects.get(key)
    body_name = applied.get("metadata", {}).get("name")
    if body_name and body_name != name:
        raise ApiError(400, "BadRequest", f"the name of the object ({body_name}) does not match the name on the URL ({name})")
    entry = managed(manager, "Apply", applied)
    mine = owned(entry)
    dry_run = query.get("dryRun") == "All"
    if current is None:
        obj = copy.deepcopy(applied)
        obj["metadata"]["managedFields"] = [entry]
        stored = cluster.store(kind, namespace, name, obj, True, dry_run)
        return 201, stored if dry_run else cluster.visible(stored)
    conflicts = []
    others = []
    for other in current["metadata"].get("managedFields", []):
        if other["manager"] == manager and other.get("operation") == "Apply":
            continue
        theirs = owned(other)
        clash = [p for p in mine & theirs if lookup(applied, p) != lookup(current, p)]
        if clash and not force:
            conflicts += [(other["manager"], p) for p in clash]
        remaining = theirs - (mine if force else set())
        if remaining:
            others.append(dict(other, fieldsV1=fields_of(remaining)))
    if conflicts:
        causes = [{"reason": "FieldManagerConflict", "message": f'conflict with "{m}"', "field": "." + ".".join(p)} for m, p in conflicts]
        raise ApiError(409, "Conflict", f"Apply failed with {len(causes)} conflict(s): " +
                       "; ".join(f'conflict with "{m}": .{".".join(p)}' for m, p in conflicts), {"causes": causes})
    previous = next((o for o in current["metadata"].get("managedFields", []) if o["manager"] == manager and o.get("operation") == "Apply"), None)
    obj = copy.deepcopy(current)
    # Fields this manager applied before and no longer does are removed, unless another owns them.
    still_owned = set().union(*(owned(o) for o in others)) if others else set()
    for path in (owned(previous) if previous else set()) - mine - still_owned:
        parent = lookup(obj, path[:-1])
        if isinstance(parent, dict):
            parent.pop(path[-1], None)
    meta = merge(obj["metadata"], {k: v for k, v in applied.get("metadata", {}).items() if k in ("labels", "annotations")})
    merge(obj, {k: v for k, v in applied.items() if k != "metadata"})
    obj["metadata"] = meta
    obj["metadata"]["managedFields"] = others + [entry]
    stored = cluster.store(kind, namespace, name, obj, False, dry_run)
    return 200, stored if dry_run else cluster.visible(stored)


def fields_of(paths):
    fields = {}
    for path in paths:
        node = fields
        for part in path:
            node = node.setdefault(f"f:{part}", {})
    return fields


# --- the clusters ----------------------------------------------------------------------------

CLUSTERS = {}
LOCK = threading.Lock()


def serve(key):
    """The API server of cluster `key` (a string: `eks/<account>/<region>/<name>`,
    `gke/<project>/<location>/<name>`; made on first use): (endpoint, CA PEM)."""
    with LOCK:
        cluster = CLUSTERS.get(key)
        if cluster is None:
            cluster = CLUSTERS[key] = Cluster(key)
            with cluster.lock:
                for ns in ("default", "kube-system", "kube-public", "kube-node-lease"):
                    cluster.store(KINDS[0], None, ns, {"metadata": {}}, True)
        return cluster.endpoint, cluster.ca


def forget(key):
    """The cluster is deleted: its server stops."""
    with LOCK:
        cluster = CLUSTERS.pop(key, None)
    if cluster is not None:
        cluster.stop()


def load_balancers(key):
    """The Services of type LoadBalancer in cluster `key`: (namespace, name, uid)."""
    cluster = cluster_of(key)
    return [(o["metadata"].get("namespace"), o["metadata"]["name"], o["metadata"]["uid"])
            for (g, p, _, _), o in list(cluster.objects.items())
            if (g, p) == ("", "services") and (o.get("spec") or {}).get("type") == "LoadBalancer"]


def cluster_of(key):
    with LOCK:
        cluster = CLUSTERS.get(key)
    if cluster is None:
        raise KeyError(f"no cluster {key}")
    return cluster


def set_nodes(key, group_label, group, nodes):
    """The Nodes of one node group (those labelled `group_label=group`), replaced by `nodes`:
    (name, labels, taints, base allocatable)."""
    cluster = cluster_of(key)
    with cluster.lock:
        for k, node in list(cluster.objects.items()):
            if k[1] == "nodes" and node["metadata"].get("labels", {}).get(group_label) == group:
                del cluster.objects[k]
        for name, labels, taints, base in nodes:
            node = {"metadata": {"labels": dict(labels, **{group_label: group}), "_base": base}, "spec": {"taints": taints}}
            cluster.store(KINDS[1], None, name, node, True)


def set_kinds(key, kinds):
    """The kinds the cloud serves on cluster `key` besides the built-in ones, from now on:
    (group, version, plural, kind, namespaced, shortNames) each; objects of kinds no longer
    served stay, out of reach, until they are served again."""
    cluster = cluster_of(key)
    with cluster.lock:
        cluster.cloud_kinds = list(kinds)


def requests(key):
    """The requests this cluster's API server answered: (method, path, bearer token)."""
    cluster = cluster_of(key)
    with cluster.lock:
        return list(cluster.log)


def stall(key, path, seconds):
    """Writes to paths containing `path` take effect at once and answer after `seconds`."""
    cluster = cluster_of(key)
    with cluster.lock:
        cluster.stalls[path] = seconds


def refusal(code, method, path):
    """The API server's answer to a caller it does not accept: 401 (its token authenticates no
    one) or 403 (the identity has no RBAC for the request), as a real API server words them."""
    if code == 401:
        return ApiError(401, "Unauthorized", "Unauthorized")
    verb = {"GET": "get", "POST": "create", "PATCH": "patch", "PUT": "update", "DELETE": "delete"}.get(method, method.lower())
    return ApiError(403, "Forbidden", f'{path} is forbidden: User "forge-ci" cannot {verb} resource at the cluster scope')


def set_reach(key, mode):
    """How cluster `key`'s endpoint answers from now on: "open"; "refuse" (nothing listens:
    connections are refused, as a private endpoint's address seen from elsewhere may be);
    "unauthorized" (401 to every request: the token authenticates no one); "forbidden" (403:
    the identity has no access). "open" listens again on the same port."""
    cluster = cluster_of(key)
    if mode == "refuse":
        cluster.stop()
        return
    if cluster.server is None:
        cluster.listen(cluster.port)
    with cluster.lock:
        cluster.refusal = {"open": None, "unauthorized": 401, "forbidden": 403}[mode]


def webhook_down(key, group, seconds):
    """Writes of `group`'s resources fail for `seconds`, as while its webhook has no endpoints."""
    cluster = cluster_of(key)
    with cluster.lock:
        cluster.webhooks[group] = time.time() + seconds
