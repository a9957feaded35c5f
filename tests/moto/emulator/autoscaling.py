"""EC2 Auto Scaling's gaps:
  * the Auto Scaling group behind every EKS managed node group (moto's EKS only names one that
    does not exist), made by eks.py with `nodegroup_group`: `eks-<node group>-<node group id>`
    (the id that ends the node group's ARN), its MinSize, MaxSize and DesiredCapacity the node
    group's scalingConfig, its VPCZoneIdentifier the node group's subnets, its launch template
    the node group's at its creation (none without one; EKS's own copy of it is not made),
    CapacityRebalance for SPOT, and the tags EKS puts on
    it (`eks:cluster-name`, `eks:nodegroup-name`, `k8s.io/cluster-autoscaler/enabled`,
    `k8s.io/cluster-autoscaler/<cluster>`, `kubernetes.io/cluster/<cluster>`, each
    PropagateAtLaunch). It launches no EC2 instances (a node group's instances are its cluster's
    Nodes, eks.py): every change of its sizes, whoever makes it (a scheduled action,
    UpdateAutoScalingGroup, SetDesiredCapacity, EKS's UpdateNodegroupConfig), goes to its
    `follower` (eks.py: the node group's Nodes). UpdateAutoScalingGroup with a MinSize or MaxSize
    and no DesiredCapacity brings the desired capacity within them, as the API documents;
    deleting a group deletes its scheduled actions;
  * scheduled actions kept per group (moto keys them by name alone, so two groups could not
    both have a `start`): PutScheduledUpdateGroupAction creates an action, or changes the values
    given of the group's action of that name (the others stay, as the API documents); errors,
    each a ValidationError: an unknown group ("AutoScalingGroup name not found - null"), a new
    action with none of MinSize, MaxSize, DesiredCapacity, sizes that contradict each other
    ("Desired capacity must be greater than or equal to min size" and the like), a StartTime
    (or the deprecated Time) before the account's clock ("Given start time is in the past"). A
    one-time action without a StartTime starts at the account's clock (runs at once); a
    recurring one (Recurrence) is kept and described, never run. DescribeScheduledActions by
    AutoScalingGroupName, ScheduledActionNames (unknown ones ignored), StartTime and EndTime
    (ignored with names), MaxRecords (<= 100, default 50) and NextToken (InvalidNextToken);
    DeleteScheduledAction of the group's action (an unknown one: ValidationError "Scheduled
    action name not found"); the Batch calls go through the same per-group store;
  * one-time actions run by the account's clock (capacity.py; `run_due`, a clock listener):
    whenever the clock is set or advanced, and before any Auto Scaling or EKS request of the
    account is answered, the actions whose StartTime it has reached run, in order of StartTime,
    region, group and name: the action's sizes, with the group's for those it leaves out (a
    desired capacity it leaves out is brought within the new bounds), set the group's if
    MinSize <= DesiredCapacity <= MaxSize, else the group keeps its sizes and the action fails;
    either way it is recorded as a scaling activity (Successful or Failed, at its StartTime)
    and deleted, as AWS deletes a one-time action once it ran;
  * DescribeScalingActivities: the activities of the scheduled actions run (moto answers none),
    newest first, by AutoScalingGroupName, ActivityIds, the filters StartTimeLowerBound,
    StartTimeUpperBound and Status (with AutoScalingGroupName only), IncludeDeletedGroups,
    MaxRecords (<= 100, default 100) and NextToken.
"""

import base64
import datetime
import json
import threading
import uuid

from moto.autoscaling.exceptions import AutoscalingClientError, ValidationError
from moto.autoscaling.models import AutoScalingBackend, FakeAutoScalingGroup, autoscaling_backends, make_int
from moto.autoscaling.responses import AutoScalingResponse
from moto.core.responses import ActionResult, EmptyResult
from moto.utilities.utils import get_partition

from . import capacity

LOCK = threading.RLock()  # scheduled actions, activities and the groups' sizes


