"""The AWS Price List Query API, which moto has at no version: awsJson 1.1 routed by the SigV4
service `pricing` and `X-Amz-Target: AWSPriceListService.<Op>`, held to the model botocore
ships (`pricing/2017-10-15/service-2.json`) by the harness (aws_model.py).

  * GetProducts over a built-in catalogue, filtered as the API filters (TERM_MATCH and EQUALS:
    the whole value, any case; CONTAINS; ANY_OF and NONE_OF: comma-separated values) on the
    product's attributes (`ServiceCode` among them), `productFamily` or `sku`, field names in
    any case, in pages of at most MaxResults (100) with
    an opaque NextToken; each PriceList item a JSON string in the API's shape: `product`
    (`productFamily`, `attributes`, `sku`), `serviceCode`, `terms` with `OnDemand` and a
    one-year no-upfront `Reserved` offer term whose `priceDimensions` carry `pricePerUnit.USD`, `version` and
    `publicationDate`. DescribeServices lists the catalogue's services.
  * The catalogue (CATALOGUE): EC2 instances (Linux, shared tenancy, no pre-installed
    software, capacity status `Used`) of the GPU and CPU types forge's stacks use, in three
    regions, with the records a loose filter would also match — Windows, dedicated tenancy,
    SQL Server pre-installed, the two capacity-reservation statuses, other regions; EKS
    cluster-hours and the extended-support surcharge billed on top of them, beside Fargate's; NAT gateway hours beside
    its per-GB processing; FSx for Lustre per GB-month by deployment type and throughput tier
    (and FSx for Windows); EFS per GB-month by storage class (and a General Purpose record
    that is not storage). Prices are near AWS's published
    On-Demand list of November 2026: a fixture of this emulator, not a price source.
  * The endpoint is in us-east-1, eu-central-1 and ap-south-1 only: a request signed for
    another region is refused (there is no such endpoint to answer it).
"""

import base64
import hashlib
import json
import re
from decimal import Decimal

from . import aws_model

TARGET_PREFIX = aws_model.model("pricing").metadata["targetPrefix"] + "."
ENDPOINT_REGIONS = ("us-east-1", "eu-central-1", "ap-south-1")
PUBLISHED = "2026-11-01T00:00:00Z"

# regionCode: (location, usage type prefix, price factor against us-east-1)
REGIONS = {
    "us-east-1": ("US East (N. Virginia)", "", Decimal("1")),
    "us-west-2": ("US West (Oregon)", "USW2-", Decimal("1")),
    "eu-west-1": ("EU (Ireland)", "EU-", Decimal("1.1")),
}

# On-Demand Linux, shared tenancy, USD an hour in us-east-1.
INSTANCES = {
    "p5.48xlarge": ("55.04", 192, "2048 GiB", "8"),
    "p5en.48xlarge": ("63.296", 192, "2048 GiB", "8"),
    "p4de.24xlarge": ("27.447", 96, "1152 GiB", "8"),
    "p4d.24xlarge": ("21.958", 96, "1152 GiB", "8"),
    "p6-b200.48xlarge": ("113.9328", 192, "2048 GiB", "8"),
    "trn1.32xlarge": ("21.50", 128, "512 GiB", "0"),
    "trn2.48xlarge": ("35.76", 192, "2048 GiB", "0"),
    "c5.2xlarge": ("0.34", 8, "16 GiB", "0"),
    "c6i.2xlarge": ("0.34", 8, "16 GiB", "0"),
    "m5.2xlarge": ("0.384", 8, "32 GiB", "0"),
    "m6i.2xlarge": ("0.384", 8, "32 GiB", "0"),
}

