"""The Cloud Billing Catalog API (cloudbilling.googleapis.com v1): the public price list of
Google Cloud's services, served at /cloudbilling/v1/ (where an endpoint override puts
cloudbilling.googleapis.com) and held to its discovery document by the harness.

  * services.list: the catalogue's services (`name` `services/<id>`, `serviceId`,
    `displayName`, `businessEntityName`); services.skus.list `services/<id>/skus`: its SKUs in
    pages of `pageSize` (default and most 5,000) with `nextPageToken`; an unknown service is
    404 NOT_FOUND, a `currencyCode` other than USD 400 INVALID_ARGUMENT (this catalogue holds
    USD only).
  * Each SKU in the API's shape: `name`, `skuId` (`XXXX-XXXX-XXXX`), `description`, `category`
    (`serviceDisplayName`, `resourceFamily`, `resourceGroup`, `usageType`), `serviceRegions`,
    `pricingInfo[0].pricingExpression` (`usageUnit` `h` or `GiBy.h`, its descriptions, the
    base unit and factor, `displayQuantity`, `tieredRates[0].unitPrice` as `currencyCode`,
    `units` — an int64, so a string — and `nanos`), `aggregationInfo`,
    `currencyConversionRate`, `effectiveTime`, `serviceProviderName`, `geoTaxonomy`.
  * The catalogue (CATALOGUE): Compute Engine (`6F81-5844-456A`) — the core, RAM and GPU SKUs
    of A3 High (H100 80GB), A3 Mega (H100 80GB Mega, "A3Plus" cores and RAM), G2 (L4) and E2,
    in the Americas, with the SKUs a loose match would also take: Spot (usage type
    `Preemptible`), commitments (`Commit1Yr`), Dynamic Workload Scheduler's "DWS Defined
    Duration" prices, and the same machines in EMEA; Kubernetes Engine (`CCD8-9BF1-090E`) —
    the regional and zonal cluster fee beside Autopilot's, served in the region `global`;
    Filestore (`D97E-AB26-5D95`) — each tier's capacity by the GiB-month (`GiBy.mo`) beside its
    one-year commitment. The Compute
    and GKE descriptions follow Google's own (Filestore's are modelled on them, not
    confirmed); the prices are near Google's published list of November 2026: a fixture of
    this emulator, not a price source.
"""

import base64
import hashlib

from .gcp import GoogleApi, GoogleError

COMPUTE, GKE, FILESTORE = "6F81-5844-456A", "CCD8-9BF1-090E", "D97E-AB26-5D95"
SERVICES = {COMPUTE: "Compute Engine", GKE: "Kubernetes Engine", FILESTORE: "Cloud Filestore"}
AMERICAS = ["us-central1", "us-east1", "us-east4", "us-east5", "us-south1", "us-west1", "us-west4"]
EMEA = ["europe-west1", "europe-west4"]
EFFECTIVE = "2026-11-01T08:00:00.000Z"
UNITS = {
    "h": ("hour", "s", "second", 3600),
    "GiBy.h": ("gibibyte hour", "By.s", "byte second", 3865470566400),
    "GiBy.mo": ("gibibyte month", "By.s", "byte second", 2823940095590400),
}


def sku_id(description):
    digest = hashlib.sha256(description.encode()).hexdigest().upper()
    return f"{digest[:4]}-{digest[4:8]}-{digest[8:12]}"


def sku(service, description, family, group, usage, regions, usd, unit):
    """One SKU as the API shows it, at `usd` per `unit`."""
    whole, fraction = divmod(round(float(usd) * 1e9), 10**9)
    unit_description, base, base_description, factor = UNITS[unit]
    identifier = sku_id(f"{service}/{description}")
    return {
        "name": f"services/{service}/skus/{identifier}",
        "skuId": identifier,
        "description": description,
        "category": {"serviceDisplayName": SERVICES[service], "resourceFamily": family, "resourceGroup": group, "usageType": usage},
        "serviceRegions": regions,
        "pricingInfo": [{
            "summary": "",
            "pricingExpression": {
                "usageUnit": unit, "displayQuantity": 1,
                "tieredRates": [{"startUsageAmount": 0, "unitPrice": {"currencyCode": "USD", "units": str(whole), "nanos": fraction}}],
                "usageUnitDescription": unit_description, "baseUnit": base, "baseUnitDescription": base_description,
                "baseUnitConversionFactor": factor,
            },
            "aggregationInfo": {"aggregationLevel": "ACCOUNT", "aggregationInterval": "DAILY", "aggregationCount": 1},
            "currencyConversionRate": 1,
            "effectiveTime": EFFECTIVE,
        }],
        "serviceProviderName": "Google",
        "geoTaxonomy": {"type": "MULTI_REGIONAL", "regions": regions},
    }


# (machine family's SKU name, its core $/vCPU-hour, its RAM $/GiB-hour, its GPU's SKU name and
# $/GPU-hour, or None) in the Americas.
FAMILIES = [
    ("A3", "0.02550", "0.002220", "Nvidia H100 80GB GPU", "9.79655"),
    ("A3Plus", "0.02608", "0.002274", "Nvidia H100 80GB Mega GPU", "10.86"),
    ("G2", "0.024988", "0.002927", "Nvidia L4 GPU", "0.5600"),
    ("E2", "0.021811", "0.002923", None, None),
]


