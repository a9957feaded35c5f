"""Tests of the discovery-document check of Google requests (emulator/google_model.py): requests
as forge's Rust clients send them pass (recorded from the forge binary's traffic: Compute's
`$apiVersion`, enums as numbers from the GKE and Filestore clients, int64 as strings, the GCS
crate's multipart uploads with their checksums part), and a request off the document gets
Google's answer for each kind of mistake, in each API's error form. The last class sends GKE and
Filestore mistakes through the launcher (Compute's and Cloud Storage's are in their smoke tests).
Runs with the venv's packages: `python -m unittest`."""

import json
import unittest
import urllib.error
import urllib.parse
import urllib.request

from .emulator import google_model
from .emulator.gcp_compute import Compute
from .emulator.gcp_container import Container
from .emulator.gcp_filestore import Filestore
from .emulator.gcs import Storage
from .launched import Launched

COMPUTE = Compute()
CONTAINER, FILESTORE, STORAGE = Container(COMPUTE), Filestore(COMPUTE), Storage()
RUST = "%24alt=json%3Benum-encoding%3Dint"  # what the GKE and Filestore clients add to every call
LOCATION = "/container/v1/projects/p/locations/us-central1"
# A future reservation in calendar mode as google-cloud-compute-v1 sends it (int64 as strings).
FUTURE_RESERVATION = {"name": "fr", "autoDeleteAutoCreatedReservations": True, "deploymentType": "DENSE", "planningStatus": "SUBMITTED",
                      "reservationMode": "CALENDAR", "reservationName": "fr-res", "specificReservationRequired": True,
                      "specificSkuProperties": {"instanceProperties": {"machineType": "a4-highgpu-8g"}, "totalCount": "16"},
                      "timeWindow": {"startTime": "2027-01-10T00:00:00Z", "duration": {"seconds": "604800"}}}
BOUNDARY = "989510627fc6ae77"


def environ(method, uri, content_type="application/json"):
    path, _, query = uri.partition("?")
    return {"REQUEST_METHOD": method, "REQUEST_URI": uri, "PATH_INFO": urllib.parse.unquote(path), "QUERY_STRING": query,
            "CONTENT_TYPE": content_type}


def check(api, method, uri, body=None, content_type="application/json"):
    data = body if isinstance(body, bytes) else json.dumps(body).encode() if body is not None else b""
    return google_model.check(api, environ(method, uri, content_type), data)


def multipart(metadata, media, checksums=None):
    """A multipart/related upload as the GCS crate sends it: metadata, media, checksums."""
    parts = [(b'name="metadata"\r\nContent-Type: application/json; charset=utf-8', json.dumps(metadata).encode()), (b'name="media"', media)]
    if checksums is not None:
        parts.append((b'name="checksums"\r\nContent-Type: application/json; charset=utf-8', json.dumps(checksums).encode()))
    body = b"".join(b"--" + BOUNDARY.encode() + b"\r\nContent-Disposition: form-data; " + head + b"\r\n\r\n" + content + b"\r\n" for head, content in parts)
    return body + b"--" + BOUNDARY.encode() + b"--\r\n", f"multipart/related; boundary={BOUNDARY}"


