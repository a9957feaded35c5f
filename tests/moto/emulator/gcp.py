"""What every Google Cloud REST API emulated here shares (Compute, GKE, Filestore):
  * projects as isolated stores, made on first use (`Store`); another API reads them through
    `GoogleApi.lookup` (GKE and Filestore check Compute's networks), and asks what uses one of
    its resources through `users_of` (Compute's "in use" deletes);
  * Google's JSON error bodies, with the `status` string or, as Compute answers, without it
    (`GoogleError`, `error_body`), and the fault bodies the harness answers with (`fault`);
  * long-running operations: PENDING for the first half of their seconds (the phase seconds, or
    the harness's per-call ones), RUNNING for the second, then DONE, when their effect is applied;
    an operation can also end DONE with an error, and then runs its `on_error` instead
    (`Operation`, `Store.settle`), and what else an API changes as time passes follows each
    time operations are settled (`GoogleApi.settle`: Compute's future reservations, by the
    project's clock); the errors of failed_operation faults for the APIs whose
    operations carry a google.rpc.Status (`rpc_failure`, GCE_STOCKOUT naming the zone);
  * requestId replay: a call repeated with the same requestId in the same project answers the
    first call's operation and does nothing again;
  * RFC 1035 names (`check_name`), labels (`check_labels`), zones and regions (`region_of`),
    unknown request fields (`check_fields`) and list pages (`page`);
  * proto enums (`Enum`): requests may give names or numbers (`read_enums`); answers give numbers
    when the request asks `$alt=json;enum-encoding=int`, as the Rust clients do, else names
    (`write_enums`);
  * the WSGI side: routing, JSON bodies, any bearer token or none (`GoogleApi`).
An API subclasses GoogleApi: `route` maps a request to its handler, which gets a `Call`.
"""

import base64
import hashlib
import json
import re
import secrets
import threading
import time
import urllib.parse
import uuid
from datetime import datetime, timezone

from moto.moto_api import state_manager

from .phases import GCP_OPERATION


