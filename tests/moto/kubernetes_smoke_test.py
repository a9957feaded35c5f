"""Smoke test of the launcher's Kubernetes API server (emulator/kubernetes.py), driven by the
machine's real kubectl (server-side apply, get, delete) over TLS with the cluster's own CA, and
by plain HTTPS for what kubectl hides: discovery of a CRD's resources once Established (and of
no cloud's own kinds unless the cloud serves them), managed fields and apply conflicts, status
that becomes ready, device plugins advertising devices on Nodes, claims binding, a webhook
that is not ready yet, the bearer tokens it saw, and DRA as Kubernetes 1.33 serves it (built-in
DeviceClasses and ResourceClaimTemplates, NVIDIA's ComputeDomains once their CRD is Established).
Runs with the standard library: `python -m unittest`."""

import base64
import json
import os
import shutil
import ssl
import subprocess
import tempfile
import time
import unittest
import urllib.error
import urllib.request

from .launched import Launched

TOKEN = "smoke-token"
CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: clusterqueues.kueue.x-k8s.io}
spec:
  group: kueue.x-k8s.io
  scope: Cluster
  names: {plural: clusterqueues, singular: clusterqueue, kind: ClusterQueue}
  versions: [{name: v1beta1, served: true, storage: true, schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}}]
"""
PLUGIN = """
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: nvidia-device-plugin, namespace: kube-system}
spec:
  selector: {matchLabels: {name: nvidia-device-plugin}}
  template:
    metadata: {labels: {name: nvidia-device-plugin}}
    spec:
      nodeSelector: {node.kubernetes.io/instance-type: p5.48xlarge}
      tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
      containers: [{name: plugin, image: "nvcr.io/nvidia/k8s-device-plugin:v0.17.0"}]
"""
DEVICE_CLASS = """
apiVersion: resource.k8s.io/v1beta1
kind: DeviceClass
metadata: {name: compute-domain-default-channel.nvidia.com}
spec:
  selectors: [{cel: {expression: "device.driver == 'compute-domain.nvidia.com' && device.attributes['compute-domain.nvidia.com'].type == 'channel'"}}]
"""
COMPUTE_DOMAIN_CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: computedomains.resource.nvidia.com}
spec:
  group: resource.nvidia.com
  scope: Namespaced
  names: {plural: computedomains, singular: computedomain, kind: ComputeDomain, listKind: ComputeDomainList}
  versions:
  - name: v1beta1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              numNodes: {type: integer}
              channel: {type: object, properties: {resourceClaimTemplate: {type: object, properties: {name: {type: string}}}}}
          status: {type: object, x-kubernetes-preserve-unknown-fields: true}
"""
COMPUTE_DOMAIN = """
apiVersion: resource.nvidia.com/v1beta1
kind: ComputeDomain
metadata: {name: nvl72, namespace: training}
spec: {numNodes: 0, channel: {resourceClaimTemplate: {name: nvl72-channel}}}
"""


