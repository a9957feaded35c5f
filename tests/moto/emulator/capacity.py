"""EC2 Capacity Blocks for ML and Capacity Reservations, which moto 5.2.5 lacks:
  * DescribeCapacityBlockOfferings: at most 6 offerings (MaxResults/NextToken page them), sorted
    by start date, then zone, then type. Types with offerings: CAPACITY_BLOCK_TYPES, and the
    UltraServers in ULTRASERVERS (UltraserverType and UltraserverCount, InstanceCount being
    the servers' instances); any other type (p6e-gb200 and trn2u without an UltraserverType
    too) has none: an empty list. The zones: those of the region moto offers the type in.
    Blocks start and end at 11:30 UTC, the earliest at the first 11:30 more than a day after
    the account's clock, the latest 8 weeks after it; StartDateRange and EndDateRange narrow
    them. Which (zone, start) pairs have capacity, and each offering's id, are digests of the
    account, region, type, count, duration, zone and start, so identical searches answer the
    same ids (until one is bought: bought capacity is not offered again). UpfrontFee: the
    type's hourly rate per instance (RATES) x instances x hours x a factor in [0.9, 1.1) that
    depends on the region, zone, type and start day, to the cent. CapacityDurationHours:
    24..336 by 24, then by 168 up to 4368; InstanceCount 1..64; anything else
    InvalidParameterValue;
  * PurchaseCapacityBlock of an offering served to the account in the region: a capacity
    reservation `cr-` + 17 hex, ReservationType `capacity-block`, `targeted`, EndDateType
    `limited`, tagged by TagSpecifications of type `capacity-reservation` (`capacity-block`
    tags go on an UltraServer's Capacity Block). An UltraServer purchase also makes a Capacity
    Block (`cb-` + 17 hex, CapacityBlockId on the reservation, CapacityBlocks in the answer);
    other purchases answer no CapacityBlocks, as EC2 gives Capacity Block ids to UltraServers
    only. Errors (EC2's documented codes): InvalidCapacityBlockOfferingIdMalformed (not
    `cb-` + 17 hex), InvalidCapacityBlockOfferingIdNotFound (never served to this account and
    region), InvalidCapacityBlockOfferingIdExpired (bought already, or its start has passed);
  * Capacity Block extensions (the EC2 user guide's "Extend Capacity Blocks"):
    DescribeCapacityBlockExtensionOfferings, for a Capacity Block reservation of the account
    (seen) that is `scheduled` or `active`, answers one offering (MaxResults/NextToken page it)
    that extends it by CapacityBlockExtensionDurationHours from its current EndDate, while that
    end is from 1 hour to 56 days away by the account's clock (else none: an empty list). Its id,
    `cbe-` + 17 hex (assumed: EC2 documents no format), is a digest of the account, region,
    reservation, end and duration, so identical requests answer the same id until the block's
    end moves. UpfrontFee as for the block's own offerings: RATES x instances x hours x the
    factor of the region, zone, type and the extension's start day, to the cent; Tenancy the
    block's. Durations as for blocks (24..336 by 24, then by 168 up to 4368) and the block
    with its extensions at most 4368 hours long; else InvalidParameterValue. Errors:
    InvalidCapacityReservationId.NotFound (an unknown or unseen id), UnsupportedOperation (an
    On-Demand reservation), IncorrectState (an expired block). PurchaseCapacityBlockExtension
    of an offering served to the account for that reservation moves the reservation's EndDate
    (and its UltraServer Capacity Block's) to the extension's end at once, the extension
    `payment-succeeded`. Its errors, EC2's documented codes of offering ids (it documents none
    of its own for extensions): InvalidCapacityBlockOfferingIdMalformed (not `cbe-` + 17 hex),
    InvalidCapacityBlockOfferingIdNotFound (never served to this account and region for that
    reservation), InvalidCapacityBlockOfferingIdExpired (bought already, the block's end moved
    since it was served, the block no longer `scheduled` or `active`, or its end less than an
    hour away); and for the reservation InvalidCapacityReservationId.NotFound and
    UnsupportedOperation as above. No idempotency token: EC2 has none for it.
    DescribeCapacityBlockExtensionHistory: the account's extensions in the region,
    oldest first; CapacityReservationIds (an unknown one: InvalidCapacityReservationId.NotFound),
    the filters botocore's documentation lists (availability-zone, availability-zone-id,
    capacity-block-extension-offering-id, capacity-block-extension-status,
    capacity-reservation-id, instance-type; another: InvalidParameterValue), MaxResults/NextToken;
  * a clock per account (`set_clock`, POST /_forge/clock): real time until set, then frozen
    where set or advanced. A block is `scheduled` before its StartDate, `active` until its
    EndDate, `expired` after; an On-Demand reservation `active` (`scheduled` before a
    StartDate given) until a `limited` EndDate. What follows the clock (CLOCK_LISTENERS:
    scheduled actions, autoscaling.py; the Nodes of node groups on Capacity Blocks, eks.py)
    catches up with it whenever it is set and whenever `tick` is called;
  * eventual consistency: a reservation made (bought or created) is seen by the Describe calls,
    CreateTags and the rest only `visible_after_seconds` real seconds later (POST
    /_forge/capacity {"visible_after_seconds"}, per account, default 0): an unseen id is
    InvalidCapacityReservationId.NotFound;
  * DescribeCapacityReservations: ids (an unknown one: InvalidCapacityReservationId.NotFound),
    the filters botocore's documentation lists (instance-type, owner-id, instance-platform,
    availability-zone, tenancy, outpost-arn, state, start-date, end-date, end-date-type,
    instance-match-criteria, placement-group-arn) and `tag:<key>`, `tag-key` (another filter:
    InvalidParameterValue), MaxResults/NextToken; DescribeCapacityBlocks likewise (filters
    capacity-block-id, ultraserver-type, availability-zone, state, tag:<key>, tag-key);
  * CreateCapacityReservation (On-Demand, ReservationType `default`, ClientToken idempotent),
    ModifyCapacityReservation (InstanceCount, EndDate/EndDateType, InstanceMatchCriteria) and
    CancelCapacityReservation (state `cancelled`); a Capacity Block can be neither modified
    nor cancelled (UnsupportedOperation), a cancelled or expired reservation not changed
    (IncorrectState);
  * reservation and Capacity Block ids taggable: CreateTags, DeleteTags and DescribeTags take
    `cr-` and `cb-` ids of the account's (seen) reservations and blocks, kept in moto's tag store.
`purchases(account)` (GET /_forge/capacity) lists what an account bought (blocks under `purchases`,
extensions under `extensions`) and what it paid.
"""

