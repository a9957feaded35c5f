#!/usr/bin/env python3
"""moto 5.2.5 in server mode, with the gaps forge's tests need filled in.

Serves moto's own WSGI app (as moto.server.ThreadedMotoServer does) behind a middleware that:
  * isolates tests by account: a 12-digit access key id is used as the account id;
  * counts requests per account as `service:Action` (REST ones as `service:METHOD path`, EFS
    ids and ARNs in paths as {}), and injected faults as `fault:service:Action`
    (GET /_forge/calls?account=ID);
  * injects faults in each protocol's own error format and latency per operation
    (POST /_forge/faults, POST /_forge/latency); a fault with "when": "after" lets moto do the
    work and then answers with a server error, as when a response is lost;
and patches moto (never the installed files) where it lacks what forge calls:
  * EC2 Create/Describe/DeletePlacementGroup(s), which moto 5.2.5 does not implement;
  * NAT gateways that go pending -> available and deleting -> deleted over time, driven by
    moto's state manager (model names `forge::nat_gateway_create` / `_delete`);
  * AWS-managed IAM policies (MOTO_IAM_LOAD_MANAGED_POLICIES);
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
  * CreateCluster's accessConfig, which moto drops (default CONFIG_MAP, as the API's), and the
    endpoint-access defaults in resourcesVpcConfig;
  * EKS add-ons, which moto lacks: Create/Describe/List/Update/DeleteAddon, and
    DescribeAddonVersions over a small built-in catalogue (ADDON_CATALOGUE);
  * EKS tags on node groups, Fargate profiles and add-ons (moto tags clusters only), and
    ListNodegroups on an unknown cluster answering ResourceNotFoundException (moto: 500).
  * EC2 CreateSecurityGroup refusing a VpcId that does not exist (InvalidVpcID.NotFound);
  * FSx for Lustre file systems of the launcher's own (moto keeps what it is given): checked like
    the API (capacity steps per deployment type, PerUnitStorageThroughput, one subnet, known
    security groups), idempotent by ClientRequestToken (IncompatibleParameterError when the
    retry asks for something else), CREATING -> AVAILABLE, or FAILED with FailureDetails when
    no ingress rule of their security groups lets TCP 988 in; UpdateFileSystem only while
    AVAILABLE, UPDATING -> AVAILABLE with a FILE_SYSTEM_UPDATE administrative action whose
    values take effect when it completes; DELETING -> gone; paginated DescribeFileSystems
    answering FileSystemNotFound; tag calls answering ResourceNotFound for unknown ARNs (model
    names `forge::fsx_{create,update,delete}`);
  * FSx data repository associations, which moto lacks: Create/Describe/Update/Delete, idempotent
    by ClientRequestToken, on AVAILABLE Lustre 2.12+ file systems other than SCRATCH_1, one per
    file system path, CREATING/UPDATING -> AVAILABLE and DELETING -> gone (with their file
    system too), DataRepositoryAssociationNotFound, tags (`forge::fsx_association_*`);
  * EFS file systems and mount targets that go creating -> available and deleting -> gone; a
    file system with mount targets, even deleting ones, refuses DeleteFileSystem, one that is not
    available refuses CreateMountTarget (IncorrectFileSystemLifeCycleState); a used CreationToken
    answers 409 FileSystemAlreadyExists with the FileSystemId in the body (moto: without it)
    (`forge::efs_{file_system,mount_target}_{create,delete}`);
  * CloudFormation stacks that go CREATE_IN_PROGRESS -> CREATE_COMPLETE, UPDATE_IN_PROGRESS ->
    UPDATE_COMPLETE and DELETE_IN_PROGRESS -> DELETE_COMPLETE over a phase (resources are made at
    once; the closing events wait for the end of the phase; a deleted stack answers by id only);
    a resource that fails no longer fails CreateStack (moto lets the error escape and leaves the
    stack CREATE_IN_PROGRESS): its CREATE_FAILED event carries the service's error, independent
    resources not made yet are "Resource creation cancelled", what was made is deleted and the
    stack ends ROLLBACK_COMPLETE; a failing update ends UPDATE_ROLLBACK_COMPLETE with an
    UPDATE_FAILED (or CREATE_FAILED) event; resources are deleted in reverse dependency order
    (`forge::cfn_{create,update,delete}`);
  * CloudFormation requests: CreateStack and UpdateStack retried with the same ClientRequestToken
    answer the same StackId, UpdateStack with nothing changed answers "No updates are to be
    performed." (moto: only when parameters are given), busy stacks refuse updates, templates
    that are not YAML or JSON and EC2-typed parameters naming nothing answer ValidationError
    (moto: 500 and nothing), ValidateTemplate checks the template without cfn-lint, and stack
    tags (new ones too) are propagated to the EC2 resources, placement groups and node groups;
  * CloudFormation resource types: AWS::EC2::SecurityGroup with inline rules as in the schema
    (egress too) and in-place updates, AWS::EC2::SecurityGroupIngress/Egress with rule ids as
    Ref, AWS::EC2::LaunchTemplate updates that make the new version the default,
    AWS::EC2::PlacementGroup (the placement groups above) and AWS::EKS::Nodegroup (moto's EKS
    backend, with the node-group phases; Ref `cluster/nodegroup`); types moto cannot update are
    replaced (or retagged in place), not left as they were.

`--phase-seconds` (or POST /_forge/phases {"seconds": s}) sets how long every phase lasts; 0
makes them immediate.

Usage: launcher.py [--port 0] [--phase-seconds 1.0] [--exit-with-stdin]
Prints `port=<port>` on stdout once listening, then serves until killed.
"""

import argparse
import fnmatch
import io
import json
import logging
import os
import random
import re
import sys
import threading
import time
import urllib.parse
import uuid
from collections import Counter

import yaml

os.environ.setdefault("MOTO_IAM_LOAD_MANAGED_POLICIES", "true")
os.environ.pop("MOTO_ACCOUNT_ID", None)

from moto.cloudformation import parsing as cfn_parsing  # noqa: E402
from moto.cloudformation.exceptions import AlreadyExistsException, UnformattedGetAttTemplateException  # noqa: E402
from moto.cloudformation.exceptions import ValidationError as CfnValidationError  # noqa: E402
from moto.cloudformation.models import ChangeSet, CloudFormationBackend, Stack, cloudformation_backends  # noqa: E402
from moto.cloudformation.models import Event as CfnEvent  # noqa: E402
from moto.cloudformation.parsing import ResourceMap  # noqa: E402
from moto.cloudformation.responses import CloudFormationResponse  # noqa: E402
from moto.cloudformation.utils import generate_stack_id, yaml_tag_constructor  # noqa: E402
from moto.core.common_models import CloudFormationModel  # noqa: E402
from moto.core.exceptions import JsonRESTError, ServiceException, _RESTError  # noqa: E402
from moto.core.responses import ActionResult  # noqa: E402
from moto.core.utils import utcnow  # noqa: E402
from moto.ec2.exceptions import EC2ClientError, InvalidSecurityGroupNotFoundError  # noqa: E402
from moto.ec2.models.launch_templates import LaunchTemplate as EC2LaunchTemplate  # noqa: E402
from moto.ec2.models.nat_gateways import NatGateway  # noqa: E402
from moto.ec2.models.security_groups import SecurityGroup as EC2SecurityGroup  # noqa: E402
from moto.ec2.models.security_groups import SecurityGroupBackend, SecurityGroupIngress  # noqa: E402
from moto.ec2.responses import EC2Response  # noqa: E402
from moto.efs.exceptions import EFSError  # noqa: E402
from moto.efs.exceptions import FileSystemInUse as EfsFileSystemInUse  # noqa: E402
from moto.efs.exceptions import FileSystemNotFound as EfsFileSystemNotFound  # noqa: E402
from moto.efs.exceptions import MountTargetNotFound as EfsMountTargetNotFound  # noqa: E402
from moto.efs.models import EFSBackend  # noqa: E402
from moto.efs.models import FileSystem as EfsFileSystem  # noqa: E402
from moto.efs.models import MountTarget as EfsMountTarget  # noqa: E402
from moto.efs.responses import EFSResponse  # noqa: E402
from moto.eks import urls as eks_urls  # noqa: E402
from moto.eks.exceptions import InvalidParameterException, InvalidRequestException, ResourceInUseException, ResourceNotFoundException  # noqa: E402
from moto.eks.models import CLUSTER_NOT_READY_MSG, EKSBackend, Nodegroup, paginated_list, validate_safe_to_delete  # noqa: E402
from moto.eks.models import Cluster as EksCluster  # noqa: E402
from moto.eks.responses import EKSResponse  # noqa: E402
from moto.fsx.responses import FSxResponse  # noqa: E402
from moto.moto_api import state_manager  # noqa: E402
from moto.moto_api._internal.managed_state_model import ManagedState  # noqa: E402
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app  # noqa: E402
from werkzeug.serving import make_server  # noqa: E402

DEFAULT_ACCOUNT = "123456789012"


# --- EC2 placement groups --------------------------------------------------------------------

def _placement_groups(backend):
    if not hasattr(backend, "_forge_placement_groups"):
        backend._forge_placement_groups = {}
    return backend._forge_placement_groups


PLACEMENT_STRATEGIES = ("cluster", "partition", "spread")


def check_strategy(strategy):
    if strategy not in PLACEMENT_STRATEGIES:
        raise EC2ClientError("InvalidParameterValue", f"Value ({strategy}) for parameter strategy is invalid.")


def new_placement_group(backend, name, strategy, tags, partition_count=None, spread_level=None):
    """A placement group in the account's store (EC2 calls and CloudFormation share it)."""
    check_strategy(strategy)
    groups = _placement_groups(backend)
    if name in groups:
        raise EC2ClientError("InvalidPlacementGroup.Duplicate", f"The Placement Group '{name}' already exists.")
    group = {
        "GroupName": name,
        "GroupId": "pg-" + "%017x" % random.getrandbits(68),
        "GroupArn": f"arn:aws:ec2:{backend.region_name}:{backend.account_id}:placement-group/{name}",
        "State": "available",
        "Strategy": strategy,
        "Tags": [{"Key": k, "Value": v} for k, v in tags.items()],
    }
    if strategy == "partition":
        group["PartitionCount"] = int(partition_count or 2)
    if strategy == "spread" and spread_level:
        group["SpreadLevel"] = spread_level
    groups[name] = group
    return group


def create_placement_group(self):
    name = self._get_param("GroupName")
    strategy = self._get_param("Strategy") or "cluster"
    check_strategy(strategy)
    tags = self._parse_tag_specification("placement-group").get("placement-group", {})
    self.error_on_dryrun()
    group = new_placement_group(self.ec2_backend, name, strategy, tags, self._get_param("PartitionCount"), self._get_param("SpreadLevel"))
    return self._forge_result({"PlacementGroup": group})


def describe_placement_groups(self):
    names = self._get_param("GroupNames", [])
    ids = self._get_param("GroupIds", [])
    filters = self._filters_from_querystring()
    groups = list(_placement_groups(self.ec2_backend).values())
    for wanted, key in ((names, "GroupName"), (ids, "GroupId")):
        if wanted:
            missing = set(wanted) - {g[key] for g in groups}
            if missing:
                raise EC2ClientError("InvalidPlacementGroup.Unknown", f"The Placement Group '{sorted(missing)[0]}' is unknown.")
            groups = [g for g in groups if g[key] in wanted]

    def matches(group, name, values):
        tags = {t["Key"]: t["Value"] for t in group["Tags"]}
        if name.startswith("tag:"):
            return tags.get(name[4:]) in values
        field = {"group-name": "GroupName", "group-id": "GroupId", "strategy": "Strategy", "state": "State"}.get(name)
        if name == "tag-key":
            return any(k in values for k in tags)
        return field is not None and group.get(field) in values

    groups = [g for g in groups if all(matches(g, n, v) for n, v in filters.items())]
    return self._forge_result({"PlacementGroups": groups})


def delete_placement_group(self):
    name = self._get_param("GroupName")
    self.error_on_dryrun()
    if _placement_groups(self.ec2_backend).pop(name, None) is None:
        raise EC2ClientError("InvalidPlacementGroup.Unknown", f"The Placement Group '{name}' is unknown.")
    return self._forge_result({})


def _forge_result(self, result):
    from moto.core.responses import ActionResult

    return ActionResult(result)


EC2Response._forge_result = _forge_result
EC2Response.create_placement_group = create_placement_group
EC2Response.describe_placement_groups = describe_placement_groups
EC2Response.delete_placement_group = delete_placement_group


# --- EC2 security groups: the VPC must exist -------------------------------------------------
# moto makes a group in any VpcId it is given; EC2 (and so CloudFormation) refuses an unknown one.

_moto_create_security_group = SecurityGroupBackend.create_security_group


def create_security_group(self, name, description, vpc_id=None, tags=None, force=False, is_default=None):
    if vpc_id and vpc_id not in self.vpcs:
        raise EC2ClientError("InvalidVpcID.NotFound", f"The vpc ID '{vpc_id}' does not exist")
    return _moto_create_security_group(self, name, description, vpc_id=vpc_id, tags=tags, force=force, is_default=is_default)


