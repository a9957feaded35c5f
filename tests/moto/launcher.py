#!/usr/bin/env python3
"""moto 5.2.5 in server mode, with the gaps forge's tests need filled in.

Serves moto's own WSGI app (as moto.server.ThreadedMotoServer does) behind a middleware that:
  * isolates tests by account: a 12-digit access key id is used as the account id;
  * counts requests per account as `service:Action`, and injected faults as
    `fault:service:Action` (GET /_forge/calls?account=ID);
  * injects faults in each protocol's own error format and latency per operation
    (POST /_forge/faults, POST /_forge/latency); a fault with "when": "after" lets moto do the
    work and then answers with a server error, as when a response is lost;
and patches moto (never the installed files) where it lacks what forge calls:
  * EC2 Create/Describe/DeletePlacementGroup(s), which moto 5.2.5 does not implement;
  * NAT gateways that go pending -> available and deleting -> deleted over time, driven by
    moto's state manager (model names `forge::nat_gateway_create` / `_delete`);
  * AWS-managed IAM policies (MOTO_IAM_LOAD_MANAGED_POLICIES).

Usage: launcher.py [--port 0] [--phase-seconds 1.0] [--exit-with-stdin]
Prints `port=<port>` on stdout once listening, then serves until killed.
"""

import argparse
import fnmatch
import io
import json
import logging
import os
import random
import re
import sys
import threading
import time
import urllib.parse
from collections import Counter

os.environ.setdefault("MOTO_IAM_LOAD_MANAGED_POLICIES", "true")
os.environ.pop("MOTO_ACCOUNT_ID", None)

from moto.ec2.exceptions import EC2ClientError  # noqa: E402
from moto.ec2.models.nat_gateways import NatGateway  # noqa: E402
from moto.ec2.responses import EC2Response  # noqa: E402
from moto.moto_api import state_manager  # noqa: E402
from moto.moto_api._internal.managed_state_model import ManagedState  # noqa: E402
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app  # noqa: E402
from werkzeug.serving import make_server  # noqa: E402

DEFAULT_ACCOUNT = "123456789012"


# --- EC2 placement groups --------------------------------------------------------------------

def _placement_groups(backend):
    if not hasattr(backend, "_forge_placement_groups"):
        backend._forge_placement_groups = {}
    return backend._forge_placement_groups


def create_placement_group(self):
    name = self._get_param("GroupName")
    strategy = self._get_param("Strategy") or "cluster"
    if strategy not in ("cluster", "partition", "spread"):
        raise EC2ClientError("InvalidParameterValue", f"Value ({strategy}) for parameter strategy is invalid.")
    groups = _placement_groups(self.ec2_backend)
    if name in groups:
        raise EC2ClientError("InvalidPlacementGroup.Duplicate", f"The Placement Group '{name}' already exists.")
    tags = self._parse_tag_specification("placement-group").get("placement-group", {})
    self.error_on_dryrun()
    group = {
        "GroupName": name,
        "GroupId": "pg-" + "%017x" % random.getrandbits(68),
        "GroupArn": f"arn:aws:ec2:{self.region}:{self.current_account}:placement-group/{name}",
        "State": "available",
        "Strategy": strategy,
        "Tags": [{"Key": k, "Value": v} for k, v in tags.items()],
    }
    if strategy == "partition":
        group["PartitionCount"] = int(self._get_param("PartitionCount") or 2)
    if strategy == "spread" and self._get_param("SpreadLevel"):
        group["SpreadLevel"] = self._get_param("SpreadLevel")
    groups[name] = group
    return self._forge_result({"PlacementGroup": group})


def describe_placement_groups(self):
    names = self._get_param("GroupNames", [])
    ids = self._get_param("GroupIds", [])
    filters = self._filters_from_querystring()
    groups = list(_placement_groups(self.ec2_backend).values())
    for wanted, key in ((names, "GroupName"), (ids, "GroupId")):
        if wanted:
            missing = set(wanted) - {g[key] for g in groups}
            if missing:
                raise EC2ClientError("InvalidPlacementGroup.Unknown", f"The Placement Group '{sorted(missing)[0]}' is unknown.")
            groups = [g for g in groups if g[key] in wanted]

    def matches(group, name, values):
        tags = {t["Key"]: t["Value"] for t in group["Tags"]}
        if name.startswith("tag:"):
            return tags.get(name[4:]) in values
        field = {"group-name": "GroupName", "group-id": "GroupId", "strategy": "Strategy", "state": "State"}.get(name)
        if name == "tag-key":
            return any(k in values for k in tags)
        return field is not None and group.get(field) in values

    groups = [g for g in groups if all(matches(g, n, v) for n, v in filters.items())]
    return self._forge_result({"PlacementGroups": groups})


