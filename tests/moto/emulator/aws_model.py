"""Every AWS request held to botocore's model of its service, as AWS's front ends hold it: the
models botocore ships (botocore/data/<service>/<version>/service-2.json.gz, of the botocore moto
installs), each loaded once, with its patterns compiled, on its service's first request.

The request is read into the operation's input by its protocol's rules, from the model:
  * `ec2` (EC2): the form-encoded query; a member under its `queryName`, else its capitalised
    `locationName`, else its name; list items as `Name.1`, `Name.2`; structures nested by `.`;
  * `query` (IAM, CloudFormation, STS): members under their `locationName` or name; list items
    as `Name.member.N` (`Name.N` when `flattened`), an empty list as `Name=`; map entries as
    `Name.entry.N.key` and `.value`;
  * `json` (FSx, PCS): the operation from `X-Amz-Target`, the input from the JSON body;
  * `rest-json` (EKS, EFS): the operation whose HTTP method and `requestUri` template (`{name}`,
    greedy `{name+}`, and the literals of its query) the request matches, the most specific one;
    `uri`, `querystring`, `header` and `headers` members from there, the others from the JSON
    body (by `locationName` or name);
  * `rest-xml` (S3): the operation, matched as for rest-json (a virtual-hosted bucket goes in
    front of the path), and its `uri`, `querystring`, `header` and `headers` members. The XML
    body is not read: the members it carries count as present when there is a body.
Then checked: the operation exists; required members are present; no parameter is unknown (a
query key, a JSON member, a rest-json query string key; not headers, which HTTP, SigV4 and the
SDKs add their own of, nor S3's query keys, among which the SDKs add `x-id`); the members' types
(structure, union, list, map, string, integer, long, float, double, boolean, timestamp, blob);
enums; min and max lengths of strings, lists and maps; min and max of numbers, and the range of
integers and longs; `pattern`s, matched whole as AWS's Java front ends match them. The patterns
are Java's: `\\p{L}`, `\\p{N}`, `\\p{Z}` are read as `\\w`, `\\d`, `\\s` (a little wider) and a flag
group in the middle moves to the front; one that Python's `re` still cannot compile, or that
anchors in its middle (a slip of the model no value matches), is skipped, and counted (`report`, GET /_forge/models). Not checked: blobs' lengths; `document` members; a
body sent to a REST operation that takes none in it; what a value means beyond the model (that
an id exists and the like: moto's and the emulators' own checks).

A request that breaks a rule answers the service's own validation error in its protocol's
format, which names the member and the rule as AWS does ("1 validation error detected: Value 'x'
at 'clusterName' failed to satisfy constraint: Member must satisfy regular expression pattern:
…", members in lower camel case, list items as `name.N.member`): EC2's `UnknownParameter`,
`MissingParameter` or `InvalidParameterValue`, one at a time, under the query's names; the query
services' `ValidationError`; the JSON services' `ValidationException`, with `reason` and
`fieldList` where the model's exception has them (PCS); the rest-json services' own, named in
`x-amzn-ErrorType`: the model's `ValidationException` (EFS), else its
`InvalidParameterException` (EKS); S3's `InvalidArgument`. An unknown operation is EC2's and the
query services' `InvalidAction`, the JSON services' `UnknownOperationException`, a REST path's
404 `UnknownOperationException`, or S3's 405 `MethodNotAllowed`.
"""

import base64
import binascii
import datetime
import email.utils
import json
import re
import threading
import urllib.parse
import uuid
from collections import defaultdict
from xml.sax.saxutils import escape

import botocore.loaders

LOADER = botocore.loaders.Loader()
AVAILABLE = set(LOADER.list_available_services("service-2"))
SIGNING_NAMES = {"elasticfilesystem": "efs"}  # SigV4 names that are not botocore's service names
MODELS = {}  # botocore service name -> Model, or None when botocore has none
LOCK = threading.Lock()
PROTOCOL_KEYS = re.compile(r"Action|Version|X-Amz-.*|AWSAccessKeyId|Signature(Method|Version)?|Timestamp|Expires")
JAVA_CLASSES = {r"\p{L}": r"\w", r"\p{N}": r"\d", r"\p{Z}": r"\s"}
S3_VIRTUAL_HOST = re.compile(r"(.+?)\.(?:s3[.-]|localhost)")
INTEGER_RANGES = {"integer": 2**31, "long": 2**63}
UNCHECKED = object()  # a member of S3's XML body, or a raw payload: present, not read


