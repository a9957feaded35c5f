"""Google Compute Engine REST API v1 (/compute/v1/...), the parts forge uses, on gcp.py:
  * networks: insert, get, list, patch (routingConfig and mtu, as Compute allows), delete; custom mode only;
    a network made with a `networkProfile` (a full or partial URL with its project, stored as the
    full URL) is restricted to the profile's zone: its MTU defaults to 8896 and must be in the
    profile's range, its subnetworks must be in the zone's region and of the profile's stack
    types, it takes no VPC firewall rules if the profile blocks them, and its profile never
    changes;
  * networkProfiles (global, read-only, Google's and the same in every project): get, list. For
    each zone of PROFILE_ZONES the RDMA profiles `{zone}-vpc-roce` (RoCE, MRDMA NICs: A3 Ultra, A4,
    A4X), `{zone}-vpc-roce-metal` (RoCE for bare metal) and `{zone}-vpc-falcon` (Falcon, IRDMA
    NICs: H4D), with their features;
  * subnetworks (regional): insert, get, list, patch (with the current fingerprint:
    secondaryIpRanges and the other patchable fields), setPrivateIpGoogleAccess, delete;
  * firewalls: insert, get, list, patch, update, delete;
  * routers (regional) with their Cloud NATs: insert, get, list, patch, update, delete;
  * resourcePolicies (regional): insert, get, list, delete; workload policies (HIGH_THROUGHPUT
    with its accelerator topology, HIGH_AVAILABILITY) checked, the other kinds kept as given;
    exactly one kind per policy; READY once inserted;
  * instanceGroupManagers (zonal): get, of the groups other APIs run (a GKE node pool's, per
    zone: `instance_groups`), with their targetSize;
  * futureReservations (zonal; calendar mode, by the project's clock: insert, get, list, cancel,
    delete) and the reservations they deliver (zonal, read-only: get, list): gcp_reservations.py,
    whose docstring tells what of them is emulated; `settle` moves them on as time passes;
  * globalOperations, regionOperations and zoneOperations: get, which the client's poller calls,
    and list with filters (an insert still running: what a destroy of an interrupted create
    looks for); a regional operation names its region, a zonal one its zone;
  * list filters (compute_filter.py), pages, orderBy name;
  * checks: names, required fields, enums, references to resources that exist and are ready,
    CIDR ranges that do not overlap within a network, allowed xor denied, NAT subnetworks of the
    router's network and region; a delete of a network, subnetwork or resource policy still in use
    is accepted and its operation ends with RESOURCE_IN_USE_BY_ANOTHER_RESOURCE (a GKE cluster or
    node pool, or a Filestore instance, on it counts, as does a node pool placed by a resource
    policy: `dependents`); a change to a resource whose operation is under way is refused
    (resourceNotReady).
The other APIs name networks, subnetworks and resource policies as Compute does
(`compute_path`), and read a network's profile with `profile_of`; GKE tells Compute the nodes its
pools run on a reservation (`reservation_users`).
Error bodies carry code, message and errors[] but no `status`, as Compute's do.
"""

import base64
import collections
import copy
import hashlib
import ipaddress
import re
import secrets

from .compute_filter import compile_filter
from .gcp import GoogleApi, GoogleError, check_name, new_id, page, region_of, required, timestamp


LINK = "https://www.googleapis.com/compute/v1/"
PATH = re.compile(r"projects/(?P<project>[^/]+)/(?P<scope>global|regions/(?P<region>[^/]+)|zones/(?P<zone>[^/]+))/(?P<collection>[A-Za-z]+)(?:/(?P<name>[^/]+)(?:/(?P<verb>[A-Za-z]+))?)?")
HTTP_MESSAGES = {400: "BAD REQUEST", 403: "FORBIDDEN", 500: "INTERNAL SERVER ERROR"}
OUTPUT_ONLY = {"id", "kind", "selfLink", "selfLinkWithId", "creationTimestamp", "fingerprint", "gatewayAddress", "subnetworks", "state", "region",
               "status", "resourceStatus", "zone"}


def invalid(field, value, why):
    return GoogleError(400, f"Invalid value for field '{field}': '{value}'. {why}", "invalid")


def one_of(value, field, allowed, default=None):
    if value is None and default is not None:
        return default
    if value not in allowed:
        raise invalid(field, value, f"Must be one of {list(allowed)}.")
    return value


def integer(value, field, low, high, default):
    if value is None:
        return default
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise invalid(field, value, "Must be an integer.")
    if not low <= number <= high:
        raise invalid(field, value, f"Must be in the range [{low}, {high}].")
    return number


def merge_patch(target, patch):
    """RFC 7396 JSON merge patch: objects merge, null removes, anything else replaces."""
    result = dict(target)
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict) and isinstance(result.get(key), dict):
            result[key] = merge_patch(result[key], value)
        else:
            result[key] = value
    return result


