"""Cloud Storage JSON API v1 (/storage/v1/... and /upload/storage/v1/...), what forge's GCS state
backend sends through the google-cloud-storage crate and what its tests need around it:
  * buckets: insert (?project=, a name of 3-63 lowercase letters, digits, `-`, `_` and `.`;
    `versioning.enabled`), get, delete (only when empty); bucket names are global, and a
    bucket's project is the account its calls are counted under;
  * objects: get (metadata, or the bytes with `alt=media` and the headers the crate reads:
    x-goog-generation, x-goog-metageneration, x-goog-stored-content-length, x-goog-hash),
    insert by upload (`uploadType=media` with `name=`, or `multipart`: metadata, media and the
    crate's optional trailing checksums part, each crc32c or md5 given checked), delete, list
    (prefix, delimiter, pages);
  * generations: every write makes a new generation (metageneration 1); with versioning on the
    one it replaces stays readable with `generation=`; preconditions `ifGenerationMatch` (0: must
    not exist), `ifGenerationNotMatch`, `ifMetagenerationMatch`, `ifMetagenerationNotMatch`
    answer 412 conditionNotMet, as GCS does; `kmsKeyName` is kept and shown;
  * errors as GCS gives them: code, message and errors[] with a reason, no `status` string.
Resumable uploads (objects above the crate's 16 MiB threshold) are not served.
"""

import base64
import hashlib
import json
import re
import threading
import time
import urllib.parse

import google_crc32c

from .gcp import GoogleError, error_body, page, zulu


BUCKET_NAME = re.compile(r"[a-z0-9][-_.a-z0-9]{1,61}[a-z0-9]")
PRECONDITIONS = ("ifGenerationMatch", "ifGenerationNotMatch", "ifMetagenerationMatch", "ifMetagenerationNotMatch")
REASONS = {200: "OK", 204: "No Content", 400: "Bad Request", 404: "Not Found", 409: "Conflict", 412: "Precondition Failed",
           429: "Too Many Requests", 503: "Service Unavailable"}


def crc32c(data):
    """GCS's crc32c: the big-endian CRC-32C in base64."""
    return base64.b64encode(google_crc32c.value(data).to_bytes(4, "big")).decode()


def md5(data):
    return base64.b64encode(hashlib.md5(data).digest()).decode()


def no_such_bucket():
    return GoogleError(404, "The specified bucket does not exist.", "notFound")