class Text(str):
    """A scalar as a query, a path or a header carries it: the check reads its type from the text."""


class UnknownOperation(Exception):
    pass


# --- the models --------------------------------------------------------------------------------

def python_pattern(pattern):
    """A Java pattern as Python's `re` reads it, as near as it can."""
    for java, python in JAVA_CLASSES.items():
        pattern = pattern.replace(java, python)
    flags = "".join(re.findall(r"\(\?([a-z]+)\)", pattern))
    return f"(?{flags})" + re.sub(r"\(\?[a-z]+\)", "", pattern) if flags else pattern


def unanchorable(pattern):
    """Whether `pattern` anchors right after something it matched (`…:placement-group/^.{1,255}$`,
    EC2's PlacementGroupArn): matched whole it takes no value at all, so it is a slip of the model
    that the service cannot enforce, and is skipped. A `^` after a group, an alternation or a
    lookahead (`(?!pcs_)^[A-Za-z]…`), in a class or escaped is a pattern's own."""
    bare = re.sub(r"\[[^\]]*\]", "", re.sub(r"\\.", "", pattern))  # no escapes, no classes
    return re.search(r"[^(|)]\^", bare) is not None


class Route:
    """A REST operation's `requestUri`: its path as a regular expression with the names of its
    labels, and the literals of its query."""

    def __init__(self, operation, uri):
        path, _, query = uri.partition("?")
        parts = re.split(r"\{([^}]+)\}", path)
        self.operation, self.labels = operation, [label.rstrip("+") for label in parts[1::2]]
        regex = "".join(re.escape(part) if i % 2 == 0 else "(.+)" if part.endswith("+") else "([^/]+)" for i, part in enumerate(parts))
        self.regex = re.compile(regex.rstrip("/") + "/?")
        self.literals = dict(urllib.parse.parse_qsl(query, keep_blank_values=True))
        self.literal_chars = sum(len(part) for part in parts[::2])

    def match(self, path, query):
        """The labels' values in `path`, or None when the request is not this operation."""
        found = self.regex.fullmatch(path)
        if found is None or any(key not in query or value not in ("", query[key][0]) for key, value in self.literals.items()):
            return None
        return {label: urllib.parse.unquote(value) for label, value in zip(self.labels, found.groups())}


class Model:
    """One service's model: its shapes and operations, its patterns compiled, its REST routes."""

    def __init__(self, name):
        data = LOADER.load_service_model(name, "service-2")
        self.name, self.metadata, self.shapes, self.operations = name, data["metadata"], data["shapes"], data["operations"]
        self.protocol = self.metadata["protocol"]
        self.patterns, self.skipped = {}, []
        for pattern in {shape["pattern"] for shape in self.shapes.values() if "pattern" in shape}:
            if unanchorable(pattern):
                self.skipped.append(pattern)
                continue
            try:
                self.patterns[pattern] = re.compile(python_pattern(pattern))
            except re.error:
                self.skipped.append(pattern)
        self.routes = defaultdict(list)  # HTTP method -> [Route]
        if self.protocol.startswith("rest"):
            for operation, spec in self.operations.items():
                self.routes[spec["http"]["method"]].append(Route(operation, spec["http"]["requestUri"]))
        self.json_keys = {}  # structure -> {JSON key: member}, its body members
        self.query_names = {}  # structure -> {member: its name in a query}

    def input(self, operation):
        ref = self.operations[operation].get("input")
        return self.shapes[ref["shape"]] if ref else {"type": "structure", "members": {}}

    def keys(self, shape_name):
        if shape_name not in self.json_keys:
            members = self.shapes[shape_name]["members"]
            self.json_keys[shape_name] = {ref.get("locationName", m): m for m, ref in members.items() if "location" not in ref}
        return self.json_keys[shape_name]

    def names(self, shape_name):
        """The structure's members by their names in a query: EC2's `queryName`, else its
        capitalised `locationName`; the query protocol's `locationName`; else the member's."""
        if shape_name not in self.query_names:
            names = {}
            for member, ref in self.shapes[shape_name]["members"].items():
                name = ref.get("locationName", member)
                names[member] = ref.get("queryName", name[:1].upper() + name[1:]) if self.protocol == "ec2" else name
            self.query_names[shape_name] = names
        return self.query_names[shape_name]

    # How a member is named in messages: EC2 names it as its query does, the others as AWS's
    # messages do (the member's name, lower camel case; list items `.N.member`).
    def member_path(self, path, shape_name, member):
        name = self.names(shape_name)[member] if self.protocol == "ec2" else member[:1].lower() + member[1:]
        return f"{path}.{name}" if path else name

    def item_path(self, path, index):
        return f"{path}.{index}" if self.protocol == "ec2" else f"{path}.{index}.member"


