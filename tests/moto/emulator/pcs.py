"""AWS Parallel Computing Service (PCS), which moto has at no version: awsJson 1.0 routed by the
SigV4 service `pcs` and `X-Amz-Target: AWSParallelComputingService.<Op>`.

Requests reach it held to the PCS model botocore ships (`pcs/2023-02-10/service-2.json`) by the
harness (aws_model.py), answered as PCS does (`ValidationException` with `reason` and
`fieldList`). Per account and region:
  * clusters, compute node groups (CNGs) and queues, CREATING -> ACTIVE, UPDATING -> ACTIVE and
    DELETING -> gone through the shared phase machinery (phases.py); their ids are PCS's,
    `pcs_` and ten lowercase letters or digits, as the model's identifier patterns take them;
  * PCS's rules: one cluster CREATING at a time (`ServiceQuotaExceededException`); exactly one
    subnet on a cluster; Slurm 24.11, 25.05 or 25.11; CNGs and queues only on an ACTIVE
    cluster; the CNGs' max counts together within the cluster's size (SMALL 32, MEDIUM 512,
    LARGE 2,048); deletes queue -> CNG -> cluster (`ConflictException`); a name taken is a
    `ConflictException`;
  * checks against moto's EC2 and IAM: subnets (a CNG's in the cluster's VPC), security groups,
    the launch template and its numeric version, the instance profile, whose role is named
    `AWSPCS…` or has the path `/aws-pcs/` and may call `pcs:RegisterComputeNodeGroupInstance`
    (the managed policy `AWSPCSComputeNodePolicy`, or its own policy naming the action);
  * `clientToken` replay: the same token with the same request answers the first answer again;
    with another request, a `ConflictException`;
  * tags on create, TagResource / UntagResource / ListTagsForResource by ARN; lists by page.
A CNG whose name matches a rule of POST /_forge/pcs/failures [{"account", "match", "code",
"message"}] ends its create in CREATE_FAILED with that `errorInfo`; so does one whose launch
template's network interfaces an instance type of its instanceConfigs cannot take
(instance_types.interface_problem, as EKS node groups fail), with EC2's error code and message.
"""

import datetime
import fnmatch
import json
import random
import re
import string
import threading

from . import aws_model
from . import instance_types as ec2_types
from .phases import DROPPING, is_gone, phased_status, start_delete, start_phase

TARGET_PREFIX = aws_model.model("pcs").metadata["targetPrefix"] + "."
SLURM_VERSIONS = ("24.11", "25.05", "25.11")
SIZE_NODES = {"SMALL": 32, "MEDIUM": 512, "LARGE": 2048}
CREATE, UPDATE, DELETE = "forge::pcs_create", "forge::pcs_update", "forge::pcs_delete"
FAILURES = []  # POST /_forge/pcs/failures
LOCK = threading.RLock()


class PcsError(Exception):
    def __init__(self, status, kind, message, **fields):
        super().__init__(message)
        self.status, self.kind, self.body = status, kind, dict(message=message, **fields)


def invalid(message, field=None):
    fields = [{"name": field, "message": message}] if field else []
    return PcsError(400, "ValidationException", message, reason="fieldValidationFailed", fieldList=fields)


def not_found(kind, identifier):
    return PcsError(404, "ResourceNotFoundException", f"{kind} {identifier} not found.", resourceId=identifier, resourceType=kind)


def conflict(message, resource_id, kind):
    return PcsError(409, "ConflictException", message, resourceId=resource_id, resourceType=kind)


# --- the objects -------------------------------------------------------------------------------

def now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def new_id():
    return "pcs_" + "".join(random.choices(string.ascii_lowercase + string.digits, k=10))


class Resource:
    """A cluster, CNG or queue: its fields as PCS shows them, and a phased status."""
    status = phased_status

    def __init__(self, kind, fields, arn, tags):
        self.kind, self.fields, self.arn, self.tags = kind, fields, arn, dict(tags or {})
        self.error_info = None
        self.failure = None  # the errorInfo its create ends with

    def shown(self):
        status = self.status
        if status == "ACTIVE" and self.failure is not None:
            self.status, self.error_info = "CREATE_FAILED", [self.failure]
            status = "CREATE_FAILED"
        body = dict(self.fields, status=status)
        if self.error_info:
            body["errorInfo"] = self.error_info
        return body