import base64
import datetime
import hashlib
import json
import random
import re
import threading
import time
from decimal import ROUND_HALF_UP, Decimal

from botocore.utils import parse_timestamp
from moto.core.responses import ActionResult
from moto.ec2.exceptions import EC2ClientError
from moto.ec2.models import EC2Backend
from moto.ec2.models import instance_types as moto_types
from moto.ec2.models.availability_zones_and_regions import RegionsAndZonesBackend
from moto.ec2.responses import EC2Response
from moto.ec2.utils import EC2_PREFIX_TO_RESOURCE, EC2_RESOURCE_TO_PREFIX, get_prefix, simple_aws_filter_to_re

# Hourly Capacity Block rate of one instance, USD (near AWS's published prices).
RATES = {
    "p4d.24xlarge": Decimal("11.80"),
    "p4de.24xlarge": Decimal("14.70"),
    "p5.48xlarge": Decimal("31.464"),
    "p5e.48xlarge": Decimal("34.61"),
    "p5en.48xlarge": Decimal("36.00"),
    "p6-b200.48xlarge": Decimal("45.00"),
    "p6-b300.48xlarge": Decimal("60.00"),
    "trn1.32xlarge": Decimal("5.50"),
    "trn2.48xlarge": Decimal("18.00"),
    "p6e-gb200.36xlarge": Decimal("65.00"),  # in UltraServers only
    "trn2u.48xlarge": Decimal("22.00"),  # in UltraServers only
}
CAPACITY_BLOCK_TYPES = ("p4d.24xlarge", "p4de.24xlarge", "p5.48xlarge", "p5e.48xlarge", "p5en.48xlarge", "p6-b200.48xlarge",
                        "p6-b300.48xlarge", "trn1.32xlarge", "trn2.48xlarge")
# UltraServer type: (instance type, instances in one server).
ULTRASERVERS = {
    "u-p6e-gb200x72": ("p6e-gb200.36xlarge", 18),
    "u-p6e-gb200x36": ("p6e-gb200.36xlarge", 9),
    "u-trn2x64": ("trn2u.48xlarge", 4),
}
MAX_INSTANCES = 64
MAX_OFFERINGS = 6
BLOCK_TIME = datetime.time(11, 30)
DAY = datetime.timedelta(days=1)
SEARCH_WEEKS = 8
OFFERING_ID = re.compile(r"cb-[0-9a-f]{17}")
EXTENSION_OFFERING_ID = re.compile(r"cbe-[0-9a-f]{17}")
MAX_BLOCK_HOURS = 182 * 24
EXTEND_WINDOW = (datetime.timedelta(hours=1), datetime.timedelta(days=56))  # an extension is offered from 56 days to 1 hour before the end

LOCK = threading.RLock()
CLOCKS = {}  # account (None: every account without its own) -> frozen naive-UTC datetime
VISIBLE_AFTER = {}  # account -> real seconds before a new reservation is seen
STORES = {}  # (account, region) -> Store
CLOCK_LISTENERS = []  # called with an account (None: every account) when its clock may have moved: autoscaling.py, eks.py
TICKING = threading.RLock()


class Store:
    """One account's Capacity Block offerings served, reservations and blocks in one region."""

    def __init__(self):
        self.offerings = {}  # offering id -> its facts, as served
        self.bought = {}  # offering id -> the reservation bought with it
        self.reservations = {}  # id -> record (insertion order: creation order)
        self.blocks = {}  # Capacity Block id -> record
        self.tokens = {}  # ClientToken -> (request fingerprint, reservation id)
        self.extension_offerings = {}  # extension offering id -> its facts, as served
        self.extensions = []  # the extensions bought, oldest first


def store(account, region):
    with LOCK:
        return STORES.setdefault((account, region), Store())


# --- the clock, visibility and the control endpoints --------------------------------------------

def real_now():
    return datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None, microsecond=0)


def now(account):
    """The account's clock, naive UTC."""
    with LOCK:
        frozen = CLOCKS.get(account, CLOCKS.get(None))
    return frozen or real_now()


def set_clock(account, payload):
    """POST /_forge/clock: {"now": ISO 8601} freezes the account's clock there, {"advance_seconds": n}
    moves it on (from real time if it was not set), {"now": null} gives it real time again. What
    follows the clock then catches up with it (`tick`)."""
    payload = payload or {}
    with LOCK:
        if "now" in payload:
            when = payload["now"]
            if when is None:
                CLOCKS.pop(account, None)
            else:
                CLOCKS[account] = parse_timestamp(when).astimezone(datetime.timezone.utc).replace(tzinfo=None)
        if payload.get("advance_seconds"):
            CLOCKS[account] = now(account) + datetime.timedelta(seconds=float(payload["advance_seconds"]))
        result = clock(account)
    tick(account)
    return result


def tick(account):
    """What follows the account's clock (None: every account's) catches up with it: each of
    CLOCK_LISTENERS is called with the account, one tick at a time. The clock is set, and
    Auto Scaling and EKS requests tick their account before they are answered (real time
    passes too)."""
    with TICKING:
        for listener in CLOCK_LISTENERS:
            listener(account)


def clock(account):
    with LOCK:
        return {"now": iso(now(account)), "frozen": account in CLOCKS or (None in CLOCKS)}