class RealClientsPass(unittest.TestCase):
    def test_compute(self):
        query = "requestId=41f57adf-c494-40b2-af26-83d62b68a491&%24alt=json&%24apiVersion=2026-09-01"
        for method, path, body in [
            ("POST", "global/networks", {"autoCreateSubnetworks": False, "description": "d", "mtu": 8244, "name": "n", "routingConfig": {"routingMode": "REGIONAL"}}),
            ("POST", "global/firewalls", {"allowed": [{"IPProtocol": "all"}], "direction": "INGRESS", "disabled": False, "name": "f",
                                          "network": "https://www.googleapis.com/compute/v1/projects/p/global/networks/n", "priority": 1000, "sourceRanges": ["192.168.2.0/24"]}),
            ("PUT", "global/firewalls/ssh", {"allowed": [{"IPProtocol": "tcp", "ports": ["22", "443"]}], "name": "ssh", "network": "projects/p/global/networks/net", "targetTags": ["login"]}),
            ("POST", "regions/us-central1/routers", {"name": "r", "network": "n", "region": "us-central1",
                                                     "nats": [{"name": "nat", "natIpAllocateOption": "AUTO_ONLY", "sourceSubnetworkIpRangesToNat": "ALL_SUBNETWORKS_ALL_IP_RANGES"}]}),
            ("POST", "regions/us-central1/subnetworks/s/setPrivateIpGoogleAccess", {"privateIpGoogleAccess": True}),
            ("POST", "zones/us-central1-b/futureReservations", FUTURE_RESERVATION),
            ("POST", "zones/us-central1-b/futureReservations/fr/cancel", None),
            ("DELETE", "zones/us-central1-b/futureReservations/fr", None),
        ]:
            self.assertIsNone(check(COMPUTE, method, f"/compute/v1/projects/p/{path}?{query}", body), path)
        for path in ("global/operations/operation-1", "zones/us-central1-c/instanceGroupManagers/gke-nemo-a3-grp",
                     "global/operations?filter=%28operationType+eq+insert%29&maxResults=500&pageToken=abc&orderBy=name",
                     "zones/us-central1-b/operations/operation-1", "zones/us-central1-b/operations?filter=%28status+ne+DONE%29",
                     "zones/us-central1-b/futureReservations/fr", "zones/us-central1-b/futureReservations?filter=name+eq+fr&maxResults=500",
                     "zones/us-central1-b/reservations/fr-res", "zones/us-central1-b/reservations?pageToken=abc"):
            self.assertIsNone(check(COMPUTE, "GET", f"/compute/v1/projects/p/{path}"), path)

    def test_gke_sends_enums_as_numbers_and_int64_as_strings(self):
        cluster = {"cluster": {"name": "nemo", "network": "nemo-a3", "addonsConfig": {"gcpFilestoreCsiDriverConfig": {"enabled": True}, "gcsFuseCsiDriverConfig": {}},
                               "nodePools": [{"name": "system", "config": {"machineType": "e2-standard-8", "resourceLabels": {"forge-stack": "s"}},
                                              "initialNodeCount": 4, "locations": ["us-central1-c"], "management": {"autoUpgrade": True, "autoRepair": True}}],
                               "ipAllocationPolicy": {"useIpAliases": True, "clusterSecondaryRangeName": "pods"},
                               "networkConfig": {"datapathProvider": 2, "enableMultiNetworking": True}, "releaseChannel": {"channel": 2},
                               "workloadIdentityConfig": {"workloadPool": "p.svc.id.goog"}}}
        self.assertIsNone(check(CONTAINER, "POST", f"{LOCATION}/clusters?{RUST}", cluster))
        pool = {"nodePool": {"name": "a3", "config": {"machineType": "a3-highgpu-8g", "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": 1}],
                                                      "accelerators": [{"acceleratorCount": "8", "acceleratorType": "nvidia-h100-80gb", "gpuDriverInstallationConfig": {"gpuDriverVersion": 3}}]},
                             "initialNodeCount": 4, "placementPolicy": {"type": 1},
                             "networkConfig": {"additionalNodeNetworkConfigs": [{"network": "nemo-gpu-1", "subnetwork": "nemo-gpu-1-subnet"}]}}}
        self.assertIsNone(check(CONTAINER, "POST", f"{LOCATION}/clusters/nemo/nodePools?{RUST}", pool))
        self.assertIsNone(check(CONTAINER, "POST", f"{LOCATION}/clusters/nemo/nodePools/a3:setSize?{RUST}", {"nodeCount": 2}))
        self.assertIsNone(check(CONTAINER, "GET", f"/container/v1/projects/p/locations/-/operations?{RUST}"))

    def test_filestore(self):
        instance = {"description": "d", "tier": 6, "labels": {"project": "nemo"}, "fileShares": [{"name": "share", "capacityGb": "1024"}],
                    "networks": [{"network": "nemo-a3", "modes": [1]}]}
        located = "/file/v1/projects/p/locations/us-central1/instances"
        self.assertIsNone(check(FILESTORE, "POST", f"{located}?instanceId=shared&{RUST}", instance))
        grown = {"name": "projects/p/locations/us-central1/instances/shared", "fileShares": [{"name": "share", "capacityGb": "1280"}]}
        self.assertIsNone(check(FILESTORE, "PATCH", f"{located}/shared?updateMask=fileShares&{RUST}", grown))

    def test_cloud_storage(self):
        body, ctype = multipart({"contentType": "application/json"}, b'{"id": "lock"}', {"crc32c": "vPcL8A=="})
        uri = "/upload/storage/v1/b/s/o?uploadType=multipart&name=stack%2Fstate.json.lock&ifGenerationMatch=0"
        self.assertIsNone(check(STORAGE, "POST", uri, body, ctype))
        self.assertIsNone(check(STORAGE, "POST", "/upload/storage/v1/b/s/o?uploadType=media&name=k", b"\x00not json", "application/octet-stream"))
        self.assertIsNone(check(STORAGE, "GET", "/storage/v1/b/s/o/stack%2Fstate.json?alt=media&generation=17"))
        self.assertIsNone(check(STORAGE, "DELETE", "/storage/v1/b/s/o/a%2Fb?ifGenerationMatch=3"))
        self.assertIsNone(check(STORAGE, "POST", "/storage/v1/b?project=p", {"name": "s", "versioning": {"enabled": True}}))


