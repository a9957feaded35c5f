"""The middleware in front of moto's WSGI app (as moto.server.ThreadedMotoServer serves it):
  * isolates tests by account: a 12-digit access key id is used as the account id;
  * sends the Google APIs' paths to their emulators (gcp.py): /compute/v1/... (gcp_compute.py),
    /container/v1/... (GKE, gcp_container.py), /file/v1/... (Filestore, gcp_filestore.py), whose
    project stands for the account, and /storage/v1/..., /upload/storage/v1/... (Cloud Storage,
    gcs.py), whose bucket's project does; a chunked request body (the GCS crate's uploads) is
    read to its end;
  * counts requests per account as `service:Action` (REST ones as `service:METHOD path`, EFS
    ids and ARNs in paths as {}; Google ones as `compute:networks.insert`,
    `container:clusters.nodePools.create`, `file:instances.create`, `storage:objects.insert`), and injected faults as
    `fault:service:Action` (GET /_forge/calls?account=ID);
  * throttles as the clouds do, with token buckets (POST /_forge/buckets [{"account", "match",
    "class", "burst", "refill", "per_action"}]): each call takes a token from its account's
    bucket of the first rule it matches (`match` on `service:Action`; the rule's `class` names
    the bucket, so several patterns can share one; with "per_action", as EC2 does, each action
    has a bucket of the class's size), refilled at `refill` per second up to `burst`; an empty
    bucket answers the service's own throttling error, counted as `throttled:service:Action`;
  * injects faults in each protocol's own error format and latency per operation
    (POST /_forge/faults, POST /_forge/latency); a fault with "when": "after" lets the call do
    its work and then answers with a server error, as when a response is lost, and latency
    with "when": "after" lets it take effect at once and answers only after the delay, as for a
    client killed mid-call (both take "?account=ID" to replace only that account's rules); kind "html" is a
    502 HTML page, as from a proxy; kind "failed_operation" lets a Google call start its
    operation and makes the operation end in an error ("code" and "message", by default each
    API's internal error: Compute's INTERNAL_ERROR, GKE's and Filestore's INTERNAL; GKE and
    Filestore take google.rpc.Code names, and GCE_STOCKOUT, the stockout of the zone, or
    GCE_QUOTA_EXCEEDED; what a failed create was making is left in ERROR);
  * keeps a clock per account for EC2 Capacity Blocks and Capacity Reservations (capacity.py):
    POST /_forge/clock?account=ID {"now": "2026-12-01T00:00:00Z"} freezes it there,
    {"advance_seconds": n} moves it on, {"now": null} gives it real time again (the default);
    without `account`, the clock of every account that has none of its own; GET reads it as
    {"now", "frozen"}. Blocks go scheduled -> active -> expired by it, and offerings start from
    it, as do the scheduled actions of Auto Scaling groups (autoscaling.py) and, with a Google
    project as the account, calendar-mode future reservations (gcp_reservations.py). POST
    /_forge/capacity?account=ID {"visible_after_seconds": s} makes the account's new
    reservations visible to Describe calls only s real seconds after they are made (EC2's
    eventual consistency); GET /_forge/capacity?account=ID lists the Capacity Blocks it bought
    and their extensions ({"purchases": [{"CapacityReservationId", "CapacityBlockOfferingId",
    "UpfrontFee", ...}], "extensions": [{"CapacityReservationId",
    "CapacityBlockExtensionOfferingId", "UpfrontFee", ...}], "total_fee",
    "visible_after_seconds"}; every account's without `account`);
  * sets how long phases last (POST /_forge/phases[?account=ID] {"seconds": s}: with `account`,
    only the phases that account's requests start; null: the default again), and how long the operations
    of matching Google calls last (POST /_forge/operation_seconds[?account=] [{"match",
    "account", "seconds"}], e.g. GPU node pools slower than the rest; with `account`, the
    rules of that account are replaced and other tests' kept);
  * makes S3's conditional writes and deletes (If-None-Match: *, If-Match) atomic, as S3's are:
    moto checks the condition and then writes, so two such requests at once could both pass;
  * serves a Kubernetes API server per emulated cluster (kubernetes.py): POST
    /_forge/kubernetes/clusters {"cluster"} starts one and answers its endpoint and CA; POST
    /_forge/kubernetes/nodes sets a node group's Nodes; GET /_forge/kubernetes/requests?cluster=
    lists what it answered, with each bearer token; POST /_forge/kubernetes/webhook makes a
    group's admission webhook unavailable for some seconds; POST /_forge/kubernetes/reach
    {"cluster", "mode"} makes its endpoint refuse connections ("refuse"), answer 401
    ("unauthorized") or 403 ("forbidden"), or answer again ("open"); POST /_forge/kubernetes/stall makes
    writes to matching paths answer only after some seconds (they take effect at once);
  * sends the SigV4 service `pcs` (AWS Parallel Computing Service, which moto lacks) to pcs.py,
    and `pricing` (the Price List Query API, which moto also lacks) to pricing.py;
    POST /_forge/pcs/failures makes matching compute node groups fail their create;
  * mirrors the release hosts of Kubernetes bundles (bundles.py): GET /_forge/bundles/<host>/<path>,
    as forge's FORGE_BUNDLE_MIRROR reaches them; POST /_forge/bundles {"path", "text"} serves a
    test's own text at a path;
  * drops the `Filter.N` parameters of matching EC2 calls (POST /_forge/ignore_filters, rules
    as for faults), as a server that ignores or widens a filter would: what forge's ownership
    checks must not rely on;
  * holds every request to its API's official model before anything else (faults, latency,
    buckets): AWS ones to botocore's model of the service (aws_model.py), Google ones to the
    API's discovery document (google_model.py); a request the model does not allow answers the
    service's own validation error and is recorded as a violation of its account (Google: its
    project), as is an emulator defect: a 500 that moto or an emulator answers itself (not an
    injected fault), or an exception the check raised. GET /_forge/violations?account=ID lists
    them (every account's without `account`) as [{"account", "operation", "kind": "model" or
    "emulator defect", "message"}]; GET /_forge/models tells the AWS models loaded: protocol,
    operations, patterns, the patterns skipped (Python cannot compile them).
"""