SecurityGroupBackend.create_security_group = create_security_group


# --- NAT gateway phases ----------------------------------------------------------------------

def _nat_state(self):
    phase = self.__dict__.get("_forge_phase")
    return phase.status if phase is not None else self.__dict__.get("_forge_state")


def _set_nat_state(self, value):
    if value == "available":
        self._forge_phase = ManagedState("forge::nat_gateway_create", [("pending", "available")])
    elif value == "deleted":
        self._forge_phase = ManagedState("forge::nat_gateway_delete", [("deleting", "deleted")])
    else:
        self._forge_phase = None
        self._forge_state = value


NatGateway.state = property(_nat_state, _set_nat_state)


PHASE_MODELS = (
    "forge::nat_gateway_create", "forge::nat_gateway_delete",
    "forge::eks_cluster_create", "forge::eks_cluster_delete", "forge::eks_cluster_update",
    "forge::eks_nodegroup_create", "forge::eks_nodegroup_delete", "forge::eks_nodegroup_update",
    "forge::eks_addon_create", "forge::eks_addon_delete", "forge::eks_addon_update",
    "forge::eks_update",
    "forge::fsx_create", "forge::fsx_update", "forge::fsx_delete",
    "forge::fsx_association_create", "forge::fsx_association_update", "forge::fsx_association_delete",
    "forge::efs_file_system_create", "forge::efs_file_system_delete",
    "forge::efs_mount_target_create", "forge::efs_mount_target_delete",
    "forge::cfn_create", "forge::cfn_update", "forge::cfn_delete",
)


def set_phase_seconds(seconds):
    transition = {"progression": "time", "seconds": seconds} if seconds > 0 else {"progression": "immediate"}
    for model in PHASE_MODELS:
        state_manager.register_default_transition(model_name=model, transition=transition)


# --- EKS phases ------------------------------------------------------------------------------
# moto's clusters and node groups are ACTIVE at once and gone at once. Here their `status` is a
# property over a ManagedState: CREATING -> ACTIVE, UPDATING -> ACTIVE, DELETING -> gone. A
# resource whose delete phase has ended is dropped the next time its account's EKS backend is
# used, so until then DescribeX/ListX still show it DELETING and its name stays taken.

GONE = "forge:gone"  # the end of a delete phase; never shown, the resource is dropped instead
DEFAULT_ENDPOINT_ACCESS = {"endpointPublicAccess": True, "endpointPrivateAccess": False, "publicAccessCidrs": ["0.0.0.0/0"]}


def _phased_get(self):
    phase = self.__dict__.get("_forge_phase")
    status = phase.status if phase is not None else GONE
    # With no phase, or a delete phase that just ended (the resource is about to be dropped),
    # the status is the label set last.
    return self.__dict__.get("_forge_status") if status == GONE else status


def _phased_set(self, value):
    self._forge_phase = None
    self._forge_status = value


phased_status = property(_phased_get, _phased_set)


def start_phase(obj, model, start, end):
    obj._forge_status = start
    obj._forge_phase = ManagedState(model, [(start, end)])


def is_gone(obj):
    phase = obj.__dict__.get("_forge_phase")
    return phase is not None and phase.status == GONE


def start_delete(obj, model):
    if obj.status != "DELETING":  # deleting again changes nothing
        start_phase(obj, model, "DELETING", GONE)


def _drop_gone(objects):
    """Remove the resources whose delete phase ended; how many went."""
    gone = [key for key, obj in list(objects.items()) if is_gone(obj)]
    return sum(objects.pop(key, None) is not None for key in gone)


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


def drop_cluster_security_group(cluster):
    group = cluster.resources_vpc_config.get("clusterSecurityGroupId")
    if group and "_forge_ec2" in cluster.__dict__:
        cluster._forge_ec2.delete_security_group(group_id=group)


def drop_deleted(backend):
    for cluster in [c for c in backend.clusters.values() if is_gone(c)]:
        drop_cluster_security_group(cluster)
    backend.cluster_count -= _drop_gone(backend.clusters)
    for cluster in list(backend.clusters.values()):
        cluster.nodegroup_count -= _drop_gone(cluster.nodegroups)
        _drop_gone(addons_of(cluster))
    return backend


EksCluster.status = phased_status
Nodegroup.status = phased_status
_moto_eks_backend = EKSResponse.eks_backend
EKSResponse.eks_backend = property(lambda self: drop_deleted(_moto_eks_backend.fget(self)))

_moto_eks = {name: getattr(EKSBackend, name) for name in ("create_cluster", "create_nodegroup", "list_nodegroups", "update_nodegroup_config")}


def eks_create_cluster(self, **kwargs):
    if kwargs["name"] in self.clusters:  # moto's own ResourceInUseException, before any check
        return _moto_eks["create_cluster"](self, **kwargs)
    ec2, vpc_id = cluster_vpc(self, (kwargs.get("resources_vpc_config") or {}).get("subnetIds"))
    cluster = _moto_eks["create_cluster"](self, **kwargs)
    cluster.resources_vpc_config = {**DEFAULT_ENDPOINT_ACCESS, **(cluster.resources_vpc_config or {})}
    cluster_security_group(ec2, vpc_id, cluster)
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
    nodegroup.scaling_config = dict(nodegroup.scaling_config)  # moto may hand out its shared default
    start_phase(nodegroup, "forge::eks_nodegroup_create", "CREATING", "ACTIVE")
    return nodegroup


def eks_delete_nodegroup(self, cluster_name, nodegroup_name):
    nodegroup = self.describe_nodegroup(cluster_name=cluster_name, nodegroup_name=nodegroup_name)
    start_delete(nodegroup, "forge::eks_nodegroup_delete")
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
        self.errors = []
        start_phase(self, "forge::eks_update", "InProgress", "Successful")


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
    done = _moto_eks["update_nodegroup_config"](self, cluster_name=cluster_name, nodegroup_name=nodegroup_name, **kwargs)
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
    template = self._get_param("launchTemplate")
    if template:
        nodegroup.launch_template = {**(nodegroup.launch_template or {}), **template}
        params.append(update_param("LaunchTemplateVersion", str(template.get("version", ""))))
    for key, kind in (("version", "Version"), ("releaseVersion", "ReleaseVersion")):
        if self._get_param(key):
            setattr(nodegroup, "version" if key == "version" else "release_version", self._get_param(key))
            params.append(update_param(kind, self._get_param(key)))
    update = begin_update(self.eks_backend.clusters[cluster_name], nodegroup, "forge::eks_nodegroup_update", "VersionUpdate", params, nodegroup=name)
    return ActionResult({"update": update})


def update_cluster_config(self):
    """moto replaces resourcesVpcConfig whole and answers with the cluster; the API changes only
    the keys given and answers with an update."""
    name = self._get_param("name")
    cluster = self.eks_backend.describe_cluster(name=name)
    require_active_cluster(cluster)
    vpc, logging_, access = (self._get_param(p) for p in ("resourcesVpcConfig", "logging", "accessConfig"))
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


# --- EKS tags: node groups and add-ons too ---------------------------------------------------
# moto tags clusters only.

def _taggable(backend):
    for cluster in backend.clusters.values():
        yield cluster.arn, cluster
        yield from ((n.arn, n) for n in cluster.nodegroups.values())
        yield from ((f.fargate_profile_arn, f) for f in cluster.fargate_profiles.values())
        yield from ((a.addon_arn, a) for a in addons_of(cluster).values())


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


# --- FSx for Lustre --------------------------------------------------------------------------
# moto keeps an FSx file system as given and is done with it at once. Lustre file systems here
# are the launcher's own: checked like the API, CREATING -> AVAILABLE (FAILED when their
# security groups shut out Lustre's port 988), UPDATING -> AVAILABLE, DELETING -> gone, in
# moto's backend (so backups and tags still find them). Data repository associations, which
# moto lacks, live the same way. Other file system types stay moto's.

LUSTRE_THROUGHPUT = {"PERSISTENT_1": (50, 100, 200), "PERSISTENT_2": (125, 250, 500, 1000)}
LUSTRE_HDD_STEP = {12: 6000, 40: 1800}  # PERSISTENT_1 on HDD: throughput -> capacity increment
LUSTRE_VERSIONS = ("2.10", "2.12", "2.15")
LUSTRE_PORT = 988  # LNET
DRA_PAGE = 25  # DescribeDataRepositoryAssociations' MaxResults ceiling


def fsx_error(code, message, **fields):
    """An FSx (JSON 1.1) error; extra members (Parameter, InvalidSubnetId, …) go in the body."""
    error = JsonRESTError(code, message)
    error.description = json.dumps({"__type": code, "Message": message, **fields})
    return error


def fsx_id(prefix):
    return f"{prefix}-%017x" % random.getrandbits(68)


def fsx_state(backend):
    """The launcher's FSx state on moto's backend: associations and idempotency tokens."""
    if "_forge_dras" not in backend.__dict__:
        backend._forge_dras, backend._forge_tokens = {}, {}
    return backend


def lustre_network(backend, subnet_ids, group_ids):
    """The VPC and security groups of a new Lustre file system, checked like the API."""
    from moto.ec2.models import ec2_backends

    ec2 = ec2_backends[backend.account_id][backend.region_name]
    if len(subnet_ids or []) != 1:
        raise fsx_error("InvalidNetworkSettings", "A Lustre file system takes exactly one subnet ID.")
    try:
        vpc_id = ec2.get_subnet(subnet_ids[0]).vpc_id
    except Exception:
        raise fsx_error("InvalidNetworkSettings", f"The subnet ID '{subnet_ids[0]}' does not exist", InvalidSubnetId=subnet_ids[0]) from None
    groups = []
    for group_id in group_ids or []:
        group = ec2.get_security_group_from_id(group_id)
        if group is None:
            raise fsx_error("InvalidNetworkSettings", f"The security group ID '{group_id}' does not exist", InvalidSecurityGroupId=group_id)
        if group.vpc_id != vpc_id:
            raise fsx_error("InvalidNetworkSettings", f"The security group '{group_id}' is not in VPC {vpc_id}, the VPC of subnet {subnet_ids[0]}", InvalidSecurityGroupId=group_id)
        groups.append(group)
    return vpc_id, groups or [ec2.get_default_security_group(vpc_id)]


def admits_lustre(groups):
    """Whether an ingress rule of the groups lets TCP 988 in (all traffic, or a TCP range over
    988) from anywhere: the group itself, another group or a CIDR."""
    for group in groups:
        for rule in group.ingress_rules if group else []:
            covers = rule.ip_protocol == "-1" or (rule.ip_protocol == "tcp" and rule.from_port <= LUSTRE_PORT <= rule.to_port)
            if covers and (rule.source_group or rule.ip_range or rule.prefix_list_id):
                return True
    return False


def lnet_failure(given, groups):
    if admits_lustre(groups):
        return None
    if not given:
        return f"The file system cannot be created because the default security group in the VPC provided does not permit Amazon FSx Lustre LNET network traffic on port {LUSTRE_PORT}."
    return f"The file system cannot be created because the security groups [{', '.join(given)}] provided do not permit Amazon FSx Lustre LNET network traffic on port {LUSTRE_PORT}."


def check_capacity(deployment, storage_type, throughput, capacity):
    if capacity is None:
        raise fsx_error("BadRequest", "StorageCapacity is required for Lustre file systems.")
    if storage_type == "HDD":
        step = LUSTRE_HDD_STEP.get(throughput)
        if step and capacity > 0 and capacity % step == 0:
            return
        raise fsx_error("BadRequest", f"StorageCapacity {capacity} is not valid for an HDD file system with PerUnitStorageThroughput {throughput}: it must be a multiple of {step or 6000} GiB.")
    step = 3600 if deployment == "SCRATCH_1" else 2400
    if capacity in (1200, 2400) or (capacity > 0 and capacity % step == 0):
        return
    raise fsx_error("BadRequest", f"StorageCapacity {capacity} is not valid for a {deployment} file system: it must be 1200, 2400 or a multiple of {step} GiB.")


def check_throughput(deployment, storage_type, throughput):
    if storage_type == "HDD" and deployment != "PERSISTENT_1":
        raise fsx_error("BadRequest", f"HDD storage is supported only by PERSISTENT_1 file systems, not {deployment}.")
    allowed = tuple(LUSTRE_HDD_STEP) if storage_type == "HDD" else LUSTRE_THROUGHPUT.get(deployment)
    if allowed is None:
        if throughput is not None:
            raise fsx_error("BadRequest", f"PerUnitStorageThroughput is not supported by {deployment} file systems.")
        return
    if throughput is None:
        raise fsx_error("BadRequest", f"PerUnitStorageThroughput is required for {deployment} file systems.")
    if throughput not in allowed:
        raise fsx_error("InvalidPerUnitStorageThroughput", "An invalid value for PerUnitStorageThroughput was provided. Please create your file system again, using a valid value.")


