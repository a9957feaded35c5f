"""Smoke test of the launcher's Google Compute Engine emulator (emulator/gcp.py, gcp_compute.py,
compute_filter.py), behind the check of requests against Compute's discovery document
(google_model.py): operations, error bodies, requests off the document, requestId replay, "in
use" deletes, fingerprints, pages and filters, faults, the call counter and project isolation,
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


if __name__ == "__main__":
    unittest.main()
