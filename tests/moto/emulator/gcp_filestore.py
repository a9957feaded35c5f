"""Cloud Filestore API v1 (/file/v1/projects/p/locations/l/...), the parts forge uses, on gcp.py:
  * instances: create (?instanceId=), get, list (in one location or all: `-`; pages, filter,
    orderBy name), patch (?updateMask= description, labels, fileShares, deletionProtectionEnabled,
    deletionProtectionReason), delete. CREATING → READY (ERROR if the create operation fails,
    until deleted), DELETING → gone; networks get their ipAddresses and reservedIpRange;
  * operations: get and list, google.longrunning.Operation: name
    projects/p/locations/l/operations/…, metadata google.cloud.common.OperationMetadata, `done`
    once over, then `response` (the instance, "@type" google.cloud.filestore.v1.Instance; Empty
    for a delete) or `error` {code, message};
  * checks: ids (RFC 1035), a tier and a location that fits it (zonal tiers in a zone, REGIONAL
    and ENTERPRISE in a region), exactly one file share whose capacity is in the tier's range and
    steps (TIERS) and, on basic tiers, only grows, exactly one network that exists in the Compute
    emulator's store, connect modes and reserved ranges, labels, deletion protection (not on basic
    tiers; a delete while it is on: FAILED_PRECONDITION), one operation at a time per instance
    (FAILED_PRECONDITION);
  * enums as numbers with `$alt=json;enum-encoding=int` (the Rust clients' way), else as names;
    capacityGb (int64) as a string.
"""

import copy
import ipaddress
import re
import secrets

from .compute_filter import compile_filter
from .gcp import (Enum, GoogleApi, GoogleError, RPC_CODE, ZONE, bad_request, check_labels, check_name, page, precondition,
                  read_enums, region_of, required, rpc_failure, visible, write_enums, zulu)
from .gcp_compute import compute_path, integer


PATH = re.compile(r"projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)/(?P<collection>instances|operations)(?:/(?P<name>[^/:]+))?")
ROUTES = {("instances", False, "GET"): "instances.list", ("instances", False, "POST"): "instances.create",
          ("instances", True, "GET"): "instances.get", ("instances", True, "PATCH"): "instances.patch",
          ("instances", True, "DELETE"): "instances.delete",
          ("operations", False, "GET"): "operations.list", ("operations", True, "GET"): "operations.get"}
INSTANCE_TYPE = "type.googleapis.com/google.cloud.filestore.v1.Instance"
METADATA_TYPE = "type.googleapis.com/google.cloud.common.OperationMetadata"
EMPTY_TYPE = "type.googleapis.com/google.protobuf.Empty"


def filestore_enum(name, values):
    return Enum("google.cloud.filestore.v1." + name, values)


INSTANCE = {
    "state": filestore_enum("Instance.State", "STATE_UNSPECIFIED CREATING READY REPAIRING DELETING ERROR=6 RESTORING SUSPENDED SUSPENDING "
                            "RESUMING REVERTING=12 PROMOTING"),
    "tier": filestore_enum("Instance.Tier", "TIER_UNSPECIFIED STANDARD PREMIUM BASIC_HDD BASIC_SSD HIGH_SCALE_SSD ENTERPRISE ZONAL REGIONAL"),
    "networks": {"modes": filestore_enum("NetworkConfig.AddressMode", "ADDRESS_MODE_UNSPECIFIED MODE_IPV4"),
                 "connectMode": filestore_enum("NetworkConfig.ConnectMode", "CONNECT_MODE_UNSPECIFIED DIRECT_PEERING PRIVATE_SERVICE_ACCESS")},
    "fileShares": {"nfsExportOptions": {"accessMode": filestore_enum("NfsExportOptions.AccessMode", "ACCESS_MODE_UNSPECIFIED READ_ONLY READ_WRITE"),
                                        "squashMode": filestore_enum("NfsExportOptions.SquashMode", "SQUASH_MODE_UNSPECIFIED NO_ROOT_SQUASH ROOT_SQUASH")}},
    "protocol": filestore_enum("Instance.FileProtocol", "FILE_PROTOCOL_UNSPECIFIED NFS_V3 NFS_V4_1"),
    "suspensionReasons": filestore_enum("Instance.SuspensionReason", "SUSPENSION_REASON_UNSPECIFIED KMS_KEY_ISSUE"),
}
OUTPUT = {"name", "state", "statusMessage", "createTime", "etag", "satisfiesPzs", "satisfiesPzi", "suspensionReasons",
          "customPerformanceSupported", "performanceLimits"}
