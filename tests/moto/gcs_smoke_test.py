"""Smoke test of the launcher's Cloud Storage emulator (emulator/gcs.py), behind the check of
requests against the JSON API's discovery document (google_model.py): what the Rust crate does
not exercise through forge's tests, spoken over plain HTTP — requests off the document,
buckets, preconditions and their 412 bodies, generations kept by versioning, multipart uploads
with checked checksums, deletes, lists by prefix and delimiter with pages, and the call counter
under the bucket's project. Runs with the standard library and the venv's google_crc32c:
`python -m unittest`."""

import base64
import json
import unittest
import urllib.error
import urllib.parse
import urllib.request

import google_crc32c

from .launched import Launched

PROJECT = "gcs-smoke"


class Storage(Launched):
    def send(self, method, path, body=b"", content_type="application/json", **query):
        """(HTTP status, headers, body bytes)."""
        url = f"{self.url}{path}" + (f"?{urllib.parse.urlencode(query)}" if query else "")
        request = urllib.request.Request(url, data=body if method in ("POST", "PUT") else None, method=method,
                                         headers={"Content-Type": content_type, "Authorization": "Bearer anything"})
        try:
            with urllib.request.urlopen(request) as r:
                return r.status, r.headers, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.headers, e.read()

    def bucket(self, name, versioning=False):
        body = json.dumps({"name": name, "versioning": {"enabled": versioning}}).encode()
        status, _, out = self.send("POST", "/storage/v1/b", body, project=PROJECT)
        self.assertEqual(status, 200, out)

    def upload(self, bucket, name, data, want=200, **query):
        status, _, out = self.send("POST", f"/upload/storage/v1/b/{bucket}/o", data, "application/octet-stream",
                                   uploadType="media", name=name, **query)
        self.assertEqual(status, want, out)
        return json.loads(out)

    def test_preconditions_answer_412_condition_not_met(self):
        self.bucket("smoke-pre")
        first = self.upload("smoke-pre", "a/lock", b"one", ifGenerationMatch="0")
        self.assertEqual(first["size"], "3")
        refused = self.upload("smoke-pre", "a/lock", b"two", want=412, ifGenerationMatch="0")
        self.assertEqual(refused["error"]["errors"][0]["reason"], "conditionNotMet")
        self.assertNotIn("status", refused["error"])  # GCS's JSON API errors carry none
        swapped = self.upload("smoke-pre", "a/lock", b"two", ifGenerationMatch=first["generation"])
        self.assertGreater(int(swapped["generation"]), int(first["generation"]))
        self.upload("smoke-pre", "a/lock", b"three", want=412, ifGenerationMatch=first["generation"])
        status, headers, data = self.send("GET", "/storage/v1/b/smoke-pre/o/a%2Flock", alt="media")
        self.assertEqual((status, data), (200, b"two"))
        self.assertEqual(headers["x-goog-generation"], swapped["generation"])
        crc = base64.b64encode(google_crc32c.value(b"two").to_bytes(4, "big")).decode()
        self.assertIn(f"crc32c={crc}", headers["x-goog-hash"])
        status, _, _ = self.send("GET", "/storage/v1/b/smoke-pre/o/a%2Flock", alt="media", ifGenerationMatch="1")
        self.assertEqual(status, 412)
        status, _, out = self.send("DELETE", "/storage/v1/b/smoke-pre/o/a%2Flock", ifGenerationMatch=first["generation"])
        self.assertEqual(status, 412, out)
        status, _, _ = self.send("DELETE", "/storage/v1/b/smoke-pre/o/a%2Flock", ifGenerationMatch=swapped["generation"])
        self.assertEqual(status, 204)
        status, _, out = self.send("GET", "/storage/v1/b/smoke-pre/o/a%2Flock", alt="media")
        self.assertEqual(json.loads(out)["error"]["message"], "No such object: smoke-pre/a/lock")

    def test_versioning_keeps_each_generation_readable(self):
        self.bucket("smoke-versions", versioning=True)
        old = self.upload("smoke-versions", "state.json", b"v1")
        self.upload("smoke-versions", "state.json", b"v2")
        status, _, data = self.send("GET", "/storage/v1/b/smoke-versions/o/state.json", alt="media", generation=old["generation"])
        self.assertEqual((status, data), (200, b"v1"))

    def test_multipart_upload_checks_the_trailing_checksum(self):
        self.bucket("smoke-multipart")

        def multipart(data, crc):
            parts = [json.dumps({"name": "m", "contentType": "application/json"}).encode(), data,
                     json.dumps({"crc32c": crc}).encode()]
            body = b"".join(b"--XyZ\r\nContent-Type: application/json\r\n\r\n" + p + b"\r\n" for p in parts) + b"--XyZ--\r\n"
            return self.send("POST", "/upload/storage/v1/b/smoke-multipart/o", body, "multipart/related; boundary=XyZ",
                             uploadType="multipart")

        good = base64.b64encode(google_crc32c.value(b"{}").to_bytes(4, "big")).decode()
        status, _, out = multipart(b"{}", good)
        self.assertEqual(status, 200, out)
        self.assertEqual(json.loads(out)["crc32c"], good)
        status, _, out = multipart(b"{}", "AAAAAA==")
        self.assertEqual(status, 400, out)

    def test_list_by_prefix_and_delimiter_in_pages(self):
        self.bucket("smoke-list")
        for name in ("s/state.json", "s/state.json.journal/1", "s/state.json.journal/2", "t/state.json"):
            self.upload("smoke-list", name, b"x")
        status, _, out = self.send("GET", "/storage/v1/b/smoke-list/o", prefix="s/", delimiter="/")
        listed = json.loads(out)
        self.assertEqual([o["name"] for o in listed["items"]], ["s/state.json"])
        self.assertEqual(listed["prefixes"], ["s/state.json.journal/"])
        names, token = [], None
        while True:
            query = {"prefix": "s/", "maxResults": "2", **({"pageToken": token} if token else {})}
            status, _, out = self.send("GET", "/storage/v1/b/smoke-list/o", **query)
            page = json.loads(out)
            names += [o["name"] for o in page.get("items", [])]
            token = page.get("nextPageToken")
            if not token:
                break
        self.assertEqual(names, ["s/state.json", "s/state.json.journal/1", "s/state.json.journal/2"])

    def test_requests_off_the_discovery_document_get_googles_errors(self):
        """The check of every request against the JSON API's discovery document (google_model.py):
        errors[] without a status; an upload's metadata is checked, its media is not."""
        self.bucket("smoke-model")
        status, _, out = self.send("GET", "/storage/v1/b/smoke-model/o", pageSize="5")
        self.assertEqual((status, json.loads(out)["error"]["message"]), (400, 'Invalid JSON payload received. Unknown name "pageSize": '
                                                                        "Cannot bind query parameter. Field 'pageSize' could not be found in request message."))
        status, _, out = self.send("GET", "/storage/v1/b/smoke-model/o", versions="maybe")
        self.assertEqual((status, json.loads(out)["error"]["message"]), (400, "Invalid value at 'versions' (TYPE_BOOL), \"maybe\""))
        status, headers, out = self.send("GET", "/storage/v1/b/smoke-model/objects")
        self.assertEqual((status, headers["Content-Type"]), (404, "text/html; charset=UTF-8"))
        metadata = json.dumps({"name": "m", "colour": "red"}).encode()
        body = b"--XyZ\r\nContent-Type: application/json\r\n\r\n" + metadata + b"\r\n--XyZ\r\n\r\n{not json\r\n--XyZ--\r\n"
        status, _, out = self.send("POST", "/upload/storage/v1/b/smoke-model/o", body, "multipart/related; boundary=XyZ", uploadType="multipart")
        error = json.loads(out)["error"]
        message = "Invalid JSON payload received. Unknown name \"colour\" at 'resource': Cannot find field."
        self.assertEqual((status, error), (400, {"code": 400, "message": message, "errors": [{"message": message, "domain": "global", "reason": "invalid"}]}))
        self.upload("smoke-model", "raw", b'{"colour": "red"}')  # media is not JSON-checked
        status, _, out = self.send("POST", "/storage/v1/b", json.dumps({"name": "smoke-model-2", "versioning": {"enabled": "yes"}}).encode(), project=PROJECT)
        self.assertEqual((status, json.loads(out)["error"]["message"]), (400, "Invalid value at 'resource.versioning.enabled' (TYPE_BOOL), \"yes\""))
        status, _, _ = self.send("GET", "/storage/v1/b/smoke-model-2")
        self.assertEqual(status, 404)

    def test_missing_buckets_and_calls_by_project(self):
        status, _, out = self.send("GET", "/storage/v1/b/no-such-bucket/o/x", alt="media")
        self.assertEqual(status, 404)
        self.assertEqual(json.loads(out)["error"]["message"], "The specified bucket does not exist.")
        self.bucket("smoke-count")
        status, _, _ = self.send("POST", "/storage/v1/b", json.dumps({"name": "smoke-count"}).encode(), project=PROJECT)
        self.assertEqual(status, 409)
        self.upload("smoke-count", "k", b"x")
        with urllib.request.urlopen(f"{self.url}/_forge/calls?account={PROJECT}") as r:
            counted = json.loads(r.read())
        self.assertGreaterEqual(counted["storage:objects.insert"], 1)
        self.assertGreaterEqual(counted["storage:buckets.insert"], 2)
        status, _, _ = self.send("DELETE", "/storage/v1/b/smoke-count")
        self.assertEqual(status, 409)  # not empty


if __name__ == "__main__":
    unittest.main()