def compute_skus():
    skus = []
    for name, core, ram, gpu, gpu_usd in FAMILIES:
        for where, regions, factor in (("Americas", AMERICAS, 1.0), ("EMEA", EMEA, 1.1)):
            skus.append(sku(COMPUTE, f"{name} Instance Core running in {where}", "Compute", "CPU", "OnDemand", regions, float(core) * factor, "h"))
            skus.append(sku(COMPUTE, f"{name} Instance Ram running in {where}", "Compute", "RAM", "OnDemand", regions, float(ram) * factor, "GiBy.h"))
            if gpu:
                skus.append(sku(COMPUTE, f"{gpu} running in {where}", "Compute", "GPU", "OnDemand", regions, float(gpu_usd) * factor, "h"))
        # What a loose match would also take, in the Americas: Spot, a commitment, DWS.
        skus.append(sku(COMPUTE, f"Spot Preemptible {name} Instance Core running in Americas", "Compute", "CPU", "Preemptible", AMERICAS, float(core) * 0.4, "h"))
        skus.append(sku(COMPUTE, f"Spot Preemptible {name} Instance Ram running in Americas", "Compute", "RAM", "Preemptible", AMERICAS, float(ram) * 0.4, "GiBy.h"))
        skus.append(sku(COMPUTE, f"Commitment v1: {name} Cpu in Americas for 1 Year", "Compute", "CPU", "Commit1Yr", AMERICAS, float(core) * 0.63, "h"))
        if gpu:
            skus.append(sku(COMPUTE, f"{gpu} attached to Spot Preemptible VMs running in Americas", "Compute", "GPU", "Preemptible", AMERICAS, float(gpu_usd) * 0.3, "h"))
            skus.append(sku(COMPUTE, f"{gpu} running in Americas (DWS Defined Duration)", "Compute", "GPU", "OnDemand", AMERICAS, float(gpu_usd) * 0.55, "h"))
    return skus


def gke_skus():
    # The cluster fee is the same everywhere: its SKUs serve the region `global`.
    return [
        sku(GKE, "Regional Kubernetes Clusters", "Compute", "Kubernetes Clusters", "OnDemand", ["global"], "0.10", "h"),
        sku(GKE, "Zonal Kubernetes Clusters", "Compute", "Kubernetes Clusters", "OnDemand", ["global"], "0.10", "h"),
        sku(GKE, "Autopilot Kubernetes Clusters", "Compute", "Kubernetes Clusters", "OnDemand", ["global"], "0.10", "h"),
        sku(GKE, "Autopilot Pod mCPU Requests (us-central1)", "Compute", "CPU", "OnDemand", ["us-central1"], "0.0445", "h"),
    ]


# Filestore capacity, USD a GiB-month in the Americas, by the name the SKUs give each tier:
# Standard (Basic HDD), Premium (Basic SSD), Zonal, Regional and Enterprise (one SKU).
FILESTORE_TIERS = [("Standard", "0.16"), ("Premium", "0.30"), ("Zonal and High Scale", "0.25"), ("Regional and Enterprise", "0.45")]


def filestore_skus():
    skus = []
    for tier, usd in FILESTORE_TIERS:
        group = tier.split()[0]
        for where, regions, factor in (("Americas", AMERICAS, 1.0), ("EMEA", EMEA, 1.1)):
            skus.append(sku(FILESTORE, f"Filestore Capacity {tier} ({where})", "Storage", group, "OnDemand", regions, float(usd) * factor, "GiBy.mo"))
        # What a loose match would also take: a one-year commitment's price.
        skus.append(sku(FILESTORE, f"Commitment v1: Filestore Capacity {tier} in Americas for 1 Year", "Storage", group, "Commit1Yr", AMERICAS, float(usd) * 0.8, "GiBy.mo"))
    return skus


CATALOGUE = {COMPUTE: compute_skus(), GKE: gke_skus(), FILESTORE: filestore_skus()}


def page(items, call, key):
    size = int(call.query.get("pageSize") or 5000)
    if not 0 < size <= 5000:
        size = 5000
    token = call.query.get("pageToken")
    start = 0
    if token:
        try:
            start = int(base64.b64decode(token).decode().removeprefix("offset:"))
        except ValueError:
            raise GoogleError(400, "Invalid page token.", "badRequest", status="INVALID_ARGUMENT")
    answer = {key: items[start:start + size]}
    answer["nextPageToken"] = base64.b64encode(f"offset:{start + size}".encode()).decode() if start + size < len(items) else ""
    return answer


class Billing(GoogleApi):
    """The Catalog API: one public catalogue, the same for every caller."""

    service, prefix = "cloudbilling", "/cloudbilling/v1/"

    def route(self, method, path):
        parts = path.split("/")
        if method == "GET" and parts == ["services"]:
            return "", "", "services.list", self.services_list, {}, False
        if method == "GET" and len(parts) == 3 and parts[0] == "services" and parts[2] == "skus":
            return "", "", "services.skus.list", self.services_skus_list, {"service": parts[1]}, False
        raise GoogleError(404, f"The requested URL /v1/{path} ({method}) was not found on this server.", "notFound")

    def services_list(self, call):
        services = [{"name": f"services/{sid}", "serviceId": sid, "displayName": name, "businessEntityName": "businessEntities/GCP"}
                    for sid, name in SERVICES.items()]
        return page(services, call, "services")

    def services_skus_list(self, call):
        service = call.params["service"]
        if service not in CATALOGUE:
            raise GoogleError(404, f"Service services/{service} not found.", "notFound", status="NOT_FOUND")
        if (call.query.get("currencyCode") or "USD") != "USD":  # empty: the default, USD
            raise GoogleError(400, "This catalogue holds USD prices only.", "badRequest", status="INVALID_ARGUMENT")
        return page(CATALOGUE[service], call, "skus")

    def render_operation(self, op, call):
        raise NotImplementedError("the Catalog API has no operations")

    def failure(self, call, code, message):
        raise NotImplementedError("the Catalog API has no operations")
