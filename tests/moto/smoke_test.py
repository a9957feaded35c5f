"""Smoke test of the moto launcher: every call it patches still behaves, so a moto upgrade
cannot silently break forge's AWS tests. Runs with the venv's boto3: `python -m unittest`."""

import json
import os
import subprocess
import sys
import time
import unittest
import urllib.request

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

HERE = os.path.dirname(os.path.abspath(__file__))


class Launcher(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.proc = subprocess.Popen([sys.executable, os.path.join(HERE, "launcher.py"), "--port", "0", "--phase-seconds", "0.4"], stdout=subprocess.PIPE, text=True)
        line = cls.proc.stdout.readline()
        assert line.startswith("port="), line
        cls.url = f"http://127.0.0.1:{line.strip().split('=')[1]}"

    @classmethod
    def tearDownClass(cls):
        cls.proc.terminate()
        cls.proc.wait()

    def client(self, service, account="111111111111"):
        return boto3.client(service, endpoint_url=self.url, region_name="us-west-2", aws_access_key_id=account, aws_secret_access_key="x", config=Config(retries={"total_max_attempts": 1, "mode": "standard"}))

    def control(self, path, payload=None):
        data = json.dumps(payload).encode() if payload is not None else None
        with urllib.request.urlopen(urllib.request.Request(self.url + path, data=data, method="POST" if data else "GET")) as r:
            return json.loads(r.read())

    def test_placement_groups(self):
        ec2 = self.client("ec2", "222222222222")
        tags = [{"ResourceType": "placement-group", "Tags": [{"Key": "forge:stack", "Value": "s"}]}]
        created = ec2.create_placement_group(GroupName="efa", Strategy="cluster", TagSpecifications=tags)["PlacementGroup"]
        self.assertEqual(created["Strategy"], "cluster")
        found = ec2.describe_placement_groups(Filters=[{"Name": "tag:forge:stack", "Values": ["s"]}])["PlacementGroups"]
        self.assertEqual([g["GroupName"] for g in found], ["efa"])
        self.assertEqual(found[0]["Tags"], [{"Key": "forge:stack", "Value": "s"}])
        with self.assertRaises(ClientError) as dup:
            ec2.create_placement_group(GroupName="efa", Strategy="cluster")
        self.assertEqual(dup.exception.response["Error"]["Code"], "InvalidPlacementGroup.Duplicate")
        ec2.delete_placement_group(GroupName="efa")
        with self.assertRaises(ClientError) as gone:
            ec2.describe_placement_groups(GroupNames=["efa"])
        self.assertEqual(gone.exception.response["Error"]["Code"], "InvalidPlacementGroup.Unknown")

    def test_nat_gateway_phases(self):
        ec2 = self.client("ec2", "333333333333")
        vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
        subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.0.0/24")["Subnet"]["SubnetId"]
        eip = ec2.allocate_address(Domain="vpc")["AllocationId"]
        nat = ec2.create_nat_gateway(SubnetId=subnet, AllocationId=eip)["NatGateway"]["NatGatewayId"]
        state = lambda: ec2.describe_nat_gateways(NatGatewayIds=[nat])["NatGateways"][0]["State"]  # noqa: E731
        self.assertEqual(state(), "pending")
        time.sleep(0.6)
        self.assertEqual(state(), "available")
        ec2.delete_nat_gateway(NatGatewayId=nat)
        self.assertEqual(state(), "deleting")
        time.sleep(0.6)
        self.assertEqual(state(), "deleted")

    def test_managed_policies_exist(self):
        iam = self.client("iam", "444444444444")
        for name in ("AmazonEKSClusterPolicy", "AmazonEKSWorkerNodePolicy", "AmazonEKS_CNI_Policy", "AmazonEC2ContainerRegistryReadOnly"):
            self.assertEqual(iam.get_policy(PolicyArn=f"arn:aws:iam::aws:policy/{name}")["Policy"]["PolicyName"], name)

    def test_accounts_are_isolated_and_calls_counted(self):
        a, b = self.client("ec2", "555555555555"), self.client("ec2", "666666666666")
        vpc = a.create_vpc(CidrBlock="10.1.0.0/16", TagSpecifications=[{"ResourceType": "vpc", "Tags": [{"Key": "k", "Value": "v"}]}])["Vpc"]["VpcId"]
        self.assertNotIn(vpc, [v["VpcId"] for v in b.describe_vpcs()["Vpcs"]])
        calls = self.control("/_forge/calls?account=555555555555")
        self.assertEqual(calls, {"ec2:CreateVpc": 1})
        self.assertEqual(self.control("/_forge/calls?account=666666666666"), {"ec2:DescribeVpcs": 1})

    def test_faults_in_each_protocol(self):
        account = "777777777777"
        self.control(f"/_forge/faults?account={account}", [{"account": account, "match": "*", "rate": 1.0}])
        expected = [
            ("ec2", lambda c: c.describe_vpcs(), "RequestLimitExceeded", 503),
            ("iam", lambda c: c.list_roles(), "Throttling", 400),
            ("eks", lambda c: c.list_clusters(), "ThrottlingException", 429),
            ("fsx", lambda c: c.describe_file_systems(), "ThrottlingException", 400),
        ]
        for service, call, code, status in expected:
            with self.assertRaises(ClientError) as err:
                call(self.client(service, account))
            self.assertEqual(err.exception.response["Error"]["Code"], code, service)
            self.assertEqual(err.exception.response["ResponseMetadata"]["HTTPStatusCode"], status, service)
        self.control(f"/_forge/faults?account={account}", [])
        self.client("ec2", account).describe_vpcs()

    def test_a_fault_after_the_work_keeps_the_work(self):
        account = "888888888888"
        ec2 = self.client("ec2", account)
        self.control(f"/_forge/faults?account={account}", [{"account": account, "match": "ec2:CreateVpc", "rate": 1.0, "when": "after"}])
        with self.assertRaises(ClientError) as err:
            ec2.create_vpc(CidrBlock="10.3.0.0/16")
        self.assertEqual(err.exception.response["ResponseMetadata"]["HTTPStatusCode"], 500)
        self.control(f"/_forge/faults?account={account}", [])
        self.assertEqual([v["CidrBlock"] for v in ec2.describe_vpcs()["Vpcs"] if v["CidrBlock"] == "10.3.0.0/16"], ["10.3.0.0/16"])


if __name__ == "__main__":
    unittest.main()
