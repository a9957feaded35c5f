"""Every request to the Google emulators checked against its API's discovery document, the ones
google-api-python-client ships (compute.v1, container.v1, file.v1, storage.v1, cloudbilling.v1), as Google's own
front end checks it before the service sees it: `check(api, environ, body)` answers None for a
request the API accepts, else the answer Google gives and a line saying what was wrong.

Checked:
  * the method: the HTTP method and the path, matched against every method's template (flatPath,
    else path, under the document's servicePath; nested resources and media upload paths too) on
    the path as sent, so an object name's %2F stays in one segment. The emulator serves an API's
    rootUrl at `MOUNTS` (forge's endpoint overrides put container.googleapis.com at /container).
    No method: Google's HTML 404 page, as its front end answers;
  * query parameters: each must be the method's (by its JSON name or its proto, snake_case, one)
    or a system parameter (the document's top-level `parameters`, with or without `$`: the Rust
    clients send `$alt=json;enum-encoding=int`; and `SYSTEM`, which the documents leave out),
    and a method parameter's value must read as its type (integers in range, booleans, enums);
  * the JSON body against the method's request schema, recursively: unknown fields (a field may be
    named in JSON or proto form, as proto3 JSON parsers accept), lists where a field is or is not
    repeated, objects where a scalar is expected, scalar types, integer formats and their ranges
    (any integer also as a JSON string, as proto3 JSON reads them), enums by name or by number
    (the GKE and Filestore Rust clients send numbers: a valid index of the document's list, or
    for the enums whose proto numbers skip, one of `PROTO_NUMBERS`), maps
    (`additionalProperties`). Output-only fields pass (clients echo them), and so does null;
  * a Cloud Storage upload: the JSON metadata part of a multipart upload, a resumable upload's
    JSON body; a media upload has no JSON.
Answers are 400 INVALID_ARGUMENT with the wording of Google's JSON parser ("Invalid JSON payload
received. Unknown name ...", "Invalid value at ..."), fields named by their proto paths from the
request message: Compute and Cloud Storage bind the body to `resource`, Filestore's resource
bodies to the resource's field (`instance`), GKE's bodies are the request message. GKE and
Filestore answer with `status` and a google.rpc.BadRequest detail, Compute and Cloud Storage with
errors[] only (gcp.error_body, each API's `with_status`).

Left out: the values of system parameters; path parameters' patterns and required parameters
(the emulators check names and required fields with the APIs' own messages); string formats
(bytes, times, durations, field masks); a body that is not a JSON object, which the emulators
answer; a body sent to a method that takes none; oneofs; each violation after the first (Google
lists them all); a resumable upload's later requests (PUT with upload_id: no method in the
document, and the emulator serves no resumable uploads). The proto names in type errors are
guesses where discovery gives none: an enum's as `Message.Field`, Compute's and Cloud Storage's
packages.
"""

import functools
import html
import importlib.resources
import json
import re
import urllib.parse

from .gcp import GoogleError, error_body, snake
from .gcs import Storage


DOCUMENTS = {"compute": "compute.v1.json", "container": "container.v1.json", "file": "file.v1.json", "storage": "storage.v1.json",
             "cloudbilling": "cloudbilling.v1.json"}
MOUNTS = {"compute": "", "container": "/container", "file": "/file", "storage": "", "cloudbilling": "/cloudbilling"}
PACKAGES = {"compute": "google.cloud.compute.v1", "container": "google.container.v1", "file": "google.cloud.filestore.v1",
            "storage": "google.storage.v1", "cloudbilling": "google.cloud.billing.v1"}
