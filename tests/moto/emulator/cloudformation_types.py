"""CloudFormation's gaps in resource types:
  * CloudFormation resource types: AWS::EC2::SecurityGroup with inline rules as in the schema
    (egress too) and in-place updates, AWS::EC2::SecurityGroupIngress/Egress with rule ids as
    Ref, AWS::EC2::LaunchTemplate updates that make the new version the default,
    AWS::EC2::PlacementGroup (the placement groups of ec2.py) and AWS::EKS::Nodegroup (moto's EKS
    backend, with the node-group phases; Ref `cluster/nodegroup`); types moto cannot update are
    replaced (or retagged in place), not left as they were.
"""

import random

from moto.cloudformation import parsing as cfn_parsing
from moto.cloudformation.exceptions import UnformattedGetAttTemplateException
from moto.core.common_models import CloudFormationModel
from moto.ec2.exceptions import EC2ClientError, InvalidSecurityGroupNotFoundError
from moto.ec2.models.launch_templates import LaunchTemplate as EC2LaunchTemplate
from moto.ec2.models.security_groups import SecurityGroup as EC2SecurityGroup
from moto.ec2.models.security_groups import SecurityGroupIngress
from moto.eks.exceptions import InvalidRequestException, ResourceNotFoundException

from .cloudformation import tags_of_stack
from .ec2 import _ec2, _placement_groups, new_placement_group
from .eks import begin_update, refuse_while_busy


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
# launcher's placement groups and by moto's EKS backend with the node-group phases of eks.py.

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