# --- the Auto Scaling group behind an EKS node group ------------------------------------------

class NodegroupAutoScalingGroup(FakeAutoScalingGroup):
    """An Auto Scaling group EKS made for a node group: it launches no EC2 instances, and
    `follower` hears every change of its sizes."""

    follower = None
    _forge_quiet = False

    def set_desired_capacity(self, new_capacity):
        self.desired_capacity = self.min_size if new_capacity is None else new_capacity
        if self.follower is not None and not self._forge_quiet:
            self.follower(self)

    def update(self, **kwargs):
        """moto brings the desired capacity within a new MinSize or MaxSize by the instances it
        counts (none here); the API does it by the desired capacity."""
        desired, before = kwargs.pop("desired_capacity", None), self.desired_capacity
        self._forge_quiet = True
        try:
            super().update(desired_capacity=None, **kwargs)
        finally:
            self._forge_quiet = False
        if desired is None:
            desired = min(max(before or 0, self.min_size or 0), self.max_size if self.max_size is not None else before or 0)
        self.set_desired_capacity(desired)


def nodegroup_group(account, region, name, cluster, nodegroup_name, scaling, subnets, launch_template, spot):
    """The Auto Scaling group `name` EKS makes for a node group, in the account's region."""
    backend = autoscaling_backends[account][region]
    zones = []
    for subnet_id in subnets or []:
        try:
            zones.append(backend.ec2_backend.get_subnet(subnet_id).availability_zone)
        except Exception:
            pass
    template = None
    if launch_template and launch_template.get("id"):
        try:
            backend.ec2_backend.get_launch_template(launch_template["id"])
            template = {"LaunchTemplateId": launch_template["id"]}
            if launch_template.get("version") is not None:
                template["Version"] = str(launch_template["version"])
        except Exception:
            template = None
    tags = [{"Key": k, "Value": v, "PropagateAtLaunch": True} for k, v in (
        ("eks:cluster-name", cluster), ("eks:nodegroup-name", nodegroup_name), ("k8s.io/cluster-autoscaler/enabled", "true"),
        (f"k8s.io/cluster-autoscaler/{cluster}", "owned"), (f"kubernetes.io/cluster/{cluster}", "owned"))]
    scaling = scaling or {}
    with LOCK:
        group = NodegroupAutoScalingGroup(
            name=name, availability_zones=list(dict.fromkeys(zones)) or [f"{region}a"], desired_capacity=scaling.get("desiredSize"),
            max_size=scaling.get("maxSize"), min_size=scaling.get("minSize"), launch_config_name=None, launch_template=template,
            vpc_zone_identifier=None, default_cooldown=None, health_check_period=300, health_check_type="EC2", load_balancers=[],
            target_group_arns=[], placement_group=None, termination_policies=[], autoscaling_backend=backend, ec2_backend=backend.ec2_backend,
            tags=tags, mixed_instances_policy=None, capacity_rebalance=bool(spot))
        group.vpc_zone_identifier = ",".join(subnets or []) or None
        backend.autoscaling_groups[name] = group
    return group


def group_named(account, region, name):
    return autoscaling_backends[account][region].autoscaling_groups.get(name)


def resize(group, min_size=None, max_size=None, desired=None):
    """Sets the sizes given (EKS's UpdateNodegroupConfig); the follower hears it."""
    with LOCK:
        if min_size is not None:
            group.min_size = int(min_size)
        if max_size is not None:
            group.max_size = int(max_size)
        group.set_desired_capacity(int(desired) if desired is not None else group.desired_capacity)


def delete_nodegroup_group(account, region, name):
    """Deletes the group of a deleted node group, and its scheduled actions (not followed any more)."""
    backend = autoscaling_backends[account][region]
    with LOCK:
        group = backend.autoscaling_groups.get(name)
        if group is not None:
            group.follower = None
            backend.delete_auto_scaling_group(name)


_moto_delete_group = AutoScalingBackend.delete_auto_scaling_group


