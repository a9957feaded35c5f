"""Compute Engine future reservations in calendar mode, and the reservations they deliver, the
zonal kinds gcp_compute.py serves (/compute/v1/projects/p/zones/z/...):
  * futureReservations: insert, get, list (filters and pages as every list), cancel (POST
    .../futureReservations/name/cancel), delete; each change answers a zonal Operation
    (zoneOperations.get and list, as for the other scopes). Checks, answered 400 as Compute
    answers (`invalid`, `required`): the name (RFC 1035; a name taken in the zone: 409);
    specificSkuProperties with instanceProperties.machineType and a totalCount of at least 1
    (sourceInstanceTemplate and aggregateReservation are not emulated); timeWindow.startTime
    with endTime or duration (one of them) after it, RFC 3339; planningStatus DRAFT (the
    default) or SUBMITTED; reservationMode CALENDAR or DEFAULT (the default); reservationName or
    namePrefix (at most 20 characters; with both, reservationName names the reservation), RFC
    1035, and no reservation of that name in the zone nor another live request delivering one;
    autoCreatedReservationsDeleteTime or autoCreatedReservationsDuration, not both, ending after
    the start. In CALENDAR mode besides: a machine type of CALENDAR_MACHINES, a reservation
    period of 1 to 90 days, a start in the future of the project's clock and at most 120 days
    after it, autoDeleteAutoCreatedReservations given (true or false), deploymentType DENSE if
    given. A DEFAULT-mode request is kept as given, without
    the calendar checks, and stays PENDING_APPROVAL (or DRAFTING): nothing approves it;
  * the lifecycle of a request in CALENDAR mode (status.procurementStatus), by the project's
    clock, which is the per-account clock of capacity.py with the project as the account (POST
    /_forge/clock?account=PROJECT {"now": ISO 8601} or {"advance_seconds": n}; real time until
    set): DRAFT stays DRAFTING; SUBMITTED is PENDING_APPROVAL until one operation's length (the
    phase seconds) after its insert ended (real time), then APPROVED if its totalCount fits what
    is left of the machine type's availability in the zone (CALENDAR_MACHINES, less the
    totalCount of the project's other APPROVED or FULFILLED requests of that type and zone whose
    periods overlap), else DECLINED (the model's "rejected by GCP"; it has no field for a
    reason). At approval the reservation is delivered (status CREATING: the model has no
    INACTIVE); at startTime the request is FULFILLED (status.autoCreatedReservations,
    status.fulfilledCount) and the reservation READY; with autoDeleteAutoCreatedReservations the
    reservation is deleted at endTime (or autoCreatedReservationsDeleteTime, or startTime +
    autoCreatedReservationsDuration), else kept. The request stays FULFILLED after its end (the
    model has no later state). No PROVISIONING, PROCURING, lock time, amendments or FAILED;
  * cancel: of a DRAFTING, PENDING_APPROVAL or APPROVED request before its start time: CANCELLED,
    and a reservation it delivered is deleted; else 400. delete: of a CANCELLED, DRAFTING,
    DECLINED or FAILED request, or of any after its end time (its reservation is kept: deleting
    a request never deletes what it delivered); else 400 (cancel it first; a FULFILLED one: wait
    for its end time). These refusals come at once (reason badRequest), not as failed operations;
  * reservations (zonal, read-only: what the requests deliver): get, list. Named reservationName,
    or namePrefix-YYYYMMDD-NNNN (the start date, the first free number from 0001) as the
    namePrefix field's description says ("-date-####"); specificReservation.count = totalCount,
    the request's instanceProperties, assuredCount 0 until the start, then count; inUseCount: the
    VMs other APIs run on it (`Compute.reservation_users`: GKE's node pools);
    specificReservationRequired as the request says (true if it does not), its deploymentType,
    shareSettings and schedulingType; deleteAtTime when it is to be deleted. `Compute.reservations_had` keeps every reservation a project has had, so
    GKE (`known_reservation`) tells one that is gone from one it never had.
"""