NAME = re.compile(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?")
ZONE = re.compile(r"(?P<region>[a-z]+-[a-z]+[0-9]+)-[a-z]")
REGION = re.compile(r"[a-z]+-[a-z]+[0-9]+")
LABEL_KEY = re.compile(r"[a-z][-_a-z0-9]{0,62}")
LABEL_VALUE = re.compile(r"[-_a-z0-9]{0,63}")
STATUS = {400: "INVALID_ARGUMENT", 404: "NOT_FOUND", 409: "ALREADY_EXISTS", 412: "FAILED_PRECONDITION",
          429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE"}
REASONS = {400: "Bad Request", 404: "Not Found", 409: "Conflict", 412: "Precondition Failed",
           429: "Too Many Requests", 500: "Internal Server Error", 503: "Service Unavailable"}


def operation_seconds():
    transition = state_manager.get_transition(model_name=GCP_OPERATION)
    return transition["seconds"] if transition["progression"] == "time" else 0.0


def timestamp(seconds):
    return datetime.fromtimestamp(seconds, timezone.utc).isoformat(timespec="milliseconds")


def zulu(seconds):
    """RFC 3339 in UTC with a Z, as GKE and Filestore write times."""
    return datetime.fromtimestamp(seconds, timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")


def fingerprint(value):
    """A short fingerprint of a JSON value (GKE's labelFingerprint)."""
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:8]


def new_id():
    """A uint64 id, as the JSON string Google sends."""
    return str(secrets.randbits(63) | 1 << 62)


class GoogleError(Exception):
    """An error answer; `status` overrides the one of the HTTP code (GKE's 400 FAILED_PRECONDITION)."""

    def __init__(self, code, message, reason, domain="global", status=None):
        super().__init__(message)
        self.code, self.message, self.reason, self.domain, self.status = code, message, reason, domain, status


def error_body(code, message, reason, domain="global", with_status=True, status=None):
    error = {"code": code, "message": message, "errors": [{"message": message, "domain": domain, "reason": reason}]}
    if with_status:
        error["status"] = status or STATUS.get(code, "UNKNOWN")
    return error


def required(field):
    return GoogleError(400, f"Required field '{field}' not specified", "required")


def bad_request(message):
    return GoogleError(400, message, "badRequest")


def precondition(message):
    """GKE's and Filestore's 400 FAILED_PRECONDITION."""
    return GoogleError(400, message, "failedPrecondition", status="FAILED_PRECONDITION")


def visible(record):
    """A stored record without the emulator's own fields (`_…`)."""
    return {k: v for k, v in record.items() if not k.startswith("_")}


def check_name(name, field="resource.name", limit=63):
    if not name:
        raise required(field)
    if not isinstance(name, str) or len(name) > limit or not NAME.fullmatch(name):
        raise GoogleError(400, f"Invalid value for field '{field}': '{name}'. Must be a match of regex '(?:[a-z](?:[-a-z0-9]{{0,{limit - 2}}}[a-z0-9])?)'", "invalid")


def check_labels(labels, field):
    """Google Cloud labels: at most 64, keys and values of lowercase letters, digits, _ and -."""
    if not isinstance(labels, dict) or len(labels) > 64:
        raise GoogleError(400, f"Invalid value for field '{field}': at most 64 labels, as a map of strings.", "invalid")
    for key, value in labels.items():
        if not LABEL_KEY.fullmatch(key) or not isinstance(value, str) or not LABEL_VALUE.fullmatch(value):
            raise GoogleError(400, f"Invalid value for field '{field}': label '{key}': '{value}'. Keys start with a lowercase letter; keys and values have at most 63 lowercase letters, digits, '_' or '-'.", "invalid")


def check_fields(body, allowed):
    """A request body's top-level fields must be the request message's, as the JSON parser checks."""
    for key in body:
        if key not in allowed:
            raise GoogleError(400, f'Invalid JSON payload received. Unknown name "{key}": Cannot find field.', "badRequest")


def region_of(location, field="location"):
    """The region of a zone or region ("us-central1-a" or "us-central1")."""
    zone = ZONE.fullmatch(location)
    if zone:
        return zone["region"]
    if REGION.fullmatch(location):
        return location
    raise GoogleError(400, f"Invalid value for field '{field}': '{location}'. It must be a zone or a region.", "badRequest")


def page(items, key, max_results, page_token, limit=500, field="maxResults"):
    """One page of `items` sorted by `key`, and the token of the next page (None at the end).
    The token names the last item given, so items added or removed between pages are neither
    repeated nor skipped."""
    try:
        size = int(max_results) if max_results not in (None, "") else limit
    except ValueError:
        size = -1
    if not 0 <= size <= limit:
        raise GoogleError(400, f"Invalid value for field '{field}': '{max_results}'. Must be in the range [0, {limit}].", "invalid")
    size = size or limit
    items = sorted(items, key=key)
    if page_token:
        try:
            after = base64.urlsafe_b64decode(page_token.encode()).decode()
        except ValueError:
            raise GoogleError(400, f"Invalid value for field 'pageToken': '{page_token}'.", "invalid")
        items = [i for i in items if key(i) > after]
    token = base64.urlsafe_b64encode(key(items[size - 1]).encode()).decode() if len(items) > size else None
    return items[:size], token


class Enum:
    """A proto enum: its full name (for errors) and its numbers by name, given as the names in
    order, `NAME=n` where a number is skipped."""

    def __init__(self, proto, names):
        self.proto, self.numbers, number = proto, {}, 0
        for word in names.split():
            name, _, given = word.partition("=")
            number = int(given) if given else number
            self.numbers[name] = number
            number += 1
        self.names = {n: name for name, n in self.numbers.items()}


RPC_CODE = Enum("google.rpc.Code", "OK CANCELLED UNKNOWN INVALID_ARGUMENT DEADLINE_EXCEEDED NOT_FOUND ALREADY_EXISTS PERMISSION_DENIED "
                "RESOURCE_EXHAUSTED FAILED_PRECONDITION ABORTED OUT_OF_RANGE UNIMPLEMENTED INTERNAL UNAVAILABLE DATA_LOSS UNAUTHENTICATED")


def snake(field):
    return re.sub(r"([A-Z])", lambda m: "_" + m[1].lower(), field)


def read_enums(value, schema, field=""):
    """A request's message with its enums as names: `schema` maps field names to an Enum or to
    the schema of a message (of each element, for lists). A value that is neither a name nor a
    number of its enum is refused as the JSON parser refuses it."""
    if isinstance(value, list):
        return [read_enums(v, schema, f"{field}[{i}]") for i, v in enumerate(value)]
    if isinstance(schema, Enum):
        if isinstance(value, bool) or not (value in schema.numbers or (isinstance(value, int) and value in schema.names)):
            raise GoogleError(400, f"Invalid value at '{snake(field)}' (type.googleapis.com/{schema.proto}), {json.dumps(value)}", "badRequest")
        return schema.names[value] if isinstance(value, int) else value
    if not isinstance(value, dict):
        return value
    return {k: read_enums(v, schema[k], f"{field}.{k}".lstrip(".")) if k in schema else v for k, v in value.items()}


def write_enums(value, schema, numbers):
    """A message as answered: its enums as numbers if `numbers`, else as the names stored."""
    if not numbers:
        return value
    if isinstance(value, list):
        return [write_enums(v, schema, numbers) for v in value]
    if isinstance(schema, Enum):
        return schema.numbers.get(value, value)
    if not isinstance(value, dict):
        return value
    return {k: write_enums(v, schema[k], numbers) if k in schema else v for k, v in value.items()}


def stockout(project, zone):
    return (f"The zone 'projects/{project}/zones/{zone}' does not have enough resources available to fulfill the request. "
            "Try a different zone, or try again later. (ZONE_RESOURCE_POOL_EXHAUSTED)")


def rpc_failure(call, code, message):
    """A failed_operation fault's error for operations that carry a google.rpc.Status (GKE,
    Filestore): (google.rpc.Code name, message, GKE condition code). GCE_STOCKOUT is the stockout
    of the call's zone, GCE_QUOTA_EXCEEDED a quota; other codes are google.rpc.Code names (by
    default INTERNAL)."""
    zone = call.zone or call.scope.rsplit("/", 1)[-1]
    if code == "GCE_STOCKOUT":
        return "RESOURCE_EXHAUSTED", message or stockout(call.project, zone), code
    if code == "GCE_QUOTA_EXCEEDED":
        return "RESOURCE_EXHAUSTED", message or f"Insufficient quota in '{zone}' to satisfy the request.", code
    code = code or "INTERNAL"
    return (code if code in RPC_CODE.numbers else "UNKNOWN"), message or "Internal error.", "UNKNOWN"


class Operation:
    """A long-running operation: `effect` runs when it ends, and what it returns is the
    operation's `result`, unless it ends with `error` (the API's own form of it: Compute's
    (code, message, http status)), when `on_error(error)` runs instead, if given."""

    def __init__(self, call, operation_type, target, target_id, effect, error=None, resource=None, on_error=None):
        self.scope, self.project = call.scope, call.project
        self.name = f"operation-{int(time.time() * 1000)}-{secrets.token_hex(7)[:13]}-{secrets.token_hex(4)}-{secrets.token_hex(4)}"
        self.id = new_id()
        self.operation_type, self.target, self.target_id = operation_type, target, target_id
        self.effect, self.error, self.resource, self.on_error = effect, error, resource, on_error
        self.result = None
        self.request_id = call.query.get("requestId")
        self.inserted = call.now
        self.seconds = operation_seconds() if call.seconds is None else call.seconds

    def status(self, now):
        elapsed = now - self.inserted
        return "DONE" if elapsed >= self.seconds else "PENDING" if elapsed < self.seconds / 2 else "RUNNING"

    def started(self):
        return self.inserted + self.seconds / 2

    def ended(self):
        return self.inserted + self.seconds


class Store:
    """One project's resources for one API: `items` are visible; `pending` holds the operation
    under way on a path (an insert's reserves the name: its resource is `op.resource`)."""

    def __init__(self, project):
        self.project = project
        self.items = {}       # relative path ("global/networks/n") -> resource
        self.pending = {}     # relative path -> Operation under way
        self.operations = {}  # (scope, name) -> Operation
        self.request_ids = {}
        self.running = []

    def settle(self, now):
        """End the operations whose time is up, in the order they started."""
        for op in [op for op in self.running if op.status(now) == "DONE"]:
            self.running.remove(op)
            if self.pending.get(op.target) is op:
                del self.pending[op.target]
            if op.error is None:
                op.result = op.effect()
            elif op.on_error is not None:
                op.on_error(op.error)

    def start(self, op):
        self.operations[(op.scope, op.name)] = op
        if op.request_id:
            self.request_ids[op.request_id] = op
        self.pending[op.target] = op
        self.running.append(op)
        return op


class Call:
    """One request as a handler sees it: `fail` is a failed_operation fault's code and message,
    `seconds` how long its operation lasts if the harness says, `numbers` whether enums are
    answered as numbers, `zone` the zone a stockout names (set by the handler)."""

    def __init__(self, api, store, scope, params, query, body, environ):
        self.api, self.store, self.project, self.scope = api, store, store.project, scope
        self.params, self.query, self.body = params, query, body
        self.fail, self.seconds = environ.get("forge.failed_operation"), environ.get("forge.operation_seconds")
        self.numbers = "enum-encoding=int" in query.get("$alt", "")
        self.zone = None
        self.now = time.time()

    def start(self, operation_type, target, target_id, effect, error=None, resource=None, on_error=None):
        """Start an operation on `target`; a failed_operation fault makes it end with an error."""
        if error is None and self.fail is not None:
            error = self.api.failure(self, self.fail["code"], self.fail["message"])
        return self.store.start(Operation(self, operation_type, target, target_id, effect, error, resource, on_error))


class GoogleApi:
    """A Google REST API as a WSGI app: subclasses set `service` (the counter's prefix), `prefix`
    (the paths served), `with_status` (whether error bodies carry the status string), `route`,
    `render_operation` and `failure`."""

    service = prefix = ""
    with_status = True

    def __init__(self):
        self.lock = threading.Lock()
        self.stores = {}

    def route(self, method, path):
        """(project, scope, call name, handler, params, mutation) for a path below `prefix`;
        raises GoogleError 404 for paths it does not serve."""
        raise NotImplementedError

    def render_operation(self, op, call):
        """An operation as this API shows it."""
        raise NotImplementedError

    def failure(self, call, code, message):
        """An operation's error for a failed_operation fault (code and message None when the
        fault gives none)."""
        raise NotImplementedError

    def settle(self, store, now):
        """End the project's operations whose time is up (`now`: real time); an API that changes
        more as time passes (Compute's future reservations) adds it here."""
        store.settle(now)

    def listed_operations(self, call):
        """operations.list as GKE and google.longrunning answer it: the location's operations
        (every location's for `-`) under `operations`, nothing when there are none."""
        ops = [op for (scope, _), op in call.store.operations.items() if call.params["location"] == "-" or scope == call.scope]
        return {"operations": [self.render_operation(op, call) for op in ops]} if ops else {}

    def users_of(self, project, path):
        """The paths of this API's records that use a resource of another API (their `_uses`
        holds its path), read without the lock: the other API asks while holding its own."""
        store = self.stores.get(project)
        return [p for p, r in list(store.items.items()) if path in r.get("_uses", ())] if store else []

    def lookup(self, project, path):
        """A resource of this API by its path in the project's store, None if there is none, as
        another API sees it: the operations whose time is up have ended."""
        with self.lock:
            store = self.stores.get(project)
            if store is None:
                return None
            self.settle(store, time.time())
            return store.items.get(path)

    def identify(self, environ):
        """(project, `service:resource.method`, whether the call starts an operation)."""
        path = environ["PATH_INFO"][len(self.prefix):]
        try:
            project, _, name, _, _, mutation = self.route(environ.get("REQUEST_METHOD", "GET"), path)
        except GoogleError:  # answered with a 404, counted under the project it names
            project = re.match(r"projects/([^/]+)", path)
            return project[1] if project else "", f"{self.service}:unknown", False
        return project, f"{self.service}:{name}", mutation

    def fault(self, kind):
        """The answer to an injected throttle or server error."""
        if kind == "throttle":
            body = error_body(429, "Rate Limit Exceeded", "rateLimitExceeded", "usageLimits", self.with_status)
        else:
            body = error_body(503, "The service is currently unavailable.", "backendError", "global", self.with_status)
        return body["code"], "application/json; charset=UTF-8", json.dumps({"error": body})

    def __call__(self, environ, start_response):
        try:
            status, result = self.handle(environ)
        except GoogleError as e:
            status, result = e.code, {"error": error_body(e.code, e.message, e.reason, e.domain, self.with_status, e.status)}
        body = json.dumps(result).encode()
        start_response(f"{status} {REASONS.get(status, 'OK')}", [("Content-Type", "application/json; charset=UTF-8"), ("Content-Length", str(len(body)))])
        return [body]

    def handle(self, environ):
        method = environ.get("REQUEST_METHOD", "GET")
        project, scope, _, handler, params, mutation = self.route(method, environ["PATH_INFO"][len(self.prefix):])
        query = {k: v[0] for k, v in urllib.parse.parse_qs(environ.get("QUERY_STRING", ""), keep_blank_values=True).items()}
        length = int(environ.get("CONTENT_LENGTH") or 0)
        raw = environ["wsgi.input"].read(length) if length else b""
        try:
            body = json.loads(raw) if raw.strip() else {}
        except ValueError:
            raise GoogleError(400, "Invalid JSON payload received.", "parseError")
        if not isinstance(body, dict):
            raise GoogleError(400, "Invalid JSON payload received. Expected an object.", "parseError")
        request_id = query.get("requestId")
        if request_id is not None:
            try:
                if uuid.UUID(request_id).int == 0:
                    raise ValueError
            except ValueError:
                raise GoogleError(400, f"Invalid value for field 'requestId': '{request_id}'. The requestId must be a valid UUID other than the zero UUID.", "invalid")
        with self.lock:
            store = self.stores.setdefault(project, Store(project))
            call = Call(self, store, scope, params, query, body, environ)
            self.settle(store, call.now)
            replayed = store.request_ids.get(request_id) if mutation and request_id else None
            result = replayed or handler(call)
            self.settle(store, call.now)  # an operation of 0 seconds is over before it is answered
            return 200, self.render_operation(result, call) if isinstance(result, Operation) else result
