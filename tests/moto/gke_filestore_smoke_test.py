"""Smoke test of the launcher's GKE and Filestore emulators (emulator/gcp_container.py,
gcp_filestore.py, on gcp.py and the Compute emulator's networks): operations polled to the end,
one operation at a time per cluster (refused in GKE's words for what runs), multi-network GPU
pools and the kinds a multi-networking cluster's API server serves, RDMA pools (A3 Ultra, A4,
A4X) on RDMA networks or managed DRANET, GPUDirect-RDMA, Hyperdisk boot disks, placement by
resource policies (in use while a pool is placed by them), autoscaling on and off, versions that
never go back a minor version, auto-upgrade in release channels, accelerator checks, stockouts,
Filestore tiers and capacities, deletion protection, enums as numbers, error bodies, faults, the
call counter and project isolation, spoken over plain HTTP as the Rust clients speak it (with
`$alt=json;enum-encoding=int`). Runs with the standard library only: `python -m unittest`."""

import base64
import json
import ssl
import time
import unittest
import urllib.error
import urllib.parse
import urllib.request

from .launched import start, stop

REGION, ZONE = "us-central1", "us-central1-a"
INTS = "json;enum-encoding=int"
DONE, PENDING = 3, 1  # GKE Operation.Status as numbers
LAUNCHER = {}


def setUpModule():
    LAUNCHER["proc"], LAUNCHER["url"] = start()


def tearDownModule():
    stop(LAUNCHER["proc"])