def model(service):
    """The model of the SigV4 `service`, or None when botocore has none."""
    name = SIGNING_NAMES.get(service, service)
    with LOCK:
        if name not in MODELS:
            MODELS[name] = Model(name) if name in AVAILABLE else None
        return MODELS[name]


def report():
    """The models loaded so far: their protocol, operations and patterns, and the patterns
    skipped."""
    with LOCK:
        return {name: {"protocol": m.protocol, "operations": len(m.operations), "patterns": len(m.patterns) + len(m.skipped),
                       "skipped_patterns": sorted(m.skipped)} for name, m in MODELS.items() if m is not None}


# --- reading a request into its operation's input ----------------------------------------------

class Form:
    """A query's flat parameters (`Tags.member.1.Key=k`), read shape by shape; what no member
    reads is unknown."""

    def __init__(self, pairs):
        self.values = dict(pairs)
        self.children = defaultdict(set)  # a key's prefix -> the next parts of the keys under it
        for key in self.values:
            parts = key.split(".")
            for i in range(1, len(parts)):
                self.children[".".join(parts[:i])].add(parts[i])
        self.read_keys = set()

    def take(self, key):
        self.read_keys.add(key)
        return Text(self.values[key])

    def read(self, m, shape_name, key):
        """The value of `shape_name` at `key`, or None when the query has none."""
        shape = m.shapes[shape_name]
        kind = shape["type"]
        if kind == "structure":
            found = {}
            for member, name in m.names(shape_name).items():
                inner = f"{key}.{name}" if key else name
                value = self.read(m, shape["members"][member]["shape"], inner) if inner in self.values or inner in self.children else None
                if value is not None:
                    found[member] = value
            return found if found or key in self.children else None
        if kind == "list":
            if self.values.get(key) == "" and key not in self.children:  # the query protocol's empty list
                self.take(key)
                return []
            base = self.list_base(m, shape, key)
            items = (self.read(m, shape["member"]["shape"], f"{base}.{i}") for i in self.indexes(base))
            return [item for item in items if item is not None] if base in self.children else None
        if kind == "map":
            base = key if shape.get("flattened") else f"{key}.entry"
            names = shape["key"].get("locationName", "key"), shape["value"].get("locationName", "value")
            entries = {}
            for i in self.indexes(base):
                if f"{base}.{i}.{names[0]}" in self.values:
                    entries[self.take(f"{base}.{i}.{names[0]}")] = self.read(m, shape["value"]["shape"], f"{base}.{i}.{names[1]}")
            return entries if base in self.children else None
        return self.take(key) if key in self.values else None

    def list_base(self, m, shape, key):
        """Where a list's items are: `Name` (EC2, flattened), else `Name.member`."""
        if m.protocol == "ec2":
            return key
        if shape.get("flattened"):
            name = shape["member"].get("locationName")
            return key.rpartition(".")[0] + ("." if "." in key else "") + name if name else key
        return f"{key}.{shape['member'].get('locationName', 'member')}"

    def indexes(self, base):
        return sorted(int(part) for part in self.children.get(base, ()) if part.isdigit())

    def unread(self):
        return [(key, value) for key, value in self.values.items() if key not in self.read_keys and not PROTOCOL_KEYS.fullmatch(key)]