def set_capacity(account, payload):
    """POST /_forge/capacity: {"visible_after_seconds": s} (real seconds) for the account."""
    with LOCK:
        if "visible_after_seconds" in (payload or {}):
            VISIBLE_AFTER[account] = float(payload["visible_after_seconds"] or 0)
        return {"visible_after_seconds": VISIBLE_AFTER.get(account, 0.0)}


def purchases(account):
    """GET /_forge/capacity: the blocks and the extensions an account (every account without
    one) bought, in every region, each oldest first, and the fees paid (total_fee: both)."""
    with LOCK:
        bought, extensions = [], []
        for (owner, region), s in STORES.items():
            if account not in (None, owner):
                continue
            for r in s.reservations.values():
                if r["ReservationType"] != "capacity-block":
                    continue
                bought.append({"account": owner, "region": region, "CapacityReservationId": r["CapacityReservationId"],
                               "CapacityBlockOfferingId": r["_offering"], "CapacityBlockId": r.get("CapacityBlockId"),
                               "InstanceType": r["InstanceType"], "InstanceCount": r["TotalInstanceCount"],
                               "AvailabilityZone": r["AvailabilityZone"], "StartDate": iso(r["StartDate"]), "EndDate": iso(r["EndDate"]),
                               "UpfrontFee": r["_fee"], "CurrencyCode": "USD", "visible": visible(r), "_created": r["_created"]})
            for e in s.extensions:
                extensions.append({"account": owner, "region": region, "CapacityReservationId": e["CapacityReservationId"],
                                   "CapacityBlockExtensionOfferingId": e["CapacityBlockExtensionOfferingId"],
                                   "CapacityBlockExtensionDurationHours": e["CapacityBlockExtensionDurationHours"],
                                   "CapacityBlockExtensionStartDate": iso(e["CapacityBlockExtensionStartDate"]),
                                   "CapacityBlockExtensionEndDate": iso(e["CapacityBlockExtensionEndDate"]),
                                   "UpfrontFee": e["UpfrontFee"], "CurrencyCode": e["CurrencyCode"], "_created": e["_created"]})
        bought.sort(key=lambda b: b.pop("_created"))
        extensions.sort(key=lambda e: e.pop("_created"))
        total = sum((Decimal(p["UpfrontFee"]) for p in bought + extensions), Decimal(0))
        return {"purchases": bought, "extensions": extensions, "total_fee": str(total.quantize(Decimal("0.01"))),
                "visible_after_seconds": VISIBLE_AFTER.get(account, 0.0)}


def visible(record):
    return time.monotonic() >= record["_visible_at"]


def iso(when):
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


# --- helpers ------------------------------------------------------------------------------------

def digest(*parts):
    return hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).hexdigest()


def unit(*parts):
    """A number in [0, 1) fixed by `parts`."""
    return int(digest(*parts)[:16], 16) / 2**64


def new_id(prefix):
    return f"{prefix}-0" + "%016x" % random.getrandbits(64)


def naive(when):
    if when is None:
        return None
    if isinstance(when, str):
        when = parse_timestamp(when)
    if when.tzinfo is not None:
        when = when.astimezone(datetime.timezone.utc).replace(tzinfo=None)
    return when


def invalid(message):
    return EC2ClientError("InvalidParameterValue", message)


def zones(region, instance_type):
    """The region's zones moto offers the type in, by name, with their ids."""
    offered = {o["Location"] for o in moto_types.INSTANCE_TYPE_OFFERINGS["availability-zone"].get(region, []) if o["InstanceType"] == instance_type}
    return [(z.name, z.zone_id) for z in RegionsAndZonesBackend.zones.get(region, []) if z.name in offered]


def zone_id(region, zone):
    return next((z.zone_id for z in RegionsAndZonesBackend.zones.get(region, []) if z.name == zone), None)


def tags_of(backend, resource_id):
    return [{"Key": k, "Value": v} for k, v in backend.tags.get(resource_id, {}).items()]


def page(items, max_results, token, limit=1000):
    """One page of `items` and the token of the next (None: the last page)."""
    start = 0
    if token:
        try:
            start = int(json.loads(base64.urlsafe_b64decode(token.encode()).decode())["offset"])
        except (ValueError, KeyError, TypeError):
            raise EC2ClientError("InvalidPaginationToken", f"The pagination token '{token}' is not valid.")
    size = int(max_results) if max_results else limit
    end = start + size
    following = base64.urlsafe_b64encode(json.dumps({"offset": end}).encode()).decode() if end < len(items) else None
    return items[start:end], following


def matches_text(wanted, value):
    return value is not None and any(re.match(simple_aws_filter_to_re(w), str(value)) for w in wanted)


def matches_date(wanted, value):
    if value is None:
        return False
    for w in wanted:
        try:
            if naive(w) == value:
                return True
        except (ValueError, TypeError):
            raise invalid(f"The filter value '{w}' is not a valid date.")
    return False


def filtered(items, filters, fields, backend, id_key):
    """`items` (their answers) that every filter matches; `fields` maps a filter's name to its
    field (a date field's name in a tuple)."""
    for name in filters:
        if not (name.startswith("tag:") or name == "tag-key" or name in fields):
            raise invalid(f"The filter '{name}' is invalid")

    def keep(item):
        tags = backend.tags.get(item[id_key], {})
        for name, wanted in filters.items():
            if name.startswith("tag:"):
                if not matches_text(wanted, tags.get(name[4:])):
                    return False
            elif name == "tag-key":
                if not any(matches_text(wanted, k) for k in tags):
                    return False
            elif isinstance(fields[name], tuple):
                if not matches_date(wanted, item.get(fields[name][0])):
                    return False
            elif not matches_text(wanted, item.get(fields[name])):
                return False
        return True

    return [i for i in items if keep(i)]


# --- offerings ----------------------------------------------------------------------------------