@unittest.skipIf(shutil.which("kubectl") is None, "kubectl is not installed")
class Kubernetes(Launched):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.dir = tempfile.mkdtemp(prefix="forge-k8s-smoke-")

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def control(self, path, payload=None):
        data = json.dumps(payload).encode() if payload is not None else None
        with urllib.request.urlopen(urllib.request.Request(self.url + path, data=data, method="POST" if data else "GET")) as r:
            return json.loads(r.read())

    def cluster(self, name):
        """A cluster's API server: its endpoint, and a kubeconfig for it."""
        served = self.control("/_forge/kubernetes/clusters", {"cluster": name})
        ca = base64.b64encode(served["ca"].encode()).decode()
        config = os.path.join(self.dir, name.replace("/", "-") + ".kubeconfig")
        with open(config, "w") as f:
            json.dump({"apiVersion": "v1", "kind": "Config", "current-context": "c",
                       "clusters": [{"name": "c", "cluster": {"server": served["endpoint"], "certificate-authority-data": ca}}],
                       "users": [{"name": "u", "user": {"token": TOKEN}}],
                       "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}, f)
        return served, config

    def kubectl(self, config, *args, stdin=None, ok=True):
        done = subprocess.run(["kubectl", "--kubeconfig", config, *args], input=stdin, capture_output=True, text=True,
                              env=dict(os.environ, KUBECACHEDIR=os.path.join(self.dir, "cache")))
        if ok:
            self.assertEqual(done.returncode, 0, done.stderr)
        return done

    def api(self, served, method, path, body=None, content_type="application/json"):
        """(status, JSON answer) of a request over TLS, trusting only the cluster's CA."""
        context = ssl.create_default_context(cadata=served["ca"])
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(served["endpoint"] + path, data=data, method=method,
                                         headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": content_type})
        try:
            with urllib.request.urlopen(request, context=context) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def test_kubectl_applies_gets_and_deletes_server_side(self):
        served, config = self.cluster("smoke/kubectl")
        self.kubectl(config, "apply", "--server-side", "--validate=false", "-f", "-", stdin=PLUGIN)
        shown = json.loads(self.kubectl(config, "get", "daemonset", "-n", "kube-system", "nvidia-device-plugin", "-o", "json", "--show-managed-fields").stdout)
        self.assertEqual(shown["metadata"]["managedFields"][0]["manager"], "kubectl")
        # Another manager changing kubectl's field conflicts, unless it forces.
        patch = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "nvidia-device-plugin", "namespace": "kube-system"},
                 "spec": {"template": {"spec": {"containers": [{"name": "plugin", "image": "other:1"}]}}}}
        path = "/apis/apps/v1/namespaces/kube-system/daemonsets/nvidia-device-plugin?fieldManager=forge"
        status, answer = self.api(served, "PATCH", path, patch, "application/apply-patch+yaml")
        self.assertEqual((status, answer["reason"]), (409, "Conflict"), answer)
        self.assertIn('conflict with "kubectl"', answer["message"])
        status, answer = self.api(served, "PATCH", path + "&force=true", patch, "application/apply-patch+yaml")
        self.assertEqual(status, 200, answer)
        self.assertEqual({m["manager"] for m in answer["metadata"]["managedFields"]}, {"kubectl", "forge"})
        self.kubectl(config, "delete", "daemonset", "-n", "kube-system", "nvidia-device-plugin", "--wait=false")
        status, answer = self.api(served, "GET", "/apis/apps/v1/namespaces/kube-system/daemonsets/nvidia-device-plugin")
        self.assertEqual((status, answer["kind"], answer["reason"]), (404, "Status", "NotFound"))
        tokens = {r["token"] for r in self.control("/_forge/kubernetes/requests?cluster=smoke/kubectl")}
        self.assertEqual(tokens, {TOKEN})

    def test_a_crd_serves_its_resources_once_established_and_webhooks_are_waited_for(self):
        served, config = self.cluster("smoke/crd")
        self.kubectl(config, "apply", "--server-side", "--validate=false", "-f", "-", stdin=CRD)
        queue = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", "metadata": {"name": "a3"}, "spec": {"x": 1}}
        path = "/apis/kueue.x-k8s.io/v1beta1/clusterqueues/a3?fieldManager=forge"
        status, _ = self.api(served, "PATCH", path, queue, "application/apply-patch+yaml")
        self.assertEqual(status, 404, "not served before the CRD is Established")
        time.sleep(0.6)
        _, crd = self.api(served, "GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/clusterqueues.kueue.x-k8s.io")
        self.assertIn({"type": "Established", "status": "True"}, crd["status"]["conditions"])
        _, resources = self.api(served, "GET", "/apis/kueue.x-k8s.io/v1beta1")
        self.assertEqual([r["name"] for r in resources["resources"]], ["clusterqueues"])
        self.control("/_forge/kubernetes/webhook", {"cluster": "smoke/crd", "group": "kueue.x-k8s.io", "seconds": 0.5})
        status, answer = self.api(served, "PATCH", path, queue, "application/apply-patch+yaml")
        self.assertEqual(status, 500, answer)
        self.assertIn("failed calling webhook", answer["message"])
        time.sleep(0.6)
        status, answer = self.api(served, "PATCH", path, queue, "application/apply-patch+yaml")
        self.assertEqual(status, 201, answer)

    def test_only_the_cloud_adds_kinds_of_its_own(self):
        served, _ = self.cluster("gke/smoke/us-central1/plain")
        _, groups = self.api(served, "GET", "/apis")
        self.assertNotIn("networking.gke.io", [g["name"] for g in groups["groups"]], "GKE's own kinds only when the cloud serves them")
        status, answer = self.api(served, "GET", "/apis/networking.gke.io/v1/networks")
        self.assertEqual((status, answer["reason"]), (404, "NotFound"))

    def test_device_plugins_advertise_devices_and_claims_bind(self):
        served, config = self.cluster("smoke/nodes")
        nodes = [{"name": f"ip-10-0-0-{i}", "labels": {"node.kubernetes.io/instance-type": "p5.48xlarge", "forge.emulator/gpus": "8"},
                  "taints": [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}], "allocatable": {"cpu": "192"}}
                 for i in (1, 2)]
        self.control("/_forge/kubernetes/nodes", {"cluster": "smoke/nodes", "group_label": "eks.amazonaws.com/nodegroup",
                                                  "group": "gpu", "nodes": nodes})
        _, listed = self.api(served, "GET", "/api/v1/nodes?labelSelector=eks.amazonaws.com/nodegroup%3Dgpu")
        self.assertEqual([n["status"]["allocatable"] for n in listed["items"]], [{"cpu": "192"}] * 2)
        self.kubectl(config, "apply", "--server-side", "--validate=false", "-f", "-", stdin=PLUGIN)
        time.sleep(0.6)
        _, listed = self.api(served, "GET", "/api/v1/nodes")
        self.assertEqual([n["status"]["allocatable"].get("nvidia.com/gpu") for n in listed["items"]], ["8", "8"])
        _, ds = self.api(served, "GET", "/apis/apps/v1/namespaces/kube-system/daemonsets/nvidia-device-plugin")
        self.assertEqual((ds["status"]["desiredNumberScheduled"], ds["status"]["numberReady"]), (2, 2))
        volume = {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "fsx"},
                  "spec": {"capacity": {"storage": "1200Gi"}, "accessModes": ["ReadWriteMany"]}}
        claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "fsx-pvc", "namespace": "default"},
                 "spec": {"volumeName": "fsx", "accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "1200Gi"}}}}
        self.api(served, "PATCH", "/api/v1/persistentvolumes/fsx?fieldManager=forge", volume, "application/apply-patch+yaml")
        _, bound = self.api(served, "PATCH", "/api/v1/namespaces/default/persistentvolumeclaims/fsx-pvc?fieldManager=forge", claim,
                            "application/apply-patch+yaml")
        self.assertEqual(bound["status"]["phase"], "Bound")

    def test_dra_device_classes_are_built_in_and_compute_domains_come_with_their_crd(self):
        served, config = self.cluster("smoke/dra")
        _, groups = self.api(served, "GET", "/apis")
        self.assertIn({"groupVersion": "resource.k8s.io/v1beta1", "version": "v1beta1"},
                      next(g for g in groups["groups"] if g["name"] == "resource.k8s.io")["versions"])
        _, resources = self.api(served, "GET", "/apis/resource.k8s.io/v1beta1")
        namespaced = {r["kind"]: r["namespaced"] for r in resources["resources"]}
        self.assertEqual((namespaced["DeviceClass"], namespaced["ResourceClaimTemplate"]), (False, True))
        self.kubectl(config, "apply", "--server-side", "--validate=false", "-f", "-", stdin=DEVICE_CLASS)
        shown = json.loads(self.kubectl(config, "get", "deviceclass", "compute-domain-default-channel.nvidia.com", "-o", "json").stdout)
        self.assertIn("compute-domain.nvidia.com", shown["spec"]["selectors"][0]["cel"]["expression"])
        self.kubectl(config, "apply", "--server-side", "--validate=false", "-f", "-",
                     stdin="apiVersion: v1\nkind: Namespace\nmetadata: {name: training}\n---\n" + COMPUTE_DOMAIN_CRD)
        status, _ = self.api(served, "GET", "/apis/resource.nvidia.com/v1beta1/namespaces/training/computedomains")
        self.assertEqual(status, 404, "not served before the CRD is Established")
        time.sleep(0.6)
        _, crd = self.api(served, "GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/computedomains.resource.nvidia.com")
        self.assertIn({"type": "Established", "status": "True"}, crd["status"]["conditions"])
        _, resources = self.api(served, "GET", "/apis/resource.nvidia.com/v1beta1")
        self.assertEqual([(r["name"], r["kind"], r["namespaced"]) for r in resources["resources"]],
                         [("computedomains", "ComputeDomain", True)])
        self.kubectl(config, "apply", "--server-side", "--validate=false", "-f", "-", stdin=COMPUTE_DOMAIN)
        shown = json.loads(self.kubectl(config, "get", "computedomain", "-n", "training", "nvl72", "-o", "json").stdout)
        self.assertEqual(shown["spec"]["channel"]["resourceClaimTemplate"]["name"], "nvl72-channel")
        # What the driver's controller makes of it: the channel's claim template, in the workload's namespace.
        template = {"apiVersion": "resource.k8s.io/v1beta1", "kind": "ResourceClaimTemplate",
                    "metadata": {"name": "nvl72-channel", "namespace": "training"},
                    "spec": {"spec": {"devices": {"requests": [{"name": "channel",
                                                                "deviceClassName": "compute-domain-default-channel.nvidia.com"}]}}}}
        status, answer = self.api(served, "PATCH", "/apis/resource.k8s.io/v1beta1/namespaces/training/resourceclaimtemplates/nvl72-channel"
                                  "?fieldManager=forge", template, "application/apply-patch+yaml")
        self.assertEqual((status, answer["metadata"]["namespace"]), (201, "training"), answer)


if __name__ == "__main__":
    unittest.main()