# tier -> (smallest and largest capacity in GB, whether it lives in a zone)
TIERS = {"BASIC_HDD": (1024, 65433, True), "STANDARD": (1024, 65433, True), "BASIC_SSD": (2560, 65433, True), "PREMIUM": (2560, 65433, True),
         "HIGH_SCALE_SSD": (10240, 102400, True), "ZONAL": (1024, 102400, True), "REGIONAL": (1024, 102400, False),
         "ENTERPRISE": (1024, 10240, False)}
BASIC = {"BASIC_HDD", "STANDARD", "BASIC_SSD", "PREMIUM"}
SHARE_NAME = re.compile(r"[a-z][_a-z0-9]{0,15}")
UPDATABLE = ("description", "labels", "fileShares", "deletionProtectionEnabled", "deletionProtectionReason")


def check_capacity(tier, value, field):
    """A file share's capacity in GB: in the tier's range; on the tiers that are not basic, in
    steps of 256 GB below 10 TiB and 2.5 TiB from there."""
    low, high, _ = TIERS[tier]
    gb = integer(value, field, 0, 2**63 - 1, None)
    if gb is None:
        raise required(field)
    if not low <= gb <= high:
        raise bad_request(f"Invalid value for field '{field}': {gb} GB. Tier {tier} takes {low} to {high} GB.")
    step = 1 if tier in BASIC else 256 if gb < 10240 and tier != "HIGH_SCALE_SSD" else 2560
    if gb % step:
        raise bad_request(f"Invalid value for field '{field}': {gb} GB. Tier {tier} takes capacities in steps of {step} GB here.")
    return gb