def check_lustre_request(request):
    config = request.get("LustreConfiguration") or {}
    deployment = config.get("DeploymentType", "SCRATCH_1")
    if deployment not in ("SCRATCH_1", "SCRATCH_2", "PERSISTENT_1", "PERSISTENT_2"):
        raise fsx_error("BadRequest", f"Invalid DeploymentType {deployment}.")
    version = request.get("FileSystemTypeVersion", "2.15")
    if version not in LUSTRE_VERSIONS or (deployment == "PERSISTENT_2" and version == "2.10"):
        raise fsx_error("BadRequest", f"FileSystemTypeVersion {version} is not supported for {deployment} file systems.")
    storage_type = request.get("StorageType", "SSD")
    throughput = config.get("PerUnitStorageThroughput")
    check_throughput(deployment, storage_type, throughput)
    check_capacity(deployment, storage_type, throughput, request.get("StorageCapacity"))


def _normalised(request):
    """Tags and security groups in any order are the same request."""
    request = dict(request)
    if request.get("Tags"):
        request["Tags"] = sorted(request["Tags"], key=lambda t: t.get("Key", ""))
    if request.get("SecurityGroupIds"):
        request["SecurityGroupIds"] = sorted(request["SecurityGroupIds"])
    return request


def same_request(kind, token, old, new):
    """A retry with a used ClientRequestToken must ask for the same thing."""
    old, new = _normalised(old), _normalised(new)
    for key in sorted(set(old) | set(new)):
        if old.get(key) != new.get(key):
            raise fsx_error("IncompatibleParameterError", f"The ClientRequestToken '{token}' was already used to {kind} with a different value of {key}.", Parameter=key)


class LustreUpdate:
    """A FILE_SYSTEM_UPDATE administrative action: IN_PROGRESS -> COMPLETED; its target values
    take effect when it completes."""

    status = phased_status

    def __init__(self, targets):
        self.targets = targets
        self.request_time = time.time()
        self.applied = False
        start_phase(self, "forge::fsx_update", "IN_PROGRESS", "COMPLETED")

    def to_dict(self):
        return {"AdministrativeActionType": "FILE_SYSTEM_UPDATE", "RequestTime": self.request_time, "Status": self.status, "TargetFileSystemValues": self.targets}


class LustreFileSystem:
    status = phased_status  # CREATING -> AVAILABLE | FAILED, DELETING -> gone

    def __init__(self, backend, request, vpc_id, failure):
        config = request.get("LustreConfiguration") or {}
        deployment = config.get("DeploymentType", "SCRATCH_1")
        self.backend = backend
        self.request = request
        self.file_system_id = fsx_id("fs")
        self.resource_arn = f"arn:{backend.partition}:fsx:{backend.region_name}:{backend.account_id}:file-system/{self.file_system_id}"
        self.file_system_type = "LUSTRE"
        self.storage_capacity = request["StorageCapacity"]
        self.storage_type = request.get("StorageType", "SSD")
        self.subnet_ids = list(request["SubnetIds"])
        self.security_group_ids = list(request.get("SecurityGroupIds") or [])
        self.vpc_id = vpc_id
        self.version = request.get("FileSystemTypeVersion", "2.15")
        self.creation_time = time.time()
        # SCRATCH_1 file systems all mount as "fsx"; the others get a name of their own.
        mount_name = "fsx" if deployment == "SCRATCH_1" else "".join(random.choices("abcdefghijklmnopqrstuvwxyz0123456789", k=8))
        self.lustre = {"WeeklyMaintenanceStartTime": "1:05:00", "DeploymentType": deployment, "MountName": mount_name, "DataCompressionType": "NONE", "CopyTagsToBackups": False, "LogConfiguration": {"Level": "DISABLED"}}
        self.lustre.update({k: v for k, v in config.items() if k not in ("ImportPath", "ExportPath", "ImportedFileChunkSize", "AutoImportPolicy")})
        self.failure = failure
        self.actions = []
        self.update_token = None
        start_phase(self, "forge::fsx_create", "CREATING", "FAILED" if failure else "AVAILABLE")

    @property
    def lifecycle(self):
        self.settle()
        status = self.status
        busy = status == "AVAILABLE" and any(a.status == "IN_PROGRESS" for a in self.actions)
        return "UPDATING" if busy else status

    def settle(self):
        """Apply the target values of updates that completed."""
        for action in self.actions:
            if not action.applied and action.status == "COMPLETED":
                action.applied = True
                self.storage_capacity = action.targets.get("StorageCapacity", self.storage_capacity)
                self.lustre.update(action.targets.get("LustreConfiguration", {}))

    def to_dict(self):
        lifecycle = self.lifecycle
        result = {
            "OwnerId": self.backend.account_id,
            "CreationTime": self.creation_time,
            "FileSystemId": self.file_system_id,
            "FileSystemType": "LUSTRE",
            "Lifecycle": lifecycle,
            "StorageCapacity": self.storage_capacity,
            "StorageType": self.storage_type,
            "VpcId": self.vpc_id,
            "SubnetIds": self.subnet_ids,
            "NetworkInterfaceIds": [],
            "DNSName": f"{self.file_system_id}.fsx.{self.backend.region_name}.amazonaws.com",
            "ResourceARN": self.resource_arn,
            "Tags": self.backend.list_tags_for_resource(self.resource_arn),
            "LustreConfiguration": dict(self.lustre),
            "AdministrativeActions": [a.to_dict() for a in self.actions],
            "FileSystemTypeVersion": self.version,
            "NetworkType": "IPV4",
        }
        if self.request.get("KmsKeyId"):
            result["KmsKeyId"] = self.request["KmsKeyId"]
        if lifecycle == "FAILED":
            result["FailureDetails"] = {"Message": self.failure}
        return result


class Association:
    status = phased_status  # CREATING -> AVAILABLE, UPDATING -> AVAILABLE, DELETING -> gone

    def __init__(self, backend, file_system, request):
        self.backend = backend
        self.request = request
        self.association_id = fsx_id("dra")
        self.file_system_id = file_system.file_system_id
        self.resource_arn = f"arn:{backend.partition}:fsx:{backend.region_name}:{backend.account_id}:association/{self.file_system_id}/{self.association_id}"
        self.file_system_path = request["FileSystemPath"]
        self.data_repository_path = request["DataRepositoryPath"]
        self.batch_import = request.get("BatchImportMetaDataOnCreate", False)
        self.chunk_size = request.get("ImportedFileChunkSize", 1024)
        self.s3 = request.get("S3")
        self.creation_time = time.time()
        start_phase(self, "forge::fsx_association_create", "CREATING", "AVAILABLE")

    def to_dict(self):
        result = {
            "AssociationId": self.association_id,
            "ResourceARN": self.resource_arn,
            "FileSystemId": self.file_system_id,
            "Lifecycle": self.status,
            "FileSystemPath": self.file_system_path,
            "DataRepositoryPath": self.data_repository_path,
            "BatchImportMetaDataOnCreate": self.batch_import,
            "ImportedFileChunkSize": self.chunk_size,
            "Tags": self.backend.list_tags_for_resource(self.resource_arn),
            "CreationTime": self.creation_time,
        }
        if self.s3:
            result["S3"] = self.s3
        return result


def drop_deleted_fsx(backend):
    """Forget the file systems and associations whose delete phase ended."""
    state = fsx_state(backend)
    gone = [a for a in state._forge_dras.values() if is_gone(a)]
    gone += [f for f in backend.file_systems.values() if is_gone(f)]
    _drop_gone(state._forge_dras)
    _drop_gone(backend.file_systems)
    arns = {obj.resource_arn for obj in gone}
    for arn in arns:
        backend.tagger.delete_all_tags_for_resource(arn)
    ids = {getattr(obj, "association_id", None) or obj.file_system_id for obj in gone}
    for key in [k for k, v in state._forge_tokens.items() if v in ids]:
        del state._forge_tokens[key]
    return backend


def _fsx_params(self):
    params = json.loads(self.body or "{}")
    return params, {k: v for k, v in params.items() if k != "ClientRequestToken"}


def _lustre_file_system(backend, file_system_id):
    file_system = backend.file_systems.get(file_system_id)
    if file_system is None:
        raise fsx_error("FileSystemNotFound", f"File system '{file_system_id}' does not exist.")
    return file_system


def _association(backend, association_id):
    association = fsx_state(backend)._forge_dras.get(association_id)
    if association is None:
        raise fsx_error("DataRepositoryAssociationNotFound", f"Data repository association '{association_id}' does not exist.")
    return association


def _page(items, key, max_results, token):
    """One page of `items` and the token of the next: the key of its first item."""
    start = 0
    if token:
        keys = [key(item) for item in items]
        if token not in keys:
            raise fsx_error("BadRequest", "The NextToken is not valid.")
        start = keys.index(token)
    end = start + (max_results or len(items))
    return items[start:end], (key(items[end]) if end < len(items) else None)


def _tags(backend, arn, tags):
    if tags:
        backend.tagger.tag_resource(arn, tags)


def fsx_create_file_system(self):
    params, request = _fsx_params(self)
    if request.get("FileSystemType") != "LUSTRE":
        return _moto_fsx_create_file_system(self)
    backend, token = fsx_state(self.fsx_backend), params.get("ClientRequestToken")
    earlier = backend._forge_tokens.get(("file-system", token)) if token else None
    if earlier in backend.file_systems:
        same_request("create a file system", token, backend.file_systems[earlier].request, request)
        return json.dumps({"FileSystem": backend.file_systems[earlier].to_dict()})
    check_lustre_request(request)
    vpc_id, groups = lustre_network(backend, request.get("SubnetIds"), request.get("SecurityGroupIds"))
    file_system = LustreFileSystem(backend, request, vpc_id, lnet_failure(request.get("SecurityGroupIds"), groups))
    backend.file_systems[file_system.file_system_id] = file_system
    _tags(backend, file_system.resource_arn, request.get("Tags"))
    if token:
        backend._forge_tokens[("file-system", token)] = file_system.file_system_id
    return json.dumps({"FileSystem": file_system.to_dict()})


def fsx_describe_file_systems(self):
    params, _ = _fsx_params(self)
    backend = self.fsx_backend
    ids = params.get("FileSystemIds")
    file_systems = [_lustre_file_system(backend, i) for i in ids] if ids else list(backend.file_systems.values())
    found, next_token = _page(file_systems, lambda f: f.file_system_id, params.get("MaxResults"), params.get("NextToken"))
    return json.dumps({"FileSystems": [f.to_dict() for f in found], **({"NextToken": next_token} if next_token else {})})


def fsx_update_file_system(self):
    params, request = _fsx_params(self)
    file_system = _lustre_file_system(self.fsx_backend, request.get("FileSystemId"))
    token = params.get("ClientRequestToken")
    if not isinstance(file_system, LustreFileSystem):
        raise fsx_error("BadRequest", "Only Lustre file systems can be updated here.")
    if token and token == file_system.update_token:
        return json.dumps({"FileSystem": file_system.to_dict()})
    lifecycle = file_system.lifecycle
    if lifecycle != "AVAILABLE":
        busy = "there is already an update in progress" if lifecycle == "UPDATING" else f"it is {lifecycle}"
        raise fsx_error("BadRequest", f"Unable to perform the update on file system {file_system.file_system_id}: {busy}. Updates are accepted only while it is AVAILABLE.")
    targets = lustre_update_targets(file_system, request)
    file_system.actions.append(LustreUpdate(targets))
    file_system.update_token = token
    return json.dumps({"FileSystem": file_system.to_dict()})


def lustre_update_targets(file_system, request):
    """The values an update asks for, checked against the file system: capacity only grows, in
    the deployment type's increments; throughput only on persistent file systems."""
    deployment = file_system.lustre["DeploymentType"]
    config = dict(request.get("LustreConfiguration") or {})
    targets = {}
    capacity = request.get("StorageCapacity")
    if capacity is not None and capacity != file_system.storage_capacity:
        if capacity < file_system.storage_capacity:
            raise fsx_error("BadRequest", f"Storage capacity can only be increased: the file system has {file_system.storage_capacity} GiB, {capacity} GiB were asked for.")
        check_capacity(deployment, file_system.storage_type, file_system.lustre.get("PerUnitStorageThroughput"), capacity)
        targets["StorageCapacity"] = capacity
    throughput = config.get("PerUnitStorageThroughput")
    if throughput is not None:
        if deployment not in LUSTRE_THROUGHPUT:
            raise fsx_error("BadRequest", f"PerUnitStorageThroughput cannot be changed on {deployment} file systems.")
        check_throughput(deployment, file_system.storage_type, throughput)
    changed = {k: v for k, v in config.items() if file_system.lustre.get(k) != v}
    if changed:
        targets["LustreConfiguration"] = changed
    if not targets:
        raise fsx_error("BadRequest", "Unable to perform the update: the request does not change the file system.")
    return targets


