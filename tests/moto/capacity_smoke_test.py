"""Smoke test of EC2 Capacity Blocks for ML and Capacity Reservations as the launcher serves them
(emulator/capacity.py): offerings that identical searches answer alike, sorted by start date
then zone, priced per type; durations, counts and UltraServers as EC2 takes them; a purchase
tagged and found by its tag, once only; states that follow the account's clock
(POST /_forge/clock); purchases seen only after visible_after_seconds; blocks that cannot be
cancelled or modified; On-Demand reservations created, modified and cancelled; extensions of a
block offered alike to identical requests, priced as blocks, bought once, moving its end, in
its history and the fees paid, none for an expired block; no request outside botocore's model. Runs with the venv's boto3: `python -m unittest`."""

import datetime
import json
import time
import urllib.request
from decimal import Decimal

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

from .launched import Launched

UTC = datetime.timezone.utc
DEC_1 = "2026-12-01T00:00:00Z"
CB_TYPES = ("p4d.24xlarge", "p4de.24xlarge", "p5.48xlarge", "p5e.48xlarge", "p5en.48xlarge", "p6-b200.48xlarge", "p6-b300.48xlarge",
            "trn1.32xlarge", "trn2.48xlarge")
TAGS = [{"ResourceType": "capacity-reservation", "Tags": [{"Key": "forge:stack", "Value": "train"}, {"Key": "team", "Value": "ml"}]}]