# The records that share an instance's type and region and differ in one attribute, with the
# price factor of each: what a filter that leaves that attribute out would also match.
DECOYS = [
    ({"operatingSystem": "Windows", "licenseModel": "License included", "operation": "RunInstances:0002"}, Decimal("1.06")),
    ({"tenancy": "Dedicated"}, Decimal("1.1")),
    ({"preInstalledSw": "SQL Std", "operation": "RunInstances:0004"}, Decimal("1.25")),
    ({"capacitystatus": "AllocatedCapacityReservation"}, Decimal("1")),
    ({"capacitystatus": "UnusedCapacityReservation"}, Decimal("1")),
]


def sku(*parts):
    return hashlib.sha256("/".join(parts).encode()).hexdigest()[:16].upper()


def record(service, family, attributes, usd, unit, description):
    """One PriceList item as the API returns it, before it is made a string."""
    code = sku(service, json.dumps(attributes, sort_keys=True))
    on_demand, reserved = "JRTCKXETXF", "4NA7Y494T4"  # On-Demand; 1-year standard No Upfront
    dimension = lambda term, price, what: {  # noqa: E731
        f"{code}.{term}.6YS6EN2CT7": {
            "unit": unit, "endRange": "Inf", "description": what, "appliesTo": [],
            "rateCode": f"{code}.{term}.6YS6EN2CT7", "beginRange": "0", "pricePerUnit": {"USD": f"{price:.10f}"},
        }
    }
    # A one-year, no-upfront reservation: the term a parser that takes the first term it meets
    # could take instead of On-Demand.
    yearly = (Decimal(usd) * Decimal("0.6")).quantize(Decimal("0.0000000001"))
    return {
        "product": {"productFamily": family, "attributes": dict(attributes, servicecode=service), "sku": code},
        "serviceCode": service,
        "terms": {
            "OnDemand": {f"{code}.{on_demand}": {
                "offerTermCode": on_demand, "sku": code, "effectiveDate": PUBLISHED,
                "priceDimensions": dimension(on_demand, Decimal(usd), description), "termAttributes": {},
            }},
            "Reserved": {f"{code}.{reserved}": {
                "offerTermCode": reserved, "sku": code, "effectiveDate": PUBLISHED,
                "priceDimensions": dimension(reserved, yearly, f"Reserved {description}"),
                "termAttributes": {"LeaseContractLength": "1yr", "OfferingClass": "standard", "PurchaseOption": "No Upfront"},
            }},
        },
        "version": "20261101000000",
        "publicationDate": PUBLISHED,
    }


def ec2_instances():
    for region, (location, prefix, factor) in REGIONS.items():
        for instance_type, (usd, vcpu, memory, gpus) in INSTANCES.items():
            base = {
                "instanceType": instance_type, "regionCode": region, "location": location, "locationType": "AWS Region",
                "operatingSystem": "Linux", "tenancy": "Shared", "preInstalledSw": "NA", "capacitystatus": "Used",
                "licenseModel": "No License required", "vcpu": str(vcpu), "memory": memory, "gpu": gpus,
                "usagetype": f"{prefix}BoxUsage:{instance_type}", "operation": "RunInstances",
            }
            price = Decimal(usd) * factor
            yield record("AmazonEC2", "Compute Instance", base, price, "Hrs", f"${price:.4f} per On Demand Linux {instance_type} Instance Hour")
            for changes, more in DECOYS:
                attributes = dict(base, **changes)
                if "Dedicated" in changes.values():
                    attributes["usagetype"] = f"{prefix}DedicatedUsage:{instance_type}"
                if "capacitystatus" in changes:
                    attributes["usagetype"] = f"{prefix}{'Reservation' if 'Allocated' in changes['capacitystatus'] else 'UnusedBox'}:{instance_type}"
                decoy = price * more
                what = " ".join(v for k, v in changes.items() if k != "operation")
                yield record("AmazonEC2", "Compute Instance", attributes, decoy, "Hrs", f"${decoy:.4f} per {what} {instance_type} Instance Hour")


def per_region(service, family, usd, unit, description, **attributes):
    for region, (location, prefix, factor) in REGIONS.items():
        fields = {key: value.format(prefix=prefix) for key, value in attributes.items()}
        price = Decimal(usd) * factor
        yield record(service, family, dict(fields, regionCode=region, location=location), price, unit, description.format(price=price))