# System parameters Google documents that the discovery documents leave out (Compute's Rust client
# sends `$apiVersion`).
SYSTEM = {"$apiVersion", "$apiFormat", "$ct", "$httpMethod"}
RESOURCE_BODIES = {"compute", "storage"}  # the APIs whose request bodies bind to the field `resource`
# The proto numbers of the enums in request messages whose numbers are not their places in the
# document's list (which has names only), in the list's order, as google-cloud-container-v1 and
# google-cloud-filestore-v1 (1.15) number them: (service, message, field) -> numbers.
PROTO_NUMBERS = {
    ("container", "AdvancedDatapathObservabilityConfig", "relayMode"): (0, 1, 3, 4),
    ("container", "DatabaseEncryption", "currentState"): (0, 7, 2, 3, 4, 5, 6, 8, 9, 10),
    ("container", "DataplaneV2Config", "scalabilityMode"): (0, 3, 4),
    ("container", "GPUDirectConfig", "gpuDirectStrategy"): (0, 2),
    ("container", "GatewayAPIConfig", "channel"): (0, 1, 3, 4),
    ("container", "LoggingComponentConfig", "enableComponents"): (0, 1, 2, 3, 4, 5, 7, 8, 9, 10),
    ("container", "MonitoringComponentConfig", "enableComponents"): (0, 1, 3, 4, 5, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16),
    ("container", "StatusCondition", "code"): (0, 1, 2, 3, 4, 7, 9, 10, 11),
    ("container", "UpgradeSettings", "strategy"): (0, 2, 3, 5),
    ("file", "Instance", "state"): (0, 1, 2, 3, 4, 6, 7, 8, 9, 10, 12, 13),
}
RANGES = {"int32": (-2**31, 2**31 - 1), "uint32": (0, 2**32 - 1), "int64": (-2**63, 2**63 - 1), "uint64": (0, 2**64 - 1)}
INTEGER = re.compile(r"-?\d+")
NOT_FOUND_PAGE = ("<!DOCTYPE html>\n<html lang=en>\n  <meta charset=utf-8>\n  <title>Error 404 (Not Found)!!1</title>\n"
                  "  <p><b>404.</b> <ins>That\u2019s an error.</ins>\n"
                  "  <p>The requested URL <code>{path}</code> was not found on this server.  <ins>That\u2019s all we know.</ins>\n")


class Violation(Exception):
    """What Google's JSON parser refuses: its message, and the field path it names (None: the
    request message itself)."""

    def __init__(self, message, field=None):
        super().__init__(message)
        self.message, self.field = message, field or None


def proto(name):
    """A JSON field name as the proto names it: `nodePools` -> `node_pools`."""
    return snake(name).lstrip("_")


def pascal(name):
    return name[:1].upper() + name[1:]


def joined(path, name):
    return f"{path}.{proto(name)}" if path else proto(name)


def at(path):
    return f" at '{path}'" if path else ""


def unknown(name, parent, why="Cannot find field."):
    return Violation(f'Invalid JSON payload received. Unknown name "{name}"{at(parent)}: {why}', parent)


def integer(value):
    """The integer a JSON value stands for (a number or a decimal string), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and INTEGER.fullmatch(value):
        return int(value)
    return value if isinstance(value, int) else None


def number(value):
    """Whether a JSON value reads as a float: a number, or a string of one ("NaN" too)."""
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, float)):
        return True
    try:
        float(value)
        return True
    except (TypeError, ValueError):
        return False


def fits(value, schema, numbers=None):
    """Whether a JSON scalar is of `schema`'s scalar type, as proto3 JSON reads it (an enum's
    `numbers`: its proto numbers, if not its list's indexes)."""
    if "enum" in schema:
        if isinstance(value, str):
            return value in schema["enum"]
        valid = numbers or range(len(schema["enum"]))
        return not isinstance(value, bool) and isinstance(value, int) and value in valid
    kind, form = schema.get("type"), schema.get("format")
    if kind == "integer" or form in RANGES:
        low, high = RANGES[form or "int32"]
        given = integer(value)
        return given is not None and low <= given <= high
    if kind == "number":
        return number(value)
    if kind == "boolean":
        return isinstance(value, bool)
    return isinstance(value, str)


def from_query(value, schema):
    """A query parameter's text as the JSON value it stands for."""
    if schema.get("type") == "boolean":
        return {"true": True, "false": False}.get(value, value)
    if "enum" in schema and value.isdigit():
        return int(value)
    return value