import fnmatch
import io
import json
import random
import re
import threading
import time
import traceback
import urllib.parse
from collections import Counter

from .gcp_compute import Compute
from .gcp_container import Container
from .gcp_billing import Billing
from .gcp_filestore import Filestore
from .gcs import Storage
from . import aws_model, bundles, capacity, google_model, kubernetes, pcs, pricing
from .phases import serving, set_phase_seconds


DEFAULT_ACCOUNT = "123456789012"
COMPUTE = Compute()
GOOGLE_APIS = [COMPUTE, Container(COMPUTE), Filestore(COMPUTE), Storage(), Billing()]  # served instead of moto below their path prefix
OWN_AWS = {"pcs": pcs.Pcs(), "pricing": pricing.Pricing()}  # served instead of moto: the AWS services it lacks, by SigV4 service


# --- the middleware: accounts, request counter, faults, latency ------------------------------

THROTTLE = {
    "ec2": (503, "text/xml", "<Response><Errors><Error><Code>RequestLimitExceeded</Code><Message>Request limit exceeded.</Message></Error></Errors><RequestID>forge-fault</RequestID></Response>"),
    "iam": (400, "text/xml", "<ErrorResponse><Error><Type>Sender</Type><Code>Throttling</Code><Message>Rate exceeded</Message></Error><RequestId>forge-fault</RequestId></ErrorResponse>"),
    "cloudformation": (400, "text/xml", "<ErrorResponse><Error><Type>Sender</Type><Code>Throttling</Code><Message>Rate exceeded</Message></Error><RequestId>forge-fault</RequestId></ErrorResponse>"),
    "autoscaling": (400, "text/xml", "<ErrorResponse><Error><Type>Sender</Type><Code>Throttling</Code><Message>Rate exceeded</Message></Error><RequestId>forge-fault</RequestId></ErrorResponse>"),
    "fsx": (400, "application/x-amz-json-1.1", '{"__type":"ThrottlingException","message":"Rate exceeded"}'),
    "eks": (429, "application/json", '{"message":"Rate exceeded"}'),
    "elasticfilesystem": (429, "application/json", '{"ErrorCode":"ThrottlingException","Message":"Rate exceeded"}'),
    "s3": (503, "application/xml", "<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>"),
    "pcs": (400, "application/x-amz-json-1.0", '{"__type":"ThrottlingException","message":"Rate exceeded"}'),
    "pricing": (400, "application/x-amz-json-1.1", '{"__type":"ThrottlingException","Message":"Rate exceeded"}'),
}
SERVER_ERROR = {
    "ec2": (500, "text/xml", "<Response><Errors><Error><Code>InternalError</Code><Message>An internal error has occurred.</Message></Error></Errors><RequestID>forge-fault</RequestID></Response>"),
    "iam": (500, "text/xml", "<ErrorResponse><Error><Type>Receiver</Type><Code>ServiceFailure</Code><Message>Service failure</Message></Error><RequestId>forge-fault</RequestId></ErrorResponse>"),
    "cloudformation": (500, "text/xml", "<ErrorResponse><Error><Type>Receiver</Type><Code>InternalFailure</Code><Message>Internal failure</Message></Error><RequestId>forge-fault</RequestId></ErrorResponse>"),
    "autoscaling": (500, "text/xml", "<ErrorResponse><Error><Type>Receiver</Type><Code>InternalFailure</Code><Message>Internal failure</Message></Error><RequestId>forge-fault</RequestId></ErrorResponse>"),
    "fsx": (500, "application/x-amz-json-1.1", '{"__type":"InternalServerError","message":"Internal server error"}'),
    "eks": (500, "application/json", '{"message":"Internal server error"}'),
    "elasticfilesystem": (500, "application/json", '{"ErrorCode":"InternalServerError","Message":"Internal server error"}'),
    "s3": (500, "application/xml", "<Error><Code>InternalError</Code><Message>We encountered an internal error.</Message></Error>"),
    "pcs": (500, "application/x-amz-json-1.0", '{"__type":"InternalServerException","message":"Internal server error"}'),
    "pricing": (500, "application/x-amz-json-1.1", '{"__type":"InternalErrorException","Message":"An internal error occurred"}'),
}
# REST-JSON services name the error in a header.
ERROR_TYPE_HEADERS = {"eks": {429: "ThrottlingException", 500: "ServerException"}, "elasticfilesystem": {429: "ThrottlingException", 500: "InternalServerError"}}
EFS_ID = re.compile(r"/(?:fs|fsmt|fsap)-[0-9a-f]+|/arn:[^/]*(?:/[^/]+)?$")


