"""EKS's gaps:
  * EKS clusters, node groups and add-ons that go CREATING -> ACTIVE, UPDATING -> ACTIVE and
    DELETING -> gone over time (describable and listed, their names taken, until gone); a
    cluster with node groups, even DELETING ones, refuses DeleteCluster; a cluster that is not
    ACTIVE refuses CreateNodegroup, CreateAddon and cluster updates; a deleted cluster takes its
    add-ons with it (model names `forge::eks_{cluster,nodegroup,addon}_{create,delete,update}`);
  * the security group EKS makes for each cluster (clusterSecurityGroupId), deleted with it;
  * EKS updates kept per cluster, InProgress -> Successful (model name `forge::eks_update`):
    Describe/ListUpdates, UpdateClusterVersion, UpdateNodegroupVersion, UpdateNodegroupConfig registered, and
    UpdateClusterConfig answering with an update and merging resourcesVpcConfig (moto answers
    with the cluster and replaces the whole dict);
  * CreateCluster's accessConfig, which moto drops (default CONFIG_MAP, as the API's), its
    authentication mode changed one way only, CONFIG_MAP -> API_AND_CONFIG_MAP -> API, and the
    endpoint-access defaults in resourcesVpcConfig;
  * EKS add-ons, which moto lacks: Create/Describe/List/Update/DeleteAddon, and
    DescribeAddonVersions over a small built-in catalogue (ADDON_CATALOGUE);
  * EKS access entries, which moto lacks: Create/Describe/List/Update/DeleteAccessEntry and
    Associate/Disassociate/ListAssociatedAccessPolicies, refused on a CONFIG_MAP cluster as
    EKS refuses them, with EKS's access policies (ACCESS_POLICIES) and tags;
  * EKS tags on node groups, Fargate profiles, add-ons and access entries (moto tags clusters only), and
    ListNodegroups on an unknown cluster answering ResourceNotFoundException (moto: 500);
  * an OIDC issuer of each cluster's own (moto gives every cluster the same one);
  * a Kubernetes API server per cluster (kubernetes.py), whose endpoint and CA DescribeCluster
    reports (moto: a made-up endpoint and random CA data); each node group's instances are its
    Nodes, labelled as EKS labels them (eks.amazonaws.com/nodegroup, instance type, zone,
    kubernetes.io/arch) with the node group's taints and their devices for the device plugins
    to advertise: the type's GPUs and Neuron devices (instance_types.py), and as many EFA
    devices as the launch template's `efa` and `efa-only` interfaces (none without one); they
    follow the group's desired size and go with it;
  * each node group's Auto Scaling group (autoscaling.py), made with it as EKS makes it
    (`eks-<node group>-<id>`, the name resources.autoScalingGroups gives) and deleted with it
    (DeleteNodegroup; its scheduled actions too): the node group's scalingConfig is the
    group's sizes, whoever changes them (UpdateNodegroupConfig, a CloudFormation update, a
    scheduled action the account's clock runs, UpdateAutoScalingGroup), and its Nodes follow;
  * a node group whose launch template targets a Capacity Block (CapacityReservationTarget, a
    `capacity-block` reservation, capacity.py) has Nodes only while the block is `active` by
    the account's clock, its template asks for the `capacity-block` market, its instance type
    is the block's and a subnet is in the block's zone: then at most the block's instance
    count, in its zone; before the start, after the end, none, whatever its desired size. They
    are published again whenever the clock is set and before any EKS or Auto Scaling request of
    the account is answered (a clock listener);
  * a node group whose launch template's network interfaces its instance type cannot take
    (instance_types.interface_problem: EFA on an ENA-only card or type, an EFA-only primary, a
    card or device index out of range, one card and device twice, more EFA interfaces than
    the type has) goes CREATING -> CREATE_FAILED with the health issue EKS reports
    (AsgInstanceLaunchFailures, EC2's error in the Auto Scaling group's words) and has no
    Nodes; UpdateNodegroupVersion to such a template fails its update (NodeCreationFailure)
    and keeps the group's template and Nodes.
"""

import base64
import json
import random
import re
import uuid

from moto.core.responses import ActionResult
from moto.core.utils import utcnow
from moto.eks import urls as eks_urls
from moto.eks.exceptions import InvalidParameterException, InvalidRequestException, ResourceInUseException, ResourceNotFoundException
from moto.eks.models import CLUSTER_NOT_READY_MSG, EKSBackend, Nodegroup, eks_backends, paginated_list, validate_safe_to_delete
from moto.eks.models import Cluster as EksCluster
from moto.eks.responses import EKSResponse

from . import autoscaling, capacity
from . import instance_types as ec2_types
from . import kubernetes
from .phases import DROPPING, _drop_gone, is_gone, phased_status, start_delete, start_phase


# --- EKS phases ------------------------------------------------------------------------------
# moto's clusters and node groups are ACTIVE at once and gone at once. Here their `status` is a
# property over a ManagedState: CREATING -> ACTIVE, UPDATING -> ACTIVE, DELETING -> gone. A
# resource whose delete phase has ended is dropped the next time its account's EKS backend is
# used, so until then DescribeX/ListX still show it DELETING and its name stays taken.

DEFAULT_ENDPOINT_ACCESS = {"endpointPublicAccess": True, "endpointPrivateAccess": False, "publicAccessCidrs": ["0.0.0.0/0"]}


def cluster_vpc(backend, subnet_ids):
    """The EC2 backend and the VPC of a new cluster's subnets; EKS refuses unknown subnets."""
    from moto.ec2.models import ec2_backends

    ec2 = ec2_backends[backend.account_id][backend.region_name]
    vpcs = set()
    for subnet_id in subnet_ids or []:
        try:
            vpcs.add(ec2.get_subnet(subnet_id).vpc_id)
        except Exception:
            raise InvalidParameterException(clusterName=None, nodegroupName=None, fargateProfileName=None, addonName=None, message=f"Subnet {subnet_id} does not exist") from None
    if len(vpcs) != 1:
        raise InvalidParameterException(clusterName=None, nodegroupName=None, fargateProfileName=None, addonName=None, message="Subnets specified must be in the same VPC")
    return ec2, vpcs.pop()