class Store:
    """One account's PCS in one region."""

    def __init__(self, account, region):
        self.account, self.region = account, region
        self.clusters, self.groups, self.queues = {}, {}, {}  # id -> Resource
        self.tokens = {}  # (operation, token) -> (request, answer)

    def arn(self, path):
        return f"arn:aws:pcs:{self.region}:{self.account}:{path}"

    def forget_gone(self):
        with DROPPING:
            for table in (self.clusters, self.groups, self.queues):
                for key in [k for k, r in table.items() if is_gone(r)]:
                    table.pop(key, None)

    # lookups
    def cluster(self, identifier):
        found = next((c for c in self.clusters.values() if identifier in (c.fields["id"], c.fields["name"])), None)
        if found is None:
            raise not_found("cluster", identifier)
        return found

    def member(self, table, kind, cluster, identifier):
        found = next((r for r in table.values() if r.fields["clusterId"] == cluster.fields["id"]
                      and identifier in (r.fields["id"], r.fields["name"])), None)
        if found is None:
            raise not_found(kind, identifier)
        return found


def active(resource):
    """A ConflictException unless `resource` (a cluster, CNG or queue) is ACTIVE."""
    if resource.status != "ACTIVE":
        raise conflict(f"{resource.kind} {resource.fields['id']} is {resource.status}; it must be ACTIVE.", resource.fields["id"],
                       resource.kind)


def ec2(store):
    from moto.ec2.models import ec2_backends
    return ec2_backends[store.account][store.region]


def iam(store):
    from moto.iam.models import iam_backends
    return iam_backends[store.account]["global"]


def subnets_vpc(store, subnet_ids, field):
    vpcs = set()
    for subnet_id in subnet_ids:
        try:
            vpcs.add(ec2(store).get_subnet(subnet_id).vpc_id)
        except Exception:
            raise invalid(f"Subnet {subnet_id} does not exist.", field)
    return vpcs


def check_groups(store, group_ids, field):
    for group_id in group_ids or []:
        if ec2(store).get_security_group_from_id(group_id) is None:
            raise invalid(f"Security group {group_id} does not exist.", field)


def check_launch_template(store, template):
    if not template:
        return
    try:
        found = ec2(store).get_launch_template(template["id"])
    except Exception:
        raise invalid(f"Launch template {template['id']} does not exist.", "customLaunchTemplate.id")
    version = template["version"]
    if not version.isdigit():
        raise invalid(f"Launch template version {version} is not a version number: PCS takes a numeric version.",
                      "customLaunchTemplate.version")
    if not 1 <= int(version) <= len(found.versions):
        raise invalid(f"Launch template {template['id']} has no version {version}.", "customLaunchTemplate.version")


def launch_problem(store, template, instance_configs):
    """EC2's (code, message) for launching the CNG's instance types with its launch template's
    network interfaces, or None if EC2 launches them."""
    if not template:
        return None
    try:
        found = ec2(store).get_launch_template(template["id"])
        interfaces = (found.versions[int(template["version"]) - 1].data or {}).get("NetworkInterfaces") or []
    except Exception:
        return None
    problems = (ec2_types.interface_problem(c.get("instanceType"), interfaces) for c in instance_configs or [])
    return next((p for p in problems if p is not None), None)


def check_instance_profile(store, arn):
    name = arn.rsplit("/", 1)[-1]
    try:
        profile = iam(store).get_instance_profile(name)
    except Exception:
        raise invalid(f"Instance profile {arn} does not exist.", "iamInstanceProfileArn")
    roles = profile.roles
    if not roles:
        raise invalid(f"Instance profile {arn} has no role.", "iamInstanceProfileArn")
    role = roles[0]
    if not (role.name.startswith("AWSPCS") or role.path.startswith("/aws-pcs/")):
        raise invalid(f"The role {role.name} of instance profile {arn} must be named AWSPCS* or have the path /aws-pcs/.",
                      "iamInstanceProfileArn")
    managed = [p.arn for p in role.managed_policies.values()]
    inline = " ".join(json.dumps(p) if not isinstance(p, str) else p for p in role.policies.values())
    if not any(a.endswith("/AWSPCSComputeNodePolicy") for a in managed) and "pcs:RegisterComputeNodeGroupInstance" not in inline:
        raise invalid(f"The role {role.name} may not call pcs:RegisterComputeNodeGroupInstance (attach AWSPCSComputeNodePolicy).",
                      "iamInstanceProfileArn")


