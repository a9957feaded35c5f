"""Smoke test of the launcher's Google Compute Engine emulator (emulator/gcp.py, gcp_compute.py,
compute_filter.py), behind the check of requests against Compute's discovery document
(google_model.py): operations, error bodies, requests off the document, requestId replay, "in
use" deletes, fingerprints, pages and filters, faults, the call counter and project isolation,
RDMA network profiles and the networks made with them, resource policies (workload policies),
spoken over plain HTTP as the Rust client speaks it. Runs with the standard library only:
`python -m unittest`."""

import json
import time
import unittest
import urllib.error
import urllib.parse
import urllib.request
import uuid

from .launched import Launched

LINK = "https://www.googleapis.com/compute/v1/"
REGION = "us-central1"


class Compute(Launched):
    def send(self, method, path, body=None, **query):
        """(HTTP status, Content-Type, parsed or raw body) of a call as the Rust client makes it."""
        query = {"$alt": "json", **query}
        url = f"{self.url}{path}?{urllib.parse.urlencode(query)}"
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(url, data=data, method=method, headers={"Authorization": "Bearer anything", "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request) as r:
                status, ctype, raw = r.status, r.headers["Content-Type"], r.read()
        except urllib.error.HTTPError as e:
            status, ctype, raw = e.code, e.headers["Content-Type"], e.read()
        return status, ctype, json.loads(raw) if ctype.startswith("application/json") else raw.decode()

    def call(self, method, project, path, body=None, want=200, **query):
        status, _, out = self.send(method, f"/compute/v1/projects/{project}/{path}", body, **query)
        self.assertEqual(status, want, out)
        return out

    def control(self, path, payload=None):
        data = json.dumps(payload).encode() if payload is not None else None
        with urllib.request.urlopen(urllib.request.Request(self.url + path, data=data, method="POST" if data else "GET")) as r:
            return json.loads(r.read())

    def wait(self, project, op):
        """Poll an operation as the client's poller does (globalOperations.get or
        regionOperations.get by name) until DONE."""
        scope = f"regions/{op['region'].rsplit('/', 1)[1]}" if "region" in op else "global"
        for _ in range(100):
            if op["status"] == "DONE":
                return op
            time.sleep(0.05)
            op = self.call("GET", project, f"{scope}/operations/{op['name']}")
        self.fail(f"operation never ended: {op}")

    def make(self, project, path, body, **query):
        op = self.wait(project, self.call("POST", project, path, body, **query))
        self.assertNotIn("error", op)
        return self.call("GET", project, f"{path}/{body['name']}")

    def network(self, project, name, **extra):
        return self.make(project, "global/networks", {"name": name, "autoCreateSubnetworks": False, **extra})

    def subnet(self, project, name, network, cidr, **extra):
        return self.make(project, f"regions/{REGION}/subnetworks", {"name": name, "network": network["selfLink"], "ipCidrRange": cidr, **extra})

    def test_insert_polled_to_done_then_get_and_list(self):
        op = self.call("POST", "p-life", "global/networks", {"name": "net-a", "autoCreateSubnetworks": False, "routingConfig": {"routingMode": "GLOBAL"}})
        self.assertEqual((op["kind"], op["operationType"], op["status"], op["targetLink"]), ("compute#operation", "insert", "PENDING", LINK + "projects/p-life/global/networks/net-a"))
        for key in ("name", "selfLink", "targetId", "insertTime", "progress", "id"):
            self.assertIn(key, op)
        self.call("GET", "p-life", "global/networks/net-a", want=404)  # not visible before DONE
        self.assertNotIn("items", self.call("GET", "p-life", "global/networks"))
        running = "(operationType eq insert) (status ne DONE) (targetLink eq '.*/networks/net-a')"
        self.assertEqual([o["name"] for o in self.call("GET", "p-life", "global/operations", filter=running)["items"]], [op["name"]])
        done = self.wait("p-life", op)
        self.assertNotIn("items", self.call("GET", "p-life", "global/operations", filter=running))
        self.assertEqual((done["progress"], done["targetId"]), (100, op["targetId"]))
        net = self.call("GET", "p-life", "global/networks/net-a")
        self.assertEqual((net["id"], net["mtu"], net["routingConfig"]["routingMode"], net["autoCreateSubnetworks"]), (op["targetId"], 1460, "GLOBAL", False))
        self.assertIsInstance(net["id"], str)
        self.assertEqual([n["name"] for n in self.call("GET", "p-life", "global/networks")["items"]], ["net-a"])
        sub = self.subnet("p-life", "sub-a", net, "10.0.0.0/24")
        self.assertEqual((sub["gatewayAddress"], sub["region"], sub["privateIpGoogleAccess"]), ("10.0.0.1", LINK + f"projects/p-life/regions/{REGION}", False))
        self.assertEqual(self.call("GET", "p-life", "global/networks/net-a")["subnetworks"], [sub["selfLink"]])
        # A network's patch changes routingConfig and the MTU only.
        self.wait("p-life", self.call("PATCH", "p-life", "global/networks/net-a", {"routingConfig": {"routingMode": "REGIONAL"}, "mtu": 1500}))
        net = self.call("GET", "p-life", "global/networks/net-a")
        self.assertEqual((net["routingConfig"]["routingMode"], net["mtu"]), ("REGIONAL", 1500))
        self.call("PATCH", "p-life", "global/networks/net-a", {"description": "set only at creation"}, want=400)
        self.call("POST", "p-life", "global/networks", {"name": "net-b", "autoCreateSubnetworks": False, "mtu": 9000}, want=400)

    def test_operations_of_zero_seconds_are_done_at_once(self):
        self.control("/_forge/phases", {"seconds": 0})
        try:
            op = self.call("POST", "p-now", "global/networks", {"name": "now", "autoCreateSubnetworks": False})
            self.assertEqual(op["status"], "DONE")
            self.call("GET", "p-now", "global/networks/now")
        finally:
            self.control("/_forge/phases", {"seconds": 0.4})

    def test_error_bodies_have_no_status(self):
        missing = self.call("GET", "p-err", "global/networks/nope", want=404)
        self.assertEqual(missing, {"error": {"code": 404, "message": "The resource 'projects/p-err/global/networks/nope' was not found",
                                             "errors": [{"message": "The resource 'projects/p-err/global/networks/nope' was not found", "domain": "global", "reason": "notFound"}]}})
        self.call("POST", "p-err", "global/networks", {"name": "dup", "autoCreateSubnetworks": False})
        again = self.call("POST", "p-err", "global/networks", {"name": "dup", "autoCreateSubnetworks": False}, want=409)  # reserved while inserting
        self.assertEqual((again["error"]["errors"][0]["reason"], again["error"]["message"]), ("alreadyExists", "The resource 'projects/p-err/global/networks/dup' already exists"))
        self.assertNotIn("status", again["error"])
        bad = self.call("POST", "p-err", "global/networks", {"name": "Bad_Name", "autoCreateSubnetworks": False}, want=400)
        self.assertEqual(bad["error"]["errors"][0]["reason"], "invalid")
        self.assertNotIn("status", bad["error"])
        self.assertEqual(self.call("POST", "p-err", "global/networks", {"autoCreateSubnetworks": False}, want=400)["error"]["errors"][0]["reason"], "required")
        self.call("GET", "p-err", "global/operations/operation-nope", want=404)
        self.call("GET", "p-err", "global/nothings", want=404)

    def test_requests_off_the_discovery_document_get_googles_errors(self):
        """The check of every request against Compute's discovery document (google_model.py):
        errors[] without a status, Google's HTML page for a path no method has; nothing made."""
        p = "p-model"
        status, ctype, page = self.send("GET", f"/compute/v1/projects/{p}/global/nothings")
        self.assertEqual((status, ctype), (404, "text/html; charset=UTF-8"))
        self.assertIn(f"The requested URL <code>/compute/v1/projects/{p}/global/nothings</code> was not found on this server.", page)
        message = "Invalid JSON payload received. Unknown name \"mode\" at 'resource.routing_config': Cannot find field."
        unknown = self.call("POST", p, "global/networks", {"name": "n", "autoCreateSubnetworks": False, "routingConfig": {"mode": "GLOBAL"}}, want=400)
        self.assertEqual(unknown, {"error": {"code": 400, "message": message, "errors": [{"message": message, "domain": "global", "reason": "invalid"}]}})
        unbound = self.call("GET", p, "global/networks", want=400, pageSize=5)
        self.assertEqual(unbound["error"]["message"], 'Invalid JSON payload received. Unknown name "pageSize": Cannot bind query parameter. '
                                                      "Field 'pageSize' could not be found in request message.")
        self.assertEqual(self.call("GET", p, "global/networks", want=400, maxResults="all")["error"]["message"], "Invalid value at 'max_results' (TYPE_UINT32), \"all\"")
        typed = self.call("POST", p, "global/firewalls", {"name": "f", "network": "global/networks/n", "priority": "high", "allowed": [{"IPProtocol": "all"}]}, want=400)
        self.assertEqual(typed["error"]["message"], "Invalid value at 'resource.priority' (TYPE_INT32), \"high\"")
        listed = self.call("POST", p, "global/firewalls", {"name": "f", "network": "global/networks/n", "direction": ["INGRESS"], "allowed": [{"IPProtocol": "all"}]}, want=400)
        self.assertEqual(listed["error"]["message"], "Invalid JSON payload received. Unknown name \"direction\" at 'resource': Proto field is not repeating, cannot start list.")
        self.assertNotIn("items", self.call("GET", p, "global/networks"))
        self.assertNotIn("items", self.call("GET", p, "global/operations"))

    def test_request_id_replay(self):
        rid = str(uuid.uuid4())
        first = self.call("POST", "p-rid", "global/networks", {"name": "once", "autoCreateSubnetworks": False}, requestId=rid)
        second = self.call("POST", "p-rid", "global/networks", {"name": "once", "autoCreateSubnetworks": False}, requestId=rid)
        self.assertEqual((second["name"], second["clientOperationId"]), (first["name"], rid))
        self.wait("p-rid", first)
        replayed = self.call("POST", "p-rid", "global/networks", {"name": "once", "autoCreateSubnetworks": False}, requestId=rid)
        self.assertEqual((replayed["name"], replayed["status"]), (first["name"], "DONE"))
        self.assertEqual(len(self.call("GET", "p-rid", "global/networks")["items"]), 1)
        self.call("POST", "p-rid", "global/networks", {"name": "twice", "autoCreateSubnetworks": False}, want=400, requestId="not-a-uuid")
        # Another project has its own request ids.
        other = self.call("POST", "p-rid-2", "global/networks", {"name": "once", "autoCreateSubnetworks": False}, requestId=rid)
        self.assertNotEqual(other["name"], first["name"])

    def test_in_use_deletes_end_in_failed_operations(self):
        p = "p-use"
        net = self.network(p, "net")
        sub = self.subnet(p, "sub", net, "10.1.0.0/24")
        self.make(p, "global/firewalls", {"name": "fw", "network": "global/networks/net", "allowed": [{"IPProtocol": "all"}], "sourceRanges": ["10.1.0.0/16"]})
        nat = {"name": "nat", "natIpAllocateOption": "AUTO_ONLY", "sourceSubnetworkIpRangesToNat": "LIST_OF_SUBNETWORKS",
               "subnetworks": [{"name": f"regions/{REGION}/subnetworks/sub", "sourceIpRangesToNat": ["ALL_IP_RANGES"]}]}
        self.call("POST", p, f"regions/{REGION}/routers", {"name": "bad", "network": net["selfLink"], "nats": [dict(nat, subnetworks=[])]}, want=400)
        self.call("POST", p, "regions/europe-west4/routers", {"name": "far", "network": net["selfLink"], "nats": [nat]}, want=400)  # another region's subnet
        router = self.make(p, f"regions/{REGION}/routers", {"name": "rt", "network": net["selfLink"], "nats": [nat]})
        self.assertEqual(router["nats"][0]["subnetworks"][0]["name"], sub["selfLink"])
        accepted = self.call("DELETE", p, f"regions/{REGION}/subnetworks/sub")
        self.assertIn("region", accepted)
        failed = self.wait(p, accepted)
        self.assertEqual(failed["error"]["errors"][0], {"code": "RESOURCE_IN_USE_BY_ANOTHER_RESOURCE",
                                                         "message": f"The subnetwork resource 'projects/{p}/regions/{REGION}/subnetworks/sub' is already being used by 'projects/{p}/regions/{REGION}/routers/rt'"})
        self.assertEqual((failed["httpErrorStatusCode"], failed["httpErrorMessage"]), (400, "BAD REQUEST"))
        failed = self.wait(p, self.call("DELETE", p, "global/networks/net"))
        self.assertEqual(failed["error"]["errors"][0]["message"], f"The network resource 'projects/{p}/global/networks/net' is already being used by 'projects/{p}/regions/{REGION}/subnetworks/sub'")
        self.call("GET", p, "global/networks/net")  # still there
        # A router's PUT replaces it whole: without nats, the subnetwork is free.
        self.wait(p, self.call("PUT", p, f"regions/{REGION}/routers/rt", {"name": "rt", "network": net["selfLink"]}))
        self.assertNotIn("nats", self.call("GET", p, f"regions/{REGION}/routers/rt"))
        for path in (f"regions/{REGION}/subnetworks/sub", f"regions/{REGION}/routers/rt", "global/firewalls/fw", "global/networks/net"):
            self.assertNotIn("error", self.wait(p, self.call("DELETE", p, path)), path)
            self.call("GET", p, path, want=404)

    def test_subnetwork_checks_and_fingerprint(self):
        p = "p-sub"
        net = self.network(p, "net", mtu=8244)
        sub = self.subnet(p, "sub", net, "10.2.0.0/24")
        self.call("POST", p, f"regions/{REGION}/subnetworks", {"name": "overlap", "network": net["selfLink"], "ipCidrRange": "10.2.0.128/25"}, want=400)
        self.call("POST", p, f"regions/{REGION}/subnetworks", {"name": "hostbits", "network": net["selfLink"], "ipCidrRange": "10.3.0.1/24"}, want=400)
        self.call("POST", p, f"regions/{REGION}/subnetworks", {"name": "nonet", "network": "global/networks/missing", "ipCidrRange": "10.4.0.0/24"}, want=404)
        pods = [{"rangeName": "pods", "ipCidrRange": "10.20.0.0/16"}]
        stale = self.call("PATCH", p, f"regions/{REGION}/subnetworks/sub", {"secondaryIpRanges": pods, "fingerprint": "AAAAAAAAAAA="}, want=412)
        self.assertEqual(stale["error"]["errors"][0]["reason"], "conditionNotMet")
        self.call("PATCH", p, f"regions/{REGION}/subnetworks/sub", {"secondaryIpRanges": pods}, want=412)
        op = self.call("PATCH", p, f"regions/{REGION}/subnetworks/sub", {"secondaryIpRanges": pods, "fingerprint": sub["fingerprint"]})
        self.call("PATCH", p, f"regions/{REGION}/subnetworks/sub", {"fingerprint": sub["fingerprint"]}, want=400)  # an operation is under way
        self.wait(p, op)
        patched = self.call("GET", p, f"regions/{REGION}/subnetworks/sub")
        self.assertEqual(patched["secondaryIpRanges"], pods)
        self.assertNotEqual(patched["fingerprint"], sub["fingerprint"])
        self.assertRegex(patched["fingerprint"], r"^[A-Za-z0-9_-]+=*$")
        self.call("PATCH", p, f"regions/{REGION}/subnetworks/sub", {"description": "set only at creation", "fingerprint": patched["fingerprint"]}, want=400)
        self.call("POST", p, f"regions/{REGION}/subnetworks", {"name": "second", "network": net["selfLink"], "ipCidrRange": "10.20.5.0/24"}, want=400)  # overlaps pods
        self.wait(p, self.call("POST", p, f"regions/{REGION}/subnetworks/sub/setPrivateIpGoogleAccess", {"privateIpGoogleAccess": True}))
        self.assertTrue(self.call("GET", p, f"regions/{REGION}/subnetworks/sub")["privateIpGoogleAccess"])
        # Operations live in their scope: a regional one is not a global one.
        op = self.call("DELETE", p, f"regions/{REGION}/subnetworks/sub")
        self.call("GET", p, f"global/operations/{op['name']}", want=404)
        self.call("GET", p, f"regions/{REGION}/operations/{op['name']}")

    def test_firewalls_pages_and_filters(self):
        p = "p-list"
        self.network(p, "net")
        for i in range(5):
            self.call("POST", p, "global/firewalls", {"name": f"fw-{i}", "network": "global/networks/net", "description": "even" if i % 2 == 0 else "odd",
                                                      "priority": 900 + i, "allowed": [{"IPProtocol": "tcp", "ports": ["22", "8000-8080"]}]})
        self.call("POST", p, "global/firewalls", {"name": "both", "network": "global/networks/net", "allowed": [{"IPProtocol": "tcp"}], "denied": [{"IPProtocol": "udp"}]}, want=400)
        self.call("POST", p, "global/firewalls", {"name": "neither", "network": "global/networks/net"}, want=400)
        time.sleep(0.5)
        names, token, pages = [], None, 0
        while True:
            out = self.call("GET", p, "global/firewalls", maxResults=2, **({"pageToken": token} if token else {}))
            names += [f["name"] for f in out["items"]]
            pages += 1
            token = out.get("nextPageToken")
            if not token:
                break
        self.assertEqual((names, pages), ([f"fw-{i}" for i in range(5)], 3))
        listed = lambda f: [x["name"] for x in self.call("GET", p, "global/firewalls", filter=f).get("items", [])]  # noqa: E731
        self.assertEqual(listed('name = "fw-3"'), ["fw-3"])
        self.assertEqual(listed("name eq fw-[12]"), ["fw-1", "fw-2"])
        self.assertEqual(listed("name ne fw-[12]"), ["fw-0", "fw-3", "fw-4"])
        self.assertEqual(listed('(description = "even") AND (priority = 902)'), ["fw-2"])
        self.assertEqual(listed('(description = "odd") (name != fw-1)'), ["fw-3"])
        self.assertEqual(listed('(name = "fw-0") OR (name = "fw-4")'), ["fw-0", "fw-4"])
        for bad in ('name > "a"', '(name = "a") AND (name = "b") OR (name = "c")', '(name = a) (name eq b)', "name ="):
            self.assertEqual(self.call("GET", p, "global/firewalls", want=400, filter=bad)["error"]["errors"][0]["reason"], "invalid", bad)
        self.call("GET", p, "global/firewalls", want=400, maxResults=501)
        fw = self.call("GET", p, "global/firewalls/fw-0")
        self.assertEqual((fw["direction"], fw["sourceRanges"], fw["disabled"]), ("INGRESS", ["0.0.0.0/0"], False))
        # PATCH merges; PUT replaces.
        self.wait(p, self.call("PATCH", p, "global/firewalls/fw-0", {"sourceRanges": ["10.0.0.0/8"]}))
        fw = self.call("GET", p, "global/firewalls/fw-0")
        self.assertEqual((fw["sourceRanges"], fw["priority"], fw["description"]), (["10.0.0.0/8"], 900, "even"))
        self.wait(p, self.call("PUT", p, "global/firewalls/fw-0", {"name": "fw-0", "network": "global/networks/net", "denied": [{"IPProtocol": "icmp"}]}))
        fw = self.call("GET", p, "global/firewalls/fw-0")
        self.assertEqual((fw["denied"], fw.get("allowed"), fw["priority"], fw.get("description")), ([{"IPProtocol": "icmp"}], None, 1000, None))
        self.call("PATCH", p, "global/firewalls/fw-0", {"direction": "EGRESS"}, want=400)

    def test_faults(self):
        p = "p-fault"
        self.control(f"/_forge/faults?account={p}", [{"account": p, "match": "compute:networks.insert", "rate": 1.0}])
        status, ctype, body = self.send("POST", f"/compute/v1/projects/{p}/global/networks", {"name": "t", "autoCreateSubnetworks": False})
        self.assertEqual((status, ctype.split(";")[0]), (429, "application/json"))
        self.assertEqual(body, {"error": {"code": 429, "message": "Rate Limit Exceeded", "errors": [{"message": "Rate Limit Exceeded", "domain": "usageLimits", "reason": "rateLimitExceeded"}]}})
        # The answer is lost, the work is done.
        self.control(f"/_forge/faults?account={p}", [{"account": p, "match": "compute:networks.insert", "rate": 1.0, "kind": "5xx", "when": "after"}])
        rid = str(uuid.uuid4())
        status, _, body = self.send("POST", f"/compute/v1/projects/{p}/global/networks", {"name": "lost", "autoCreateSubnetworks": False}, requestId=rid)
        self.assertEqual((status, body["error"]["errors"][0]["reason"]), (503, "backendError"))
        self.assertNotIn("status", body["error"])
        self.control(f"/_forge/faults?account={p}", [])
        retried = self.call("POST", p, "global/networks", {"name": "lost", "autoCreateSubnetworks": False}, requestId=rid)
        self.assertEqual(retried["targetLink"], LINK + f"projects/{p}/global/networks/lost")  # the first call's operation
        # Accepted, and the operation fails.
        self.control(f"/_forge/faults?account={p}", [{"account": p, "match": "compute:*", "rate": 1.0, "kind": "failed_operation", "code": "QUOTA_EXCEEDED"}])
        op = self.wait(p, self.call("POST", p, "global/networks", {"name": "fails", "autoCreateSubnetworks": False}))
        self.assertEqual(op["error"]["errors"][0]["code"], "QUOTA_EXCEEDED")
        self.call("GET", p, "global/networks/fails", want=404)  # reads are not affected
        self.call("GET", p, "global/networks/lost")
        self.control(f"/_forge/faults?account={p}", [{"account": p, "match": "compute:networks.get", "rate": 1.0, "kind": "html"}])
        status, ctype, body = self.send("GET", f"/compute/v1/projects/{p}/global/networks/lost")
        self.assertEqual((status, ctype, body), (502, "text/html", "<html><body>Bad Gateway</body></html>"))
        self.control(f"/_forge/faults?account={p}", [])
        self.call("GET", p, "global/networks/lost")
        calls = self.control(f"/_forge/calls?account={p}")
        self.assertEqual((calls["compute:networks.insert"], calls["fault:compute:networks.insert"], calls["fault:compute:networks.get"]), (4, 3, 1))
        self.assertNotIn("fault:compute:globalOperations.get", calls)

    def test_calls_counted_per_project_and_projects_isolated(self):
        self.control("/_forge/reset?account=p-one")
        self.network("p-one", "shared-name")
        self.call("GET", "p-two", "global/networks/shared-name", want=404)
        self.assertNotIn("items", self.call("GET", "p-two", "global/networks"))
        self.network("p-two", "shared-name")  # same name, another project
        self.call("GET", "p-one", f"regions/{REGION}/subnetworks")
        calls = self.control("/_forge/calls?account=p-one")
        self.assertEqual((calls["compute:networks.insert"], calls["compute:networks.get"], calls["compute:subnetworks.list"]), (1, 1, 1))
        self.assertGreaterEqual(calls["compute:globalOperations.get"], 1)
        self.assertEqual(self.control("/_forge/calls?account=p-two")["compute:networks.insert"], 1)
        self.control("/_forge/reset?account=p-one")
        self.assertEqual(self.control("/_forge/calls?account=p-one"), {})

    def violations(self, project):
        """What the discovery-document check refused of the project's requests (and emulator defects)."""
        return self.control(f"/_forge/violations?account={project}")

    def refused(self, project, method, path, body, code=400, **query):
        """The message of a refused call."""
        return self.call(method, project, path, body, want=code, **query)["error"]["message"]

    def test_network_profiles_listed_and_read(self):
        p = "p-profiles"
        profile = self.call("GET", p, "global/networkProfiles/us-central1-a-vpc-roce")
        self.assertEqual((profile["kind"], profile["name"], profile["selfLink"], profile["location"], profile["profileType"]),
                         ("compute#networkProfile", "us-central1-a-vpc-roce", LINK + f"projects/{p}/global/networkProfiles/us-central1-a-vpc-roce",
                          {"name": "us-central1-a", "scope": "ZONE"}, {"networkType": "RDMA", "rdmaSubtype": "ROCE"}))
        features = profile["features"]
        self.assertEqual((features["interfaceTypes"], features["allowMultiNicInSameNetwork"], features["allowMulticast"], features["allowVpcFirewallRules"]),
                         (["MRDMA"], "MULTI_NIC_IN_SAME_NETWORK_ALLOWED", "MULTICAST_BLOCKED", "VPC_FIREWALL_RULES_BLOCKED"))
        self.assertIsInstance(profile["id"], str)
        self.assertEqual(self.call("GET", p, "global/networkProfiles/us-central1-a-vpc-roce")["id"], profile["id"])  # Google's, the same on every read
        falcon = self.call("GET", p, "global/networkProfiles/europe-west4-b-vpc-falcon")
        self.assertEqual((falcon["profileType"]["rdmaSubtype"], falcon["features"]["interfaceTypes"]), ("FALCON", ["IRDMA"]))
        self.assertEqual(self.call("GET", p, "global/networkProfiles/us-east5-c-vpc-roce-metal")["profileType"]["rdmaSubtype"], "ROCE_METAL")
        self.assertEqual(self.refused(p, "GET", "global/networkProfiles/mars-1-a-vpc-roce", None, 404),
                         f"The resource 'projects/{p}/global/networkProfiles/mars-1-a-vpc-roce' was not found")
        # Listed with Compute's filters and pages, sorted by name.
        listed = lambda **q: [i["name"] for i in self.call("GET", p, "global/networkProfiles", **q).get("items", [])]  # noqa: E731
        self.assertEqual(listed(filter="name eq us-central1-a-.*"), ["us-central1-a-vpc-falcon", "us-central1-a-vpc-roce", "us-central1-a-vpc-roce-metal"])
        self.assertEqual(listed(filter='location.name = "asia-northeast1-b"'), [f"asia-northeast1-b-vpc-{k}" for k in ("falcon", "roce", "roce-metal")])
        roce = listed(filter='profileType.rdmaSubtype = "ROCE"')
        for zone in ("us-central1-a", "us-central1-b", "us-central1-c", "us-central1-f", "us-east4-a", "us-east5-b", "us-west1-c", "europe-west4-a", "asia-northeast1-c"):
            self.assertIn(f"{zone}-vpc-roce", roce)
        first = self.call("GET", p, "global/networkProfiles", maxResults=10)
        self.assertEqual((first["kind"], len(first["items"])), ("compute#networkProfileList", 10))
        rest = self.call("GET", p, "global/networkProfiles", pageToken=first["nextPageToken"])
        self.assertEqual(len(first["items"]) + len(rest["items"]), 3 * len(roce))
        self.assertGreater(rest["items"][0]["name"], first["items"][-1]["name"])
        self.assertEqual(self.violations(p), [])

    def test_rdma_networks(self):
        p = "p-rdma"
        profile = LINK + f"projects/{p}/global/networkProfiles/us-central1-a-vpc-roce"
        full = self.network(p, "roce", networkProfile=profile)
        self.assertEqual((full["networkProfile"], full["mtu"]), (profile, 8896))  # an RDMA network's MTU
        partial = self.network(p, "roce-2", networkProfile=f"projects/{p}/global/networkProfiles/us-central1-a-vpc-roce", mtu=1500)
        self.assertEqual((partial["networkProfile"], partial["mtu"]), (profile, 1500))  # kept as the full URL
        self.assertEqual(self.network(p, "plain")["mtu"], 1460)
        networks = "global/networks"
        for value in ("us-central1-a-vpc-roce", "global/networkProfiles/us-central1-a-vpc-roce"):
            self.assertEqual(self.refused(p, "POST", networks, {"name": "bad", "autoCreateSubnetworks": False, "networkProfile": value}),
                             f"Invalid value for field 'resource.networkProfile': '{value}'. The URL is malformed.")
        self.assertEqual(self.refused(p, "POST", networks, {"name": "bad", "autoCreateSubnetworks": False, "networkProfile": f"projects/{p}/global/networkProfiles/us-central1-z-vpc-roce"}, 404),
                         f"The resource 'projects/{p}/global/networkProfiles/us-central1-z-vpc-roce' was not found")
        self.assertIn("Must be in the range [8896, 8896]", self.refused(p, "POST", networks, {"name": "bad", "autoCreateSubnetworks": False, "mtu": 1460,
                                                                                             "networkProfile": f"projects/{p}/global/networkProfiles/us-central1-a-vpc-falcon"}))
        self.assertIn("Must be in the range [1300, 8896]", self.refused(p, "POST", networks, {"name": "bad", "autoCreateSubnetworks": False, "mtu": 9000, "networkProfile": profile}))
        # The MTU changes within the profile's range; the profile never.
        self.wait(p, self.call("PATCH", p, "global/networks/roce", {"mtu": 8500}))
        self.assertEqual(self.call("GET", p, "global/networks/roce")["mtu"], 8500)
        self.assertIn("cannot be changed", self.refused(p, "PATCH", "global/networks/roce", {"networkProfile": profile.replace("-a-", "-b-")}))
        self.assertIn("cannot be changed", self.refused(p, "PATCH", "global/networks/plain", {"networkProfile": profile}))
        # Its subnetworks are in the zone's region, IPv4 only; VPC firewall rules are not for it.
        sub = self.subnet(p, "roce-0", full, "192.168.64.0/24")
        self.assertEqual(sub["region"], LINK + f"projects/{p}/regions/{REGION}")
        far = self.refused(p, "POST", "regions/us-east4/subnetworks", {"name": "far", "network": full["selfLink"], "ipCidrRange": "192.168.65.0/24"})
        self.assertEqual(far, f"Invalid value for field 'resource.network': '{full['selfLink']}'. The network is restricted to zone 'us-central1-a' by its network "
                              "profile 'us-central1-a-vpc-roce': its subnetworks must be in region 'us-central1', not 'us-east4'.")
        self.assertIn("stack types", self.refused(p, "POST", f"regions/{REGION}/subnetworks", {"name": "dual", "network": full["selfLink"], "ipCidrRange": "192.168.66.0/24", "stackType": "IPV4_IPV6"}))
        walled = self.refused(p, "POST", "global/firewalls", {"name": "fw", "network": full["selfLink"], "allowed": [{"IPProtocol": "all"}]})
        self.assertIn("does not allow VPC firewall rules", walled)
        self.make(p, "global/firewalls", {"name": "fw", "network": "global/networks/plain", "allowed": [{"IPProtocol": "all"}]})
        self.assertEqual(self.violations(p), [])

    def test_resource_policies(self):
        p = "p-policy"
        policies = f"regions/{REGION}/resourcePolicies"
        rack = {"name": "rack", "description": "forge:token=abc", "workloadPolicy": {"type": "HIGH_THROUGHPUT", "acceleratorTopology": "1x72"}}
        op = self.call("POST", p, policies, rack)
        self.assertEqual((op["operationType"], op["region"], op["targetLink"]), ("insert", LINK + f"projects/{p}/regions/{REGION}", LINK + f"projects/{p}/{policies}/rack"))
        self.call("GET", p, f"{policies}/rack", want=404)  # not before its insert is done
        self.wait(p, op)
        got = self.call("GET", p, f"{policies}/rack")
        self.assertEqual((got["kind"], got["status"], got["region"], got["selfLink"], got["description"], got["workloadPolicy"], got["id"]),
                         ("compute#resourcePolicy", "READY", LINK + f"projects/{p}/regions/{REGION}", LINK + f"projects/{p}/{policies}/rack", "forge:token=abc",
                          rack["workloadPolicy"], op["targetId"]))
        self.assertIn("creationTimestamp", got)
        self.make(p, policies, {"name": "spread", "workloadPolicy": {"type": "HIGH_AVAILABILITY"}})
        self.make(p, policies, {"name": "close", "workloadPolicy": {"type": "HIGH_THROUGHPUT", "maxTopologyDistance": "BLOCK"}})
        self.make(p, policies, {"name": "compact", "groupPlacementPolicy": {"collocation": "COLLOCATED", "vmCount": 2}})
        self.make(p, "regions/europe-west4/resourcePolicies", {"name": "rack", "workloadPolicy": {"type": "HIGH_THROUGHPUT", "acceleratorTopology": "1x72"}})
        for why, body, words in (("a bad name", dict(rack, name="Rack"), "Invalid value for field 'resource.name': 'Rack'."),
                                 ("no policy", {"name": "x"}, "exactly one of workloadPolicy"),
                                 ("two policies", dict(rack, name="x", groupPlacementPolicy={"collocation": "COLLOCATED"}), "exactly one of workloadPolicy"),
                                 ("no type", {"name": "x", "workloadPolicy": {"acceleratorTopology": "1x72"}}, "Required field 'resource.workloadPolicy.type' not specified"),
                                 ("a topology spread out", {"name": "x", "workloadPolicy": {"type": "HIGH_AVAILABILITY", "acceleratorTopology": "1x72"}},
                                  "Invalid value for field 'resource.workloadPolicy.acceleratorTopology': '1x72'. It is given only with type HIGH_THROUGHPUT."),
                                 ("a bad topology", {"name": "x", "workloadPolicy": {"type": "HIGH_THROUGHPUT", "acceleratorTopology": "72"}}, "such as 1x72"),
                                 ("a mode without a topology", {"name": "x", "workloadPolicy": {"type": "HIGH_THROUGHPUT", "acceleratorTopologyMode": "AUTO_CONNECT"}}, "acceleratorTopologyMode"),
                                 ("one that exists", rack, f"The resource 'projects/{p}/{policies}/rack' already exists")):
            self.assertIn(words, self.refused(p, "POST", policies, body, 409 if why == "one that exists" else 400), why)
        # Listed per region, with filters and pages.
        listed = lambda **q: [i["name"] for i in self.call("GET", p, policies, **q).get("items", [])]  # noqa: E731
        self.assertEqual(listed(), ["close", "compact", "rack", "spread"])
        self.assertEqual(listed(filter='workloadPolicy.type = "HIGH_THROUGHPUT"'), ["close", "rack"])
        self.assertEqual(listed(filter="description eq forge:.*"), ["rack"])
        page = self.call("GET", p, policies, maxResults=3)
        self.assertEqual((page["kind"], len(page["items"]), listed(pageToken=page["nextPageToken"])), ("compute#resourcePolicyList", 3, ["spread"]))
        self.assertEqual(listed(filter="name eq rack"), ["rack"])  # europe-west4's is another region's
        # requestId replay; a failed insert; a throttled call; a delete.
        rid = str(uuid.uuid4())
        once = self.call("POST", p, policies, {"name": "once", "workloadPolicy": {"type": "HIGH_AVAILABILITY"}}, requestId=rid)
        self.assertEqual(self.call("POST", p, policies, {"name": "once", "workloadPolicy": {"type": "HIGH_AVAILABILITY"}}, requestId=rid)["name"], once["name"])
        self.control(f"/_forge/faults?account={p}", [{"account": p, "match": "compute:resourcePolicies.insert", "rate": 1.0, "kind": "failed_operation", "code": "QUOTA_EXCEEDED"}])
        failed = self.wait(p, self.call("POST", p, policies, {"name": "fails", "workloadPolicy": {"type": "HIGH_AVAILABILITY"}}))
        self.control(f"/_forge/faults?account={p}", [{"account": p, "match": "compute:resourcePolicies.get", "rate": 1.0}])
        status, _, _ = self.send("GET", f"/compute/v1/projects/{p}/{policies}/rack")
        self.control(f"/_forge/faults?account={p}", [])
        self.assertEqual((failed["error"]["errors"][0]["code"], status), ("QUOTA_EXCEEDED", 429))
        self.call("GET", p, f"{policies}/fails", want=404)
        self.assertNotIn("error", self.wait(p, self.call("DELETE", p, f"{policies}/spread")))
        self.call("GET", p, f"{policies}/spread", want=404)
        calls = self.control(f"/_forge/calls?account={p}")
        self.assertEqual((calls["compute:resourcePolicies.insert"], calls["fault:compute:resourcePolicies.get"], calls["compute:resourcePolicies.delete"]), (16, 1, 1))
        self.assertGreaterEqual(calls["compute:regionOperations.get"], 1)
        self.assertEqual(self.violations(p), [])


if __name__ == "__main__":
    unittest.main()