def operation(service, environ, body):
    """`service:Action` for query, JSON and REST protocols."""
    target = environ.get("HTTP_X_AMZ_TARGET")
    if target:
        return target.split(".")[-1]
    if service in ("ec2", "iam", "cloudformation", "sts", "autoscaling"):
        params = urllib.parse.parse_qs(body.decode(errors="replace")) if body else {}
        params.update(urllib.parse.parse_qs(environ.get("QUERY_STRING", "")))
        return params.get("Action", ["?"])[0]
    path = environ.get("PATH_INFO", "")
    if service == "s3":
        path = re.sub(r"/[^/]+", "/{}", path)
    elif service == "elasticfilesystem":  # ids and ARNs in EFS paths, as {}
        path = EFS_ID.sub("/{}", urllib.parse.unquote(path))
    return f"{environ.get('REQUEST_METHOD', 'GET')} {path}"


def respond(start_response, status, headers, body, reason="Error"):
    start_response(f"{status} {reason}", headers + [("Content-Length", str(len(body)))])
    return [body]


def without_filters(body):
    """An EC2 query body without its `Filter.N.*` parameters."""
    params = urllib.parse.parse_qsl(body.decode(), keep_blank_values=True)
    return urllib.parse.urlencode([(k, v) for k, v in params if not k.startswith("Filter.")]).encode()