class CapacityBlocks(Launched):
    def client(self, account, region="us-west-2"):
        return boto3.client("ec2", endpoint_url=self.url, region_name=region, aws_access_key_id=account, aws_secret_access_key="x",
                            config=Config(retries={"total_max_attempts": 1, "mode": "standard"}))

    def control(self, path, payload=None):
        data = json.dumps(payload).encode() if payload is not None else None
        with urllib.request.urlopen(urllib.request.Request(self.url + path, data=data, method="POST" if data else "GET")) as r:
            return json.loads(r.read())

    def account(self, account, now=DEC_1):
        """The account's EC2 client, its clock frozen at `now`."""
        self.control(f"/_forge/clock?account={account}", {"now": now})
        return self.client(account)

    def error(self, call, **kwargs):
        with self.assertRaises(ClientError) as raised:
            call(**kwargs)
        return raised.exception.response["Error"]["Code"], raised.exception.response["Error"]["Message"]

    def no_violations(self, account):
        self.assertEqual(self.control(f"/_forge/violations?account={account}"), [])

    def test_offerings_are_deterministic_sorted_and_priced(self):
        account = "710000000001"
        ec2 = self.account(account)
        search = dict(InstanceType="p5.48xlarge", InstanceCount=2, CapacityDurationHours=48)
        first = ec2.describe_capacity_block_offerings(**search)["CapacityBlockOfferings"]
        self.assertEqual(first, ec2.describe_capacity_block_offerings(**search)["CapacityBlockOfferings"])
        self.assertTrue(1 <= len(first) <= 6, first)
        self.assertEqual([(o["StartDate"], o["AvailabilityZone"]) for o in first], sorted((o["StartDate"], o["AvailabilityZone"]) for o in first))
        for o in first:
            self.assertRegex(o["CapacityBlockOfferingId"], r"^cb-0[0-9a-f]{16}$")
            self.assertEqual((o["InstanceType"], o["InstanceCount"], o["CapacityBlockDurationHours"], o["CurrencyCode"], o["Tenancy"]),
                             ("p5.48xlarge", 2, 48, "USD", "default"))
            start, end = o["StartDate"].astimezone(UTC), o["EndDate"].astimezone(UTC)
            self.assertEqual((start.hour, start.minute, end.hour, end.minute), (11, 30, 11, 30))
            self.assertEqual(end - start, datetime.timedelta(hours=48))
            self.assertIn(o["AvailabilityZone"], ("us-west-2a", "us-west-2b", "us-west-2c", "us-west-2d"))
            fee = Decimal(o["UpfrontFee"])
            self.assertEqual(fee, fee.quantize(Decimal("0.01")))
            self.assertTrue(Decimal("31.464") * 96 * Decimal("0.9") <= fee < Decimal("31.464") * 96 * Decimal("1.1"), fee)
        # The first start is the first 11:30 UTC more than a day after the clock.
        self.assertEqual(first[0]["StartDate"].astimezone(UTC), datetime.datetime(2026, 12, 2, 11, 30, tzinfo=UTC))
        # Prices differ by zone and day: the earliest is not the cheapest here.
        fees = [Decimal(o["UpfrontFee"]) for o in first]
        self.assertGreater(len(set(fees)), 1)
        self.assertLess(min(fees), fees[0])
        # Another account, another duration or count: other offerings.
        other = self.account("710000000002").describe_capacity_block_offerings(**search)["CapacityBlockOfferings"]
        self.assertFalse({o["CapacityBlockOfferingId"] for o in other} & {o["CapacityBlockOfferingId"] for o in first})
        # Paging through the same answer.
        one = ec2.describe_capacity_block_offerings(MaxResults=1, **search)
        self.assertEqual(one["CapacityBlockOfferings"], first[:1])
        rest = ec2.describe_capacity_block_offerings(MaxResults=10, NextToken=one["NextToken"], **search)
        self.assertEqual(rest["CapacityBlockOfferings"], first[1:])
        self.assertNotIn("NextToken", rest)
        # A date range narrows the starts and ends.
        lo, hi = datetime.datetime(2026, 12, 20, tzinfo=UTC), datetime.datetime(2027, 1, 10, tzinfo=UTC)
        ranged = ec2.describe_capacity_block_offerings(StartDateRange=lo, EndDateRange=hi, **search)["CapacityBlockOfferings"]
        self.assertTrue(ranged)
        for o in ranged:
            self.assertGreaterEqual(o["StartDate"], lo)
            self.assertLessEqual(o["EndDate"], hi)
        # Every Capacity Block type has offerings in us-west-2 (in the zones it is offered in);
        # others, an empty list.
        for kind in CB_TYPES:
            with self.subTest(kind):
                found = ec2.describe_capacity_block_offerings(InstanceType=kind, InstanceCount=1, CapacityDurationHours=24)["CapacityBlockOfferings"]
                self.assertTrue(found)
                self.assertEqual({o["InstanceType"] for o in found}, {kind})
        for kind in ("m5.large", "g5.48xlarge", "no-such.type", "p6e-gb200.36xlarge", "trn2u.48xlarge"):
            with self.subTest(kind):
                self.assertEqual(ec2.describe_capacity_block_offerings(InstanceType=kind, CapacityDurationHours=24)["CapacityBlockOfferings"], [])
        self.assertEqual(self.client(account, "eu-west-1").describe_capacity_block_offerings(InstanceType="p5.48xlarge", CapacityDurationHours=24)["CapacityBlockOfferings"], [])
        preferred = ec2.describe_capacity_block_offerings(InstanceTypePreferences=[{"InstanceType": "p5en.48xlarge"}, {"InstanceType": "p6-b200.48xlarge"}],
                                                          CapacityDurationHours=24)["CapacityBlockOfferings"]
        self.assertTrue(preferred and {o["InstanceType"] for o in preferred} <= {"p5en.48xlarge", "p6-b200.48xlarge"})
        self.no_violations(account)

    def test_durations_and_counts(self):
        account = "710000000003"
        ec2 = self.account(account)
        for hours in (24, 48, 336, 504, 4368):
            with self.subTest(hours):
                found = ec2.describe_capacity_block_offerings(InstanceType="p5.48xlarge", CapacityDurationHours=hours)["CapacityBlockOfferings"]
                self.assertTrue(all(o["CapacityBlockDurationHours"] == hours for o in found))
        for hours in (0, 1, 23, 25, 360, 344, 4536, 5000):
            with self.subTest(hours):
                code, message = self.error(ec2.describe_capacity_block_offerings, InstanceType="p5.48xlarge", CapacityDurationHours=hours)
                self.assertEqual(code, "InvalidParameterValue")
                self.assertIn(f"'{hours}' for parameter CapacityDurationHours is invalid", message)
        for count in (0, 65):
            with self.subTest(count=count):
                code, message = self.error(ec2.describe_capacity_block_offerings, InstanceType="p5.48xlarge", InstanceCount=count, CapacityDurationHours=24)
                self.assertEqual(code, "InvalidParameterValue")
                self.assertIn("InstanceCount", message)
        self.assertEqual(self.error(ec2.describe_capacity_block_offerings, CapacityDurationHours=24)[0], "MissingParameter")
        self.assertEqual(self.error(ec2.describe_capacity_block_offerings, CapacityDurationHours=24, DryRun=True, InstanceType="p5.48xlarge")[0], "DryRunOperation")
        # UltraServers: their count of servers, each of its instances.
        for ultraserver, kind, per in (("u-p6e-gb200x72", "p6e-gb200.36xlarge", 18), ("u-trn2x64", "trn2u.48xlarge", 4)):
            with self.subTest(ultraserver):
                found = ec2.describe_capacity_block_offerings(UltraserverType=ultraserver, UltraserverCount=2, CapacityDurationHours=24)["CapacityBlockOfferings"]
                self.assertTrue(found)
                for o in found:
                    self.assertEqual((o["InstanceType"], o["InstanceCount"], o["UltraserverType"], o["UltraserverCount"]), (kind, 2 * per, ultraserver, 2))
        self.assertEqual(self.error(ec2.describe_capacity_block_offerings, UltraserverType="u-p6e-gb200x72", UltraserverCount=4, CapacityDurationHours=24)[0],
                         "InvalidParameterValue")
        self.assertEqual(ec2.describe_capacity_block_offerings(UltraserverType="u-nothing", CapacityDurationHours=24)["CapacityBlockOfferings"], [])
        self.no_violations(account)

    def test_purchase_tags_states_and_once_only(self):
        account = "710000000004"
        ec2 = self.account(account)
        offering = ec2.describe_capacity_block_offerings(InstanceType="p5en.48xlarge", InstanceCount=4, CapacityDurationHours=72)["CapacityBlockOfferings"][0]
        offering_id = offering["CapacityBlockOfferingId"]
        self.assertEqual(self.error(ec2.purchase_capacity_block, CapacityBlockOfferingId=offering_id, InstancePlatform="Linux/UNIX", DryRun=True)[0],
                         "DryRunOperation")
        bought = ec2.purchase_capacity_block(CapacityBlockOfferingId=offering_id, InstancePlatform="Linux/UNIX", TagSpecifications=TAGS)
        self.assertNotIn("CapacityBlocks", bought)
        cr = bought["CapacityReservation"]
        self.assertRegex(cr["CapacityReservationId"], r"^cr-0[0-9a-f]{16}$")
        self.assertEqual(cr["CapacityReservationArn"], f"arn:aws:ec2:us-west-2:{account}:capacity-reservation/{cr['CapacityReservationId']}")
        expected = {"ReservationType": "capacity-block", "InstanceType": "p5en.48xlarge", "InstancePlatform": "Linux/UNIX", "Tenancy": "default",
                    "AvailabilityZone": offering["AvailabilityZone"], "TotalInstanceCount": 4, "AvailableInstanceCount": 4, "StartDate": offering["StartDate"],
                    "EndDate": offering["EndDate"], "EndDateType": "limited", "InstanceMatchCriteria": "targeted", "State": "scheduled", "OwnerId": account}
        self.assertEqual({k: cr[k] for k in expected}, expected)
        self.assertEqual(cr["CreateDate"].astimezone(UTC), datetime.datetime(2026, 12, 1, tzinfo=UTC))
        self.assertEqual({t["Key"]: t["Value"] for t in cr["Tags"]}, {"forge:stack": "train", "team": "ml"})
        # Found by its tag, and by id; another account sees nothing.
        by_tag = ec2.describe_capacity_reservations(Filters=[{"Name": "tag:forge:stack", "Values": ["train"]}])["CapacityReservations"]
        self.assertEqual([r["CapacityReservationId"] for r in by_tag], [cr["CapacityReservationId"]])
        self.assertEqual(by_tag[0], cr)
        self.assertEqual(ec2.describe_capacity_reservations(Filters=[{"Name": "tag:forge:stack", "Values": ["other"]}])["CapacityReservations"], [])
        self.assertEqual(len(ec2.describe_capacity_reservations(Filters=[{"Name": "tag-key", "Values": ["team"]}, {"Name": "state", "Values": ["scheduled"]},
                                                                         {"Name": "instance-type", "Values": ["p5en.48xlarge"]}])["CapacityReservations"]), 1)
        self.assertEqual(self.client("710000000005").describe_capacity_reservations()["CapacityReservations"], [])
        code, message = self.error(ec2.describe_capacity_reservations, CapacityReservationIds=["cr-0123456789abcdef0"])
        self.assertEqual((code, message), ("InvalidCapacityReservationId.NotFound", "The capacity reservation ID 'cr-0123456789abcdef0' does not exist"))
        self.assertEqual(self.error(ec2.describe_capacity_reservations, Filters=[{"Name": "reservation-type", "Values": ["capacity-block"]}])[0],
                         "InvalidParameterValue")
        # The offering is bought once, and no longer offered.
        code, message = self.error(ec2.purchase_capacity_block, CapacityBlockOfferingId=offering_id, InstancePlatform="Linux/UNIX")
        self.assertEqual((code, message), ("InvalidCapacityBlockOfferingIdExpired", f"The Capacity Block offering ID '{offering_id}' is no longer available."))
        again = ec2.describe_capacity_block_offerings(InstanceType="p5en.48xlarge", InstanceCount=4, CapacityDurationHours=72)["CapacityBlockOfferings"]
        self.assertNotIn(offering_id, [o["CapacityBlockOfferingId"] for o in again])
        self.assertEqual(self.error(ec2.purchase_capacity_block, CapacityBlockOfferingId="cb-0123456789abcdef0", InstancePlatform="Linux/UNIX")[0],
                         "InvalidCapacityBlockOfferingIdNotFound")
        self.assertEqual(self.error(ec2.purchase_capacity_block, CapacityBlockOfferingId="cbo-1", InstancePlatform="Linux/UNIX")[0],
                         "InvalidCapacityBlockOfferingIdMalformed")
        # An offering served to another account is not this one's.
        theirs = self.account("710000000006").describe_capacity_block_offerings(InstanceType="p5.48xlarge", CapacityDurationHours=24)["CapacityBlockOfferings"][0]
        self.assertEqual(self.error(ec2.purchase_capacity_block, CapacityBlockOfferingId=theirs["CapacityBlockOfferingId"], InstancePlatform="Linux/UNIX")[0],
                         "InvalidCapacityBlockOfferingIdNotFound")
        # States follow the account's clock.
        state = lambda: ec2.describe_capacity_reservations(CapacityReservationIds=[cr["CapacityReservationId"]])["CapacityReservations"][0]["State"]  # noqa: E731
        self.control(f"/_forge/clock?account={account}", {"now": offering["StartDate"].astimezone(UTC).isoformat()})
        self.assertEqual(state(), "active")
        self.assertEqual(self.control(f"/_forge/clock?account={account}", {"advance_seconds": 72 * 3600 - 1})["now"],
                         (offering["EndDate"].astimezone(UTC) - datetime.timedelta(seconds=1)).strftime("%Y-%m-%dT%H:%M:%SZ"))
        self.assertEqual(state(), "active")
        self.control(f"/_forge/clock?account={account}", {"advance_seconds": 1})
        self.assertEqual(state(), "expired")
        self.assertEqual(ec2.describe_capacity_reservations(Filters=[{"Name": "state", "Values": ["expired"]}])["CapacityReservations"][0]["CapacityReservationId"],
                         cr["CapacityReservationId"])
        # Blocks cannot be cancelled or modified.
        self.control(f"/_forge/clock?account={account}", {"now": DEC_1})
        code, message = self.error(ec2.cancel_capacity_reservation, CapacityReservationId=cr["CapacityReservationId"])
        self.assertEqual(code, "UnsupportedOperation")
        self.assertIn("can't cancel a Capacity Block", message)
        self.assertEqual(self.error(ec2.modify_capacity_reservation, CapacityReservationId=cr["CapacityReservationId"], InstanceCount=8)[0], "UnsupportedOperation")
        self.assertEqual(state(), "scheduled")
        # What the account paid.
        paid = self.control(f"/_forge/capacity?account={account}")
        self.assertEqual([(p["CapacityReservationId"], p["CapacityBlockOfferingId"], p["UpfrontFee"]) for p in paid["purchases"]],
                         [(cr["CapacityReservationId"], offering_id, offering["UpfrontFee"])])
        self.assertEqual(paid["total_fee"], offering["UpfrontFee"])
        # Reservations are tagged by id.
        ec2.create_tags(Resources=[cr["CapacityReservationId"]], Tags=[{"Key": "extra", "Value": "1"}])
        described = ec2.describe_tags(Filters=[{"Name": "resource-id", "Values": [cr["CapacityReservationId"]]}])["Tags"]
        self.assertEqual({(t["Key"], t["ResourceType"]) for t in described}, {("forge:stack", "capacity-reservation"), ("team", "capacity-reservation"),
                                                                                 ("extra", "capacity-reservation")})
        ec2.delete_tags(Resources=[cr["CapacityReservationId"]], Tags=[{"Key": "extra"}])
        self.assertEqual(self.error(ec2.create_tags, Resources=["cr-0123456789abcdef0"], Tags=[{"Key": "k", "Value": "v"}])[0],
                         "InvalidCapacityReservationId.NotFound")
        self.no_violations(account)

    def test_ultraserver_purchase_makes_a_capacity_block(self):
        account = "710000000007"
        ec2 = self.account(account)
        offering = ec2.describe_capacity_block_offerings(UltraserverType="u-p6e-gb200x72", UltraserverCount=1, CapacityDurationHours=24)["CapacityBlockOfferings"][0]
        bought = ec2.purchase_capacity_block(CapacityBlockOfferingId=offering["CapacityBlockOfferingId"], InstancePlatform="Linux/UNIX",
                                             TagSpecifications=TAGS + [{"ResourceType": "capacity-block", "Tags": [{"Key": "forge:stack", "Value": "train"}]}])
        cr, (block,) = bought["CapacityReservation"], bought["CapacityBlocks"]
        self.assertEqual((cr["InstanceType"], cr["TotalInstanceCount"], cr["CapacityBlockId"]), ("p6e-gb200.36xlarge", 18, block["CapacityBlockId"]))
        self.assertEqual((block["UltraserverType"], block["CapacityReservationIds"], block["State"]), ("u-p6e-gb200x72", [cr["CapacityReservationId"]], "scheduled"))
        described = ec2.describe_capacity_blocks(Filters=[{"Name": "tag:forge:stack", "Values": ["train"]}])["CapacityBlocks"]
        self.assertEqual(described, [block])
        self.assertEqual(ec2.describe_capacity_blocks(CapacityBlockIds=[block["CapacityBlockId"]])["CapacityBlocks"], [block])
        self.assertEqual(self.error(ec2.purchase_capacity_block, CapacityBlockOfferingId=offering["CapacityBlockOfferingId"], InstancePlatform="Linux/UNIX",
                                    TagSpecifications=[{"ResourceType": "instance", "Tags": [{"Key": "k", "Value": "v"}]}])[0], "InvalidParameterValue")
        self.no_violations(account)

    def test_purchases_are_seen_after_visible_after_seconds(self):
        account = "710000000008"
        ec2 = self.account(account)
        self.assertEqual(self.control(f"/_forge/capacity?account={account}", {"visible_after_seconds": 1.0})["visible_after_seconds"], 1.0)
        offering = ec2.describe_capacity_block_offerings(InstanceType="p5.48xlarge", CapacityDurationHours=24)["CapacityBlockOfferings"][0]
        # The answer is lost: the purchase is made all the same.
        self.control(f"/_forge/faults?account={account}", [{"account": account, "match": "ec2:PurchaseCapacityBlock", "when": "after", "kind": "5xx"}])
        self.assertEqual(self.error(ec2.purchase_capacity_block, CapacityBlockOfferingId=offering["CapacityBlockOfferingId"], InstancePlatform="Linux/UNIX",
                                    TagSpecifications=TAGS)[0], "InternalError")
        self.control(f"/_forge/faults?account={account}", [])
        bought = self.control(f"/_forge/capacity?account={account}")["purchases"]
        self.assertEqual(len(bought), 1)
        self.assertFalse(bought[0]["visible"])
        look = lambda: ec2.describe_capacity_reservations(Filters=[{"Name": "tag:forge:stack", "Values": ["train"]}])["CapacityReservations"]  # noqa: E731
        self.assertEqual(look(), [])
        self.assertEqual(self.error(ec2.describe_capacity_reservations, CapacityReservationIds=[bought[0]["CapacityReservationId"]])[0],
                         "InvalidCapacityReservationId.NotFound")
        # Buying again is refused; looking again finds it.
        self.assertEqual(self.error(ec2.purchase_capacity_block, CapacityBlockOfferingId=offering["CapacityBlockOfferingId"], InstancePlatform="Linux/UNIX")[0],
                         "InvalidCapacityBlockOfferingIdExpired")
        deadline = time.monotonic() + 3
        while not (found := look()) and time.monotonic() < deadline:
            time.sleep(0.1)
        self.assertEqual([r["CapacityReservationId"] for r in found], [bought[0]["CapacityReservationId"]])
        self.control(f"/_forge/capacity?account={account}", {"visible_after_seconds": 0})
        self.no_violations(account)

    def test_an_offering_whose_start_passed_is_expired(self):
        account = "710000000009"
        ec2 = self.account(account)
        offering = ec2.describe_capacity_block_offerings(InstanceType="trn2.48xlarge", CapacityDurationHours=24)["CapacityBlockOfferings"][0]
        self.control(f"/_forge/clock?account={account}", {"now": offering["StartDate"].astimezone(UTC).isoformat()})
        self.assertEqual(self.error(ec2.purchase_capacity_block, CapacityBlockOfferingId=offering["CapacityBlockOfferingId"], InstancePlatform="Linux/UNIX")[0],
                         "InvalidCapacityBlockOfferingIdExpired")
        later = ec2.describe_capacity_block_offerings(InstanceType="trn2.48xlarge", CapacityDurationHours=24)["CapacityBlockOfferings"]
        self.assertGreater(min(o["StartDate"] for o in later), offering["StartDate"] + datetime.timedelta(days=1))
        self.no_violations(account)

    def test_on_demand_reservations(self):
        account = "710000000010"
        ec2 = self.account(account)
        created = ec2.create_capacity_reservation(InstanceType="p5.48xlarge", InstancePlatform="Linux/UNIX", AvailabilityZone="us-west-2a", InstanceCount=2,
                                                  EndDateType="limited", EndDate=datetime.datetime(2026, 12, 10, tzinfo=UTC), InstanceMatchCriteria="targeted",
                                                  TagSpecifications=TAGS, ClientToken="token-1")["CapacityReservation"]
        self.assertEqual((created["ReservationType"], created["State"], created["TotalInstanceCount"], created["AvailabilityZoneId"]),
                         ("default", "active", 2, "usw2-az2"))
        again = ec2.create_capacity_reservation(InstanceType="p5.48xlarge", InstancePlatform="Linux/UNIX", AvailabilityZone="us-west-2a", InstanceCount=2,
                                                EndDateType="limited", EndDate=datetime.datetime(2026, 12, 10, tzinfo=UTC), InstanceMatchCriteria="targeted",
                                                TagSpecifications=TAGS, ClientToken="token-1")["CapacityReservation"]
        self.assertEqual(again["CapacityReservationId"], created["CapacityReservationId"])
        self.assertEqual(self.error(ec2.create_capacity_reservation, InstanceType="p5.48xlarge", InstancePlatform="Linux/UNIX", AvailabilityZone="us-west-2a",
                                    InstanceCount=3, ClientToken="token-1")[0], "IdempotentParameterMismatch")
        self.assertEqual(self.error(ec2.create_capacity_reservation, InstanceType="p5e.48xlarge", InstancePlatform="Linux/UNIX", AvailabilityZone="us-west-2a",
                                    InstanceCount=1)[0], "Unsupported")
        self.assertEqual(self.error(ec2.create_capacity_reservation, InstanceType="p5.48xlarge", InstancePlatform="Linux/UNIX", AvailabilityZone="us-west-2a",
                                    InstanceCount=1, EndDateType="unlimited", EndDate=datetime.datetime(2026, 12, 10, tzinfo=UTC))[0], "InvalidParameterCombination")
        ec2.modify_capacity_reservation(CapacityReservationId=created["CapacityReservationId"], InstanceCount=4, EndDateType="unlimited")
        (modified,) = ec2.describe_capacity_reservations(CapacityReservationIds=[created["CapacityReservationId"]])["CapacityReservations"]
        self.assertEqual((modified["TotalInstanceCount"], modified["EndDateType"], "EndDate" in modified), (4, "unlimited", False))
        listed = ec2.describe_capacity_reservations(Filters=[{"Name": "tag:forge:stack", "Values": ["train"]}, {"Name": "state", "Values": ["active"]}])
        self.assertEqual([r["CapacityReservationId"] for r in listed["CapacityReservations"]], [created["CapacityReservationId"]])
        self.assertTrue(ec2.cancel_capacity_reservation(CapacityReservationId=created["CapacityReservationId"])["Return"])
        (cancelled,) = ec2.describe_capacity_reservations(CapacityReservationIds=[created["CapacityReservationId"]])["CapacityReservations"]
        self.assertEqual(cancelled["State"], "cancelled")
        self.assertEqual(self.error(ec2.cancel_capacity_reservation, CapacityReservationId=created["CapacityReservationId"])[0], "IncorrectState")
        self.assertEqual(self.error(ec2.cancel_capacity_reservation, CapacityReservationId="cr-0123456789abcdef0")[0], "InvalidCapacityReservationId.NotFound")
        # A limited reservation expires by the clock; pages of reservations.
        for _ in range(3):
            ec2.create_capacity_reservation(InstanceType="trn1.32xlarge", InstancePlatform="Linux/UNIX", AvailabilityZone="us-west-2b", InstanceCount=1,
                                            EndDateType="limited", EndDate=datetime.datetime(2026, 12, 2, tzinfo=UTC))
        self.control(f"/_forge/clock?account={account}", {"now": "2026-12-02T00:00:00Z"})
        states = [r["State"] for r in ec2.get_paginator("describe_capacity_reservations").paginate(PaginationConfig={"PageSize": 2})
                  .build_full_result()["CapacityReservations"]]
        self.assertEqual(states, ["cancelled", "expired", "expired", "expired"])
        self.no_violations(account)

    def test_extensions_priced_bought_once_and_listed(self):
        account = "710000000011"
        ec2 = self.account(account)
        offering = ec2.describe_capacity_block_offerings(InstanceType="p5.48xlarge", InstanceCount=2, CapacityDurationHours=48)["CapacityBlockOfferings"][0]
        cr = ec2.purchase_capacity_block(CapacityBlockOfferingId=offering["CapacityBlockOfferingId"], InstancePlatform="Linux/UNIX")["CapacityReservation"]
        cr_id = cr["CapacityReservationId"]
        extension_offerings = lambda hours: ec2.describe_capacity_block_extension_offerings(  # noqa: E731
            CapacityReservationId=cr_id, CapacityBlockExtensionDurationHours=hours)["CapacityBlockExtensionOfferings"]
        # One offering from the block's end, the same to identical requests, priced per instance-hour.
        (ext,) = extension_offerings(48)
        self.assertEqual(extension_offerings(48), [ext])
        self.assertRegex(ext["CapacityBlockExtensionOfferingId"], r"^cbe-0[0-9a-f]{16}$")
        expected = {"InstanceType": "p5.48xlarge", "InstanceCount": 2, "AvailabilityZone": cr["AvailabilityZone"], "AvailabilityZoneId": cr["AvailabilityZoneId"],
                    "StartDate": cr["StartDate"], "CapacityBlockExtensionStartDate": cr["EndDate"],
                    "CapacityBlockExtensionEndDate": cr["EndDate"] + datetime.timedelta(hours=48), "CapacityBlockExtensionDurationHours": 48,
                    "CurrencyCode": "USD", "Tenancy": "default"}
        self.assertEqual({k: ext[k] for k in expected}, expected)
        fee = Decimal(ext["UpfrontFee"])
        self.assertEqual(fee, fee.quantize(Decimal("0.01")))
        self.assertTrue(Decimal("31.464") * 96 * Decimal("0.9") <= fee < Decimal("31.464") * 96 * Decimal("1.1"), fee)
        # The rate of the extension's start day: twice the hours, twice the fee (to the cent).
        (longer,) = extension_offerings(96)
        self.assertNotEqual(longer["CapacityBlockExtensionOfferingId"], ext["CapacityBlockExtensionOfferingId"])
        self.assertLessEqual(abs(Decimal(longer["UpfrontFee"]) - 2 * fee), Decimal("0.01"))
        # A block of the same kind, zone, start and hours costs the same.
        same = []
        for e in (ext, longer):
            blocks = ec2.describe_capacity_block_offerings(InstanceType="p5.48xlarge", InstanceCount=2, CapacityDurationHours=e["CapacityBlockExtensionDurationHours"],
                                                           StartDateRange=e["CapacityBlockExtensionStartDate"],
                                                           EndDateRange=e["CapacityBlockExtensionEndDate"])["CapacityBlockOfferings"]
            same += [(b["UpfrontFee"], e["UpfrontFee"]) for b in blocks
                     if (b["AvailabilityZone"], b["StartDate"]) == (e["AvailabilityZone"], e["CapacityBlockExtensionStartDate"])]
        self.assertTrue(same)
        self.assertTrue(all(a == b for a, b in same), same)
        # Durations as for blocks (1-day steps to 14 days, 7-day steps to 182), the block at most 182 days long.
        self.assertEqual(len(extension_offerings(504)), 1)
        for hours in (0, 1, 23, 25, 360, 344, 4536):
            with self.subTest(hours):
                code, message = self.error(ec2.describe_capacity_block_extension_offerings, CapacityReservationId=cr_id, CapacityBlockExtensionDurationHours=hours)
                self.assertEqual(code, "InvalidParameterValue")
                self.assertIn(f"'{hours}' for parameter CapacityBlockExtensionDurationHours is invalid", message)
        self.assertEqual(self.error(ec2.describe_capacity_block_extension_offerings, CapacityReservationId=cr_id, CapacityBlockExtensionDurationHours=4368)[0],
                         "InvalidParameterValue")
        self.assertEqual(self.error(ec2.describe_capacity_block_extension_offerings, CapacityReservationId=cr_id, CapacityBlockExtensionDurationHours=24,
                                    DryRun=True)[0], "DryRunOperation")
        # Only the account's Capacity Blocks.
        self.assertEqual(self.error(ec2.describe_capacity_block_extension_offerings, CapacityReservationId="cr-0123456789abcdef0",
                                    CapacityBlockExtensionDurationHours=24)[0], "InvalidCapacityReservationId.NotFound")
        self.assertEqual(self.error(self.client("710000000012").describe_capacity_block_extension_offerings, CapacityReservationId=cr_id,
                                    CapacityBlockExtensionDurationHours=24)[0], "InvalidCapacityReservationId.NotFound")
        on_demand = ec2.create_capacity_reservation(InstanceType="p5.48xlarge", InstancePlatform="Linux/UNIX", AvailabilityZone="us-west-2a",
                                                    InstanceCount=1)["CapacityReservation"]["CapacityReservationId"]
        self.assertEqual(self.error(ec2.describe_capacity_block_extension_offerings, CapacityReservationId=on_demand, CapacityBlockExtensionDurationHours=24)[0],
                         "UnsupportedOperation")
        # Buying: only an offering served for that reservation; the end moves at once.
        ext_id = ext["CapacityBlockExtensionOfferingId"]
        self.assertEqual(self.error(ec2.purchase_capacity_block_extension, CapacityBlockExtensionOfferingId=ext_id, CapacityReservationId=cr_id, DryRun=True)[0],
                         "DryRunOperation")
        self.assertEqual(self.error(ec2.purchase_capacity_block_extension, CapacityBlockExtensionOfferingId="cb-0123456789abcdef0", CapacityReservationId=cr_id)[0],
                         "InvalidCapacityBlockOfferingIdMalformed")
        self.assertEqual(self.error(ec2.purchase_capacity_block_extension, CapacityBlockExtensionOfferingId="cbe-0123456789abcdef0", CapacityReservationId=cr_id)[0],
                         "InvalidCapacityBlockOfferingIdNotFound")
        self.assertEqual(self.error(ec2.purchase_capacity_block_extension, CapacityBlockExtensionOfferingId=ext_id, CapacityReservationId=on_demand)[0],
                         "UnsupportedOperation")
        (bought,) = ec2.purchase_capacity_block_extension(CapacityBlockExtensionOfferingId=ext_id, CapacityReservationId=cr_id)["CapacityBlockExtensions"]
        expected = {"CapacityReservationId": cr_id, "CapacityBlockExtensionOfferingId": ext_id, "CapacityBlockExtensionStatus": "payment-succeeded",
                    "CapacityBlockExtensionDurationHours": 48, "CapacityBlockExtensionStartDate": cr["EndDate"],
                    "CapacityBlockExtensionEndDate": ext["CapacityBlockExtensionEndDate"], "UpfrontFee": ext["UpfrontFee"], "CurrencyCode": "USD",
                    "InstanceType": "p5.48xlarge", "InstanceCount": 2, "AvailabilityZone": cr["AvailabilityZone"]}
        self.assertEqual({k: bought[k] for k in expected}, expected)
        self.assertEqual(bought["CapacityBlockExtensionPurchaseDate"].astimezone(UTC), datetime.datetime(2026, 12, 1, tzinfo=UTC))
        (extended,) = ec2.describe_capacity_reservations(CapacityReservationIds=[cr_id])["CapacityReservations"]
        self.assertEqual((extended["StartDate"], extended["EndDate"], extended["State"]), (cr["StartDate"], ext["CapacityBlockExtensionEndDate"], "scheduled"))
        # Once only; an offering served before the end moved is no longer valid; the next starts at the new end.
        code, message = self.error(ec2.purchase_capacity_block_extension, CapacityBlockExtensionOfferingId=ext_id, CapacityReservationId=cr_id)
        self.assertEqual((code, message), ("InvalidCapacityBlockOfferingIdExpired", f"The Capacity Block extension offering ID '{ext_id}' is no longer available."))
        self.assertEqual(self.error(ec2.purchase_capacity_block_extension, CapacityBlockExtensionOfferingId=longer["CapacityBlockExtensionOfferingId"],
                                    CapacityReservationId=cr_id)[0], "InvalidCapacityBlockOfferingIdExpired")
        (following,) = extension_offerings(24)
        self.assertEqual(following["CapacityBlockExtensionStartDate"], ext["CapacityBlockExtensionEndDate"])
        self.assertNotIn(following["CapacityBlockExtensionOfferingId"], (ext_id, longer["CapacityBlockExtensionOfferingId"]))
        # The history lists it, by reservation and by filter, in pages.
        history = ec2.describe_capacity_block_extension_history()["CapacityBlockExtensions"]
        self.assertEqual(history, [bought])
        self.assertEqual(ec2.describe_capacity_block_extension_history(CapacityReservationIds=[cr_id])["CapacityBlockExtensions"], [bought])
        self.assertEqual(ec2.describe_capacity_block_extension_history(Filters=[{"Name": "capacity-block-extension-status", "Values": ["payment-succeeded"]},
                                                                               {"Name": "instance-type", "Values": ["p5.*"]}])["CapacityBlockExtensions"], [bought])
        self.assertEqual(ec2.describe_capacity_block_extension_history(Filters=[{"Name": "capacity-reservation-id", "Values": [on_demand]}])["CapacityBlockExtensions"], [])
        self.assertEqual(self.error(ec2.describe_capacity_block_extension_history, Filters=[{"Name": "state", "Values": ["active"]}])[0], "InvalidParameterValue")
        self.assertEqual(self.error(ec2.describe_capacity_block_extension_history, CapacityReservationIds=["cr-0123456789abcdef0"])[0],
                         "InvalidCapacityReservationId.NotFound")
        self.assertEqual(self.client("710000000012").describe_capacity_block_extension_history()["CapacityBlockExtensions"], [])
        # What the account paid: the block and the extension.
        paid = self.control(f"/_forge/capacity?account={account}")
        self.assertEqual([(e["CapacityReservationId"], e["CapacityBlockExtensionOfferingId"], e["UpfrontFee"]) for e in paid["extensions"]],
                         [(cr_id, ext_id, ext["UpfrontFee"])])
        self.assertEqual(paid["extensions"][0]["CapacityBlockExtensionEndDate"],
                         ext["CapacityBlockExtensionEndDate"].astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
        self.assertEqual(paid["purchases"][0]["EndDate"], paid["extensions"][0]["CapacityBlockExtensionEndDate"])
        self.assertEqual(Decimal(paid["total_fee"]), Decimal(offering["UpfrontFee"]) + fee)
        # Less than an hour before its end, a block is offered no extension; once expired, it is refused one.
        end = ext["CapacityBlockExtensionEndDate"].astimezone(UTC)
        self.control(f"/_forge/clock?account={account}", {"now": (end - datetime.timedelta(minutes=30)).isoformat()})
        self.assertEqual(extension_offerings(24), [])
        self.control(f"/_forge/clock?account={account}", {"now": end.isoformat()})
        code, message = self.error(ec2.describe_capacity_block_extension_offerings, CapacityReservationId=cr_id, CapacityBlockExtensionDurationHours=24)
        self.assertEqual(code, "IncorrectState")
        self.assertIn("'expired' state", message)
        self.assertEqual(self.error(ec2.purchase_capacity_block_extension, CapacityBlockExtensionOfferingId=following["CapacityBlockExtensionOfferingId"],
                                    CapacityReservationId=cr_id)[0], "InvalidCapacityBlockOfferingIdExpired")
        # Each action counted by its name.
        calls = self.control(f"/_forge/calls?account={account}")
        for action in ("DescribeCapacityBlockExtensionOfferings", "PurchaseCapacityBlockExtension", "DescribeCapacityBlockExtensionHistory"):
            self.assertGreater(calls.get(f"ec2:{action}", 0), 0, action)
        self.no_violations(account)

    def test_an_ultraserver_block_is_extended_with_its_capacity_block(self):
        account = "710000000013"
        ec2 = self.account(account)
        offering = ec2.describe_capacity_block_offerings(UltraserverType="u-trn2x64", UltraserverCount=1, CapacityDurationHours=24)["CapacityBlockOfferings"][0]
        bought = ec2.purchase_capacity_block(CapacityBlockOfferingId=offering["CapacityBlockOfferingId"], InstancePlatform="Linux/UNIX")
        cr, (block,) = bought["CapacityReservation"], bought["CapacityBlocks"]
        (ext,) = ec2.describe_capacity_block_extension_offerings(CapacityReservationId=cr["CapacityReservationId"],
                                                                 CapacityBlockExtensionDurationHours=24)["CapacityBlockExtensionOfferings"]
        self.assertEqual((ext["InstanceType"], ext["InstanceCount"]), ("trn2u.48xlarge", 4))
        self.assertTrue(Decimal("22.00") * 96 * Decimal("0.9") <= Decimal(ext["UpfrontFee"]) < Decimal("22.00") * 96 * Decimal("1.1"))
        ec2.purchase_capacity_block_extension(CapacityBlockExtensionOfferingId=ext["CapacityBlockExtensionOfferingId"],
                                              CapacityReservationId=cr["CapacityReservationId"])
        (described,) = ec2.describe_capacity_blocks(CapacityBlockIds=[block["CapacityBlockId"]])["CapacityBlocks"]
        self.assertEqual(described["EndDate"], ext["CapacityBlockExtensionEndDate"])
        self.no_violations(account)