def check_duration(hours, parameter="CapacityDurationHours"):
    ok = (24 <= hours <= 14 * 24 and hours % 24 == 0) or (14 * 24 < hours <= MAX_BLOCK_HOURS and hours % (7 * 24) == 0)
    if not ok:
        raise invalid(f"The value '{hours}' for parameter {parameter} is invalid. Specify a duration in 1-day increments (24 hours) "
                      f"up to 14 days, or in 7-day increments (168 hours) up to 182 days.")


def first_block_start(after):
    """The first 11:30 UTC at or after `after`."""
    start = datetime.datetime.combine(after.date(), BLOCK_TIME)
    return start if start >= after else start + DAY


def availability(instances, hours):
    """How likely a (zone, start day) has a block of `instances` for `hours`."""
    likely = 0.55 - 0.06 * (instances.bit_length() - 1)
    return max(0.1, likely * (1 - 0.4 * hours / (182 * 24)))


def fee(region, zone, instance_type, start, instances, hours):
    factor = Decimal(0.9 + 0.2 * unit("price", region, zone, instance_type, start.date().isoformat()))
    return str((RATES[instance_type] * instances * hours * factor).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP))


def wanted_kinds(instance_type, preferences, ultraserver_type, instance_count, ultraserver_count):
    """The kinds searched: [(instance type, UltraServer type or None, UltraServer count or None,
    instances)]."""
    if ultraserver_type:
        if instance_count is not None:
            raise EC2ClientError("InvalidParameterCombination", "InstanceCount cannot be specified with UltraserverType; specify UltraserverCount.")
        servers = 1 if ultraserver_count is None else int(ultraserver_count)
        if ultraserver_type not in ULTRASERVERS:
            return []
        member, per_server = ULTRASERVERS[ultraserver_type]
        most = MAX_INSTANCES // per_server
        if not 1 <= servers <= most:
            raise invalid(f"The value '{servers}' for parameter UltraserverCount is invalid. Specify from 1 to {most} UltraServers of type {ultraserver_type}.")
        if (instance_type and instance_type != member) or any(p != member for p in preferences):
            return []
        return [(member, ultraserver_type, servers, servers * per_server)]
    if ultraserver_count is not None:
        raise EC2ClientError("InvalidParameterCombination", "UltraserverCount can be specified only with UltraserverType.")
    if instance_type and preferences:
        raise EC2ClientError("InvalidParameterCombination", "Specify either InstanceType or InstanceTypePreferences, not both.")
    types = [instance_type] if instance_type else list(dict.fromkeys(preferences))
    if not types:
        raise EC2ClientError("MissingParameter", "The request must contain the parameter InstanceType or InstanceTypePreferences.")
    count = 1 if instance_count is None else int(instance_count)
    if not 1 <= count <= MAX_INSTANCES:
        raise invalid(f"The value '{count}' for parameter InstanceCount is invalid. A Capacity Block can have from 1 to {MAX_INSTANCES} instances.")
    return [(t, None, None, count) for t in types if t in CAPACITY_BLOCK_TYPES]


def offerings(account, region, kinds, hours, start_range, end_range):
    """The offerings a search finds (at most MAX_OFFERINGS), remembered for PurchaseCapacityBlock."""
    current = now(account)
    start = first_block_start(current + DAY + datetime.timedelta(seconds=1))
    if start_range is not None:
        start = max(start, first_block_start(start_range))
    latest = current + datetime.timedelta(weeks=SEARCH_WEEKS)
    length = datetime.timedelta(hours=hours)
    s = store(account, region)
    found = []
    with LOCK:
        while start <= latest and len(found) < MAX_OFFERINGS:
            if end_range is not None and start + length > end_range:
                break
            day = []
            for instance_type, ultraserver, servers, instances in kinds:
                for zone, _ in zones(region, instance_type):
                    key = (account, region, instance_type, ultraserver, instances, hours, zone, start.isoformat())
                    if unit("available", *key) >= availability(instances, hours):
                        continue
                    offering_id = "cb-0" + digest("offering", *key)[:16]
                    if offering_id in s.bought:
                        continue
                    offering = {
                        "CapacityBlockOfferingId": offering_id, "InstanceType": instance_type, "AvailabilityZone": zone,
                        "InstanceCount": instances, "StartDate": start, "EndDate": start + length,
                        "CapacityBlockDurationHours": hours, "CapacityBlockDurationMinutes": 0,
                        "UpfrontFee": fee(region, zone, instance_type, start, instances, hours), "CurrencyCode": "USD", "Tenancy": "default",
                    }
                    if ultraserver:
                        offering.update(UltraserverType=ultraserver, UltraserverCount=servers)
                    day.append(offering)
            day.sort(key=lambda o: (o["AvailabilityZone"], o["InstanceType"], o.get("UltraserverType") or ""))
            found.extend(day)
            start += DAY
        found = found[:MAX_OFFERINGS]
        for offering in found:
            s.offerings[offering["CapacityBlockOfferingId"]] = offering
    return found


def describe_capacity_block_offerings(self):
    hours = int(self._get_param("CapacityDurationHours"))
    check_duration(hours)
    preferences = [p.get("InstanceType") for p in self._get_param("InstanceTypePreferences", []) or [] if p.get("InstanceType")]
    kinds = wanted_kinds(self._get_param("InstanceType"), preferences, self._get_param("UltraserverType"),
                         self._get_param("InstanceCount"), self._get_param("UltraserverCount"))
    self.error_on_dryrun()
    found = offerings(self.current_account, self.region, kinds, hours, naive(self._get_param("StartDateRange")), naive(self._get_param("EndDateRange")))
    shown, token = page(found, self._get_param("MaxResults"), self._get_param("NextToken"))
    result = {"CapacityBlockOfferings": shown}
    if token:
        result["NextToken"] = token
    return ActionResult(result)


# --- reservations -------------------------------------------------------------------------------

def state_of(record, account):
    if record.get("_cancelled"):
        return "cancelled"
    current = now(account)
    if record["StartDate"] and current < record["StartDate"]:
        return "scheduled"
    if record["EndDateType"] == "limited" and record["EndDate"] and current >= record["EndDate"]:
        return "expired"
    return "active"