class Harness:
    def __init__(self, app):
        self.app = app
        self.lock = threading.Lock()
        self.conditional_s3 = threading.Lock()
        self.calls = Counter()
        self.faults = []
        self.latency = []
        self.operation_seconds = []
        self.ignore_filters = []
        self.bucket_rules = []  # POST /_forge/buckets
        self.buckets = {}  # (account, class[, action]) -> (tokens, when last refilled)
        self.violations = []  # GET /_forge/violations

    def __call__(self, environ, start_response):
        path = environ.get("PATH_INFO", "")
        if path.startswith("/_forge/"):
            return self.control(environ, start_response)
        length = int(environ.get("CONTENT_LENGTH") or 0)
        if environ.get("wsgi.input_terminated"):  # chunked (the GCS crate's uploads): read to the end
            body = environ["wsgi.input"].read()
        else:
            body = environ["wsgi.input"].read(length) if length else b""
        environ["wsgi.input"], environ["CONTENT_LENGTH"] = io.BytesIO(body), str(len(body))
        google = next((api for api in GOOGLE_APIS if path.startswith(api.prefix)), None)
        if google is not None:  # any bearer token, or none; the project in the path is the account
            account, name, mutation = google.identify(environ)
            service, app = google.service, google
        else:
            auth = environ.get("HTTP_AUTHORIZATION", "")
            match = re.search(r"Credential=([^/]+)/[^/]+/[^/]+/([^/]+)/", auth)
            key, service = match.groups() if match else ("", "")
            account = key if re.fullmatch(r"\d{12}", key) else DEFAULT_ACCOUNT
            environ["HTTP_X_MOTO_ACCOUNT_ID"] = account
            name, mutation, app = f"{service}:{operation(service, environ, body)}", False, OWN_AWS.get(service, self.app)
        rejected = self.check(google, service, environ, body, account, name)
        if google is None and any(self.applies(r, account, name) for r in self.ignore_filters):
            body = without_filters(body)
            environ["wsgi.input"], environ["CONTENT_LENGTH"] = io.BytesIO(body), str(len(body))
        with self.lock:
            self.calls[(account, name)] += 1
        if rejected is not None:
            status, headers, text = rejected
            return respond(start_response, status, headers, text.encode())
        with self.lock:
            delay = max((r["ms"] for r in self.latency if r.get("when") != "after" and self.applies(r, account, name)), default=0)
            late = max((r["ms"] for r in self.latency if r.get("when") == "after" and self.applies(r, account, name)), default=0)
            seconds = next((r["seconds"] for r in self.operation_seconds if self.applies(r, account, name)), None)
            fault = next((r for r in self.faults if self.applies(r, account, name, mutation) and r["rng"].random() < r["rate"]), None)
            if fault is not None:
                self.calls[(account, f"fault:{name}")] += 1
            elif not self.take_token(account, name):
                fault = {"kind": "throttle"}
                self.calls[(account, f"throttled:{name}")] += 1
        if delay:
            time.sleep(delay / 1000)
        if google is not None and seconds is not None:
            environ["forge.operation_seconds"] = float(seconds)
        if fault is not None and fault["kind"] == "failed_operation":
            # Accepted, and the operation it starts ends in an error.
            environ["forge.failed_operation"] = {"code": fault.get("code"), "message": fault.get("message")}
            fault = None
        if fault is not None and fault.get("when") == "after":
            # The cloud did the work, the answer is lost: what a retry must not do twice.
            self.serve(app, environ, lambda status, headers, exc_info=None: None, account, name)
            fault = dict(fault, kind="5xx")
        if fault is not None:
            if fault["kind"] == "html":
                status, ctype, text = 502, "text/html", "<html><body>Bad Gateway</body></html>"
            elif google is not None:
                status, ctype, text = google.fault(fault["kind"])
            else:
                table = THROTTLE if fault["kind"] == "throttle" else SERVER_ERROR
                status, ctype, text = table.get(service, SERVER_ERROR["ec2"])
            headers = [("Content-Type", ctype)]
            if service in ERROR_TYPE_HEADERS and fault["kind"] != "html":
                headers.append(("x-amzn-ErrorType", ERROR_TYPE_HEADERS[service][status]))
            return respond(start_response, status, headers, text.encode(), "Fault")
        if late:
            # The call takes effect now and its answer comes late: a client killed meanwhile
            # never learns of what it made.
            answered = []
            parts = self.serve(app, environ, lambda status, headers, exc_info=None: answered.append((status, headers)), account, name)
            time.sleep(late / 1000)
            start_response(*answered[0])
            return parts
        conditional = environ.get("HTTP_IF_NONE_MATCH") or environ.get("HTTP_IF_MATCH")
        if service == "s3" and conditional and environ.get("REQUEST_METHOD") in ("PUT", "DELETE"):
            with self.conditional_s3:
                return self.serve(app, environ, start_response, account, name)
        return self.serve(app, environ, start_response, account, name)

    def check(self, google, service, environ, body, account, name):
        """The request held to its API's model: None when it passes, else the error to answer,
        (status, headers, body), recorded as a violation. A check that fails is an emulator
        defect, and lets the request through."""
        try:
            if google is not None:
                found = google_model.check(google, environ, body)
                rejected = found and (found[0], [("Content-Type", found[1])], found[2], found[3])
            else:
                rejected = aws_model.check(service, environ, body)
        except Exception:
            self.violate(account, name, "emulator defect", "the model check failed: " + traceback.format_exc(limit=-3))
            return None
        if rejected is None:
            return None
        self.violate(account, name, "model", rejected[3])
        return rejected[:3]

    def serve(self, app, environ, start_response, account, name):
        """`app`'s answer, whole; a 500 it answers, or an exception it raises, is recorded as an
        emulator defect."""
        statuses = []

        def start(status, headers, exc_info=None):
            statuses.append(status)
            return start_response(status, headers, exc_info)

        serving(account)
        try:
            answer = app(environ, start)
            parts = list(answer)
        except Exception:
            self.violate(account, name, "emulator defect", "the emulator raised: " + traceback.format_exc(limit=-3))
            raise
        if hasattr(answer, "close"):
            answer.close()
        if statuses and statuses[-1].startswith("500"):
            text = b"".join(parts).decode(errors="replace")
            self.violate(account, name, "emulator defect", f"the emulator answered {statuses[-1]}: {text[:500]}")
        return parts

    def violate(self, account, name, kind, message):
        with self.lock:
            self.violations.append({"account": account, "operation": name, "kind": kind, "message": message})

    def take_token(self, account, name):
        """Whether the call `name` of `account` may go: a token from the bucket of the first
        rule it matches (each account has its own bucket per rule's class), refilled at the
        rule's rate up to its burst; a call no rule matches always goes."""
        rule = next((r for r in self.bucket_rules if self.applies(r, account, name)), None)
        if rule is None:
            return True
        key = (account, rule.get("class", rule["match"])) + ((name,) if rule.get("per_action") else ())
        now = time.monotonic()
        tokens, since = self.buckets.get(key, (float(rule["burst"]), now))
        tokens = min(float(rule["burst"]), tokens + (now - since) * float(rule["refill"]))
        allowed = tokens >= 1.0
        self.buckets[key] = (tokens - 1.0 if allowed else tokens, now)
        return allowed

    @staticmethod
    def applies(rule, account, name, mutation=False):
        """Whether a fault or latency rule covers a call; failed_operation covers only the Google
        calls that start an operation."""
        return (rule.get("account") in (None, account) and fnmatch.fnmatchcase(name, rule.get("match", "*"))
                and (rule.get("kind") != "failed_operation" or mutation))

    def control(self, environ, start_response):
        path = environ["PATH_INFO"]
        if path.startswith("/_forge/bundles/"):
            text = bundles.serve(path[len("/_forge/bundles/"):])
            status, body = ("200 OK", text.encode()) if text is not None else ("404 Not Found", b"no such bundle on the mirror")
            start_response(status, [("Content-Type", "application/yaml"), ("Content-Length", str(len(body)))])
            return [body]
        query = urllib.parse.parse_qs(environ.get("QUERY_STRING", ""))
        length = int(environ.get("CONTENT_LENGTH") or 0)
        payload = json.loads(environ["wsgi.input"].read(length) or b"null") if length else None
        account = query.get("account", [None])[0]
        with self.lock:
            if path == "/_forge/calls":
                result = {n: c for (a, n), c in sorted(self.calls.items()) if account in (None, a)}
            elif path == "/_forge/violations":
                result = [v for v in self.violations if account in (None, v["account"])]
            elif path == "/_forge/models":
                result = aws_model.report()
            elif path == "/_forge/reset":
                self.calls = Counter({k: v for k, v in self.calls.items() if account not in (None, k[0])})
                result = {}
            elif path == "/_forge/faults":
                rules = payload or []
                for i, r in enumerate(rules):
                    r.setdefault("kind", "throttle")
                    r.setdefault("rate", 1.0)
                    r["rng"] = random.Random(r.get("seed", i))
                self.faults = [r for r in self.faults if account is not None and r.get("account") != account] + rules
                result = {"faults": len(self.faults)}
            elif path == "/_forge/ignore_filters":
                self.ignore_filters = payload or []
                result = {"ignore_filters": len(self.ignore_filters)}
            elif path == "/_forge/buckets":
                self.bucket_rules = payload or []
                self.buckets = {}
                result = {"buckets": len(self.bucket_rules)}
            elif path == "/_forge/latency":
                self.latency = [r for r in self.latency if account is not None and r.get("account") != account] + (payload or [])
                result = {"latency": len(self.latency)}
            elif path == "/_forge/operation_seconds":  # with ?account=, that account's rules only
                self.operation_seconds = [r for r in self.operation_seconds if account is not None and r.get("account") != account] + (payload or [])
                result = {"operation_seconds": len(self.operation_seconds)}
            elif path == "/_forge/kubernetes/clusters":
                endpoint, ca = kubernetes.serve(payload["cluster"])
                result = {"endpoint": endpoint, "ca": ca.decode()}
            elif path == "/_forge/kubernetes/nodes":
                nodes = [(n["name"], n.get("labels", {}), n.get("taints", []), n.get("allocatable", {})) for n in payload["nodes"]]
                kubernetes.set_nodes(payload["cluster"], payload["group_label"], payload["group"], nodes)
                result = {"nodes": len(nodes)}
            elif path == "/_forge/kubernetes/requests":
                cluster = query.get("cluster", [""])[0]
                try:
                    result = [{"method": m, "path": p, "token": t} for m, p, t in kubernetes.requests(cluster)]
                except KeyError:
                    body = json.dumps({"error": f"no cluster {cluster}"}).encode()
                    start_response("404 Not Found", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
                    return [body]
            elif path == "/_forge/kubernetes/stall":
                kubernetes.stall(payload["cluster"], payload["path"], float(payload["seconds"]))
                result = {}
            elif path == "/_forge/kubernetes/reach":
                kubernetes.set_reach(payload["cluster"], payload["mode"])
                result = {}
            elif path == "/_forge/kubernetes/webhook":
                kubernetes.webhook_down(payload["cluster"], payload["group"], float(payload["seconds"]))
                result = {}
            elif path == "/_forge/pcs/failures":
                pcs.FAILURES[:] = payload or []
                result = {"failures": len(pcs.FAILURES)}
            elif path == "/_forge/bundles":
                bundles.put(payload["path"], payload["text"])
                result = {}
            elif path == "/_forge/phases":
                seconds = payload.get("seconds", 0)
                set_phase_seconds(None if seconds is None else float(seconds), account)
                result = {}
            elif path == "/_forge/clock":  # POST sets the account's clock (none: every other account's), GET reads it
                result = capacity.set_clock(account, payload) if payload is not None else capacity.clock(account)
            elif path == "/_forge/capacity":  # POST: the account's visible_after_seconds; GET: its Capacity Block purchases
                result = capacity.set_capacity(account, payload) if payload is not None else capacity.purchases(account)
            else:
                body = b'{"error": "unknown control path"}'
                start_response("404 Not Found", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
                return [body]
        body = json.dumps(result).encode()
        start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
        return [body]