class Filestore(GoogleApi):
    service, prefix = "file", "/file/v1/"

    def __init__(self, compute):
        super().__init__()
        self.compute = compute
        compute.dependents.append(self.users_of)

    def route(self, method, path):
        match = PATH.fullmatch(path)
        name = ROUTES.get((match["collection"], match["name"] is not None, method)) if match else None
        if name is None:
            raise GoogleError(404, f"The requested URL /file/v1/{path} ({method}) was not found on this server.", "notFound")
        params = {"location": match["location"], "name": match["name"]}
        return match["project"], f"locations/{match['location']}", name, getattr(self, name.replace(".", "_")), params, method != "GET"

    # --- operations ------------------------------------------------------------------------

    def render_operation(self, op, call):
        metadata = {"@type": METADATA_TYPE, "createTime": zulu(op.inserted), "target": f"projects/{op.project}/{op.target}",
                    "verb": op.operation_type, "apiVersion": "v1"}
        out = {"name": f"projects/{op.project}/{op.scope}/operations/{op.name}", "metadata": metadata}
        if op.status(call.now) == "DONE":
            metadata["endTime"] = zulu(op.ended())
            out["done"] = True
            if op.error:
                out["error"] = {"code": RPC_CODE.numbers[op.error[0]], "message": op.error[1]}
            elif op.result is None:
                out["response"] = {"@type": EMPTY_TYPE}
            else:
                out["response"] = {"@type": INSTANCE_TYPE, **write_enums(op.result, INSTANCE, call.numbers)}
        return out

    def failure(self, call, code, message):
        return rpc_failure(call, code, message)

    def operations_get(self, call):
        op = call.store.operations.get((call.scope, call.params["name"]))
        if op is None:
            raise GoogleError(404, f"Resource 'projects/{call.project}/{call.scope}/operations/{call.params['name']}' was not found", "notFound")
        return op

    operations_list = GoogleApi.listed_operations

    # --- instances ---------------------------------------------------------------------------

    def location(self, call):
        if call.params["location"] == "-":
            raise bad_request('Location "-" is valid only in lists.')
        region_of(call.params["location"])
        return call.params["location"]

    def instance(self, call):
        path = f"{call.scope}/instances/{call.params['name']}"
        if path not in call.store.items:
            raise GoogleError(404, f"Resource 'projects/{call.project}/{path}' was not found", "notFound")
        return path, call.store.items[path]

    @staticmethod
    def idle(call, path):
        busy = [op for op in call.store.running if op.target == path]
        if busy:
            raise precondition(f"Operation 'projects/{call.project}/{call.scope}/operations/{busy[0].name}' is in progress on instance "
                               f"'projects/{call.project}/{path}'. Try again once it is done.")

    def instances_get(self, call):
        return write_enums(visible(self.instance(call)[1]), INSTANCE, call.numbers)

    def instances_list(self, call):
        if call.query.get("orderBy") not in (None, "", "name"):
            raise bad_request(f"Invalid value for field 'order_by': '{call.query['orderBy']}'. Only name is emulated.")
        keep = compile_filter(call.query.get("filter", ""))
        prefix = "" if call.params["location"] == "-" else call.scope + "/"
        instances = [visible(r) for p, r in call.store.items.items() if p.startswith(prefix)]
        instances, token = page([i for i in instances if keep(i)], lambda i: i["name"], call.query.get("pageSize"),
                                call.query.get("pageToken"), field="page_size")
        out = {"instances": write_enums(instances, INSTANCE, call.numbers)} if instances else {}
        if token:
            out["nextPageToken"] = token
        return out

    def instances_create(self, call):
        location = self.location(call)
        instance_id = call.query.get("instanceId")
        check_name(instance_id, "instance_id")
        path = f"{call.scope}/instances/{instance_id}"
        if path in call.store.items:
            raise GoogleError(409, f"Resource 'projects/{call.project}/{path}' already exists", "alreadyExists")
        spec = read_enums(call.body, INSTANCE, "instance")
        instance = self.check_instance(call, location, {k: v for k, v in spec.items() if k not in OUTPUT})
        instance.update(name=f"projects/{call.project}/{path}", state="CREATING", createTime=zulu(call.now), etag=secrets.token_hex(8))
        call.store.items[path] = instance
        call.zone = location

        def created():
            instance["state"] = "READY"
            return visible(instance)
        return call.start("create", path, None, created, on_error=lambda error: instance.update(state="ERROR", statusMessage=error[1]))

    def check_instance(self, call, location, spec):
        """A new instance's record from its spec (checked, with Filestore's defaults)."""
        tier = spec.get("tier", "TIER_UNSPECIFIED")
        if tier not in TIERS:
            raise required("instance.tier") if tier == "TIER_UNSPECIFIED" else bad_request(f"Tier {tier} is not emulated.")
        zonal = TIERS[tier][2]
        if zonal != bool(ZONE.fullmatch(location)):
            raise bad_request(f"Invalid location '{location}' for tier {tier}: it needs a {'zone' if zonal else 'region'}.")
        shares = spec.get("fileShares") or []
        if len(shares) != 1:
            raise bad_request("Invalid value for field 'instance.file_shares': an instance has exactly one file share.")
        share = dict(shares[0])
        if not isinstance(share.get("name"), str) or not SHARE_NAME.fullmatch(share["name"]):
            raise bad_request(f"Invalid value for field 'instance.file_shares[0].name': '{share.get('name')}'. It must start with a lowercase letter and have at most 16 lowercase letters, digits or '_'.")
        share["capacityGb"] = str(check_capacity(tier, share.get("capacityGb"), "instance.file_shares[0].capacity_gb"))
        networks = spec.get("networks") or []
        if len(networks) != 1:
            raise bad_request("Invalid value for field 'instance.networks': an instance has exactly one network.")
        network = self.check_network(call, tier, dict(networks[0]))
        labels = spec.get("labels") or {}
        check_labels(labels, "instance.labels")
        self.check_protection(tier, spec)
        if spec.get("protocol") == "NFS_V4_1" and tier not in ("ZONAL", "REGIONAL", "ENTERPRISE"):
            raise bad_request(f"Invalid value for field 'instance.protocol': NFS_V4_1 needs tier ZONAL, REGIONAL or ENTERPRISE, not {tier}.")
        if len(spec.get("description") or "") > 2048:
            raise bad_request("Invalid value for field 'instance.description': at most 2048 characters.")
        return dict(spec, fileShares=[share], networks=[network], _uses={compute_path(call.project, network["network"], "networks")},
                    **({"labels": labels} if labels else {}))

    def check_network(self, call, tier, network):
        if not network.get("network"):
            raise required("instance.networks[0].network")
        path = compute_path(call.project, network["network"], "networks")
        if path is None or self.compute.lookup(call.project, path) is None:
            raise bad_request(f"Invalid value for field 'instance.networks[0].network': network '{network['network']}' does not exist in project '{call.project}'.")
        if network.setdefault("modes", ["MODE_IPV4"]) != ["MODE_IPV4"]:
            raise bad_request("Invalid value for field 'instance.networks[0].modes': only MODE_IPV4 is offered.")
        mode = network.setdefault("connectMode", "DIRECT_PEERING")
        size = 29 if tier in BASIC else 26
        reserved = network.get("reservedIpRange")
        if mode == "DIRECT_PEERING" and reserved:
            try:
                block = ipaddress.IPv4Network(reserved)
            except ValueError:
                block = None
            if block is None or block.prefixlen != size or not block.is_private:
                raise bad_request(f"Invalid value for field 'instance.networks[0].reserved_ip_range': '{reserved}'. Tier {tier} needs a private /{size} block.")
        if mode == "DIRECT_PEERING" and not reserved:
            network["reservedIpRange"] = reserved = f"10.{secrets.randbelow(256)}.{secrets.randbelow(4) * 64}.0/{size}"
        first = ipaddress.IPv4Network(reserved)[2] if mode == "DIRECT_PEERING" else f"10.{secrets.randbelow(256)}.{secrets.randbelow(256)}.2"
        network["ipAddresses"] = [str(first)]
        return network

    @staticmethod
    def check_protection(tier, spec):
        if spec.get("deletionProtectionEnabled") and tier in BASIC:
            raise bad_request(f"Invalid value for field 'instance.deletion_protection_enabled': deletion protection is not offered on tier {tier}.")
        if spec.get("deletionProtectionReason") and not spec.get("deletionProtectionEnabled"):
            raise bad_request("Invalid value for field 'instance.deletion_protection_reason': it needs deletion_protection_enabled.")

    def instances_patch(self, call):
        path, instance = self.instance(call)
        mask = [re.sub(r"_([a-z])", lambda m: m[1].upper(), f.strip()) for f in call.query.get("updateMask", "").split(",") if f.strip()]
        if not mask:
            raise required("update_mask")
        spec = read_enums(call.body, INSTANCE, "instance")
        if spec.get("name") not in (None, "", instance["name"]):
            raise bad_request(f"Invalid value for field 'instance.name': '{spec['name']}'. It must be the instance's name in the path.")
        tier, changed = instance["tier"], copy.deepcopy(instance)
        for field in mask:
            if field not in UPDATABLE:
                raise bad_request(f"Invalid value for field 'update_mask': '{field}' cannot be updated here.")
            if field == "fileShares":
                shares = spec.get("fileShares") or []
                current = instance["fileShares"][0]
                if len(shares) != 1 or shares[0].get("name") != current["name"]:
                    raise bad_request(f"Invalid value for field 'instance.file_shares': give the one file share, '{current['name']}'.")
                gb = check_capacity(tier, shares[0].get("capacityGb"), "instance.file_shares[0].capacity_gb")
                if tier in BASIC and gb < int(current["capacityGb"]):
                    raise bad_request(f"Invalid value for field 'instance.file_shares[0].capacity_gb': {gb} GB. A {tier} file share cannot shrink below its {current['capacityGb']} GB.")
                changed["fileShares"] = [dict(current, capacityGb=str(gb))]
            else:
                if field == "labels":
                    check_labels(spec.get("labels") or {}, "instance.labels")
                changed[field] = spec.get(field)
                if changed[field] in (None, "", False, {}):
                    del changed[field]
        self.check_protection(tier, changed)
        if len(changed.get("description") or "") > 2048:
            raise bad_request("Invalid value for field 'instance.description': at most 2048 characters.")
        self.idle(call, path)
        if instance["state"] != "READY":
            raise precondition(f"Instance 'projects/{call.project}/{path}' is {instance['state']}: only a READY instance can be updated.")
        changed["etag"] = secrets.token_hex(8)

        def updated():
            call.store.items[path] = changed
            return visible(changed)
        return call.start("update", path, None, updated)

    def instances_delete(self, call):
        path, instance = self.instance(call)
        self.idle(call, path)
        if instance.get("deletionProtectionEnabled"):
            raise precondition(f"Instance 'projects/{call.project}/{path}' has deletion protection enabled: "
                               "set deletionProtectionEnabled to false before deleting it.")
        before = instance["state"]
        instance["state"] = "DELETING"

        def deleted():
            del call.store.items[path]
        return call.start("delete", path, None, deleted, on_error=lambda error: instance.__setitem__("state", before))