def cluster_security_group(ec2, vpc_id, cluster):
    """EKS makes a security group for each cluster in its VPC (`eks-cluster-sg-NAME-…`) and
    reports it as `clusterSecurityGroupId`; moto makes none."""
    tags = {f"kubernetes.io/cluster/{cluster.name}": "owned", "aws:eks:cluster-name": cluster.name}
    group = ec2.create_security_group(f"eks-cluster-sg-{cluster.name}-{random.getrandbits(32)}", "EKS created security group applied to ENI that is attached to EKS Control Plane master nodes, as well as any managed workloads.", vpc_id=vpc_id, tags=tags)
    cluster.resources_vpc_config.update(vpcId=vpc_id, clusterSecurityGroupId=group.id)
    cluster._forge_ec2 = ec2


def leak_load_balancers(cluster):
    """A cluster deleted while Services of type LoadBalancer remain leaves their load balancers
    behind, with nobody left to delete them: each keeps its security group (`k8s-elb-…`) in the
    VPC, so the VPC cannot be deleted — the failure a destroy meets on AWS."""
    vpc_id = cluster.resources_vpc_config.get("vpcId")
    if not vpc_id or "_forge_ec2" not in cluster.__dict__:
        return
    try:
        services = kubernetes.load_balancers(api_server_of(cluster))
    except KeyError:
        return
    for namespace, name, uid in services:
        cluster._forge_ec2.create_security_group(
            f"k8s-elb-{uid.replace('-', '')[:20]}", f"Security group for Kubernetes ELB {uid} ({namespace}/{name})", vpc_id=vpc_id,
            tags={f"kubernetes.io/cluster/{cluster.name}": "owned"})


def api_server_of(cluster):
    return f"eks/{cluster._forge_account}/{cluster._forge_region}/{cluster.name}"


def drop_cluster_security_group(cluster):
    group = cluster.resources_vpc_config.get("clusterSecurityGroupId")
    if group and "_forge_ec2" in cluster.__dict__:
        cluster._forge_ec2.delete_security_group(group_id=group)


TAINT_EFFECTS = {"NO_SCHEDULE": "NoSchedule", "NO_EXECUTE": "NoExecute", "PREFER_NO_SCHEDULE": "PreferNoSchedule"}


def api_server(backend, name):
    """The key of a cluster's Kubernetes API server."""
    return f"eks/{backend.account_id}/{backend.region_name}/{name}"


def launch_template_data(backend, nodegroup):
    """The LaunchTemplateData of the version of its launch template a node group uses (None
    without one, or if it is gone)."""
    if not nodegroup.launch_template:
        return None
    from moto.ec2.models import ec2_backends

    try:
        template = ec2_backends[backend.account_id][backend.region_name].get_launch_template(nodegroup.launch_template["id"])
        version = str(nodegroup.launch_template.get("version", "$Default"))
        chosen = (template.latest_version() if version == "$Latest" else template.default_version() if version == "$Default"
                  else template.versions[int(version) - 1])
        return chosen.data or {}
    except Exception:
        return None


def instance_type(backend, nodegroup):
    """A node group's instance type: its launch template's, else its own."""
    data = launch_template_data(backend, nodegroup) or {}
    return data.get("InstanceType") or (nodegroup.instance_types or ["t3.medium"])[0]


def network_interfaces(backend, nodegroup):
    """The network interfaces its launch template gives a node group's instances ([]: EKS's
    default, one ENA interface)."""
    return (launch_template_data(backend, nodegroup) or {}).get("NetworkInterfaces") or []


def launch_failure(backend, nodegroup):
    """What the Auto Scaling group of a node group says when EC2 will not launch its instances
    (their network interfaces), as EKS passes it on; None if EC2 launches them."""
    problem = ec2_types.interface_problem(instance_type(backend, nodegroup), network_interfaces(backend, nodegroup))
    if problem is None:
        return None
    code, message = problem
    market = "Spot" if nodegroup.capacity_type == "SPOT" else "On-Demand"
    return f"Could not launch {market} Instances. {code} - {message} Launching EC2 instance failed."


def capacity_block(backend, nodegroup):
    """The Capacity Block its launch template targets (CapacityReservationSpecification's
    CapacityReservationTarget, a reservation of ReservationType `capacity-block`), else None."""
    data = launch_template_data(backend, nodegroup) or {}
    target = ((data.get("CapacityReservationSpecification") or {}).get("CapacityReservationTarget") or {}).get("CapacityReservationId")
    if not target:
        return None
    record = capacity.store(backend.account_id, backend.region_name).reservations.get(target)
    return record if record is not None and record["ReservationType"] == "capacity-block" else None


def subnet_zones(backend, nodegroup):
    """The zones of a node group's subnets, in their order (an unknown subnet left out)."""
    from moto.ec2.models import ec2_backends

    ec2 = ec2_backends[backend.account_id][backend.region_name]
    zones = []
    for subnet_id in nodegroup.subnets or []:
        try:
            zones.append(ec2.get_subnet(subnet_id).availability_zone)
        except Exception:
            pass
    return zones


def launchable(backend, nodegroup, zones):
    """How many of the node group's desired instances EC2 launches, and the zones they go in. On
    a Capacity Block, none unless the block is `active` by the account's clock, the template
    asks for the `capacity-block` market, the type is the block's and a subnet is in its zone;
    then at most the block's instances, all in its zone. Others: the desired size."""
    desired = nodegroup.scaling_config.get("desiredSize") or 0
    block = capacity_block(backend, nodegroup)
    if block is None:
        return desired, zones
    market = ((launch_template_data(backend, nodegroup) or {}).get("InstanceMarketOptions") or {}).get("MarketType")
    if (market != "capacity-block" or capacity.state_of(block, backend.account_id) != "active" or block["InstanceType"] != instance_type(backend, nodegroup)
            or block["AvailabilityZone"] not in zones):
        return 0, zones
    return min(desired, block["TotalInstanceCount"]), [block["AvailabilityZone"]]


def auto_scaling_groups(nodegroup):
    return [g["name"] for g in (nodegroup.resources or {}).get("autoScalingGroups", [])]


