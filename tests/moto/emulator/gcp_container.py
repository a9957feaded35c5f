"""Google Kubernetes Engine API v1 (/container/v1/projects/p/locations/l/...), the parts forge
uses, on gcp.py:
  * clusters: create (inline node pools, or a default-pool from initialNodeCount), get, list (in
    one location or all: `-`), update (one `desired…` field of DESIRED per request),
    setResourceLabels (with the current labelFingerprint), setAddons, delete. PROVISIONING →
    RUNNING (ERROR if the create operation fails), RECONCILING while an update or a node pool's
    operation runs, STOPPING → gone with its pools. A cluster gets versions, selfLink,
    labelFingerprint, the pod and service ranges, and a Kubernetes API server of its own
    (kubernetes.py) whose host:port is its endpoint and whose CA is masterAuth's
    clusterCaCertificate, serving multi-networking's kinds (networking.gke.io Network and
    GKENetworkParamSet) only while networkConfig.enableMultiNetworking is on; a RUNNING pool's
    VMs are Nodes there (GPUs counted from its accelerators, GKE's nvidia.com/gpu taint on GPU
    pools, kubernetes.io/arch: arm64 on A4X, cloud.google.com/gke-networking-dra-driver=true on
    a managed DRANET pool), following setSize and gone with it; a releaseChannel given empty is
    none (UNSPECIFIED), one left out is REGULAR;
  * node pools: create, get, list, update (the fields of UpdateNodePoolRequest in POOL_UPDATES),
    setSize, setAutoscaling (an empty autoscaling, as proto3 JSON writes enabled=false: off; the
    pool keeps its size), setManagement, delete. PROVISIONING → RUNNING, RECONCILING while
    changed, STOPPING → gone; a failed create (a failed_operation fault, e.g. code GCE_STOCKOUT)
    leaves the pool in ERROR, with the error as statusMessage and condition, until deleted;
  * operations: get and list, GKE's own Operation (PENDING → RUNNING → DONE; a failure as
    `error` {code, message}, statusMessage and cluster or node pool conditions);
  * one operation at a time per cluster: while one runs on the cluster or any of its pools,
    every other change answers 400 FAILED_PRECONDITION, worded as GKE words it for what runs:
    "Operation … is currently upgrading cluster …. Please wait and try again once it is done."
    while the control plane upgrades, else "Cluster is running incompatible operation …";
  * checks: names (RFC 1035, at most 40 characters), required fields, versions, locations in the
    cluster's region, the cluster's network (one without an RDMA network profile) and subnetwork
    (and its secondary ranges) in the Compute emulator's store, a pool's
    additionalNodeNetworkConfigs (networks and subnetworks that exist, on a cluster with
    enableMultiNetworking and ADVANCED_DATAPATH, with gVNIC): a regular network is a VPC of its
    own, one made with an RDMA network profile is an RDMA NIC (only on the machine types of
    RDMA_NICS, at most their count of them, several on one network with subnetworks of their own,
    the pool's locations all in the profile's zone; besides them at most one regular network, the
    machine's second gVNIC); managed DRANET (networkConfig.acceleratorNetworkProfile "auto": RDMA
    machines, GKE 1.34.1-gke.1829001 or later, ADVANCED_DATAPATH, no additional networks,
    immutable); GPUDirect-RDMA (config.gpuDirectConfig) on A3 Ultra and A4 only; Hyperdisk boot
    disks on A3 Ultra, A4 and A4X (hyperdisk-balanced by default); COMPACT placement in exactly one zone; a
    placement policyName naming a placement resource policy of the cluster's region in Compute
    (then in use by the pool), which an A4X pool needs: a HIGH_THROUGHPUT workload policy of
    topology 1x72; accelerators that fit the machine type (MACHINE_GPUS), reservation affinity,
    autoscaling bounds, labels; auto-upgrade on for the pools of a cluster in a release channel;
    no control plane or node version of an earlier minor version than the one running;
  * SPECIFIC_RESERVATION affinity (key compute.googleapis.com/reservation-name, the value a
    reservation's name or projects/P/reservations/NAME of the pool's own project) on the
    reservations of the Compute emulator (what future reservations deliver, gcp_reservations.py):
    the operation of a pool's create (a cluster's with such a pool, a setSize) ends in error, a
    created pool (and cluster) in ERROR, for a reservation the project has had but has no more
    in a zone of the pool ("reservation … not found for node pool … at zone …", NOT_FOUND); for
    one not usable yet, before its future reservation's start ("… is not active …",
    FAILED_PRECONDITION) unless the pool has no nodes; for one with fewer VMs of the pool's machine
    type left (its count less the nodes of the project's other pools on it) than the pool's nodes
    per zone ("Reservation does not have enough resources … short of N VM count of machine type
    …", RESOURCE_EXHAUSTED). Compute shows a reservation's nodes as its inUseCount. Known gaps: a
    name the project has never had, or another project's reservation, is accepted as before;
    GKE answers these at once (404, 429) where the emulator ends the operation in error; pools
    stay RUNNING on a reservation that ends;
  * enums as numbers with `$alt=json;enum-encoding=int` (the Rust clients' way), else as names;
    int64 fields (acceleratorCount, maxPodsPerNode) as strings.
Not emulated: Autopilot, the zones/… paths of the v1 API, the other setters, operations.cancel.
"""

import base64
import copy
import ipaddress
import re
import secrets

from .gcp import (Enum, GoogleApi, GoogleError, RPC_CODE, bad_request, check_fields, check_labels, check_name, fingerprint,
                  precondition, read_enums, region_of, required, rpc_failure, visible, write_enums, zulu)
from .gcp_compute import compute_path, integer, profile_of
from .gcp_reservations import known_reservation
from . import kubernetes


LINK = "https://container.googleapis.com/v1/"
TAINT_EFFECTS = {"NO_SCHEDULE": "NoSchedule", "NO_EXECUTE": "NoExecute", "PREFER_NO_SCHEDULE": "PreferNoSchedule"}
COMPUTE = "https://www.googleapis.com/compute/v1/"
PATH = re.compile(r"projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)/(?:(?P<operations>operations)(?:/(?P<operation>[^/:]+))?"
                  r"|clusters(?:/(?P<cluster>[^/:]+)(?P<pools>/nodePools(?:/(?P<pool>[^/:]+))?)?)?)(?::(?P<verb>[A-Za-z]+))?")
ROUTES = {  # (collection, named, method, verb) -> call name; its handler is named after it
    ("clusters", False, "GET", None): "clusters.list",
    ("clusters", False, "POST", None): "clusters.create",
    ("clusters", True, "GET", None): "clusters.get",
    ("clusters", True, "PUT", None): "clusters.update",
    ("clusters", True, "DELETE", None): "clusters.delete",
    ("clusters", True, "POST", "setResourceLabels"): "clusters.setResourceLabels",
    ("clusters", True, "POST", "setAddons"): "clusters.setAddons",
    ("nodePools", False, "GET", None): "clusters.nodePools.list",
    ("nodePools", False, "POST", None): "clusters.nodePools.create",
    ("nodePools", True, "GET", None): "clusters.nodePools.get",
    ("nodePools", True, "PUT", None): "clusters.nodePools.update",
    ("nodePools", True, "DELETE", None): "clusters.nodePools.delete",
    ("nodePools", True, "POST", "setSize"): "clusters.nodePools.setSize",
    ("nodePools", True, "POST", "setAutoscaling"): "clusters.nodePools.setAutoscaling",
    ("nodePools", True, "POST", "setManagement"): "clusters.nodePools.setManagement",
    ("operations", False, "GET", None): "operations.list",
    ("operations", True, "GET", None): "operations.get",
}
CLUSTER_PATH_FIELDS = ("name", "projectId", "zone", "clusterId")
POOL_PATH_FIELDS = CLUSTER_PATH_FIELDS + ("nodePoolId",)
# What a cluster's API server serves besides while multi-networking is on (kubernetes.py's kinds).
MULTI_NETWORKING_KINDS = [
    ("networking.gke.io", "v1", "gkenetworkparamsets", "GKENetworkParamSet", False, ["gnp"]),
    ("networking.gke.io", "v1", "networks", "Network", False, []),
]
# DRA as Kubernetes 1.34 serves it, GA.
DRA_V1_KINDS = [
    ("resource.k8s.io", "v1", "deviceclasses", "DeviceClass", False, []),
    ("resource.k8s.io", "v1", "resourceclaimtemplates", "ResourceClaimTemplate", True, []),
    ("resource.k8s.io", "v1", "resourceclaims", "ResourceClaim", True, []),
    ("resource.k8s.io", "v1", "resourceslices", "ResourceSlice", False, []),
]

# --- enums (google.container.v1), and where they are in each message -------------------------

def container_enum(name, values):
    return Enum("google.container.v1." + name, values)