class Client:
    """Calls as the Rust clients make them, and the launcher's control paths."""

    def send(self, method, path, body=None, alt=INTS, **query):
        """(HTTP status, parsed body) of a call."""
        url = f"{LAUNCHER['url']}{path}?{urllib.parse.urlencode({'$alt': alt, **query})}"
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(url, data=data, method=method, headers={"Authorization": "Bearer anything", "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def call(self, api, method, project, path, body=None, want=200, **query):
        status, out = self.send(method, f"/{api}/v1/projects/{project}/{path}", body, **query)
        self.assertEqual(status, want, out)
        return out

    def control(self, path, payload=None):
        data = json.dumps(payload).encode() if payload is not None else None
        with urllib.request.urlopen(urllib.request.Request(LAUNCHER["url"] + path, data=data, method="POST" if data else "GET")) as r:
            return json.loads(r.read())

    def refused(self, api, method, project, path, body, status, code=400, **query):
        """The error of a refused call: its status string is `status`."""
        error = self.call(api, method, project, path, body, want=code, **query)["error"]
        self.assertEqual(error["status"], status, error)
        return error["message"]

    def vpc(self, project, name, cidr, secondary=()):
        """A Compute network with one subnetwork in REGION (named after it, with `-sub`)."""
        for path, body in (("global/networks", {"name": name, "autoCreateSubnetworks": False, "mtu": 8244}),
                           (f"regions/{REGION}/subnetworks", {"name": f"{name}-sub", "network": f"global/networks/{name}", "ipCidrRange": cidr,
                                                               "secondaryIpRanges": [{"rangeName": n, "ipCidrRange": c} for n, c in secondary]})):
            op = self.call("compute", "POST", project, path, body, alt="json")
            self.compute_wait(project, op)

    def rdma_vpc(self, project, name, subnets, profile=f"{ZONE}-vpc-roce"):
        """A Compute network with the RDMA network profile `profile` and `subnets` subnetworks in
        REGION (`{name}-0` …), made side by side."""
        body = {"name": name, "autoCreateSubnetworks": False, "networkProfile": f"projects/{project}/global/networkProfiles/{profile}"}
        self.compute_wait(project, self.call("compute", "POST", project, "global/networks", body, alt="json"))
        ops = [self.call("compute", "POST", project, f"regions/{REGION}/subnetworks",
                         {"name": f"{name}-{i}", "network": f"global/networks/{name}", "ipCidrRange": f"172.{16 + i}.0.0/20"}, alt="json") for i in range(subnets)]
        for op in ops:
            self.compute_wait(project, op)

    def violations(self, project):
        """What the discovery-document check refused of the project's requests (and emulator defects)."""
        return self.control(f"/_forge/violations?account={project}")

    def compute_wait(self, project, op):
        region = op.get("region", "").rsplit("/", 1)[-1]
        scope = f"regions/{region}" if region else "global"
        while op["status"] != "DONE":
            time.sleep(0.05)
            op = self.call("compute", "GET", project, f"{scope}/operations/{op['name']}", alt="json")
        return op


class Gke(Client, unittest.TestCase):
    def gke(self, method, project, path, body=None, want=200, **query):
        return self.call("container", method, project, f"locations/{REGION}/{path}", body, want, **query)

    def wait(self, project, op):
        """Poll as forge does: projects.locations.operations.get by name until DONE."""
        for _ in range(200):
            if op["status"] == DONE:
                return op
            time.sleep(0.05)
            op = self.gke("GET", project, f"operations/{op['name']}")
        self.fail(f"operation never ended: {op}")

    def kube(self, cluster, path):
        """(HTTP status, parsed body) of a GET from the cluster's API server, trusting its CA."""
        ca = base64.b64decode(cluster["masterAuth"]["clusterCaCertificate"]).decode()
        request = urllib.request.Request(f"https://{cluster['endpoint']}{path}", headers={"Authorization": "Bearer ya29.emulator"})
        try:
            with urllib.request.urlopen(request, context=ssl.create_default_context(cadata=ca)) as answer:
                return answer.status, json.loads(answer.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def cluster(self, project, name="c", vpc=True, **extra):
        """A running regional cluster with multi-networking on `project`'s network `main` (made
        first if `vpc`)."""
        if vpc:
            self.vpc(project, "main", "10.0.0.0/20", [("pods", "10.64.0.0/14"), ("svc", "10.96.0.0/20")])
        body = {"cluster": {"name": name, "network": "main", "subnetwork": "main-sub", "initialClusterVersion": "1.32",
                            "ipAllocationPolicy": {"useIpAliases": True, "clusterSecondaryRangeName": "pods", "servicesSecondaryRangeName": "svc"},
                            "networkConfig": {"datapathProvider": 2, "enableMultiNetworking": True}, "releaseChannel": {"channel": 2},
                            "workloadIdentityConfig": {"workloadPool": f"{project}.svc.id.goog"}, "resourceLabels": {"forge-stack": "s"},
                            "addonsConfig": {"gcpFilestoreCsiDriverConfig": {"enabled": True}, "gcsFuseCsiDriverConfig": {"enabled": True}},
                            "nodePools": [{"name": "system", "initialNodeCount": 1, "locations": [ZONE], "config": {"machineType": "e2-standard-4"}}],
                            **extra}}
        op = self.gke("POST", project, "clusters", body)
        self.assertNotIn("error", self.wait(project, op))
        return self.gke("GET", project, f"clusters/{name}")

    def test_cluster_created_polled_to_running(self):
        p = "g-life"
        self.vpc(p, "main", "10.0.0.0/20", [("pods", "10.64.0.0/14"), ("svc", "10.96.0.0/20")])
        body = {"cluster": {"name": "c", "network": "main", "subnetwork": "main-sub", "initialNodeCount": 2,
                            "ipAllocationPolicy": {"useIpAliases": True, "clusterSecondaryRangeName": "pods", "servicesSecondaryRangeName": "svc"},
                            "networkConfig": {"datapathProvider": "ADVANCED_DATAPATH"}}}
        op = self.gke("POST", p, "clusters", body)
        self.assertEqual((op["operationType"], op["status"], op["location"]), (1, PENDING, REGION))  # CREATE_CLUSTER, as numbers
        self.assertTrue(op["name"].startswith("operation-"))
        self.assertEqual(op["targetLink"], f"https://container.googleapis.com/v1/projects/{p}/locations/{REGION}/clusters/c")
        self.assertEqual(self.gke("GET", p, "clusters/c")["status"], 1)  # PROVISIONING, visible at once
        done = self.wait(p, op)
        self.assertIn("endTime", done)
        cluster = self.gke("GET", p, "clusters/c")
        self.assertEqual((cluster["status"], cluster["location"], cluster["locations"]), (2, REGION, [f"{REGION}-a", f"{REGION}-b", f"{REGION}-c"]))
        self.assertEqual(cluster["networkConfig"], {"datapathProvider": 2, "network": f"projects/{p}/global/networks/main", "subnetwork": f"projects/{p}/regions/{REGION}/subnetworks/main-sub"})
        self.assertEqual((cluster["ipAllocationPolicy"]["clusterIpv4CidrBlock"], cluster["servicesIpv4Cidr"]), ("10.64.0.0/14", "10.96.0.0/20"))
        self.assertTrue(base64.b64decode(cluster["masterAuth"]["clusterCaCertificate"]).startswith(b"-----BEGIN CERTIFICATE-----"))
        # The endpoint is a host (GKE gives no scheme) where the cluster's API server answers,
        # trusting its CA only; the default pool's 6 VMs (2 in each of 3 zones) are its Nodes.
        self.assertRegex(cluster["endpoint"], r"^\d+\.\d+\.\d+\.\d+:\d+$")
        context = ssl.create_default_context(cadata=base64.b64decode(cluster["masterAuth"]["clusterCaCertificate"]).decode())
        request = urllib.request.Request(f"https://{cluster['endpoint']}/api/v1/nodes?labelSelector=cloud.google.com%2Fgke-nodepool%3Ddefault-pool",
                                         headers={"Authorization": "Bearer ya29.emulator"})
        with urllib.request.urlopen(request, context=context) as answer:
            nodes = json.loads(answer.read())["items"]
        self.assertEqual(len(nodes), 6)
        self.assertTrue(cluster["currentMasterVersion"].startswith("1.32."), cluster["currentMasterVersion"])  # the REGULAR channel's
        self.assertEqual(([n["name"] for n in cluster["nodePools"]], cluster["nodePools"][0]["status"], cluster["currentNodeCount"]), (["default-pool"], 2, 6))
        for key in ("selfLink", "createTime", "labelFingerprint", "id", "releaseChannel"):
            self.assertIn(key, cluster)
        self.assertEqual(cluster["nodePools"][0]["maxPodsConstraint"], {"maxPodsPerNode": "110"})  # int64 as a string
        named = self.call("container", "GET", p, f"locations/{REGION}/clusters/c", alt="json")
        self.assertEqual((named["status"], named["networkConfig"]["datapathProvider"], named["nodePools"][0]["status"]), ("RUNNING", "ADVANCED_DATAPATH", "RUNNING"))
        self.assertEqual([c["name"] for c in self.call("container", "GET", p, "locations/-/clusters")["clusters"]], ["c"])
        self.assertEqual(self.call("container", "GET", p, f"locations/{ZONE}/clusters"), {})

    def test_one_operation_at_a_time_per_cluster(self):
        p = "g-busy"
        self.cluster(p)
        first = self.gke("POST", p, "clusters/c/nodePools", {"nodePool": {"name": "a", "initialNodeCount": 1}})
        self.assertEqual(self.gke("GET", p, "clusters/c")["status"], 3)  # RECONCILING while a pool is made
        self.assertEqual(self.gke("GET", p, "clusters/c/nodePools/a")["status"], 1)  # PROVISIONING
        message = self.refused("container", "POST", p, f"locations/{REGION}/clusters/c/nodePools", {"nodePool": {"name": "b", "initialNodeCount": 1}}, "FAILED_PRECONDITION")
        self.assertEqual(message, f"Cluster is running incompatible operation {first['name']}.")
        fingerprint = self.gke("GET", p, "clusters/c")["labelFingerprint"]
        for method, path, body in (("POST", "clusters/c:setResourceLabels", {"resourceLabels": {}, "labelFingerprint": fingerprint}),
                                   ("POST", "clusters/c/nodePools/system:setSize", {"nodeCount": 2}),
                                   ("PUT", "clusters/c", {"update": {"desiredLocations": [ZONE]}}),
                                   ("DELETE", "clusters/c/nodePools/system", None), ("DELETE", "clusters/c", None)):
            self.assertEqual(self.refused("container", method, p, f"locations/{REGION}/{path}", body, "FAILED_PRECONDITION"), message, path)
        self.wait(p, first)
        self.assertEqual(self.gke("GET", p, "clusters/c")["status"], 2)
        # While the control plane upgrades, GKE words it otherwise; the status is the same.
        upgrade = self.gke("PUT", p, "clusters/c", {"update": {"desiredMasterVersion": "1.33"}})
        self.assertEqual(upgrade["operationType"], 3)  # UPGRADE_MASTER
        self.assertEqual(self.refused("container", "POST", p, f"locations/{REGION}/clusters/c/nodePools/system:setSize", {"nodeCount": 2}, "FAILED_PRECONDITION"),
                         f"Operation {upgrade['name']} is currently upgrading cluster c. Please wait and try again once it is done.")
        self.wait(p, upgrade)
        self.wait(p, self.gke("POST", p, "clusters/c/nodePools", {"nodePool": {"name": "b", "initialNodeCount": 1}}))
        self.assertEqual([n["name"] for n in self.gke("GET", p, "clusters/c/nodePools")["nodePools"]], ["system", "a", "b"])
        # A pool's operations can be made to last longer than the rest.
        self.control("/_forge/operation_seconds", [{"account": p, "match": "container:clusters.nodePools.create", "seconds": 1.5}])
        try:
            start = time.time()
            self.wait(p, self.gke("POST", p, "clusters/c/nodePools", {"nodePool": {"name": "slow", "initialNodeCount": 1}}))
            self.assertGreaterEqual(time.time() - start, 1.4)
        finally:
            self.control("/_forge/operation_seconds", [])

    def test_gpu_pool_with_four_additional_networks(self):
        p = "g-gpu"
        cluster = self.cluster(p)
        for i in range(1, 5):
            self.vpc(p, f"gpu-{i}", f"192.168.{i}.0/24")
        extra = [{"network": f"gpu-{i}", "subnetwork": f"gpu-{i}-sub"} for i in range(1, 5)]
        pool = {"name": "a3", "initialNodeCount": 2, "locations": [ZONE],
                "config": {"machineType": "a3-highgpu-8g", "diskSizeGb": 200, "gvnic": {"enabled": True}, "spot": False,
                           "accelerators": [{"acceleratorType": "nvidia-h100-80gb", "acceleratorCount": "8", "gpuDriverInstallationConfig": {"gpuDriverVersion": 3}}],
                           "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": 1}], "labels": {"role": "gpu"},
                           "reservationAffinity": {"consumeReservationType": 3, "key": "compute.googleapis.com/reservation-name", "values": ["h100"]},
                           "localNvmeSsdBlockConfig": {"localSsdCount": 16}},
                "networkConfig": {"additionalNodeNetworkConfigs": extra}, "placementPolicy": {"type": 1},
                "autoscaling": {"enabled": True, "minNodeCount": 0, "maxNodeCount": 4}, "management": {"autoRepair": True, "autoUpgrade": True}}
        self.assertNotIn("error", self.wait(p, self.gke("POST", p, "clusters/c/nodePools", {"nodePool": pool})))
        got = self.gke("GET", p, "clusters/c/nodePools/a3")
        self.assertEqual((got["status"], got["networkConfig"]["additionalNodeNetworkConfigs"], got["placementPolicy"]), (2, extra, {"type": 1}))
        self.assertEqual(got["config"]["accelerators"][0]["acceleratorCount"], "8")
        self.assertEqual((got["config"]["taints"][0]["effect"], got["config"]["reservationAffinity"]["consumeReservationType"]), (1, 3))
        self.assertEqual((got["networkConfig"]["podRange"], got["autoscaling"]["locationPolicy"], got["version"]), ("pods", 1, cluster["currentMasterVersion"]))
        bad = [("an unknown network", dict(pool, name="x1", networkConfig={"additionalNodeNetworkConfigs": [{"network": "nope", "subnetwork": "nope-sub"}]}), 'has no network named "nope"'),
               ("a subnet of another network", dict(pool, name="x2", networkConfig={"additionalNodeNetworkConfigs": [{"network": "gpu-1", "subnetwork": "gpu-2-sub"}]}), "is not in network"),
               ("the cluster's own VPC", dict(pool, name="x3", networkConfig={"additionalNodeNetworkConfigs": [{"network": "main", "subnetwork": "main-sub"}]}), "other than the cluster's"),
               ("COMPACT over two zones", dict(pool, name="x4", locations=[ZONE, f"{REGION}-b"]), "exactly one node location"),
               ("no gVNIC", dict(pool, name="x5", config=dict(pool["config"], gvnic={"enabled": False})), "gVNIC"),
               ("a zone of another region", dict(pool, name="x6", locations=["europe-west4-a"]), "zones of the cluster's region"),
               ("auto-upgrade off in a release channel", dict(pool, name="x8", management={"autoRepair": True}), "auto-upgrade cannot be turned off")]
        for why, body, words in bad:
            self.assertIn(words, self.refused("container", "POST", p, f"locations/{REGION}/clusters/c/nodePools", {"nodePool": body}, "INVALID_ARGUMENT"), why)
        # Their subnetworks are in use: Compute's delete fails in its operation.
        failed = self.compute_wait(p, self.call("compute", "DELETE", p, f"regions/{REGION}/subnetworks/gpu-1-sub", alt="json"))
        self.assertEqual(failed["error"]["errors"][0]["code"], "RESOURCE_IN_USE_BY_ANOTHER_RESOURCE")
        self.assertIn(f"projects/{p}/locations/{REGION}/clusters/c/nodePools/a3", failed["error"]["errors"][0]["message"])
        # Node network interfaces cannot change; labels can.
        self.refused("container", "PUT", p, f"locations/{REGION}/clusters/c/nodePools/a3", {"nodeNetworkConfig": {"additionalNodeNetworkConfigs": extra[:2]}}, "INVALID_ARGUMENT")
        self.wait(p, self.gke("PUT", p, "clusters/c/nodePools/a3", {"labels": {"labels": {"role": "train"}}, "taints": {}}))
        changed = self.gke("GET", p, "clusters/c/nodePools/a3")["config"]
        self.assertEqual((changed["labels"], "taints" in changed), ({"role": "train"}, False))
        self.refused("container", "PUT", p, f"locations/{REGION}/clusters/c/nodePools/a3", {"kubeletConfig": {"cpuManagerPolicy": "static"}}, "INVALID_ARGUMENT")
        # Multi-networking stays on while a pool uses it; a cluster without it takes no additional networks.
        self.refused("container", "PUT", p, f"locations/{REGION}/clusters/c", {"update": {"desiredEnableMultiNetworking": False}}, "INVALID_ARGUMENT")
        self.cluster(p, "plain", vpc=False, networkConfig={"datapathProvider": 2})
        self.assertIn("enableMultiNetworking", self.refused("container", "POST", p, f"locations/{REGION}/clusters/plain/nodePools", {"nodePool": dict(pool, name="x7")}, "INVALID_ARGUMENT"))

    def test_accelerators_must_fit_the_machine(self):
        p = "g-acc"
        self.cluster(p)
        pools = f"locations/{REGION}/clusters/c/nodePools"
        for machine, accelerator, words in (("a3-highgpu-8g", {"acceleratorType": "nvidia-l4", "acceleratorCount": "8"}, "does not fit machine type"),
                                            ("a3-megagpu-8g", {"acceleratorType": "nvidia-h100-80gb", "acceleratorCount": "8"}, '"nvidia-h100-mega-80gb"'),
                                            ("a3-highgpu-8g", {"acceleratorType": "nvidia-h100-80gb", "acceleratorCount": "4"}, "does not fit"),
                                            ("e2-standard-8", {"acceleratorType": "nvidia-tesla-t4", "acceleratorCount": "1"}, "cannot be attached")):
            body = {"nodePool": {"name": "g", "initialNodeCount": 1, "config": {"machineType": machine, "accelerators": [accelerator]}}}
            self.assertIn(words, self.refused("container", "POST", p, pools, body, "INVALID_ARGUMENT"), machine)
        self.refused("container", "POST", p, pools, {"nodePool": {"name": "g", "config": {"taints": [{"key": "k", "effect": 9}]}}}, "INVALID_ARGUMENT")
        # A machine's own GPUs are filled in when not given.
        self.wait(p, self.gke("POST", p, "clusters/c/nodePools", {"nodePool": {"name": "mega", "initialNodeCount": 1, "locations": [ZONE], "config": {"machineType": "a3-megagpu-8g"}}}))
        self.assertEqual(self.gke("GET", p, "clusters/c/nodePools/mega")["config"]["accelerators"], [{"acceleratorType": "nvidia-h100-mega-80gb", "acceleratorCount": "8"}])

    def nodes(self, cluster, pool):
        """The Nodes of a pool in its cluster's API server."""
        status, nodes = self.kube(cluster, f"/api/v1/nodes?labelSelector=cloud.google.com%2Fgke-nodepool%3D{pool}")
        self.assertEqual(status, 200, nodes)
        return nodes["items"]

    def test_rdma_pools_on_rdma_networks(self):
        p = "g-rdma"
        cluster = self.cluster(p)
        self.vpc(p, "gvnic", "192.168.100.0/24")
        self.vpc(p, "gvnic-2", "192.168.101.0/24")
        self.rdma_vpc(p, "rdma", 9)
        self.rdma_vpc(p, "falcon", 1, profile=f"{ZONE}-vpc-falcon")
        pools = f"locations/{REGION}/clusters/c/nodePools"
        rdma = [{"network": "rdma", "subnetwork": f"rdma-{i}"} for i in range(8)]
        extra = [{"network": "gvnic", "subnetwork": "gvnic-sub"}] + rdma
        pool = {"name": "ultra", "initialNodeCount": 1, "locations": [ZONE], "networkConfig": {"additionalNodeNetworkConfigs": extra},
                "config": {"machineType": "a3-ultragpu-8g", "gvnic": {"enabled": True}, "gpuDirectConfig": {"gpuDirectStrategy": 2},
                           "accelerators": [{"acceleratorType": "nvidia-h200-141gb", "acceleratorCount": "8", "gpuDriverInstallationConfig": {"gpuDriverVersion": 3}}]}}
        self.assertNotIn("error", self.wait(p, self.gke("POST", p, "clusters/c/nodePools", {"nodePool": pool})))
        got = self.gke("GET", p, "clusters/c/nodePools/ultra")
        self.assertEqual((got["networkConfig"]["additionalNodeNetworkConfigs"], got["config"]["gpuDirectConfig"], got["config"]["diskType"]),
                         (extra, {"gpuDirectStrategy": 2}, "hyperdisk-balanced"))  # RDMA as its number; no Persistent Disk on A3 Ultra
        named = self.call("container", "GET", p, f"{pools}/ultra", alt="json")
        self.assertEqual(named["config"]["gpuDirectConfig"], {"gpuDirectStrategy": "RDMA"})
        [node] = self.nodes(cluster, "ultra")
        self.assertEqual((node["metadata"]["labels"]["kubernetes.io/arch"], node["status"]["allocatable"]["nvidia.com/gpu"]), ("amd64", "8"))
        self.assertNotIn("cloud.google.com/gke-networking-dra-driver", node["metadata"]["labels"])
        # A4 boots from Hyperdisk, by default.
        self.wait(p, self.gke("POST", p, "clusters/c/nodePools", {"nodePool": {"name": "a4", "initialNodeCount": 1, "locations": [ZONE], "config": {"machineType": "a4-highgpu-8g"}}}))
        a4 = self.gke("GET", p, "clusters/c/nodePools/a4")["config"]
        self.assertEqual((a4["diskType"], a4["accelerators"]), ("hyperdisk-balanced", [{"acceleratorType": "nvidia-b200", "acceleratorCount": "8"}]))
        self.assertEqual(self.refused("container", "PUT", p, f"{pools}/a4", {"diskType": "pd-ssd"}, "INVALID_ARGUMENT"),
                         "Invalid value for field 'diskType': 'pd-ssd'. pd-ssd disk type cannot be used by a4-highgpu-8g machine type: it boots from hyperdisk-balanced only.")
        config = pool["config"]
        bad = [("RDMA on a machine without RDMA NICs", dict(pool, config=dict(config, machineType="e2-standard-8", accelerators=[], gpuDirectConfig={})),
                "network rdma has the RDMA network profile us-central1-a-vpc-roce, and machine type e2-standard-8 has no NIC for it"),
               ("a Falcon network", dict(pool, networkConfig={"additionalNodeNetworkConfigs": [{"network": "falcon", "subnetwork": "falcon-0"}]}),
                "network falcon has the RDMA network profile us-central1-a-vpc-falcon, and machine type a3-ultragpu-8g has no NIC for it"),
               ("more RDMA networks than NICs", dict(pool, networkConfig={"additionalNodeNetworkConfigs": rdma + [{"network": "rdma", "subnetwork": "rdma-8"}]}),
                "Invalid value for field 'nodePool.networkConfig.additionalNodeNetworkConfigs': machine type a3-ultragpu-8g has 8 RDMA NICs, not 9."),
               ("two RDMA NICs on one subnetwork", dict(pool, networkConfig={"additionalNodeNetworkConfigs": rdma[:2] + rdma[:1]}),
                "Invalid value for field 'nodePool.networkConfig.additionalNodeNetworkConfigs[2].subnetwork': each RDMA NIC needs a subnetwork of its own."),
               ("a zone outside the profile's", dict(pool, locations=[ZONE, f"{REGION}-b"]),
                "Invalid value for field 'nodePool.networkConfig.additionalNodeNetworkConfigs[1].network': the node pool's locations must be zone "
                "us-central1-a only, not us-central1-b: network rdma is restricted to zone us-central1-a."),
               ("a second regular network", dict(pool, networkConfig={"additionalNodeNetworkConfigs": extra + [{"network": "gvnic-2", "subnetwork": "gvnic-2-sub"}]}),
                "an RDMA NIC cannot attach to a non-RDMA network"),
               ("GPUDirect-RDMA on A3 High", dict(pool, networkConfig={}, config=dict(config, machineType="a3-highgpu-8g", accelerators=[])),
                "Invalid value for field 'nodePool.config.gpuDirectConfig.gpuDirectStrategy': 'RDMA'. GPUDirect-RDMA is for machine types a3-ultragpu-8g, a4-highgpu-8g, not a3-highgpu-8g."),
               ("GPUDirect-RDMA on A4X", dict(pool, networkConfig={}, config=dict(config, machineType="a4x-highgpu-4g", accelerators=[], diskType="hyperdisk-balanced")),
                "GPUDirect-RDMA is for machine types"),
               ("an A4 on a Persistent Disk", dict(pool, networkConfig={}, config=dict(config, machineType="a4-highgpu-8g", accelerators=[], diskType="pd-balanced")),
                "Invalid value for field 'nodePool.config.diskType': 'pd-balanced'. pd-balanced disk type cannot be used by a4-highgpu-8g machine type: "
                "it boots from hyperdisk-balanced only.")]
        for why, body, words in bad:
            self.assertIn(words, self.refused("container", "POST", p, pools, {"nodePool": dict(body, name="x")}, "INVALID_ARGUMENT"), why)
        # The RDMA network is the nodes' additional one only.
        clusters = f"locations/{REGION}/clusters"
        self.assertEqual(self.refused("container", "POST", p, clusters, {"cluster": {"name": "on-rdma", "network": "rdma", "subnetwork": "rdma-0", "initialNodeCount": 1}}, "INVALID_ARGUMENT"),
                         'Network "rdma" has the RDMA network profile "us-central1-a-vpc-roce": the nodes\' primary interface needs a network without one.')
        # The RDMA subnetworks are in use while the pool is.
        failed = self.compute_wait(p, self.call("compute", "DELETE", p, f"regions/{REGION}/subnetworks/rdma-7", alt="json"))
        self.assertEqual(failed["error"]["errors"][0]["message"], f"The subnetwork resource 'projects/{p}/regions/{REGION}/subnetworks/rdma-7' is already being used by "
                                                                  f"'projects/{p}/{pools}/ultra'")
        listed = self.gke("GET", p, "clusters/c/nodePools")["nodePools"]
        self.assertEqual([n["config"].get("gpuDirectConfig") for n in listed], [None, {"gpuDirectStrategy": 2}, None])
        self.assertEqual(self.violations(p), [])

    def test_managed_dranet(self):
        p = "g-dranet"
        cluster = self.cluster(p, initialClusterVersion="1.34")
        self.assertEqual(cluster["currentMasterVersion"], "1.34.1-gke.1829001")
        rapid = self.cluster(p, "rapid", vpc=False, initialClusterVersion="-", releaseChannel={"channel": 1})
        self.assertEqual(rapid["currentMasterVersion"], "1.33.3-gke.1136000")  # the channels' defaults are not the newest versions
        pools = f"locations/{REGION}/clusters/c/nodePools"
        pool = {"name": "a4", "initialNodeCount": 2, "locations": [ZONE], "networkConfig": {"acceleratorNetworkProfile": "auto"},
                "config": {"machineType": "a4-highgpu-8g", "diskType": "hyperdisk-balanced", "gvnic": {"enabled": True}}}
        self.wait(p, self.gke("POST", p, "clusters/c/nodePools", {"nodePool": pool}))
        got = self.gke("GET", p, "clusters/c/nodePools/a4")
        self.assertEqual((got["status"], got["networkConfig"]["acceleratorNetworkProfile"]), (2, "auto"))
        for node in self.nodes(cluster, "a4"):
            self.assertEqual(node["metadata"]["labels"]["cloud.google.com/gke-networking-dra-driver"], "true")
        self.assertEqual(self.refused("container", "PUT", p, f"{pools}/a4", {"nodeNetworkConfig": {"acceleratorNetworkProfile": "other"}}, "INVALID_ARGUMENT"),
                         "Invalid value for field 'nodeNetworkConfig.acceleratorNetworkProfile': a node pool's accelerator network profile is immutable.")
        self.refused("container", "PUT", p, f"{pools}/system", {"nodeNetworkConfig": {"acceleratorNetworkProfile": "auto"}}, "INVALID_ARGUMENT")
        self.wait(p, self.gke("PUT", p, "clusters/c/nodePools/a4", {"labels": {"labels": {"role": "train"}}}))
        self.vpc(p, "gvnic", "192.168.100.0/24")
        field = "Invalid value for field 'nodePool.networkConfig.acceleratorNetworkProfile'"
        for why, body, words in (("another profile", dict(pool, networkConfig={"acceleratorNetworkProfile": "manual"}),
                                  f"{field}: 'manual'. The only valid accelerator network profile is \"auto\"."),
                                 ("a machine without RDMA NICs", dict(pool, config={"machineType": "a3-highgpu-8g"}), f"{field}: machine type a3-highgpu-8g has no RDMA NICs"),
                                 ("additional networks too", dict(pool, networkConfig={"acceleratorNetworkProfile": "auto", "additionalNodeNetworkConfigs": [{"network": "gvnic", "subnetwork": "gvnic-sub"}]}),
                                  "cannot be given with additionalNodeNetworkConfigs")):
            self.assertIn(words, self.refused("container", "POST", p, pools, {"nodePool": dict(body, name="x")}, "INVALID_ARGUMENT"), why)
        # A cluster before 1.34.1-gke.1829001, or without Dataplane V2, has no managed DRANET.
        self.cluster(p, "old", vpc=False, initialClusterVersion="1.34.0")
        self.assertEqual(self.refused("container", "POST", p, f"locations/{REGION}/clusters/old/nodePools", {"nodePool": pool}, "INVALID_ARGUMENT"),
                         f"{field}: an accelerator network profile needs GKE version 1.34.1-gke.1829001 or later; the cluster runs 1.34.0-gke.1662000.")
        self.cluster(p, "legacy", vpc=False, initialClusterVersion="1.34", networkConfig={"datapathProvider": 1})
        self.assertIn("ADVANCED_DATAPATH", self.refused("container", "POST", p, f"locations/{REGION}/clusters/legacy/nodePools", {"nodePool": pool}, "INVALID_ARGUMENT"))
        self.assertEqual(self.violations(p), [])

    def test_a4x_pools_placed_by_a_workload_policy(self):
        p = "g-a4x"
        cluster = self.cluster(p)
        compute = f"regions/{REGION}/resourcePolicies"
        for region, body in ((REGION, {"name": "rack", "workloadPolicy": {"type": "HIGH_THROUGHPUT", "acceleratorTopology": "1x72"}}),
                             (REGION, {"name": "spread", "workloadPolicy": {"type": "HIGH_AVAILABILITY"}}),
                             (REGION, {"name": "compact", "groupPlacementPolicy": {"collocation": "COLLOCATED"}}),
                             (REGION, {"name": "nightly", "instanceSchedulePolicy": {"timeZone": "UTC"}}),
                             ("europe-west4", {"name": "far", "workloadPolicy": {"type": "HIGH_THROUGHPUT", "acceleratorTopology": "1x72"}})):
            self.compute_wait(p, self.call("compute", "POST", p, f"regions/{region}/resourcePolicies", body, alt="json"))
        pools = f"locations/{REGION}/clusters/c/nodePools"
        pool = {"name": "rack", "initialNodeCount": 1, "locations": [ZONE], "placementPolicy": {"policyName": "rack"},
                "config": {"machineType": "a4x-highgpu-4g", "accelerators": [{"acceleratorType": "nvidia-gb200", "acceleratorCount": "4", "gpuDriverInstallationConfig": {"gpuDriverVersion": 2}}]}}
        self.wait(p, self.gke("POST", p, "clusters/c/nodePools", {"nodePool": pool}))
        got = self.gke("GET", p, "clusters/c/nodePools/rack")
        self.assertEqual((got["status"], got["placementPolicy"], got["config"]["diskType"]), (2, {"policyName": "rack"}, "hyperdisk-balanced"))
        [node] = self.nodes(cluster, "rack")
        self.assertEqual((node["metadata"]["labels"]["kubernetes.io/arch"], node["status"]["allocatable"]["nvidia.com/gpu"]), ("arm64", "4"))
        path = f"projects/{p}/regions/{REGION}/resourcePolicies/rack"
        self.wait(p, self.gke("POST", p, "clusters/c/nodePools", {"nodePool": dict(pool, name="rack-2", placementPolicy={"policyName": path})}))
        self.assertEqual(self.gke("GET", p, "clusters/c/nodePools/rack-2")["placementPolicy"], {"policyName": path})
        self.wait(p, self.gke("POST", p, "clusters/c/nodePools", {"nodePool": {"name": "close", "initialNodeCount": 1, "locations": [ZONE],
                                                                              "placementPolicy": {"type": 1, "policyName": "compact"}}}))
        self.assertEqual(self.gke("GET", p, "clusters/c/nodePools/close")["placementPolicy"], {"type": 1, "policyName": "compact"})
        field = "Invalid value for field 'nodePool.placementPolicy.policyName'"
        needs = f"{field}: machine type a4x-highgpu-4g needs a placement policyName naming a workload policy of type HIGH_THROUGHPUT with accelerator topology 1x72."
        for why, placement, words in (("no policy", {}, needs), ("a HIGH_AVAILABILITY policy", {"policyName": "spread"}, needs),
                                      ("a compact placement policy", {"type": 1, "policyName": "compact"}, needs),
                                      ("an unknown policy", {"policyName": "nope"}, f'{field}: resource policy "nope" not found in project "{p}", region "{REGION}".'),
                                      ("another region's", {"policyName": f"projects/{p}/regions/europe-west4/resourcePolicies/far"},
                                       f'{field}: resource policy "projects/{p}/regions/europe-west4/resourcePolicies/far" not found in project "{p}", region "{REGION}".'),
                                      ("not a placement policy", {"policyName": "nightly"}, f'{field}: resource policy "nightly" is not a placement policy')):
            self.assertEqual(self.refused("container", "POST", p, pools, {"nodePool": dict(pool, name="x", placementPolicy=placement)}, "INVALID_ARGUMENT")[:len(words)], words, why)
        # The policy is in use while a pool is placed by it.
        failed = self.compute_wait(p, self.call("compute", "DELETE", p, f"{compute}/rack", alt="json"))
        self.assertEqual(failed["error"]["errors"][0], {"code": "RESOURCE_IN_USE_BY_ANOTHER_RESOURCE",
                                                        "message": f"The resource_policy resource '{path}' is already being used by 'projects/{p}/{pools}/rack'"})
        for name in ("rack", "rack-2"):
            self.wait(p, self.gke("DELETE", p, f"clusters/c/nodePools/{name}"))
        self.assertNotIn("error", self.compute_wait(p, self.call("compute", "DELETE", p, f"{compute}/rack", alt="json")))
        self.assertEqual(self.violations(p), [])

    def test_stockout_leaves_the_pool_in_error_until_deleted(self):
        p = "g-stock"
        self.cluster(p)
        self.control(f"/_forge/faults?account={p}", [{"account": p, "match": "container:clusters.nodePools.create", "rate": 1.0, "kind": "failed_operation", "code": "GCE_STOCKOUT"}])
        try:
            op = self.wait(p, self.gke("POST", p, "clusters/c/nodePools", {"nodePool": {"name": "a3", "initialNodeCount": 2, "locations": [f"{REGION}-b"]}}))
        finally:
            self.control(f"/_forge/faults?account={p}", [])
        message = (f"The zone 'projects/{p}/zones/{REGION}-b' does not have enough resources available to fulfill the request. "
                   "Try a different zone, or try again later. (ZONE_RESOURCE_POOL_EXHAUSTED)")
        self.assertEqual((op["status"], op["error"], op["statusMessage"]), (DONE, {"code": 8, "message": message}, message))
        self.assertEqual(op["nodepoolConditions"], [{"code": 1, "message": message, "canonicalCode": 8}])  # GCE_STOCKOUT, RESOURCE_EXHAUSTED
        pool = self.gke("GET", p, "clusters/c/nodePools/a3")
        self.assertEqual((pool["status"], pool["statusMessage"]), (6, message))  # ERROR
        time.sleep(0.5)
        self.assertEqual(self.gke("GET", p, "clusters/c/nodePools/a3")["status"], 6)  # and stays so
        self.refused("container", "POST", p, f"locations/{REGION}/clusters/c/nodePools", {"nodePool": {"name": "a3", "initialNodeCount": 2}}, "ALREADY_EXISTS", 409)
        self.assertNotIn("error", self.wait(p, self.gke("DELETE", p, "clusters/c/nodePools/a3")))
        self.gke("GET", p, "clusters/c/nodePools/a3", want=404)
        # A cluster whose create fails is left in ERROR, with its pools, until deleted.
        self.control(f"/_forge/faults?account={p}", [{"account": p, "match": "container:clusters.create", "rate": 1.0, "kind": "failed_operation", "code": "GCE_QUOTA_EXCEEDED"}])
        try:
            op = self.wait(p, self.gke("POST", p, "clusters", {"cluster": {"name": "q", "network": "main", "subnetwork": "main-sub", "initialNodeCount": 1}}))
        finally:
            self.control(f"/_forge/faults?account={p}", [])
        self.assertEqual((op["error"]["code"], op["clusterConditions"][0]["code"]), (8, 3))  # RESOURCE_EXHAUSTED, GCE_QUOTA_EXCEEDED
        failed = self.gke("GET", p, "clusters/q")
        self.assertEqual((failed["status"], failed["nodePools"][0]["status"], failed["statusMessage"]), (5, 6, op["error"]["message"]))
        self.wait(p, self.gke("DELETE", p, "clusters/q"))
        self.gke("GET", p, "clusters/q", want=404)

    def test_set_size_labels_updates_and_delete(self):
        p = "g-change"
        cluster = self.cluster(p)
        op = self.gke("POST", p, "clusters/c/nodePools/system:setSize", {"nodeCount": 3})
        self.assertEqual(op["operationType"], 14)  # SET_NODE_POOL_SIZE
        self.assertEqual(self.gke("GET", p, "clusters/c/nodePools/system")["status"], 4)  # RECONCILING
        self.wait(p, op)
        self.assertEqual(self.gke("GET", p, "clusters/c")["currentNodeCount"], 3)
        # Compute shows the pool's instance group, whose target size is the pool's size per zone.
        url = self.gke("GET", p, "clusters/c/nodePools/system")["instanceGroupUrls"][0]
        group = self.call("compute", "GET", p, url.split(f"projects/{p}/", 1)[1])
        self.assertEqual((group["targetSize"], group["kind"]), (3, "compute#instanceGroupManager"))
        self.call("compute", "GET", p, f"zones/{ZONE}/instanceGroupManagers/nothing", want=404)
        self.wait(p, self.gke("POST", p, "clusters/c/nodePools/system:setAutoscaling", {"autoscaling": {"enabled": True, "minNodeCount": 1, "maxNodeCount": 5}}))
        self.assertEqual(self.gke("GET", p, "clusters/c/nodePools/system")["autoscaling"]["maxNodeCount"], 5)
        # Off, as the Rust client writes enabled=false (proto3 JSON leaves it out): the size stays.
        self.wait(p, self.gke("POST", p, "clusters/c/nodePools/system:setAutoscaling", {"autoscaling": {}}))
        self.assertFalse(self.gke("GET", p, "clusters/c/nodePools/system")["autoscaling"].get("enabled"))
        self.assertEqual(self.call("compute", "GET", p, url.split(f"projects/{p}/", 1)[1])["targetSize"], 3)
        self.refused("container", "POST", p, f"locations/{REGION}/clusters/c/nodePools/system:setAutoscaling", {}, "INVALID_ARGUMENT")
        self.refused("container", "POST", p, f"locations/{REGION}/clusters/c/nodePools/system:setAutoscaling", {"autoscaling": {"enabled": True, "minNodeCount": 5, "maxNodeCount": 1}}, "INVALID_ARGUMENT")
        stale = self.refused("container", "POST", p, f"locations/{REGION}/clusters/c:setResourceLabels", {"resourceLabels": {"a": "b"}, "labelFingerprint": "00000000"}, "FAILED_PRECONDITION")
        self.assertIn("labelFingerprint", stale)
        op = self.gke("POST", p, "clusters/c:setResourceLabels", {"resourceLabels": {"forge-stack": "s", "team": "ml"}, "labelFingerprint": cluster["labelFingerprint"]})
        self.assertEqual(op["operationType"], 12)  # SET_LABELS
        self.wait(p, op)
        changed = self.gke("GET", p, "clusters/c")
        self.assertEqual(changed["resourceLabels"], {"forge-stack": "s", "team": "ml"})
        self.assertNotEqual(changed["labelFingerprint"], cluster["labelFingerprint"])
        self.assertIn("at most one field", self.refused("container", "PUT", p, f"locations/{REGION}/clusters/c", {"update": {"desiredReleaseChannel": {"channel": 3}, "desiredLocations": [ZONE]}}, "INVALID_ARGUMENT"))
        self.wait(p, self.gke("PUT", p, "clusters/c", {"update": {"desiredReleaseChannel": {"channel": 3}}}))
        self.assertEqual(self.gke("GET", p, "clusters/c")["releaseChannel"], {"channel": 3})
        self.wait(p, self.gke("PUT", p, "clusters/c", {"update": {"desiredAddonsConfig": {"gcsFuseCsiDriverConfig": {"enabled": False}}}}))
        self.assertEqual(self.gke("GET", p, "clusters/c")["addonsConfig"]["gcsFuseCsiDriverConfig"], {"enabled": False})
        op = self.gke("DELETE", p, "clusters/c")
        self.assertEqual((op["operationType"], self.gke("GET", p, "clusters/c")["status"]), (2, 4))  # DELETE_CLUSTER, STOPPING
        self.wait(p, op)
        self.gke("GET", p, "clusters/c", want=404)
        self.assertEqual(self.gke("GET", p, "clusters"), {})
        # The network is free again.
        self.assertNotIn("error", self.compute_wait(p, self.call("compute", "DELETE", p, f"regions/{REGION}/subnetworks/main-sub", alt="json")))

    def test_multi_networking_kinds_are_served_only_while_it_is_on(self):
        p = "g-multi"
        multi = self.cluster(p)
        status, groups = self.kube(multi, "/apis")
        self.assertIn("networking.gke.io", [g["name"] for g in groups["groups"]])
        status, resources = self.kube(multi, "/apis/networking.gke.io/v1")
        self.assertEqual((status, sorted(r["kind"] for r in resources["resources"])), (200, ["GKENetworkParamSet", "Network"]))
        plain = self.cluster(p, "plain", vpc=False, networkConfig={"datapathProvider": 2})
        _, groups = self.kube(plain, "/apis")
        self.assertNotIn("networking.gke.io", [g["name"] for g in groups["groups"]])
        self.assertEqual(self.kube(plain, "/apis/networking.gke.io/v1/networks")[0], 404)
        # Turned on by an update, served from when it is done.
        self.wait(p, self.gke("PUT", p, "clusters/plain", {"update": {"desiredEnableMultiNetworking": True}}))
        status, networks = self.kube(plain, "/apis/networking.gke.io/v1/networks")
        self.assertEqual((status, networks["items"]), (200, []))

    def test_versions_never_go_back_a_minor_version_and_channels_keep_auto_upgrade(self):
        p = "g-version"
        self.cluster(p)
        self.assertIn("earlier minor version", self.refused("container", "PUT", p, f"locations/{REGION}/clusters/c",
                                                            {"update": {"desiredMasterVersion": "1.31"}}, "INVALID_ARGUMENT"))
        self.assertIn("earlier minor version", self.refused("container", "PUT", p, f"locations/{REGION}/clusters/c/nodePools/system",
                                                            {"nodeVersion": "1.31"}, "INVALID_ARGUMENT"))
        self.assertIn("auto-upgrade cannot be turned off", self.refused("container", "POST", p, f"locations/{REGION}/clusters/c/nodePools/system:setManagement",
                                                                        {"management": {"autoRepair": True}}, "INVALID_ARGUMENT"))
        # An empty release channel is none: its pools may keep their version.
        none = self.cluster(p, "pinned", vpc=False, releaseChannel={})
        self.assertEqual(none["releaseChannel"], {})
        self.wait(p, self.gke("POST", p, "clusters/pinned/nodePools/system:setManagement", {"management": {"autoRepair": True}}))
        self.assertEqual(self.gke("GET", p, "clusters/pinned/nodePools/system")["management"], {"autoRepair": True})

    def test_cluster_checks_and_error_bodies(self):
        p = "g-check"
        self.vpc(p, "main", "10.0.0.0/20", [("pods", "10.64.0.0/14")])
        clusters = f"locations/{REGION}/clusters"
        good = {"name": "c", "network": "main", "subnetwork": "main-sub", "initialNodeCount": 1}
        for why, cluster, words in (("a long name", dict(good, name="c" * 41), "'cluster.name'"),
                                    ("no network", dict(good, network="nope"), f'Project "{p}" has no network named "nope".'),
                                    ("no subnetwork", dict(good, subnetwork=None), "cluster.subnetwork"),
                                    ("no pods range", dict(good, ipAllocationPolicy={"clusterSecondaryRangeName": "nope"}), 'Pod secondary range "nope" not found'),
                                    ("an old version", dict(good, initialClusterVersion="1.20"), 'Master version "1.20" is unsupported.'),
                                    ("no nodes", dict(good, initialNodeCount=0), "initial_node_count must be greater than zero"),
                                    ("multi-networking without Dataplane V2", dict(good, networkConfig={"enableMultiNetworking": True}), "ADVANCED_DATAPATH"),
                                    ("a bad enum", dict(good, networkConfig={"datapathProvider": "FAST"}), "cluster.network_config.datapath_provider"),
                                    ("a bad label", dict(good, resourceLabels={"Bad": "x"}), "label")):
            self.assertIn(words, self.refused("container", "POST", p, clusters, {"cluster": cluster}, "INVALID_ARGUMENT"), why)
        self.assertIn('Unknown name "node_pool"', self.refused("container", "POST", p, clusters, {"cluster": good, "node_pool": {}}, "INVALID_ARGUMENT"))
        missing = self.call("container", "GET", p, f"{clusters}/nope", want=404)["error"]
        self.assertEqual((missing["status"], missing["message"]), ("NOT_FOUND", f"Not found: projects/{p}/{clusters}/nope."))
        self.call("container", "GET", p, f"locations/{REGION}/operations/operation-nope", want=404)
        self.call("container", "GET", p, f"{clusters}/nope/nodePools", want=404)
        self.call("container", "POST", p, clusters, {"cluster": good})
        self.assertEqual(self.refused("container", "POST", p, clusters, {"cluster": good}, "ALREADY_EXISTS", 409), f"Already exists: projects/{p}/{clusters}/c.")

    def test_faults_counter_and_projects(self):
        p = "g-fault"
        self.control(f"/_forge/reset?account={p}")
        self.cluster(p)
        self.control(f"/_forge/faults?account={p}", [{"account": p, "match": "container:clusters.get", "rate": 1.0, "kind": "5xx"}])
        status, body = self.send("GET", f"/container/v1/projects/{p}/locations/{REGION}/clusters/c")
        self.assertEqual((status, body["error"]["status"]), (503, "UNAVAILABLE"))
        # The answer is lost, the pool is made: a retried create finds it.
        self.control(f"/_forge/faults?account={p}", [{"account": p, "match": "container:clusters.nodePools.create", "rate": 1.0, "kind": "5xx", "when": "after"}])
        status, _ = self.send("POST", f"/container/v1/projects/{p}/locations/{REGION}/clusters/c/nodePools", {"nodePool": {"name": "lost", "initialNodeCount": 1}})
        self.control(f"/_forge/faults?account={p}", [])
        self.assertEqual(status, 503)
        self.assertEqual(self.gke("GET", p, "clusters/c/nodePools/lost")["status"], 1)
        self.refused("container", "POST", p, f"locations/{REGION}/clusters/c/nodePools", {"nodePool": {"name": "lost", "initialNodeCount": 1}}, "ALREADY_EXISTS", 409)
        calls = self.control(f"/_forge/calls?account={p}")
        self.assertEqual((calls["container:clusters.create"], calls["container:clusters.nodePools.create"], calls["fault:container:clusters.get"],
                          calls["fault:container:clusters.nodePools.create"]), (1, 2, 1, 1))
        self.assertGreaterEqual(calls["container:operations.get"], 1)
        # Another project sees nothing of it.
        self.control("/_forge/reset?account=g-other")
        self.call("container", "GET", "g-other", f"locations/{REGION}/clusters/c", want=404)
        self.assertEqual(self.control("/_forge/calls?account=g-other"), {"container:clusters.get": 1})


class Filestore(Client, unittest.TestCase):
    def file(self, method, project, path, body=None, want=200, location=ZONE, **query):
        return self.call("file", method, project, f"locations/{location}/{path}", body, want, **query)

    def wait(self, op):
        """Poll as the client's poller does: operations.get by the operation's name until done."""
        for _ in range(200):
            if op.get("done"):
                return op
            time.sleep(0.05)
            status, op = self.send("GET", f"/file/v1/{op['name']}")
            self.assertEqual(status, 200, op)
        self.fail(f"operation never ended: {op}")

    def instance(self, project, name, tier, capacity, location=ZONE, **extra):
        body = {"tier": tier, "fileShares": [{"name": "share", "capacityGb": str(capacity)}], "networks": [{"network": "main"}], **extra}
        return self.file("POST", project, "instances", body, location=location, instanceId=name)

    def test_instance_lifecycle(self):
        p = "f-life"
        self.vpc(p, "main", "10.0.0.0/20")
        op = self.instance(p, "fs", 3, 1024, labels={"forge-stack": "s"}, networks=[{"network": "main", "modes": [1], "connectMode": 1}])  # BASIC_HDD
        self.assertRegex(op["name"], rf"^projects/{p}/locations/{ZONE}/operations/operation-")
        self.assertEqual((op["metadata"]["@type"], op["metadata"]["verb"], op["metadata"]["target"], op.get("done")),
                         ("type.googleapis.com/google.cloud.common.OperationMetadata", "create", f"projects/{p}/locations/{ZONE}/instances/fs", None))
        self.assertEqual(self.file("GET", p, "instances/fs")["state"], 1)  # CREATING
        done = self.wait(op)
        instance = done["response"]
        self.assertEqual((instance["@type"], instance["state"], instance["tier"]), ("type.googleapis.com/google.cloud.filestore.v1.Instance", 2, 3))
        self.assertEqual(instance["fileShares"], [{"name": "share", "capacityGb": "1024"}])
        self.assertEqual((instance["networks"][0]["modes"], instance["networks"][0]["connectMode"], len(instance["networks"][0]["ipAddresses"])), ([1], 1, 1))
        got = self.file("GET", p, "instances/fs", alt="json")
        self.assertEqual((got["state"], got["tier"], got["name"], got["labels"]), ("READY", "BASIC_HDD", f"projects/{p}/locations/{ZONE}/instances/fs", {"forge-stack": "s"}))
        self.assertEqual([i["name"] for i in self.file("GET", p, "instances", location="-")["instances"]], [got["name"]])
        # Basic tiers grow and never shrink.
        grown = self.wait(self.file("PATCH", p, "instances/fs", {"name": got["name"], "fileShares": [{"name": "share", "capacityGb": "2048"}]}, updateMask="fileShares"))
        self.assertEqual(grown["response"]["fileShares"][0]["capacityGb"], "2048")
        self.assertIn("cannot shrink", self.refused("file", "PATCH", p, f"locations/{ZONE}/instances/fs", {"fileShares": [{"name": "share", "capacityGb": "1024"}]}, "INVALID_ARGUMENT", updateMask="file_shares"))
        self.refused("file", "PATCH", p, f"locations/{ZONE}/instances/fs", {"tier": 4}, "INVALID_ARGUMENT", updateMask="tier")
        gone = self.wait(self.file("DELETE", p, "instances/fs", force="false"))
        self.assertEqual(gone["response"], {"@type": "type.googleapis.com/google.protobuf.Empty"})
        missing = self.file("GET", p, "instances/fs", want=404)["error"]
        self.assertEqual((missing["status"], missing["message"]), ("NOT_FOUND", f"Resource 'projects/{p}/locations/{ZONE}/instances/fs' was not found"))

    def test_tiers_capacities_locations_and_networks(self):
        p = "f-check"
        self.vpc(p, "main", "10.0.0.0/20")
        for why, args, extra, words in (("BASIC_SSD below 2.5 TiB", ("BASIC_SSD", 2048), {}, "takes 2560 to"),
                                        ("ZONAL off its steps", ("ZONAL", 1100), {}, "steps of 256"),
                                        ("ZONAL off its large steps", ("ZONAL", 12000), {}, "steps of 2560"),
                                        ("REGIONAL in a zone", ("REGIONAL", 1024), {}, "needs a region"),
                                        ("BASIC_HDD in a region", ("BASIC_HDD", 1024, REGION), {}, "needs a zone"),
                                        ("an unknown network", ("BASIC_HDD", 1024), {"networks": [{"network": "nope"}]}, "network 'nope' does not exist"),
                                        ("two shares", ("ZONAL", 1024), {"fileShares": [{"name": "a", "capacityGb": "1024"}, {"name": "b", "capacityGb": "1024"}]}, "exactly one file share"),
                                        ("a /29 for ZONAL", ("ZONAL", 1024), {"networks": [{"network": "main", "reservedIpRange": "10.9.0.0/29"}]}, "/26"),
                                        ("protection on a basic tier", ("BASIC_HDD", 1024), {"deletionProtectionEnabled": True}, "deletion protection"),
                                        ("no tier", ("TIER_UNSPECIFIED", 1024), {}, "instance.tier")):
            name, capacity, location = args[0].lower().replace("_", "-"), args[1], args[2] if len(args) > 2 else ZONE
            status, body = self.send("POST", f"/file/v1/projects/{p}/locations/{location}/instances", {"tier": args[0], "fileShares": [{"name": "share", "capacityGb": str(capacity)}], "networks": [{"network": "main"}], **extra}, instanceId=name)
            self.assertEqual((status, body["error"]["status"]), (400, "INVALID_ARGUMENT"), why)
            self.assertIn(words, body["error"]["message"], why)
        self.file("POST", p, "instances", {}, want=400, instanceId="Bad_Id")
        op = self.instance(p, "big", "ZONAL", 12800, networks=[{"network": "main", "reservedIpRange": "10.9.0.0/26"}])
        self.assertEqual(self.wait(op)["response"]["networks"][0]["ipAddresses"], ["10.9.0.2"])
        self.wait(self.instance(p, "shared", "REGIONAL", 1024, location=REGION))
        # ZONAL can shrink within its range.
        self.wait(self.file("PATCH", p, "instances/big", {"fileShares": [{"name": "share", "capacityGb": "10240"}]}, updateMask="fileShares"))
        self.assertEqual(self.file("GET", p, "instances/big")["fileShares"][0]["capacityGb"], "10240")
        listed = self.file("GET", p, "instances", location="-", pageSize=1)
        self.assertEqual(len(listed["instances"]), 1)
        self.assertEqual(len(self.file("GET", p, "instances", location="-", pageToken=listed["nextPageToken"])["instances"]), 1)
        # The network is in use while an instance is on it.
        failed = self.compute_wait(p, self.call("compute", "DELETE", p, "global/networks/main", alt="json"))
        self.assertEqual(failed["error"]["errors"][0]["code"], "RESOURCE_IN_USE_BY_ANOTHER_RESOURCE")

    def test_deletion_protection_and_one_operation_at_a_time(self):
        p = "f-protect"
        self.vpc(p, "main", "10.0.0.0/20")
        op = self.instance(p, "fs", 7, 1024, deletionProtectionEnabled=True, deletionProtectionReason="data")  # ZONAL
        busy = self.refused("file", "PATCH", p, f"locations/{ZONE}/instances/fs", {"description": "x"}, "FAILED_PRECONDITION", updateMask="description")
        self.assertIn(op["name"], busy)
        self.wait(op)
        self.assertIn("deletion protection", self.refused("file", "DELETE", p, f"locations/{ZONE}/instances/fs", None, "FAILED_PRECONDITION"))
        self.wait(self.file("PATCH", p, "instances/fs", {"deletionProtectionEnabled": False}, updateMask="deletionProtectionEnabled,deletionProtectionReason"))
        self.assertNotIn("deletionProtectionEnabled", self.file("GET", p, "instances/fs"))
        self.wait(self.file("DELETE", p, "instances/fs"))

    def test_failed_create_counter_and_projects(self):
        p = "f-fail"
        self.control(f"/_forge/reset?account={p}")
        self.vpc(p, "main", "10.0.0.0/20")
        self.control(f"/_forge/faults?account={p}", [{"account": p, "match": "file:instances.create", "rate": 1.0, "kind": "failed_operation"}])
        try:
            failed = self.wait(self.instance(p, "fs", "BASIC_HDD", 1024))
        finally:
            self.control(f"/_forge/faults?account={p}", [])
        self.assertEqual((failed["error"]["code"], "response" in failed), (13, False))  # INTERNAL
        self.assertEqual(self.file("GET", p, "instances/fs")["state"], 6)  # ERROR
        self.wait(self.file("DELETE", p, "instances/fs"))
        self.wait(self.instance(p, "fs", "BASIC_HDD", 1024))
        self.file("GET", "f-other", "instances/fs", want=404)
        self.control(f"/_forge/faults?account={p}", [{"account": p, "match": "file:instances.get", "rate": 1.0}])
        status, body = self.send("GET", f"/file/v1/projects/{p}/locations/{ZONE}/instances/fs")
        self.control(f"/_forge/faults?account={p}", [])
        self.assertEqual((status, body["error"]["status"]), (429, "RESOURCE_EXHAUSTED"))
        calls = self.control(f"/_forge/calls?account={p}")
        self.assertEqual((calls["file:instances.create"], calls["file:instances.delete"], calls["file:instances.get"], calls["fault:file:instances.get"]), (2, 1, 2, 1))
        self.assertGreaterEqual(calls["file:operations.get"], 2)


if __name__ == "__main__":
    unittest.main()