import copy
import datetime

from .capacity import now as account_now
from .gcp import GoogleError, check_name, new_id, operation_seconds, required, timestamp
from .gcp_compute import LINK, Kind, everything, integer, invalid, one_of


# Machine types calendar mode offers, and how many VMs of each one project can hold reserved in
# a zone at any one time (A4X: four NVL72 domains of 18 VMs).
CALENDAR_MACHINES = {"a3-highgpu-8g": 64, "a3-megagpu-8g": 64, "a3-ultragpu-8g": 64, "a4-highgpu-8g": 64, "a4x-highgpu-4g": 72}
DAY = 86400
MIN_DAYS, MAX_DAYS, LEAD_DAYS = 1, 90, 120
CANCELLABLE = ("DRAFTING", "PENDING_APPROVAL", "APPROVED")
DELETABLE = ("CANCELLED", "DRAFTING", "DECLINED", "FAILED")
PREFIX_LIMIT = 20


def project_now(project):
    """The project's clock (capacity.py's clock of the account `project`), in epoch seconds."""
    return account_now(project).replace(tzinfo=datetime.timezone.utc).timestamp()


def utc_text(seconds):
    """RFC 3339 in UTC, to the second, as the requests give times."""
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(value, field):
    """Epoch seconds of an RFC 3339 time with its offset."""
    try:
        when = datetime.datetime.fromisoformat(str(value))
    except ValueError:
        when = None
    if when is None or when.tzinfo is None:
        raise invalid(field, value, "It must be an RFC 3339 time with a time zone offset, such as 2026-12-01T00:00:00Z.")
    return when.timestamp()


def seconds_of(duration, field):
    """A Duration message's seconds, which must be positive."""
    if not isinstance(duration, dict):
        raise invalid(field, duration, "It must be a Duration: {\"seconds\": n}.")
    seconds = integer(duration.get("seconds"), f"{field}.seconds", 0, 315576000000, 0) + integer(duration.get("nanos"), f"{field}.nanos", 0, 999999999, 0) / 1e9
    if seconds <= 0:
        raise invalid(f"{field}.seconds", duration.get("seconds"), "The duration must be positive.")
    return seconds


def link(project, path):
    return f"projects/{project}/{path}"


def reservation_path(zone_scope, name):
    return f"{zone_scope}/reservations/{name}"