def fsx_delete_file_system(self):
    params, request = _fsx_params(self)
    backend = fsx_state(self.fsx_backend)
    file_system = _lustre_file_system(backend, request.get("FileSystemId"))
    if not isinstance(file_system, LustreFileSystem):
        return _moto_fsx_delete_file_system(self)
    start_delete(file_system, "forge::fsx_delete")
    for association in backend._forge_dras.values():
        if association.file_system_id == file_system.file_system_id:
            start_delete(association, "forge::fsx_association_delete")
    return json.dumps({"FileSystemId": file_system.file_system_id, "Lifecycle": "DELETING", "LustreResponse": {}})


def fsx_create_data_repository_association(self):
    params, request = _fsx_params(self)
    backend, token = fsx_state(self.fsx_backend), params.get("ClientRequestToken")
    earlier = backend._forge_tokens.get(("association", token)) if token else None
    if earlier in backend._forge_dras:
        same_request("create a data repository association", token, backend._forge_dras[earlier].request, request)
        return json.dumps({"Association": backend._forge_dras[earlier].to_dict()})
    file_system = _lustre_file_system(backend, request.get("FileSystemId"))
    check_association_request(backend, file_system, request)
    association = Association(backend, file_system, request)
    backend._forge_dras[association.association_id] = association
    _tags(backend, association.resource_arn, request.get("Tags"))
    if token:
        backend._forge_tokens[("association", token)] = association.association_id
    return json.dumps({"Association": association.to_dict()})


def check_association_request(backend, file_system, request):
    """Associations link a Lustre 2.12+ file system (not SCRATCH_1) that is AVAILABLE, one per
    file system path, to an S3 path."""
    if not isinstance(file_system, LustreFileSystem) or file_system.lustre["DeploymentType"] == "SCRATCH_1" or file_system.version == "2.10":
        raise fsx_error("BadRequest", "Data repository associations are supported on FSx for Lustre 2.12 and newer file systems, except SCRATCH_1 ones.")
    if file_system.lifecycle != "AVAILABLE":
        raise fsx_error("BadRequest", f"File system {file_system.file_system_id} is {file_system.lifecycle}; data repository associations can be created only when it is AVAILABLE.")
    path = request.get("FileSystemPath")
    if not path or not path.startswith("/"):
        raise fsx_error("BadRequest", "FileSystemPath is required and must start with '/'.")
    if not str(request.get("DataRepositoryPath", "")).startswith("s3://"):
        raise fsx_error("BadRequest", "DataRepositoryPath must be an S3 path (s3://bucket/prefix).")
    for other in backend._forge_dras.values():
        if other.file_system_id == file_system.file_system_id and other.file_system_path == path:
            raise fsx_error("BadRequest", f"File system path {path} is already used by data repository association {other.association_id}.")


def fsx_describe_data_repository_associations(self):
    params, _ = _fsx_params(self)
    backend = fsx_state(self.fsx_backend)
    ids = params.get("AssociationIds")
    associations = [_association(backend, i) for i in ids] if ids else list(backend._forge_dras.values())
    for flt in params.get("Filters") or []:
        field = {"file-system-id": lambda a: a.file_system_id, "data-repository-type": lambda a: "S3"}.get(flt.get("Name"))
        if field is None:
            raise fsx_error("BadRequest", f"The filter {flt.get('Name')} is not supported for data repository associations.")
        associations = [a for a in associations if field(a) in flt.get("Values", [])]
    max_results = params.get("MaxResults") or DRA_PAGE
    if not 1 <= max_results <= DRA_PAGE:
        raise fsx_error("BadRequest", f"MaxResults must be between 1 and {DRA_PAGE}.")
    found, next_token = _page(associations, lambda a: a.association_id, max_results, params.get("NextToken"))
    return json.dumps({"Associations": [a.to_dict() for a in found], **({"NextToken": next_token} if next_token else {})})


def fsx_update_data_repository_association(self):
    params, request = _fsx_params(self)
    association = _association(fsx_state(self.fsx_backend), request.get("AssociationId"))
    if association.status != "AVAILABLE":
        raise fsx_error("BadRequest", f"Data repository association {association.association_id} is {association.status}; it can be updated only when it is AVAILABLE.")
    if "ImportedFileChunkSize" in request:
        association.chunk_size = request["ImportedFileChunkSize"]
    if "S3" in request:
        association.s3 = request["S3"]
    start_phase(association, "forge::fsx_association_update", "UPDATING", "AVAILABLE")
    return json.dumps({"Association": association.to_dict()})


def fsx_delete_data_repository_association(self):
    params, request = _fsx_params(self)
    association = _association(fsx_state(self.fsx_backend), request.get("AssociationId"))
    start_delete(association, "forge::fsx_association_delete")
    return json.dumps({"AssociationId": association.association_id, "Lifecycle": "DELETING", "DeleteDataInFileSystem": bool(request.get("DeleteDataInFileSystem"))})


def fsx_known_arn(self):
    """The ResourceARN of a tag call; FSx answers ResourceNotFound for what it does not have."""
    arn = json.loads(self.body or "{}").get("ResourceARN")
    backend = fsx_state(self.fsx_backend)
    known = [*backend.file_systems.values(), *backend.backups.values(), *backend._forge_dras.values()]
    if arn not in {obj.resource_arn for obj in known}:
        raise fsx_error("ResourceNotFound", f"The resource ARN '{arn}' does not exist.", ResourceARN=arn)


def fsx_checked_arn(method):
    def call(self):
        fsx_known_arn(self)
        return method(self)

    return call


_moto_fsx_create_file_system = FSxResponse.create_file_system
_moto_fsx_delete_file_system = FSxResponse.delete_file_system
_moto_fsx_backend = FSxResponse.fsx_backend
FSxResponse.fsx_backend = property(lambda self: drop_deleted_fsx(_moto_fsx_backend.fget(self)))
FSxResponse.create_file_system = fsx_create_file_system
FSxResponse.describe_file_systems = fsx_describe_file_systems
FSxResponse.update_file_system = fsx_update_file_system
FSxResponse.delete_file_system = fsx_delete_file_system
FSxResponse.create_data_repository_association = fsx_create_data_repository_association
FSxResponse.describe_data_repository_associations = fsx_describe_data_repository_associations
FSxResponse.update_data_repository_association = fsx_update_data_repository_association
FSxResponse.delete_data_repository_association = fsx_delete_data_repository_association
for _name in ("tag_resource", "untag_resource", "list_tags_for_resource"):
    setattr(FSxResponse, _name, fsx_checked_arn(getattr(FSxResponse, _name)))


# --- EFS phases ------------------------------------------------------------------------------
# moto's file systems and mount targets are available at once and gone at once. Here their
# LifeCycleState is a phase: creating -> available, deleting -> gone (dropped, with moto's own
# delete, the next time the account's EFS backend is used). A file system with mount targets,
# even deleting ones, refuses DeleteFileSystem; one that is not available refuses new mount
# targets. A used CreationToken answers 409 FileSystemAlreadyExists naming the file system.


class EfsFileSystemExists(EFSError):
    code = 409

    def __init__(self, file_system):
        message = f"File system '{file_system.file_system_id}' already exists with creation token '{file_system.creation_token}'"
        super().__init__("FileSystemAlreadyExists", message)
        self.description = json.dumps({"ErrorCode": "FileSystemAlreadyExists", "Message": message, "FileSystemId": file_system.file_system_id})


class EfsWrongState(EFSError):
    code = 409

    def __init__(self, file_system):
        super().__init__("IncorrectFileSystemLifeCycleState", f"File system '{file_system.file_system_id}' is {file_system.life_cycle_state}; mount targets can be created only when it is available.")


def efs_info_with_state(info_json):
    """moto builds the description from the instance's attributes; the state is a property."""
    def described(self):
        return {**info_json(self), "LifeCycleState": self.life_cycle_state}

    return described


def efs_create_file_system(self, creation_token, **kwargs):
    earlier = next((fs for fs in self.file_systems_by_id.values() if fs.creation_token == creation_token), None)
    if earlier is not None:
        raise EfsFileSystemExists(earlier)
    file_system = _moto_efs["create_file_system"](self, creation_token, **kwargs)
    start_phase(file_system, "forge::efs_file_system_create", "creating", "available")
    return file_system


def efs_create_mount_target(self, file_system_id, subnet_id, ip_address=None, security_groups=None):
    file_system = self.file_systems_by_id.get(file_system_id)
    if file_system is not None and file_system.life_cycle_state != "available":
        raise EfsWrongState(file_system)
    mount_target = _moto_efs["create_mount_target"](self, file_system_id, subnet_id, ip_address, security_groups)
    start_phase(mount_target, "forge::efs_mount_target_create", "creating", "available")
    return mount_target


def efs_delete_mount_target(self, mount_target_id):
    if mount_target_id not in self.mount_targets_by_id:
        raise EfsMountTargetNotFound(mount_target_id)
    mount_target = self.mount_targets_by_id[mount_target_id]
    if mount_target.life_cycle_state != "deleting":
        start_phase(mount_target, "forge::efs_mount_target_delete", "deleting", GONE)


def efs_delete_file_system(self, file_system_id):
    if file_system_id not in self.file_systems_by_id:
        raise EfsFileSystemNotFound(file_system_id)
    file_system = self.file_systems_by_id[file_system_id]
    if file_system.number_of_mount_targets > 0:  # deleting ones count: they are still there
        raise EfsFileSystemInUse("Must delete all mount targets before deleting file system.")
    if file_system.life_cycle_state != "deleting":
        start_phase(file_system, "forge::efs_file_system_delete", "deleting", GONE)


def drop_deleted_efs(backend):
    for mount_target_id in [i for i, m in backend.mount_targets_by_id.items() if is_gone(m)]:
        _moto_efs["delete_mount_target"](backend, mount_target_id)
    for file_system_id in [i for i, f in backend.file_systems_by_id.items() if is_gone(f)]:
        _moto_efs["delete_file_system"](backend, file_system_id)
        backend.tagging_service.delete_all_tags_for_resource(file_system_id)
    return backend


EfsFileSystem.life_cycle_state = phased_status
EfsMountTarget.life_cycle_state = phased_status
EfsFileSystem.info_json = efs_info_with_state(EfsFileSystem.info_json)
EfsMountTarget.info_json = efs_info_with_state(EfsMountTarget.info_json)
_moto_efs = {name: getattr(EFSBackend, name) for name in ("create_file_system", "create_mount_target", "delete_mount_target", "delete_file_system")}
EFSBackend.create_file_system = efs_create_file_system
EFSBackend.create_mount_target = efs_create_mount_target
EFSBackend.delete_mount_target = efs_delete_mount_target
EFSBackend.delete_file_system = efs_delete_file_system
_moto_efs_backend = EFSResponse.efs_backend
EFSResponse.efs_backend = property(lambda self: drop_deleted_efs(_moto_efs_backend.fget(self)))


# --- CloudFormation: failures, rollbacks, phases ---------------------------------------------
# moto creates a stack's resources in the CreateStack call and lets the first failing one's
# error escape, leaving the stack CREATE_IN_PROGRESS with what it made. Here, as in AWS, the
# call succeeds and the stack rolls back: the failing resource's CREATE_FAILED event carries the
# service's error, independent resources not yet made are "Resource creation cancelled", the
# resources made are deleted, and the stack ends ROLLBACK_COMPLETE. Resources are still made (or
# changed, or deleted) at once; only the stack's status goes through a phase, and the events
# that end an operation are held back until its phase is over.

STACK_TYPE = "AWS::CloudFormation::Stack"
SHOWS_OUTPUTS = ("CREATE_COMPLETE", "UPDATE_IN_PROGRESS", "UPDATE_COMPLETE", "UPDATE_ROLLBACK_COMPLETE")
SERVICE_NAMES = {"ec2": "AmazonEC2", "iam": "AmazonIdentityManagement", "eks": "Eks", "fsx": "AmazonFSx", "efs": "AmazonElasticFileSystem", "s3": "Amazon S3"}
_request = threading.local()  # the ClientRequestToken of the CloudFormation call being served


class ResourceFailed(Exception):
    """A resource's create, update or delete failed; `reason` is what its event says."""

    def __init__(self, logical_id, resource_type, error):
        super().__init__(logical_id)
        self.logical_id, self.resource_type = logical_id, resource_type
        self.reason = failure_reason(error)


def failure_reason(error):
    """The service's error as a resource event tells it."""
    if isinstance(error, (ServiceException, _RESTError)):
        rest = isinstance(error, _RESTError)
        code, status = (error.error_type, error.code) if rest else (error.code, 400)
        service = type(error).__module__.split(".")[1]
        return f"{error.message} (Service: {SERVICE_NAMES.get(service, service)}; Status Code: {status}; Error Code: {code}; Request ID: {uuid.uuid4()}; Proxy: null)"
    return f"Internal Failure ({type(error).__name__}: {error})"