def delete_auto_scaling_group(self, group_name):
    with LOCK:
        group = self.autoscaling_groups.get(group_name)
        _moto_delete_group(self, group_name)
        actions = actions_of(self)
        for key in [k for k in actions if k[0] == group_name]:
            del actions[key]
        for activity in activities_of(self):
            if activity["_group"] is group:
                activity["AutoScalingGroupState"] = "Deleted"


AutoScalingBackend.delete_auto_scaling_group = delete_auto_scaling_group


# --- scheduled actions, per group --------------------------------------------------------------

class Action:
    """A scheduled action of one group."""

    def __init__(self, backend, group, name):
        self.group, self.name = group, name
        self.arn = (f"arn:{get_partition(backend.region_name)}:autoscaling:{backend.region_name}:{backend.account_id}:scheduledUpdateGroupAction:"
                    f"{uuid.uuid4()}:autoScalingGroupName/{group}:scheduledActionName/{name}")
        self.start_time = self.end_time = self.recurrence = self.time_zone = None
        self.min_size = self.max_size = self.desired_capacity = None

    @property
    def physical_resource_id(self):  # CloudFormation's AWS::AutoScaling::ScheduledAction
        return self.name

    def answer(self):
        out = {"AutoScalingGroupName": self.group, "ScheduledActionName": self.name, "ScheduledActionARN": self.arn, "Time": self.start_time,
               "StartTime": self.start_time, "EndTime": self.end_time, "Recurrence": self.recurrence, "MinSize": self.min_size,
               "MaxSize": self.max_size, "DesiredCapacity": self.desired_capacity, "TimeZone": self.time_zone}
        return {k: v for k, v in out.items() if v is not None}


def actions_of(backend):
    """The backend's scheduled actions: (group, name) -> Action, in the order they were made."""
    return backend.__dict__.setdefault("_forge_actions", {})


def activities_of(backend):
    """The backend's scaling activities, oldest first."""
    return backend.__dict__.setdefault("_forge_activities", [])


def check_sizes(minimum, maximum, desired):
    """The sizes of an action, as PutScheduledUpdateGroupAction holds them to each other."""
    if desired is not None and minimum is not None and desired < minimum:
        raise ValidationError("Desired capacity must be greater than or equal to min size")
    if desired is not None and maximum is not None and desired > maximum:
        raise ValidationError("Desired capacity must be less than or equal to max size")
    if minimum is not None and maximum is not None and minimum > maximum:
        raise ValidationError("Max size must be greater than or equal to min size")


def put_scheduled_update_group_action(self, name, desired_capacity, max_size, min_size, scheduled_action_name, start_time, end_time, recurrence, timezone):
    sizes = {"min_size": make_int(min_size), "max_size": make_int(max_size), "desired_capacity": make_int(desired_capacity)}
    start, end = capacity.naive(start_time), capacity.naive(end_time)
    with LOCK:
        if name not in self.autoscaling_groups:
            raise ValidationError("AutoScalingGroup name not found - null")
        actions = actions_of(self)
        action = actions.get((name, scheduled_action_name))
        if action is None and all(v is None for v in sizes.values()):
            raise ValidationError("You must specify at least one of the following properties: MaxSize, MinSize, or DesiredCapacity.")
        merged = {k: v if v is not None else getattr(action, k, None) for k, v in sizes.items()}
        check_sizes(merged["min_size"], merged["max_size"], merged["desired_capacity"])
        current = capacity.now(self.account_id)
        if start is not None and start < current:
            raise ValidationError("Given start time is in the past")
        if action is None:
            action = Action(self, name, scheduled_action_name)
            if start is None and not recurrence:
                start = current  # a one-time action with no start: now
        for key, value in merged.items():
            setattr(action, key, value)
        for key, value in (("start_time", start), ("end_time", end), ("recurrence", recurrence), ("time_zone", timezone)):
            if value is not None:
                setattr(action, key, value)
        actions[(name, scheduled_action_name)] = action
        return action