GROUP_OCTETS = {}  # (account, region, cluster) -> {node group: the second octet of its Nodes' names}


def group_octet(backend, cluster_name, nodegroup_name):
    """A number of the node group's own in its cluster, for its Nodes' names (distinct groups
    never share a Node name, as their instances never share an address)."""
    taken = GROUP_OCTETS.setdefault((backend.account_id, backend.region_name, cluster_name), {})
    return taken.setdefault(nodegroup_name, len(taken) + 1)


def publish_nodes(backend, cluster_name, nodegroup, count=None):
    """The node group's instances as Nodes of its cluster's API server: as many as EC2 launches
    of its desired size (`launchable`), none once deleted."""
    kind = instance_type(backend, nodegroup)
    gpus, neuron = ec2_types.devices(kind)
    efa = ec2_types.efa_interfaces(network_interfaces(backend, nodegroup))
    zones = subnet_zones(backend, nodegroup)
    if count is None:
        count, zones = launchable(backend, nodegroup, zones)
    nodegroup._forge_nodes = count
    octet = group_octet(backend, cluster_name, nodegroup.nodegroup_name)
    nodes = []
    for i in range(count):
        zone = zones[i % len(zones)] if zones else f"{backend.region_name}a"
        labels = {"node.kubernetes.io/instance-type": kind, "topology.kubernetes.io/zone": zone, "kubernetes.io/arch": ec2_types.arch(kind),
                  **(nodegroup.labels or {}), "forge.emulator/gpus": str(gpus), "forge.emulator/efa": str(efa), "forge.emulator/neuron": str(neuron)}
        taints = [{"key": t["key"], "value": t.get("value", ""), "effect": TAINT_EFFECTS.get(t.get("effect"), t.get("effect"))}
                  for t in nodegroup.taints or []]
        name = f"ip-10-{octet}-{i // 250}-{i % 250 + 1}.{backend.region_name}.compute.internal"
        nodes.append((name, labels, taints, {"cpu": "96", "memory": "1000Gi", "pods": "110"}))
    try:
        kubernetes.set_nodes(api_server(backend, cluster_name), "eks.amazonaws.com/nodegroup", nodegroup.nodegroup_name, nodes)
    except KeyError:
        pass  # the cluster's server is gone


def _nodegroup_health(self):
    """EKS reports a failed create's issues once the group is CREATE_FAILED."""
    issues = self.__dict__.get("_forge_issues")
    if issues and self.status == "CREATE_FAILED":
        return {"issues": issues}
    return self.__dict__.get("_forge_health") or {"issues": []}


def _set_nodegroup_health(self, value):
    self._forge_health = dict(value or {"issues": []})  # moto hands every group one shared default


Nodegroup.health = property(_nodegroup_health, _set_nodegroup_health)


def _nodegroup_scaling(self):
    """A node group's sizes are its Auto Scaling group's, whoever changed them."""
    group = self.__dict__.get("_forge_asg")
    if group is None:
        return self.__dict__.get("_forge_scaling")
    return {"minSize": group.min_size, "maxSize": group.max_size, "desiredSize": group.desired_capacity}


def _set_nodegroup_scaling(self, value):
    value = self._forge_scaling = dict(value or {})  # moto hands every group one shared default
    group = self.__dict__.get("_forge_asg")
    if group is not None:
        autoscaling.resize(group, value.get("minSize"), value.get("maxSize"), value.get("desiredSize"))


Nodegroup.scaling_config = property(_nodegroup_scaling, _set_nodegroup_scaling)


def follower(backend, cluster_name, nodegroup):
    """What a node group does when its Auto Scaling group's sizes change: its Nodes follow (none
    once it is deleting)."""
    def follow(group):
        if nodegroup.status != "DELETING":
            publish_nodes(backend, cluster_name, nodegroup)
    return follow


def refresh_nodes(account):
    """The Nodes of node groups on Capacity Blocks, again when the account's clock (None: every
    account's) took their block in or out of `active`; a clock listener (capacity.py)."""
    accounts = list(eks_backends) if account is None else [account]
    for owner in accounts:
        for backend in list((dict.get(eks_backends, owner) or {}).values()):
            for cluster in list(backend.clusters.values()):
                for nodegroup in list(cluster.nodegroups.values()):
                    if nodegroup.__dict__.get("_forge_issues") or capacity_block(backend, nodegroup) is None or nodegroup.status == "DELETING":
                        continue
                    if launchable(backend, nodegroup, subnet_zones(backend, nodegroup))[0] != nodegroup.__dict__.get("_forge_nodes"):
                        publish_nodes(backend, cluster.name, nodegroup)


capacity.CLOCK_LISTENERS.append(refresh_nodes)


def drop_deleted(backend):
    with DROPPING:
        for cluster in [c for c in backend.clusters.values() if is_gone(c)]:
            cluster._forge_account, cluster._forge_region = backend.account_id, backend.region_name
            leak_load_balancers(cluster)
            drop_cluster_security_group(cluster)
            kubernetes.forget(api_server(backend, cluster.name))
        backend.cluster_count -= _drop_gone(backend.clusters)
        for cluster in list(backend.clusters.values()):
            cluster.nodegroup_count -= _drop_gone(cluster.nodegroups)
            _drop_gone(addons_of(cluster))
    return backend


EksCluster.status = phased_status
Nodegroup.status = phased_status
_moto_eks_backend = EKSResponse.eks_backend


def caught_up_backend(self):
    """The account's EKS backend, once what follows its clock caught up (scheduled actions due,
    Capacity Blocks begun or ended) and what was deleted is gone."""
    capacity.tick(self.current_account)
    return drop_deleted(_moto_eks_backend.fget(self))


EKSResponse.eks_backend = property(caught_up_backend)

_moto_eks = {name: getattr(EKSBackend, name) for name in ("create_cluster", "create_nodegroup", "list_nodegroups", "update_nodegroup_config")}


