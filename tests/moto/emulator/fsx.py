"""FSx's gaps:
  * FSx for Lustre file systems of the launcher's own (moto keeps what it is given): checked like
    the API (capacity steps per deployment type, PerUnitStorageThroughput, one subnet, known
    security groups), idempotent by ClientRequestToken (IncompatibleParameterError when the
    retry asks for something else), CREATING -> AVAILABLE, or FAILED with FailureDetails when
    no ingress rule of their security groups lets TCP 988 in; UpdateFileSystem only while
    AVAILABLE, UPDATING -> AVAILABLE with a FILE_SYSTEM_UPDATE administrative action whose
    values take effect when it completes; DELETING -> gone; paginated DescribeFileSystems
    answering FileSystemNotFound; tag calls answering ResourceNotFound for unknown ARNs (model
    names `forge::fsx_{create,update,delete}`); NextTokens in base64, as FSx's model has them;
  * FSx data repository associations, which moto lacks: Create/Describe/Update/Delete, idempotent
    by ClientRequestToken, on AVAILABLE Lustre 2.12+ file systems other than SCRATCH_1, one per
    file system path, CREATING/UPDATING -> AVAILABLE and DELETING -> gone (with their file
    system too), DataRepositoryAssociationNotFound, tags (`forge::fsx_association_*`).
"""

import base64
import json
import random
import time

from moto.core.exceptions import JsonRESTError
from moto.fsx.responses import FSxResponse

from .phases import DROPPING, _drop_gone, is_gone, phased_status, start_delete, start_phase


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
    with DROPPING:
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
    """One page of `items` and the token of the next: the key of its first item, in base64 as
    FSx's model has its NextToken."""
    start = 0
    if token:
        keys = [base64.b64encode(key(item).encode()).decode() for item in items]
        if token not in keys:
            raise fsx_error("BadRequest", "The NextToken is not valid.")
        start = keys.index(token)
    end = start + (max_results or len(items))
    return items[start:end], (base64.b64encode(key(items[end]).encode()).decode() if end < len(items) else None)


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
