"""EFS's gaps:
  * EFS file systems and mount targets that go creating -> available and deleting -> gone; a
    file system with mount targets, even deleting ones, refuses DeleteFileSystem, one that is not
    available refuses CreateMountTarget (IncorrectFileSystemLifeCycleState); a used CreationToken
    answers 409 FileSystemAlreadyExists with the FileSystemId in the body (moto: without it)
    (`forge::efs_{file_system,mount_target}_{create,delete}`);
  * UpdateFileSystem (moto: none, a 500): the throughput mode and provisioned throughput of an
    available file system (IncorrectFileSystemLifeCycleState otherwise; BadRequest for
    provisioned without ProvisionedThroughputInMibps), which goes updating -> available
    (`forge::efs_file_system_update`); 202 with its description, FileSystemNotFound.
"""

import json

from moto.efs.exceptions import BadRequest as EfsBadRequest
from moto.efs.exceptions import EFSError
from moto.efs.exceptions import FileSystemInUse as EfsFileSystemInUse
from moto.efs.exceptions import FileSystemNotFound as EfsFileSystemNotFound
from moto.efs.exceptions import MountTargetNotFound as EfsMountTargetNotFound
from moto.efs.models import EFSBackend
from moto.efs.models import FileSystem as EfsFileSystem
from moto.efs.models import MountTarget as EfsMountTarget
from moto.efs.responses import EFSResponse

from .phases import DROPPING, GONE, is_gone, phased_status, start_phase


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

    def __init__(self, file_system, what="mount targets can be created"):
        super().__init__("IncorrectFileSystemLifeCycleState", f"File system '{file_system.file_system_id}' is {file_system.life_cycle_state}; {what} only when it is available.")


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


def efs_update_file_system(self):
    """UpdateFileSystem: the throughput mode (and provisioned throughput) of an available file
    system, which goes updating -> available."""
    file_system_id = self._get_param("FileSystemId")
    file_system = self.efs_backend.file_systems_by_id.get(file_system_id)
    if file_system is None:
        raise EfsFileSystemNotFound(file_system_id)
    if file_system.life_cycle_state != "available":
        raise EfsWrongState(file_system, "it can be updated")
    mode = self._get_param("ThroughputMode") or file_system.throughput_mode
    provisioned = self._get_param("ProvisionedThroughputInMibps")
    if mode == "provisioned" and provisioned is None and file_system.provisioned_throughput_in_mibps is None:
        raise EfsBadRequest("ProvisionedThroughputInMibps is required when ThroughputMode is provisioned.")
    file_system.throughput_mode = mode
    file_system.provisioned_throughput_in_mibps = (provisioned or file_system.provisioned_throughput_in_mibps) if mode == "provisioned" else None
    start_phase(file_system, "forge::efs_file_system_update", "updating", "available")
    return json.dumps(file_system.info_json()), {"status": 202, "Content-Type": "application/json"}


def drop_deleted_efs(backend):
    with DROPPING:
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
EFSResponse.update_file_system = efs_update_file_system