# --- the operations ----------------------------------------------------------------------------

def create_cluster(store, request):
    name = request["clusterName"]
    if any(c.fields["name"] == name for c in store.clusters.values()):
        raise conflict(f"A cluster named {name} already exists.", name, "cluster")
    if any(c.status == "CREATING" for c in store.clusters.values()):
        raise PcsError(402, "ServiceQuotaExceededException", "Only one cluster may be CREATING at a time in this Region.",
                       serviceCode="pcs", resourceType="cluster", quotaCode="L-CREATING")
    scheduler = request["scheduler"]
    if scheduler["version"] not in SLURM_VERSIONS:
        raise invalid(f"Slurm version {scheduler['version']} is not supported: {', '.join(SLURM_VERSIONS)}.", "scheduler.version")
    networking = request["networking"]
    subnet_ids = networking.get("subnetIds", [])
    if len(subnet_ids) != 1:
        raise invalid("A cluster takes exactly one subnet.", "networking.subnetIds")
    subnets_vpc(store, subnet_ids, "networking.subnetIds")
    check_groups(store, networking.get("securityGroupIds"), "networking.securityGroupIds")
    cluster_id = new_id()
    slurm = dict(request.get("slurmConfiguration") or {})
    slurm.setdefault("scaleDownIdleTimeInSeconds", 600)
    slurm["authKey"] = {"secretArn": f"arn:aws:secretsmanager:{store.region}:{store.account}:secret:pcs!slurm-secret-{cluster_id}",
                        "secretVersion": "1"}
    fields = {"name": name, "id": cluster_id, "arn": store.arn(f"cluster/{cluster_id}"), "createdAt": now(), "modifiedAt": now(),
              "scheduler": scheduler, "size": request["size"], "slurmConfiguration": slurm,
              "networking": {"subnetIds": subnet_ids, "securityGroupIds": networking.get("securityGroupIds", []),
                             "networkType": networking.get("networkType", "IPV4")},
              "endpoints": [{"type": "SLURMCTLD", "privateIpAddress": "10.0.%d.%d" % (random.randint(0, 255), random.randint(4, 250)),
                             "port": "6817"}]}
    cluster = Resource("cluster", fields, fields["arn"], request.get("tags"))
    start_phase(cluster, CREATE, "CREATING", "ACTIVE")
    store.clusters[cluster_id] = cluster
    return {"cluster": cluster.shown()}