def from_json(m, shape_name, value):
    """A JSON value with its structures' keys turned into member names (unknown ones kept)."""
    shape = m.shapes[shape_name]
    kind = shape["type"]
    if kind == "structure" and isinstance(value, dict):
        keys = m.keys(shape_name)
        return {keys.get(k, k): from_json(m, shape["members"][keys[k]]["shape"], v) if k in keys else v for k, v in value.items()}
    if kind == "list" and isinstance(value, list):
        return [from_json(m, shape["member"]["shape"], item) for item in value]
    if kind == "map" and isinstance(value, dict):
        return {k: from_json(m, shape["value"]["shape"], v) for k, v in value.items()}
    return value


def read_query(m, environ, body):
    """ec2 and query: the operation is `Action`, the input the form's parameters."""
    pairs = urllib.parse.parse_qsl(environ.get("QUERY_STRING", ""), keep_blank_values=True)
    pairs += urllib.parse.parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True) if body else []
    form = Form(pairs)
    operation = form.values.get("Action", "")
    if operation not in m.operations:
        raise UnknownOperation(operation)
    ref = m.operations[operation].get("input")
    value = (form.read(m, ref["shape"], "") if ref else None) or {}
    return operation, value, [("unknown", key, value, None) for key, value in form.unread()]


def read_json(m, environ, body):
    """json: the operation is the `X-Amz-Target`, the input the JSON body."""
    target = environ.get("HTTP_X_AMZ_TARGET", "")
    prefix, _, operation = target.rpartition(".")
    if prefix != m.metadata.get("targetPrefix") or operation not in m.operations:
        raise UnknownOperation(target)
    try:
        value = json.loads(body or b"{}")
    except ValueError:
        return operation, {}, [("invalid", "", body.decode("utf-8", "replace"), "The request body must be JSON")]
    ref = m.operations[operation].get("input")
    return operation, from_json(m, ref["shape"], value) if ref else value, []


def header(environ, name):
    key = name.upper().replace("-", "_")
    return environ.get(key if key in ("CONTENT_TYPE", "CONTENT_LENGTH") else f"HTTP_{key}")


def route(m, environ, path, query):
    """The REST operation's route the request takes, and its labels' values: of the routes whose
    method, path and query literals it matches, one whose operation's required path, query and
    header members are all there, then the one with the most query literals, required members,
    literal path."""
    ranked = []
    for candidate in m.routes.get(environ.get("REQUEST_METHOD", "GET"), ()):
        labels = candidate.match(path, query)
        if labels is None:
            continue
        shape = m.input(candidate.operation)
        required = [ref for member, ref in shape["members"].items()
                    if member in shape.get("required", ()) and ref.get("location") in ("uri", "querystring", "header")]
        present = sum(1 for ref in required if located(environ, labels, query, ref) is not None)
        ranked.append(((present == len(required), len(candidate.literals), present, candidate.literal_chars), candidate, labels))
    if not ranked:
        raise UnknownOperation(f"{environ.get('REQUEST_METHOD')} {path}")
    _, found, labels = max(ranked, key=lambda r: r[0])
    return found, labels


def located(environ, labels, query, ref):
    """The raw value of a path, query or header member, or None."""
    location, name = ref.get("location"), ref.get("locationName")
    if location == "uri":
        return labels.get(name)
    if location == "querystring":
        return query.get(name)
    return header(environ, name) if location == "header" else None