def subnet_range(value, field):
    try:
        net = ipaddress.IPv4Network(value)
    except (TypeError, ValueError):
        raise invalid(field, value, "Invalid IPCidrRange: it must be an IPv4 network in CIDR notation with no host bits set.")
    if not 8 <= net.prefixlen <= 29:
        raise invalid(field, value, "The prefix length must be between /8 and /29.")
    return net


class Kind:
    """A collection: `check` validates and completes a resource, new or changed, `users` names
    what keeps it from being deleted (its delete's operation then fails), `deletable` refuses a
    delete at once, `show` adds what is computed on read, `records` are its resources in the
    call's scope (the store's; Google's own for NetworkProfiles). It is global, `regional` or
    `zonal`; `readonly` (get and list only) or else inserted and deleted; patched only if some
    fields are `patchable`, updated (PUT) only if `updatable`; its other methods are the POST
    `verbs` (`.../name/verb`), each handled by the kind's method of that name if it has one,
    else by Compute's. Its lists are of `list_kind` (by default its kind + "List")."""

    collection = singular = kind = list_kind = ""
    regional = zonal = updatable = readonly = False
    patchable = verbs = ()

    def check(self, call, res):
        raise NotImplementedError

    def deletable(self, call, path, res):
        """Raises the GoogleError a delete of `res` gets at once (by default none)."""

    def records(self, call):
        prefix = f"{call.scope}/{self.collection}/"
        return {p: r for p, r in call.store.items.items() if p.startswith(prefix)}

    def users(self, call, path):
        return []

    def show(self, call, res):
        return res


def everything(store, collection):
    """(path, resource) of a collection, the ones an insert under way will add included."""
    pending = [(p, op.resource) for p, op in store.pending.items() if op.operation_type == "insert"]
    return [(p, r) for p, r in list(store.items.items()) + pending if p.split("/")[-2] == collection]


def compute_path(project, value, collection, region=None):
    """The path in `project` ('global/networks/n', 'regions/r/subnetworks/s') of a network or
    subnetwork given by name (a subnetwork's in `region`), partial or full URL; None if the value
    is malformed or names another project."""
    match = re.fullmatch(r"(?:(?:https?://[^/]+/compute/(?:v1|beta)/)?projects/([^/]+)/((?:global|regions/[^/]+)/" + collection + r")/)?([a-z][-a-z0-9]*)", str(value or ""))
    if not match or match[1] not in (None, project):
        return None
    scope = match[2] or ("global/" + collection if region is None else f"regions/{region}/{collection}")
    return f"{scope}/{match[3]}"


def reference(call, value, collection, field):
    """The path in this project ('global/networks/n') of a resource given by URL or partial URL,
    which must exist with no insert or delete under way."""
    if not value:
        raise required(field)
    match = re.fullmatch(r"(?:(?:https?://[^/]+)?/?(?:compute/(?:v1|beta|alpha)/)?projects/([^/]+)/)?((?:global|regions/[^/]+)/" + collection + r"/[^/]+)", str(value))
    if not match:
        raise invalid(field, value, "The URL is malformed.")
    project, path = match.group(1) or call.project, match.group(2)
    full = f"projects/{project}/{path}"
    if project != call.project or (path not in call.store.items and path not in call.store.pending):
        raise GoogleError(404, f"The resource '{full}' was not found", "notFound")
    op = call.store.pending.get(path)
    if op is not None and op.operation_type in ("insert", "delete"):
        raise GoogleError(400, f"The resource '{full}' is not ready", "resourceNotReady")
    return path


# --- network profiles: Google's own, the same in every project ------------------------------

PROFILE_ZONES = {"us-central1": "abcf", "us-east4": "abc", "us-east5": "abc", "us-west1": "abc", "europe-west4": "abc", "asia-northeast1": "abc"}
RDMA_MTU = 8896
RDMA_FEATURES = {  # what a VPC network with an RDMA profile allows (NetworkProfileNetworkFeatures)
    "allowAutoModeSubnet": "AUTO_MODE_SUBNET_BLOCKED", "allowDefaultNicAttachment": "DEFAULT_NIC_ATTACHMENT_BLOCKED",
    "allowExternalIpAccess": "EXTERNAL_IP_ACCESS_BLOCKED", "allowMultiNicInSameNetwork": "MULTI_NIC_IN_SAME_NETWORK_ALLOWED",
    "allowSameNetworkUnicast": "SAME_NETWORK_UNICAST_ALLOWED", "allowMulticast": "MULTICAST_BLOCKED", "subnetworkStackTypes": ["IPV4_ONLY"],
}
ROCE_FIREWALLS = {"allowVpcFirewallRules": "VPC_FIREWALL_RULES_BLOCKED", "allowFirewallPolicy": "FIREWALL_POLICY_ALLOWED",
                  "firewallPolicyTypes": ["RDMA_ROCE_POLICY"]}