class FutureReservations(Kind):
    collection, singular, kind = "futureReservations", "future_reservation", "compute#futureReservation"
    list_kind = "compute#futureReservationsListResponse"
    zonal = True
    verbs = ("cancel",)

    def check(self, call, res):
        res.pop("params", None)  # input only, never kept
        if res.get("aggregateReservation") is not None or res.get("storagePoolProperties") is not None:
            raise invalid("resource.aggregateReservation", "", "Only future reservations of specificSkuProperties are emulated.")
        sku = res.get("specificSkuProperties")
        if not isinstance(sku, dict):
            raise required("resource.specificSkuProperties")
        if sku.get("sourceInstanceTemplate"):
            raise invalid("resource.specificSkuProperties.sourceInstanceTemplate", sku["sourceInstanceTemplate"], "Instance templates are not emulated: give instanceProperties.")
        machine = (sku.get("instanceProperties") or {}).get("machineType")
        if not machine:
            raise required("resource.specificSkuProperties.instanceProperties.machineType")
        total = integer(sku.get("totalCount"), "resource.specificSkuProperties.totalCount", 1, 100000, None)
        if total is None:
            raise required("resource.specificSkuProperties.totalCount")
        sku["totalCount"] = str(total)
        start, end = self.check_window(res.get("timeWindow"))
        res["planningStatus"] = one_of(res.get("planningStatus"), "resource.planningStatus", ("DRAFT", "SUBMITTED"), "DRAFT")
        res["reservationMode"] = mode = one_of(res.get("reservationMode"), "resource.reservationMode", ("CALENDAR", "DEFAULT"), "DEFAULT")
        if res.get("autoCreatedReservationsDeleteTime") and res.get("autoCreatedReservationsDuration"):
            raise invalid("resource.autoCreatedReservationsDuration", "", "Give autoCreatedReservationsDeleteTime or autoCreatedReservationsDuration, not both.")
        delete_at = end
        if res.get("autoCreatedReservationsDeleteTime"):
            delete_at = parse_time(res["autoCreatedReservationsDeleteTime"], "resource.autoCreatedReservationsDeleteTime")
        elif res.get("autoCreatedReservationsDuration"):
            delete_at = start + seconds_of(res["autoCreatedReservationsDuration"], "resource.autoCreatedReservationsDuration")
        if delete_at <= start:
            raise invalid("resource.autoCreatedReservationsDeleteTime", res.get("autoCreatedReservationsDeleteTime", ""), "The reservations can be deleted only after the start time.")
        if mode == "CALENDAR":
            self.check_calendar(call, res, machine, start, end)
        name = self.check_reservation_name(call, res)
        seconds = operation_seconds() if call.seconds is None else call.seconds
        res["status"] = {"procurementStatus": "PENDING_APPROVAL" if res["planningStatus"] == "SUBMITTED" else "DRAFTING"}
        res.update(_scope=call.scope, _start=start, _end=end, _delete_at=delete_at, _reservation=name, _approve_at=call.now + 2 * seconds)
        return res

    @staticmethod
    def check_window(window):
        """(start, end) in epoch seconds of a timeWindow: startTime with endTime or duration."""
        field = "resource.timeWindow"
        if not isinstance(window, dict):
            raise required(field)
        if not window.get("startTime"):
            raise required(f"{field}.startTime")
        start = parse_time(window["startTime"], f"{field}.startTime")
        if window.get("endTime") and window.get("duration"):
            raise invalid(f"{field}.duration", "", "Give endTime or duration, not both.")
        if window.get("endTime"):
            end = parse_time(window["endTime"], f"{field}.endTime")
        elif window.get("duration"):
            end = start + seconds_of(window["duration"], f"{field}.duration")
        else:
            raise required(f"{field}.endTime")
        if end <= start:
            raise invalid(f"{field}.endTime", window.get("endTime", ""), "The end time must be after the start time.")
        return start, end

    @staticmethod
    def check_calendar(call, res, machine, start, end):
        """What calendar mode asks besides: its GPU machine types, 1 to 90 days, a start in the
        project's future within 120 days, autoDeleteAutoCreatedReservations, DENSE."""
        if machine not in CALENDAR_MACHINES:
            raise invalid("resource.specificSkuProperties.instanceProperties.machineType", machine,
                          f"Future reservations in calendar mode reserve the machine types {', '.join(CALENDAR_MACHINES)} only.")
        if not MIN_DAYS * DAY <= end - start <= MAX_DAYS * DAY:
            raise invalid("resource.timeWindow", f"{utc_text(start)}/{utc_text(end)}",
                          f"A future reservation in calendar mode reserves resources for {MIN_DAYS} to {MAX_DAYS} days.")
        clock = project_now(call.project)
        if start <= clock:
            raise invalid("resource.timeWindow.startTime", res["timeWindow"]["startTime"], f"The start time must be in the future (it is {utc_text(clock)}).")
        if start > clock + LEAD_DAYS * DAY:
            raise invalid("resource.timeWindow.startTime", res["timeWindow"]["startTime"],
                          f"A future reservation in calendar mode starts at most {LEAD_DAYS} days ahead: no later than {utc_text(clock + LEAD_DAYS * DAY)}.")
        if not isinstance(res.get("autoDeleteAutoCreatedReservations"), bool):
            raise required("resource.autoDeleteAutoCreatedReservations")
        if "deploymentType" in res:
            one_of(res["deploymentType"], "resource.deploymentType", ("DENSE",))

    @staticmethod
    def check_reservation_name(call, res):
        """The name of the reservation to deliver (None: named from namePrefix at delivery),
        which no reservation of the zone has and no other live request will deliver."""
        name, prefix = res.get("reservationName"), res.get("namePrefix")
        if not name and not prefix:
            raise required("resource.reservationName")
        if prefix:
            check_name(prefix, "resource.namePrefix", PREFIX_LIMIT)
        if not name:
            return None
        check_name(name, "resource.reservationName")
        path = reservation_path(call.scope, name)
        taken = path in call.store.items or any(
            p.startswith(call.scope + "/") and r.get("_reservation") == name and r["status"]["procurementStatus"] in CANCELLABLE + ("FULFILLED",) and not r.get("_removed")
            for p, r in everything(call.store, "futureReservations"))
        if taken:
            raise invalid("resource.reservationName", name, f"The reservation '{link(call.project, path)}' exists or another future reservation delivers it.")
        return name

    def show(self, call, res):
        out = {k: v for k, v in res.items() if not k.startswith("_")}
        out["selfLinkWithId"] = LINK + link(call.project, f"{call.scope}/futureReservations/{res['id']}")
        return out

    def deletable(self, call, path, res):
        state = res["status"]["procurementStatus"]
        if state in DELETABLE or project_now(call.project) >= res["_end"]:
            return
        what = f"The future reservation '{link(call.project, path)}' is {state}"
        if state == "FULFILLED":
            raise GoogleError(400, f"{what} until its end time {utc_text(res['_end'])}: it can be deleted only after its end time "
                              "(a request in calendar mode cannot be cancelled after its start time).", "badRequest")
        raise GoogleError(400, f"{what}: cancel it before deleting it. A future reservation can be deleted once it is cancelled, "
                          f"declined or failed, or after its end time {utc_text(res['_end'])}.", "badRequest")

    def cancel(self, call):
        path, res = call.api.changeable(call)
        state, where = res["status"]["procurementStatus"], link(call.project, path)
        if project_now(call.project) >= res["_start"]:
            raise GoogleError(400, f"The future reservation '{where}' cannot be cancelled: its start time {utc_text(res['_start'])} has passed. "
                              "A future reservation in calendar mode can be cancelled only before its start time.", "badRequest")
        if state not in CANCELLABLE:
            raise GoogleError(400, f"The future reservation '{where}' is {state} and cannot be cancelled.", "badRequest")

        def cancelled():
            withdraw(call.api, call.store, res)
            res["status"] = {"procurementStatus": "CANCELLED"}
        return call.start("cancel", path, res["id"], cancelled)


