"""EC2's gaps:
  * EC2 Create/Describe/DeletePlacementGroup(s), which moto 5.2.5 does not implement;
  * EC2 CreateSecurityGroup refusing a VpcId that does not exist (InvalidVpcID.NotFound);
  * NAT gateways that go pending -> available and deleting -> deleted over time, driven by
    moto's state manager (model names `forge::nat_gateway_create` / `_delete`);
  * DescribeNatGateways honouring `tag:<key>` and `tag-key` filters, which moto ignores (so a
    lookup by forge's tags would return every NAT gateway of the account);
  * one resource's tags read from the tag store's index: moto scans every tag of the account
    with regular expressions for each resource, so a Describe filtered by tag is quadratic
    (450 ms a call at 600 security groups) and large stacks (bench/large.py) would measure moto.
"""

import random

from moto.ec2.exceptions import EC2ClientError
from moto.ec2.models.core import TaggedEC2Resource
from moto.ec2.models.nat_gateways import NatGateway, NatGatewayBackend
from moto.ec2.models.security_groups import SecurityGroupBackend
from moto.ec2.models.vpcs import VPCBackend
from moto.ec2.responses import EC2Response
from moto.ec2.utils import EC2_PREFIX_TO_RESOURCE, get_prefix
from moto.moto_api._internal.managed_state_model import ManagedState


def _ec2(account_id, region_name):
    """The account's EC2 backend (the CloudFormation modules use it)."""
    from moto.ec2.models import ec2_backends

    return ec2_backends[account_id][region_name]


# --- tags by index -------------------------------------------------------------------------------

def _tags_of(self):
    """What moto's describe_tags filtered by this resource's id answers, from the index."""
    if not self.id:
        return []
    kind = EC2_PREFIX_TO_RESOURCE.get(get_prefix(self.id), "")
    return [{"resource_id": self.id, "key": k, "value": v, "resource_type": kind}
            for k, v in self.ec2_backend.tags.get(self.id, {}).items()]


TaggedEC2Resource.get_tags = _tags_of


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


# --- A VPC with security groups left in it cannot be deleted ---------------------------------
# EC2 refuses DeleteVpc while any group but the default one remains (a leaked load balancer's,
# say); moto deletes the VPC and its groups with it.

_moto_delete_vpc = VPCBackend.delete_vpc


def delete_vpc(self, vpc_id):
    left = [g for g in self.describe_security_groups() if g.vpc_id == vpc_id and g.name != "default"]
    if left:
        raise EC2ClientError("DependencyViolation", f"The vpc '{vpc_id}' has dependencies and cannot be deleted.")
    return _moto_delete_vpc(self, vpc_id)


VPCBackend.delete_vpc = delete_vpc


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


_moto_describe_nat_gateways = NatGatewayBackend.describe_nat_gateways


def describe_nat_gateways(self, filters, nat_gateway_ids):
    found = _moto_describe_nat_gateways(self, filters, nat_gateway_ids)
    for name, values in (filters or {}).items():
        if name.startswith("tag:"):
            found = [n for n in found if self.tags.get(n.id, {}).get(name[4:]) in values]
        elif name == "tag-key":
            found = [n for n in found if any(k in values for k in self.tags.get(n.id, {}))]
    return found


NatGatewayBackend.describe_nat_gateways = describe_nat_gateways