def eks_create_cluster(self, **kwargs):
    if kwargs["name"] in self.clusters:  # moto's own ResourceInUseException, before any check
        return _moto_eks["create_cluster"](self, **kwargs)
    ec2, vpc_id = cluster_vpc(self, (kwargs.get("resources_vpc_config") or {}).get("subnetIds"))
    cluster = _moto_eks["create_cluster"](self, **kwargs)
    cluster.identity = {"oidc": {"issuer": f"https://oidc.eks.{self.region_name}.amazonaws.com/id/{uuid.uuid4().hex.upper()}"}}
    cluster.resources_vpc_config = {**DEFAULT_ENDPOINT_ACCESS, **(cluster.resources_vpc_config or {})}
    cluster_security_group(ec2, vpc_id, cluster)
    endpoint, ca = kubernetes.serve(api_server(self, cluster.name))
    cluster.endpoint, cluster.certificate_authority = endpoint, {"data": base64.b64encode(ca).decode()}
    start_phase(cluster, "forge::eks_cluster_create", "CREATING", "ACTIVE")
    return cluster


def eks_delete_cluster(self, name):
    cluster = self.describe_cluster(name=name)
    validate_safe_to_delete(cluster)  # counts DELETING node groups too: they are still there
    start_delete(cluster, "forge::eks_cluster_delete")
    for addon in addons_of(cluster).values():
        start_delete(addon, "forge::eks_addon_delete")
    return cluster


def eks_create_nodegroup(self, **kwargs):
    nodegroup = _moto_eks["create_nodegroup"](self, **kwargs)
    # EKS's Auto Scaling group, named as EKS names it (moto names one `eks-<id>` and makes none).
    name = f"eks-{nodegroup.nodegroup_name}-{nodegroup.uuid}"
    nodegroup.resources["autoScalingGroups"] = [{"name": name}]
    nodegroup._forge_asg = autoscaling.nodegroup_group(self.account_id, self.region_name, name, kwargs["cluster_name"], nodegroup.nodegroup_name,
                                                       nodegroup.scaling_config, nodegroup.subnets, nodegroup.launch_template, nodegroup.capacity_type == "SPOT")
    failure = launch_failure(self, nodegroup)
    if failure:  # its group launches nothing, whatever its size
        nodegroup._forge_issues = [{"code": "AsgInstanceLaunchFailures", "message": failure, "resourceIds": auto_scaling_groups(nodegroup)}]
        start_phase(nodegroup, "forge::eks_nodegroup_create", "CREATING", "CREATE_FAILED")
        return nodegroup
    nodegroup._forge_asg.follower = follower(self, kwargs["cluster_name"], nodegroup)
    start_phase(nodegroup, "forge::eks_nodegroup_create", "CREATING", "ACTIVE")
    publish_nodes(self, kwargs["cluster_name"], nodegroup)
    return nodegroup


def eks_delete_nodegroup(self, cluster_name, nodegroup_name):
    nodegroup = self.describe_nodegroup(cluster_name=cluster_name, nodegroup_name=nodegroup_name)
    start_delete(nodegroup, "forge::eks_nodegroup_delete")
    publish_nodes(self, cluster_name, nodegroup, count=0)
    group = nodegroup.__dict__.get("_forge_asg")
    if group is not None:  # the node group keeps showing its last sizes; its group and actions go
        nodegroup._forge_scaling = dict(nodegroup.scaling_config)
        del nodegroup._forge_asg
        autoscaling.delete_nodegroup_group(self.account_id, self.region_name, group.name)
    return nodegroup


def eks_list_nodegroups(self, cluster_name, **kwargs):
    self.describe_cluster(name=cluster_name)  # moto answers an unknown cluster with a KeyError (500)
    return _moto_eks["list_nodegroups"](self, cluster_name=cluster_name, **kwargs)


EKSBackend.create_cluster = eks_create_cluster
EKSBackend.delete_cluster = eks_delete_cluster
EKSBackend.create_nodegroup = eks_create_nodegroup
EKSBackend.delete_nodegroup = eks_delete_nodegroup
EKSBackend.list_nodegroups = eks_list_nodegroups


# --- EKS updates -----------------------------------------------------------------------------
# Each cluster keeps the updates started on it (and on its node groups and add-ons), so that
# DescribeUpdate can follow one InProgress -> Successful while its resource is UPDATING.

# The API's default (the console's is API_AND_CONFIG_MAP).
DEFAULT_ACCESS_CONFIG = {"bootstrapClusterCreatorAdminPermissions": True, "authenticationMode": "CONFIG_MAP"}
VPC_PARAM_TYPES = {"endpointPublicAccess": "EndpointPublicAccess", "endpointPrivateAccess": "EndpointPrivateAccess", "publicAccessCidrs": "PublicAccessCidrs", "subnetIds": "Subnets", "securityGroupIds": "SecurityGroups"}


class Update:
    status = phased_status

    def __init__(self, kind, params, scope, update_id=None):
        self.id = update_id or str(uuid.uuid4())
        self.type = kind
        self.params = params
        self.scope = scope  # (nodegroupName, addonName): DescribeUpdate must name the same
        self.created_at = utcnow()
        self._forge_errors = []
        start_phase(self, "forge::eks_update", "InProgress", "Successful")

    @property
    def errors(self):
        """A failing update's errors, once it has Failed."""
        return self._forge_errors if self.status == "Failed" else []

    def fail(self, errors):
        self._forge_errors = errors
        start_phase(self, "forge::eks_update", "InProgress", "Failed")


def update_param(kind, value):
    return {"type": kind, "value": value if isinstance(value, str) else json.dumps(value)}


def updates_of(cluster):
    return cluster.__dict__.setdefault("_forge_updates", {})


def begin_update(cluster, target, model, kind, params, nodegroup=None, addon=None, update_id=None):
    """`target` (the cluster, a node group or an add-on) goes UPDATING -> ACTIVE; the update it
    returns, registered on the cluster, goes InProgress -> Successful (started last, it ends last)."""
    start_phase(target, model, "UPDATING", "ACTIVE")
    update = Update(kind, params, (nodegroup, addon), update_id)
    updates_of(cluster)[update.id] = update
    return update


def require_active_cluster(cluster):
    if not cluster.is_active:
        raise InvalidRequestException(message=CLUSTER_NOT_READY_MSG.format(clusterName=cluster.name))