PROFILE_TYPES = {  # name suffix -> RDMA subtype, NIC type, MTU range, features besides RDMA_FEATURES
    "vpc-roce": ("ROCE", "MRDMA", (1300, RDMA_MTU), ROCE_FIREWALLS),
    "vpc-roce-metal": ("ROCE_METAL", "MRDMA", (1300, RDMA_MTU), ROCE_FIREWALLS),
    "vpc-falcon": ("FALCON", "IRDMA", (RDMA_MTU, RDMA_MTU), {}),
}
Profile = collections.namedtuple("Profile", "name zone subtype nic mtu features")
NETWORK_PROFILES = {f"{region}-{z}-{suffix}": Profile(f"{region}-{z}-{suffix}", f"{region}-{z}", subtype, nic, mtu, {**RDMA_FEATURES, "interfaceTypes": [nic], **own})
                    for region, zones in PROFILE_ZONES.items() for z in zones for suffix, (subtype, nic, mtu, own) in PROFILE_TYPES.items()}
PROFILE_URL = re.compile(r"(?:https?://[^/]+/compute/(?:v1|beta|alpha)/)?projects/(?P<project>[^/]+)/global/networkProfiles/(?P<name>[^/]+)")
PROFILES_MADE = timestamp(1727740800)  # 2024-10-01


def profile_of(network):
    """The Profile a network record was made with, None for a network without one (or none)."""
    return NETWORK_PROFILES.get(str((network or {}).get("networkProfile", "")).rsplit("/", 1)[-1])


def named_profile(value, field):
    """(full URL, Profile) of the profile a network names: a full or partial URL with its
    project, as Compute takes it."""
    match = PROFILE_URL.fullmatch(str(value))
    if not match:
        raise invalid(field, value, "The URL is malformed.")
    link = f"projects/{match['project']}/global/networkProfiles/{match['name']}"
    if match["name"] not in NETWORK_PROFILES:
        raise GoogleError(404, f"The resource '{link}' was not found", "notFound")
    return LINK + link, NETWORK_PROFILES[match["name"]]


class NetworkProfiles(Kind):
    collection, singular, kind = "networkProfiles", "network_profile", "compute#networkProfile"
    readonly = True

    def records(self, call):
        return {f"global/networkProfiles/{p.name}": self.render(call.project, p) for p in NETWORK_PROFILES.values()}

    @staticmethod
    def render(project, profile):
        return {"kind": "compute#networkProfile", "id": str(int(hashlib.sha256(profile.name.encode()).hexdigest()[:15], 16) | 1 << 62),
                "name": profile.name, "creationTimestamp": PROFILES_MADE, "selfLink": LINK + f"projects/{project}/global/networkProfiles/{profile.name}",
                "location": {"name": profile.zone, "scope": "ZONE"}, "profileType": {"networkType": "RDMA", "rdmaSubtype": profile.subtype},
                "features": copy.deepcopy(profile.features)}


class Networks(Kind):
    collection, singular, kind = "networks", "network", "compute#network"
    patchable = ("routingConfig", "mtu")

    def check(self, call, res):
        if res.get("autoCreateSubnetworks") is not False:
            raise invalid("resource.autoCreateSubnetworks", res.get("autoCreateSubnetworks"), "Only custom mode networks (autoCreateSubnetworks: false) are emulated.")
        if "IPv4Range" in res:
            raise invalid("resource.IPv4Range", res["IPv4Range"], "Legacy networks are not emulated.")
        profile = None
        if res.get("networkProfile"):
            res["networkProfile"], profile = named_profile(res["networkProfile"], "resource.networkProfile")
        else:
            res.pop("networkProfile", None)
        low, high = profile.mtu if profile else (1300, RDMA_MTU)
        res["mtu"] = integer(res.get("mtu"), "resource.mtu", low, high, RDMA_MTU if profile else 1460)
        routing = dict(res.get("routingConfig") or {})
        routing["routingMode"] = one_of(routing.get("routingMode"), "resource.routingConfig.routingMode", ("REGIONAL", "GLOBAL"), "REGIONAL")
        res["routingConfig"] = routing
        res.setdefault("networkFirewallPolicyEnforcementOrder", "AFTER_CLASSIC_FIREWALL")
        return res

    def users(self, call, path):
        link = LINK + f"projects/{call.project}/{path}"
        return [p for c in ("subnetworks", "routers", "firewalls") for p, r in sorted(everything(call.store, c)) if r.get("network") == link]

    def show(self, call, res):
        link = res["selfLink"]
        subnets = sorted(r["selfLink"] for p, r in call.store.items.items() if "/subnetworks/" in p and r["network"] == link)
        return dict(res, subnetworks=subnets) if subnets else res