def read_rest(m, environ, body):
    """rest-json and rest-xml: the operation from the method and path, the input from the path,
    query, headers and (JSON) body."""
    path = urllib.parse.urlsplit(environ.get("RAW_URI") or urllib.parse.quote(environ.get("PATH_INFO", ""))).path
    query = urllib.parse.parse_qs(environ.get("QUERY_STRING", ""), keep_blank_values=True)
    bucket = S3_VIRTUAL_HOST.match(environ.get("HTTP_HOST", "")) if m.protocol == "rest-xml" else None
    if bucket:
        path = f"/{bucket.group(1)}{path}"
    found, labels = route(m, environ, path, query)
    shape = m.input(found.operation)
    value, claimed, query_maps = {}, set(found.literals), []
    for member, ref in shape["members"].items():
        kind = m.shapes[ref["shape"]]["type"]
        if ref.get("location") == "querystring":
            if kind == "map":
                query_maps.append(member)
                continue
            claimed.add(ref["locationName"])
        sent = from_request(environ, labels, query, ref, kind)
        if sent is not None:
            value[member] = sent
    for member in query_maps:  # a query string map takes the keys no other member takes
        rest = {k: Text(v[0]) for k, v in query.items() if k not in claimed}
        if rest:
            value[member] = rest
            claimed.update(rest)
    problems = read_body(m, found.operation, shape, body, value)
    if m.protocol == "rest-json":  # the SDKs add `x-id` to S3's queries
        problems += [("unknown", key, values[0], None) for key, values in query.items() if key not in claimed]
    return found.operation, value, problems


def from_request(environ, labels, query, ref, kind):
    """The value of a path, query string, header or headers member, as texts, or None."""
    location = ref.get("location")
    if location == "headers":
        prefix = "HTTP_" + ref["locationName"].upper().replace("-", "_")
        headers = {k[len(prefix):].lower().replace("_", "-"): Text(v) for k, v in environ.items() if k.startswith(prefix)}
        return headers or None
    raw = located(environ, labels, query, ref)
    if raw is None or kind != "list":
        return raw if raw is None else Text(raw[0] if isinstance(raw, list) else raw)
    return [Text(v) for v in raw] if location == "querystring" else [Text(v.strip()) for v in raw.split(",")]


def read_body(m, operation, shape, body, value):
    """The body's members into `value`: a rest-json body's, by JSON key; S3's as UNCHECKED."""
    members = {k: ref for k, ref in shape["members"].items() if "location" not in ref}
    payload = shape.get("payload")
    if not members or not body:
        return []
    if m.protocol == "rest-xml" or (payload and m.shapes[members[payload]["shape"]]["type"] != "structure"):
        value.update({member: UNCHECKED for member in ([payload] if payload else members)})
        return []
    try:
        document = json.loads(body)
    except ValueError:
        return [("invalid", "", body.decode("utf-8", "replace"), "The request body must be JSON")]
    if payload:
        value[payload] = from_json(m, members[payload]["shape"], document)
        return []
    if not isinstance(document, dict):
        return [("invalid", "", document, "The request body must be a JSON object")]
    keys = m.keys(m.operations[operation]["input"]["shape"])
    value.update({keys.get(k, k): from_json(m, members[keys[k]]["shape"], v) if k in keys else v for k, v in document.items()})
    return []


READERS = {"ec2": read_query, "query": read_query, "json": read_json, "rest-json": read_rest, "rest-xml": read_rest}


# --- the rules ---------------------------------------------------------------------------------

def check_value(m, shape_name, value, path, problems):
    """Appends to `problems` what `value` breaks of its shape's rules: (kind, path, value, rule)."""
    if value is UNCHECKED:
        return
    shape = m.shapes[shape_name]
    kind = shape["type"]
    if kind == "structure":
        check_structure(m, shape_name, value, path, problems)
    elif kind in ("list", "map"):
        check_collection(m, shape, value, path, problems)
    elif kind != "document":
        check_scalar(m, shape, value, path, problems)


def check_structure(m, shape_name, value, path, problems):
    shape = m.shapes[shape_name]
    if not isinstance(value, dict):
        return problems.append(("invalid", path, value, "Member must be a structure"))
    members = shape["members"]
    for member in shape.get("required", []):
        if value.get(member) is None:
            problems.append(("missing", m.member_path(path, shape_name, member), None, "Member must not be null"))
    for member, inner in value.items():
        if member not in members:
            problems.append(("unknown", f"{path}.{member}" if path else member, inner, None))
        elif inner is not None:
            check_value(m, members[member]["shape"], inner, m.member_path(path, shape_name, member), problems)
    if shape.get("union") and len([v for v in value.values() if v is not None]) != 1:
        problems.append(("invalid", path, value, "Member must have exactly one of its members set"))