def catalogue():
    records = list(ec2_instances())
    records += per_region("AmazonEKS", "Compute", "0.10", "Hours", "Amazon EKS cluster usage ${price:.2f} per hour",
                          usagetype="{prefix}AmazonEKS-Hours:perCluster", operation="CreateOperation", tiertype="HAStandard")
    # Extended support is billed on top of the cluster hour: a surcharge record of its own.
    records += per_region("AmazonEKS", "Compute", "0.50", "Hours", "Amazon EKS cluster extended support ${price:.2f} per hour",
                          usagetype="{prefix}AmazonEKS-Hours:extendedSupport", operation="ExtendedSupport", tiertype="HAExtended")
    records += per_region("AmazonEKS", "Compute", "0.04048", "hours", "AWS Fargate vCPU ${price:.5f} per vCPU-hour",
                          usagetype="{prefix}Fargate-vCPU-Hours:perCPU", operation="FargateTask", tiertype="Fargate")
    records += per_region("AmazonEC2", "NAT Gateway", "0.045", "Hrs", "${price:.3f} per NAT Gateway Hour",
                          usagetype="{prefix}NatGateway-Hours", operation="NatGateway", group="NGW:NatGateway")
    records += per_region("AmazonEC2", "NAT Gateway", "0.045", "GB", "${price:.3f} per GB Data Processed by NAT Gateways",
                          usagetype="{prefix}NatGateway-Bytes", operation="NatGateway", group="NGW:NatGateway")
    for deployment, throughput, usd in (("Persistent_2", "125", "0.145"), ("Persistent_2", "250", "0.21"),
                                        ("Persistent_2", "500", "0.29"), ("Persistent_2", "1000", "0.42"),
                                        ("Persistent_1", "50", "0.14"), ("Persistent_1", "100", "0.19"),
                                        ("Persistent_1", "200", "0.29"), ("Scratch_2", "200", "0.14")):
        records += per_region("AmazonFSx", "Storage", usd, "GB-Mo", f"Lustre {deployment} {throughput} MB/s/TiB SSD storage, ${{price:.3f}} per GB-month",
                              fileSystemType="Lustre", deploymentOption=deployment, throughputCapacity=throughput, storageType="SSD",
                              usagetype=f"{{prefix}}{deployment}-{throughput}-Storage")
    records += per_region("AmazonFSx", "Storage", "0.13", "GB-Mo", "Windows File Server SSD storage, ${price:.3f} per GB-month",
                          fileSystemType="Windows", deploymentOption="Multi-AZ", storageType="SSD", usagetype="{prefix}Windows-SSD-Storage")
    for storage_class, usage, usd in (("General Purpose", "TimedStorage-ByteHrs", "0.30"), ("General Purpose", "TimedStorage-IO-Bytes", "0.03"),
                                      ("Infrequent Access", "IATimedStorage-ByteHrs", "0.016"), ("Archive", "ArchiveTimedStorage-ByteHrs", "0.008")):
        records += per_region("AmazonEFS", "Storage", usd, "GB-Mo", f"EFS {storage_class} {usage} ${{price:.3f}} per GB-month",
                              storageClass=storage_class, usagetype=f"{{prefix}}{usage}")
    return records


CATALOGUE = catalogue()


class PriceListError(Exception):
    def __init__(self, kind, message, status=400):
        super().__init__(message)
        self.kind, self.message, self.status = kind, message, status


