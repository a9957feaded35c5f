"""Smoke test of the launcher's Cloud Billing Catalog emulator (emulator/gcp_billing.py), behind
the check of requests against the API's discovery document: services, SKUs in the API's shape
with their prices as units and nanos, pages, the decoys a loose match would take, and the
refusals. Runs with the standard library: `python -m unittest`."""

import json
import unittest
import urllib.error
import urllib.parse
import urllib.request

from .launched import Launched

COMPUTE = "6F81-5844-456A"


class Catalog(Launched):
    def get(self, path, **query):
        """(HTTP status, JSON answer)."""
        url = f"{self.url}/cloudbilling/v1/{path}" + (f"?{urllib.parse.urlencode(query)}" if query else "")
        try:
            with urllib.request.urlopen(urllib.request.Request(url, headers={"Authorization": "Bearer anything"})) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"{}")

    def skus(self, service, **query):
        status, answer = self.get(f"services/{service}/skus", **query)
        self.assertEqual(status, 200, answer)
        return answer

    def test_services_and_skus_in_the_apis_shape(self):
        status, services = self.get("services")
        self.assertEqual(status, 200, services)
        self.assertIn({"name": f"services/{COMPUTE}", "serviceId": COMPUTE, "displayName": "Compute Engine",
                       "businessEntityName": "businessEntities/GCP"}, services["services"])
        skus = self.skus(COMPUTE)["skus"]
        gpu = next(s for s in skus if s["description"] == "Nvidia H100 80GB GPU running in Americas")
        self.assertEqual(gpu["category"], {"serviceDisplayName": "Compute Engine", "resourceFamily": "Compute",
                                           "resourceGroup": "GPU", "usageType": "OnDemand"})
        self.assertIn("us-central1", gpu["serviceRegions"])
        self.assertEqual(gpu["name"], f"services/{COMPUTE}/skus/{gpu['skuId']}")
        expression = gpu["pricingInfo"][0]["pricingExpression"]
        self.assertEqual((expression["usageUnit"], expression["tieredRates"][0]["unitPrice"]),
                         ("h", {"currencyCode": "USD", "units": "9", "nanos": 796550000}))
        ram = next(s for s in skus if s["description"] == "A3 Instance Ram running in Americas")
        self.assertEqual(ram["pricingInfo"][0]["pricingExpression"]["usageUnit"], "GiBy.h")

    def test_a_loose_match_finds_the_decoys(self):
        h100 = [s for s in self.skus(COMPUTE)["skus"] if "H100 80GB GPU" in s["description"]]
        usage = sorted((s["category"]["usageType"], "DWS" in s["description"], "EMEA" in s["description"]) for s in h100)
        self.assertEqual(usage, [("OnDemand", False, False), ("OnDemand", False, True), ("OnDemand", True, False), ("Preemptible", False, False)])

    def test_pages_and_refusals(self):
        first = self.skus(COMPUTE, pageSize=5)
        self.assertEqual(len(first["skus"]), 5)
        rest = self.skus(COMPUTE, pageSize=5000, pageToken=first["nextPageToken"])
        self.assertEqual(rest["nextPageToken"], "")
        self.assertEqual(len(first["skus"]) + len(rest["skus"]), len(self.skus(COMPUTE)["skus"]))
        status, answer = self.get("services/0000-0000-0000/skus")
        self.assertEqual((status, answer["error"]["status"]), (404, "NOT_FOUND"))
        status, answer = self.get(f"services/{COMPUTE}/skus", currencyCode="EUR")
        self.assertEqual((status, answer["error"]["status"]), (400, "INVALID_ARGUMENT"))
        status, answer = self.get(f"services/{COMPUTE}/skus", unknownField="1")
        self.assertEqual(status, 400, answer)  # held to the discovery document


if __name__ == "__main__":
    unittest.main()