def references(fragment):
    """The logical ids a template fragment names (Ref, Fn::GetAtt, Fn::Sub, DependsOn)."""
    if isinstance(fragment, list):
        return set().union(*map(references, fragment)) if fragment else set()
    if not isinstance(fragment, dict):
        return set()
    found = set()
    for key, value in fragment.items():
        if key in ("Ref", "DependsOn"):
            found |= {value} if isinstance(value, str) else set(value)
        elif key == "Fn::GetAtt":
            found.add(value[0] if isinstance(value, list) else value.split(".")[0])
        elif key == "Fn::Sub":
            text = value[0] if isinstance(value, list) else value
            found |= {name.split(".")[0] for name in re.findall(r"\$\{([^!}][^}]*)\}", text)}
            found |= references(value[1:]) if isinstance(value, list) else set()
        else:
            found |= references(value)
    return found


def needs(resources, name, target):
    """Whether resource `name` needs `target`, directly or through others."""
    seen, todo = set(), [name]
    while todo:
        for ref in (references(resources.get(todo.pop(), {})) & resources.keys()) - seen:
            if ref == target:
                return True
            seen.add(ref)
            todo.append(ref)
    return False


# Events: an operation's closing events wait in `_forge_held` until its phase is over.

def stack_event(stack, logical_id, resource_type, status, reason=None, physical_id=None):
    event = CfnEvent(stack_id=stack.stack_id, stack_name=stack.name, logical_resource_id=logical_id, physical_resource_id=physical_id, resource_type=resource_type, resource_status=status, resource_status_reason=reason, resource_properties=None)
    event.client_request_token = getattr(_request, "token", None)
    held = stack.__dict__.get("_forge_held")
    (held if held is not None else stack.__dict__["_forge_events"]).append(event)


def hold(stack):
    release(stack)
    stack._forge_held = []


def release(stack):
    for event in stack.__dict__.pop("_forge_held", None) or []:
        event.timestamp = utcnow()
        stack.__dict__["_forge_events"].append(event)


def _stack_events(self):
    if "_forge_held" in self.__dict__ and not self.status.endswith("_IN_PROGRESS"):
        release(self)
    return self.__dict__["_forge_events"]


def _add_stack_event(self, resource_status, resource_status_reason=None, resource_properties=None):
    stack_event(self, self.name, STACK_TYPE, resource_status, resource_status_reason, self.stack_id)


def _status_reason(self):
    return None if self.status.endswith("_IN_PROGRESS") else self.__dict__.get("_forge_reason")


def finish(stack, model, start, end, reason=None):
    """The closing events are held; the stack shows `start` for a phase, then `end`."""
    stack._add_stack_event(end, reason if end.endswith("FAILED") else None)
    stack._forge_reason = reason
    stack.resource_map._forge_frozen = True
    start_phase(stack, model, start, end)


# Resources: each create, update and delete is reported as events; failures become ResourceFailed.

def cfn_create_resource(logical_id, resource_json, resources_map, account_id, region_name):
    if getattr(resources_map, "_forge_frozen", False):
        return None  # outside an operation, reading Refs must not make anything
    condition = resource_json.get("Condition")
    if condition and not resources_map.lazy_condition_map[condition]:
        return None
    resource_type = resource_json["Type"]
    try:
        parsed = cfn_parsing.parse_resource_and_generate_name(logical_id, resource_json, resources_map)
    except KeyError as missing:
        raise CfnValidationError(message=f"Template format error: Unresolved resource dependencies [{missing.args[0]}] in the Resources block of the template") from None
    if not parsed:
        return None
    resource_class, resource_json, physical_name = parsed
    resources_map.__dict__.setdefault("_forge_cleaned", {})[logical_id] = resource_json  # what an update compares with
    stack = getattr(resources_map, "_forge_stack", None)
    try:
        resource = resource_class.create_from_cloudformation_json(physical_name, resource_json, account_id, region_name, LogicalId=logical_id, StackId=resources_map.stack_id, ResourceType=resource_type)
        resource.cf_resource_type, resource.logical_resource_id = resource_type, logical_id
        tag_ec2_resource(resource, resources_map, logical_id, account_id, region_name)
    except ResourceFailed:
        raise
    except Exception as error:
        raise ResourceFailed(logical_id, resource_type, error) from error
    if stack is not None:
        physical_id = getattr(resource, "physical_resource_id", None)
        stack_event(stack, logical_id, resource_type, "CREATE_IN_PROGRESS")
        stack_event(stack, logical_id, resource_type, "CREATE_IN_PROGRESS", "Resource creation Initiated", physical_id)
        stack_event(stack, logical_id, resource_type, "CREATE_COMPLETE", None, physical_id)
    return resource


def tag_ec2_resource(resource, resources_map, logical_id, account_id, region_name):
    """Stack tags go on the EC2 resources a stack makes (moto tags only those CreateStack makes)."""
    from moto.ec2.models import ec2_backends
    from moto.ec2.models.core import TaggedEC2Resource

    if isinstance(resource, TaggedEC2Resource):
        ec2_backends[account_id][region_name].create_tags([resource.physical_resource_id], stack_tags(resources_map, logical_id))


def stack_tags(resources_map, logical_id):
    return {**resources_map.tags, "aws:cloudformation:stack-name": resources_map["AWS::StackName"], "aws:cloudformation:stack-id": resources_map.stack_id, "aws:cloudformation:logical-id": logical_id}


def tags_of_stack(account_id, region_name, stack_id, logical_id):
    stack = cloudformation_backends[account_id][region_name].stacks.get(stack_id)
    return stack_tags(stack.resource_map, logical_id) if stack is not None else {}


def cfn_update_resource(logical_id, resource_json, resources_map, account_id, region_name):
    resource_type = resource_json["Type"]
    resource_class = cfn_parsing.resource_class_from_type(resource_type)
    try:
        if resource_class is not None and hasattr(resource_class.update_from_cloudformation_json, "__isabstractmethod__"):
            resource = update_without_moto(logical_id, resource_json, resources_map, account_id, region_name)
        else:
            resource = _moto_parse_and_update_resource(logical_id, resource_json, resources_map, account_id, region_name)
    except (ResourceFailed, CfnValidationError):
        raise
    except Exception as error:
        raise ResourceFailed(logical_id, resource_type, error) from error
    if resource is None:  # a type moto does not know: keep what there is
        return resources_map._parsed_resources.get(logical_id)
    stack = getattr(resources_map, "_forge_stack", None)
    if stack is not None:
        physical_id = getattr(resource, "physical_resource_id", None)
        stack_event(stack, logical_id, resource_type, "UPDATE_IN_PROGRESS", None, physical_id)
        stack_event(stack, logical_id, resource_type, "UPDATE_COMPLETE", None, physical_id)
    return resource


def _untagged(spec):
    return {k: v for k, v in (spec.get("Properties") or {}).items() if k != "Tags"}


def update_without_moto(logical_id, resource_json, resources_map, account_id, region_name):
    """For the types moto cannot update (it would keep the old resource as it was): a change of
    tags alone is made in place; any other change replaces the resource, the new one made first
    and the old one deleted after, as CloudFormation does with properties that need replacing."""
    old = resources_map._parsed_resources.get(logical_id)
    made = resources_map.__dict__.setdefault("_forge_cleaned", {})
    before = made.get(logical_id) or {}
    resource_class, cleaned, name = cfn_parsing.parse_resource_and_generate_name(logical_id, resource_json, resources_map)
    if old is not None and _untagged(before) == _untagged(cleaned):
        retag(old, before, cleaned, account_id, region_name)
        made[logical_id] = cleaned
        return old
    new = resource_class.create_from_cloudformation_json(name, cleaned, account_id, region_name, LogicalId=logical_id, StackId=resources_map.stack_id, ResourceType=resource_json["Type"])
    new.cf_resource_type, new.logical_resource_id = resource_json["Type"], logical_id
    tag_ec2_resource(new, resources_map, logical_id, account_id, region_name)
    if old is not None:
        try:
            resources_map._delete_resource(old, resources_map._forge_previous.get(logical_id) or resource_json)
        except ResourceFailed:
            resources_map._delete_resource(new, resource_json)
            raise
    made[logical_id] = cleaned
    return new


def retag(resource, before, after, account_id, region_name):
    """A resource's own Tags property changed."""
    tags = {t["Key"]: t["Value"] for t in (after.get("Properties") or {}).get("Tags", [])}
    dropped = {t["Key"] for t in (before.get("Properties") or {}).get("Tags", [])} - set(tags)
    set_tags(resource, tags, dropped, account_id, region_name)


def set_tags(resource, tags, dropped, account_id, region_name):
    """Tags on what a stack made: EC2 resources, placement groups and node groups."""
    from moto.ec2.models.core import TaggedEC2Resource

    if isinstance(resource, TaggedEC2Resource):
        ec2 = _ec2(account_id, region_name)
        if dropped:
            ec2.delete_tags([resource.physical_resource_id], dict.fromkeys(dropped))
        if tags:
            ec2.create_tags([resource.physical_resource_id], tags)
    elif isinstance(resource, CfnPlacementGroup):
        kept = {t["Key"]: t["Value"] for t in resource.group["Tags"] if t["Key"] not in dropped}
        resource.group["Tags"] = [{"Key": k, "Value": v} for k, v in {**kept, **tags}.items()]
    elif isinstance(resource, CfnNodegroup):
        for key in dropped:
            resource.nodegroup.tags.pop(key, None)
        resource.nodegroup.tags.update(tags)


def retag_stack(stack, old_tags):
    """New stack tags go on the resources the stack made, as CloudFormation propagates them."""
    stack.resource_map.tags.update(stack.tags)
    dropped = set(old_tags) - set(stack.tags)
    for key in dropped:
        stack.resource_map.tags.pop(key, None)
    for resource in stack.stack_resources:
        set_tags(resource, stack.tags, dropped, stack.account_id, stack.region_name)


def cfn_resource_map_update(self, template, parameters=None):
    self._forge_previous = dict(self._resource_json_map)  # what an update changes from
    return _moto_resource_map_update(self, template, parameters)


def cfn_resource_map_delete(self):
    """Deletes in reverse dependency order (moto: in any order, retrying what fails), keeping
    DeletionPolicy Retain resources; raises the last ResourceFailed if some would not go."""
    specs = self._resource_json_map
    remaining = [n for n, spec in specs.items() if spec.get("DeletionPolicy") != "Retain" and self._parsed_resources.get(n) is not None and not isinstance(self._parsed_resources[n], str)]
    while remaining:
        needed = set().union(*(references(specs[n]) for n in remaining))
        ready = [n for n in remaining if n not in needed] or list(remaining)  # a cycle: try them all
        failures = []
        for name in ready:
            try:
                self._delete_resource(self._parsed_resources[name], specs[name])
            except ResourceFailed as failure:
                failures.append(failure)
                continue
            self._parsed_resources.pop(name)
            remaining.remove(name)
        if len(failures) == len(ready):
            raise failures[-1]


def cfn_delete_resource(self, parsed_resource, resource_json):
    logical_id, resource_type = getattr(parsed_resource, "logical_resource_id", None), resource_json["Type"]
    physical_id = getattr(parsed_resource, "physical_resource_id", None)
    try:
        _moto_delete_resource(self, parsed_resource, resource_json)
    except Exception as error:
        raise ResourceFailed(logical_id, resource_type, error) from error
    stack = getattr(self, "_forge_stack", None)
    if stack is not None:
        stack_event(stack, logical_id, resource_type, "DELETE_IN_PROGRESS", None, physical_id)
        stack_event(stack, logical_id, resource_type, "DELETE_COMPLETE", None, physical_id)


# Stacks.

def cfn_create_resource_map(self):
    resource_map = _moto_create_resource_map(self)
    resource_map._forge_stack = self
    return resource_map


def cfn_create_resources(self):
    self.status = "CREATE_IN_PROGRESS"
    try:
        ready = self.resource_map.create(self.template_dict)
    except ResourceFailed as failure:
        roll_back_create(self, failure)
        return
    self.description = self.template_dict.get("Description")
    if ready:  # else custom resources still answer; moto completes the stack when they have
        hold(self)
        finish(self, "forge::cfn_create", "CREATE_IN_PROGRESS", "CREATE_COMPLETE")


def roll_back_create(stack, failure):
    resource_map = stack.resource_map
    resources = resource_map._resource_json_map
    made = set(resource_map._parsed_resources) & set(resources)
    hold(stack)
    stack_event(stack, failure.logical_id, failure.resource_type, "CREATE_FAILED", failure.reason)
    cancelled = [name for name in resources if name not in made and name != failure.logical_id and not needs(resources, name, failure.logical_id)]
    for name in cancelled:
        stack_event(stack, name, resources[name]["Type"], "CREATE_FAILED", "Resource creation cancelled")
    failed = ", ".join([failure.logical_id, *cancelled])
    stack._add_stack_event("ROLLBACK_IN_PROGRESS", f"The following resource(s) failed to create: [{failed}]. Rollback requested by user.")
    stack._forge_failed = True
    try:
        resource_map.delete()
    except ResourceFailed as stuck:
        stack_event(stack, stuck.logical_id, stuck.resource_type, "DELETE_FAILED", stuck.reason)
        finish(stack, "forge::cfn_create", "CREATE_IN_PROGRESS", "ROLLBACK_FAILED", f"The following resource(s) failed to delete: [{stuck.logical_id}]. ")
        return
    finish(stack, "forge::cfn_create", "CREATE_IN_PROGRESS", "ROLLBACK_COMPLETE", f"The following resource(s) failed to create: [{failed}]. Rollback requested by user.")