class Reservations(Kind):
    collection, singular, kind = "reservations", "reservation", "compute#reservation"
    zonal = readonly = True

    def show(self, call, res):
        zone, name = call.scope.split("/")[1], res["name"]
        used = sum(users(call.project, zone, name) for users in call.api.reservation_users)
        return dict(res, specificReservation=dict(res["specificReservation"], inUseCount=str(used)))


# --- the lifecycle, by the project's clock ------------------------------------------------------

def fits(store, path, fr):
    """Whether the request's count fits what its machine type has left in its zone over its period."""
    zone_scope, machine = fr["_scope"], fr["specificSkuProperties"]["instanceProperties"]["machineType"]
    held = sum(int(r["specificSkuProperties"]["totalCount"]) for p, r in store.items.items()
               if p != path and p.startswith(zone_scope + "/futureReservations/") and r["status"]["procurementStatus"] in ("APPROVED", "FULFILLED")
               and r["specificSkuProperties"]["instanceProperties"]["machineType"] == machine and r["_start"] < fr["_end"] and fr["_start"] < r["_end"])
    return int(fr["specificSkuProperties"]["totalCount"]) <= CALENDAR_MACHINES.get(machine, 0) - held


def deliver(compute, store, fr, clock):
    """The reservation an approved request delivers, CREATING until its start."""
    zone_scope, name = fr["_scope"], fr["_reservation"]
    if name is None:  # namePrefix-YYYYMMDD-NNNN
        day = datetime.datetime.fromtimestamp(fr["_start"], datetime.timezone.utc).strftime("%Y%m%d")
        had = compute.reservations_had[store.project]
        number = 1
        while reservation_path(zone_scope, f"{fr['namePrefix']}-{day}-{number:04d}") in store.items.keys() | had:
            number += 1
        name = fr["_reservation"] = f"{fr['namePrefix']}-{day}-{number:04d}"
    rpath = reservation_path(zone_scope, name)
    sku = fr["specificSkuProperties"]
    reservation = {
        "kind": "compute#reservation", "id": new_id(), "creationTimestamp": timestamp(clock), "name": name,
        "selfLink": LINK + link(store.project, rpath), "zone": LINK + link(store.project, zone_scope), "status": "CREATING",
        "specificReservation": {"count": sku["totalCount"], "assuredCount": "0", "inUseCount": "0",
                                "instanceProperties": copy.deepcopy(sku["instanceProperties"])},
        "specificReservationRequired": fr.get("specificReservationRequired", True),
    }
    for key in ("deploymentType", "shareSettings", "schedulingType"):
        if key in fr:
            reservation[key] = copy.deepcopy(fr[key])
    if fr.get("autoDeleteAutoCreatedReservations"):
        reservation["deleteAtTime"] = utc_text(fr["_delete_at"])
    store.items[rpath] = reservation
    compute.reservations_had[store.project].add(rpath)
    fr["_delivered"] = reservation["id"]
    return reservation