class Subnetworks(Kind):
    collection, singular, kind = "subnetworks", "subnetwork", "compute#subnetwork"
    regional = True
    verbs = ("setPrivateIpGoogleAccess",)
    patchable = ("secondaryIpRanges", "logConfig", "enableFlowLogs", "role", "stackType", "privateIpv6GoogleAccess")

    def check(self, call, res):
        network = reference(call, res.get("network"), "networks", "resource.network")
        res["network"] = LINK + f"projects/{call.project}/{network}"
        profile, region = profile_of(call.store.items.get(network)), call.scope.split("/")[1]
        if profile and region_of(profile.zone) != region:
            raise invalid("resource.network", res["network"], f"The network is restricted to zone '{profile.zone}' by its network profile "
                          f"'{profile.name}': its subnetworks must be in region '{region_of(profile.zone)}', not '{region}'.")
        if profile and res.get("stackType", "IPV4_ONLY") not in profile.features["subnetworkStackTypes"]:
            raise invalid("resource.stackType", res["stackType"], f"The network's profile '{profile.name}' allows the stack types "
                          f"{profile.features['subnetworkStackTypes']} only.")
        if not res.get("ipCidrRange"):
            raise required("resource.ipCidrRange")
        ranges = [(subnet_range(res["ipCidrRange"], "resource.ipCidrRange"), res["ipCidrRange"])]
        names = set()
        for i, second in enumerate(res.get("secondaryIpRanges") or []):
            check_name(second.get("rangeName"), f"resource.secondaryIpRanges[{i}].rangeName")
            if second["rangeName"] in names:
                raise invalid(f"resource.secondaryIpRanges[{i}].rangeName", second["rangeName"], "Secondary range names must be unique.")
            names.add(second["rangeName"])
            if not second.get("ipCidrRange"):
                raise required(f"resource.secondaryIpRanges[{i}].ipCidrRange")
            ranges.append((subnet_range(second["ipCidrRange"], f"resource.secondaryIpRanges[{i}].ipCidrRange"), second["ipCidrRange"]))
        for i, (net, text) in enumerate(ranges):
            for other, other_text in ranges[:i]:
                if net.overlaps(other):
                    raise invalid("resource.secondaryIpRanges", text, f"Invalid IPCidrRange: {text} conflicts with {other_text} of the same subnetwork.")
        me = f"{call.scope}/subnetworks/{res['name']}"
        for path, other in everything(call.store, "subnetworks"):
            if path == me or other["network"] != res["network"]:
                continue
            theirs = [other["ipCidrRange"]] + [s["ipCidrRange"] for s in other.get("secondaryIpRanges") or []]
            for net, text in ranges:
                if any(net.overlaps(ipaddress.IPv4Network(t)) for t in theirs):
                    raise invalid("resource.ipCidrRange", text, f"Invalid IPCidrRange: {text} conflicts with existing subnetwork '{other['name']}' in region '{path.split('/')[1]}'.")
        res["gatewayAddress"] = str(ranges[0][0].network_address + 1)
        res["privateIpGoogleAccess"] = bool(res.get("privateIpGoogleAccess", False))
        res.setdefault("stackType", "IPV4_ONLY")
        res.setdefault("purpose", "PRIVATE")
        res.setdefault("privateIpv6GoogleAccess", "DISABLE_GOOGLE_ACCESS")
        if not res.get("secondaryIpRanges"):
            res.pop("secondaryIpRanges", None)
        res["fingerprint"] = base64.urlsafe_b64encode(secrets.token_bytes(8)).decode()
        return res

    def users(self, call, path):
        link = LINK + f"projects/{call.project}/{path}"
        return sorted(p for p, r in everything(call.store, "routers")
                      if any(s.get("name") == link for nat in r.get("nats") or [] for s in nat.get("subnetworks") or []))


PROTOCOLS = {"tcp", "udp", "icmp", "esp", "ah", "sctp", "ipip", "all"}