def create_group(store, request):
    cluster = store.cluster(request["clusterIdentifier"])
    active(cluster)
    name = request["computeNodeGroupName"]
    if any(g.fields["clusterId"] == cluster.fields["id"] and g.fields["name"] == name for g in store.groups.values()):
        raise conflict(f"A compute node group named {name} already exists.", name, "computeNodeGroup")
    vpcs = subnets_vpc(store, request["subnetIds"], "subnetIds")
    cluster_vpc = subnets_vpc(store, cluster.fields["networking"]["subnetIds"], "subnetIds")
    if vpcs != cluster_vpc:
        raise invalid("The subnets must be in the cluster's VPC.", "subnetIds")
    check_groups(store, request.get("securityGroupIds"), "securityGroupIds")
    check_launch_template(store, request.get("customLaunchTemplate"))
    check_instance_profile(store, request["iamInstanceProfileArn"])
    scaling = request["scalingConfiguration"]
    check_scaling(store, cluster, scaling, None)
    group_id = new_id()
    fields = {key: request[key] for key in ("amiId", "securityGroupIds", "sshKeyName", "purchaseOption", "customLaunchTemplate",
                                            "spotOptions", "launchTemplateMode") if key in request}
    fields.update(name=name, id=group_id, arn=store.arn(f"computenodegroup/{group_id}"), clusterId=cluster.fields["id"],
                  createdAt=now(), modifiedAt=now(), subnetIds=request["subnetIds"], iamInstanceProfileArn=request["iamInstanceProfileArn"],
                  scalingConfiguration=scaling, instanceConfigs=request["instanceConfigs"],
                  slurmConfiguration=request.get("slurmConfiguration") or {"slurmCustomSettings": []})
    fields.setdefault("purchaseOption", "ONDEMAND")
    group = Resource("computeNodeGroup", fields, fields["arn"], request.get("tags"))
    rule = next((r for r in FAILURES if r.get("account") in (None, store.account) and fnmatch.fnmatchcase(name, r.get("match", "*"))), None)
    problem = launch_problem(store, request.get("customLaunchTemplate"), request["instanceConfigs"])
    if problem is not None:
        group.failure = {"code": problem[0], "message": problem[1]}
    elif rule is not None:
        group.failure = {"code": rule.get("code", "InsufficientInstanceCapacity"),
                         "message": rule.get("message", "We currently do not have sufficient capacity in the Availability Zone you requested.")}
    start_phase(group, CREATE, "CREATING", "ACTIVE")
    store.groups[group_id] = group
    return {"computeNodeGroup": group.shown()}


def check_scaling(store, cluster, scaling, replacing):
    """A CNG's scaling, made or changed (`replacing` the CNG it was): min ≤ max, and the CNGs'
    max counts together within the cluster's size."""
    if scaling["minInstanceCount"] > scaling["maxInstanceCount"]:
        raise invalid("minInstanceCount must not exceed maxInstanceCount.", "scalingConfiguration")
    total = scaling["maxInstanceCount"] + sum(g.fields["scalingConfiguration"]["maxInstanceCount"] for g in store.groups.values()
                         if g.fields["clusterId"] == cluster.fields["id"] and g is not replacing and g.status != "DELETING")
    limit = SIZE_NODES[cluster.fields["size"]]
    if total > limit:
        raise PcsError(402, "ServiceQuotaExceededException",
                       f"The compute node groups of cluster {cluster.fields['id']} would have {total} instances at most; "
                       f"a {cluster.fields['size']} cluster manages {limit}.", serviceCode="pcs", resourceType="computeNodeGroup")


def update_group(store, request):
    cluster = store.cluster(request["clusterIdentifier"])
    group = store.member(store.groups, "computeNodeGroup", cluster, request["computeNodeGroupIdentifier"])
    active(group)
    if "subnetIds" in request:
        subnets_vpc(store, request["subnetIds"], "subnetIds")
    check_groups(store, request.get("securityGroupIds"), "securityGroupIds")
    check_launch_template(store, request.get("customLaunchTemplate"))
    if "iamInstanceProfileArn" in request:
        check_instance_profile(store, request["iamInstanceProfileArn"])
    if "scalingConfiguration" in request:
        check_scaling(store, cluster, request["scalingConfiguration"], group)
    for key in ("amiId", "securityGroupIds", "sshKeyName", "subnetIds", "customLaunchTemplate", "purchaseOption", "spotOptions",
                "scalingConfiguration", "iamInstanceProfileArn", "slurmConfiguration", "launchTemplateMode"):
        if key in request:
            group.fields[key] = request[key]
    group.fields["modifiedAt"] = now()
    start_phase(group, UPDATE, "UPDATING", "ACTIVE")
    return {"computeNodeGroup": group.shown()}


def queue_groups(store, cluster, configurations):
    for i, configuration in enumerate(configurations or []):
        group = store.member(store.groups, "computeNodeGroup", cluster, configuration.get("computeNodeGroupId", ""))
        if group.status in ("DELETING", "CREATE_FAILED"):
            raise invalid(f"Compute node group {group.fields['id']} is {group.status}.", f"computeNodeGroupConfigurations[{i}]")


