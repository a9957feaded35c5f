"""The phase machinery the services share: a status that changes over time.

A resource's status is a property over a moto ManagedState (`phased_status`): `start_phase`
sets a label and the one it turns into; a delete phase ends in GONE, which is never shown: the
resource is dropped instead, the next time its account's backend is used. Every phase's model
name is in PHASE_MODELS, with GCP_OPERATION, how long Google operations last (gcp.py);
`set_phase_seconds` (`--phase-seconds`, POST /_forge/phases) sets how long they all last, 0
making them immediate; with an account (POST /_forge/phases?account=ID), how long the phases
that account's requests start last, so one test can hold its objects in a phase without
slowing the others.
"""

import threading
from datetime import datetime, timedelta

from moto.moto_api import state_manager
from moto.moto_api._internal.managed_state_model import ManagedState


PHASE_MODELS = (
    "forge::nat_gateway_create", "forge::nat_gateway_delete",
    "forge::eks_cluster_create", "forge::eks_cluster_delete", "forge::eks_cluster_update",
    "forge::eks_nodegroup_create", "forge::eks_nodegroup_delete", "forge::eks_nodegroup_update",
    "forge::eks_addon_create", "forge::eks_addon_delete", "forge::eks_addon_update",
    "forge::eks_update",
    "forge::fsx_create", "forge::fsx_update", "forge::fsx_delete",
    "forge::fsx_association_create", "forge::fsx_association_update", "forge::fsx_association_delete",
    "forge::efs_file_system_create", "forge::efs_file_system_update", "forge::efs_file_system_delete",
    "forge::efs_mount_target_create", "forge::efs_mount_target_delete",
    "forge::cfn_create", "forge::cfn_update", "forge::cfn_delete",
    "forge::pcs_create", "forge::pcs_update", "forge::pcs_delete",
    "forge::gcp_operation",
)
GCP_OPERATION = PHASE_MODELS[-1]  # not a moto model: how long Google operations last (gcp.py)


_serving = threading.local()  # the account of the request this thread serves (harness.py)
_account_seconds = {}  # account -> how long the phases its requests start last


def serving(account):
    """Marks this thread as serving a request of `account` (its phases take its length)."""
    _serving.account = account


def set_phase_seconds(seconds, account=None):
    """How long phases last: every account's, or with `account` that account's (`None`: the
    default again)."""
    if account is not None:
        if seconds is None:
            _account_seconds.pop(account, None)
        else:
            _account_seconds[account] = seconds
        return
    transition = {"progression": "time", "seconds": seconds} if seconds > 0 else {"progression": "immediate"}
    for model in PHASE_MODELS:
        state_manager.register_default_transition(model_name=model, transition=transition)


GONE = "forge:gone"  # the end of a delete phase; never shown, the resource is dropped instead


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


class _AccountPhase(ManagedState):
    """A phase of fixed length, its account's, whatever the default transition says."""

    def __init__(self, model, transitions, seconds):
        super().__init__(model, transitions)
        self._seconds = seconds

    @property
    def status(self):
        if datetime.now() > self._time_progressed + timedelta(seconds=self._seconds):
            self._status = self._get_last_status(previous=self._status)
        return self._status

    @status.setter
    def status(self, value):
        self._status = value


def start_phase(obj, model, start, end):
    obj._forge_status = start
    seconds = _account_seconds.get(getattr(_serving, "account", None))
    transitions = [(start, end)]
    obj._forge_phase = ManagedState(model, transitions) if seconds is None else _AccountPhase(model, transitions, seconds)


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


# Held while a request forgets the objects whose delete phase ended: concurrent requests would
# otherwise forget the same object twice, and the second would fail on what the first removed
# (a mount target's network interface, a cluster's security group).
DROPPING = threading.RLock()