class Firewalls(Kind):
    collection, singular, kind = "firewalls", "firewall", "compute#firewall"
    updatable = True
    patchable = ("allowed", "denied", "description", "destinationRanges", "disabled", "logConfig", "priority",
                 "sourceRanges", "sourceServiceAccounts", "sourceTags", "targetServiceAccounts", "targetTags")

    def check(self, call, res):
        network = reference(call, res.get("network") or "global/networks/default", "networks", "resource.network")
        res["network"] = LINK + f"projects/{call.project}/{network}"
        profile = profile_of(call.store.items.get(network))
        if profile and profile.features.get("allowVpcFirewallRules") == "VPC_FIREWALL_RULES_BLOCKED":
            raise invalid("resource.network", res["network"], f"The network's profile '{profile.name}' does not allow VPC firewall rules "
                          f"(allowVpcFirewallRules: VPC_FIREWALL_RULES_BLOCKED): its firewall rules go in regional network firewall policies.")
        res["direction"] = one_of(res.get("direction"), "resource.direction", ("INGRESS", "EGRESS"), "INGRESS")
        res["priority"] = integer(res.get("priority"), "resource.priority", 0, 65535, 1000)
        rules = [k for k in ("allowed", "denied") if res.get(k)]
        if not rules:
            raise required("resource.allowed")
        if len(rules) == 2:
            raise invalid("resource.denied", "", "A firewall rule has either allowed or denied entries, not both.")
        for i, rule in enumerate(res[rules[0]]):
            protocol = str(rule.get("IPProtocol", "")).lower()
            if not protocol:
                raise required(f"resource.{rules[0]}[{i}].IPProtocol")
            if protocol not in PROTOCOLS and not (protocol.isdigit() and int(protocol) <= 255):
                raise invalid(f"resource.{rules[0]}[{i}].IPProtocol", protocol, "Unknown protocol.")
            for port in rule.get("ports") or []:
                if protocol not in ("tcp", "udp", "sctp", "6", "17", "132"):
                    raise invalid(f"resource.{rules[0]}[{i}].ports", port, "Ports can be given only for tcp, udp and sctp.")
                if not re.fullmatch(r"\d{1,5}(-\d{1,5})?", str(port)) or any(int(p) > 65535 for p in str(port).split("-")):
                    raise invalid(f"resource.{rules[0]}[{i}].ports", port, "Invalid port or port range.")
        for field in ("sourceRanges", "destinationRanges"):
            for value in res.get(field) or []:
                try:
                    ipaddress.ip_network(value, strict=False)
                except ValueError:
                    raise invalid(f"resource.{field}", value, "Invalid IP address or CIDR range.")
        if res["direction"] == "EGRESS":
            for field in ("sourceTags", "sourceServiceAccounts"):
                if res.get(field):
                    raise invalid(f"resource.{field}", ",".join(res[field]), "Egress rules cannot have sources of this kind.")
            res["destinationRanges"] = res.get("destinationRanges") or ["0.0.0.0/0"]
        elif not any(res.get(k) for k in ("sourceRanges", "sourceTags", "sourceServiceAccounts")):
            res["sourceRanges"] = ["0.0.0.0/0"]
        res["disabled"] = bool(res.get("disabled", False))
        res["logConfig"] = {"enable": bool((res.get("logConfig") or {}).get("enable", False))}
        return res


NAT_RANGES = ("ALL_SUBNETWORKS_ALL_IP_RANGES", "ALL_SUBNETWORKS_ALL_PRIMARY_IP_RANGES", "LIST_OF_SUBNETWORKS")
SUBNET_RANGES = ("ALL_IP_RANGES", "PRIMARY_IP_RANGE", "LIST_OF_SECONDARY_IP_RANGES")