def create_queue(store, request):
    cluster = store.cluster(request["clusterIdentifier"])
    active(cluster)
    name = request["queueName"]
    if any(q.fields["clusterId"] == cluster.fields["id"] and q.fields["name"] == name for q in store.queues.values()):
        raise conflict(f"A queue named {name} already exists.", name, "queue")
    queue_groups(store, cluster, request.get("computeNodeGroupConfigurations"))
    queue_id = new_id()
    fields = {"name": name, "id": queue_id, "arn": store.arn(f"queue/{queue_id}"), "clusterId": cluster.fields["id"],
              "createdAt": now(), "modifiedAt": now(), "computeNodeGroupConfigurations": request.get("computeNodeGroupConfigurations", []),
              "slurmConfiguration": request.get("slurmConfiguration") or {"slurmCustomSettings": []}}
    queue = Resource("queue", fields, fields["arn"], request.get("tags"))
    start_phase(queue, CREATE, "CREATING", "ACTIVE")
    store.queues[queue_id] = queue
    return {"queue": queue.shown()}


def update_queue(store, request):
    cluster = store.cluster(request["clusterIdentifier"])
    queue = store.member(store.queues, "queue", cluster, request["queueIdentifier"])
    active(queue)
    if "computeNodeGroupConfigurations" in request:
        queue_groups(store, cluster, request["computeNodeGroupConfigurations"])
        queue.fields["computeNodeGroupConfigurations"] = request["computeNodeGroupConfigurations"]
    if "slurmConfiguration" in request:
        queue.fields["slurmConfiguration"] = request["slurmConfiguration"]
    queue.fields["modifiedAt"] = now()
    start_phase(queue, UPDATE, "UPDATING", "ACTIVE")
    return {"queue": queue.shown()}


def update_cluster(store, request):
    cluster = store.cluster(request["clusterIdentifier"])
    active(cluster)
    if "scheduler" in request:
        version = request["scheduler"].get("version", cluster.fields["scheduler"]["version"])
        if version not in SLURM_VERSIONS:
            raise invalid(f"Slurm version {version} is not supported: {', '.join(SLURM_VERSIONS)}.", "scheduler.version")
        cluster.fields["scheduler"] = dict(cluster.fields["scheduler"], version=version)
    if "slurmConfiguration" in request:
        cluster.fields["slurmConfiguration"] = dict(cluster.fields["slurmConfiguration"], **request["slurmConfiguration"])
    cluster.fields["modifiedAt"] = now()
    start_phase(cluster, UPDATE, "UPDATING", "ACTIVE")
    return {"cluster": cluster.shown()}


def delete_cluster(store, request):
    cluster = store.cluster(request["clusterIdentifier"])
    if any(r.fields["clusterId"] == cluster.fields["id"] for r in list(store.groups.values()) + list(store.queues.values())):
        raise conflict(f"Cluster {cluster.fields['id']} still has compute node groups or queues: delete them first.",
                       cluster.fields["id"], "cluster")
    start_delete(cluster, DELETE)
    return {}


def delete_group(store, request):
    cluster = store.cluster(request["clusterIdentifier"])
    group = store.member(store.groups, "computeNodeGroup", cluster, request["computeNodeGroupIdentifier"])
    users = [q.fields["id"] for q in store.queues.values()
             if any(c.get("computeNodeGroupId") == group.fields["id"] for c in q.fields["computeNodeGroupConfigurations"])]
    if users:
        raise conflict(f"Compute node group {group.fields['id']} is used by queue {users[0]}.", group.fields["id"], "computeNodeGroup")
    start_delete(group, DELETE)
    return {}


def delete_queue(store, request):
    cluster = store.cluster(request["clusterIdentifier"])
    queue = store.member(store.queues, "queue", cluster, request["queueIdentifier"])
    start_delete(queue, DELETE)
    return {}


def summary(resource):
    keys = ("name", "id", "arn", "clusterId", "createdAt", "modifiedAt")
    return dict({k: resource.fields[k] for k in keys if k in resource.fields}, status=resource.shown()["status"])


def page(request, items, key):
    start = int(request.get("nextToken") or 0)
    size = request.get("maxResults") or 10
    answer = {key: [summary(r) for r in items[start:start + size]]}
    if start + size < len(items):
        answer["nextToken"] = str(start + size)
    return answer