class OffTheDocument(unittest.TestCase):
    def assertRefused(self, answer, message, field="-"):
        """A 400 with `message`, in the API's error form (`field`: the BadRequest detail's field
        for GKE and Filestore, None for none)."""
        self.assertIsNotNone(answer)
        status, ctype, text, violation = answer
        error = json.loads(text)["error"]
        self.assertEqual((status, ctype, error["code"], error["message"]), (400, "application/json; charset=UTF-8", 400, message))
        self.assertIn(message, violation)
        self.assertEqual(error["errors"][0]["reason"], "invalid")
        if field == "-":
            self.assertNotIn("status", error)
            self.assertNotIn("details", error)
        else:
            self.assertEqual(error["status"], "INVALID_ARGUMENT")
            wanted = {"description": message, **({"field": field} if field else {})}
            self.assertEqual(error["details"], [{"@type": "type.googleapis.com/google.rpc.BadRequest", "fieldViolations": [wanted]}])

    def test_no_such_method_is_googles_html_404(self):
        for api, method, uri in [(COMPUTE, "GET", "/compute/v1/projects/p/global/nothings"),
                                 (COMPUTE, "PATCH", "/compute/v1/projects/p/global/operations/op"),  # a path of another verb
                                 (COMPUTE, "PUT", "/compute/v1/projects/p/zones/z/reservations/r"),
                                 (CONTAINER, "POST", f"{LOCATION}/clusters/c:explode"),
                                 (FILESTORE, "GET", "/file/v2/projects/p/locations/l/instances"),
                                 (STORAGE, "GET", "/storage/v1/b/s/x")]:
            status, ctype, text, violation = check(api, method, uri)
            self.assertEqual((status, ctype), (404, "text/html; charset=UTF-8"), uri)
            self.assertIn(f"The requested URL <code>{uri}</code> was not found on this server.", text)
            self.assertIn(f"no method {method} {uri}", violation)

    def test_unknown_query_parameters(self):
        for api, uri, field in [(COMPUTE, "/compute/v1/projects/p/global/networks?%24alt=json&pageSize=5", "-"),
                                (CONTAINER, f"{LOCATION}/clusters?{RUST}&pageSize=5", None),
                                (FILESTORE, "/file/v1/projects/p/locations/l/instances/i?pageSize=5", None),
                                (STORAGE, "/storage/v1/b/s/o?pageSize=5", "-")]:
            self.assertRefused(check(api, "GET", uri), 'Invalid JSON payload received. Unknown name "pageSize": Cannot bind query parameter. '
                               "Field 'pageSize' could not be found in request message.", field)
        # Both names of a parameter bind, and system parameters with or without `$`.
        self.assertIsNone(check(FILESTORE, "GET", "/file/v1/projects/p/locations/l/instances?page_size=5&pageToken=t&prettyPrint=false&%24fields=x"))

    def test_query_values_of_the_wrong_type(self):
        self.assertRefused(check(COMPUTE, "GET", "/compute/v1/projects/p/global/firewalls?maxResults=ten"),
                           "Invalid value at 'max_results' (TYPE_UINT32), \"ten\"")
        self.assertRefused(check(STORAGE, "GET", "/storage/v1/b/s/o?versions=yes"), "Invalid value at 'versions' (TYPE_BOOL), \"yes\"")
        self.assertRefused(check(STORAGE, "GET", "/storage/v1/b/s/o/k?ifGenerationMatch=x1"), "Invalid value at 'if_generation_match' (TYPE_INT64), \"x1\"")

    def test_unknown_body_fields_at_their_proto_path(self):
        pool = {"cluster": {"name": "c", "nodePools": [{"name": "p", "config": {"machineType": "m"}, "foo": 1}]}}
        self.assertRefused(check(CONTAINER, "POST", f"{LOCATION}/clusters?{RUST}", pool),
                           "Invalid JSON payload received. Unknown name \"foo\" at 'cluster.node_pools[0]': Cannot find field.", "cluster.node_pools[0]")
        self.assertRefused(check(CONTAINER, "POST", f"{LOCATION}/clusters", {"cluster": {"name": "c"}, "nodePool": {}}),
                           'Invalid JSON payload received. Unknown name "nodePool": Cannot find field.', None)
        self.assertRefused(check(FILESTORE, "POST", "/file/v1/projects/p/locations/l/instances?instanceId=i", {"tier": "BASIC_HDD", "size": 1}),
                           "Invalid JSON payload received. Unknown name \"size\" at 'instance': Cannot find field.", "instance")
        self.assertRefused(check(COMPUTE, "POST", "/compute/v1/projects/p/regions/r/subnetworks", {"name": "s", "secondaryIpRanges": [{"name": "pods"}]}),
                           "Invalid JSON payload received. Unknown name \"name\" at 'resource.secondary_ip_ranges[0]': Cannot find field.")
        self.assertRefused(check(COMPUTE, "POST", "/compute/v1/projects/p/zones/z/futureReservations", dict(FUTURE_RESERVATION, specificSkuProperties={"count": "1"})),
                           "Invalid JSON payload received. Unknown name \"count\" at 'resource.specific_sku_properties': Cannot find field.")
        # Output-only fields pass, as do proto names.
        self.assertIsNone(check(COMPUTE, "POST", "/compute/v1/projects/p/global/networks", {"name": "n", "selfLink": "x", "id": "1", "auto_create_subnetworks": False}))

    def test_values_of_the_wrong_type(self):
        cases = [
            ({"cluster": {"initialNodeCount": 2**31}}, "Invalid value at 'cluster.initial_node_count' (TYPE_INT32), 2147483648", "cluster.initial_node_count"),
            ({"cluster": {"initialNodeCount": "three"}}, "Invalid value at 'cluster.initial_node_count' (TYPE_INT32), \"three\"", "cluster.initial_node_count"),
            ({"cluster": {"name": 5}}, "Invalid value at 'cluster.name' (TYPE_STRING), 5", "cluster.name"),
            ({"cluster": {"enableTpu": "true"}}, "Invalid value at 'cluster.enable_tpu' (TYPE_BOOL), \"true\"", "cluster.enable_tpu"),
            ({"cluster": {"resourceLabels": {"a": 1}}}, "Invalid value at 'cluster.resource_labels[0].value' (TYPE_STRING), 1", "cluster.resource_labels[0].value"),
            ({"cluster": {"locations": "us-central1-a"}}, "Invalid value at 'cluster.locations' (TYPE_STRING), \"us-central1-a\"", "cluster.locations"),
            ({"cluster": {"name": ["c"]}}, "Invalid JSON payload received. Unknown name \"name\" at 'cluster': Proto field is not repeating, cannot start list.", "cluster"),
            ({"cluster": {"name": {"first": "c"}}}, "Invalid value at 'cluster' (name), Starting an object on a scalar field", "cluster"),
            ({"cluster": "c"}, "Invalid value at 'cluster' (type.googleapis.com/google.container.v1.Cluster), \"c\"", "cluster"),
        ]
        for body, message, field in cases:
            self.assertRefused(check(CONTAINER, "POST", f"{LOCATION}/clusters?{RUST}", body), message, field)
        self.assertRefused(check(FILESTORE, "POST", "/file/v1/projects/p/locations/l/instances?instanceId=i", {"fileShares": [{"capacityGb": "1e3"}]}),
                           "Invalid value at 'instance.file_shares[0].capacity_gb' (TYPE_INT64), \"1e3\"", "instance.file_shares[0].capacity_gb")
        self.assertRefused(check(COMPUTE, "POST", "/compute/v1/projects/p/global/networks", {"name": "n", "mtu": 1.5}),
                           "Invalid value at 'resource.mtu' (TYPE_INT32), 1.5")
        # 64-bit integers as numbers or strings, 32-bit ones as strings too; null is the default.
        self.assertIsNone(check(FILESTORE, "POST", "/file/v1/projects/p/locations/l/instances?instanceId=i", {"fileShares": [{"capacityGb": 1024}], "labels": None}))
        self.assertIsNone(check(CONTAINER, "POST", f"{LOCATION}/clusters", {"cluster": {"initialNodeCount": "3"}}))

    def test_enums_by_name_or_by_index(self):
        for channel in ("RAPID", 1, 3):
            self.assertIsNone(check(CONTAINER, "POST", f"{LOCATION}/clusters?{RUST}", {"cluster": {"releaseChannel": {"channel": channel}}}), channel)
        for channel in ("FAST", 9, -1, True, "2"):
            self.assertRefused(check(CONTAINER, "POST", f"{LOCATION}/clusters?{RUST}", {"cluster": {"releaseChannel": {"channel": channel}}}),
                               f"Invalid value at 'cluster.release_channel.channel' (type.googleapis.com/google.container.v1.ReleaseChannel.Channel), {json.dumps(channel)}",
                               "cluster.release_channel.channel")
        # An enum whose proto numbers skip: SHORT_LIVED is 5, and 1 is no value.
        pool = f"{LOCATION}/clusters/c/nodePools?{RUST}"
        self.assertIsNone(check(CONTAINER, "POST", pool, {"nodePool": {"name": "p", "upgradeSettings": {"strategy": 5}}}))
        self.assertRefused(check(CONTAINER, "POST", pool, {"nodePool": {"name": "p", "upgradeSettings": {"strategy": 1}}}),
                           "Invalid value at 'node_pool.upgrade_settings.strategy' (type.googleapis.com/google.container.v1.UpgradeSettings.Strategy), 1",
                           "node_pool.upgrade_settings.strategy")
        self.assertRefused(check(COMPUTE, "POST", "/compute/v1/projects/p/global/firewalls", {"name": "f", "direction": "SIDEWAYS"}),
                           "Invalid value at 'resource.direction' (type.googleapis.com/google.cloud.compute.v1.Firewall.Direction), \"SIDEWAYS\"")
        self.assertRefused(check(COMPUTE, "POST", "/compute/v1/projects/p/zones/z/futureReservations", dict(FUTURE_RESERVATION, reservationMode="WEEKLY")),
                           "Invalid value at 'resource.reservation_mode' (type.googleapis.com/google.cloud.compute.v1.FutureReservation.ReservationMode), \"WEEKLY\"")

    def test_storage_uploads_check_only_their_metadata(self):
        body, ctype = multipart({"name": "k", "colour": "red"}, b"[not json")
        self.assertRefused(check(STORAGE, "POST", "/upload/storage/v1/b/s/o?uploadType=multipart", body, ctype),
                           "Invalid JSON payload received. Unknown name \"colour\" at 'resource': Cannot find field.")
        self.assertRefused(check(STORAGE, "POST", "/upload/storage/v1/b/s/o?uploadType=resumable&name=k", {"metadata": {"a": 1}}),
                           "Invalid value at 'resource.metadata[0].value' (TYPE_STRING), 1")
        self.assertIsNone(check(STORAGE, "POST", "/upload/storage/v1/b/s/o?uploadType=media&name=k", b'{"colour": "red"}'))