def delete_placement_group(self):
    name = self._get_param("GroupName")
    self.error_on_dryrun()
    if _placement_groups(self.ec2_backend).pop(name, None) is None:
        raise EC2ClientError("InvalidPlacementGroup.Unknown", f"The Placement Group '{name}' is unknown.")
    return self._forge_result({})


def _forge_result(self, result):
    from moto.core.responses import ActionResult

    return ActionResult(result)


EC2Response._forge_result = _forge_result
EC2Response.create_placement_group = create_placement_group
EC2Response.describe_placement_groups = describe_placement_groups
EC2Response.delete_placement_group = delete_placement_group


# --- NAT gateway phases ----------------------------------------------------------------------

def _nat_state(self):
    phase = self.__dict__.get("_forge_phase")
    return phase.status if phase is not None else self.__dict__.get("_forge_state")


def _set_nat_state(self, value):
    if value == "available":
        self._forge_phase = ManagedState("forge::nat_gateway_create", [("pending", "available")])
    elif value == "deleted":
        self._forge_phase = ManagedState("forge::nat_gateway_delete", [("deleting", "deleted")])
    else:
        self._forge_phase = None
        self._forge_state = value


NatGateway.state = property(_nat_state, _set_nat_state)


def set_phase_seconds(seconds):
    transition = {"progression": "time", "seconds": seconds} if seconds > 0 else {"progression": "immediate"}
    for model in ("forge::nat_gateway_create", "forge::nat_gateway_delete"):
        state_manager.register_default_transition(model_name=model, transition=transition)


# --- the middleware: accounts, request counter, faults, latency ------------------------------

THROTTLE = {
    "ec2": (503, "text/xml", "<Response><Errors><Error><Code>RequestLimitExceeded</Code><Message>Request limit exceeded.</Message></Error></Errors><RequestID>forge-fault</RequestID></Response>"),
    "iam": (400, "text/xml", "<ErrorResponse><Error><Type>Sender</Type><Code>Throttling</Code><Message>Rate exceeded</Message></Error><RequestId>forge-fault</RequestId></ErrorResponse>"),
    "cloudformation": (400, "text/xml", "<ErrorResponse><Error><Type>Sender</Type><Code>Throttling</Code><Message>Rate exceeded</Message></Error><RequestId>forge-fault</RequestId></ErrorResponse>"),
    "fsx": (400, "application/x-amz-json-1.1", '{"__type":"ThrottlingException","message":"Rate exceeded"}'),
    "eks": (429, "application/json", '{"message":"Rate exceeded"}'),
    "s3": (503, "application/xml", "<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>"),
}
SERVER_ERROR = {
    "ec2": (500, "text/xml", "<Response><Errors><Error><Code>InternalError</Code><Message>An internal error has occurred.</Message></Error></Errors><RequestID>forge-fault</RequestID></Response>"),
    "iam": (500, "text/xml", "<ErrorResponse><Error><Type>Receiver</Type><Code>ServiceFailure</Code><Message>Service failure</Message></Error><RequestId>forge-fault</RequestId></ErrorResponse>"),
    "cloudformation": (500, "text/xml", "<ErrorResponse><Error><Type>Receiver</Type><Code>InternalFailure</Code><Message>Internal failure</Message></Error><RequestId>forge-fault</RequestId></ErrorResponse>"),
    "fsx": (500, "application/x-amz-json-1.1", '{"__type":"InternalServerError","message":"Internal server error"}'),
    "eks": (500, "application/json", '{"message":"Internal server error"}'),
    "s3": (500, "application/xml", "<Error><Code>InternalError</Code><Message>We encountered an internal error.</Message></Error>"),
}
EKS_HEADER_TYPES = {429: "ThrottlingException", 500: "ServerException"}


def operation(service, environ, body):
    """`service:Action` for query, JSON and REST protocols."""
    target = environ.get("HTTP_X_AMZ_TARGET")
    if target:
        return target.split(".")[-1]
    if service in ("ec2", "iam", "cloudformation", "sts"):
        params = urllib.parse.parse_qs(body.decode(errors="replace")) if body else {}
        params.update(urllib.parse.parse_qs(environ.get("QUERY_STRING", "")))
        return params.get("Action", ["?"])[0]
    path = re.sub(r"/[^/]+", "/{}", environ.get("PATH_INFO", ""), count=0) if service == "s3" else environ.get("PATH_INFO", "")
    return f"{environ.get('REQUEST_METHOD', 'GET')} {path}"