def methods(resources):
    """Every method of the resources, nested ones too."""
    for resource in resources.values():
        yield from resource.get("methods", {}).values()
        yield from methods(resource.get("resources", {}))


def template(path):
    """A path template as a regex (`{x}`: one segment, `{+x}`: any) and how many of its
    characters are literal (the more, the more specific)."""
    parts = re.split(r"(\{\+?[^}]+\})", path)
    regex = "".join((".+" if p.startswith("{+") else "[^/]+") if p.startswith("{") else re.escape(p) for p in parts)
    return re.compile(regex), sum(len(p) for p in parts if not p.startswith("{"))


class Model:
    """One API's discovery document: its methods' routes, schemas and system parameters."""

    def __init__(self, service):
        self.service, self.package = service, PACKAGES[service]
        document = json.loads((importlib.resources.files("googleapiclient") / "discovery_cache" / "documents" / DOCUMENTS[service]).read_text())
        self.schemas = document["schemas"]
        self.system = SYSTEM | set(document["parameters"]) | {"$" + p for p in document["parameters"]}
        routes = []
        for method in methods(document["resources"]):
            paths = [("/" + document["servicePath"] + method.get("flatPath", method["path"]), False)]
            paths += [(p["path"], True) for p in method.get("mediaUpload", {}).get("protocols", {}).values()]
            for path, upload in paths:
                regex, literal = template(path)
                routes.append((literal, regex, method["httpMethod"], method, upload))
        self.routes = sorted(routes, key=lambda r: -r[0])

    def find(self, verb, path):
        """(method, whether it is the method's upload path) of a request, None if no method has it."""
        return next(((m, upload) for _, regex, v, m, upload in self.routes if v == verb and regex.fullmatch(path)), None)

    # --- query parameters --------------------------------------------------------------------

    def check_query(self, method, query):
        """Each query parameter bound to the method or the system, its value of its type."""
        params = {}
        for name, schema in method.get("parameters", {}).items():
            if schema["location"] == "query":
                params[name] = params[proto(name)] = (name, schema)
        for given, value in query:
            if given in self.system:
                continue
            if given not in params:
                raise unknown(given, "", f"Cannot bind query parameter. Field '{given}' could not be found in request message.")
            name, schema = params[given]
            if not fits(from_query(value, schema), schema):
                raise self.invalid(proto(name), self.kind(schema, "", name), value)

    # --- bodies ------------------------------------------------------------------------------

    def check_body(self, method, environ, body, upload_type):
        request = method.get("request", {}).get("$ref")
        document = self.document(environ, body, upload_type)
        if request is None or document is None:
            return
        if self.service in RESOURCE_BODIES:
            root = "resource"
        else:  # a request message is the body (`body: "*"`), else the body is the resource's field
            root = "" if request.endswith("Request") else proto(request[0].lower() + request[1:])
        self.check_message(document, self.schemas[request], root, request)

    @staticmethod
    def document(environ, body, upload_type):
        """The JSON object the body gives the method, None when it gives none: a media upload, a
        multipart upload's metadata part; not JSON (the emulators answer that)."""
        if upload_type == "media":
            return None
        try:
            if upload_type == "multipart":
                value = Storage.multipart(environ.get("CONTENT_TYPE", ""), body)[0]
            else:
                value = json.loads(body) if body.strip() else None
        except (GoogleError, ValueError):
            return None
        return value if isinstance(value, dict) else None

    def check_message(self, value, schema, path, owner):
        """A JSON object against a message schema (`owner` names it): each field known, each value
        of its field's type."""
        fields = schema.get("properties", {})
        for name, item in value.items():
            field = fields.get(name) or next((f for n, f in fields.items() if proto(n) == name), None)
            if field is None:
                raise unknown(name, path)
            self.check_value(item, field, joined(path, name), name, path, owner)

    def check_value(self, value, schema, path, name, parent, owner):
        """The value of field `name` (at `path`, in the message at `parent` named `owner`)."""
        ref = schema.get("$ref")
        target = self.schemas[ref] if ref else schema
        kind = target.get("type")
        if value is None or kind == "any":
            return
        if kind == "array":
            if not isinstance(value, list):
                raise self.invalid(path, self.kind(target["items"], owner, name), value)
            for i, item in enumerate(value):
                self.check_value(item, target["items"], f"{path}[{i}]", name, parent, owner)
            return
        if isinstance(value, list):
            raise unknown(name, parent, "Proto field is not repeating, cannot start list.")
        if kind == "object":
            if not isinstance(value, dict):
                raise self.invalid(path, self.kind(schema, owner, name), value)
            if "additionalProperties" in target:  # a map: Google names its entries [i].value
                for i, item in enumerate(value.values()):
                    self.check_value(item, target["additionalProperties"], f"{path}[{i}].value", "value", f"{path}[{i}]", owner)
            else:
                self.check_message(value, target, path, ref or f"{owner}.{pascal(name)}")
            return
        if isinstance(value, dict):
            raise Violation(f"Invalid value{at(parent)} ({proto(name)}), Starting an object on a scalar field", parent)
        if not fits(value, target, PROTO_NUMBERS.get((self.service, owner, name))):
            raise self.invalid(path, self.kind(target, owner, name), value)

    # --- errors ------------------------------------------------------------------------------

    @staticmethod
    def invalid(path, kind, value):
        return Violation(f"Invalid value at '{path}' ({kind}), {json.dumps(value)}", path)

    def kind(self, schema, owner, name):
        """The type a value failed to be, as the parser names it: TYPE_INT32, or a message's or
        an enum's full name."""
        typed = f"type.googleapis.com/{self.package}."
        if "$ref" in schema:
            return typed + schema["$ref"]
        if "enum" in schema or schema.get("type") == "object":
            return typed + ".".join(filter(None, (owner, pascal(name))))
        form = schema.get("format")
        if form in RANGES:
            return "TYPE_" + form.upper()
        if schema.get("type") == "number":
            return "TYPE_" + (form or "double").upper()
        return {"integer": "TYPE_INT32", "boolean": "TYPE_BOOL"}.get(schema.get("type"), "TYPE_STRING")