def answer(record, backend):
    """The reservation as EC2 describes it."""
    out = {k: v for k, v in record.items() if not k.startswith("_") and v is not None}
    out["State"] = state_of(record, record["OwnerId"])
    out["Tags"] = tags_of(backend, record["CapacityReservationId"])
    return out


def block_answer(block, backend):
    out = {k: v for k, v in block.items() if not k.startswith("_") and v is not None}
    state = state_of({"StartDate": block["StartDate"], "EndDate": block["EndDate"], "EndDateType": "limited"}, block["_owner"])
    out["State"] = state
    out["Tags"] = tags_of(backend, block["CapacityBlockId"])
    return out


def seen_reservation(s, reservation_id):
    record = s.reservations.get(reservation_id)
    if record is None or not visible(record):
        raise EC2ClientError("InvalidCapacityReservationId.NotFound", f"The capacity reservation ID '{reservation_id}' does not exist")
    return record


def tag_specs(self, allowed):
    """{resource type: {key: value}} of the request's TagSpecifications, each type in `allowed`."""
    found = {}
    for spec in self._get_param("TagSpecifications", []) or []:
        kind = spec.get("ResourceType")
        if kind not in allowed:
            raise invalid(f"'{kind}' is not a valid taggable resource type for this operation.")
        for tag in spec.get("Tags", []) or []:
            if tag.get("Key", "").lower().startswith("aws:"):
                raise invalid("Tag keys starting with 'aws:' are reserved for internal use")
            found.setdefault(kind, {})[tag["Key"]] = tag.get("Value", "")
    return found


def new_record(account, region, instance_type, platform, zone, count, start, end, end_type, match, reservation_type, **more):
    reservation_id = new_id("cr")
    record = {
        "CapacityReservationId": reservation_id, "OwnerId": account,
        "CapacityReservationArn": f"arn:aws:ec2:{region}:{account}:capacity-reservation/{reservation_id}",
        "AvailabilityZoneId": zone_id(region, zone), "InstanceType": instance_type, "InstancePlatform": platform,
        "AvailabilityZone": zone, "Tenancy": more.pop("Tenancy", "default"), "TotalInstanceCount": count, "AvailableInstanceCount": count,
        "EbsOptimized": more.pop("EbsOptimized", False), "EphemeralStorage": more.pop("EphemeralStorage", False),
        "StartDate": start, "EndDate": end, "EndDateType": end_type, "InstanceMatchCriteria": match,
        "CreateDate": now(account), "CapacityAllocations": [], "ReservationType": reservation_type, "DeliveryPreference": "fixed",
        "_created": time.monotonic(), "_visible_at": time.monotonic() + VISIBLE_AFTER.get(account, 0.0),
    }
    record.update(more)
    return record


def purchase_capacity_block(self):
    offering_id = self._get_param("CapacityBlockOfferingId")
    platform = self._get_param("InstancePlatform")
    tags = tag_specs(self, ("capacity-reservation", "capacity-block"))
    account, region = self.current_account, self.region
    if not OFFERING_ID.fullmatch(offering_id or ""):
        raise EC2ClientError("InvalidCapacityBlockOfferingIdMalformed", f"The Capacity Block offering ID '{offering_id}' is malformed.")
    s = store(account, region)
    with LOCK:
        offering = s.offerings.get(offering_id)
        if offering is None:
            raise EC2ClientError("InvalidCapacityBlockOfferingIdNotFound", f"The Capacity Block offering ID '{offering_id}' cannot be found for this account.")
        if offering_id in s.bought or offering["StartDate"] <= now(account):
            raise EC2ClientError("InvalidCapacityBlockOfferingIdExpired", f"The Capacity Block offering ID '{offering_id}' is no longer available.")
        self.error_on_dryrun()
        ultraserver = offering.get("UltraserverType")
        record = new_record(account, region, offering["InstanceType"], platform, offering["AvailabilityZone"], offering["InstanceCount"],
                            offering["StartDate"], offering["EndDate"], "limited", "targeted", "capacity-block", EbsOptimized=True,
                            _offering=offering_id, _fee=offering["UpfrontFee"])
        block = None
        if ultraserver:
            block_id = new_id("cb")
            record["CapacityBlockId"] = block_id
            block = {"CapacityBlockId": block_id, "UltraserverType": ultraserver, "AvailabilityZone": record["AvailabilityZone"],
                     "AvailabilityZoneId": record["AvailabilityZoneId"], "CapacityReservationIds": [record["CapacityReservationId"]],
                     "StartDate": record["StartDate"], "EndDate": record["EndDate"], "CreateDate": record["CreateDate"],
                     "_owner": account, "_created": record["_created"], "_visible_at": record["_visible_at"]}
            s.blocks[block_id] = block
        s.reservations[record["CapacityReservationId"]] = record
        s.bought[offering_id] = record["CapacityReservationId"]
        if tags.get("capacity-reservation"):
            self.ec2_backend.create_tags([record["CapacityReservationId"]], tags["capacity-reservation"])
        if block is not None and tags.get("capacity-block"):
            self.ec2_backend.create_tags([block["CapacityBlockId"]], tags["capacity-block"])
        result = {"CapacityReservation": answer(record, self.ec2_backend)}
        if block is not None:
            result["CapacityBlocks"] = [block_answer(block, self.ec2_backend)]
    return ActionResult(result)


RESERVATION_FILTERS = {
    "instance-type": "InstanceType", "owner-id": "OwnerId", "instance-platform": "InstancePlatform", "availability-zone": "AvailabilityZone",
    "tenancy": "Tenancy", "outpost-arn": "OutpostArn", "state": "State", "start-date": ("StartDate",), "end-date": ("EndDate",),
    "end-date-type": "EndDateType", "instance-match-criteria": "InstanceMatchCriteria", "placement-group-arn": "PlacementGroupArn",
}