def cfn_update(self, template, role_arn=None, parameters=None, tags=None):
    before = (self.status, self.template, self.template_dict, dict(self.resource_map.input_parameters))
    release(self)
    seen = len(self.events)
    self.status = "UPDATE_IN_PROGRESS"
    self._add_stack_event("UPDATE_IN_PROGRESS", resource_status_reason="User Initiated")
    self.template = template
    self._parse_template()
    self.resource_map._forge_frozen = False
    try:
        self.resource_map.update(self.template_dict, parameters)
    except ResourceFailed as failure:
        roll_back_update(self, failure, before)
        return
    except Exception:  # a template error: UpdateStack itself fails, and no event tells of it
        self.status, self.template, self.template_dict = before[:3]
        del self.events[seen:]
        self.resource_map._forge_frozen = True
        raise
    self.output_map = self._create_output_map()
    self.role_arn = role_arn
    if parameters:
        self.parameters = parameters
    if tags is not None and tags != self.tags:
        old_tags, self.tags = self.tags, tags
        retag_stack(self, old_tags)
    exports = cloudformation_backends[self.account_id][self.region_name].exports  # moto keeps the first values
    for name in [n for n, e in exports.items() if e.exporting_stack_id == self.stack_id]:
        del exports[name]
    exports.update({export.name: export for export in self.exports})
    hold(self)
    self._add_stack_event("UPDATE_COMPLETE_CLEANUP_IN_PROGRESS")
    finish(self, "forge::cfn_update", "UPDATE_IN_PROGRESS", "UPDATE_COMPLETE")


def roll_back_update(stack, failure, before):
    """The failing resource's UPDATE_FAILED (CREATE_FAILED if the update added it), then the
    stack goes back to its previous template, as far as moto can take it."""
    _, template, template_dict, parameters = before
    added = failure.logical_id not in stack.resource_map._parsed_resources
    hold(stack)
    stack_event(stack, failure.logical_id, failure.resource_type, "CREATE_FAILED" if added else "UPDATE_FAILED", failure.reason)
    reason = f"The following resource(s) failed to {'create' if added else 'update'}: [{failure.logical_id}]. "
    stack._add_stack_event("UPDATE_ROLLBACK_IN_PROGRESS", reason)
    try:
        stack.resource_map.update(template_dict, parameters)
    except Exception:  # best effort: what moto cannot restore stays as it is
        stack.resource_map._resource_json_map = template_dict["Resources"]
    stack.template, stack.template_dict = template, template_dict
    stack.output_map = stack._create_output_map()
    stack._add_stack_event("UPDATE_ROLLBACK_COMPLETE_CLEANUP_IN_PROGRESS")
    finish(stack, "forge::cfn_update", "UPDATE_IN_PROGRESS", "UPDATE_ROLLBACK_COMPLETE", reason)


def cfn_create_stack(self, name, template, parameters, notification_arns=None, tags=None, role_arn=None, enable_termination_protection=False, timeout_in_mins=None, stack_policy_body=None):
    if any(stack.name == name for stack in self.stacks.values()):
        raise AlreadyExistsException(f"Stack [{name}] already exists")
    stack = Stack(stack_id=generate_stack_id(name, self.region_name, self.account_id), name=name, template=template, parameters=parameters, account_id=self.account_id, region_name=self.region_name, notification_arns=notification_arns, tags=tags, role_arn=role_arn, cross_stack_resources=self.exports, enable_termination_protection=enable_termination_protection, timeout_in_mins=timeout_in_mins, stack_policy_body=stack_policy_body)
    self.stacks[stack.stack_id] = stack
    stack._add_stack_event("CREATE_IN_PROGRESS", resource_status_reason="User Initiated")
    try:
        stack.create_resources()
        if not stack.__dict__.get("_forge_failed"):
            self._validate_export_uniqueness(stack)
            self.exports.update({export.name: export for export in stack.exports})
    except Exception:  # a template error: the API refuses the stack before making anything
        del self.stacks[stack.stack_id]
        try:
            stack.resource_map.delete()
        except Exception:
            pass
        raise
    return stack


def cfn_delete_stack(self, name_or_stack_id):
    """DELETE_IN_PROGRESS for a phase, then DELETE_COMPLETE (DELETE_FAILED if a resource would
    not go); a deleted stack answers by id only, once its phase is over."""
    stack = self.stacks.get(name_or_stack_id) or next((s for s in self.stacks.values() if s.name == name_or_stack_id), None)
    if stack is None or stack.status == "DELETE_IN_PROGRESS":
        return
    release(stack)
    stack.status = "DELETE_IN_PROGRESS"
    stack._add_stack_event("DELETE_IN_PROGRESS", resource_status_reason="User Initiated")
    hold(stack)
    try:
        stack.resource_map.delete()
    except ResourceFailed as stuck:
        stack_event(stack, stuck.logical_id, stuck.resource_type, "DELETE_FAILED", stuck.reason)
        finish(stack, "forge::cfn_delete", "DELETE_IN_PROGRESS", "DELETE_FAILED", f"The following resource(s) failed to delete: [{stuck.logical_id}]. ")
        return
    for export_name in [n for n, e in self.exports.items() if e.exporting_stack_id == stack.stack_id]:
        del self.exports[export_name]
    finish(stack, "forge::cfn_delete", "DELETE_IN_PROGRESS", "DELETE_COMPLETE")


def drop_deleted_stacks(backend):
    for stack_id in [i for i, s in backend.stacks.items() if s.status == "DELETE_COMPLETE"]:
        backend.deleted_stacks[stack_id] = backend.stacks.pop(stack_id)
    return backend


def cfn_stack_resources(self):
    """The resources the stack has made (moto's lazy map would make the others)."""
    made = self.resource_map._parsed_resources
    return [made[name] for name in self.resource_map._resource_json_map if made.get(name) is not None]


def cfn_change_set_apply(self):
    self.stack.resource_map._forge_frozen = False
    try:
        _moto_change_set_apply(self)
    finally:
        self.stack.resource_map._forge_frozen = True


# Requests: ClientRequestToken retries, "No updates are to be performed.", busy stacks.

EC2_PARAMETER_TYPES = {"AWS::EC2::VPC::Id": "vpcs", "AWS::EC2::Subnet::Id": "subnets", "AWS::EC2::SecurityGroup::Id": "groups"}


def cfn_load_parameters(self):
    """CloudFormation checks that AWS::EC2::VPC::Id, Subnet::Id and SecurityGroup::Id parameters
    (and their List<…> forms) name what exists; moto takes any string."""
    _moto_load_parameters(self)
    ec2 = _ec2(self._account_id, self._region_name)
    exists = {"vpcs": lambda i: i in ec2.vpcs, "subnets": lambda i: any(i in s for s in ec2.subnets.values()), "groups": lambda i: ec2.get_security_group_from_id(i) is not None}
    for name, slot in (self._template.get("Parameters") or {}).items():
        kind = EC2_PARAMETER_TYPES.get(re.sub(r"^List<(.*)>$", r"\1", slot.get("Type", "")))
        value = self.resolved_parameters.get(name)
        for item in (value if isinstance(value, list) else [value]) if kind and value else []:
            if not exists[kind](item):
                raise CfnValidationError(message=f"Parameter validation failed: parameter value {item} for parameter name {name} does not exist. Rollback requested by user.")


def cfn_parse_template(template):
    """A template that is neither YAML nor JSON is CloudFormation's ValidationError (moto: a
    JSONDecodeError, a 500)."""
    yaml.add_multi_constructor("", yaml_tag_constructor)
    try:
        return yaml.load(template, Loader=yaml.Loader)
    except yaml.YAMLError as error:
        if not template.lstrip().startswith("{"):
            mark = getattr(error, "problem_mark", None)
            where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
            raise CfnValidationError(message=f"Template format error: YAML not well-formed.{where}") from None
    try:
        return json.loads(template)
    except ValueError as error:
        raise CfnValidationError(message=f"Template format error: JSON not well-formed. (line {error.lineno}, column {error.colno})") from None


def effective_parameters(template_dict, given):
    slots = template_dict.get("Parameters") or {}
    return {name: str(given.get(name, slot.get("Default"))) for name, slot in slots.items()}


def cfn_resolve_update_parameters(self, instance, incoming_params):
    """UsePreviousValue of a parameter left at its default (moto: KeyError, a 500)."""
    if not isinstance(instance, Stack):
        return _moto_resolve_update_parameters(self, instance, incoming_params)
    old = effective_parameters(instance.template_dict, instance.resource_map.input_parameters)
    return {p["ParameterKey"]: old.get(p["ParameterKey"]) if p.get("UsePreviousValue") else p.get("ParameterValue") for p in incoming_params}


def cfn_create_stack_response(self):
    token, name = self._get_param("ClientRequestToken"), self._get_param("StackName")
    backend = self.cloudformation_backend
    earlier = next((s for s in backend.stacks.values() if s.name == name), None)
    if token and earlier is not None and earlier.__dict__.get("_forge_token") == token and earlier.status != "DELETE_IN_PROGRESS":
        return ActionResult({"StackId": earlier.stack_id})  # a retry of the call that made it
    _request.token = token
    try:
        result = _moto_cfn_responses["create_stack"](self)
    finally:
        _request.token = None
    backend.stacks[result.result["StackId"]]._forge_token = token
    return result


def cfn_update_stack_response(self):
    token, name = self._get_param("ClientRequestToken"), self._get_param("StackName")
    stack = self.cloudformation_backend.get_stack(name)
    if token and stack.__dict__.get("_forge_update_token") == token:
        return ActionResult({"StackId": stack.stack_id})
    if stack.status.endswith("_IN_PROGRESS") or stack.status in ("ROLLBACK_COMPLETE", "ROLLBACK_FAILED", "DELETE_FAILED", "UPDATE_ROLLBACK_FAILED"):
        raise CfnValidationError(message=f"Stack:{stack.stack_id} is in {stack.status} state and can not be updated.")
    if not requested_changes(self, stack):
        raise CfnValidationError(message="No updates are to be performed.")
    _request.token = token
    try:
        result = _moto_cfn_responses["update_stack"](self)
    finally:
        _request.token = None
    stack._forge_update_token = token
    return result


def requested_changes(self, stack):
    """Whether UpdateStack asks for another template, other parameter values or other tags."""
    if self._get_bool_param("UsePreviousTemplate", False):
        body = stack.template
    else:
        body = self._get_param("TemplateBody") or (self._get_stack_from_s3_url(self._get_param("TemplateURL")) if self._get_param("TemplateURL") else None)
    if body is None:
        return True  # moto answers for a missing template
    new_template = Stack.parse_template(body)
    given = self.cloudformation_backend._resolve_update_parameters(stack, self._get_param("Parameters", []))
    tags = {t["Key"]: t["Value"] for t in self._get_param("Tags", [])}
    return (
        new_template != stack.template_dict
        or effective_parameters(new_template, given) != effective_parameters(stack.template_dict, stack.resource_map.input_parameters)
        or (bool(tags) and tags != stack.tags)
        or (self._get_param("RoleARN") or stack.role_arn) != stack.role_arn
    )


def cfn_validate_template_response(self):
    """The API's checks: well-formed, with Resources (moto runs cfn-lint and words its first
    finding as "Stack with id … does not exist")."""
    body = self._get_param("TemplateBody") or self._get_stack_from_s3_url(self._get_param("TemplateURL"))
    template = cfn_parse_template(body)
    if not isinstance(template, dict) or not template.get("Resources"):
        raise CfnValidationError(message="Template format error: At least one Resources member must be defined.")
    parameters = [
        {"ParameterKey": name, "DefaultValue": slot.get("Default"), "NoEcho": bool(slot.get("NoEcho", False)), "Description": slot.get("Description")}
        for name, slot in (template.get("Parameters") or {}).items()
    ]
    return ActionResult({"Description": template.get("Description"), "Parameters": parameters, "Capabilities": [], "DeclaredTransforms": []})


def cfn_delete_stack_response(self):
    _request.token = self._get_param("ClientRequestToken")
    try:
        return _moto_cfn_responses["delete_stack"](self)
    finally:
        _request.token = None