class Routers(Kind):
    collection, singular, kind = "routers", "router", "compute#router"
    regional = updatable = True
    patchable = ("description", "bgp", "bgpPeers", "interfaces", "nats", "md5AuthenticationKeys", "encryptedInterconnectRouter")

    def check(self, call, res):
        network = reference(call, res.get("network"), "networks", "resource.network")
        res["network"] = LINK + f"projects/{call.project}/{network}"
        bgp = res.get("bgp")
        if bgp is not None:
            asn = integer(bgp.get("asn"), "resource.bgp.asn", 0, 4294967294, None)
            if asn is None:
                raise required("resource.bgp.asn")
            if not (64512 <= asn <= 65534 or 4200000000 <= asn <= 4294967294 or asn == 16550):
                raise invalid("resource.bgp.asn", asn, "The ASN must be a private ASN (64512-65534, 4200000000-4294967294) or 16550.")
            bgp["advertiseMode"] = one_of(bgp.get("advertiseMode"), "resource.bgp.advertiseMode", ("DEFAULT", "CUSTOM"), "DEFAULT")
        names = set()
        for i, nat in enumerate(res.get("nats") or []):
            field = f"resource.nats[{i}]"
            check_name(nat.get("name"), f"{field}.name")
            if nat["name"] in names:
                raise invalid(f"{field}.name", nat["name"], "NAT names must be unique within a router.")
            names.add(nat["name"])
            option = one_of(nat.get("natIpAllocateOption"), f"{field}.natIpAllocateOption", ("AUTO_ONLY", "MANUAL_ONLY"))
            if (option == "MANUAL_ONLY") != bool(nat.get("natIps")):
                raise invalid(f"{field}.natIps", ",".join(nat.get("natIps") or []), "natIps are given with MANUAL_ONLY and only then.")
            ranges = one_of(nat.get("sourceSubnetworkIpRangesToNat"), f"{field}.sourceSubnetworkIpRangesToNat", NAT_RANGES)
            if (ranges == "LIST_OF_SUBNETWORKS") != bool(nat.get("subnetworks")):
                raise invalid(f"{field}.subnetworks", "", "Subnetworks are listed with LIST_OF_SUBNETWORKS and only then.")
            for j, entry in enumerate(nat.get("subnetworks") or []):
                self.check_nat_subnet(call, res, entry, f"{field}.subnetworks[{j}]")
        return res

    @staticmethod
    def check_nat_subnet(call, router, entry, field):
        path = reference(call, entry.get("name"), "subnetworks", f"{field}.name")
        subnet = call.store.items[path]
        if not path.startswith(call.scope + "/") or subnet["network"] != router["network"]:
            raise invalid(f"{field}.name", entry["name"], "The subnetwork must be in the router's region and network.")
        entry["name"] = subnet["selfLink"]
        kinds = entry.get("sourceIpRangesToNat") or []
        if not kinds:
            raise required(f"{field}.sourceIpRangesToNat")
        for k in kinds:
            one_of(k, f"{field}.sourceIpRangesToNat", SUBNET_RANGES)
        known = {s["rangeName"] for s in subnet.get("secondaryIpRanges") or []}
        wanted = entry.get("secondaryIpRangeNames") or []
        if ("LIST_OF_SECONDARY_IP_RANGES" in kinds) != bool(wanted) or not set(wanted) <= known:
            raise invalid(f"{field}.secondaryIpRangeNames", ",".join(wanted), "Secondary ranges are named with LIST_OF_SECONDARY_IP_RANGES, and must be ranges of the subnetwork.")


POLICY_KINDS = ("workloadPolicy", "groupPlacementPolicy", "snapshotSchedulePolicy", "instanceSchedulePolicy", "diskConsistencyGroupPolicy")
TOPOLOGY = re.compile(r"[1-9][0-9]*(?:x[1-9][0-9]*)+")


class ResourcePolicies(Kind):
    collection, singular, kind = "resourcePolicies", "resource_policy", "compute#resourcePolicy"
    regional = True

    def check(self, call, res):
        given = [k for k in POLICY_KINDS if res.get(k) is not None]
        if len(given) != 1:
            raise invalid("resource", ",".join(given), f"A resource policy has exactly one of {', '.join(POLICY_KINDS)}.")
        workload = res.get("workloadPolicy")
        if workload is not None:
            field = "resource.workloadPolicy"
            if not workload.get("type"):
                raise required(f"{field}.type")
            for key in ("acceleratorTopology", "maxTopologyDistance"):
                if workload.get(key) and workload["type"] != "HIGH_THROUGHPUT":
                    raise invalid(f"{field}.{key}", workload[key], "It is given only with type HIGH_THROUGHPUT.")
            topology = workload.get("acceleratorTopology")
            if topology and not TOPOLOGY.fullmatch(topology):
                raise invalid(f"{field}.acceleratorTopology", topology, "It must be dimensions joined by 'x', such as 1x72.")
            if workload.get("acceleratorTopologyMode") and not topology:
                raise invalid(f"{field}.acceleratorTopologyMode", workload["acceleratorTopologyMode"], "It is given only with an acceleratorTopology.")
        res["status"] = "READY"
        return res


# The zonal kinds of future reservations build on the ones above (and Compute's settle on `advance`).
from .gcp_reservations import FutureReservations, Reservations, advance  # noqa: E402

KINDS = {k.collection: k for k in (Networks(), NetworkProfiles(), Subnetworks(), Firewalls(), Routers(), ResourcePolicies(),
                                   FutureReservations(), Reservations())}


def listing(call, kind, path, items):
    """A list answer of Compute's: the page of `items` (rendered objects) that the call's
    `filter`, `maxResults` and `pageToken` select, sorted by name."""
    keep = compile_filter(call.query.get("filter", ""))
    items, token = page([i for i in items if keep(i)], lambda i: i["name"], call.query.get("maxResults"), call.query.get("pageToken"))
    link = f"projects/{call.project}/{path}"
    out = {"kind": kind, "id": link, "selfLink": LINK + link}
    if items:
        out["items"] = items
    if token:
        out["nextPageToken"] = token
    return out