def describe_capacity_reservations(self):
    ids = self._get_param("CapacityReservationIds", []) or []
    filters = self._filters_from_querystring()
    self.error_on_dryrun()
    s = store(self.current_account, self.region)
    with LOCK:
        if ids:
            records = [seen_reservation(s, i) for i in dict.fromkeys(ids)]
        else:
            records = [r for r in s.reservations.values() if visible(r)]
        found = filtered([answer(r, self.ec2_backend) for r in records], filters, RESERVATION_FILTERS, self.ec2_backend, "CapacityReservationId")
    shown, token = page(found, self._get_param("MaxResults"), self._get_param("NextToken"))
    result = {"CapacityReservations": shown}
    if token:
        result["NextToken"] = token
    return ActionResult(result)


BLOCK_FILTERS = {"capacity-block-id": "CapacityBlockId", "ultraserver-type": "UltraserverType", "availability-zone": "AvailabilityZone",
                 "state": "State", "start-date": ("StartDate",), "end-date": ("EndDate",), "create-date": ("CreateDate",)}


def describe_capacity_blocks(self):
    ids = self._get_param("CapacityBlockIds", []) or []
    filters = self._filters_from_querystring()
    self.error_on_dryrun()
    s = store(self.current_account, self.region)
    with LOCK:
        blocks = [b for b in s.blocks.values() if visible(b)]
        if ids:
            missing = [i for i in ids if i not in {b["CapacityBlockId"] for b in blocks}]
            if missing:
                raise EC2ClientError("InvalidCapacityBlockId.NotFound", f"The Capacity Block ID '{missing[0]}' does not exist")
            blocks = [b for b in blocks if b["CapacityBlockId"] in ids]
        found = filtered([block_answer(b, self.ec2_backend) for b in blocks], filters, BLOCK_FILTERS, self.ec2_backend, "CapacityBlockId")
    shown, token = page(found, self._get_param("MaxResults"), self._get_param("NextToken"))
    result = {"CapacityBlocks": shown}
    if token:
        result["NextToken"] = token
    return ActionResult(result)


# --- Capacity Block extensions ------------------------------------------------------------------

def a_block(record):
    if record["ReservationType"] != "capacity-block":
        raise EC2ClientError("UnsupportedOperation", f"The Capacity Reservation '{record['CapacityReservationId']}' is not a Capacity Block. "
                             f"Only Capacity Blocks can be extended.")


def extendable(record, account, hours):
    """The Capacity Block `record` can take an extension of `hours` now: a Capacity Block,
    `scheduled` or `active`, that the extension leaves at most 182 days long."""
    a_block(record)
    state = state_of(record, account)
    if state not in ("scheduled", "active"):
        raise EC2ClientError("IncorrectState", f"The Capacity Block '{record['CapacityReservationId']}' is in the '{state}' state and cannot be "
                             f"extended. Only a scheduled or active Capacity Block can be extended.")
    if (record["EndDate"] - record["StartDate"]) + datetime.timedelta(hours=hours) > datetime.timedelta(hours=MAX_BLOCK_HOURS):
        raise invalid(f"The value '{hours}' for parameter CapacityBlockExtensionDurationHours is invalid. A Capacity Block with its extensions "
                      f"can last at most 182 days.")


def in_window(record, account):
    """Whether the block's end is from 1 hour to 56 days away by the account's clock."""
    left = record["EndDate"] - now(account)
    return EXTEND_WINDOW[0] <= left <= EXTEND_WINDOW[1]


def extension_offering(account, region, record, hours):
    """The offering that extends the block by `hours` from its current end, remembered for
    PurchaseCapacityBlockExtension; its id is a digest of the account, region, reservation,
    end and duration."""
    start = record["EndDate"]
    key = (account, region, record["CapacityReservationId"], iso(start), hours)
    return {
        "CapacityBlockExtensionOfferingId": "cbe-0" + digest("extension", *key)[:16], "InstanceType": record["InstanceType"],
        "InstanceCount": record["TotalInstanceCount"], "AvailabilityZone": record["AvailabilityZone"],
        "AvailabilityZoneId": record["AvailabilityZoneId"], "StartDate": record["StartDate"], "CapacityBlockExtensionStartDate": start,
        "CapacityBlockExtensionEndDate": start + datetime.timedelta(hours=hours), "CapacityBlockExtensionDurationHours": hours,
        "UpfrontFee": fee(region, record["AvailabilityZone"], record["InstanceType"], start, record["TotalInstanceCount"], hours),
        "CurrencyCode": "USD", "Tenancy": record["Tenancy"], "_reservation": record["CapacityReservationId"],
    }


def public(item):
    return {k: v for k, v in item.items() if not k.startswith("_")}


def describe_capacity_block_extension_offerings(self):
    hours = int(self._get_param("CapacityBlockExtensionDurationHours"))
    check_duration(hours, "CapacityBlockExtensionDurationHours")
    account, region = self.current_account, self.region
    s = store(account, region)
    with LOCK:
        record = seen_reservation(s, self._get_param("CapacityReservationId"))
        extendable(record, account, hours)
        self.error_on_dryrun()
        found = []
        if in_window(record, account):
            offering = extension_offering(account, region, record, hours)
            s.extension_offerings[offering["CapacityBlockExtensionOfferingId"]] = offering
            found.append(public(offering))
    shown, token = page(found, self._get_param("MaxResults"), self._get_param("NextToken"))
    result = {"CapacityBlockExtensionOfferings": shown}
    if token:
        result["NextToken"] = token
    return ActionResult(result)