def check_collection(m, shape, value, path, problems):
    kind = shape["type"]
    if not isinstance(value, list if kind == "list" else dict):
        return problems.append(("invalid", path, value, f"Member must be a {kind}"))
    check_bounds(shape, len(value), value, path, problems, "length")
    if kind == "list":
        for i, item in enumerate(value, 1):
            if item is None:
                problems.append(("missing", m.item_path(path, i), None, "Member must not be null"))
            else:
                check_value(m, shape["member"]["shape"], item, m.item_path(path, i), problems)
        return
    for key, inner in value.items():
        check_value(m, shape["key"]["shape"], key, f"{path}.{key}", problems)
        if inner is not None:
            check_value(m, shape["value"]["shape"], inner, f"{path}.{key}", problems)


def check_scalar(m, shape, value, path, problems):
    kind = shape["type"]
    try:
        parsed = SCALARS[kind](value)
    except (TypeError, ValueError) as e:
        return problems.append(("invalid", path, value, str(e)))
    if kind in INTEGER_RANGES:
        limit = INTEGER_RANGES[kind]
        check_bounds({"min": shape.get("min", -limit), "max": shape.get("max", limit - 1)}, parsed, value, path, problems, "value")
    elif kind in ("float", "double"):
        check_bounds(shape, parsed, value, path, problems, "value")
    elif kind == "string":
        if "enum" in shape and value not in shape["enum"]:
            problems.append(("invalid", path, value, f"Member must satisfy enum value set: [{', '.join(shape['enum'])}]"))
        check_bounds(shape, len(value), value, path, problems, "length")
        pattern = m.patterns.get(shape.get("pattern"))
        if pattern is not None and not pattern.fullmatch(value):
            problems.append(("invalid", path, value, f"Member must satisfy regular expression pattern: {shape['pattern']}"))


def check_bounds(shape, measure, value, path, problems, what):
    if "min" in shape and measure < shape["min"]:
        problems.append(("invalid", path, value, f"Member must have {what} greater than or equal to {shape['min']}"))
    if "max" in shape and measure > shape["max"]:
        problems.append(("invalid", path, value, f"Member must have {what} less than or equal to {shape['max']}"))


def as_string(value):
    if not isinstance(value, str):
        raise ValueError("Member must be a string")
    return value


