"""Smoke test of the launcher's Compute Engine future reservations in calendar mode and the
reservations they deliver (emulator/gcp_reservations.py, on gcp_compute.py and gcp.py), and of GKE
node pools on those reservations (gcp_container.py): insert through its zonal operation, get, list,
the checks (each refusal's status and words), approval and decline by availability, the project's
clock (POST /_forge/clock?account=PROJECT) moving requests to FULFILLED and their reservations to
READY, cancel before the start only, the delete rules, the reservation deleted at the end, and
pools that fail on a reservation not active yet or gone, or too small, and come up on an active
one. Spoken over plain HTTP as the Rust clients speak it. Runs with the standard library only:
`python -m unittest`."""

import datetime
import json
import time
import unittest
import urllib.error
import urllib.parse
import urllib.request

from .launched import start, stop

LINK = "https://www.googleapis.com/compute/v1/"
REGION, ZONE = "us-central1", "us-central1-a"
NOW = datetime.datetime(2027, 1, 4, tzinfo=datetime.timezone.utc)
DAY = 86400
INTS = "json;enum-encoding=int"
DONE, RUNNING, ERROR = 3, 2, 6  # GKE's Operation.Status DONE, NodePool.Status RUNNING and ERROR, as numbers
SPECIFIC = 3  # GKE's ReservationAffinity.Type SPECIFIC_RESERVATION
LAUNCHER = {}


def setUpModule():
    LAUNCHER["proc"], LAUNCHER["url"] = start()


def tearDownModule():
    stop(LAUNCHER["proc"])


def at(days):
    """RFC 3339 time `days` after NOW."""
    return (NOW + datetime.timedelta(days=days)).strftime("%Y-%m-%dT%H:%M:%SZ")


def request(name, start=10, end=17, machine="a3-ultragpu-8g", count=4, **extra):
    """A future reservation request in calendar mode as forge sends it."""
    body = {"name": name, "reservationMode": "CALENDAR", "planningStatus": "SUBMITTED", "deploymentType": "DENSE",
            "autoDeleteAutoCreatedReservations": True, "specificReservationRequired": True, "reservationName": f"{name}-res",
            "specificSkuProperties": {"instanceProperties": {"machineType": machine}, "totalCount": str(count)},
            "timeWindow": {"startTime": at(start), "endTime": at(end)}}
    for key, value in extra.items():
        if value is None:
            body.pop(key, None)
        else:
            body[key] = value
    return body


