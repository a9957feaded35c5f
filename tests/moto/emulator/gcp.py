"""What every Google Cloud REST API emulated here shares (Compute now, more later):
  * projects as isolated stores, made on first use (`Store`);
  * Google's JSON error bodies, with the `status` string or, as Compute answers, without it
    (`GoogleError`, `error_body`), and the fault bodies the harness answers with (`fault`);
  * long-running operations: PENDING for the first half of the phase seconds, RUNNING for the
    second, then DONE, when their effect is applied; an operation can also end DONE with an error
    (`Operation`, `Store.settle`);
  * requestId replay: a call repeated with the same requestId in the same project answers the
    first call's operation and does nothing again;
  * RFC 1035 names (`check_name`) and list pages (maxResults / pageToken: `page`);
  * the WSGI side: routing, JSON bodies, any bearer token or none (`GoogleApi`).
An API subclasses GoogleApi: `route` maps a request to its handler, which gets a `Call`.
"""

import base64
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
STATUS = {400: "INVALID_ARGUMENT", 404: "NOT_FOUND", 409: "ALREADY_EXISTS", 412: "FAILED_PRECONDITION",
          429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE"}
REASONS = {400: "Bad Request", 404: "Not Found", 409: "Conflict", 412: "Precondition Failed",
           429: "Too Many Requests", 500: "Internal Server Error", 503: "Service Unavailable"}


def operation_seconds():
    transition = state_manager.get_transition(model_name=GCP_OPERATION)
    return transition["seconds"] if transition["progression"] == "time" else 0.0


def timestamp(seconds):
    return datetime.fromtimestamp(seconds, timezone.utc).isoformat(timespec="milliseconds")


def new_id():
    """A uint64 id, as the JSON string Google sends."""
    return str(secrets.randbits(63) | 1 << 62)


class GoogleError(Exception):
    def __init__(self, code, message, reason, domain="global"):
        super().__init__(message)
        self.code, self.message, self.reason, self.domain = code, message, reason, domain


def error_body(code, message, reason, domain="global", with_status=True):
    error = {"code": code, "message": message, "errors": [{"message": message, "domain": domain, "reason": reason}]}
    if with_status:
        error["status"] = STATUS.get(code, "UNKNOWN")
    return error


def check_name(name, field="resource.name"):
    if not name:
        raise GoogleError(400, f"Required field '{field}' not specified", "required")
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise GoogleError(400, f"Invalid value for field '{field}': '{name}'. Must be a match of regex '(?:[a-z](?:[-a-z0-9]{{0,61}}[a-z0-9])?)'", "invalid")


def page(items, key, max_results, page_token, limit=500):
    """One page of `items` sorted by `key`, and the token of the next page (None at the end).
    The token names the last item given, so items added or removed between pages are neither
    repeated nor skipped."""
    try:
        size = int(max_results) if max_results not in (None, "") else limit
    except ValueError:
        size = -1
    if not 0 <= size <= limit:
        raise GoogleError(400, f"Invalid value for field 'maxResults': '{max_results}'. Must be in the range [0, {limit}].", "invalid")
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


class Operation:
    """A long-running operation: `effect` runs when it ends, unless it ends with `error`
    (a (code, message, http status) triple)."""

    def __init__(self, call, operation_type, target, target_id, effect, error=None, resource=None):
        self.scope, self.project = call.scope, call.project
        self.name = f"operation-{int(time.time() * 1000)}-{secrets.token_hex(7)[:13]}-{secrets.token_hex(4)}-{secrets.token_hex(4)}"
        self.id = new_id()
        self.operation_type, self.target, self.target_id = operation_type, target, target_id
        self.effect, self.error, self.resource = effect, error, resource
        self.request_id = call.query.get("requestId")
        self.inserted = call.now
        self.seconds = operation_seconds()

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
                op.effect()

    def start(self, op):
        self.operations[(op.scope, op.name)] = op
        if op.request_id:
            self.request_ids[op.request_id] = op
        self.pending[op.target] = op
        self.running.append(op)
        return op


class Call:
    """One request as a handler sees it."""

    def __init__(self, api, store, scope, params, query, body, fail):
        self.api, self.store, self.project, self.scope = api, store, store.project, scope
        self.params, self.query, self.body, self.fail = params, query, body, fail
        self.now = time.time()

    def start(self, operation_type, target, target_id, effect, error=None, resource=None):
        """Start an operation on `target`; a failed_operation fault makes it end with an error."""
        if error is None and self.fail is not None:
            error = self.api.failure(self.fail["code"], self.fail["message"])
        return self.store.start(Operation(self, operation_type, target, target_id, effect, error, resource))


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

    def render_operation(self, op, now):
        """An operation as this API shows it."""
        raise NotImplementedError

    def failure(self, code, message):
        """An operation's error (code, message, HTTP status) for a failed_operation fault."""
        raise NotImplementedError

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
            status, result = e.code, {"error": error_body(e.code, e.message, e.reason, e.domain, self.with_status)}
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
            call = Call(self, store, scope, params, query, body, environ.get("forge.failed_operation"))
            store.settle(call.now)
            replayed = store.request_ids.get(request_id) if mutation and request_id else None
            result = replayed or handler(call)
            store.settle(call.now)  # an operation of 0 seconds is over before it is answered
            return 200, self.render_operation(result, call.now) if isinstance(result, Operation) else result