def as_whole(value):
    if isinstance(value, Text) and re.fullmatch(r"-?\d+", value):
        return int(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise ValueError("Member must be a whole number")


def as_number(value):
    """A number; in JSON also "NaN", "Infinity" or "-Infinity", as the protocols write them."""
    if value in ("NaN", "Infinity", "-Infinity") or isinstance(value, Text) and re.fullmatch(r"-?\d+(\.\d*)?([eE][-+]?\d+)?", value):
        return float(value.replace("Infinity", "inf"))
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    raise ValueError("Member must be a number")


def as_boolean(value):
    if isinstance(value, Text) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    if isinstance(value, bool):
        return value
    raise ValueError("Member must be true or false")


def as_timestamp(value):
    """Epoch seconds, ISO 8601 or an HTTP date: what the protocols send."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        for parse in (float, lambda v: datetime.datetime.fromisoformat(v.replace("Z", "+00:00")), email.utils.parsedate_to_datetime):
            try:
                return parse(value)
            except (TypeError, ValueError):
                pass
    raise ValueError("Member must be a timestamp")


def as_blob(value):
    try:
        return base64.b64decode(as_string(value), validate=True)
    except binascii.Error:
        raise ValueError("Member must be base64-encoded")


SCALARS = {"string": as_string, "integer": as_whole, "long": as_whole, "float": as_number, "double": as_number,
           "boolean": as_boolean, "timestamp": as_timestamp, "blob": as_blob}


# --- the answers -------------------------------------------------------------------------------

def shown(value):
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= 200 else text[:200] + "…"


def clause(problem, operation):
    _, path, value, rule = problem
    value = "null" if value is None else f"'{shown(value)}'"
    return f"Value {value} at '{path}' failed to satisfy constraint: {rule or f'Member must be a parameter of {operation}'}"


def aws_message(problems, operation):
    count = len(problems)
    return f"{count} validation error{'s' if count > 1 else ''} detected: " + "; ".join(clause(p, operation) for p in problems)


def ec2_error(problems):
    """EC2 answers one problem: an unknown parameter first, then a missing one, then a value."""
    kind, path, value, rule = min(problems, key=lambda p: ("unknown", "missing", "invalid").index(p[0]))
    if kind == "unknown":
        return "UnknownParameter", f"The parameter {path} is not recognized"
    if kind == "missing":
        return "MissingParameter", f"The request must contain the parameter {path}"
    return "InvalidParameterValue", f"Value ({shown(value)}) for parameter {path} is invalid. {rule}"


def answer(m, status, code, message, fields=None):
    """The error in the protocol's format: (status, headers, body)."""
    request_id = str(uuid.uuid4())
    if m.protocol == "ec2":
        body = (f"<Response><Errors><Error><Code>{code}</Code><Message>{escape(message)}</Message></Error></Errors>"
                f"<RequestID>{request_id}</RequestID></Response>")
        return status, [("Content-Type", "text/xml")], body
    if m.protocol == "query":
        body = (f"<ErrorResponse><Error><Type>Sender</Type><Code>{code}</Code><Message>{escape(message)}</Message></Error>"
                f"<RequestId>{request_id}</RequestId></ErrorResponse>")
        return status, [("Content-Type", "text/xml")], body
    if m.protocol == "rest-xml":
        body = f"<Error><Code>{code}</Code><Message>{escape(message)}</Message><RequestId>{request_id}</RequestId></Error>"
        return status, [("Content-Type", "application/xml")], body
    members = m.shapes.get(code, {}).get("members", {})
    document = {"Message" if "Message" in members else "message": message}
    if m.protocol == "json":
        document["__type"] = code
        if fields is not None and "fieldList" in members:
            document.update(reason="fieldValidationFailed", fieldList=fields)
        return status, [("Content-Type", f"application/x-amz-json-{m.metadata.get('jsonVersion', '1.0')}")], json.dumps(document)
    if "ErrorCode" in members:
        document["ErrorCode"] = code
    return status, [("Content-Type", "application/json"), ("x-amzn-ErrorType", code)], json.dumps(document)


def rejection(m, operation, problems):
    """The service's validation error for `problems`, and the violation it records."""
    if m.protocol == "ec2":
        code, message = ec2_error(problems)
        return answer(m, 400, code, message) + (f"{operation}: {code}: {message}",)
    message = aws_message(problems, operation)
    fields = [{"name": path, "message": rule or f"Member must be a parameter of {operation}"} for _, path, _, rule in problems]
    if m.protocol == "query":
        code = "ValidationError"
    elif m.protocol == "rest-xml":
        code = "InvalidArgument"
    elif m.protocol == "rest-json" and "ValidationException" not in m.shapes and "InvalidParameterException" in m.shapes:
        code = "InvalidParameterException"
    else:
        code = "ValidationException"
    return answer(m, 400, code, message, fields) + (f"{operation}: {code}: {message}",)


def unknown_operation(m, what):
    if m.protocol in ("ec2", "query"):
        status, code, message = 400, "InvalidAction", f"The action {what} is not valid for this web service."
    elif m.protocol == "json":
        status, code, message = 400, "UnknownOperationException", f"Unknown operation {what}"
    elif m.protocol == "rest-xml":
        status, code, message = 405, "MethodNotAllowed", f"The specified method is not allowed against this resource: {what}"
    else:
        status, code, message = 404, "UnknownOperationException", f"No operation is {what}"
    return answer(m, status, code, message) + (f"{code}: {message}",)


def check(service, environ, body):
    """None when the request to the SigV4 `service` is what its model allows (or botocore has no
    model of it, or one in a protocol not read here), else the service's error and the
    violation: (status, headers, body, violation)."""
    m = model(service)
    if m is None or m.protocol not in READERS:
        return None
    try:
        operation, value, problems = READERS[m.protocol](m, environ, body)
    except UnknownOperation as e:
        return unknown_operation(m, str(e) or "(none)")
    ref = m.operations[operation].get("input")
    if ref is not None:
        check_value(m, ref["shape"], value, "", problems)
    return rejection(m, operation, problems) if problems else None