class Compute(GoogleApi):
    service, prefix = "compute", "/compute/v1/"
    with_status = False

    def __init__(self):
        super().__init__()
        self.dependents = []  # functions (project, path) -> what other APIs have on that path
        self.instance_groups = []  # functions (project, zone, name) -> (target size, base name) or None
        self.reservation_users = []  # functions (project, zone, name) -> the VMs other APIs run on that reservation
        self.reservations_had = collections.defaultdict(set)  # project -> paths of every reservation it has had

    def settle(self, store, now):
        super().settle(store, now)
        advance(self, store, now)

    def used_elsewhere(self, project, path):
        return [user for users_of in self.dependents for user in users_of(project, path)]

    def route(self, method, path):
        match = PATH.fullmatch(path)
        kind = KINDS.get(match["collection"]) if match else None
        name = verb = handler = None
        if match and match["zone"] and match["collection"] == "instanceGroupManagers" and match["name"] and not match["verb"] and method == "GET":
            name, handler = "instanceGroupManagers.get", self.get_instance_group_manager
        elif match and match["collection"] == "operations" and not match["verb"] and method == "GET":
            scope = "zoneOperations" if match["zone"] else "regionOperations" if match["region"] else "globalOperations"
            name, handler = (f"{scope}.get", self.get_operation) if match["name"] else (f"{scope}.list", self.list_operations)
        elif kind is not None and kind.regional == bool(match["region"]) and kind.zonal == bool(match["zone"]):
            if match["name"] is None:
                verb = {"POST": "insert", "GET": "list"}.get(method)
            elif match["verb"] is None:
                verb = {"GET": "get", "PATCH": "patch" if kind.patchable else None, "DELETE": "delete", "PUT": "update" if kind.updatable else None}.get(method)
            elif match["verb"] in kind.verbs and method == "POST":
                verb = match["verb"]
            if kind.readonly and verb not in ("get", "list"):
                verb = None
            if verb:
                own = getattr(kind, verb, None) if verb in kind.verbs else None
                name, handler = f"{kind.collection}.{verb}", own or getattr(self, verb)
        if handler is None:
            raise GoogleError(404, f"The requested URL /compute/v1/{path} ({method}) was not found on this server.", "notFound")
        params = {"kind": kind, "name": match["name"]}
        return match["project"], match["scope"], name, handler, params, method != "GET"

    # --- operations ------------------------------------------------------------------------

    def render_operation(self, op, call):
        status = op.status(call.now)
        out = {
            "kind": "compute#operation", "id": op.id, "name": op.name, "operationType": op.operation_type,
            "status": status, "progress": 100 if status == "DONE" else 0,
            "targetLink": LINK + f"projects/{op.project}/{op.target}", "targetId": op.target_id,
            "insertTime": timestamp(op.inserted), "user": "forge@emulator",
            "selfLink": LINK + f"projects/{op.project}/{op.scope}/operations/{op.name}",
        }
        if op.scope != "global":  # a regional operation's region, a zonal one's zone
            out[op.scope.split("/")[0][:-1]] = LINK + f"projects/{op.project}/{op.scope}"
        if op.request_id:
            out["clientOperationId"] = op.request_id
        if status != "PENDING":
            out["startTime"] = timestamp(op.started())
        if status == "DONE":
            out["endTime"] = timestamp(op.ended())
            if op.error:
                code, message, http = op.error
                out["error"] = {"errors": [{"code": code, "message": message}]}
                out["httpErrorStatusCode"] = http
                out["httpErrorMessage"] = HTTP_MESSAGES[http]
        return out

    def failure(self, call, code, message):
        code = code or "INTERNAL_ERROR"
        message = message or "Internal error. Please try again or contact Google Support."
        return code, message, {"INTERNAL_ERROR": 500, "QUOTA_EXCEEDED": 403}.get(code, 400)

    def list_operations(self, call):
        """The scope's operations, filtered (`(operationType eq insert) (status ne DONE)` and the
        like) and paged, newest last."""
        ops = [self.render_operation(op, call) for (scope, _), op in call.store.operations.items() if scope == call.scope]
        return listing(call, "compute#operationList", f"{call.scope}/operations", ops)

    def get_operation(self, call):
        op = call.store.operations.get((call.scope, call.params["name"]))
        if op is None:
            raise GoogleError(404, f"The resource 'projects/{call.project}/{call.scope}/operations/{call.params['name']}' was not found", "notFound")
        return op

    # --- instance groups that other APIs run ---------------------------------------------------

    def get_instance_group_manager(self, call):
        zone, name = call.scope.split("/", 1)[1], call.params["name"]
        found = next((g for groups in self.instance_groups if (g := groups(call.project, zone, name))), None)
        if found is None:
            raise GoogleError(404, f"The resource 'projects/{call.project}/zones/{zone}/instanceGroupManagers/{name}' was not found", "notFound")
        size, base = found
        link = LINK + f"projects/{call.project}/zones/{zone}"
        return {"kind": "compute#instanceGroupManager", "id": new_id(), "name": name, "zone": link, "targetSize": size,
                "baseInstanceName": base, "instanceGroup": f"{link}/instanceGroups/{name}",
                "selfLink": f"{link}/instanceGroupManagers/{name}", "status": {"isStable": True}}

    # --- resources ---------------------------------------------------------------------------

    @staticmethod
    def path(call, name):
        return f"{call.scope}/{call.params['kind'].collection}/{name}"

    def visible(self, call):
        """The resource named in the path; a 404 while its insert is under way."""
        path = self.path(call, call.params["name"])
        records = call.params["kind"].records(call)
        if path not in records:
            raise GoogleError(404, f"The resource 'projects/{call.project}/{path}' was not found", "notFound")
        return path, records[path]

    def changeable(self, call):
        path, res = self.visible(call)
        if path in call.store.pending:
            raise GoogleError(400, f"The resource 'projects/{call.project}/{path}' is not ready", "resourceNotReady")
        return path, res

    def insert(self, call):
        kind = call.params["kind"]
        body = {k: v for k, v in call.body.items() if k not in OUTPUT_ONLY}
        check_name(body.get("name"))
        self.check_region(call)
        path = self.path(call, body["name"])
        if path in call.store.items or path in call.store.pending:
            raise GoogleError(409, f"The resource 'projects/{call.project}/{path}' already exists", "alreadyExists")
        res = kind.check(call, body)
        res.update(kind=kind.kind, id=new_id(), creationTimestamp=timestamp(call.now), selfLink=LINK + f"projects/{call.project}/{path}")
        if kind.regional or kind.zonal:
            res["region" if kind.regional else "zone"] = LINK + f"projects/{call.project}/{call.scope}"
        return call.start("insert", path, res["id"], lambda: call.store.items.__setitem__(path, res), resource=res)

    @staticmethod
    def check_region(call):
        region = call.body.get("region")
        if region and region.rstrip("/").split("/")[-1] != call.scope.split("/")[-1]:
            raise invalid("resource.region", region, "It must be the region of the request.")

    def get(self, call):
        return call.params["kind"].show(call, self.visible(call)[1])

    def list(self, call):
        kind = call.params["kind"]
        if call.query.get("orderBy") not in (None, "", "name"):
            raise invalid("orderBy", call.query["orderBy"], "Only orderBy=name is emulated.")
        items = [kind.show(call, r) for r in kind.records(call).values()]
        return listing(call, kind.list_kind or kind.kind + "List", f"{call.scope}/{kind.collection}", items)

    def patch(self, call):
        return self.change(call, replace=False)

    def update(self, call):
        return self.change(call, replace=True)

    def change(self, call, replace):
        kind = call.params["kind"]
        path, current = self.changeable(call)
        if kind.collection == "subnetworks" and call.body.get("fingerprint") != current["fingerprint"]:
            raise GoogleError(412, "Supplied fingerprint does not match current metadata fingerprint.", "conditionNotMet")
        body = {k: v for k, v in call.body.items() if k not in OUTPUT_ONLY}
        self.check_region(call)
        if body.get("name", current["name"]) != current["name"]:
            raise invalid("resource.name", body["name"], "The name of a resource cannot be changed.")
        if replace:  # PUT: the body is the whole resource
            res = {**{k: v for k, v in current.items() if k in OUTPUT_ONLY}, "name": current["name"], **body}
        else:
            res = merge_patch(copy.deepcopy(current), body)
        res = kind.check(call, res)
        for key in set(res) | set(current):
            if key not in kind.patchable and key not in OUTPUT_ONLY and res.get(key) != current.get(key):
                raise invalid(f"resource.{key}", res.get(key, ""), "This field cannot be changed.")
        return call.start("update" if replace else "patch", path, current["id"], lambda: call.store.items.__setitem__(path, res))

    def setPrivateIpGoogleAccess(self, call):
        path, current = self.changeable(call)
        if not isinstance(call.body.get("privateIpGoogleAccess"), bool):
            raise required("privateIpGoogleAccess")
        fingerprint = base64.urlsafe_b64encode(secrets.token_bytes(8)).decode()
        res = dict(current, privateIpGoogleAccess=call.body["privateIpGoogleAccess"], fingerprint=fingerprint)
        return call.start("setPrivateIpGoogleAccess", path, current["id"], lambda: call.store.items.__setitem__(path, res))

    def delete(self, call):
        kind = call.params["kind"]
        path, current = self.changeable(call)
        kind.deletable(call, path, current)
        users = kind.users(call, path) + self.used_elsewhere(call.project, path)
        error = None
        if users:
            error = ("RESOURCE_IN_USE_BY_ANOTHER_RESOURCE", f"The {kind.singular} resource 'projects/{call.project}/{path}' is already being used by 'projects/{call.project}/{users[0]}'", 400)
        return call.start("delete", path, current["id"], lambda: call.store.items.pop(path, None), error=error)