Stack.parse_template = staticmethod(cfn_parse_template)
Stack.status = phased_status
Stack.status_reason = property(_status_reason)
Stack.events = property(_stack_events, lambda self, value: self.__dict__.__setitem__("_forge_events", value))
Stack._add_stack_event = _add_stack_event
_moto_create_resource_map = Stack._create_resource_map
Stack._create_resource_map = cfn_create_resource_map
Stack.create_resources = cfn_create_resources
Stack.update = cfn_update
Stack.stack_resources = property(cfn_stack_resources)
_moto_stack_outputs = Stack.outputs
Stack.outputs = property(lambda self: _moto_stack_outputs.fget(self) if self.status in SHOWS_OUTPUTS else None)
_moto_change_set_apply = ChangeSet.apply
ChangeSet.apply = cfn_change_set_apply
_moto_parse_and_update_resource = cfn_parsing.parse_and_update_resource
cfn_parsing.parse_and_create_resource = cfn_create_resource
cfn_parsing.parse_and_update_resource = cfn_update_resource
_moto_delete_resource = ResourceMap._delete_resource
ResourceMap._delete_resource = cfn_delete_resource
_moto_resource_map_update = ResourceMap.update
_moto_load_parameters = ResourceMap.load_parameters
ResourceMap.load_parameters = cfn_load_parameters
ResourceMap.update = cfn_resource_map_update
ResourceMap.delete = cfn_resource_map_delete
CloudFormationBackend.create_stack = cfn_create_stack
_moto_resolve_update_parameters = CloudFormationBackend._resolve_update_parameters
CloudFormationBackend._resolve_update_parameters = cfn_resolve_update_parameters
CloudFormationBackend.delete_stack = cfn_delete_stack
_moto_cfn_backend = CloudFormationResponse.cloudformation_backend
CloudFormationResponse.cloudformation_backend = property(lambda self: drop_deleted_stacks(_moto_cfn_backend.fget(self)))
_moto_cfn_responses = {name: getattr(CloudFormationResponse, name) for name in ("create_stack", "update_stack", "delete_stack")}
CloudFormationResponse.create_stack = cfn_create_stack_response
CloudFormationResponse.update_stack = cfn_update_stack_response
CloudFormationResponse.delete_stack = cfn_delete_stack_response
CloudFormationResponse.validate_template = cfn_validate_template_response
CloudFormationResponse._validate_different_update = lambda self, *args: None  # requested_changes decides, tags included


# --- CloudFormation resource types -----------------------------------------------------------
# AWS::EC2::SecurityGroup: moto needs FromPort/ToPort on every inline rule, takes CidrIp for a
# list, has no inline egress and replaces the group (a new id) on any change. Here inline rules
# follow the resource's schema, SecurityGroupEgress replaces the default allow-all rule, and
# changing only rules or tags updates the group in place. AWS::EC2::SecurityGroupIngress: Ref
# gives the rule id (moto: the Python object) and stack deletion revokes the rule; the same for
# AWS::EC2::SecurityGroupEgress, which moto lacks.
# AWS::EC2::LaunchTemplate: an update's new version becomes the default, as in CloudFormation,
# and its tags (stack tags too) are described as they are, not as they were at creation.
# AWS::EC2::PlacementGroup and AWS::EKS::Nodegroup, which moto lacks, are backed by the
# launcher's placement groups and by moto's EKS backend with the node-group phases above.

def _ec2(account_id, region_name):
    from moto.ec2.models import ec2_backends

    return ec2_backends[account_id][region_name]


def sg_rule_args(rule, egress):
    """Backend arguments for one inline or standalone rule of the CloudFormation schema."""
    ranges = [{"CidrIp": rule["CidrIp"], **({"Description": rule["Description"]} if rule.get("Description") else {})}] if rule.get("CidrIp") else []
    ranges += [{"CidrIpv6": rule["CidrIpv6"]}] if rule.get("CidrIpv6") else []
    peer = rule.get("DestinationSecurityGroupId" if egress else "SourceSecurityGroupId")
    groups = [{"GroupId": peer}] if peer else []
    groups += [{"GroupName": rule["SourceSecurityGroupName"]}] if not egress and rule.get("SourceSecurityGroupName") else []
    prefix = rule.get("DestinationPrefixListId" if egress else "SourcePrefixListId")
    return {"ip_protocol": str(rule["IpProtocol"]), "from_port": rule.get("FromPort"), "to_port": rule.get("ToPort"), "ip_ranges": ranges, "source_groups": groups, "prefix_list_ids": [{"PrefixListId": prefix}] if prefix else []}


def apply_inline_rules(ec2, group, props):
    """The group's inline rules (and, without SecurityGroupEgress, the default egress rule);
    their ids are kept so that an update replaces these and no standalone ones."""
    inline = group.__dict__.get("_forge_inline", {r.id for r in group.ingress_rules + group.egress_rules})
    group.ingress_rules = [r for r in group.ingress_rules if r.id not in inline]
    group.egress_rules = [r for r in group.egress_rules if r.id not in inline]
    made = []
    for rule in props.get("SecurityGroupIngress", []):
        made += ec2.authorize_security_group_ingress(group_name_or_id=group.id, vpc_id=group.vpc_id, **sg_rule_args(rule, egress=False))[0]
    egress = props.get("SecurityGroupEgress") or [{"IpProtocol": "-1", "CidrIp": "0.0.0.0/0"}]
    for rule in egress:
        made += ec2.authorize_security_group_egress(group_name_or_id=group.id, vpc_id=group.vpc_id, **sg_rule_args(rule, egress=True))[0]
    group._forge_inline = {r.id for r in made}


def cfn_security_group_create(cls, resource_name, cloudformation_json, account_id, region_name, **kwargs):
    props = cloudformation_json["Properties"]
    ec2 = _ec2(account_id, region_name)
    tags = {t["Key"]: t["Value"] for t in props.get("Tags", [])}
    group = ec2.create_security_group(name=resource_name, description=props.get("GroupDescription"), vpc_id=props.get("VpcId"), tags=tags)
    try:
        apply_inline_rules(ec2, group, props)
    except Exception:
        ec2.delete_security_group(group_id=group.id)
        raise
    return group


def cfn_security_group_update(cls, original_resource, new_resource_name, cloudformation_json, account_id, region_name):
    props = cloudformation_json["Properties"]
    group = original_resource
    same = props.get("GroupName", group.name) == group.name and props.get("GroupDescription") == group.description and props.get("VpcId", group.vpc_id) == group.vpc_id
    if not same:  # a replacement: a new group
        return _moto_security_group_update.__func__(cls, original_resource, new_resource_name, cloudformation_json, account_id, region_name)
    apply_inline_rules(_ec2(account_id, region_name), group, props)
    group.add_tags({t["Key"]: t["Value"] for t in props.get("Tags", [])})
    return group


def cfn_ingress_create(cls, resource_name, cloudformation_json, account_id, region_name, **kwargs):
    props = cloudformation_json["Properties"]
    ec2 = _ec2(account_id, region_name)
    wanted = props.get("GroupId") or props.get("GroupName")
    group = ec2.get_security_group_by_name_or_id(wanted, None) if wanted else None
    if group is None:
        raise InvalidSecurityGroupNotFoundError(wanted)
    rules, _ = ec2.authorize_security_group_ingress(group_name_or_id=group.id, vpc_id=group.vpc_id, **sg_rule_args(props, egress=False))
    ingress = cls(group, props)
    ingress._forge_rule_ids = [r.id for r in rules]
    return ingress


def cfn_ingress_update(cls, original_resource, new_resource_name, cloudformation_json, account_id, region_name):
    original_resource.delete(account_id, region_name)
    return cls.create_from_cloudformation_json(new_resource_name, cloudformation_json, account_id, region_name)


def cfn_ingress_delete(self, account_id, region_name):
    try:
        _ec2(account_id, region_name).revoke_security_group_ingress(group_name_or_id=self.security_group.id, ip_protocol=None, from_port=None, to_port=None, ip_ranges=[], security_rule_ids=self._forge_rule_ids, vpc_id=self.security_group.vpc_id)
    except EC2ClientError as error:
        if error.code not in ("InvalidGroup.NotFound", "InvalidPermission.NotFound"):
            raise


class CfnSecurityGroupEgress(CloudFormationModel):
    """AWS::EC2::SecurityGroupEgress, which moto lacks; Ref gives the rule id."""

    __module__ = "moto.ec2.forge"  # moto files its models by the service in the module path

    def __init__(self, group, rule_ids):
        self.group, self.rule_ids = group, rule_ids

    @staticmethod
    def cloudformation_type():
        return "AWS::EC2::SecurityGroupEgress"

    @staticmethod
    def cloudformation_name_type():
        return ""

    @classmethod
    def create_from_cloudformation_json(cls, resource_name, cloudformation_json, account_id, region_name, **kwargs):
        props = cloudformation_json["Properties"]
        ec2 = _ec2(account_id, region_name)
        group = ec2.get_security_group_from_id(props.get("GroupId"))
        if group is None:
            raise InvalidSecurityGroupNotFoundError(props.get("GroupId"))
        rules, _ = ec2.authorize_security_group_egress(group_name_or_id=group.id, vpc_id=group.vpc_id, **sg_rule_args(props, egress=True))
        return cls(group, [r.id for r in rules])

    @classmethod
    def update_from_cloudformation_json(cls, original_resource, new_resource_name, cloudformation_json, account_id, region_name):
        original_resource.delete(account_id, region_name)
        return cls.create_from_cloudformation_json(new_resource_name, cloudformation_json, account_id, region_name)

    def delete(self, account_id, region_name):
        try:
            _ec2(account_id, region_name).revoke_security_group_egress(group_name_or_id=self.group.id, ip_protocol=None, from_port=None, to_port=None, ip_ranges=[], security_rule_ids=self.rule_ids, vpc_id=self.group.vpc_id)
        except EC2ClientError as error:
            if error.code not in ("InvalidGroup.NotFound", "InvalidPermission.NotFound"):
                raise

    @property
    def physical_resource_id(self):
        return self.rule_ids[0] if self.rule_ids else None


def cfn_launch_template_update(cls, original_resource, new_resource_name, cloudformation_json, account_id, region_name):
    template = _moto_launch_template_update.__func__(cls, original_resource, new_resource_name, cloudformation_json, account_id, region_name)
    template.default_version_number = template.latest_version_number
    return template


_moto_security_group_update = EC2SecurityGroup.update_from_cloudformation_json
EC2SecurityGroup.create_from_cloudformation_json = classmethod(cfn_security_group_create)
EC2SecurityGroup.update_from_cloudformation_json = classmethod(cfn_security_group_update)
SecurityGroupIngress.create_from_cloudformation_json = classmethod(cfn_ingress_create)
SecurityGroupIngress.update_from_cloudformation_json = classmethod(cfn_ingress_update)
SecurityGroupIngress.delete = cfn_ingress_delete
SecurityGroupIngress.physical_resource_id = property(lambda self: (self.__dict__.get("_forge_rule_ids") or [None])[0])
_moto_launch_template_update = EC2LaunchTemplate.update_from_cloudformation_json
EC2LaunchTemplate.update_from_cloudformation_json = classmethod(cfn_launch_template_update)
EC2LaunchTemplate.tags = property(lambda self: self.get_tags(), lambda self, value: None)  # moto's is a copy made at creation


class CfnPlacementGroup(CloudFormationModel):
    """AWS::EC2::PlacementGroup over the launcher's placement groups; Ref gives the name."""

    __module__ = "moto.ec2.forge"  # moto files its models by the service in the module path

    def __init__(self, ec2, group):
        self.ec2, self.group = ec2, group

    @staticmethod
    def cloudformation_type():
        return "AWS::EC2::PlacementGroup"

    @staticmethod
    def cloudformation_name_type():
        return ""

    @classmethod
    def create_from_cloudformation_json(cls, resource_name, cloudformation_json, account_id, region_name, **kwargs):
        props = cloudformation_json["Properties"]
        ec2 = _ec2(account_id, region_name)
        tags = {**tags_of_stack(account_id, region_name, kwargs.get("StackId"), kwargs.get("LogicalId")), **{t["Key"]: t["Value"] for t in props.get("Tags", [])}}
        group = new_placement_group(ec2, resource_name, props.get("Strategy", "cluster"), tags, props.get("PartitionCount"), props.get("SpreadLevel"))
        return cls(ec2, group)

    @classmethod
    def update_from_cloudformation_json(cls, original_resource, new_resource_name, cloudformation_json, account_id, region_name):
        replacement = cls.create_from_cloudformation_json(new_resource_name, cloudformation_json, account_id, region_name)
        original_resource.delete(account_id, region_name)
        return replacement

    def delete(self, account_id, region_name):
        _placement_groups(self.ec2).pop(self.group["GroupName"], None)

    @property
    def physical_resource_id(self):
        return self.group["GroupName"]

    @classmethod
    def has_cfn_attr(cls, attr):
        return attr == "GroupName"

    def get_cfn_attribute(self, attribute_name):
        if attribute_name == "GroupName":
            return self.group["GroupName"]
        raise UnformattedGetAttTemplateException()


def _camel(mapping):
    """CloudFormation's property names (MinSize) as the EKS API's (minSize)."""
    return {k[:1].lower() + k[1:]: v for k, v in mapping.items()} if isinstance(mapping, dict) else mapping


def nodegroup_template(template):
    """LaunchTemplate {Id, Name, Version} as the API's {id, name, version}; a version is a string."""
    template = _camel(template)
    return {**template, "version": str(template["version"])} if template and "version" in template else template


