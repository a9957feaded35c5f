"""EC2's gaps:
  * EC2 Create/Describe/DeletePlacementGroup(s), which moto 5.2.5 does not implement;
  * placement groups taggable by id, as EC2's are: CreateTags and DeleteTags take the `pg-` id
    of a group of the account and region (moto answers InvalidID to any `pg-` id; an unknown
    group is InvalidPlacementGroup.Unknown), and DescribeTags lists a group's tags (filters
    `resource-id`, `resource-type` = `placement-group`, `key`, `value`, as moto reads them);
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
import re

from moto.ec2.exceptions import EC2ClientError, InvalidParameterValueErrorTagNull, TagLimitExceeded
from moto.ec2.models import EC2Backend
from moto.ec2.models.core import TaggedEC2Resource
from moto.ec2.models.nat_gateways import NatGateway, NatGatewayBackend
from moto.ec2.models.security_groups import SecurityGroupBackend
from moto.ec2.models.tags import TagBackend
from moto.ec2.models.vpcs import VPCBackend
from moto.ec2.responses import EC2Response
from moto.ec2.utils import EC2_PREFIX_TO_RESOURCE, EC2_RESOURCE_TO_PREFIX, get_prefix, simple_aws_filter_to_re
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


# --- placement groups are tagged by id -------------------------------------------------------
# The group's own "Tags" list stays where its tags live (CloudFormation's updates in
# cloudformation.py write it too); CreateTags and DeleteTags reach it by the group's id and
# DescribeTags reads it. Registering the `pg` prefix makes moto's id check (validate_resource_ids)
# take a `pg-` id and its DescribeTags name the type; the ids go to the groups, never to moto's
# tag store.

EC2_RESOURCE_TO_PREFIX.setdefault("placement-group", "pg")
EC2_PREFIX_TO_RESOURCE.setdefault("pg", "placement-group")


def _is_placement_group_id(resource_id):
    return isinstance(resource_id, str) and resource_id.startswith("pg-")


def placement_group_by_id(backend, group_id):
    """The account's group with this id, or EC2's error for a group it does not have."""
    for group in _placement_groups(backend).values():
        if group["GroupId"] == group_id:
            return group
    raise EC2ClientError("InvalidPlacementGroup.Unknown", f"The Placement Group '{group_id}' is unknown.")


def _split_ids(resource_ids):
    groups = [r for r in resource_ids if _is_placement_group_id(r)]
    return groups, [r for r in resource_ids if not _is_placement_group_id(r)]


_moto_do_resources_exist = EC2Backend.do_resources_exist


def do_resources_exist(self, resource_ids):
    groups, others = _split_ids(resource_ids)
    for group_id in groups:
        placement_group_by_id(self, group_id)
    return _moto_do_resources_exist(self, others)


EC2Backend.do_resources_exist = do_resources_exist


_moto_create_tags = TagBackend.create_tags


def create_tags(self, resource_ids, tags):
    """moto's CreateTags, with a placement group's tags set on the group (all checked first:
    a request that fails changes nothing)."""
    group_ids, others = _split_ids(resource_ids)
    if not group_ids:
        return _moto_create_tags(self, resource_ids, tags)
    if None in tags.values():
        raise InvalidParameterValueErrorTagNull()
    groups = [placement_group_by_id(self, g) for g in group_ids]
    for group in groups:
        keys = {t["Key"] for t in group["Tags"]} | set(tags)
        if len([k for k in keys if not k.startswith("aws:")]) > 50:
            raise TagLimitExceeded()
    if others:
        _moto_create_tags(self, others, tags)
    for group in groups:
        merged = {t["Key"]: t["Value"] for t in group["Tags"]}
        merged.update(tags)
        group["Tags"] = [{"Key": k, "Value": v} for k, v in merged.items()]
    return True


_moto_delete_tags = TagBackend.delete_tags


def delete_tags(self, resource_ids, tags):
    """moto's DeleteTags, with a placement group's tags taken off the group: a key given with a
    value goes only if the value matches, and no keys at all removes every tag but `aws:` ones,
    as EC2 does."""
    group_ids, others = _split_ids(resource_ids)
    if not group_ids:
        return _moto_delete_tags(self, resource_ids, tags)
    groups = [placement_group_by_id(self, g) for g in group_ids]
    if others:
        _moto_delete_tags(self, others, tags)
    for group in groups:
        def goes(tag):
            if not tags:
                return not tag["Key"].startswith("aws:")
            return tag["Key"] in tags and tags[tag["Key"]] in (None, tag["Value"])

        group["Tags"] = [t for t in group["Tags"] if not goes(t)]
    return True


_moto_describe_tags = TagBackend.describe_tags


def describe_tags(self, filters=None):
    """moto's DescribeTags, and the placement groups' tags matched by the same filters."""
    found = _moto_describe_tags(self, filters)
    filters = filters or {}
    if filters.get("resource-type") and "placement-group" not in filters["resource-type"]:
        return found

    def like(name, value):
        wanted = filters.get(name)
        return not wanted or any(re.match(simple_aws_filter_to_re(w), value) for w in wanted)

    for group in _placement_groups(self).values():
        for tag in group["Tags"]:
            if like("resource-id", group["GroupId"]) and like("key", tag["Key"]) and like("value", tag["Value"]):
                found.append({"resource_id": group["GroupId"], "key": tag["Key"], "value": tag["Value"], "resource_type": "placement-group"})
    return found


TagBackend.create_tags = create_tags
TagBackend.delete_tags = delete_tags
TagBackend.describe_tags = describe_tags


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