CLUSTER_STATUS = container_enum("Cluster.Status", "STATUS_UNSPECIFIED PROVISIONING RUNNING RECONCILING STOPPING ERROR DEGRADED")
POOL_STATUS = container_enum("NodePool.Status", "STATUS_UNSPECIFIED PROVISIONING RUNNING RUNNING_WITH_ERROR RECONCILING STOPPING ERROR")
OPERATION_STATUS = container_enum("Operation.Status", "STATUS_UNSPECIFIED PENDING RUNNING DONE ABORTING")
OPERATION_TYPE = container_enum("Operation.Type", "TYPE_UNSPECIFIED CREATE_CLUSTER DELETE_CLUSTER UPGRADE_MASTER UPGRADE_NODES REPAIR_CLUSTER "
                                "UPDATE_CLUSTER CREATE_NODE_POOL DELETE_NODE_POOL SET_NODE_POOL_MANAGEMENT AUTO_REPAIR_NODES AUTO_UPGRADE_NODES "
                                "SET_LABELS SET_MASTER_AUTH SET_NODE_POOL_SIZE SET_NETWORK_POLICY SET_MAINTENANCE_POLICY RESIZE_CLUSTER=18 FLEET_FEATURE_UPGRADE")
CONDITION = {"code": container_enum("StatusCondition.Code", "UNKNOWN GCE_STOCKOUT GKE_SERVICE_ACCOUNT_DELETED GCE_QUOTA_EXCEEDED SET_BY_OPERATOR "
                                    "CLOUD_KMS_KEY_ERROR=7 CA_EXPIRING=9 CLOUD_KMS_KEY_DESTROYED=11"),
             "canonicalCode": RPC_CODE}
TAINT = {"effect": container_enum("NodeTaint.Effect", "EFFECT_UNSPECIFIED NO_SCHEDULE PREFER_NO_SCHEDULE NO_EXECUTE")}
ACCELERATOR = {"gpuDriverInstallationConfig": {"gpuDriverVersion": container_enum("GPUDriverInstallationConfig.GPUDriverVersion", "GPU_DRIVER_VERSION_UNSPECIFIED INSTALLATION_DISABLED DEFAULT LATEST")},
               "gpuSharingConfig": {"gpuSharingStrategy": container_enum("GPUSharingConfig.GPUSharingStrategy", "GPU_SHARING_STRATEGY_UNSPECIFIED TIME_SHARING MPS")}}
WORKLOAD_METADATA = {"mode": container_enum("WorkloadMetadataConfig.Mode", "MODE_UNSPECIFIED GCE_METADATA GKE_METADATA")}
UPGRADE_SETTINGS = {"strategy": container_enum("NodePoolUpdateStrategy", "NODE_POOL_UPDATE_STRATEGY_UNSPECIFIED BLUE_GREEN=2 SURGE SHORT_LIVED=5")}
AUTOSCALING = {"locationPolicy": container_enum("NodePoolAutoscaling.LocationPolicy", "LOCATION_POLICY_UNSPECIFIED BALANCED ANY")}
NODE_CONFIG = {"taints": TAINT, "accelerators": ACCELERATOR, "workloadMetadataConfig": WORKLOAD_METADATA,
               "reservationAffinity": {"consumeReservationType": container_enum("ReservationAffinity.Type", "UNSPECIFIED NO_RESERVATION ANY_RESERVATION SPECIFIC_RESERVATION ANY_RESERVATION_THEN_FAIL")},
               "gpuDirectConfig": {"gpuDirectStrategy": container_enum("GPUDirectConfig.GPUDirectStrategy", "GPU_DIRECT_STRATEGY_UNSPECIFIED RDMA=2")}}
NODE_POOL = {"config": NODE_CONFIG, "status": POOL_STATUS, "autoscaling": AUTOSCALING, "upgradeSettings": UPGRADE_SETTINGS, "conditions": CONDITION,
             "placementPolicy": {"type": container_enum("NodePool.PlacementPolicy.Type", "TYPE_UNSPECIFIED COMPACT")}}
DATAPATH = container_enum("DatapathProvider", "DATAPATH_PROVIDER_UNSPECIFIED LEGACY_DATAPATH ADVANCED_DATAPATH")
RELEASE_CHANNEL = {"channel": container_enum("ReleaseChannel.Channel", "UNSPECIFIED RAPID REGULAR STABLE EXTENDED")}
CLUSTER = {"status": CLUSTER_STATUS, "nodePools": NODE_POOL, "nodeConfig": NODE_CONFIG, "conditions": CONDITION, "releaseChannel": RELEASE_CHANNEL,
           "networkConfig": {"datapathProvider": DATAPATH}, "ipAllocationPolicy": {"stackType": container_enum("StackType", "STACK_TYPE_UNSPECIFIED IPV4 IPV4_IPV6")}}
OPERATION = {"status": OPERATION_STATUS, "operationType": OPERATION_TYPE, "clusterConditions": CONDITION, "nodepoolConditions": CONDITION}
CLUSTER_UPDATE = {"desiredReleaseChannel": RELEASE_CHANNEL, "desiredDatapathProvider": DATAPATH}
POOL_UPDATE = {"taints": {"taints": TAINT}, "accelerators": ACCELERATOR, "workloadMetadataConfig": WORKLOAD_METADATA, "upgradeSettings": UPGRADE_SETTINGS}

CLUSTER_OUTPUT = {"selfLink", "zone", "endpoint", "currentMasterVersion", "currentNodeVersion", "createTime", "status", "statusMessage",
                  "nodeIpv4CidrSize", "servicesIpv4Cidr", "instanceGroupUrls", "currentNodeCount", "expireTime", "location", "id",
                  "conditions", "etag", "labelFingerprint", "masterAuth"}
POOL_OUTPUT = {"selfLink", "instanceGroupUrls", "status", "statusMessage", "conditions", "podIpv4CidrSize", "etag", "updateInfo"}

# --- what the emulated GKE offers ----------------------------------------------------------

VERSIONS = ("1.30.14-gke.1150000", "1.31.11-gke.1036000", "1.32.7-gke.1079000", "1.33.3-gke.1136000", "1.34.0-gke.1662000", "1.34.1-gke.1829001")
CHANNEL_DEFAULT = {"EXTENDED": 0, "STABLE": 1, "REGULAR": 2, "UNSPECIFIED": 2, "RAPID": 3}  # index in VERSIONS (not its last)
DRANET_VERSION = "1.34.1-gke.1829001"  # the first with managed DRANET (acceleratorNetworkProfile)
MACHINE_GPUS = {  # machine types whose GPUs come with them: (accelerator type, count)
    **{f"a3-highgpu-{n}g": ("nvidia-h100-80gb", n) for n in (1, 2, 4, 8)},
    "a3-megagpu-8g": ("nvidia-h100-mega-80gb", 8),
    "a3-ultragpu-8g": ("nvidia-h200-141gb", 8),
    "a4-highgpu-8g": ("nvidia-b200", 8),
    "a4x-highgpu-4g": ("nvidia-gb200", 4),
    **{f"a2-highgpu-{n}g": ("nvidia-tesla-a100", n) for n in (1, 2, 4, 8)},
    "a2-megagpu-16g": ("nvidia-tesla-a100", 16),
    **{f"a2-ultragpu-{n}g": ("nvidia-a100-80gb", n) for n in (1, 2, 4, 8)},
    **{f"g2-standard-{cpus}": ("nvidia-l4", n) for cpus, n in ((4, 1), (8, 1), (12, 1), (16, 1), (32, 1), (24, 2), (48, 4), (96, 8))},
}
RDMA_NICS = {"a3-ultragpu-8g": 8, "a4-highgpu-8g": 8, "a4x-highgpu-4g": 4}  # their MRDMA NICs, for RoCE networks
GVNICS = 2  # the gVNIC NICs of the RDMA machines: the primary and one more
GPU_DIRECT_RDMA = ("a3-ultragpu-8g", "a4-highgpu-8g")  # GPUDirectConfig's RDMA
HYPERDISK_ONLY = ("a3-ultragpu-8g", "a4-highgpu-8g", "a4x-highgpu-4g")  # they take no Persistent Disk: hyperdisk-balanced boot disks
ARM64 = ("a4x-highgpu-4g",)
WORKLOAD_TOPOLOGY = {"a4x-highgpu-4g": "1x72"}  # the workload policy's accelerator topology a pool of them needs
N1_GPUS = ("nvidia-tesla-t4", "nvidia-tesla-v100", "nvidia-tesla-p4", "nvidia-tesla-p100")
MACHINE = re.compile(r"[a-z][a-z0-9]*-[a-z0-9-]+")
RESERVATION_KEY = "compute.googleapis.com/reservation-name"
# A SPECIFIC_RESERVATION value: the reservation's name, or projects/P/reservations/NAME (shared),
# either with /reservationBlocks/B[/reservationSubBlocks/S].
RESERVATION_VALUE = re.compile(r"(?:projects/(?P<project>[^/]+)/reservations/)?(?P<name>[a-z](?:[-a-z0-9]*[a-z0-9])?)"
                               r"(?:/reservationBlocks/[^/]+(?:/reservationSubBlocks/[^/]+)?)?")