NODEGROUP_IN_PLACE = ("ScalingConfig", "Labels", "Tags", "LaunchTemplate", "Taints", "UpdateConfig", "Version", "ReleaseVersion")


class CfnNodegroup(CloudFormationModel):
    """AWS::EKS::Nodegroup over moto's EKS backend (so it goes CREATING -> ACTIVE and DELETING ->
    gone like one made through the API). Ref gives `cluster/nodegroup`, as CloudFormation does."""

    __module__ = "moto.eks.forge"

    def __init__(self, nodegroup):
        self.nodegroup = nodegroup

    @staticmethod
    def cloudformation_type():
        return "AWS::EKS::Nodegroup"

    @staticmethod
    def cloudformation_name_type():
        return ""

    @classmethod
    def create_from_cloudformation_json(cls, resource_name, cloudformation_json, account_id, region_name, **kwargs):
        from moto.eks.models import eks_backends

        props = cloudformation_json["Properties"]
        logical_id = kwargs.get("LogicalId") or resource_name
        name = props.get("NodegroupName") or f"{logical_id}-{''.join(random.choices('abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789', k=12))}"
        tags = {**tags_of_stack(account_id, region_name, kwargs.get("StackId"), logical_id), **props.get("Tags", {})}
        nodegroup = eks_backends[account_id][region_name].create_nodegroup(
            cluster_name=props["ClusterName"], node_role=props["NodeRole"], nodegroup_name=name, subnets=props["Subnets"],
            scaling_config=_camel(props.get("ScalingConfig")), disk_size=props.get("DiskSize"), instance_types=props.get("InstanceTypes"),
            ami_type=props.get("AmiType"), remote_access=_camel(props.get("RemoteAccess")), labels=props.get("Labels"),
            taints=[_camel(t) for t in props.get("Taints", [])], tags=tags, launch_template=nodegroup_template(props.get("LaunchTemplate")),
            capacity_type=props.get("CapacityType"), version=props.get("Version"), release_version=props.get("ReleaseVersion"),
        )
        model = cls(nodegroup)
        model._forge_origin, model._forge_properties = (kwargs.get("StackId"), logical_id), props
        return model

    @classmethod
    def update_from_cloudformation_json(cls, original_resource, new_resource_name, cloudformation_json, account_id, region_name):
        """Scaling, labels, tags, taints, launch template and versions change in place (an EKS
        update); anything else replaces the node group, which a named one cannot be."""
        from moto.eks.models import eks_backends

        props = cloudformation_json["Properties"]
        nodegroup = original_resource.nodegroup
        backend = eks_backends[account_id][region_name]
        old = original_resource._forge_properties
        if any(props.get(k) != old.get(k) for k in set(props) | set(old) if k not in NODEGROUP_IN_PLACE):
            if props.get("NodegroupName"):
                raise InvalidRequestException(message=f"CloudFormation cannot update a stack when a custom-named resource requires replacing. Rename {props['NodegroupName']} and update the stack again.")
            stack_id, logical_id = original_resource._forge_origin
            replacement = cls.create_from_cloudformation_json(new_resource_name, cloudformation_json, account_id, region_name, StackId=stack_id, LogicalId=logical_id)
            original_resource.delete(account_id, region_name)
            return replacement
        refuse_while_busy("Nodegroup", nodegroup.nodegroup_name, nodegroup)
        for prop, attribute in (("ScalingConfig", "scaling_config"), ("Labels", "labels"), ("LaunchTemplate", "launch_template"), ("UpdateConfig", "update_config"), ("Version", "version"), ("ReleaseVersion", "release_version")):
            if prop in props:
                setattr(nodegroup, attribute, nodegroup_template(props[prop]) if prop == "LaunchTemplate" else _camel(props[prop]))
        nodegroup.taints = [_camel(t) for t in props.get("Taints", [])]
        nodegroup.tags.update(props.get("Tags", {}))
        cluster = backend.clusters[nodegroup.cluster_name]
        begin_update(cluster, nodegroup, "forge::eks_nodegroup_update", "ConfigUpdate", [], nodegroup=nodegroup.nodegroup_name)
        original_resource._forge_properties = props
        return original_resource

    def delete(self, account_id, region_name):
        from moto.eks.models import eks_backends

        try:
            eks_backends[account_id][region_name].delete_nodegroup(cluster_name=self.nodegroup.cluster_name, nodegroup_name=self.nodegroup.nodegroup_name)
        except ResourceNotFoundException:
            pass

    @property
    def physical_resource_id(self):
        return f"{self.nodegroup.cluster_name}/{self.nodegroup.nodegroup_name}"

    @classmethod
    def has_cfn_attr(cls, attr):
        return attr in ("Arn", "ClusterName", "NodegroupName", "Id")

    def get_cfn_attribute(self, attribute_name):
        values = {"Arn": self.nodegroup.arn, "ClusterName": self.nodegroup.cluster_name, "NodegroupName": self.nodegroup.nodegroup_name, "Id": self.physical_resource_id}
        if attribute_name not in values:
            raise UnformattedGetAttTemplateException()
        return values[attribute_name]


for _cache in (cfn_parsing.get_model_list, cfn_parsing.get_model_map, cfn_parsing.get_name_type_map):
    _cache.cache_clear()  # the model list is read once; it must include the two above


# --- the middleware: accounts, request counter, faults, latency ------------------------------

THROTTLE = {
    "ec2": (503, "text/xml", "<Response><Errors><Error><Code>RequestLimitExceeded</Code><Message>Request limit exceeded.</Message></Error></Errors><RequestID>forge-fault</RequestID></Response>"),
    "iam": (400, "text/xml", "<ErrorResponse><Error><Type>Sender</Type><Code>Throttling</Code><Message>Rate exceeded</Message></Error><RequestId>forge-fault</RequestId></ErrorResponse>"),
    "cloudformation": (400, "text/xml", "<ErrorResponse><Error><Type>Sender</Type><Code>Throttling</Code><Message>Rate exceeded</Message></Error><RequestId>forge-fault</RequestId></ErrorResponse>"),
    "fsx": (400, "application/x-amz-json-1.1", '{"__type":"ThrottlingException","message":"Rate exceeded"}'),
    "eks": (429, "application/json", '{"message":"Rate exceeded"}'),
    "elasticfilesystem": (429, "application/json", '{"ErrorCode":"ThrottlingException","Message":"Rate exceeded"}'),
    "s3": (503, "application/xml", "<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>"),
}
SERVER_ERROR = {
    "ec2": (500, "text/xml", "<Response><Errors><Error><Code>InternalError</Code><Message>An internal error has occurred.</Message></Error></Errors><RequestID>forge-fault</RequestID></Response>"),
    "iam": (500, "text/xml", "<ErrorResponse><Error><Type>Receiver</Type><Code>ServiceFailure</Code><Message>Service failure</Message></Error><RequestId>forge-fault</RequestId></ErrorResponse>"),
    "cloudformation": (500, "text/xml", "<ErrorResponse><Error><Type>Receiver</Type><Code>InternalFailure</Code><Message>Internal failure</Message></Error><RequestId>forge-fault</RequestId></ErrorResponse>"),
    "fsx": (500, "application/x-amz-json-1.1", '{"__type":"InternalServerError","message":"Internal server error"}'),
    "eks": (500, "application/json", '{"message":"Internal server error"}'),
    "elasticfilesystem": (500, "application/json", '{"ErrorCode":"InternalServerError","Message":"Internal server error"}'),
    "s3": (500, "application/xml", "<Error><Code>InternalError</Code><Message>We encountered an internal error.</Message></Error>"),
}
# REST-JSON services name the error in a header.
ERROR_TYPE_HEADERS = {"eks": {429: "ThrottlingException", 500: "ServerException"}, "elasticfilesystem": {429: "ThrottlingException", 500: "InternalServerError"}}
EFS_ID = re.compile(r"/(?:fs|fsmt|fsap)-[0-9a-f]+|/arn:[^/]*(?:/[^/]+)?$")


def operation(service, environ, body):
    """`service:Action` for query, JSON and REST protocols."""
    target = environ.get("HTTP_X_AMZ_TARGET")
    if target:
        return target.split(".")[-1]
    if service in ("ec2", "iam", "cloudformation", "sts"):
        params = urllib.parse.parse_qs(body.decode(errors="replace")) if body else {}
        params.update(urllib.parse.parse_qs(environ.get("QUERY_STRING", "")))
        return params.get("Action", ["?"])[0]
    path = environ.get("PATH_INFO", "")
    if service == "s3":
        path = re.sub(r"/[^/]+", "/{}", path)
    elif service == "elasticfilesystem":  # ids and ARNs in EFS paths, as {}
        path = EFS_ID.sub("/{}", urllib.parse.unquote(path))
    return f"{environ.get('REQUEST_METHOD', 'GET')} {path}"


class Harness:
    def __init__(self, app):
        self.app = app
        self.lock = threading.Lock()
        self.calls = Counter()
        self.faults = []
        self.latency = []

    def __call__(self, environ, start_response):
        path = environ.get("PATH_INFO", "")
        if path.startswith("/_forge/"):
            return self.control(environ, start_response)
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        environ["wsgi.input"] = io.BytesIO(body)
        auth = environ.get("HTTP_AUTHORIZATION", "")
        match = re.search(r"Credential=([^/]+)/[^/]+/[^/]+/([^/]+)/", auth)
        key, service = match.groups() if match else ("", "")
        account = key if re.fullmatch(r"\d{12}", key) else DEFAULT_ACCOUNT
        environ["HTTP_X_MOTO_ACCOUNT_ID"] = account
        name = f"{service}:{operation(service, environ, body)}"
        with self.lock:
            self.calls[(account, name)] += 1
            delay = max((r["ms"] for r in self.latency if self.applies(r, account, name)), default=0)
            fault = next((r for r in self.faults if self.applies(r, account, name) and r["rng"].random() < r["rate"]), None)
            if fault is not None:
                self.calls[(account, f"fault:{name}")] += 1
        if delay:
            time.sleep(delay / 1000)
        if fault is not None and fault.get("when") == "after":
            # The cloud did the work, the answer is lost: what a retry must not do twice.
            body_parts = self.app(environ, lambda status, headers, exc_info=None: None)
            for _ in body_parts:
                pass
            fault = dict(fault, kind="5xx")
        if fault is not None:
            table = THROTTLE if fault["kind"] == "throttle" else SERVER_ERROR
            status, ctype, text = table.get(service, SERVER_ERROR["ec2"])
            headers = [("Content-Type", ctype)]
            if service in ERROR_TYPE_HEADERS:
                headers.append(("x-amzn-ErrorType", ERROR_TYPE_HEADERS[service][status]))
            body = text.encode()
            start_response(f"{status} Fault", headers + [("Content-Length", str(len(body)))])
            return [body]
        return self.app(environ, start_response)

    @staticmethod
    def applies(rule, account, name):
        return rule.get("account") in (None, account) and fnmatch.fnmatchcase(name, rule.get("match", "*"))

    def control(self, environ, start_response):
        path = environ["PATH_INFO"]
        query = urllib.parse.parse_qs(environ.get("QUERY_STRING", ""))
        length = int(environ.get("CONTENT_LENGTH") or 0)
        payload = json.loads(environ["wsgi.input"].read(length) or b"null") if length else None
        account = query.get("account", [None])[0]
        with self.lock:
            if path == "/_forge/calls":
                result = {n: c for (a, n), c in sorted(self.calls.items()) if account in (None, a)}
            elif path == "/_forge/reset":
                self.calls = Counter({k: v for k, v in self.calls.items() if account not in (None, k[0])})
                result = {}
            elif path == "/_forge/faults":
                rules = payload or []
                for i, r in enumerate(rules):
                    r.setdefault("kind", "throttle")
                    r["rng"] = random.Random(r.get("seed", i))
                self.faults = [r for r in self.faults if account is not None and r.get("account") != account] + rules
                result = {"faults": len(self.faults)}
            elif path == "/_forge/latency":
                self.latency = payload or []
                result = {"latency": len(self.latency)}
            elif path == "/_forge/phases":
                set_phase_seconds(float(payload.get("seconds", 0)))
                result = {}
            else:
                body = b'{"error": "unknown control path"}'
                start_response("404 Not Found", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
                return [body]
        body = json.dumps(result).encode()
        start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
        return [body]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--phase-seconds", type=float, default=1.0, help="how long pending/deleting phases last")
    parser.add_argument("--exit-with-stdin", action="store_true", help="exit when standard input closes (the test process that started it is gone)")
    args = parser.parse_args()
    set_phase_seconds(args.phase_seconds)
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    app = Harness(DomainDispatcherApplication(create_backend_app))
    server = make_server(args.host, args.port, app, threaded=True, request_handler=MotoRequestHandler)
    if args.exit_with_stdin:
        threading.Thread(target=lambda: (sys.stdin.read(), os._exit(0)), daemon=True).start()
    print(f"port={server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