def refuse_while_busy(kind, name, obj):
    status = obj.status
    if status != "ACTIVE":
        raise ResourceInUseException(clusterName=None, nodegroupName=None, addonName=None, message=f"{kind} {name} cannot be updated as it is currently in {status} state")


def eks_update_nodegroup_config(self, cluster_name, nodegroup_name, **kwargs):
    nodegroup = self.describe_nodegroup(cluster_name=cluster_name, nodegroup_name=nodegroup_name)
    refuse_while_busy("Nodegroup", nodegroup_name, nodegroup)
    before = nodegroup.scaling_config
    done = _moto_eks["update_nodegroup_config"](self, cluster_name=cluster_name, nodegroup_name=nodegroup_name, **kwargs)
    if kwargs.get("scaling_config"):  # moto changed a copy: the sizes are the Auto Scaling group's
        nodegroup.scaling_config = {**before, **kwargs["scaling_config"]}
    publish_nodes(self, cluster_name, nodegroup)
    return begin_update(self.clusters[cluster_name], nodegroup, "forge::eks_nodegroup_update", done["type"], done["params"], nodegroup=nodegroup_name, update_id=done["id"])


EKSBackend.update_nodegroup_config = eks_update_nodegroup_config
_moto_eks_create_cluster_response = EKSResponse.create_cluster


def eks_create_cluster_response(self):
    """moto drops CreateCluster's accessConfig; keep it, with the API's defaults."""
    result = _moto_eks_create_cluster_response(self)
    result.result["cluster"].access_config = {**DEFAULT_ACCESS_CONFIG, **(self._get_param("accessConfig") or {})}
    return result


def describe_update(self):
    cluster = self.eks_backend.describe_cluster(name=self._get_param("name"))
    update_id = self._get_param("updateId")
    update = updates_of(cluster).get(update_id)
    if update is None or update.scope != (self._get_param("nodegroupName"), self._get_param("addonName")):
        raise ResourceNotFoundException(clusterName=cluster.name, nodegroupName=None, fargateProfileName=None, addonName=None, message=f"No update found for ID: {update_id}")
    return ActionResult({"update": update})


def list_updates(self):
    cluster = self.eks_backend.describe_cluster(name=self._get_param("name"))
    scope = (self._get_param("nodegroupName"), self._get_param("addonName"))
    return ActionResult({"updateIds": [i for i, u in updates_of(cluster).items() if u.scope == scope], "nextToken": None})


def update_cluster_version(self):
    cluster = self.eks_backend.describe_cluster(name=self._get_param("name"))
    require_active_cluster(cluster)
    cluster.version = self._get_param("version")
    cluster.platformVersion = "eks.1"
    params = [update_param("Version", cluster.version), update_param("PlatformVersion", cluster.platformVersion)]
    return ActionResult({"update": begin_update(cluster, cluster, "forge::eks_cluster_update", "VersionUpdate", params)})


def update_nodegroup_version(self):
    """Rolls a node group to another launch template version (or Kubernetes / AMI release)."""
    cluster_name, name = self._get_param("name"), self._get_param("nodegroupName")
    nodegroup = self.eks_backend.describe_nodegroup(cluster_name=cluster_name, nodegroup_name=name)
    refuse_while_busy("Nodegroup", name, nodegroup)
    params = []
    template, failure = self._get_param("launchTemplate"), None
    if template:
        before = nodegroup.launch_template
        nodegroup.launch_template = {**(nodegroup.launch_template or {}), **template}
        params.append(update_param("LaunchTemplateVersion", str(template.get("version", ""))))
        failure = launch_failure(self.eks_backend, nodegroup)
        if failure:  # the new instances never launch: the group keeps its template and Nodes
            nodegroup.launch_template = before
    for key, kind in (("version", "Version"), ("releaseVersion", "ReleaseVersion")):
        if self._get_param(key):
            setattr(nodegroup, "version" if key == "version" else "release_version", self._get_param(key))
            params.append(update_param(kind, self._get_param(key)))
    update = begin_update(self.eks_backend.clusters[cluster_name], nodegroup, "forge::eks_nodegroup_update", "VersionUpdate", params, nodegroup=name)
    if failure:
        update.fail([{"errorCode": "NodeCreationFailure", "errorMessage": failure, "resourceIds": auto_scaling_groups(nodegroup)}])
    else:
        publish_nodes(self.eks_backend, cluster_name, nodegroup)
    return ActionResult({"update": update})


def update_cluster_config(self):
    """moto replaces resourcesVpcConfig whole and answers with the cluster; the API changes only
    the keys given and answers with an update."""
    name = self._get_param("name")
    cluster = self.eks_backend.describe_cluster(name=name)
    require_active_cluster(cluster)
    vpc, logging_, access = (self._get_param(p) for p in ("resourcesVpcConfig", "logging", "accessConfig"))
    if access and "authenticationMode" in access:
        modes = ("CONFIG_MAP", "API_AND_CONFIG_MAP", "API")
        now = getattr(cluster, "access_config", DEFAULT_ACCESS_CONFIG)["authenticationMode"]
        wanted = access["authenticationMode"]
        if modes.index(wanted) < modes.index(now):
            raise InvalidParameterException(clusterName=name, nodegroupName=None, addonName=None,
                                            message=f"Unsupported authentication mode update from {now} to {wanted}")
    self.eks_backend.update_cluster_config(
        name=name,
        resources_vpc_config={**cluster.resources_vpc_config, **vpc} if vpc else None,
        logging=logging_,
        client_request_token=self._get_param("clientRequestToken"),
        kubernetes_network_config=self._get_param("kubernetesNetworkConfig"),
        remote_network_config=self._get_param("remoteNetworkConfig"),
    )
    if access:
        cluster.access_config = {**getattr(cluster, "access_config", DEFAULT_ACCESS_CONFIG), **access}
    params = [update_param(VPC_PARAM_TYPES.get(k, k), v) for k, v in (vpc or {}).items()]
    params += [update_param("ClusterLogging", logging_["clusterLogging"])] if logging_ else []
    params += [update_param("AuthenticationMode", access["authenticationMode"])] if access and "authenticationMode" in access else []
    given = [kind for kind, value in (("EndpointAccessUpdate", vpc), ("LoggingUpdate", logging_), ("AccessConfigUpdate", access)) if value]
    others = self._get_param("kubernetesNetworkConfig") or self._get_param("remoteNetworkConfig")
    kind = given[0] if len(given) == 1 and not others else "ConfigUpdate"
    return ActionResult({"update": begin_update(cluster, cluster, "forge::eks_cluster_update", kind, params)})