DEFAULT_SCOPES = ["https://www.googleapis.com/auth/devstorage.read_only", "https://www.googleapis.com/auth/logging.write",
                  "https://www.googleapis.com/auth/monitoring", "https://www.googleapis.com/auth/service.management.readonly",
                  "https://www.googleapis.com/auth/servicecontrol", "https://www.googleapis.com/auth/trace.append"]
DEFAULT_ADDONS = {"httpLoadBalancing": {}, "horizontalPodAutoscaling": {}, "kubernetesDashboard": {"disabled": True},
                  "networkPolicyConfig": {"disabled": True}, "gcePersistentDiskCsiDriverConfig": {"enabled": True}}
RECONCILING = {"UPDATE_CLUSTER", "UPGRADE_MASTER", "UPGRADE_NODES", "CREATE_NODE_POOL", "DELETE_NODE_POOL", "SET_NODE_POOL_SIZE", "SET_NODE_POOL_MANAGEMENT"}
# ClusterUpdate fields emulated -> what they change
DESIRED = ("desiredMasterAuthorizedNetworksConfig", "desiredAddonsConfig", "desiredReleaseChannel", "desiredWorkloadIdentityConfig",
           "desiredMasterVersion", "desiredLocations", "desiredEnableMultiNetworking", "desiredEnablePrivateEndpoint")
WRAPPED = {"taints": "taints", "labels": "labels", "tags": "tags", "resourceLabels": "labels"}  # UpdateNodePoolRequest's wrapper messages
POOL_UPDATES = ("nodeVersion", "imageType", "locations", "taints", "labels", "resourceLabels", "tags", "workloadMetadataConfig",
                "upgradeSettings", "gvnic", "machineType", "diskType", "diskSizeGb", "accelerators", "nodeNetworkConfig")


def resolve_version(given, channel, field):
    """A version offered ("1.32", "1.32.7", a full one; "-", "latest" or none: the channel's)."""
    if given in (None, "", "-", "latest"):
        return VERSIONS[CHANNEL_DEFAULT.get(channel, 2)]
    found = [v for v in VERSIONS if v == given or v.startswith(given + ".") or v.startswith(given + "-")]
    if not found:
        raise bad_request(f'{field} "{given}" is unsupported.')
    return found[-1]


def version_key(version):
    return tuple(int(n) for n in re.findall(r"\d+", version))


def earlier_minor(version, running):
    """Whether `version` is of an earlier minor version than `running`: what GKE never goes
    back to (an earlier patch of the same minor version it takes)."""
    return version_key(version)[:2] < version_key(running)[:2]


def check_auto_upgrade(cluster, management, field):
    """GKE upgrades the node pools of a cluster in a release channel itself."""
    channel = cluster["releaseChannel"].get("channel", "UNSPECIFIED")
    if channel != "UNSPECIFIED" and not management.get("autoUpgrade"):
        raise bad_request(f"Invalid value for field '{field}.autoUpgrade': auto-upgrade cannot be turned off for the node pools "
                          f"of a cluster in a release channel ({channel}).")
    return management


def busy(op, cluster_name):
    """GKE's refusal of a change while `op` runs on the cluster, worded by what `op` does."""
    if op.operation_type == "UPGRADE_MASTER":
        return precondition(f"Operation {op.name} is currently upgrading cluster {cluster_name}. Please wait and try again once it is done.")
    return precondition(f"Cluster is running incompatible operation {op.name}.")


def check_zones(zones, region, field):
    if not isinstance(zones, list) or not zones:
        raise required(field)
    for zone in zones:
        if not isinstance(zone, str) or region_of(zone, field) != region or zone == region:
            raise bad_request(f"Invalid value for field '{field}': '{zone}'. Node locations must be zones of the cluster's region {region}.")
    if len(set(zones)) != len(zones):
        raise bad_request(f"Invalid value for field '{field}': zones must not repeat.")
    return list(zones)


def check_taints(taints, field):
    for i, taint in enumerate(taints or []):
        if not taint.get("key"):
            raise required(f"{field}[{i}].key")
        if taint.get("effect", "EFFECT_UNSPECIFIED") == "EFFECT_UNSPECIFIED":
            raise required(f"{field}[{i}].effect")
    return list(taints or [])


def check_accelerators(machine, accelerators, field):
    """The accelerators of a node config: the machine type's own GPUs (filled in when none are
    given), or GPUs an N1 machine can attach; int64 counts as strings."""
    fixed = MACHINE_GPUS.get(machine)
    out = []
    if len(accelerators) > 1:
        raise bad_request(f"Invalid value for field '{field}': at most one accelerator config.")
    for i, given in enumerate(accelerators):
        kind = given.get("acceleratorType")
        if not kind:
            raise required(f"{field}[{i}].acceleratorType")
        count = integer(given.get("acceleratorCount"), f"{field}[{i}].acceleratorCount", 1, 16, None)
        if count is None:
            raise required(f"{field}[{i}].acceleratorCount")
        if fixed and (kind, count) != fixed:
            raise bad_request(f'Accelerator type "{kind}" (count {count}) does not fit machine type "{machine}", which comes with {fixed[1]} "{fixed[0]}".')
        if not fixed and not (machine.startswith("n1-") and kind in N1_GPUS and count in (1, 2, 4, 8)):
            raise bad_request(f'Accelerator type "{kind}" (count {count}) cannot be attached to machine type "{machine}".')
        out.append(dict(given, acceleratorCount=str(count)))
    if fixed and not out:
        out = [{"acceleratorType": fixed[0], "acceleratorCount": str(fixed[1])}]
    return out


def check_machine(config, prefix):
    """What a node config's machine type allows of the rest: its boot disk type (A4 and A4X boot
    from Hyperdisk only) and GPUDirect-RDMA (A3 Ultra and A4); `prefix` starts the fields named."""
    machine, disk = config["machineType"], config.get("diskType")
    if machine in HYPERDISK_ONLY and disk != "hyperdisk-balanced":
        raise bad_request(f"Invalid value for field '{prefix}diskType': '{disk}'. {disk} disk type cannot be used by {machine} machine type: "
                          "it boots from hyperdisk-balanced only.")
    if (config.get("gpuDirectConfig") or {}).get("gpuDirectStrategy") == "RDMA" and machine not in GPU_DIRECT_RDMA:
        raise bad_request(f"Invalid value for field '{prefix}gpuDirectConfig.gpuDirectStrategy': 'RDMA'. GPUDirect-RDMA is for machine types "
                          f"{', '.join(GPU_DIRECT_RDMA)}, not {machine}.")


def check_dranet(cluster, machine, profile, extra, field):
    """Managed DRANET (a pool's acceleratorNetworkProfile): "auto", on an RDMA machine, in a
    cluster of DRANET_VERSION or later with Dataplane V2, instead of additional networks."""
    if profile != "auto":
        raise bad_request(f"Invalid value for field '{field}': '{profile}'. The only valid accelerator network profile is \"auto\".")
    if machine not in RDMA_NICS:
        raise bad_request(f"Invalid value for field '{field}': machine type {machine} has no RDMA NICs for an accelerator network profile "
                          f"(machine types {', '.join(RDMA_NICS)}).")
    if version_key(cluster["currentMasterVersion"]) < version_key(DRANET_VERSION):
        raise bad_request(f"Invalid value for field '{field}': an accelerator network profile needs GKE version {DRANET_VERSION} or later; "
                          f"the cluster runs {cluster['currentMasterVersion']}.")
    if cluster["networkConfig"].get("datapathProvider") != "ADVANCED_DATAPATH":
        raise bad_request(f"Invalid value for field '{field}': an accelerator network profile needs a cluster with "
                          "networkConfig.datapathProvider ADVANCED_DATAPATH (GKE Dataplane V2).")
    if extra:
        raise bad_request(f"Invalid value for field '{field}': an accelerator network profile sets up the node pool's networks itself "
                          "and cannot be given with additionalNodeNetworkConfigs.")


def check_autoscaling(autoscaling, field):
    if not autoscaling:
        return None
    out = dict(autoscaling)
    if out.get("enabled"):
        low = integer(out.get("minNodeCount"), f"{field}.minNodeCount", 0, 1000, 0)
        high = integer(out.get("maxNodeCount"), f"{field}.maxNodeCount", 0, 1000, 0)
        total_low = integer(out.get("totalMinNodeCount"), f"{field}.totalMinNodeCount", 0, 10000, 0)
        total_high = integer(out.get("totalMaxNodeCount"), f"{field}.totalMaxNodeCount", 0, 10000, 0)
        if (low or high) and (total_low or total_high):
            raise bad_request(f"Invalid value for field '{field}': per-zone and total node counts are exclusive.")
        if max(high, total_high) < 1 or high < low or total_high < total_low:
            raise bad_request(f"Invalid value for field '{field}': the maximum node count must be at least 1 and at least the minimum.")
        out.setdefault("locationPolicy", "BALANCED")
    return out