def describe_scheduled_actions(self, autoscaling_group_name=None, scheduled_action_names=None):
    with LOCK:
        return [a for a in actions_of(self).values()
                if autoscaling_group_name in (None, "", a.group) and (not scheduled_action_names or a.name in scheduled_action_names)]


def delete_scheduled_action(self, auto_scaling_group_name, scheduled_action_name):
    with LOCK:
        if actions_of(self).pop((auto_scaling_group_name, scheduled_action_name), None) is None:
            raise ValidationError("Scheduled action name not found")


AutoScalingBackend.put_scheduled_update_group_action = put_scheduled_update_group_action
AutoScalingBackend.describe_scheduled_actions = describe_scheduled_actions
AutoScalingBackend.delete_scheduled_action = delete_scheduled_action


# --- the clock runs one-time actions -----------------------------------------------------------

def iso(when):
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def run(backend, action):
    """Runs a due one-time action on its group, records the activity, and deletes the action."""
    actions_of(backend).pop((action.group, action.name), None)
    group = backend.autoscaling_groups.get(action.group)
    if group is None:
        return
    minimum = action.min_size if action.min_size is not None else group.min_size or 0
    maximum = action.max_size if action.max_size is not None else group.max_size or 0
    before = group.desired_capacity or 0
    desired = action.desired_capacity if action.desired_capacity is not None else min(max(before, minimum), maximum)
    problem = None
    if minimum > maximum:
        problem = f"Max bound, {maximum}, must be greater than or equal to min bound, {minimum}"
    elif not minimum <= desired <= maximum:
        problem = f"Desired capacity:{desired} must be between the specified min size:{minimum} and max size:{maximum}"
    constraints = f"min: {minimum}, max: {maximum}, desired: {desired}"
    if problem is None:
        change = f" changing the desired capacity from {before} to {desired}" if desired != before else ""
        cause = f"At {iso(action.start_time)} a scheduled action update of AutoScalingGroup constraints to {constraints}{change}."
    else:
        cause = f"At {iso(action.start_time)} a scheduled action update of AutoScalingGroup constraints to {constraints} failed."
    activities_of(backend).append({
        "ActivityId": str(uuid.uuid4()), "AutoScalingGroupName": group.name, "AutoScalingGroupARN": group.arn,
        "Description": f"Executing scheduled action {action.name}", "Cause": cause, "StartTime": action.start_time, "EndTime": action.start_time,
        "StatusCode": "Failed" if problem else "Successful", "StatusMessage": problem, "Progress": 100, "Details": "{}",
        "AutoScalingGroupState": "InService", "_group": group,
    })
    if problem is None:
        group.min_size, group.max_size = minimum, maximum
        group.set_desired_capacity(desired)


def run_due(account):
    """Runs the one-time scheduled actions the account's clock has reached (None: every
    account's), oldest first; a clock listener (capacity.py)."""
    accounts = list(autoscaling_backends) if account is None else [account]
    with LOCK:
        for owner in accounts:
            current = capacity.now(owner)
            due = []
            for region, backend in list((dict.get(autoscaling_backends, owner) or {}).items()):
                for action in list(actions_of(backend).values()):
                    if not action.recurrence and action.start_time is not None and action.start_time <= current:
                        due.append((action.start_time, region, action.group, action.name, backend, action))
            for *_, backend, action in sorted(due, key=lambda d: d[:4]):
                run(backend, action)


capacity.CLOCK_LISTENERS.append(run_due)

_moto_autoscaling_backend = AutoScalingResponse.autoscaling_backend


def caught_up_backend(self):
    """The backend, once what follows the account's clock has caught up with it."""
    capacity.tick(self.current_account)
    return _moto_autoscaling_backend.fget(self)


AutoScalingResponse.autoscaling_backend = property(caught_up_backend)


# --- requests ----------------------------------------------------------------------------------