def matches(product, condition):
    """Field names are matched in any case (`ServiceCode`, `servicecode`), as the API does."""
    kind, field, value = condition["Type"], condition["Field"].lower(), condition["Value"]
    fields = {k.lower(): v for k, v in product["attributes"].items()}
    fields.update(productfamily=product["productFamily"], sku=product["sku"])
    have = fields.get(field)
    if have is None:
        return kind == "NONE_OF"
    have = have.lower()
    if kind in ("TERM_MATCH", "EQUALS"):
        return have == value.lower()
    if kind == "CONTAINS":
        return value.lower() in have
    values = [v.strip().lower() for v in value.split(",")]
    if kind == "ANY_OF":
        return have in values
    if kind == "NONE_OF":
        return have not in values
    raise PriceListError("InvalidParameterException", f"Unsupported filter type {kind}.")


def get_products(request):
    service = request.get("ServiceCode")
    if not service:
        raise PriceListError("InvalidParameterException", "ServiceCode is required.")
    version = request.get("FormatVersion", "aws_v1")
    if version != "aws_v1":
        raise PriceListError("InvalidParameterException", f"Unsupported FormatVersion {version}; the only one is aws_v1.")
    filters = request.get("Filters") or []
    found = [r for r in CATALOGUE if r["serviceCode"] == service and all(matches(r["product"], f) for f in filters)]
    page, following = page_of(found, request, 100)
    answer = {"FormatVersion": "aws_v1", "PriceList": [json.dumps(r) for r in page]}
    if following:
        answer["NextToken"] = following
    return answer


def page_of(items, request, size):
    """One page of `items` for MaxResults / NextToken, and the next page's token."""
    start = 0
    if request.get("NextToken"):
        try:
            start = int(base64.b64decode(request["NextToken"]).decode().removeprefix("offset:"))
        except (ValueError, UnicodeDecodeError):
            raise PriceListError("InvalidNextTokenException", "The NextToken is not valid.")
    size = request.get("MaxResults", size)
    following = base64.b64encode(f"offset:{start + size}".encode()).decode() if start + size < len(items) else None
    return items[start:start + size], following


def describe_services(request):
    wanted = request.get("ServiceCode")
    codes = sorted({r["serviceCode"] for r in CATALOGUE if wanted in (None, r["serviceCode"])})
    if wanted and not codes:
        raise PriceListError("NotFoundException", f"Service {wanted} was not found.")
    services = [{"ServiceCode": code, "AttributeNames": sorted({k for r in CATALOGUE if r["serviceCode"] == code for k in r["product"]["attributes"]})}
                for code in codes]
    page, following = page_of(services, request, 100)
    answer = {"FormatVersion": "aws_v1", "Services": page}
    if following:
        answer["NextToken"] = following
    return answer


OPERATIONS = {"GetProducts": get_products, "DescribeServices": describe_services}


class Pricing:
    """The WSGI app the harness sends the Price List API's requests to."""

    def __call__(self, environ, start_response):
        target = environ.get("HTTP_X_AMZ_TARGET", "")
        operation = target[len(TARGET_PREFIX):] if target.startswith(TARGET_PREFIX) else ""
        region = (re.search(r"Credential=[^/]+/[^/]+/([^/]+)/", environ.get("HTTP_AUTHORIZATION", "")) or [None, "us-east-1"])[1]
        length = int(environ.get("CONTENT_LENGTH") or 0)
        raw = environ["wsgi.input"].read(length) if length else b"{}"
        try:
            if region not in ENDPOINT_REGIONS:
                raise PriceListError("UnrecognizedClientException",
                                     f"The Price List Query API has endpoints in {', '.join(ENDPOINT_REGIONS)} only, not {region}.", status=403)
            if operation not in OPERATIONS:
                raise PriceListError("UnknownOperationException", f"Unknown operation {target}.")
            status, body = 200, OPERATIONS[operation](json.loads(raw or b"{}"))
        except PriceListError as e:
            status, body = e.status, {"__type": e.kind, "Message": e.message}
        data = json.dumps(body).encode()
        headers = [("Content-Type", "application/x-amz-json-1.1"), ("Content-Length", str(len(data)))]
        if status != 200:
            headers.append(("x-amzn-ErrorType", body["__type"]))
        start_response(f"{status} {'OK' if status == 200 else 'Error'}", headers)
        return [data]