class Client:
    """Calls as the Rust clients make them, and the launcher's control paths."""

    def send(self, method, path, body=None, alt="json", **query):
        """(HTTP status, parsed body) of a call as the Rust clients make it."""
        url = f"{LAUNCHER['url']}{path}?{urllib.parse.urlencode({'$alt': alt, **query})}"
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(url, data=data, method=method, headers={"Authorization": "Bearer anything", "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def call(self, method, project, path, body=None, want=200, api="compute", **query):
        status, out = self.send(method, f"/{api}/v1/projects/{project}/{path}", body, **query)
        self.assertEqual(status, want, out)
        return out

    def zonal(self, method, project, path, body=None, want=200, **query):
        return self.call(method, project, f"zones/{ZONE}/{path}", body, want, **query)

    def control(self, path, payload=None):
        data = json.dumps(payload).encode() if payload is not None else None
        with urllib.request.urlopen(urllib.request.Request(LAUNCHER["url"] + path, data=data, method="POST" if data else "GET")) as r:
            return json.loads(r.read())

    def clock(self, project, **payload):
        """Set the project's clock: now= (an ISO 8601 time) or advance_seconds=."""
        return self.control(f"/_forge/clock?account={project}", payload)

    def wait(self, project, op):
        """Poll a Compute operation as the client's poller does (by name, in its scope) until DONE."""
        scope = next((f"{key}s/{op[key].rsplit('/', 1)[1]}" for key in ("zone", "region") if key in op), "global")
        for _ in range(200):
            if op["status"] == "DONE":
                return op
            time.sleep(0.05)
            op = self.call("GET", project, f"{scope}/operations/{op['name']}")
        self.fail(f"operation never ended: {op}")

    def insert(self, project, body):
        """The request inserted (its operation polled to the end), as get answers it."""
        self.assertNotIn("error", self.wait(project, self.zonal("POST", project, "futureReservations", body)))
        return self.zonal("GET", project, f"futureReservations/{body['name']}")

    def until(self, project, name, status):
        """The request once its procurementStatus is `status` (approval takes a phase)."""
        for _ in range(100):
            fr = self.zonal("GET", project, f"futureReservations/{name}")
            if fr["status"]["procurementStatus"] == status:
                return fr
            time.sleep(0.05)
        self.fail(f"{name} never {status}: {fr['status']}")

    def refused(self, method, project, path, body=None, code=400, **query):
        """A refused call's message, Compute's error body (no status) checked."""
        error = self.zonal(method, project, path, body, want=code, **query)["error"]
        self.assertNotIn("status", error)
        self.assertEqual(error["errors"][0]["message"], error["message"])
        return error["message"]

    def violations(self, project):
        return self.control(f"/_forge/violations?account={project}")


class FutureReservations(Client, unittest.TestCase):
    def test_insert_get_list_and_the_lifecycle_by_the_clock(self):
        p = "fr-life"
        self.assertEqual(self.clock(p, now=at(0)), {"now": "2027-01-04T00:00:00Z", "frozen": True})
        self.assertEqual(self.control(f"/_forge/clock?account={p}")["now"], "2027-01-04T00:00:00Z")
        op = self.zonal("POST", p, "futureReservations", request("train"))
        self.assertEqual((op["kind"], op["operationType"], op["targetLink"], op["zone"]),
                         ("compute#operation", "insert", LINK + f"projects/{p}/zones/{ZONE}/futureReservations/train", LINK + f"projects/{p}/zones/{ZONE}"))
        self.assertNotIn("region", op)
        self.zonal("GET", p, "futureReservations/train", want=404)  # not visible before DONE
        running = "(operationType eq insert) (status ne DONE)"
        self.assertEqual([o["name"] for o in self.zonal("GET", p, "operations", filter=running)["items"]], [op["name"]])
        self.wait(p, op)
        fr = self.zonal("GET", p, "futureReservations/train")
        self.assertIn(fr["status"]["procurementStatus"], ("PENDING_APPROVAL", "APPROVED"))
        self.assertEqual((fr["kind"], fr["zone"], fr["id"], fr["specificSkuProperties"]["totalCount"], fr["reservationMode"]),
                         ("compute#futureReservation", LINK + f"projects/{p}/zones/{ZONE}", op["targetId"], "4", "CALENDAR"))
        self.assertEqual(fr["selfLinkWithId"], LINK + f"projects/{p}/zones/{ZONE}/futureReservations/{fr['id']}")
        self.assertFalse([k for k in fr if k.startswith("_")])
        listed = self.zonal("GET", p, "futureReservations")
        self.assertEqual((listed["kind"], [f["name"] for f in listed["items"]]), ("compute#futureReservationsListResponse", ["train"]))
        # Approved at once (it fits the availability): the reservation is made, not usable before the start.
        fr = self.until(p, "train", "APPROVED")
        self.assertNotIn("autoCreatedReservations", fr["status"])
        self.assertEqual([f["name"] for f in self.zonal("GET", p, "futureReservations", filter="status.procurementStatus = APPROVED")["items"]], ["train"])
        res = self.zonal("GET", p, "reservations/train-res")
        self.assertEqual((res["kind"], res["status"], res["specificReservationRequired"], res["deploymentType"], res["deleteAtTime"]),
                         ("compute#reservation", "CREATING", True, "DENSE", at(17)))
        self.assertEqual(res["specificReservation"], {"count": "4", "assuredCount": "0", "inUseCount": "0", "instanceProperties": {"machineType": "a3-ultragpu-8g"}})
        self.assertEqual([r["name"] for r in self.zonal("GET", p, "reservations")["items"]], ["train-res"])
        self.assertIn("cancel it before deleting it", self.refused("DELETE", p, "futureReservations/train"))
        # At the start: FULFILLED, the reservation READY.
        self.clock(p, advance_seconds=10 * DAY)
        fr = self.zonal("GET", p, "futureReservations/train")
        self.assertEqual(fr["status"], {"procurementStatus": "FULFILLED", "fulfilledCount": "4",
                                        "autoCreatedReservations": [LINK + f"projects/{p}/zones/{ZONE}/reservations/train-res"]})
        res = self.zonal("GET", p, "reservations/train-res")
        self.assertEqual((res["status"], res["specificReservation"]["assuredCount"]), ("READY", "4"))
        self.assertIn("can be cancelled only before its start time", self.refused("POST", p, "futureReservations/train/cancel"))
        self.assertIn("it can be deleted only after its end time", self.refused("DELETE", p, "futureReservations/train"))
        # After the end the reservation is deleted; the request stays FULFILLED and may be deleted.
        self.clock(p, advance_seconds=7 * DAY)
        self.zonal("GET", p, "reservations/train-res", want=404)
        self.assertNotIn("items", self.zonal("GET", p, "reservations"))
        self.assertEqual(self.zonal("GET", p, "futureReservations/train")["status"]["procurementStatus"], "FULFILLED")
        done = self.wait(p, self.zonal("DELETE", p, "futureReservations/train"))
        self.assertEqual((done["operationType"], done.get("error")), ("delete", None))
        self.zonal("GET", p, "futureReservations/train", want=404)
        self.assertEqual(self.violations(p), [])

    def test_checks_answer_computes_errors(self):
        p = "fr-checks"
        self.clock(p, now=at(0))
        sku = {"instanceProperties": {"machineType": "a3-ultragpu-8g"}, "totalCount": "4"}
        cases = [
            (request("Bad_Name"), "Invalid value for field 'resource.name': 'Bad_Name'. Must be a match of regex"),
            (request("m", specificSkuProperties={"totalCount": "4"}), "Required field 'resource.specificSkuProperties.instanceProperties.machineType' not specified"),
            (request("m", specificSkuProperties={"instanceProperties": {"machineType": "a4-highgpu-8g"}}), "Required field 'resource.specificSkuProperties.totalCount' not specified"),
            (request("m", specificSkuProperties=dict(sku, totalCount="0")), "Must be in the range [1, 100000]"),
            (request("m", timeWindow={"endTime": at(17)}), "Required field 'resource.timeWindow.startTime' not specified"),
            (request("m", timeWindow={"startTime": at(10)}), "Required field 'resource.timeWindow.endTime' not specified"),
            (request("m", timeWindow={"startTime": at(10), "endTime": at(17), "duration": {"seconds": "86400"}}), "Give endTime or duration, not both."),
            (request("m", timeWindow={"startTime": "next monday", "endTime": at(17)}), "It must be an RFC 3339 time"),
            (request("m", timeWindow={"startTime": at(10), "endTime": at(9)}), "The end time must be after the start time."),
            (request("m", machine="n2-standard-8"), "Future reservations in calendar mode reserve the machine types a3-highgpu-8g, a3-megagpu-8g"),
            (request("m", start=10, end=10.5), "reserves resources for 1 to 90 days"),
            (request("m", start=10, end=101), "reserves resources for 1 to 90 days"),
            (request("m", start=-1, end=6), "The start time must be in the future (it is 2027-01-04T00:00:00Z)."),
            (request("m", start=121, end=128), "starts at most 120 days ahead: no later than 2027-05-04T00:00:00Z"),
            (request("m", autoDeleteAutoCreatedReservations=None), "Required field 'resource.autoDeleteAutoCreatedReservations' not specified"),
            (request("m", planningStatus="PLANNING_STATUS_UNSPECIFIED"), "Invalid value for field 'resource.planningStatus': 'PLANNING_STATUS_UNSPECIFIED'. Must be one of"),
            (request("m", reservationMode="RESERVATION_MODE_UNSPECIFIED"), "Invalid value for field 'resource.reservationMode'"),
            (request("m", deploymentType="DEPLOYMENT_TYPE_UNSPECIFIED"), "Invalid value for field 'resource.deploymentType': 'DEPLOYMENT_TYPE_UNSPECIFIED'. Must be one of ['DENSE']."),
            (request("m", reservationName=None), "Required field 'resource.reservationName' not specified"),
            (request("m", reservationName=None, namePrefix="a-prefix-of-21-chars-"), "Invalid value for field 'resource.namePrefix'"),
            (request("m", reservationName="Res"), "Invalid value for field 'resource.reservationName': 'Res'."),
        ]
        for body, message in cases:
            self.assertIn(message, self.refused("POST", p, "futureReservations", body), body)
        # A name taken in the zone (even while its insert runs): 409; a reservation name another
        # live request delivers: 400.
        op = self.zonal("POST", p, "futureReservations", request("taken"))
        error = self.zonal("POST", p, "futureReservations", request("taken"), want=409)["error"]
        self.assertEqual((error["errors"][0]["reason"], error["message"]),
                         ("alreadyExists", f"The resource 'projects/{p}/zones/{ZONE}/futureReservations/taken' already exists"))
        self.wait(p, op)
        self.assertIn(f"The reservation 'projects/{p}/zones/{ZONE}/reservations/taken-res' exists or another future reservation delivers it.",
                      self.refused("POST", p, "futureReservations", request("other", reservationName="taken-res")))
        # A DEFAULT-mode request is kept as given, without the calendar rules, and nothing approves it.
        default = self.insert(p, request("plain", machine="n2-standard-8", start=200, end=400, reservationMode="DEFAULT", autoDeleteAutoCreatedReservations=None))
        time.sleep(1)
        self.assertEqual(self.zonal("GET", p, "futureReservations/plain")["status"], {"procurementStatus": "PENDING_APPROVAL"})
        self.assertEqual(default["reservationMode"], "DEFAULT")
        # Requests off Compute's discovery document never reach the emulator.
        self.assertIn('Unknown name "failureReason"', self.refused("POST", p, "futureReservations", request("x", status={"failureReason": "x"})))
        self.assertEqual(sorted(f["name"] for f in self.zonal("GET", p, "futureReservations")["items"]), ["plain", "taken"])

    def test_cancel_delete_drafts_declines_and_names(self):
        p = "fr-cancel"
        self.clock(p, now=at(0))
        # Cancelled before its start: CANCELLED, its reservation deleted; then deletable.
        self.insert(p, request("early"))
        self.until(p, "early", "APPROVED")
        self.zonal("GET", p, "reservations/early-res")
        op = self.zonal("POST", p, "futureReservations/early/cancel")
        self.assertEqual((op["operationType"], op["zone"]), ("cancel", LINK + f"projects/{p}/zones/{ZONE}"))
        self.assertNotIn("error", self.wait(p, op))
        self.assertEqual(self.zonal("GET", p, "futureReservations/early")["status"], {"procurementStatus": "CANCELLED"})
        self.zonal("GET", p, "reservations/early-res", want=404)
        self.assertIn("is CANCELLED and cannot be cancelled", self.refused("POST", p, "futureReservations/early/cancel"))
        self.wait(p, self.zonal("DELETE", p, "futureReservations/early"))
        self.zonal("GET", p, "futureReservations/early", want=404)
        # A draft stays DRAFTING, delivers nothing, and may be deleted at once.
        self.insert(p, request("draft", planningStatus="DRAFT"))
        time.sleep(1)
        self.assertEqual(self.zonal("GET", p, "futureReservations/draft")["status"], {"procurementStatus": "DRAFTING"})
        self.zonal("GET", p, "reservations/draft-res", want=404)
        self.wait(p, self.zonal("DELETE", p, "futureReservations/draft"))
        # Availability: 64 A3 Ultra VMs a zone at one time; what overlaps an approved request is declined.
        self.insert(p, request("big", count=65))
        self.until(p, "big", "DECLINED")
        self.zonal("GET", p, "reservations/big-res", want=404)
        self.wait(p, self.zonal("DELETE", p, "futureReservations/big"))
        self.insert(p, request("first", count=40, start=20, end=30))
        self.until(p, "first", "APPROVED")
        self.insert(p, request("overlap", count=30, start=25, end=35))
        self.until(p, "overlap", "DECLINED")
        self.insert(p, request("after", count=30, start=30, end=40))
        self.until(p, "after", "APPROVED")
        # namePrefix names the reservation PREFIX-START DATE-NNNN; a duration sets the end; a
        # reservation kept (autoDeleteAutoCreatedReservations false) outlives its request.
        body = request("kept", reservationName=None, namePrefix="ml", autoDeleteAutoCreatedReservations=False,
                       timeWindow={"startTime": at(50), "duration": {"seconds": str(3 * DAY)}})
        self.insert(p, body)
        self.until(p, "kept", "APPROVED")
        res = self.zonal("GET", p, "reservations/ml-20270223-0001")
        self.assertNotIn("deleteAtTime", res)
        self.clock(p, advance_seconds=60 * DAY)
        fr = self.zonal("GET", p, "futureReservations/kept")
        self.assertEqual(fr["status"]["autoCreatedReservations"], [res["selfLink"]])
        self.assertEqual(self.zonal("GET", p, "reservations/ml-20270223-0001")["status"], "READY")
        self.wait(p, self.zonal("DELETE", p, "futureReservations/kept"))
        self.assertEqual(self.zonal("GET", p, "reservations/ml-20270223-0001")["status"], "READY")
        self.assertEqual(self.violations(p), [])


class GkePools(Client, unittest.TestCase):
    def gke(self, method, project, path, body=None, want=200):
        return self.call(method, project, f"locations/{REGION}/{path}", body, want, api="container", alt=INTS)

    def gke_wait(self, project, op):
        for _ in range(200):
            if op["status"] == DONE:
                return op
            time.sleep(0.05)
            op = self.gke("GET", project, f"operations/{op['name']}")
        self.fail(f"operation never ended: {op}")

    def cluster(self, project):
        """A running regional cluster on `project`'s network `main`, as the GKE smoke test makes it."""
        for path, body in (("global/networks", {"name": "main", "autoCreateSubnetworks": False}),
                           (f"regions/{REGION}/subnetworks", {"name": "main-sub", "network": "global/networks/main", "ipCidrRange": "10.0.0.0/20",
                                                               "secondaryIpRanges": [{"rangeName": "pods", "ipCidrRange": "10.64.0.0/14"},
                                                                                     {"rangeName": "svc", "ipCidrRange": "10.96.0.0/20"}]})):
            self.wait(project, self.call("POST", project, path, body))
        body = {"cluster": {"name": "c", "network": "main", "subnetwork": "main-sub",
                            "ipAllocationPolicy": {"useIpAliases": True, "clusterSecondaryRangeName": "pods", "servicesSecondaryRangeName": "svc"},
                            "nodePools": [{"name": "system", "initialNodeCount": 1, "locations": [ZONE], "config": {"machineType": "e2-standard-4"}}]}}
        self.assertNotIn("error", self.gke_wait(project, self.gke("POST", project, "clusters", body)))

    def pool(self, project, name, reservation, nodes, machine="a3-highgpu-8g"):
        """The create operation, polled to the end, of a pool of `nodes` per zone on `reservation`."""
        affinity = {"consumeReservationType": SPECIFIC, "key": "compute.googleapis.com/reservation-name", "values": [reservation]}
        body = {"nodePool": {"name": name, "initialNodeCount": nodes, "locations": [ZONE],
                             "config": {"machineType": machine, "reservationAffinity": affinity}}}
        return self.gke_wait(project, self.gke("POST", project, "clusters/c/nodePools", body))

    def status(self, project, name):
        return self.gke("GET", project, f"clusters/c/nodePools/{name}")["status"]

    def test_pools_on_a_delivered_reservation(self):
        p = "fr-gke"
        self.clock(p, now=at(0))
        self.cluster(p)
        self.insert(p, request("gpu", machine="a3-highgpu-8g", count=2, start=5, end=12))
        self.until(p, "gpu", "APPROVED")
        # Before the start: not active; the pool is left in ERROR, never RUNNING.
        op = self.pool(p, "early", "gpu-res", 2)
        self.assertEqual(op["error"]["code"], 9)  # FAILED_PRECONDITION
        self.assertIn('Google Compute Engine: reservation "gpu-res" is not active for node pool "early" at zone "us-central1-a"', op["error"]["message"])
        self.assertEqual(self.status(p, "early"), ERROR)
        self.gke_wait(p, self.gke("DELETE", p, "clusters/c/nodePools/early"))
        # A pool of no nodes consumes nothing: it comes up (and holds nothing).
        self.assertNotIn("error", self.pool(p, "idle", "gpu-res", 0))
        # From the start: at most the reservation's count per zone, what other pools hold counted.
        self.clock(p, advance_seconds=5 * DAY)
        self.assertEqual(self.zonal("GET", p, "reservations/gpu-res")["status"], "READY")
        self.assertNotIn("error", self.pool(p, "gpu", "gpu-res", 2))
        self.assertEqual(self.status(p, "gpu"), RUNNING)
        self.assertEqual(self.zonal("GET", p, "reservations/gpu-res")["specificReservation"]["inUseCount"], "2")
        op = self.pool(p, "more", "gpu-res", 1)
        self.assertEqual((op["error"]["code"], self.status(p, "more")), (8, ERROR))  # RESOURCE_EXHAUSTED
        self.assertIn('Reservation does not have enough resources for the request: specific reservation "gpu-res" is insufficient for node pool "more" '
                      'at zone "us-central1-a": required 1 and short of 1 VM count of machine type a3-highgpu-8g.', op["error"]["message"])
        self.gke_wait(p, self.gke("DELETE", p, "clusters/c/nodePools/more"))
        op = self.gke_wait(p, self.gke("POST", p, "clusters/c/nodePools/gpu:setSize", {"nodeCount": 3}))
        self.assertIn("short of 1 VM count", op["error"]["message"])
        self.assertEqual(self.gke("GET", p, "clusters/c/nodePools/gpu")["status"], RUNNING)
        self.assertNotIn("error", self.gke_wait(p, self.gke("POST", p, "clusters/c/nodePools/gpu:setSize", {"nodeCount": 1})))
        self.assertEqual(self.zonal("GET", p, "reservations/gpu-res")["specificReservation"]["inUseCount"], "1")
        # A reservation name the project never had is accepted, as before (a known gap).
        self.assertNotIn("error", self.pool(p, "elsewhere", "never-had", 1))
        # After the end the reservation is gone: not found.
        self.clock(p, advance_seconds=7 * DAY)
        op = self.pool(p, "late", "gpu-res", 1)
        self.assertEqual((op["error"]["code"], self.status(p, "late")), (5, ERROR))  # NOT_FOUND
        self.assertEqual(op["error"]["message"], 'Google Compute Engine: reservation "gpu-res" not found for node pool "late" at zone "us-central1-a".')
        self.assertEqual(self.violations(p), [])

