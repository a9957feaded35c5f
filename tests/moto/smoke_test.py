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

    def wait_for(self, read, want, seconds=3.0):
        """Poll `read` until it returns `want` (phases last 0.4 s here)."""
        deadline = time.monotonic() + seconds
        while (value := read()) != want and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertEqual(value, want)

    def assertCode(self, code, call, *args, **kwargs):
        with self.assertRaises(ClientError) as err:
            call(*args, **kwargs)
        self.assertEqual(err.exception.response["Error"]["Code"], code)

    def subnets(self, account, count):
        ec2 = self.client("ec2", account)
        vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
        return ec2, [ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.0.{i}.0/24")["Subnet"]["SubnetId"] for i in range(count)]

    def test_eks_cluster_and_node_group_phases(self):
        account = "121212121212"
        eks = self.client("eks", account)
        ec2, (subnet_1, subnet_2) = self.subnets(account, 2)
        role = f"arn:aws:iam::{account}:role/eks"
        self.assertCode("InvalidParameterException", eks.create_cluster, name="c", roleArn=role, resourcesVpcConfig={"subnetIds": ["subnet-0"]})
        created = eks.create_cluster(name="c", version="1.30", roleArn=role, resourcesVpcConfig={"subnetIds": [subnet_1, subnet_2]})["cluster"]
        self.assertEqual((created["status"], created["accessConfig"]["authenticationMode"]), ("CREATING", "CONFIG_MAP"))
        cluster_sg = created["resourcesVpcConfig"]["clusterSecurityGroupId"]
        self.assertEqual(len(ec2.describe_security_groups(GroupIds=[cluster_sg])["SecurityGroups"]), 1)
        cluster = lambda: eks.describe_cluster(name="c")["cluster"]  # noqa: E731
        nodegroup = lambda: eks.describe_nodegroup(clusterName="c", nodegroupName="ng")["nodegroup"]  # noqa: E731
        new_nodegroup = dict(clusterName="c", nodegroupName="ng", nodeRole=role, subnets=[subnet_1], scalingConfig={"minSize": 1, "maxSize": 3, "desiredSize": 1})
        self.assertCode("InvalidRequestException", eks.create_nodegroup, **new_nodegroup)
        self.wait_for(lambda: cluster()["status"], "ACTIVE")

        self.assertEqual(eks.create_nodegroup(**new_nodegroup)["nodegroup"]["status"], "CREATING")
        version = eks.update_cluster_version(name="c", version="1.31")["update"]
        self.assertEqual((version["type"], version["status"], cluster()["status"]), ("VersionUpdate", "InProgress", "UPDATING"))
        self.assertCode("InvalidRequestException", eks.update_cluster_version, name="c", version="1.32")
        self.wait_for(lambda: eks.describe_update(name="c", updateId=version["id"])["update"]["status"], "Successful")
        self.assertEqual((cluster()["status"], cluster()["version"]), ("ACTIVE", "1.31"))
        self.wait_for(lambda: nodegroup()["status"], "ACTIVE")

        scaling = eks.update_nodegroup_config(clusterName="c", nodegroupName="ng", scalingConfig={"desiredSize": 3})["update"]
        self.assertEqual((scaling["status"], nodegroup()["status"]), ("InProgress", "UPDATING"))
        self.assertCode("ResourceNotFoundException", eks.describe_update, name="c", updateId=scaling["id"])  # without nodegroupName
        self.wait_for(lambda: eks.describe_update(name="c", updateId=scaling["id"], nodegroupName="ng")["update"]["status"], "Successful")
        self.assertEqual((nodegroup()["status"], nodegroup()["scalingConfig"]["desiredSize"]), ("ACTIVE", 3))

        self.assertEqual(eks.delete_nodegroup(clusterName="c", nodegroupName="ng")["nodegroup"]["status"], "DELETING")
        self.assertEqual(nodegroup()["status"], "DELETING")
        self.assertCode("ResourceInUseException", eks.delete_cluster, name="c")
        self.wait_for(lambda: eks.list_nodegroups(clusterName="c")["nodegroups"], [])
        self.assertCode("ResourceNotFoundException", eks.describe_nodegroup, clusterName="c", nodegroupName="ng")

        self.assertEqual(eks.delete_cluster(name="c")["cluster"]["status"], "DELETING")
        self.assertEqual((cluster()["status"], eks.list_clusters()["clusters"]), ("DELETING", ["c"]))
        self.assertCode("ResourceInUseException", eks.create_cluster, name="c", roleArn=role, resourcesVpcConfig={"subnetIds": [subnet_1]})
        self.wait_for(lambda: eks.list_clusters()["clusters"], [])
        self.assertCode("ResourceNotFoundException", eks.describe_cluster, name="c")
        self.assertCode("InvalidGroup.NotFound", ec2.describe_security_groups, GroupIds=[cluster_sg])

    def test_eks_addons(self):
        account = "131313131313"
        eks = self.client("eks", account)
        catalogue = eks.describe_addon_versions(addonName="vpc-cni", kubernetesVersion="1.31")["addons"]
        defaults = [v["addonVersion"] for a in catalogue for v in a["addonVersions"] if v["compatibilities"][0]["defaultVersion"]]
        self.assertEqual(([a["addonName"] for a in catalogue], len(defaults)), (["vpc-cni"], 1))
        role = f"arn:aws:iam::{account}:role/eks"
        _, (subnet_1,) = self.subnets(account, 1)
        eks.create_cluster(name="c", version="1.31", roleArn=role, resourcesVpcConfig={"subnetIds": [subnet_1]})
        self.assertCode("InvalidRequestException", eks.create_addon, clusterName="c", addonName="vpc-cni")
        self.wait_for(lambda: eks.describe_cluster(name="c")["cluster"]["status"], "ACTIVE")

        self.assertCode("InvalidParameterException", eks.create_addon, clusterName="c", addonName="vpc-cni", addonVersion="v0.0.1")
        addon = eks.create_addon(clusterName="c", addonName="vpc-cni", tags={"forge:stack": "s"})["addon"]
        self.assertEqual((addon["status"], addon["addonVersion"]), ("CREATING", defaults[0]))
        self.assertEqual(eks.list_tags_for_resource(resourceArn=addon["addonArn"])["tags"], {"forge:stack": "s"})
        self.assertCode("ResourceInUseException", eks.create_addon, clusterName="c", addonName="vpc-cni")
        endpoint = eks.update_cluster_config(name="c", resourcesVpcConfig={"endpointPrivateAccess": True})["update"]
        self.assertEqual(endpoint["type"], "EndpointAccessUpdate")
        vpc = eks.describe_cluster(name="c")["cluster"]["resourcesVpcConfig"]
        self.assertEqual((vpc["subnetIds"], vpc["endpointPrivateAccess"], vpc["endpointPublicAccess"]), ([subnet_1], True, True))
        described = lambda: eks.describe_addon(clusterName="c", addonName="vpc-cni")["addon"]  # noqa: E731
        self.wait_for(lambda: described()["status"], "ACTIVE")
        self.assertEqual(eks.list_addons(clusterName="c")["addons"], ["vpc-cni"])

        update = eks.update_addon(clusterName="c", addonName="vpc-cni", addonVersion="v1.18.6-eksbuild.1", resolveConflicts="OVERWRITE")["update"]
        self.assertEqual((update["type"], update["status"], described()["status"]), ("AddonUpdate", "InProgress", "UPDATING"))
        self.wait_for(lambda: eks.describe_update(name="c", updateId=update["id"], addonName="vpc-cni")["update"]["status"], "Successful")
        self.assertEqual((described()["status"], described()["addonVersion"]), ("ACTIVE", "v1.18.6-eksbuild.1"))

        self.assertEqual(eks.delete_addon(clusterName="c", addonName="vpc-cni")["addon"]["status"], "DELETING")
        self.assertEqual(eks.list_addons(clusterName="c")["addons"], ["vpc-cni"])
        self.wait_for(lambda: eks.list_addons(clusterName="c")["addons"], [])
        self.assertCode("ResourceNotFoundException", eks.describe_addon, clusterName="c", addonName="vpc-cni")


if __name__ == "__main__":
    unittest.main()