def check_authorized_networks(config, field):
    blocks = (config or {}).get("cidrBlocks") or []
    if len(blocks) > 50:
        raise bad_request(f"Invalid value for field '{field}.cidrBlocks': at most 50 blocks.")
    for i, block in enumerate(blocks):
        try:
            ipaddress.ip_network(block.get("cidrBlock"))
        except (TypeError, ValueError):
            raise bad_request(f"Invalid value for field '{field}.cidrBlocks[{i}].cidrBlock': '{block.get('cidrBlock')}'. It must be a CIDR block.")
    return config


def api_server(project, location, name):
    """The key of a cluster's Kubernetes API server."""
    return f"gke/{project}/{location}/{name}"


def publish_nodes(project, cluster, pool_name, pool):
    """A node pool's VMs as Nodes of its cluster's API server, labelled as GKE labels them
    (cloud.google.com/gke-nodepool, machine type, architecture, zone, the pool's labels, managed
    DRANET's driver label), with its taints, GKE's own nvidia.com/gpu taint on GPU pools and its
    kubernetes.io/arch=arm64 taint on Arm ones; none for a pool that is gone (`pool` None)."""
    nodes = []
    if pool is not None and pool.get("status") == "RUNNING":
        config = pool.get("config", {})
        accelerators = config.get("accelerators", [])
        gpus = sum(int(a.get("acceleratorCount", 0)) for a in accelerators)
        # GKE installs the driver and runs its own device plugin unless the pool turns it off.
        driver = all((a.get("gpuDriverInstallationConfig") or {}).get("gpuDriverVersion", "INSTALLATION_DISABLED")
                     != "INSTALLATION_DISABLED" for a in accelerators)
        taints = [{"key": t["key"], "value": t.get("value", ""), "effect": TAINT_EFFECTS.get(t.get("effect"), t.get("effect"))}
                  for t in config.get("taints", [])]
        if gpus:
            taints.append({"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"})
        machine = config.get("machineType", "")
        if machine in ARM64:  # GKE's default architecture taint on Arm nodes
            taints.append({"key": "kubernetes.io/arch", "value": "arm64", "effect": "NoSchedule"})
        system = {"node.kubernetes.io/instance-type": machine, "kubernetes.io/arch": "arm64" if machine in ARM64 else "amd64"}
        if pool["networkConfig"].get("acceleratorNetworkProfile"):
            system["cloud.google.com/gke-networking-dra-driver"] = "true"
        for zone in pool["locations"]:
            for i in range(pool["_size"]):
                labels = {**config.get("labels", {}), **system, "topology.kubernetes.io/zone": zone, "forge.emulator/gpus": str(gpus)}
                allocatable = {"cpu": "208", "memory": "1800Gi", "pods": "110"}
                if gpus:
                    labels["cloud.google.com/gke-accelerator"] = accelerators[0].get("acceleratorType", "")
                    if driver:
                        allocatable["nvidia.com/gpu"] = str(gpus)
                name = f"gke-{cluster['name'][:12]}-{pool_name[:12]}-{zone[-1]}{i:03d}"
                nodes.append((name, labels, taints, allocatable))
    try:
        kubernetes.set_nodes(api_server(project, cluster["location"], cluster["name"]), "cloud.google.com/gke-nodepool", pool_name, nodes)
    except KeyError:
        pass  # the cluster's server is gone


def publish_kinds(project, cluster):
    """The kinds the cluster's API server serves besides the built-in ones: multi-networking's
    while the cluster has it on, and DRA's GA `resource.k8s.io/v1` from GKE 1.34 on."""
    kinds = MULTI_NETWORKING_KINDS if cluster["networkConfig"].get("enableMultiNetworking") else []
    if version_key(cluster["currentMasterVersion"])[:2] >= (1, 34):
        kinds = kinds + DRA_V1_KINDS
    try:
        kubernetes.set_kinds(api_server(project, cluster["location"], cluster["name"]), kinds)
    except KeyError:
        pass  # the cluster's server is gone