def page(items, max_records, token, default):
    """One page of `items` and the token of the next (None: the last page)."""
    size = default if max_records is None else int(max_records)
    if not 1 <= size <= 100:
        raise ValidationError(f"1 validation error detected: Value '{size}' at 'maxRecords' failed to satisfy constraint: Member must have value "
                              f"less than or equal to 100 and greater than or equal to 1")
    start = 0
    if token:
        try:
            start = int(json.loads(base64.urlsafe_b64decode(token.encode()).decode())["offset"])
        except (ValueError, KeyError, TypeError):
            raise AutoscalingClientError("InvalidNextToken", "The token provided is not valid.")
    end = start + size
    following = base64.urlsafe_b64encode(json.dumps({"offset": end}).encode()).decode() if end < len(items) else None
    return items[start:end], following


def put_scheduled_update_group_action_response(self):
    self.autoscaling_backend.put_scheduled_update_group_action(
        name=self._get_param("AutoScalingGroupName"), desired_capacity=self._get_int_param("DesiredCapacity"),
        max_size=self._get_int_param("MaxSize"), min_size=self._get_int_param("MinSize"),
        scheduled_action_name=self._get_param("ScheduledActionName"),
        start_time=self._get_param("StartTime") or self._get_param("Time"), end_time=self._get_param("EndTime"),
        recurrence=self._get_param("Recurrence"), timezone=self._get_param("TimeZone"))
    return EmptyResult()


def describe_scheduled_actions_response(self):
    names = self._get_param("ScheduledActionNames", []) or []
    found = self.autoscaling_backend.describe_scheduled_actions(self._get_param("AutoScalingGroupName"), names)
    earliest, latest = capacity.naive(self._get_param("StartTime")), capacity.naive(self._get_param("EndTime"))
    if not names:
        found = [a for a in found if (earliest is None or (a.start_time and a.start_time >= earliest)) and (latest is None or (a.start_time and a.start_time <= latest))]
    shown, token = page([a.answer() for a in found], self._get_param("MaxRecords"), self._get_param("NextToken"), 50)
    return ActionResult({"ScheduledUpdateGroupActions": shown, "NextToken": token})


ACTIVITY_FILTERS = ("StartTimeLowerBound", "StartTimeUpperBound", "Status")


def describe_scaling_activities(self):
    backend = self.autoscaling_backend
    group, ids = self._get_param("AutoScalingGroupName"), self._get_param("ActivityIds", []) or []
    filters = {f.get("Name"): f.get("Values") or [] for f in self._get_param("Filters", []) or []}
    for name in filters:
        if name not in ACTIVITY_FILTERS:
            raise ValidationError(f"The filter name {name} is not valid. Valid filter names: {', '.join(ACTIVITY_FILTERS)}.")
    if "Status" in filters and not group:
        raise ValidationError("The Status filter can only be used with the AutoScalingGroupName parameter.")
    lower = [capacity.naive(v) for v in filters.get("StartTimeLowerBound", [])]
    upper = [capacity.naive(v) for v in filters.get("StartTimeUpperBound", [])]
    deleted = self._get_bool_param("IncludeDeletedGroups", False)
    with LOCK:
        found = [a for a in reversed(activities_of(backend))
                 if (not group or a["AutoScalingGroupName"] == group) and (not ids or a["ActivityId"] in ids)
                 and (deleted or a["AutoScalingGroupState"] != "Deleted")
                 and all(a["StartTime"] >= t for t in lower) and all(a["StartTime"] <= t for t in upper)
                 and ("Status" not in filters or a["StatusCode"] in filters["Status"])]
        answers = [{k: v for k, v in a.items() if not k.startswith("_") and v is not None} for a in found]
    shown, token = page(answers, self._get_param("MaxRecords"), self._get_param("NextToken"), 100)
    return ActionResult({"Activities": shown, "NextToken": token})


AutoScalingResponse.put_scheduled_update_group_action = put_scheduled_update_group_action_response
AutoScalingResponse.describe_scheduled_actions = describe_scheduled_actions_response
AutoScalingResponse.describe_scaling_activities = describe_scaling_activities