def purchase_capacity_block_extension(self):
    offering_id = self._get_param("CapacityBlockExtensionOfferingId")
    reservation_id = self._get_param("CapacityReservationId")
    account, region = self.current_account, self.region
    if not EXTENSION_OFFERING_ID.fullmatch(offering_id or ""):
        raise EC2ClientError("InvalidCapacityBlockOfferingIdMalformed", f"The Capacity Block extension offering ID '{offering_id}' is malformed.")
    s = store(account, region)
    with LOCK:
        record = seen_reservation(s, reservation_id)
        a_block(record)
        offering = s.extension_offerings.get(offering_id)
        if offering is None or offering["_reservation"] != reservation_id:
            raise EC2ClientError("InvalidCapacityBlockOfferingIdNotFound", f"The Capacity Block extension offering ID '{offering_id}' cannot be found "
                                 f"for the Capacity Reservation '{reservation_id}'.")
        bought = any(e["CapacityBlockExtensionOfferingId"] == offering_id for e in s.extensions)
        if (bought or offering["CapacityBlockExtensionStartDate"] != record["EndDate"] or state_of(record, account) not in ("scheduled", "active")
                or not in_window(record, account)):
            raise EC2ClientError("InvalidCapacityBlockOfferingIdExpired", f"The Capacity Block extension offering ID '{offering_id}' is no longer available.")
        self.error_on_dryrun()
        extension = {
            "CapacityReservationId": reservation_id, "InstanceType": offering["InstanceType"], "InstanceCount": offering["InstanceCount"],
            "AvailabilityZone": offering["AvailabilityZone"], "AvailabilityZoneId": offering["AvailabilityZoneId"],
            "CapacityBlockExtensionOfferingId": offering_id, "CapacityBlockExtensionDurationHours": offering["CapacityBlockExtensionDurationHours"],
            "CapacityBlockExtensionStatus": "payment-succeeded", "CapacityBlockExtensionPurchaseDate": now(account),
            "CapacityBlockExtensionStartDate": offering["CapacityBlockExtensionStartDate"],
            "CapacityBlockExtensionEndDate": offering["CapacityBlockExtensionEndDate"], "UpfrontFee": offering["UpfrontFee"], "CurrencyCode": "USD",
            "_created": time.monotonic(),
        }
        s.extensions.append(extension)
        record["EndDate"] = extension["CapacityBlockExtensionEndDate"]
        block = s.blocks.get(record.get("CapacityBlockId"))
        if block is not None:
            block["EndDate"] = record["EndDate"]
        return ActionResult({"CapacityBlockExtensions": [public(extension)]})


EXTENSION_FILTERS = {
    "availability-zone": "AvailabilityZone", "availability-zone-id": "AvailabilityZoneId",
    "capacity-block-extension-offering-id": "CapacityBlockExtensionOfferingId", "capacity-block-extension-status": "CapacityBlockExtensionStatus",
    "capacity-reservation-id": "CapacityReservationId", "instance-type": "InstanceType",
}


def describe_capacity_block_extension_history(self):
    ids = self._get_param("CapacityReservationIds", []) or []
    filters = self._filters_from_querystring()
    for name in filters:
        if name not in EXTENSION_FILTERS:
            raise invalid(f"The filter '{name}' is invalid")
    s = store(self.current_account, self.region)
    with LOCK:
        wanted = {seen_reservation(s, i)["CapacityReservationId"] for i in ids}
        self.error_on_dryrun()
        extensions = [public(e) for e in s.extensions if not ids or e["CapacityReservationId"] in wanted]
        found = filtered(extensions, filters, EXTENSION_FILTERS, self.ec2_backend, "CapacityReservationId")
    shown, token = page(found, self._get_param("MaxResults"), self._get_param("NextToken"))
    result = {"CapacityBlockExtensions": shown}
    if token:
        result["NextToken"] = token
    return ActionResult(result)


# --- On-Demand Capacity Reservations ----------------------------------------------------------

def check_end(end_type, end, account):
    if end_type == "unlimited" and end is not None:
        raise EC2ClientError("InvalidParameterCombination", "EndDate cannot be specified when EndDateType is unlimited.")
    if end_type == "limited" and end is None:
        raise EC2ClientError("InvalidParameterCombination", "EndDate is required when EndDateType is limited.")
    if end is not None and end <= now(account):
        raise invalid(f"The EndDate {iso(end)} is in the past. Specify an EndDate in the future.")


def create_capacity_reservation(self):
    account, region = self.current_account, self.region
    instance_type = self._get_param("InstanceType")
    platform = self._get_param("InstancePlatform")
    count = int(self._get_param("InstanceCount"))
    zone, wanted_zone_id = self._get_param("AvailabilityZone"), self._get_param("AvailabilityZoneId")
    end, start = naive(self._get_param("EndDate")), naive(self._get_param("StartDate"))
    end_type = self._get_param("EndDateType") or ("limited" if end is not None else "unlimited")
    match = self._get_param("InstanceMatchCriteria") or "open"
    token = self._get_param("ClientToken")
    tags = tag_specs(self, ("capacity-reservation",)).get("capacity-reservation", {})
    known = {z.name: z.zone_id for z in RegionsAndZonesBackend.zones.get(region, [])}
    if zone and wanted_zone_id:
        raise EC2ClientError("InvalidParameterCombination", "Specify either AvailabilityZone or AvailabilityZoneId, not both.")
    if wanted_zone_id:
        zone = next((name for name, zid in known.items() if zid == wanted_zone_id), None)
        if zone is None:
            raise invalid(f"Invalid availability zone ID: [{wanted_zone_id}]")
    if not zone:
        raise EC2ClientError("MissingParameter", "The request must contain the parameter AvailabilityZone or AvailabilityZoneId")
    if zone not in known:
        raise invalid(f"Invalid availability zone: [{zone}]")
    if instance_type not in moto_types.INSTANCE_TYPES:
        raise invalid(f"The instance type '{instance_type}' is not valid.")
    if zone not in {z for z, _ in zones(region, instance_type)}:
        raise EC2ClientError("Unsupported", f"Your requested instance type ({instance_type}) is not supported in your requested Availability Zone ({zone}).")
    if not 1 <= count <= 1000:
        raise invalid(f"The value '{count}' for parameter InstanceCount is invalid. Specify from 1 to 1000 instances.")
    check_end(end_type, end, account)
    if start is not None and end is not None and end <= start:
        raise invalid("The EndDate must be later than the StartDate.")
    placement = self._get_param("PlacementGroupArn")
    if placement:
        from .ec2 import _placement_groups

        group = next((g for g in _placement_groups(self.ec2_backend).values() if g["GroupArn"] == placement), None)
        if group is None:
            raise EC2ClientError("InvalidPlacementGroup.Unknown", f"The Placement Group '{placement.rsplit('/', 1)[-1]}' is unknown.")
        if group["Strategy"] != "cluster":
            raise invalid("Capacity Reservations can be created only in cluster placement groups.")
    fingerprint = digest(instance_type, platform, count, zone, end, end_type, match, start, placement, sorted(tags.items()),
                         self._get_param("Tenancy"), self._get_param("EbsOptimized"), self._get_param("EphemeralStorage"))
    s = store(account, region)
    with LOCK:
        if token and token in s.tokens:
            earlier, reservation_id = s.tokens[token]
            if earlier != fingerprint:
                raise EC2ClientError("IdempotentParameterMismatch", "The client token you have provided is associated with a resource that is already "
                                     "created with different parameters.")
            self.error_on_dryrun()
            return ActionResult({"CapacityReservation": answer(s.reservations[reservation_id], self.ec2_backend)})
        self.error_on_dryrun()
        record = new_record(account, region, instance_type, platform, zone, count, start or now(account), end, end_type, match, "default",
                            Tenancy=self._get_param("Tenancy") or "default", EbsOptimized=bool(self._get_param("EbsOptimized")),
                            EphemeralStorage=bool(self._get_param("EphemeralStorage")), PlacementGroupArn=placement,
                            _fee=None, _offering=None)
        s.reservations[record["CapacityReservationId"]] = record
        if token:
            s.tokens[token] = (fingerprint, record["CapacityReservationId"])
        if tags:
            self.ec2_backend.create_tags([record["CapacityReservationId"]], tags)
        return ActionResult({"CapacityReservation": answer(record, self.ec2_backend)})