EKSResponse.create_cluster = eks_create_cluster_response
EKSResponse.describe_update = describe_update
EKSResponse.list_updates = list_updates
EKSResponse.update_cluster_version = update_cluster_version
EKSResponse.update_cluster_config = update_cluster_config


# --- EKS add-ons -----------------------------------------------------------------------------

K8S = ("1.29", "1.30", "1.31", "1.32")
# name: (type, [(version, the cluster versions it runs on)], newest first. A cluster version's
# default is the newest version that runs on it, so each has exactly one.
ADDON_CATALOGUE = {
    "vpc-cni": ("networking", [("v1.19.2-eksbuild.1", K8S), ("v1.18.6-eksbuild.1", K8S), ("v1.17.1-eksbuild.1", K8S[:3])]),
    "coredns": ("networking", [("v1.11.4-eksbuild.2", K8S[2:]), ("v1.11.3-eksbuild.1", K8S[:3]), ("v1.11.1-eksbuild.9", K8S[:2])]),
    "kube-proxy": ("networking", [("v1.32.0-eksbuild.2", ("1.32",)), ("v1.31.3-eksbuild.2", ("1.31",)), ("v1.30.7-eksbuild.2", ("1.30",)), ("v1.29.10-eksbuild.3", ("1.29",))]),
    "aws-ebs-csi-driver": ("storage", [("v1.38.1-eksbuild.1", K8S), ("v1.37.0-eksbuild.1", K8S), ("v1.35.0-eksbuild.1", K8S[:3])]),
    "aws-efs-csi-driver": ("storage", [("v2.1.4-eksbuild.1", K8S), ("v2.0.9-eksbuild.1", K8S[:3])]),
    "aws-fsx-csi-driver": ("storage", [("v1.3.0-eksbuild.1", K8S), ("v1.2.0-eksbuild.1", K8S[:3])]),
    "eks-pod-identity-agent": ("security", [("v1.3.4-eksbuild.1", K8S), ("v1.3.2-eksbuild.2", K8S)]),
}


def default_addon_version(name, cluster_version):
    versions = ADDON_CATALOGUE[name][1]
    return next((v for v, runs_on in versions if cluster_version in runs_on), None)


def checked_addon_version(cluster, name, version):
    """The version to install: the one asked for if the catalogue has it, else the default for the
    cluster's version (the newest if the catalogue does not know that version)."""
    if name not in ADDON_CATALOGUE:
        raise InvalidParameterException(clusterName=cluster.name, nodegroupName=None, addonName=name, message=f"Addon {name} specified is not supported; known add-ons: {', '.join(sorted(ADDON_CATALOGUE))}")
    known = [v for v, _ in ADDON_CATALOGUE[name][1]]
    if version is None:
        return default_addon_version(name, cluster.version) or known[0]
    if version not in known:
        raise InvalidParameterException(clusterName=cluster.name, nodegroupName=None, addonName=name, message=f"Addon version {version} specified is not supported for {name}; known versions: {', '.join(known)}")
    return version


class Addon:
    status = phased_status

    def __init__(self, backend, cluster, name, version, service_account_role_arn, configuration_values, tags):
        self.addon_name = name
        self.cluster_name = cluster.name
        self.addon_version = version
        self.addon_arn = f"arn:{backend.partition}:eks:{backend.region_name}:{backend.account_id}:addon/{cluster.name}/{name}/{uuid.uuid4()}"
        self.health = {"issues": []}
        self.created_at = self.modified_at = utcnow()
        self.service_account_role_arn = service_account_role_arn
        self.configuration_values = configuration_values
        self.tags = tags or {}
        self.owner, self.publisher = "aws", "eks"
        start_phase(self, "forge::eks_addon_create", "CREATING", "ACTIVE")


def addons_of(cluster):
    return cluster.__dict__.setdefault("_forge_addons", {})


def _cluster_and_addon(self):
    cluster = self.eks_backend.describe_cluster(name=self._get_param("name"))
    name = self._get_param("addonName")
    addon = addons_of(cluster).get(name)
    if addon is None:
        raise ResourceNotFoundException(clusterName=cluster.name, nodegroupName=None, fargateProfileName=None, addonName=name, message=f"No addon: {name} found in cluster: {cluster.name}")
    return cluster, addon


def create_addon(self):
    cluster = self.eks_backend.describe_cluster(name=self._get_param("name"))
    name = self._get_param("addonName")
    if name in addons_of(cluster):
        raise ResourceInUseException(clusterName=cluster.name, nodegroupName=None, addonName=name, message="Addon already exists.")
    require_active_cluster(cluster)
    version = checked_addon_version(cluster, name, self._get_param("addonVersion"))
    addon = Addon(self.eks_backend, cluster, name, version, self._get_param("serviceAccountRoleArn"), self._get_param("configurationValues"), self._get_param("tags"))
    addons_of(cluster)[name] = addon
    return ActionResult({"addon": addon})


def describe_addon(self):
    return ActionResult({"addon": _cluster_and_addon(self)[1]})


def list_addons(self):
    cluster = self.eks_backend.describe_cluster(name=self._get_param("name"))
    names, next_token = paginated_list(list(addons_of(cluster)), self._get_int_param("maxResults", 100), self._get_param("nextToken"))
    return ActionResult({"addons": names, "nextToken": next_token})