class Harness:
    def __init__(self, app):
        self.app = app
        self.lock = threading.Lock()
        self.calls = Counter()
        self.faults = []
        self.latency = []

    def __call__(self, environ, start_response):
        path = environ.get("PATH_INFO", "")
        if path.startswith("/_forge/"):
            return self.control(environ, start_response)
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        environ["wsgi.input"] = io.BytesIO(body)
        auth = environ.get("HTTP_AUTHORIZATION", "")
        match = re.search(r"Credential=([^/]+)/[^/]+/[^/]+/([^/]+)/", auth)
        key, service = match.groups() if match else ("", "")
        account = key if re.fullmatch(r"\d{12}", key) else DEFAULT_ACCOUNT
        environ["HTTP_X_MOTO_ACCOUNT_ID"] = account
        name = f"{service}:{operation(service, environ, body)}"
        with self.lock:
            self.calls[(account, name)] += 1
            delay = max((r["ms"] for r in self.latency if self.applies(r, account, name)), default=0)
            fault = next((r for r in self.faults if self.applies(r, account, name) and r["rng"].random() < r["rate"]), None)
            if fault is not None:
                self.calls[(account, f"fault:{name}")] += 1
        if delay:
            time.sleep(delay / 1000)
        if fault is not None and fault.get("when") == "after":
            # The cloud did the work, the answer is lost: what a retry must not do twice.
            body_parts = self.app(environ, lambda status, headers, exc_info=None: None)
            for _ in body_parts:
                pass
            fault = dict(fault, kind="5xx")
        if fault is not None:
            table = THROTTLE if fault["kind"] == "throttle" else SERVER_ERROR
            status, ctype, text = table.get(service, SERVER_ERROR["ec2"])
            headers = [("Content-Type", ctype)]
            if service == "eks":
                headers.append(("x-amzn-ErrorType", EKS_HEADER_TYPES[status]))
            body = text.encode()
            start_response(f"{status} Fault", headers + [("Content-Length", str(len(body)))])
            return [body]
        return self.app(environ, start_response)

    @staticmethod
    def applies(rule, account, name):
        return rule.get("account") in (None, account) and fnmatch.fnmatchcase(name, rule.get("match", "*"))

    def control(self, environ, start_response):
        path = environ["PATH_INFO"]
        query = urllib.parse.parse_qs(environ.get("QUERY_STRING", ""))
        length = int(environ.get("CONTENT_LENGTH") or 0)
        payload = json.loads(environ["wsgi.input"].read(length) or b"null") if length else None
        account = query.get("account", [None])[0]
        with self.lock:
            if path == "/_forge/calls":
                result = {n: c for (a, n), c in sorted(self.calls.items()) if account in (None, a)}
            elif path == "/_forge/reset":
                self.calls = Counter({k: v for k, v in self.calls.items() if account not in (None, k[0])})
                result = {}
            elif path == "/_forge/faults":
                rules = payload or []
                for i, r in enumerate(rules):
                    r.setdefault("kind", "throttle")
                    r["rng"] = random.Random(r.get("seed", i))
                self.faults = [r for r in self.faults if account is not None and r.get("account") != account] + rules
                result = {"faults": len(self.faults)}
            elif path == "/_forge/latency":
                self.latency = payload or []
                result = {"latency": len(self.latency)}
            elif path == "/_forge/phases":
                set_phase_seconds(float(payload.get("seconds", 0)))
                result = {}
            else:
                body = b'{"error": "unknown control path"}'
                start_response("404 Not Found", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
                return [body]
        body = json.dumps(result).encode()
        start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
        return [body]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--phase-seconds", type=float, default=1.0, help="how long pending/deleting phases last")
    parser.add_argument("--exit-with-stdin", action="store_true", help="exit when standard input closes (the test process that started it is gone)")
    args = parser.parse_args()
    set_phase_seconds(args.phase_seconds)
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    app = Harness(DomainDispatcherApplication(create_backend_app))
    server = make_server(args.host, args.port, app, threaded=True, request_handler=MotoRequestHandler)
    if args.exit_with_stdin:
        threading.Thread(target=lambda: (sys.stdin.read(), os._exit(0)), daemon=True).start()
    print(f"port={server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