def withdraw(compute, store, fr):
    """Delete the reservation a request delivered, if it is still there."""
    if fr.get("_delivered") and not fr.get("_removed"):
        rpath = reservation_path(fr["_scope"], fr["_reservation"])
        if (store.items.get(rpath) or {}).get("id") == fr["_delivered"]:
            del store.items[rpath]
        fr["_removed"] = True


def advance(compute, store, now):
    """Move the project's calendar-mode requests on: approval by real time `now`, the rest by the
    project's clock."""
    clock = None
    for path, fr in list(store.items.items()):
        if path.split("/")[-2] != "futureReservations" or fr["reservationMode"] != "CALENDAR":
            continue
        clock = project_now(store.project) if clock is None else clock
        status = fr["status"]
        if status["procurementStatus"] == "PENDING_APPROVAL" and now >= fr["_approve_at"]:
            if fits(store, path, fr):
                status["procurementStatus"] = "APPROVED"
                deliver(compute, store, fr, clock)
            else:
                status["procurementStatus"] = "DECLINED"
        if status["procurementStatus"] == "APPROVED" and clock >= fr["_start"]:
            zone_scope = fr["_scope"]
            reservation = store.items.get(reservation_path(zone_scope, fr["_reservation"]))
            if reservation is not None and reservation["id"] == fr["_delivered"]:
                reservation.update(status="READY", specificReservation=dict(reservation["specificReservation"], assuredCount=reservation["specificReservation"]["count"]))
            status.update(procurementStatus="FULFILLED", fulfilledCount=fr["specificSkuProperties"]["totalCount"],
                          autoCreatedReservations=[LINK + link(store.project, reservation_path(zone_scope, fr["_reservation"]))])
        if status["procurementStatus"] == "FULFILLED" and fr.get("autoDeleteAutoCreatedReservations") and clock >= fr["_delete_at"]:
            withdraw(compute, store, fr)


def known_reservation(compute, project, zone, name):
    """What GKE sees of the reservation `name` of `project` in `zone`: (its record, None if
    there is none now; whether the project has or had a reservation of that name, in any zone)."""
    record = compute.lookup(project, reservation_path(f"zones/{zone}", name))
    return record, any(p.rsplit("/", 1)[1] == name for p in compute.reservations_had[project])