class Storage:
    """The JSON API as a WSGI app, served by the harness below `prefix`."""

    service, prefix = "storage", ("/storage/v1/", "/upload/storage/v1/")

    def __init__(self):
        self.lock = threading.Lock()
        self.buckets = {}  # name -> {"resource": …, "objects": {name: [generations, newest last]}}
        self.next_generation = int(time.time() * 1_000_000)

    # --- routing ------------------------------------------------------------------------------

    def route(self, method, path, query):
        """(call name, handler, bucket, object, mutation) for a path; raises 404 for others."""
        upload = path.startswith("/upload/storage/v1/")
        rest = path[len("/upload/storage/v1/" if upload else "/storage/v1/"):]
        bucket, _, tail = rest.partition("/")
        if rest == "b" and method == "POST":
            return "buckets.insert", self.insert_bucket, None, None, True
        if bucket == "b":
            bucket, _, tail = tail.partition("/")
            if upload and tail == "o" and method == "POST":
                return "objects.insert", self.insert_object, bucket, query.get("name"), True
            if not upload and tail == "":
                handler = {"GET": ("buckets.get", self.get_bucket, False), "DELETE": ("buckets.delete", self.delete_bucket, True)}.get(method)
                if handler:
                    return handler[0], handler[1], bucket, None, handler[2]
            if not upload and tail == "o" and method == "GET":
                return "objects.list", self.list_objects, bucket, None, False
            if not upload and tail.startswith("o/"):
                handler = {"GET": ("objects.get", self.get_object, False), "DELETE": ("objects.delete", self.delete_object, True)}.get(method)
                if handler:
                    return handler[0], handler[1], bucket, tail[2:], handler[2]
        raise GoogleError(404, f"Not Found: {method} {path}", "notFound")

    def identify(self, environ):
        """(project, `storage:objects.insert`, whether the call changes something): a call on a
        bucket counts under the bucket's project, a bucket insert under its ?project=."""
        query = self.query(environ)
        try:
            name, _, bucket, _, mutation = self.route(environ.get("REQUEST_METHOD", "GET"), environ["PATH_INFO"], query)
        except GoogleError:
            return "", "storage:unknown", False
        with self.lock:
            record = self.buckets.get(bucket)
        project = record["resource"]["_project"] if record else query.get("project", "")
        return project, f"storage:{name}", mutation

    def fault(self, kind):
        """The answer to an injected throttle or server error."""
        if kind == "throttle":
            body = error_body(429, "The rate of change requests to the object is too high.", "rateLimitExceeded", "usageLimits", False)
        else:
            body = error_body(503, "We encountered an internal error. Please try again.", "backendError", "global", False)
        return body["code"], "application/json; charset=UTF-8", json.dumps({"error": body})

    @staticmethod
    def query(environ):
        return {k: v[0] for k, v in urllib.parse.parse_qs(environ.get("QUERY_STRING", ""), keep_blank_values=True).items()}

    def __call__(self, environ, start_response):
        method, query = environ.get("REQUEST_METHOD", "GET"), self.query(environ)
        body = environ["wsgi.input"].read()
        try:
            name, handler, bucket, obj, _ = self.route(method, environ["PATH_INFO"], query)
            with self.lock:
                status, headers, payload = handler(environ, query, bucket, obj, body)
        except GoogleError as e:
            status, headers = e.code, [("Content-Type", "application/json; charset=UTF-8")]
            payload = json.dumps({"error": error_body(e.code, e.message, e.reason, e.domain, with_status=False)}).encode()
        start_response(f"{status} {REASONS.get(status, 'OK')}", headers + [("Content-Length", str(len(payload)))])
        return [payload]

    # --- buckets ------------------------------------------------------------------------------

    def bucket(self, name):
        record = self.buckets.get(name)
        if record is None:
            raise no_such_bucket()
        return record

    def insert_bucket(self, environ, query, _bucket, _obj, body):
        try:
            resource = json.loads(body or b"{}")
        except ValueError:
            raise GoogleError(400, "Invalid JSON payload received.", "parseError")
        project, name = query.get("project"), resource.get("name", "")
        if not project:
            raise GoogleError(400, "Required parameter: project", "required")
        if not BUCKET_NAME.fullmatch(name) or ".." in name:
            raise GoogleError(400, "Invalid bucket name: '%s'" % name, "invalid")
        if name in self.buckets:
            raise GoogleError(409, "Your previous request to create the named bucket succeeded and you already own it.", "conflict")
        now = zulu(time.time())
        record = {"kind": "storage#bucket", "id": name, "name": name, "projectNumber": str(abs(hash(project)) % 10**12),
                  "metageneration": "1", "location": resource.get("location", "US").upper(), "storageClass": "STANDARD",
                  "timeCreated": now, "updated": now, "versioning": {"enabled": bool(resource.get("versioning", {}).get("enabled"))},
                  "etag": "CAE=", "_project": project}
        self.buckets[name] = {"resource": record, "objects": {}}
        return self.json(record)

    def get_bucket(self, environ, query, bucket, _obj, body):
        return self.json(self.bucket(bucket)["resource"])

    def delete_bucket(self, environ, query, bucket, _obj, body):
        record = self.bucket(bucket)
        if any(record["objects"].values()):
            raise GoogleError(409, "The bucket you tried to delete is not empty.", "conflict")
        del self.buckets[bucket]
        return 204, [], b""

    # --- objects ------------------------------------------------------------------------------

    def current(self, bucket, name):
        generations = self.bucket(bucket)["objects"].get(name) or []
        return generations[-1] if generations and not generations[-1]["_deleted"] else None

    def check_preconditions(self, query, obj):
        """412 conditionNotMet unless every precondition holds for `obj` (None: absent)."""
        generation = int(obj["generation"]) if obj else 0
        metageneration = int(obj["metageneration"]) if obj else None
        for key in PRECONDITIONS:
            if key not in query:
                continue
            try:
                want = int(query[key])
            except ValueError:
                raise GoogleError(400, f"Invalid argument for {key}: {query[key]}", "invalid")
            held = {"ifGenerationMatch": generation == want, "ifGenerationNotMatch": generation != want,
                    "ifMetagenerationMatch": metageneration == want, "ifMetagenerationNotMatch": metageneration != want}[key]
            if not held:
                raise GoogleError(412, "At least one of the pre-conditions you specified did not hold.", "conditionNotMet")

    def find(self, bucket, name, query):
        """The object a read names: the current generation, or `generation=` of it."""
        generations = self.bucket(bucket)["objects"].get(name) or []
        if "generation" in query:
            obj = next((g for g in generations if g["generation"] == query["generation"]), None)
        else:
            obj = self.current(bucket, name)
        if obj is None:
            raise GoogleError(404, f"No such object: {bucket}/{name}", "notFound")
        return obj

    def get_object(self, environ, query, bucket, name, body):
        obj = self.find(bucket, name, query)
        self.check_preconditions(query, obj)
        if query.get("alt") != "media":
            return self.json(self.visible(obj))
        headers = [("Content-Type", obj["contentType"]), ("x-goog-generation", obj["generation"]),
                   ("x-goog-metageneration", obj["metageneration"]), ("x-goog-stored-content-length", obj["size"]),
                   ("x-goog-stored-content-encoding", "identity"), ("x-goog-storage-class", obj["storageClass"]),
                   ("x-goog-hash", f"crc32c={obj['crc32c']},md5={obj['md5Hash']}")]
        return 200, headers, obj["_data"]

    def insert_object(self, environ, query, bucket, name, body):
        record = self.bucket(bucket)
        kind = query.get("uploadType")
        if kind == "media":
            metadata, data, checksums = {}, body, {}
            metadata["contentType"] = environ.get("CONTENT_TYPE") or "application/octet-stream"
        elif kind == "multipart":
            metadata, data, checksums = self.multipart(environ.get("CONTENT_TYPE", ""), body)
        else:
            raise GoogleError(400, f"Upload type '{kind}' is not supported here (media or multipart).", "invalid")
        name = name or metadata.get("name")
        if not name:
            raise GoogleError(400, "Required parameter: name", "required")
        for field, given, computed in (("crc32c", checksums.get("crc32c") or metadata.get("crc32c"), crc32c(data)),
                                       ("md5Hash", checksums.get("md5Hash") or metadata.get("md5Hash"), md5(data))):
            if given is not None and given != computed:
                raise GoogleError(400, f"Provided {field} \"{given}\" doesn't match calculated {field} \"{computed}\".", "invalid")
        self.check_preconditions(query, self.current(bucket, name))
        self.next_generation += 1
        now = zulu(time.time())
        obj = {"kind": "storage#object", "id": f"{bucket}/{name}/{self.next_generation}", "name": name, "bucket": bucket,
               "generation": str(self.next_generation), "metageneration": "1",
               "contentType": metadata.get("contentType") or "application/octet-stream", "storageClass": "STANDARD",
               "size": str(len(data)), "md5Hash": md5(data), "crc32c": crc32c(data), "etag": f"C{self.next_generation}EAE=",
               "timeCreated": now, "updated": now, "timeStorageClassUpdated": now, "timeFinalized": now,
               "_data": data, "_deleted": False}
        kms = query.get("kmsKeyName") or metadata.get("kmsKeyName")
        if kms:
            obj["kmsKeyName"] = f"{kms}/cryptoKeyVersions/1"
        generations = record["objects"].setdefault(name, [])
        if not record["resource"]["versioning"]["enabled"]:
            generations.clear()
        generations.append(obj)
        return self.json(self.visible(obj))

    def delete_object(self, environ, query, bucket, name, body):
        obj = self.find(bucket, name, query)
        self.check_preconditions(query, obj)
        record = self.bucket(bucket)
        if record["resource"]["versioning"]["enabled"]:
            obj["_deleted"] = True  # noncurrent, still readable by generation
        else:
            record["objects"][name] = [g for g in record["objects"][name] if g is not obj]
        return 204, [], b""

    def list_objects(self, environ, query, bucket, _obj, body):
        record, prefix, delimiter = self.bucket(bucket), query.get("prefix", ""), query.get("delimiter")
        names = sorted(n for n in record["objects"] if n.startswith(prefix) and self.current(bucket, n))
        prefixes = set()
        items = []
        for n in names:
            rest = n[len(prefix):]
            if delimiter and delimiter in rest:
                prefixes.add(prefix + rest[:rest.index(delimiter) + len(delimiter)])
            else:
                items.append(self.current(bucket, n))
        shown, token = page(items, lambda o: o["name"], query.get("maxResults"), query.get("pageToken"), limit=1000)
        result = {"kind": "storage#objects"}
        if shown:
            result["items"] = [self.visible(o) for o in shown]
        if prefixes:
            result["prefixes"] = sorted(prefixes)
        if token:
            result["nextPageToken"] = token
        return self.json(result)

    # --- bodies -------------------------------------------------------------------------------

    @staticmethod
    def visible(obj):
        return {k: v for k, v in obj.items() if not k.startswith("_")}

    @staticmethod
    def json(value):
        value = {k: v for k, v in value.items() if not k.startswith("_")}
        return 200, [("Content-Type", "application/json; charset=UTF-8")], json.dumps(value).encode()

    @staticmethod
    def multipart(content_type, body):
        """(metadata, media, trailing checksums) of a multipart/related upload: the first part is
        the object's JSON metadata, the second its bytes, a third (the crate's) its checksums."""
        boundary = re.search(r'boundary="?([^";]+)"?', content_type)
        if not content_type.startswith("multipart/related") or boundary is None:
            raise GoogleError(400, "Multipart uploads need Content-Type multipart/related with a boundary.", "invalid")
        delimiter = b"--" + boundary[1].encode()
        parts = []
        for chunk in body.split(delimiter)[1:]:
            if chunk.startswith(b"--"):
                break
            head, _, content = chunk.partition(b"\r\n\r\n")
            parts.append(content[:-2] if content.endswith(b"\r\n") else content)
        if len(parts) not in (2, 3):
            raise GoogleError(400, f"A multipart upload has a metadata part and a media part, not {len(parts)} parts.", "invalid")
        try:
            metadata = json.loads(parts[0] or b"{}")
            checksums = json.loads(parts[2]) if len(parts) == 3 else {}
        except ValueError:
            raise GoogleError(400, "Invalid JSON in the metadata part of a multipart upload.", "parseError")
        return metadata, parts[1], checksums