def update_addon(self):
    cluster, addon = _cluster_and_addon(self)
    refuse_while_busy("Addon", addon.addon_name, addon)
    version = self._get_param("addonVersion")
    if version is not None:
        addon.addon_version = checked_addon_version(cluster, addon.addon_name, version)
    changes = {"AddonVersion": version, "ServiceAccountRoleArn": self._get_param("serviceAccountRoleArn"), "ResolveConflicts": self._get_param("resolveConflicts"), "ConfigurationValues": self._get_param("configurationValues")}
    for attribute, kind in (("service_account_role_arn", "ServiceAccountRoleArn"), ("configuration_values", "ConfigurationValues")):
        if changes[kind] is not None:
            setattr(addon, attribute, changes[kind])
    addon.modified_at = utcnow()
    params = [update_param(kind, value) for kind, value in changes.items() if value is not None]
    return ActionResult({"update": begin_update(cluster, addon, "forge::eks_addon_update", "AddonUpdate", params, addon=addon.addon_name)})


def delete_addon(self):
    _, addon = _cluster_and_addon(self)
    start_delete(addon, "forge::eks_addon_delete")
    return ActionResult({"addon": addon})


def describe_addon_versions(self):
    wanted_name, wanted_k8s = self._get_param("addonName"), self._get_param("kubernetesVersion")
    addons = []
    for name, (kind, versions) in sorted(ADDON_CATALOGUE.items()):
        entries = [
            {
                "addonVersion": version,
                "architecture": ["amd64", "arm64"],
                "compatibilities": [{"clusterVersion": k8s, "platformVersions": ["*"], "defaultVersion": default_addon_version(name, k8s) == version} for k8s in runs_on if wanted_k8s in (None, k8s)],
                "requiresConfiguration": False,
            }
            for version, runs_on in versions
            if wanted_name in (None, name) and wanted_k8s in (None, *runs_on)
        ]
        if entries:
            addons.append({"addonName": name, "type": kind, "owner": "aws", "publisher": "eks", "addonVersions": entries})
    return ActionResult({"addons": addons, "nextToken": None})


EKSResponse.update_nodegroup_version = update_nodegroup_version
EKSResponse.create_addon = create_addon
EKSResponse.describe_addon = describe_addon
EKSResponse.list_addons = list_addons
EKSResponse.update_addon = update_addon
EKSResponse.delete_addon = delete_addon
EKSResponse.describe_addon_versions = describe_addon_versions
eks_urls.url_paths.update({
    "{0}/clusters/(?P<name>[^/]+)/updates$": eks_urls.response.dispatch,
    "{0}/clusters/(?P<name>[^/]+)/updates/(?P<updateId>[^/]+)$": eks_urls.response.dispatch,
    "{0}/clusters/(?P<name>[^/]+)/addons$": eks_urls.response.dispatch,
    "{0}/clusters/(?P<name>[^/]+)/addons/(?P<addonName>[^/]+)$": eks_urls.response.dispatch,
    "{0}/clusters/(?P<name>[^/]+)/addons/(?P<addonName>[^/]+)/update$": eks_urls.response.dispatch,
    "{0}/addons/supported-versions$": eks_urls.response.dispatch,
    "{0}/clusters/(?P<name>[^/]+)/node-groups/(?P<nodegroupName>[^/]+)/update-version$": eks_urls.response.dispatch,
})


# --- EKS access entries ----------------------------------------------------------------------
# IAM principals' access to a cluster whose authentication mode is API or API_AND_CONFIG_MAP,
# and the EKS access policies associated with them, cluster-wide or in namespaces.

ACCESS_POLICIES = ("AmazonEKSAdminPolicy", "AmazonEKSClusterAdminPolicy", "AmazonEKSAdminViewPolicy", "AmazonEKSEditPolicy", "AmazonEKSViewPolicy")
PRINCIPAL = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:(role|user)/.+$")


class AccessEntry:
    def __init__(self, backend, cluster, principal_arn, groups, username, kind, tags):
        self.cluster_name = cluster.name
        self.principal_arn = principal_arn
        self.kubernetes_groups = groups or []
        self.username = username or default_username(principal_arn, kind)
        self.type = kind
        self.tags = tags or {}
        self.created_at = self.modified_at = utcnow()
        principal = principal_arn.split(":", 5)[5]
        self.access_entry_arn = f"arn:{backend.partition}:eks:{backend.region_name}:{backend.account_id}:access-entry/{cluster.name}/{principal.split('/')[0]}/{backend.account_id}/{principal.split('/')[-1]}/{uuid.uuid4()}"
        self.policies = {}


def default_username(principal_arn, kind):
    """EKS's user name for an entry given none: a role's assumed-role session, a user's ARN."""
    if kind != "STANDARD":
        return "system:node:{{EC2PrivateDNSName}}"
    partition, account, resource = principal_arn.split(":")[1], principal_arn.split(":")[4], principal_arn.split(":", 5)[5]
    if resource.startswith("role/"):
        return f"arn:{partition}:sts::{account}:assumed-role/{resource.rsplit('/', 1)[-1]}/{{{{SessionName}}}}"
    return principal_arn


def entries_of(cluster):
    return cluster.__dict__.setdefault("_forge_access_entries", {})


def _api_cluster(self):
    cluster = self.eks_backend.describe_cluster(name=self._get_param("name"))
    mode = getattr(cluster, "access_config", DEFAULT_ACCESS_CONFIG).get("authenticationMode")
    if mode not in ("API", "API_AND_CONFIG_MAP"):
        raise InvalidRequestException(message="The cluster's authentication mode must be set to one of [API, API_AND_CONFIG_MAP] to perform this operation.")
    return cluster


def _entry(self):
    cluster = _api_cluster(self)
    principal = self._get_param("principalArn")
    entry = entries_of(cluster).get(principal)
    if entry is None:
        raise ResourceNotFoundException(clusterName=cluster.name, nodegroupName=None, fargateProfileName=None, addonName=None, message=f"The specified access entry resource is not found: {principal}")
    return cluster, entry


def _entry_view(entry):
    return {
        "clusterName": entry.cluster_name, "principalArn": entry.principal_arn, "kubernetesGroups": entry.kubernetes_groups,
        "accessEntryArn": entry.access_entry_arn, "createdAt": entry.created_at, "modifiedAt": entry.modified_at,
        "tags": entry.tags, "username": entry.username, "type": entry.type,
    }