@functools.cache
def model(service):
    """The parsed discovery document of `service`, read once."""
    return Model(service)


def sent_path(environ):
    """The request's path as sent (percent-escapes kept), from the server's raw request line."""
    raw = environ.get("REQUEST_URI") or environ.get("RAW_URI")
    return urllib.parse.urlsplit(raw).path if raw else urllib.parse.quote(environ.get("PATH_INFO", ""))


def check(api, environ, body):
    """None if the API accepts the request, else (status, Content-Type, body, violation): the
    answer Google gives and one line for the record."""
    spec = model(api.service)
    verb, path = environ.get("REQUEST_METHOD", "GET"), sent_path(environ)
    found = spec.find(verb, path[len(MOUNTS[api.service]):])
    if found is None:
        return 404, "text/html; charset=UTF-8", NOT_FOUND_PAGE.format(path=html.escape(path)), f"{api.service}: no method {verb} {path}"
    method, upload = found
    query = urllib.parse.parse_qsl(environ.get("QUERY_STRING", ""), keep_blank_values=True)
    try:
        spec.check_query(method, query)
        spec.check_body(method, environ, body, dict(query).get("uploadType") if upload else None)
    except Violation as e:
        error = error_body(400, e.message, "invalid", with_status=getattr(api, "with_status", False))
        if "status" in error:
            violation = {"field": e.field, "description": e.message} if e.field else {"description": e.message}
            error["details"] = [{"@type": "type.googleapis.com/google.rpc.BadRequest", "fieldViolations": [violation]}]
        return 400, "application/json; charset=UTF-8", json.dumps({"error": error}), f"{method['id']}: {e.message}"
    return None