class ThroughTheLauncher(Launched):
    """GKE's and Filestore's emulators behind the check: the mistakes never reach them."""

    def send(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.url + path, data=data, method=method, headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def test_gke_and_filestore_answer_invalid_argument(self):
        pool = {"cluster": {"name": "c", "initialNodeCount": 1, "nodePools": [{"name": "p", "initialNodeCount": 1, "foo": 1}]}}
        status, answer = self.send("POST", f"/container/v1/projects/model-gke/locations/us-central1/clusters?{RUST}", pool)
        self.assertEqual((status, answer["error"]["status"]), (400, "INVALID_ARGUMENT"))
        self.assertEqual(answer["error"]["details"][0]["fieldViolations"][0]["field"], "cluster.node_pools[0]")
        status, answer = self.send("POST", "/file/v1/projects/model-file/locations/us-central1/instances?instanceId=i&zone=x", {"tier": 6})
        self.assertEqual((status, answer["error"]["message"]), (400, 'Invalid JSON payload received. Unknown name "zone": Cannot bind query parameter. '
                                                                     "Field 'zone' could not be found in request message."))
        status, answer = self.send("GET", "/container/v1/projects/model-gke/locations/us-central1/clusters")
        self.assertEqual((status, answer.get("clusters")), (200, None))  # the cluster was never made


if __name__ == "__main__":
    unittest.main()