def tagged(store, arn):
    for table in (store.clusters, store.groups, store.queues):
        for resource in table.values():
            if resource.arn == arn:
                return resource
    raise not_found("resource", arn)


OPERATIONS = {
    "CreateCluster": create_cluster,
    "CreateComputeNodeGroup": create_group,
    "CreateQueue": create_queue,
    "UpdateCluster": update_cluster,
    "UpdateComputeNodeGroup": update_group,
    "UpdateQueue": update_queue,
    "DeleteCluster": delete_cluster,
    "DeleteComputeNodeGroup": delete_group,
    "DeleteQueue": delete_queue,
    "GetCluster": lambda s, r: {"cluster": s.cluster(r["clusterIdentifier"]).shown()},
    "GetComputeNodeGroup": lambda s, r: {"computeNodeGroup": s.member(s.groups, "computeNodeGroup", s.cluster(r["clusterIdentifier"]),
                                                                      r["computeNodeGroupIdentifier"]).shown()},
    "GetQueue": lambda s, r: {"queue": s.member(s.queues, "queue", s.cluster(r["clusterIdentifier"]), r["queueIdentifier"]).shown()},
    "ListClusters": lambda s, r: page(r, list(s.clusters.values()), "clusters"),
    "ListComputeNodeGroups": lambda s, r: page(r, [g for g in s.groups.values()
                                                   if g.fields["clusterId"] == s.cluster(r["clusterIdentifier"]).fields["id"]], "computeNodeGroups"),
    "ListQueues": lambda s, r: page(r, [q for q in s.queues.values()
                                        if q.fields["clusterId"] == s.cluster(r["clusterIdentifier"]).fields["id"]], "queues"),
    "TagResource": lambda s, r: tagged(s, r["resourceArn"]).tags.update(r["tags"]) or {},
    "UntagResource": lambda s, r: [tagged(s, r["resourceArn"]).tags.pop(k, None) for k in r["tagKeys"]] and {},
    "ListTagsForResource": lambda s, r: {"tags": tagged(s, r["resourceArn"]).tags},
}


class Pcs:
    """The WSGI app the harness sends PCS's requests to."""

    def __init__(self):
        self.stores = {}

    def store(self, account, region):
        key = (account, region)
        if key not in self.stores:
            self.stores[key] = Store(account, region)
        return self.stores[key]

    def __call__(self, environ, start_response):
        target = environ.get("HTTP_X_AMZ_TARGET", "")
        operation = target[len(TARGET_PREFIX):] if target.startswith(TARGET_PREFIX) else ""
        region = (re.search(r"Credential=[^/]+/[^/]+/([^/]+)/", environ.get("HTTP_AUTHORIZATION", "")) or [None, "us-east-1"])[1]
        account = environ.get("HTTP_X_MOTO_ACCOUNT_ID", "123456789012")
        length = int(environ.get("CONTENT_LENGTH") or 0)
        raw = environ["wsgi.input"].read(length) if length else b"{}"
        try:
            if operation not in OPERATIONS:
                raise PcsError(400, "ValidationException", f"Unknown operation {target}.", reason="unknownOperation")
            request = json.loads(raw or b"{}")  # JSON, as the harness checked
            with LOCK:
                store = self.store(account, region)
                store.forget_gone()
                token = request.get("clientToken")
                replay = store.tokens.get((operation, token)) if token else None
                if replay is not None:
                    if replay[0] != request:
                        raise conflict(f"clientToken {token} was used with another request.", token, "clientToken")
                    answer = replay[1]
                else:
                    answer = OPERATIONS[operation](store, request)
                    if token:
                        store.tokens[(operation, token)] = (request, answer)
            status, body = 200, answer
        except PcsError as e:
            status, body = e.status, dict(e.body, __type=e.kind)
        data = json.dumps(body).encode()
        headers = [("Content-Type", "application/x-amz-json-1.0"), ("Content-Length", str(len(data)))]
        if status != 200:
            headers.append(("x-amzn-ErrorType", body["__type"]))
        start_response(f"{status} {'OK' if status == 200 else 'Error'}", headers)
        return [data]