def changeable(record, account, verb):
    if record["ReservationType"] == "capacity-block":
        raise EC2ClientError("UnsupportedOperation", f"You can't {verb} a Capacity Block. The Capacity Reservation "
                             f"'{record['CapacityReservationId']}' is a Capacity Block.")
    state = state_of(record, account)
    if state in ("cancelled", "expired"):
        raise EC2ClientError("IncorrectState", f"The Capacity Reservation '{record['CapacityReservationId']}' is in the '{state}' state and cannot be "
                             f"{'cancelled' if verb == 'cancel' else 'modified'}.")


def modify_capacity_reservation(self):
    account = self.current_account
    reservation_id = self._get_param("CapacityReservationId")
    count = self._get_param("InstanceCount")
    end, end_type = naive(self._get_param("EndDate")), self._get_param("EndDateType")
    match = self._get_param("InstanceMatchCriteria")
    s = store(account, self.region)
    with LOCK:
        record = seen_reservation(s, reservation_id)
        changeable(record, account, "modify")
        if count is not None and not 1 <= int(count) <= 1000:
            raise invalid(f"The value '{count}' for parameter InstanceCount is invalid. Specify from 1 to 1000 instances.")
        if end is not None or end_type is not None:
            end_type = end_type or "limited"
            check_end(end_type, end, account)
        self.error_on_dryrun()
        if count is not None:
            used = record["TotalInstanceCount"] - record["AvailableInstanceCount"]
            record["TotalInstanceCount"], record["AvailableInstanceCount"] = int(count), max(0, int(count) - used)
        if end_type is not None:
            record["EndDateType"], record["EndDate"] = end_type, end
        if match is not None:
            record["InstanceMatchCriteria"] = match
    return ActionResult({"Return": True})


def cancel_capacity_reservation(self):
    account = self.current_account
    reservation_id = self._get_param("CapacityReservationId")
    s = store(account, self.region)
    with LOCK:
        record = seen_reservation(s, reservation_id)
        changeable(record, account, "cancel")
        self.error_on_dryrun()
        record["_cancelled"] = True
    return ActionResult({"Return": True})


EC2Response.describe_capacity_block_offerings = describe_capacity_block_offerings
EC2Response.purchase_capacity_block = purchase_capacity_block
EC2Response.describe_capacity_reservations = describe_capacity_reservations
EC2Response.describe_capacity_blocks = describe_capacity_blocks
EC2Response.create_capacity_reservation = create_capacity_reservation
EC2Response.modify_capacity_reservation = modify_capacity_reservation
EC2Response.cancel_capacity_reservation = cancel_capacity_reservation
EC2Response.describe_capacity_block_extension_offerings = describe_capacity_block_extension_offerings
EC2Response.purchase_capacity_block_extension = purchase_capacity_block_extension
EC2Response.describe_capacity_block_extension_history = describe_capacity_block_extension_history


# --- reservations and blocks are tagged by id -------------------------------------------------

EC2_RESOURCE_TO_PREFIX.setdefault("capacity-reservation", "cr")
EC2_PREFIX_TO_RESOURCE.setdefault("cr", "capacity-reservation")
EC2_RESOURCE_TO_PREFIX.setdefault("capacity-block", "cb")
EC2_PREFIX_TO_RESOURCE.setdefault("cb", "capacity-block")

_earlier_do_resources_exist = EC2Backend.do_resources_exist


def do_resources_exist(self, resource_ids):
    """The account's seen reservations and Capacity Blocks exist; other ids as before."""
    s = store(self.account_id, self.region_name)
    others = []
    with LOCK:
        for resource_id in resource_ids:
            prefix = get_prefix(resource_id)
            if prefix == "cr":
                seen_reservation(s, resource_id)
            elif prefix == "cb":
                block = s.blocks.get(resource_id)
                if block is None or not visible(block):
                    raise EC2ClientError("InvalidCapacityBlockId.NotFound", f"The Capacity Block ID '{resource_id}' does not exist")
            else:
                others.append(resource_id)
    return _earlier_do_resources_exist(self, others)


EC2Backend.do_resources_exist = do_resources_exist
