"""CloudFormation's gaps in stacks and requests:
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
    that are not YAML or JSON or have no Resources, and EC2-typed parameters naming nothing
    answer ValidationError (moto: 500 and nothing), ValidateTemplate checks the template without
    cfn-lint, and stack tags (new ones too) are propagated to the EC2 resources, placement groups
    and node groups.
"""

import json
import re
import threading
import uuid

import yaml
from moto.cloudformation import parsing as cfn_parsing
from moto.cloudformation.exceptions import AlreadyExistsException
from moto.cloudformation.exceptions import ValidationError as CfnValidationError
from moto.cloudformation.models import ChangeSet, CloudFormationBackend, Stack, cloudformation_backends
from moto.cloudformation.models import Event as CfnEvent
from moto.cloudformation.parsing import ResourceMap
from moto.cloudformation.responses import CloudFormationResponse
from moto.cloudformation.utils import generate_stack_id, yaml_tag_constructor
from moto.core.exceptions import ServiceException, _RESTError
from moto.core.responses import ActionResult
from moto.core.utils import utcnow

from .ec2 import _ec2
from .phases import DROPPING, phased_status, start_phase


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

    from .cloudformation_types import CfnNodegroup, CfnPlacementGroup  # not at the top: that module imports this one

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
    with DROPPING:
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
    """A template that is neither YAML nor JSON, or has no Resources, is CloudFormation's
    ValidationError (moto: a JSONDecodeError or a KeyError, a 500)."""
    parsed = read_template(template)
    if not isinstance(parsed, dict) or not parsed.get("Resources"):
        raise CfnValidationError(message="Template format error: At least one Resources member must be defined.")
    return parsed


def read_template(template):
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