def create_access_entry(self):
    cluster = _api_cluster(self)
    require_active_cluster(cluster)
    principal = self._get_param("principalArn") or ""
    if not PRINCIPAL.match(principal):
        raise InvalidParameterException(clusterName=cluster.name, nodegroupName=None, addonName=None, message=f"The specified principalArn is invalid: {principal}: an IAM role or user ARN is expected")
    if principal in entries_of(cluster):
        raise ResourceInUseException(clusterName=cluster.name, nodegroupName=None, addonName=None, message=f"The specified access entry resource is already in use on this cluster.")
    kind = self._get_param("type") or "STANDARD"
    entry = AccessEntry(self.eks_backend, cluster, principal, self._get_param("kubernetesGroups"), self._get_param("username"), kind, self._get_param("tags"))
    entries_of(cluster)[principal] = entry
    return ActionResult({"accessEntry": _entry_view(entry)})


def describe_access_entry(self):
    return ActionResult({"accessEntry": _entry_view(_entry(self)[1])})


def list_access_entries(self):
    cluster = _api_cluster(self)
    names, next_token = paginated_list(list(entries_of(cluster)), self._get_int_param("maxResults", 100), self._get_param("nextToken"))
    return ActionResult({"accessEntries": names, "nextToken": next_token})


def update_access_entry(self):
    _, entry = _entry(self)
    groups, username = self._get_param("kubernetesGroups"), self._get_param("username")
    if groups is not None:
        entry.kubernetes_groups = groups
    if username is not None:
        entry.username = username
    entry.modified_at = utcnow()
    return ActionResult({"accessEntry": _entry_view(entry)})


def delete_access_entry(self):
    cluster, entry = _entry(self)
    del entries_of(cluster)[entry.principal_arn]
    return ActionResult({})


def _policy_name(self, cluster):
    arn = self._get_param("policyArn") or ""
    name = arn.rsplit("/", 1)[-1]
    if not arn.startswith("arn:aws:eks::aws:cluster-access-policy/") or name not in ACCESS_POLICIES:
        raise ResourceNotFoundException(clusterName=cluster.name, nodegroupName=None, fargateProfileName=None, addonName=None, message=f"The specified policyArn is not found: {arn}")
    return arn


def associate_access_policy(self):
    cluster, entry = _entry(self)
    arn = _policy_name(self, cluster)
    scope = self._get_param("accessScope") or {}
    kind, namespaces = scope.get("type"), scope.get("namespaces") or []
    if kind not in ("cluster", "namespace") or (kind == "namespace") != bool(namespaces):
        raise InvalidParameterException(clusterName=cluster.name, nodegroupName=None, addonName=None, message="accessScope: type must be cluster (no namespaces) or namespace (with namespaces)")
    now = utcnow()
    policy = {"policyArn": arn, "accessScope": {"type": kind, "namespaces": namespaces}, "associatedAt": entry.policies.get(arn, {}).get("associatedAt", now), "modifiedAt": now}
    entry.policies[arn] = policy
    return ActionResult({"clusterName": cluster.name, "principalArn": entry.principal_arn, "associatedAccessPolicy": policy})


def list_associated_access_policies(self):
    cluster, entry = _entry(self)
    return ActionResult({"clusterName": cluster.name, "principalArn": entry.principal_arn, "associatedAccessPolicies": list(entry.policies.values()), "nextToken": None})


def disassociate_access_policy(self):
    cluster, entry = _entry(self)
    arn = self._get_param("policyArn")
    if entry.policies.pop(arn, None) is None:
        raise ResourceNotFoundException(clusterName=cluster.name, nodegroupName=None, fargateProfileName=None, addonName=None, message=f"The specified policy is not associated: {arn}")
    return ActionResult({})


for _name in ("create_access_entry", "describe_access_entry", "list_access_entries", "update_access_entry", "delete_access_entry", "associate_access_policy", "list_associated_access_policies", "disassociate_access_policy"):
    setattr(EKSResponse, _name, globals()[_name])
eks_urls.url_paths.update({
    "{0}/clusters/(?P<name>[^/]+)/access-entries$": eks_urls.response.dispatch,
    "{0}/clusters/(?P<name>[^/]+)/access-entries/(?P<principalArn>.+)/access-policies$": eks_urls.response.dispatch,
    "{0}/clusters/(?P<name>[^/]+)/access-entries/(?P<principalArn>.+)/access-policies/(?P<policyArn>.+)$": eks_urls.response.dispatch,
    "{0}/clusters/(?P<name>[^/]+)/access-entries/(?P<principalArn>.+)$": eks_urls.response.dispatch,
})


# --- EKS tags: node groups and add-ons too ---------------------------------------------------
# moto tags clusters only.

def _taggable(backend):
    for cluster in backend.clusters.values():
        yield cluster.arn, cluster
        yield from ((n.arn, n) for n in cluster.nodegroups.values())
        yield from ((f.fargate_profile_arn, f) for f in cluster.fargate_profiles.values())
        yield from ((a.addon_arn, a) for a in addons_of(cluster).values())
        yield from ((e.access_entry_arn, e) for e in entries_of(cluster).values())


def tagged(backend, arn, operation):
    found = next((obj for candidate, obj in _taggable(backend) if candidate == arn), None)
    if found is None:  # moto's own answer
        raise ResourceNotFoundException(clusterName=None, nodegroupName=None, fargateProfileName=None, addonName=None, message=f"An error occurred (NotFoundException) when calling the {operation} operation: Resource was not found")
    return found


def eks_tag_resource(self, resource_arn, tags):
    tagged(self, resource_arn, "TagResource").tags.update(tags)


def eks_untag_resource(self, resource_arn, tag_keys):
    tags = tagged(self, resource_arn, "UntagResource").tags
    for key in [tag_keys] if isinstance(tag_keys, str) else tag_keys:
        tags.pop(key, None)


def eks_list_tags_for_resource(self, resource_arn):
    return tagged(self, resource_arn, "ListTagsForResource").tags


EKSBackend.tag_resource = eks_tag_resource
EKSBackend.untag_resource = eks_untag_resource
EKSBackend.list_tags_for_resource = eks_list_tags_for_resource