class Container(GoogleApi):
    service, prefix = "container", "/container/v1/"

    def __init__(self, compute):
        super().__init__()
        self.compute = compute
        compute.dependents.append(self.users_of)
        compute.instance_groups.append(self.instance_group)
        compute.reservation_users.append(self.reservation_nodes)

    def route(self, method, path):
        match = PATH.fullmatch(path)
        name = None
        if match:
            collection = "operations" if match["operations"] else "nodePools" if match["pools"] else "clusters"
            named = (match["operation"] if collection == "operations" else match["pool"] if match["pools"] else match["cluster"]) is not None
            name = ROUTES.get((collection, named, method, match["verb"]))
        if name is None:
            raise GoogleError(404, f"The requested URL /container/v1/{path} ({method}) was not found on this server.", "notFound")
        handler = getattr(self, name.replace("clusters.nodePools.", "pool_").replace("clusters.", "cluster_").replace("operations.", "operation_"))
        params = {k: match[k] for k in ("location", "cluster", "pool", "operation")}
        return match["project"], f"locations/{match['location']}", name, handler, params, method != "GET"

    def instance_group(self, project, zone, name):
        """(target size, base instance name) of the node pool's instance group `name` in `zone`,
        as Compute shows it: the pool's size per zone (read without this API's lock, as
        `users_of` is: Compute asks while holding its own)."""
        store = self.stores.get(project)
        for path, record in list(store.items.items()) if store else []:
            if "/nodePools/" in path and any(url.endswith(f"/zones/{zone}/instanceGroupManagers/{name}") for url in record.get("instanceGroupUrls", [])):
                return record["_size"], name.removesuffix("-grp")
        return None

    # --- reservations the pools consume ---------------------------------------------------------

    @staticmethod
    def reserved(project, pool):
        """The name of the reservation of `project` a pool's SPECIFIC_RESERVATION affinity names;
        None for none, or another project's (shared) reservation."""
        affinity = pool["config"].get("reservationAffinity") or {}
        if affinity.get("consumeReservationType") != "SPECIFIC_RESERVATION":
            return None
        match = RESERVATION_VALUE.fullmatch(str((affinity.get("values") or [""])[0]))
        return match["name"] if match and match["project"] in (None, project) else None

    def held(self, project, zone, name, pools):
        """The nodes `pools` hold in `zone` of the project's reservation `name`: every pool on it
        but a failed one."""
        return sum(p["_size"] for p in pools if p["status"] != "ERROR" and zone in p["locations"] and self.reserved(project, p) == name)

    def reservation_nodes(self, project, zone, name):
        """The nodes the project's pools hold of a reservation, as Compute shows them in its
        inUseCount (read without this API's lock, as `users_of` is)."""
        store = self.stores.get(project)
        return self.held(project, zone, name, [r for p, r in list(store.items.items()) if "/nodePools/" in p] if store else [])

    def reservation_error(self, call, pool, size=None, others=(), resized=None):
        """The error a pool's create (or resize to `size` nodes per zone) ends with for its
        SPECIFIC_RESERVATION, worded as GKE words it, as (code, message, condition): a
        reservation the project had in the zone but has no more is not found; one not usable yet
        (before its future reservation's start) is not active; one short of the nodes (its count
        less what other pools hold, `others` besides the stored ones) or of another machine type
        is insufficient; `resized`, the stored pool a resize changes, holds none. A pool of no
        nodes consumes nothing but must name a reservation that exists. A name the project never
        had is accepted."""
        name = self.reserved(call.project, pool)
        if name is None:
            return None
        size = pool["_size"] if size is None else size
        machine = pool["config"]["machineType"]
        for zone in pool["locations"]:
            record, had_any = known_reservation(self.compute, call.project, zone, name)
            if not had_any:
                return None
            if record is None:
                return "NOT_FOUND", f'Google Compute Engine: reservation "{name}" not found for node pool "{pool["name"]}" at zone "{zone}".', "UNKNOWN"
            if size == 0:
                continue
            if record["status"] != "READY":
                return ("FAILED_PRECONDITION", f'Google Compute Engine: reservation "{name}" is not active for node pool "{pool["name"]}" at zone "{zone}": '
                        f'it cannot be consumed before its start time (status {record["status"]}).', "UNKNOWN")
            pools = [r for p, r in call.store.items.items() if "/nodePools/" in p and r is not resized] + list(others)
            held = self.held(call.project, zone, name, pools)
            spec = record["specificReservation"]
            left = int(spec["count"]) - held if spec["instanceProperties"]["machineType"] == machine else 0
            if size > left:
                return ("RESOURCE_EXHAUSTED", f'Reservation does not have enough resources for the request: specific reservation "{name}" is insufficient '
                        f'for node pool "{pool["name"]}" at zone "{zone}": required {size} and short of {size - max(left, 0)} VM count of machine type {machine}.', "UNKNOWN")
        return None

    # --- operations ------------------------------------------------------------------------

    def render_operation(self, op, call):
        status = op.status(call.now)
        location = op.scope.split("/", 1)[1]
        out = {"name": op.name, "zone": location, "location": location, "operationType": op.operation_type, "status": status,
               "selfLink": f"{LINK}projects/{op.project}/{op.scope}/operations/{op.name}",
               "targetLink": f"{LINK}projects/{op.project}/{op.target}", "startTime": zulu(op.inserted)}
        if status == "DONE":
            out["endTime"] = zulu(op.ended())
            if op.error:
                code, message, condition = op.error
                out.update(error={"code": RPC_CODE.numbers[code], "message": message}, statusMessage=message)
                conditions = "nodepoolConditions" if "/nodePools/" in op.target else "clusterConditions"
                out[conditions] = [{"code": condition, "message": message, "canonicalCode": code}]
        return write_enums(out, OPERATION, call.numbers)

    def failure(self, call, code, message):
        return rpc_failure(call, code, message)

    def operation_get(self, call):
        op = call.store.operations.get((call.scope, call.params["operation"]))
        if op is None:
            raise GoogleError(404, f"Not found: projects/{call.project}/{call.scope}/operations/{call.params['operation']}.", "notFound")
        return op

    operation_list = GoogleApi.listed_operations

    # --- the store: records, what runs on them, how they show --------------------------------

    def region(self, call):
        if call.params["location"] == "-":
            raise bad_request("Location \"-\" is valid only in lists.")
        return region_of(call.params["location"])

    def cluster(self, call):
        path = f"{call.scope}/clusters/{call.params['cluster']}"
        if path not in call.store.items:
            raise GoogleError(404, f"Not found: projects/{call.project}/{path}.", "notFound")
        return path, call.store.items[path]

    def pool(self, call):
        cluster_path, cluster = self.cluster(call)
        path = f"{cluster_path}/nodePools/{call.params['pool']}"
        if path not in call.store.items:
            raise GoogleError(404, f"Not found: projects/{call.project}/{path}.", "notFound")
        return cluster_path, cluster, path, call.store.items[path]

    @staticmethod
    def running(store, path):
        """The operations under way on a cluster or pool and what is below it."""
        return [op for op in store.running if op.target == path or op.target.startswith(path + "/")]

    def idle(self, call, cluster_path):
        """GKE runs one operation at a time per cluster."""
        running = self.running(call.store, cluster_path)
        if running:
            raise busy(running[0], cluster_path.rsplit("/", 1)[1])

    @staticmethod
    def pools_of(store, cluster_path):
        return [(p, r) for p, r in store.items.items() if p.startswith(cluster_path + "/nodePools/")]

    def show_pool(self, call, path, pool):
        out = visible(pool)
        if out["status"] == "RUNNING" and self.running(call.store, path):
            out["status"] = "RECONCILING"
        return out

    def show_cluster(self, call, path, cluster):
        out = visible(cluster)
        pools = self.pools_of(call.store, path)
        if out["status"] == "RUNNING" and any(op.operation_type in RECONCILING for op in self.running(call.store, path)):
            out["status"] = "RECONCILING"
        out["currentNodeCount"] = sum(p["_size"] * len(p["locations"]) for _, p in pools if p["status"] == "RUNNING")
        if pools:
            out["nodePools"] = [self.show_pool(call, p, r) for p, r in pools]
        return out

    def network(self, call, value, field):
        path = compute_path(call.project, value, "networks")
        if path is None or self.compute.lookup(call.project, path) is None:
            raise bad_request(f'Project "{call.project}" has no network named "{str(value).rsplit("/", 1)[-1]}".') if value else required(field)
        return path

    def profile(self, call, network):
        """The RDMA network profile (gcp_compute.Profile) the network at `network` was made
        with, None if none."""
        return profile_of(self.compute.lookup(call.project, network))

    def resource_policy(self, call, value, region, machine, field):
        """The path of the resource policy a pool's placement names (by name, or its path in the
        project), which must be a placement policy of the cluster's region; None if it names
        none. A machine type of WORKLOAD_TOPOLOGY needs a HIGH_THROUGHPUT workload policy of its
        accelerator topology."""
        path = compute_path(call.project, value, "resourcePolicies", region) if value else None
        policy = self.compute.lookup(call.project, path) if path and path.startswith(f"regions/{region}/") else None
        if value and policy is None:
            raise bad_request(f"Invalid value for field '{field}': resource policy \"{value}\" not found in project \"{call.project}\", region \"{region}\".")
        if policy is not None and not (policy.get("workloadPolicy") or policy.get("groupPlacementPolicy")):
            raise bad_request(f"Invalid value for field '{field}': resource policy \"{value}\" is not a placement policy (workloadPolicy or groupPlacementPolicy).")
        topology = WORKLOAD_TOPOLOGY.get(machine)
        workload = (policy or {}).get("workloadPolicy") or {}
        if topology and (workload.get("type"), workload.get("acceleratorTopology")) != ("HIGH_THROUGHPUT", topology):
            raise bad_request(f"Invalid value for field '{field}': machine type {machine} needs a placement policyName naming a workload policy "
                              f"of type HIGH_THROUGHPUT with accelerator topology {topology}.")
        return path if value else None

    def subnetwork(self, call, value, network, region, field):
        if not value:
            raise required(field)
        path = compute_path(call.project, value, "subnetworks", region)
        subnet = self.compute.lookup(call.project, path) if path else None
        if subnet is None or not path.startswith(f"regions/{region}/"):
            raise bad_request(f'Subnetwork "{value}" does not exist in region "{region}" of project "{call.project}".')
        if subnet["network"] != f"{COMPUTE}projects/{call.project}/{network}":
            raise bad_request(f'Subnetwork "{value}" is not in network "{network.rsplit("/", 1)[1]}".')
        return path, subnet

    # --- clusters ----------------------------------------------------------------------------

    def cluster_get(self, call):
        return write_enums(self.show_cluster(call, *self.cluster(call)), CLUSTER, call.numbers)

    def cluster_list(self, call):
        prefix = "" if call.params["location"] == "-" else call.scope + "/"
        clusters = [self.show_cluster(call, p, r) for p, r in call.store.items.items() if p.startswith(prefix) and "/nodePools/" not in p]
        return {"clusters": write_enums(clusters, CLUSTER, call.numbers)} if clusters else {}

    def cluster_create(self, call):
        region = self.region(call)
        check_fields(call.body, ("cluster", "parent", "projectId", "zone"))
        spec = read_enums(call.body.get("cluster"), CLUSTER, "cluster")
        if not isinstance(spec, dict):
            raise required("cluster")
        check_name(spec.get("name"), "cluster.name", 40)
        path = f"{call.scope}/clusters/{spec['name']}"
        if path in call.store.items:
            raise GoogleError(409, f"Already exists: projects/{call.project}/{path}.", "alreadyExists")
        cluster = self.check_cluster(call, region, {k: v for k, v in spec.items() if k not in CLUSTER_OUTPUT})
        pool_specs = spec.get("nodePools") or []
        if pool_specs and (spec.get("initialNodeCount") or spec.get("nodeConfig")):
            raise bad_request("Cluster.node_pools and Cluster.initial_node_count or Cluster.node_config cannot be given together.")
        if not pool_specs:
            if integer(spec.get("initialNodeCount"), "cluster.initialNodeCount", 0, 1000, 0) < 1:
                raise bad_request("Cluster.initial_node_count must be greater than zero.")
            pool_specs = [{"name": "default-pool", "initialNodeCount": spec["initialNodeCount"], "config": spec.get("nodeConfig") or {}}]
        pools = [self.check_pool(call, cluster, p, f"cluster.nodePools[{i}]") for i, p in enumerate(pool_specs)]
        if len({p["name"] for p in pools}) != len(pools):
            raise bad_request("Invalid value for field 'cluster.nodePools': node pool names must be unique.")
        error = next((e for i, pool in enumerate(pools) if (e := self.reservation_error(call, pool, others=pools[:i]))), None)
        call.store.items[path] = cluster
        for pool in pools:
            call.store.items[f"{path}/nodePools/{pool['name']}"] = pool
        publish_kinds(call.project, cluster)
        call.zone = cluster["locations"][0]

        def created():
            for record in [cluster] + pools:
                record["status"] = "RUNNING"
            for pool in pools:
                publish_nodes(call.project, cluster, pool["name"], pool)

        def failed(error):
            cluster.update(status="ERROR", statusMessage=error[1], conditions=[{"code": error[2], "message": error[1], "canonicalCode": error[0]}])
            for pool in pools:
                pool.update(status="ERROR", statusMessage=error[1])
        return call.start("CREATE_CLUSTER", path, None, created, error=error, on_error=failed)

    def check_cluster(self, call, region, spec):
        """A new cluster's record from its spec (checked, with GKE's defaults and outputs)."""
        location, name = call.params["location"], spec["name"]
        if (spec.get("autopilot") or {}).get("enabled"):
            raise bad_request("Autopilot clusters are not emulated.")
        zonal = location != region
        zones = check_zones(spec.get("locations") or ([location] if zonal else [f"{region}-{z}" for z in "abc"]), region, "cluster.locations")
        if zonal and location not in zones:
            raise bad_request(f"Invalid value for field 'cluster.locations': it must include the cluster's zone {location}.")
        network = self.network(call, spec.get("network") or "default", "cluster.network")
        profile = self.profile(call, network)
        if profile:
            raise bad_request(f'Network "{network.rsplit("/", 1)[1]}" has the RDMA network profile "{profile.name}": '
                              "the nodes' primary interface needs a network without one.")
        subnet_path, subnet = self.subnetwork(call, spec.get("subnetwork"), network, region, "cluster.subnetwork")
        network_link = f"{COMPUTE}projects/{call.project}/{network}"
        policy = dict(spec.get("ipAllocationPolicy") or {})
        policy["useIpAliases"] = policy.get("useIpAliases", not policy.get("useRoutes", False))
        secondary = {r["rangeName"]: r["ipCidrRange"] for r in subnet.get("secondaryIpRanges") or []}
        for kind, key, cidr_key, default in (("Pod", "clusterSecondaryRangeName", "clusterIpv4CidrBlock", "10.4.0.0/14"),
                                             ("Services", "servicesSecondaryRangeName", "servicesIpv4CidrBlock", "34.118.224.0/20")):
            range_name = policy.get(key)
            if range_name and range_name not in secondary:
                raise bad_request(f'{kind} secondary range "{range_name}" not found in network "{network_link}", subnetwork "{subnet["name"]}".')
            cidr = secondary[range_name] if range_name else policy.get(cidr_key) or default
            policy[cidr_key] = policy[cidr_key.replace("Block", "")] = cidr
        if policy.get("clusterSecondaryRangeName") and policy.get("clusterSecondaryRangeName") == policy.get("servicesSecondaryRangeName"):
            raise bad_request("Invalid value for field 'cluster.ipAllocationPolicy': the pod and services secondary ranges must differ.")
        if policy["useIpAliases"]:
            policy.setdefault("stackType", "IPV4")
        net_config = dict(spec.get("networkConfig") or {})
        if net_config.get("enableMultiNetworking"):
            if net_config.get("datapathProvider") != "ADVANCED_DATAPATH" or not policy["useIpAliases"]:
                raise bad_request("Multi-networking requires a VPC-native cluster with networkConfig.datapathProvider ADVANCED_DATAPATH.")
        net_config.update(network=f"projects/{call.project}/{network}", subnetwork=f"projects/{call.project}/{subnet_path}")
        channel = dict(spec["releaseChannel"]) if spec.get("releaseChannel") is not None else {"channel": "REGULAR"}
        version = resolve_version(spec.get("initialClusterVersion"), channel.get("channel", "UNSPECIFIED"), "Master version")
        pool = (spec.get("workloadIdentityConfig") or {}).get("workloadPool")
        if pool and pool != f"{call.project}.svc.id.goog":
            raise bad_request(f"Invalid value for field 'cluster.workloadIdentityConfig.workloadPool': '{pool}'. It must be '{call.project}.svc.id.goog'.")
        served, ca = kubernetes.serve(api_server(call.project, location, spec["name"]))
        endpoint = served.removeprefix("https://")  # GKE gives a host, not a URL
        private = dict(spec.get("privateClusterConfig") or {})
        if private:
            if private.get("enablePrivateEndpoint") and not private.get("enablePrivateNodes"):
                raise bad_request("Invalid value for field 'cluster.privateClusterConfig': a private endpoint requires private nodes.")
            block = private.get("masterIpv4CidrBlock")
            try:
                master = ipaddress.IPv4Network(block or "172.16.0.0/28")
            except ValueError:
                master = None
            if master is None or master.prefixlen != 28 or not master.is_private:
                raise bad_request(f"Invalid value for field 'cluster.privateClusterConfig.masterIpv4CidrBlock': '{block}'. It must be a private /28.")
            private.update(privateEndpoint=str(master[2]), publicEndpoint=endpoint)
            if private.get("enablePrivateEndpoint"):
                endpoint = private["privateEndpoint"]
        labels = spec.get("resourceLabels") or {}
        check_labels(labels, "cluster.resourceLabels")
        link_scope = "zones" if zonal else "locations"
        cluster = {k: v for k, v in spec.items() if k not in ("nodePools", "initialNodeCount", "nodeConfig")}
        cluster.update(
            network=network.rsplit("/", 1)[1], subnetwork=subnet_path.rsplit("/", 1)[1], locations=zones, location=location, zone=location,
            ipAllocationPolicy=policy, networkConfig=net_config, releaseChannel=channel, initialClusterVersion=spec.get("initialClusterVersion") or version,
            currentMasterVersion=version, currentNodeVersion=version, labelFingerprint=fingerprint(labels),
            addonsConfig={**DEFAULT_ADDONS, **(spec.get("addonsConfig") or {})},
            loggingService=spec.get("loggingService") or "logging.googleapis.com/kubernetes",
            monitoringService=spec.get("monitoringService") or "monitoring.googleapis.com/kubernetes",
            clusterIpv4Cidr=policy["clusterIpv4Cidr"], servicesIpv4Cidr=policy["servicesIpv4Cidr"], nodeIpv4CidrSize=24,
            endpoint=endpoint, masterAuth={"clusterCaCertificate": base64.b64encode(ca).decode()}, id=secrets.token_hex(32), etag=secrets.token_hex(8),
            selfLink=f"{LINK}projects/{call.project}/{link_scope}/{location}/clusters/{name}", createTime=zulu(call.now), status="PROVISIONING",
            _uses={network, subnet_path})
        authorized = check_authorized_networks(spec.get("masterAuthorizedNetworksConfig"), "cluster.masterAuthorizedNetworksConfig")
        for key, value in (("privateClusterConfig", private), ("resourceLabels", labels), ("masterAuthorizedNetworksConfig", authorized)):
            cluster[key] = value
            if not value:
                del cluster[key]
        return cluster

    def cluster_update(self, call):
        path, cluster = self.cluster(call)
        check_fields(call.body, ("update",) + CLUSTER_PATH_FIELDS)
        update = read_enums(call.body.get("update") or {}, CLUSTER_UPDATE, "update")
        fields = [k for k in update if k != "etag"]
        if not fields:
            raise required("update")
        if len(fields) > 1:
            raise bad_request("Exactly one update can be applied to a cluster with each request, so at most one field can be provided.")
        key, value = fields[0], update[fields[0]]
        if key not in DESIRED:
            raise bad_request(f"Update field '{key}' is not emulated.")
        changed = copy.deepcopy(cluster)
        if key == "desiredMasterAuthorizedNetworksConfig":
            changed["masterAuthorizedNetworksConfig"] = check_authorized_networks(value, "update.desiredMasterAuthorizedNetworksConfig")
        elif key == "desiredAddonsConfig":
            changed["addonsConfig"] = {**cluster["addonsConfig"], **value}
        elif key == "desiredReleaseChannel":
            changed["releaseChannel"] = value
        elif key == "desiredWorkloadIdentityConfig":
            if value.get("workloadPool") not in (None, "", f"{call.project}.svc.id.goog"):
                raise bad_request(f"Invalid value for field 'update.desiredWorkloadIdentityConfig.workloadPool': '{value['workloadPool']}'. It must be '{call.project}.svc.id.goog'.")
            changed["workloadIdentityConfig"] = value
        elif key == "desiredMasterVersion":
            version = resolve_version(value, cluster["releaseChannel"].get("channel"), "Master version")
            if earlier_minor(version, cluster["currentMasterVersion"]):
                raise bad_request(f'Master version "{value}" is of an earlier minor version than the current {cluster["currentMasterVersion"]}: '
                                  "the control plane cannot be downgraded to an earlier minor version.")
            changed["currentMasterVersion"] = version
        elif key == "desiredLocations":
            changed["locations"] = check_zones(value, region_of(cluster["location"]), "update.desiredLocations")
        elif key == "desiredEnableMultiNetworking":
            if value and cluster["networkConfig"].get("datapathProvider") != "ADVANCED_DATAPATH":
                raise bad_request("Multi-networking requires networkConfig.datapathProvider ADVANCED_DATAPATH.")
            if not value and any(r["networkConfig"].get("additionalNodeNetworkConfigs") for _, r in self.pools_of(call.store, path)):
                raise bad_request("Multi-networking cannot be disabled while node pools have additional node networks.")
            changed["networkConfig"]["enableMultiNetworking"] = bool(value)
        elif key == "desiredEnablePrivateEndpoint":
            if value and not (cluster.get("privateClusterConfig") or {}).get("enablePrivateNodes"):
                raise bad_request("A private endpoint requires private nodes.")
            changed.setdefault("privateClusterConfig", {})["enablePrivateEndpoint"] = bool(value)
        self.idle(call, path)
        return self.change(call, "UPGRADE_MASTER" if key == "desiredMasterVersion" else "UPDATE_CLUSTER", path, changed)

    def cluster_setResourceLabels(self, call):
        path, cluster = self.cluster(call)
        check_fields(call.body, ("resourceLabels", "labelFingerprint") + CLUSTER_PATH_FIELDS)
        labels = call.body.get("resourceLabels") or {}
        check_labels(labels, "resourceLabels")
        if not call.body.get("labelFingerprint"):
            raise required("labelFingerprint")
        if call.body["labelFingerprint"] != cluster["labelFingerprint"]:
            raise precondition(f"Labels could not be set: labelFingerprint '{call.body['labelFingerprint']}' is not the current one ('{cluster['labelFingerprint']}').")
        self.idle(call, path)
        changed = dict(cluster, resourceLabels=labels, labelFingerprint=fingerprint(labels))
        if not labels:
            del changed["resourceLabels"]
        return self.change(call, "SET_LABELS", path, changed)

    def cluster_setAddons(self, call):
        path, cluster = self.cluster(call)
        check_fields(call.body, ("addonsConfig",) + CLUSTER_PATH_FIELDS)
        if not isinstance(call.body.get("addonsConfig"), dict):
            raise required("addonsConfig")
        self.idle(call, path)
        return self.change(call, "UPDATE_CLUSTER", path, dict(cluster, addonsConfig={**cluster["addonsConfig"], **call.body["addonsConfig"]}))

    def change(self, call, operation_type, path, changed, error=None):
        """Start an operation that replaces a cluster's or pool's record when it ends (unless it
        ends with `error`)."""
        changed["etag"] = secrets.token_hex(8)
        def changed_now():
            if path in call.store.items:
                call.store.items[path] = changed
                if "/nodePools/" in path:
                    publish_nodes(call.project, call.store.items[path.split("/nodePools/")[0]], changed["name"], changed)
                else:
                    publish_kinds(call.project, changed)
        return call.start(operation_type, path, None, changed_now, error=error)

    def cluster_delete(self, call):
        path, cluster = self.cluster(call)
        self.idle(call, path)
        records = [cluster] + [r for _, r in self.pools_of(call.store, path)]
        before = [r["status"] for r in records]
        for record in records:
            record["status"] = "STOPPING"

        def deleted():
            for p in [path] + [p for p, _ in self.pools_of(call.store, path)]:
                del call.store.items[p]
            kubernetes.forget(api_server(call.project, cluster["location"], cluster["name"]))

        def failed(error):
            for record, status in zip(records, before):
                record["status"] = status
        return call.start("DELETE_CLUSTER", path, None, deleted, on_error=failed)

    # --- node pools --------------------------------------------------------------------------

    def pool_get(self, call):
        _, _, path, pool = self.pool(call)
        return write_enums(self.show_pool(call, path, pool), NODE_POOL, call.numbers)

    def pool_list(self, call):
        path, _ = self.cluster(call)
        pools = [self.show_pool(call, p, r) for p, r in self.pools_of(call.store, path)]
        return {"nodePools": write_enums(pools, NODE_POOL, call.numbers)} if pools else {}

    def pool_create(self, call):
        cluster_path, cluster = self.cluster(call)
        check_fields(call.body, ("nodePool", "parent", "projectId", "zone", "clusterId"))
        spec = read_enums(call.body.get("nodePool"), NODE_POOL, "node_pool")
        if not isinstance(spec, dict):
            raise required("nodePool")
        pool = self.check_pool(call, cluster, spec, "nodePool")
        path = f"{cluster_path}/nodePools/{pool['name']}"
        if path in call.store.items:
            raise GoogleError(409, f"Already exists: projects/{call.project}/{path}.", "alreadyExists")
        self.idle(call, cluster_path)
        error = self.reservation_error(call, pool)
        call.store.items[path] = pool
        call.zone = pool["locations"][0]

        def failed(error):
            pool.update(status="ERROR", statusMessage=error[1], conditions=[{"code": error[2], "message": error[1], "canonicalCode": error[0]}])
        def created():
            pool["status"] = "RUNNING"
            publish_nodes(call.project, cluster, pool["name"], pool)
        return call.start("CREATE_NODE_POOL", path, None, created, error=error, on_error=failed)

    def check_pool(self, call, cluster, spec, field):
        """A new node pool's record from its spec (checked, with GKE's defaults and outputs)."""
        spec = {k: v for k, v in spec.items() if k not in POOL_OUTPUT}
        check_name(spec.get("name"), f"{field}.name", 40)
        region = region_of(cluster["location"])
        zones = check_zones(spec.get("locations") or cluster["locations"], region, f"{field}.locations")
        config = self.check_config(cluster, dict(spec.get("config") or {}), f"{field}.config")
        count = integer(spec.get("initialNodeCount"), f"{field}.initialNodeCount", 0, 1000, 0)
        autoscaling = check_autoscaling(spec.get("autoscaling"), f"{field}.autoscaling")
        placement = spec.get("placementPolicy") or {}
        if placement.get("type") == "COMPACT" and len(zones) != 1:
            raise bad_request(f"Invalid value for field '{field}.placementPolicy': COMPACT placement needs exactly one node location, not {len(zones)}.")
        policy = self.resource_policy(call, placement.get("policyName"), region, config["machineType"], f"{field}.placementPolicy.policyName")
        if (spec.get("queuedProvisioning") or {}).get("enabled") and (not (autoscaling or {}).get("enabled") or count):
            raise bad_request(f"Invalid value for field '{field}.queuedProvisioning': queued provisioning needs autoscaling and no initial nodes.")
        uses = {policy} if policy else set()
        network = self.check_node_network(call, cluster, dict(spec.get("networkConfig") or {}), config, zones, uses, f"{field}.networkConfig")
        version = self.node_version(spec.get("version"), cluster)
        pool = dict(spec, config=config, initialNodeCount=count, locations=zones, networkConfig=network, version=version,
                    management=check_auto_upgrade(cluster, spec.get("management") or {"autoUpgrade": True, "autoRepair": True}, f"{field}.management"),
                    upgradeSettings=spec.get("upgradeSettings") or {"maxSurge": 1, "strategy": "SURGE"},
                    maxPodsConstraint=spec.get("maxPodsConstraint") or {"maxPodsPerNode": "110"}, podIpv4CidrSize=24,
                    selfLink=f"{cluster['selfLink']}/nodePools/{spec['name']}", etag=secrets.token_hex(8), status="PROVISIONING",
                    instanceGroupUrls=[f"{COMPUTE}projects/{call.project}/zones/{z}/instanceGroupManagers/gke-{cluster['name']}-{spec['name']}-{secrets.token_hex(4)}-grp" for z in zones],
                    _size=count, _uses=uses)
        if autoscaling:
            pool["autoscaling"] = autoscaling
        return pool

    @staticmethod
    def node_version(given, cluster):
        """A pool's version: the master's by default, never newer."""
        if given in (None, "", "-", "latest"):
            return cluster["currentMasterVersion"]
        version = resolve_version(given, None, "Node version")
        if version_key(version) > version_key(cluster["currentMasterVersion"]):
            raise bad_request(f'Node version "{given}" is newer than the master\'s {cluster["currentMasterVersion"]}.')
        return version

    def check_config(self, cluster, config, field):
        machine = config.setdefault("machineType", "e2-medium")
        if not isinstance(machine, str) or not MACHINE.fullmatch(machine):
            raise bad_request(f"Invalid value for field '{field}.machineType': '{machine}'.")
        config["diskSizeGb"] = integer(config.get("diskSizeGb"), f"{field}.diskSizeGb", 10, 65536, 100)
        accelerators = check_accelerators(machine, config.get("accelerators") or [], f"{field}.accelerators")
        if accelerators:
            config["accelerators"] = accelerators
        config["taints"] = check_taints(config.get("taints"), f"{field}.taints")
        if not config["taints"]:
            del config["taints"]
        check_labels(config.get("resourceLabels") or {}, f"{field}.resourceLabels")
        affinity = config.get("reservationAffinity") or {}
        if affinity.get("consumeReservationType") == "SPECIFIC_RESERVATION" and (affinity.get("key") != RESERVATION_KEY or not affinity.get("values")):
            raise bad_request(f"Invalid value for field '{field}.reservationAffinity': SPECIFIC_RESERVATION needs key '{RESERVATION_KEY}' and the reservation's name in values.")
        if "workloadIdentityConfig" in cluster:
            config.setdefault("workloadMetadataConfig", {"mode": "GKE_METADATA"})
        for key, default in (("diskType", "hyperdisk-balanced" if machine in HYPERDISK_ONLY else "pd-balanced"), ("imageType", "COS_CONTAINERD"),
                             ("oauthScopes", DEFAULT_SCOPES), ("serviceAccount", "default"), ("metadata", {"disable-legacy-endpoints": "true"}),
                             ("shieldedInstanceConfig", {"enableIntegrityMonitoring": True})):
            config.setdefault(key, default)
        check_machine(config, f"{field}.")
        return config

    def check_node_network(self, call, cluster, network_config, config, zones, uses, field):
        """A pool's networkConfig: its additional networks, with their subnetworks in the
        cluster's region, noted in `uses`: a regular one is a VPC of its own (and on an RDMA
        machine only its second gVNIC's), one made with an RDMA network profile an RDMA NIC of
        the machine, in the profile's zone (several may share a network, each on a subnetwork of
        its own); or managed DRANET's accelerator network profile."""
        region, machine = region_of(cluster["location"]), config["machineType"]
        extra = network_config.get("additionalNodeNetworkConfigs") or []
        if network_config.get("acceleratorNetworkProfile"):
            check_dranet(cluster, machine, network_config["acceleratorNetworkProfile"], extra, f"{field}.acceleratorNetworkProfile")
        if extra:
            if not cluster["networkConfig"].get("enableMultiNetworking"):
                raise bad_request(f"Invalid value for field '{field}.additionalNodeNetworkConfigs': the cluster does not have networkConfig.enableMultiNetworking.")
            if not (config.get("gvnic") or {}).get("enabled"):
                raise bad_request(f"Invalid value for field '{field}.additionalNodeNetworkConfigs': additional node networks need gVNIC (config.gvnic.enabled).")
        nics = []  # (field, network, subnetwork, profile) of each entry
        for i, entry in enumerate(extra):
            where = f"{field}.additionalNodeNetworkConfigs[{i}]"
            network = self.network(call, entry.get("network"), f"{where}.network")
            subnet, _ = self.subnetwork(call, entry.get("subnetwork"), network, region, f"{where}.subnetwork")
            nics.append((where, network, subnet, self.profile(call, network)))
        rdma = sum(1 for *_, profile in nics if profile)
        if rdma > RDMA_NICS.get(machine, rdma):
            raise bad_request(f"Invalid value for field '{field}.additionalNodeNetworkConfigs': machine type {machine} has {RDMA_NICS[machine]} RDMA NICs, "
                              f"not {rdma}.")
        seen, subnets, out = {compute_path(call.project, cluster["network"], "networks")}, set(), []
        for where, network, subnet, profile in nics:
            name = network.rsplit("/", 1)[1]
            if profile is None and network in seen:
                raise bad_request(f"Invalid value for field '{where}.network': each additional node network must be a VPC other than the cluster's and the other additional ones.")
            if profile is None and machine in RDMA_NICS and len(seen) >= GVNICS:
                raise bad_request(f"Invalid value for field '{where}.network': machine type {machine} has {GVNICS} gVNIC NICs, the primary and one more, "
                                  f"and network {name} has no RDMA network profile: an RDMA NIC cannot attach to a non-RDMA network.")
            if profile is None:
                seen.add(network)
            elif profile.subtype != "ROCE" or machine not in RDMA_NICS:
                raise bad_request(f"Invalid value for field '{where}.network': network {name} has the RDMA network profile {profile.name}, "
                                  f"and machine type {machine} has no NIC for it (RoCE networks take the MRDMA NICs of {', '.join(RDMA_NICS)}).")
            elif subnet in subnets:
                raise bad_request(f"Invalid value for field '{where}.subnetwork': each RDMA NIC needs a subnetwork of its own.")
            else:
                subnets.add(subnet)
                for zone in zones:
                    if zone != profile.zone:
                        raise bad_request(f"Invalid value for field '{where}.network': the node pool's locations must be zone {profile.zone} only, "
                                          f"not {zone}: network {name} is restricted to zone {profile.zone}.")
            uses.update((network, subnet))
            out.append({"network": name, "subnetwork": subnet.rsplit("/", 1)[1]})
        policy = cluster["ipAllocationPolicy"]
        network_config.update(podIpv4CidrBlock=policy["clusterIpv4CidrBlock"])
        if policy.get("clusterSecondaryRangeName"):
            network_config.setdefault("podRange", policy["clusterSecondaryRangeName"])
        if out:
            network_config["additionalNodeNetworkConfigs"] = out
        return network_config

    def pool_update(self, call):
        cluster_path, cluster, path, pool = self.pool(call)
        update = {k: v for k, v in read_enums(call.body, POOL_UPDATE, "").items() if k not in POOL_PATH_FIELDS + ("etag",) and v not in (None, "", [], 0)}
        for key in update:
            if key not in POOL_UPDATES:
                raise bad_request(f"Update field '{key}' is not emulated.")
        if not update:
            raise bad_request("The update changes nothing: give at least one field of UpdateNodePoolRequest.")
        changed = copy.deepcopy(pool)
        config = changed["config"]
        for key, value in update.items():
            if key == "nodeVersion":
                changed["version"] = self.node_version(value, cluster)
                if earlier_minor(changed["version"], pool["version"]):
                    raise bad_request(f'Node version "{value}" is of an earlier minor version than the node pool\'s {pool["version"]}: '
                                      "a node pool cannot be downgraded to an earlier minor version.")
            elif key == "locations":
                changed["locations"] = check_zones(value, region_of(cluster["location"]), "locations")
                if (changed.get("placementPolicy") or {}).get("type") == "COMPACT" and len(value) != 1:
                    raise bad_request("Invalid value for field 'locations': COMPACT placement needs exactly one node location.")
            elif key in WRAPPED:  # the whole new list or map, in a message of its own
                inner = value.get(WRAPPED[key])
                if key == "taints":
                    check_taints(inner, "taints.taints")
                elif key == "resourceLabels":
                    check_labels(inner or {}, "resourceLabels.labels")
                config[key] = inner
                if not inner:
                    del config[key]
            elif key == "nodeNetworkConfig":
                for inner, why in (("additionalNodeNetworkConfigs", "a node pool's network interfaces cannot change after creation"),
                                   ("acceleratorNetworkProfile", "a node pool's accelerator network profile is immutable")):
                    if value.get(inner) not in (None, "", []) and value[inner] != pool["networkConfig"].get(inner):
                        raise bad_request(f"Invalid value for field 'nodeNetworkConfig.{inner}': {why}.")
            elif key in ("gvnic", "imageType", "machineType", "diskType", "diskSizeGb", "accelerators", "workloadMetadataConfig"):
                config[key] = value
            else:
                changed[key] = value
        if pool["networkConfig"].get("additionalNodeNetworkConfigs") and not (config.get("gvnic") or {}).get("enabled"):
            raise bad_request("Invalid value for field 'gvnic': a pool with additional node networks needs gVNIC.")
        config["diskSizeGb"] = integer(config.get("diskSizeGb"), "diskSizeGb", 10, 65536, 100)
        check_machine(config, "")
        kept = [] if "machineType" in update and "accelerators" not in update else config.get("accelerators") or []  # a new machine's own GPUs
        config["accelerators"] = check_accelerators(config["machineType"], kept, "accelerators")
        if not config["accelerators"]:
            del config["accelerators"]
        self.idle(call, cluster_path)
        return self.change(call, "UPGRADE_NODES", path, changed)

    def pool_setSize(self, call):
        cluster_path, _, path, pool = self.pool(call)
        check_fields(call.body, ("nodeCount",) + POOL_PATH_FIELDS)
        size = integer(call.body.get("nodeCount"), "nodeCount", 0, 1000, 0)
        self.idle(call, cluster_path)
        error = self.reservation_error(call, pool, size=size, resized=pool)
        return self.change(call, "SET_NODE_POOL_SIZE", path, dict(pool, _size=size), error=error)

    def pool_setAutoscaling(self, call):
        cluster_path, _, path, pool = self.pool(call)
        check_fields(call.body, ("autoscaling",) + POOL_PATH_FIELDS)
        if not isinstance(call.body.get("autoscaling"), dict):
            raise required("autoscaling")
        autoscaling = check_autoscaling(read_enums(call.body["autoscaling"], AUTOSCALING, "autoscaling"), "autoscaling") or {}
        self.idle(call, cluster_path)
        return self.change(call, "UPDATE_CLUSTER", path, dict(pool, autoscaling=autoscaling))

    def pool_setManagement(self, call):
        cluster_path, cluster, path, pool = self.pool(call)
        check_fields(call.body, ("management",) + POOL_PATH_FIELDS)
        if not isinstance(call.body.get("management"), dict):
            raise required("management")
        management = check_auto_upgrade(cluster, call.body["management"], "management")
        self.idle(call, cluster_path)
        return self.change(call, "SET_NODE_POOL_MANAGEMENT", path, dict(pool, management=management))

    def pool_delete(self, call):
        cluster_path, _, path, pool = self.pool(call)
        self.idle(call, cluster_path)
        before = pool["status"]
        pool["status"] = "STOPPING"
        def deleted():
            call.store.items.pop(path, None)
            publish_nodes(call.project, call.store.items[cluster_path], pool["name"], None)
        return call.start("DELETE_NODE_POOL", path, None, deleted,
                          on_error=lambda error: pool.__setitem__("status", before))
