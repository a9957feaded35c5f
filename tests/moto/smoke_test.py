"""Smoke test of the moto launcher: every call it patches still behaves, so a moto upgrade
cannot silently break forge's AWS tests. Runs with the venv's boto3: `python -m unittest`."""

import base64
import json
import ssl
import time
import unittest
import urllib.request

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

from .launched import Launched



class Launcher(Launched):
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

    def test_placement_groups_are_tagged_by_id(self):
        ec2 = self.client("ec2", "222222222223")
        spec = [{"ResourceType": "placement-group", "Tags": [{"Key": "forge:stack", "Value": "s"}, {"Key": "team", "Value": "a"}, {"Key": "old", "Value": "x"}]}]
        group_id = ec2.create_placement_group(GroupName="efa", Strategy="cluster", TagSpecifications=spec)["PlacementGroup"]["GroupId"]
        other_id = ec2.create_placement_group(GroupName="other", Strategy="spread")["PlacementGroup"]["GroupId"]
        vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
        # As forge's update does: the dropped keys, then the new and changed ones, by the group's id.
        ec2.delete_tags(Resources=[group_id], Tags=[{"Key": "old"}])
        ec2.delete_tags(Resources=[group_id], Tags=[{"Key": "team", "Value": "not-a"}])  # another value: kept
        ec2.create_tags(Resources=[group_id, vpc], Tags=[{"Key": "team", "Value": "b"}, {"Key": "new", "Value": "1"}])
        expected = {"forge:stack": "s", "team": "b", "new": "1"}
        described = lambda **kw: {t["Key"]: t["Value"] for t in ec2.describe_placement_groups(**kw)["PlacementGroups"][0]["Tags"]}  # noqa: E731
        self.assertEqual(described(GroupNames=["efa"]), expected)
        self.assertEqual(described(GroupIds=[group_id]), expected)
        self.assertEqual(described(Filters=[{"Name": "tag:forge:stack", "Values": ["s"]}]), expected)
        self.assertEqual(described(Filters=[{"Name": "group-name", "Values": ["efa"]}]), expected)
        self.assertEqual([g["GroupName"] for g in ec2.describe_placement_groups(Filters=[{"Name": "tag:team", "Values": ["a"]}])["PlacementGroups"]], [])
        self.assertEqual({t["Key"]: t["Value"] for t in ec2.describe_tags(Filters=[{"Name": "resource-id", "Values": [vpc]}])["Tags"]}, {"team": "b", "new": "1"})

        def listed(*filters):
            return sorted((t["ResourceId"], t["ResourceType"], t["Key"], t["Value"]) for t in ec2.describe_tags(Filters=list(filters))["Tags"])

        by_id = listed({"Name": "resource-id", "Values": [group_id]})
        self.assertEqual(by_id, sorted((group_id, "placement-group", k, v) for k, v in expected.items()))
        self.assertEqual(listed({"Name": "resource-type", "Values": ["placement-group"]}), by_id)
        self.assertEqual(listed({"Name": "resource-type", "Values": ["placement-group"]}, {"Name": "key", "Values": ["team"]}), [(group_id, "placement-group", "team", "b")])
        self.assertNotIn(group_id, {r for r, *_ in listed({"Name": "resource-type", "Values": ["vpc"]})})
        # Tags on an untagged group, and all of them off again (DeleteTags without keys).
        ec2.create_tags(Resources=[other_id], Tags=[{"Key": "k", "Value": ""}])
        self.assertEqual(listed({"Name": "resource-id", "Values": [other_id]}), [(other_id, "placement-group", "k", "")])
        ec2.delete_tags(Resources=[other_id])
        self.assertEqual(ec2.describe_placement_groups(GroupIds=[other_id])["PlacementGroups"][0].get("Tags", []), [])
        # An id no group has, or a group that is gone, is refused and changes nothing.
        unknown = "pg-0123456789abcdef0"
        for call in (ec2.create_tags, ec2.delete_tags):
            with self.assertRaises(ClientError) as refused:
                call(Resources=[unknown], Tags=[{"Key": "team", "Value": "c"}])
            self.assertEqual(refused.exception.response["Error"]["Code"], "InvalidPlacementGroup.Unknown")
        with self.assertRaises(ClientError) as mixed:
            ec2.create_tags(Resources=[group_id, unknown], Tags=[{"Key": "team", "Value": "c"}])
        self.assertEqual(mixed.exception.response["Error"]["Code"], "InvalidPlacementGroup.Unknown")
        self.assertEqual(described(GroupNames=["efa"]), expected)
        with self.assertRaises(ClientError) as elsewhere:  # another account's group is unknown here
            self.client("ec2", "222222222224").create_tags(Resources=[group_id], Tags=[{"Key": "team", "Value": "c"}])
        self.assertEqual(elsewhere.exception.response["Error"]["Code"], "InvalidPlacementGroup.Unknown")
        ec2.delete_placement_group(GroupName="efa")
        with self.assertRaises(ClientError) as gone:
            ec2.create_tags(Resources=[group_id], Tags=[{"Key": "team", "Value": "c"}])
        self.assertEqual(gone.exception.response["Error"]["Code"], "InvalidPlacementGroup.Unknown")
        self.assertEqual(listed({"Name": "resource-id", "Values": [group_id]}), [])
        self.assertEqual(self.control("/_forge/violations?account=222222222223"), [])  # requests and answers as botocore's model has them

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

    def test_instance_profile_tags_are_listed(self):
        iam = self.client("iam", "444444444445")
        iam.create_instance_profile(InstanceProfileName="p", Tags=[{"Key": "b", "Value": "2"}, {"Key": "a", "Value": "1"}])
        self.assertEqual(iam.list_instance_profile_tags(InstanceProfileName="p")["Tags"], [{"Key": "a", "Value": "1"}, {"Key": "b", "Value": "2"}])
        page = iam.list_instance_profile_tags(InstanceProfileName="p", MaxItems=1)
        self.assertEqual((page["Tags"], page["IsTruncated"]), ([{"Key": "a", "Value": "1"}], True))
        self.assertEqual(iam.list_instance_profile_tags(InstanceProfileName="p", Marker=page["Marker"])["Tags"], [{"Key": "b", "Value": "2"}])
        with self.assertRaises(ClientError) as missing:
            iam.list_instance_profile_tags(InstanceProfileName="nope")
        self.assertEqual((missing.exception.response["Error"]["Code"], missing.exception.response["ResponseMetadata"]["HTTPStatusCode"]), ("NoSuchEntity", 404))

    def test_oidc_provider_client_ids_are_added_and_removed_idempotently(self):
        iam = self.client("iam", "444444444446")
        arn = iam.create_open_id_connect_provider(Url="https://oidc.example.com/id/A", ThumbprintList=["9e99a48a9960b14926bb7f3b02e22da2b0ab7280"],
                                                  ClientIDList=["sts.amazonaws.com"])["OpenIDConnectProviderArn"]
        for _ in range(2):
            iam.add_client_id_to_open_id_connect_provider(OpenIDConnectProviderArn=arn, ClientID="kubernetes")
            iam.remove_client_id_from_open_id_connect_provider(OpenIDConnectProviderArn=arn, ClientID="sts.amazonaws.com")
        self.assertEqual(iam.get_open_id_connect_provider(OpenIDConnectProviderArn=arn)["ClientIDList"], ["kubernetes"])
        self.assertCode("NoSuchEntity", iam.add_client_id_to_open_id_connect_provider, OpenIDConnectProviderArn=arn + "-gone", ClientID="x")
        for i in range(99):
            iam.add_client_id_to_open_id_connect_provider(OpenIDConnectProviderArn=arn, ClientID=f"client-{i}")
        self.assertCode("LimitExceeded", iam.add_client_id_to_open_id_connect_provider, OpenIDConnectProviderArn=arn, ClientID="one-too-many")

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
            ("efs", lambda c: c.describe_file_systems(), "ThrottlingException", 429),
        ]
        for service, call, code, status in expected:
            with self.assertRaises(ClientError) as err:
                call(self.client(service, account))
            self.assertEqual(err.exception.response["Error"]["Code"], code, service)
            self.assertEqual(err.exception.response["ResponseMetadata"]["HTTPStatusCode"], status, service)
        self.control(f"/_forge/faults?account={account}", [])
        self.client("ec2", account).describe_vpcs()

    def test_token_buckets_throttle_per_account_and_class_or_action_and_refill(self):
        account = "121212121212"
        ec2, other = self.client("ec2", account), self.client("ec2", "131313131313")
        # EC2's non-mutating class, scaled: a burst of 3 and 5 tokens a second.
        self.control("/_forge/buckets", [{"account": account, "match": "ec2:Describe*", "class": "ec2-describe", "burst": 3, "refill": 5}])
        try:
            answers = []
            for _ in range(5):
                try:
                    ec2.describe_vpcs()
                    answers.append("ok")
                except ClientError as e:
                    answers.append(e.response["Error"]["Code"])
            self.assertEqual(answers[:3], ["ok"] * 3)
            self.assertIn("RequestLimitExceeded", answers[3:])
            # Another action of the class shares the bucket; another account has its own.
            with self.assertRaises(ClientError):
                ec2.describe_subnets()
            other.describe_vpcs()
            time.sleep(0.5)  # 2.5 tokens back
            ec2.describe_vpcs()
            ec2.describe_subnets()
            counted = self.control(f"/_forge/calls?account={account}")
            self.assertGreaterEqual(counted.get("throttled:ec2:DescribeVpcs", 0), 1)
            self.assertEqual(counted.get("throttled:ec2:DescribeSubnets"), 1)
            # Per action, as EC2 throttles: each action has a bucket of the class's size.
            self.control("/_forge/buckets", [{"account": account, "match": "ec2:Describe*", "class": "ec2-describe", "burst": 2,
                                             "refill": 0.001, "per_action": True}])
            answers = []
            for call in (ec2.describe_vpcs, ec2.describe_vpcs, ec2.describe_subnets, ec2.describe_subnets, ec2.describe_vpcs):
                try:
                    call()
                    answers.append("ok")
                except ClientError as e:
                    answers.append(e.response["Error"]["Code"])
            self.assertEqual(answers, ["ok", "ok", "ok", "ok", "RequestLimitExceeded"])
        finally:
            self.control("/_forge/buckets", [])

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

    def test_nat_gateways_filter_by_tag(self):
        ec2 = self.client("ec2", "343434343434")
        vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
        subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.0.0/24")["Subnet"]["SubnetId"]
        tagged = [{"ResourceType": "natgateway", "Tags": [{"Key": "forge:stack", "Value": "a"}]}]
        mine = ec2.create_nat_gateway(SubnetId=subnet, AllocationId=ec2.allocate_address(Domain="vpc")["AllocationId"], TagSpecifications=tagged)
        ec2.create_nat_gateway(SubnetId=subnet, AllocationId=ec2.allocate_address(Domain="vpc")["AllocationId"])
        found = lambda name, values: [n["NatGatewayId"] for n in ec2.describe_nat_gateways(Filter=[{"Name": name, "Values": values}])["NatGateways"]]  # noqa: E731
        self.assertEqual(found("tag:forge:stack", ["a"]), [mine["NatGateway"]["NatGatewayId"]])
        self.assertEqual(found("tag:forge:stack", ["b"]), [])
        self.assertEqual(found("tag-key", ["forge:stack"]), [mine["NatGateway"]["NatGatewayId"]])

    def test_ignored_filters_widen_an_ec2_answer(self):
        ec2 = self.client("ec2", "353535353535")
        vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
        subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.0.0/24")["Subnet"]["SubnetId"]
        for _ in range(2):
            ec2.create_nat_gateway(SubnetId=subnet, AllocationId=ec2.allocate_address(Domain="vpc")["AllocationId"])
        filtered = lambda: ec2.describe_nat_gateways(Filter=[{"Name": "tag:forge:stack", "Values": ["x"]}])["NatGateways"]  # noqa: E731
        self.assertEqual(filtered(), [])
        self.control("/_forge/ignore_filters", [{"match": "ec2:DescribeNatGateways", "account": "353535353535"}])
        try:
            self.assertEqual(len(filtered()), 2)
            self.assertEqual(len(ec2.describe_subnets(Filters=[{"Name": "tag:forge:stack", "Values": ["x"]}])["Subnets"]), 0)
        finally:
            self.control("/_forge/ignore_filters", [])

    def test_eks_cluster_and_node_group_phases(self):
        account = "121212121212"
        eks = self.client("eks", account)
        ec2, (subnet_1, subnet_2) = self.subnets(account, 2)
        role = f"arn:aws:iam::{account}:role/eks"
        self.assertCode("InvalidParameterException", eks.create_cluster, name="c", roleArn=role, resourcesVpcConfig={"subnetIds": ["subnet-0"]})
        _, other_subnets = self.subnets("565656565656", 2)
        other = self.client("eks", "565656565656").create_cluster(name="other", version="1.30", roleArn=role, resourcesVpcConfig={"subnetIds": other_subnets})["cluster"]
        created = eks.create_cluster(name="c", version="1.30", roleArn=role, resourcesVpcConfig={"subnetIds": [subnet_1, subnet_2]})["cluster"]
        self.assertNotEqual(other["identity"]["oidc"]["issuer"], created["identity"]["oidc"]["issuer"], "one OIDC issuer per cluster")
        self.assertEqual((created["status"], created["accessConfig"]["authenticationMode"]), ("CREATING", "CONFIG_MAP"))
        cluster_sg = created["resourcesVpcConfig"]["clusterSecurityGroupId"]
        self.assertEqual(len(ec2.describe_security_groups(GroupIds=[cluster_sg])["SecurityGroups"]), 1)
        cluster = lambda: eks.describe_cluster(name="c")["cluster"]  # noqa: E731
        nodegroup = lambda: eks.describe_nodegroup(clusterName="c", nodegroupName="ng")["nodegroup"]  # noqa: E731
        new_nodegroup = dict(clusterName="c", nodegroupName="ng", nodeRole=role, subnets=[subnet_1], scalingConfig={"minSize": 1, "maxSize": 3, "desiredSize": 1},
                             instanceTypes=["p5.48xlarge"], taints=[{"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}])
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
        # The cluster's API server, at the endpoint and with the CA DescribeCluster reports, has
        # the group's instances as Nodes.
        nodes = self.nodes(cluster())
        self.assertEqual(len(nodes), 3)
        labels = nodes[0]["metadata"]["labels"]
        self.assertEqual((labels["eks.amazonaws.com/nodegroup"], labels["node.kubernetes.io/instance-type"], labels["forge.emulator/efa"]),
                         ("ng", "p5.48xlarge", "0"))  # no launch template: no EFA interfaces
        self.assertEqual(nodes[0]["spec"]["taints"], [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}])

        self.assertEqual(eks.delete_nodegroup(clusterName="c", nodegroupName="ng")["nodegroup"]["status"], "DELETING")
        self.assertEqual(nodegroup()["status"], "DELETING")
        self.assertCode("ResourceInUseException", eks.delete_cluster, name="c")
        self.wait_for(lambda: eks.list_nodegroups(clusterName="c")["nodegroups"], [])
        self.assertEqual(self.nodes(cluster()), [], "the group's Nodes go with it")
        self.assertCode("ResourceNotFoundException", eks.describe_nodegroup, clusterName="c", nodegroupName="ng")

        self.assertEqual(eks.delete_cluster(name="c")["cluster"]["status"], "DELETING")
        self.assertEqual((cluster()["status"], eks.list_clusters()["clusters"]), ("DELETING", ["c"]))
        self.assertCode("ResourceInUseException", eks.create_cluster, name="c", roleArn=role, resourcesVpcConfig={"subnetIds": [subnet_1]})
        self.wait_for(lambda: eks.list_clusters()["clusters"], [])
        self.assertCode("ResourceNotFoundException", eks.describe_cluster, name="c")
        self.assertCode("InvalidGroup.NotFound", ec2.describe_security_groups, GroupIds=[cluster_sg])

    @staticmethod
    def nodes(cluster):
        """The Nodes of an EKS cluster, read over TLS trusting only the cluster's CA."""
        context = ssl.create_default_context(cadata=base64.b64decode(cluster["certificateAuthority"]["data"]).decode())
        request = urllib.request.Request(cluster["endpoint"] + "/api/v1/nodes", headers={"Authorization": "Bearer k8s-aws-v1.x"})
        with urllib.request.urlopen(request, context=context) as answer:
            return json.loads(answer.read())["items"]

    def test_price_list(self):
        pricing = boto3.client("pricing", endpoint_url=self.url, region_name="us-east-1", aws_access_key_id="151515151515", aws_secret_access_key="x")
        exact = {"instanceType": "p5.48xlarge", "regionCode": "us-west-2", "operatingSystem": "Linux", "tenancy": "Shared", "preInstalledSw": "NA", "capacitystatus": "Used"}
        term = lambda pairs: [{"Type": "TERM_MATCH", "Field": k, "Value": v} for k, v in pairs.items()]  # noqa: E731
        found = pricing.get_products(ServiceCode="AmazonEC2", Filters=term(exact))["PriceList"]
        self.assertEqual(len(found), 1, "only the right filters give one record")
        item = json.loads(found[0])
        self.assertEqual(item["product"]["attributes"]["usagetype"], "USW2-BoxUsage:p5.48xlarge")
        (on_demand,) = item["terms"]["OnDemand"].values()
        (dimension,) = on_demand["priceDimensions"].values()
        self.assertEqual((dimension["unit"], dimension["pricePerUnit"]["USD"]), ("Hrs", "55.0400000000"))
        self.assertIn("Reserved", item["terms"])
        # A loose filter matches the decoys: Windows, dedicated, SQL Server, the reservation statuses.
        loose = {k: v for k, v in exact.items() if k in ("instanceType", "regionCode")}
        self.assertEqual(len(pricing.get_products(ServiceCode="AmazonEC2", Filters=term(loose))["PriceList"]), 6)
        # Pages of MaxResults, ANY_OF, and EKS's two cluster-hour prices.
        page = pricing.get_products(ServiceCode="AmazonEC2", Filters=term(loose), MaxResults=4)
        rest = pricing.get_products(ServiceCode="AmazonEC2", Filters=term(loose), MaxResults=4, NextToken=page["NextToken"])
        self.assertEqual((len(page["PriceList"]), len(rest["PriceList"]), "NextToken" in rest), (4, 2, False))
        any_of = [{"Type": "ANY_OF", "Field": "usagetype", "Value": "USW2-AmazonEKS-Hours:perCluster,USW2-AmazonEKS-Hours:extendedSupport"}]
        eks = [json.loads(p) for p in pricing.get_products(ServiceCode="AmazonEKS", Filters=any_of)["PriceList"]]
        prices = sorted(next(iter(next(iter(e["terms"]["OnDemand"].values()))["priceDimensions"].values()))["pricePerUnit"]["USD"] for e in eks)
        self.assertEqual(prices, ["0.1000000000", "0.5000000000"])
        by_code = [{"Type": "TERM_MATCH", "Field": "ServiceCode", "Value": "AmazonEKS"}]
        self.assertEqual(len(pricing.get_products(ServiceCode="AmazonEKS", Filters=by_code)["PriceList"]), 9)
        services = [s["ServiceCode"] for s in pricing.describe_services()["Services"]]
        self.assertEqual(services, ["AmazonEC2", "AmazonEFS", "AmazonEKS", "AmazonFSx"])
        # The API is served in three regions only.
        elsewhere = boto3.client("pricing", endpoint_url=self.url, region_name="us-west-2", aws_access_key_id="151515151515", aws_secret_access_key="x")
        with self.assertRaises(ClientError) as refused:
            elsewhere.get_products(ServiceCode="AmazonEC2")
        self.assertIn("us-east-1", refused.exception.response["Error"]["Message"])

    def test_eks_access_entries(self):
        account = "141414141414"
        eks = self.client("eks", account)
        role = f"arn:aws:iam::{account}:role/eks"
        _, (subnet_1,) = self.subnets(account, 1)
        eks.create_cluster(name="cm", version="1.31", roleArn=role, resourcesVpcConfig={"subnetIds": [subnet_1]})
        eks.create_cluster(name="api", version="1.31", roleArn=role, resourcesVpcConfig={"subnetIds": [subnet_1]}, accessConfig={"authenticationMode": "API_AND_CONFIG_MAP"})
        self.wait_for(lambda: eks.describe_cluster(name="api")["cluster"]["status"], "ACTIVE")
        self.wait_for(lambda: eks.describe_cluster(name="cm")["cluster"]["status"], "ACTIVE")
        ci = f"arn:aws:iam::{account}:role/ci/deploy"
        # A CONFIG_MAP cluster takes no access entries; a principal must be an IAM ARN.
        self.assertCode("InvalidRequestException", eks.create_access_entry, clusterName="cm", principalArn=ci)
        self.assertCode("InvalidParameterException", eks.create_access_entry, clusterName="api", principalArn="ci")
        entry = eks.create_access_entry(clusterName="api", principalArn=ci, kubernetesGroups=["ops"], tags={"forge:stack": "s"})["accessEntry"]
        session = f"arn:aws:sts::{account}:assumed-role/deploy/{{{{SessionName}}}}"
        self.assertEqual((entry["principalArn"], entry["type"], entry["username"], entry["kubernetesGroups"]), (ci, "STANDARD", session, ["ops"]))
        self.assertTrue(entry["accessEntryArn"].startswith(f"arn:aws:eks:us-west-2:{account}:access-entry/api/role/{account}/deploy/"), entry["accessEntryArn"])
        self.assertEqual(eks.list_tags_for_resource(resourceArn=entry["accessEntryArn"])["tags"], {"forge:stack": "s"})
        self.assertCode("ResourceInUseException", eks.create_access_entry, clusterName="api", principalArn=ci)
        self.assertEqual(eks.describe_access_entry(clusterName="api", principalArn=ci)["accessEntry"]["accessEntryArn"], entry["accessEntryArn"])
        self.assertEqual(eks.list_access_entries(clusterName="api")["accessEntries"], [ci])
        eks.update_access_entry(clusterName="api", principalArn=ci, kubernetesGroups=[])
        self.assertEqual(eks.describe_access_entry(clusterName="api", principalArn=ci)["accessEntry"]["kubernetesGroups"], [])

        admin = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"
        view = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSViewPolicy"
        self.assertCode("ResourceNotFoundException", eks.associate_access_policy, clusterName="api", principalArn=ci, policyArn=admin + "X", accessScope={"type": "cluster"})
        self.assertCode("InvalidParameterException", eks.associate_access_policy, clusterName="api", principalArn=ci, policyArn=view, accessScope={"type": "namespace"})
        eks.associate_access_policy(clusterName="api", principalArn=ci, policyArn=admin, accessScope={"type": "cluster"})
        eks.associate_access_policy(clusterName="api", principalArn=ci, policyArn=view, accessScope={"type": "namespace", "namespaces": ["team-a"]})
        listed = eks.list_associated_access_policies(clusterName="api", principalArn=ci)["associatedAccessPolicies"]
        self.assertEqual(sorted((p["policyArn"], p["accessScope"]["type"]) for p in listed), [(admin, "cluster"), (view, "namespace")])
        eks.disassociate_access_policy(clusterName="api", principalArn=ci, policyArn=view)
        self.assertCode("ResourceNotFoundException", eks.disassociate_access_policy, clusterName="api", principalArn=ci, policyArn=view)
        self.assertEqual(len(eks.list_associated_access_policies(clusterName="api", principalArn=ci)["associatedAccessPolicies"]), 1)
        eks.delete_access_entry(clusterName="api", principalArn=ci)
        self.assertCode("ResourceNotFoundException", eks.describe_access_entry, clusterName="api", principalArn=ci)
        self.assertEqual(eks.list_access_entries(clusterName="api")["accessEntries"], [])

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


    # --- FSx for Lustre ---------------------------------------------------------------------

    def lustre_network(self, account, open_988=True):
        """A subnet and a security group (letting TCP 988 in from itself, or nothing)."""
        ec2, (subnet,) = self.subnets(account, 1)
        vpc = ec2.describe_subnets(SubnetIds=[subnet])["Subnets"][0]["VpcId"]
        group = ec2.create_security_group(GroupName=f"lustre-{open_988}", Description="d", VpcId=vpc)["GroupId"]
        if open_988:
            ec2.authorize_security_group_ingress(GroupId=group, IpPermissions=[{"IpProtocol": "tcp", "FromPort": 988, "ToPort": 988, "UserIdGroupPairs": [{"GroupId": group}]}])
        return subnet, group, vpc

    def lustre(self, subnet, group, **overrides):
        config = {"DeploymentType": "PERSISTENT_2", "PerUnitStorageThroughput": 250, "DataCompressionType": "LZ4"}
        return {"FileSystemType": "LUSTRE", "StorageCapacity": 1200, "SubnetIds": [subnet], "SecurityGroupIds": [group], "LustreConfiguration": config, "Tags": [{"Key": "forge:stack", "Value": "s"}], **overrides}

    def test_fsx_lustre_checks_like_the_api(self):
        account = "141414141414"
        fsx = self.client("fsx", account)
        subnet, group, _ = self.lustre_network(account)
        bad = [
            ("BadRequest", {"StorageCapacity": 1800}),
            ("BadRequest", {"LustreConfiguration": {"DeploymentType": "SCRATCH_1"}, "StorageCapacity": 4800}),
            ("BadRequest", {"LustreConfiguration": {"DeploymentType": "PERSISTENT_1"}}),
            ("BadRequest", {"LustreConfiguration": {"DeploymentType": "SCRATCH_2", "PerUnitStorageThroughput": 125}}),
            ("InvalidPerUnitStorageThroughput", {"LustreConfiguration": {"DeploymentType": "PERSISTENT_2", "PerUnitStorageThroughput": 200}}),
            ("InvalidNetworkSettings", {"SubnetIds": ["subnet-0123456789abcdef0"]}),
            ("InvalidNetworkSettings", {"SecurityGroupIds": ["sg-0123456789abcdef0"]}),
        ]
        for code, overrides in bad:
            self.assertCode(code, fsx.create_file_system, **self.lustre(subnet, group, **overrides))
        fsx.create_file_system(**self.lustre(subnet, group, StorageCapacity=3600, LustreConfiguration={"DeploymentType": "SCRATCH_1"}))
        self.assertCode("FileSystemNotFound", fsx.describe_file_systems, FileSystemIds=["fs-0123456789abcdef0"])
        self.assertEqual(fsx.describe_file_systems()["FileSystems"][0]["LustreConfiguration"]["MountName"], "fsx")

    def test_fsx_lustre_phases_updates_and_tokens(self):
        account = "151515151515"
        fsx = self.client("fsx", account)
        subnet, group, vpc = self.lustre_network(account)
        created = fsx.create_file_system(ClientRequestToken="t-1", **self.lustre(subnet, group))["FileSystem"]
        fs_id = created["FileSystemId"]
        config = created["LustreConfiguration"]
        self.assertEqual((created["Lifecycle"], created["VpcId"], created["FileSystemTypeVersion"]), ("CREATING", vpc, "2.15"))
        self.assertEqual(created["DNSName"], f"{fs_id}.fsx.us-west-2.amazonaws.com")
        self.assertRegex(config["MountName"], r"^[a-z0-9]{8}$")
        self.assertEqual((config["DeploymentType"], config["PerUnitStorageThroughput"], config["DataCompressionType"]), ("PERSISTENT_2", 250, "LZ4"))
        retry = fsx.create_file_system(ClientRequestToken="t-1", **self.lustre(subnet, group, Tags=list(reversed(self.lustre(subnet, group)["Tags"]))))["FileSystem"]
        self.assertEqual((retry["FileSystemId"], len(fsx.describe_file_systems()["FileSystems"])), (fs_id, 1))
        with self.assertRaises(ClientError) as changed:
            fsx.create_file_system(ClientRequestToken="t-1", **self.lustre(subnet, group, StorageCapacity=2400))
        self.assertEqual((changed.exception.response["Error"]["Code"], changed.exception.response["Parameter"]), ("IncompatibleParameterError", "StorageCapacity"))
        described = lambda: fsx.describe_file_systems(FileSystemIds=[fs_id])["FileSystems"][0]  # noqa: E731
        self.assertCode("BadRequest", fsx.update_file_system, FileSystemId=fs_id, StorageCapacity=2400)
        self.wait_for(lambda: described()["Lifecycle"], "AVAILABLE")
        self.assertEqual(described()["LustreConfiguration"]["MountName"], config["MountName"])

        self.assertCode("BadRequest", fsx.update_file_system, FileSystemId=fs_id, StorageCapacity=1000)
        self.assertCode("BadRequest", fsx.update_file_system, FileSystemId=fs_id, StorageCapacity=3000)
        updating = fsx.update_file_system(FileSystemId=fs_id, StorageCapacity=2400)["FileSystem"]
        action = updating["AdministrativeActions"][0]
        self.assertEqual((updating["Lifecycle"], updating["StorageCapacity"]), ("UPDATING", 1200))
        self.assertEqual((action["AdministrativeActionType"], action["Status"], action["TargetFileSystemValues"]), ("FILE_SYSTEM_UPDATE", "IN_PROGRESS", {"StorageCapacity": 2400}))
        self.assertCode("BadRequest", fsx.update_file_system, FileSystemId=fs_id, LustreConfiguration={"PerUnitStorageThroughput": 500})
        self.wait_for(lambda: described()["Lifecycle"], "AVAILABLE")
        self.assertEqual((described()["StorageCapacity"], described()["AdministrativeActions"][0]["Status"]), (2400, "COMPLETED"))
        fsx.update_file_system(FileSystemId=fs_id, LustreConfiguration={"PerUnitStorageThroughput": 500})
        self.wait_for(lambda: described()["LustreConfiguration"]["PerUnitStorageThroughput"], 500)

        arn = created["ResourceARN"]
        fsx.tag_resource(ResourceARN=arn, Tags=[{"Key": "team", "Value": "ml"}])
        fsx.untag_resource(ResourceARN=arn, TagKeys=["forge:stack"])
        self.assertEqual((fsx.list_tags_for_resource(ResourceARN=arn)["Tags"], described()["Tags"]), ([{"Key": "team", "Value": "ml"}],) * 2)
        self.assertCode("ResourceNotFound", fsx.list_tags_for_resource, ResourceARN=arn.replace(fs_id, "fs-0123456789abcdef0"))

        self.assertEqual(fsx.delete_file_system(FileSystemId=fs_id)["Lifecycle"], "DELETING")
        self.assertEqual((fsx.delete_file_system(FileSystemId=fs_id)["Lifecycle"], described()["Lifecycle"]), ("DELETING", "DELETING"))
        self.wait_for(lambda: fsx.describe_file_systems()["FileSystems"], [])
        self.assertCode("FileSystemNotFound", fsx.describe_file_systems, FileSystemIds=[fs_id])

    def test_fsx_lustre_fails_without_port_988(self):
        account = "161616161616"
        fsx = self.client("fsx", account)
        subnet, group, _ = self.lustre_network(account, open_988=False)
        fs_id = fsx.create_file_system(**self.lustre(subnet, group))["FileSystem"]["FileSystemId"]
        described = lambda: fsx.describe_file_systems(FileSystemIds=[fs_id])["FileSystems"][0]  # noqa: E731
        self.assertNotIn("FailureDetails", described())
        self.wait_for(lambda: described()["Lifecycle"], "FAILED")
        self.assertIn("port 988", described()["FailureDetails"]["Message"])
        self.assertIn(group, described()["FailureDetails"]["Message"])
        self.assertEqual(len(fsx.describe_file_systems(MaxResults=1)["FileSystems"]), 1)

    def test_fsx_data_repository_associations(self):
        account = "171717171717"
        fsx = self.client("fsx", account)
        subnet, group, _ = self.lustre_network(account)
        fs_id = fsx.create_file_system(**self.lustre(subnet, group))["FileSystem"]["FileSystemId"]
        link = {"FileSystemId": fs_id, "FileSystemPath": "/data", "DataRepositoryPath": "s3://bucket/data", "BatchImportMetaDataOnCreate": True, "ImportedFileChunkSize": 1024,
                "S3": {"AutoImportPolicy": {"Events": ["NEW", "CHANGED", "DELETED"]}, "AutoExportPolicy": {"Events": ["NEW", "CHANGED", "DELETED"]}}, "Tags": [{"Key": "k", "Value": "v"}]}
        self.assertCode("BadRequest", fsx.create_data_repository_association, **link)  # the file system is CREATING
        self.wait_for(lambda: fsx.describe_file_systems()["FileSystems"][0]["Lifecycle"], "AVAILABLE")
        created = fsx.create_data_repository_association(ClientRequestToken="d-1", **link)["Association"]
        dra = created["AssociationId"]
        self.assertRegex(dra, r"^dra-[0-9a-f]{17}$")
        self.assertEqual((created["Lifecycle"], created["ResourceARN"]), ("CREATING", f"arn:aws:fsx:us-west-2:{account}:association/{fs_id}/{dra}"))
        self.assertEqual(fsx.create_data_repository_association(ClientRequestToken="d-1", **link)["Association"]["AssociationId"], dra)
        self.assertCode("BadRequest", fsx.create_data_repository_association, **link)  # /data is taken
        self.assertCode("DataRepositoryAssociationNotFound", fsx.describe_data_repository_associations, AssociationIds=["dra-0123456789abcdef0"])
        second = fsx.create_data_repository_association(**{**link, "FileSystemPath": "/scratch", "DataRepositoryPath": "s3://bucket/scratch"})["Association"]["AssociationId"]
        by_fs = [{"Name": "file-system-id", "Values": [fs_id]}]
        page = fsx.describe_data_repository_associations(Filters=by_fs, MaxResults=1)
        rest = fsx.describe_data_repository_associations(Filters=by_fs, MaxResults=1, NextToken=page["NextToken"])
        self.assertEqual([a["AssociationId"] for a in page["Associations"] + rest["Associations"]], [dra, second])
        self.assertNotIn("NextToken", rest)
        described = lambda: fsx.describe_data_repository_associations(AssociationIds=[dra])["Associations"][0]  # noqa: E731
        self.wait_for(lambda: described()["Lifecycle"], "AVAILABLE")
        self.assertEqual(fsx.update_data_repository_association(AssociationId=dra, ImportedFileChunkSize=2048)["Association"]["Lifecycle"], "UPDATING")
        self.wait_for(lambda: described()["Lifecycle"], "AVAILABLE")
        self.assertEqual(described()["ImportedFileChunkSize"], 2048)
        fsx.tag_resource(ResourceARN=created["ResourceARN"], Tags=[{"Key": "x", "Value": "y"}])
        self.assertEqual(described()["Tags"], [{"Key": "k", "Value": "v"}, {"Key": "x", "Value": "y"}])
        self.assertEqual(fsx.delete_data_repository_association(AssociationId=second, DeleteDataInFileSystem=False)["Lifecycle"], "DELETING")
        fsx.delete_file_system(FileSystemId=fs_id)
        self.assertEqual(described()["Lifecycle"], "DELETING")
        self.wait_for(lambda: fsx.describe_data_repository_associations()["Associations"], [])
        self.assertCode("DataRepositoryAssociationNotFound", fsx.describe_data_repository_associations, AssociationIds=[dra])

    # --- EFS --------------------------------------------------------------------------------

    def test_efs_phases_and_creation_tokens(self):
        account = "181818181818"
        efs = self.client("efs", account)
        ec2, subnets = self.subnets(account, 2)
        created = efs.create_file_system(CreationToken="home", PerformanceMode="generalPurpose", ThroughputMode="elastic", Encrypted=True, Tags=[{"Key": "Name", "Value": "home"}])
        fs_id = created["FileSystemId"]
        self.assertEqual((created["LifeCycleState"], created["ThroughputMode"], created["Name"]), ("creating", "elastic", "home"))
        with self.assertRaises(ClientError) as again:
            efs.create_file_system(CreationToken="home")
        self.assertEqual((again.exception.response["Error"]["Code"], again.exception.response["ResponseMetadata"]["HTTPStatusCode"]), ("FileSystemAlreadyExists", 409))
        self.assertEqual(again.exception.response["FileSystemId"], fs_id)
        self.assertCode("IncorrectFileSystemLifeCycleState", efs.create_mount_target, FileSystemId=fs_id, SubnetId=subnets[0])
        self.wait_for(lambda: efs.describe_file_systems(FileSystemId=fs_id)["FileSystems"][0]["LifeCycleState"], "available")

        targets = [efs.create_mount_target(FileSystemId=fs_id, SubnetId=s)["MountTargetId"] for s in subnets[:1]]
        states = lambda: [t["LifeCycleState"] for t in efs.describe_mount_targets(FileSystemId=fs_id)["MountTargets"]]  # noqa: E731
        self.assertEqual(states(), ["creating"])
        self.assertCode("FileSystemInUse", efs.delete_file_system, FileSystemId=fs_id)
        self.wait_for(states, ["available"])
        efs.delete_mount_target(MountTargetId=targets[0])
        efs.delete_mount_target(MountTargetId=targets[0])  # deleting again is accepted
        self.assertEqual(states(), ["deleting"])
        self.assertCode("FileSystemInUse", efs.delete_file_system, FileSystemId=fs_id)
        self.wait_for(states, [])
        self.assertCode("MountTargetNotFound", efs.describe_mount_targets, MountTargetId=targets[0])

        efs.tag_resource(ResourceId=fs_id, Tags=[{"Key": "team", "Value": "ml"}])
        efs.untag_resource(ResourceId=fs_id, TagKeys=["Name"])
        self.assertEqual(efs.list_tags_for_resource(ResourceId=fs_id)["Tags"], [{"Key": "team", "Value": "ml"}])
        efs.put_lifecycle_configuration(FileSystemId=fs_id, LifecyclePolicies=[{"TransitionToIA": "AFTER_30_DAYS"}])
        efs.delete_file_system(FileSystemId=fs_id)
        self.assertEqual(efs.describe_file_systems(FileSystemId=fs_id)["FileSystems"][0]["LifeCycleState"], "deleting")
        self.assertCode("FileSystemAlreadyExists", efs.create_file_system, CreationToken="home")  # until it is gone
        self.wait_for(lambda: efs.describe_file_systems()["FileSystems"], [])
        self.assertCode("FileSystemNotFound", efs.describe_file_systems, FileSystemId=fs_id)
        self.assertEqual(efs.create_file_system(CreationToken="home")["LifeCycleState"], "creating")
        calls = self.control(f"/_forge/calls?account={account}")
        self.assertEqual(calls["elasticfilesystem:DELETE /2015-02-01/mount-targets/{}"], 2)

    def test_efs_update_file_system(self):
        account = "181818181819"
        efs = self.client("efs", account)
        fs_id = efs.create_file_system(CreationToken="scratch", ThroughputMode="bursting")["FileSystemId"]
        state = lambda: efs.describe_file_systems(FileSystemId=fs_id)["FileSystems"][0]["LifeCycleState"]  # noqa: E731
        self.assertCode("IncorrectFileSystemLifeCycleState", efs.update_file_system, FileSystemId=fs_id, ThroughputMode="elastic")
        self.wait_for(state, "available")
        self.assertCode("BadRequest", efs.update_file_system, FileSystemId=fs_id, ThroughputMode="provisioned")
        updated = efs.update_file_system(FileSystemId=fs_id, ThroughputMode="provisioned", ProvisionedThroughputInMibps=64)
        self.assertEqual((updated["LifeCycleState"], updated["ThroughputMode"], updated["ProvisionedThroughputInMibps"]), ("updating", "provisioned", 64))
        self.wait_for(state, "available")
        self.assertEqual(efs.update_file_system(FileSystemId=fs_id, ThroughputMode="elastic").get("ProvisionedThroughputInMibps"), None)
        self.assertCode("FileSystemNotFound", efs.update_file_system, FileSystemId="fs-0123456789abcdef0", ThroughputMode="elastic")

    # --- CloudFormation ---------------------------------------------------------------------

    def stack_events(self, cfn, stack):
        return [(e["LogicalResourceId"], e["ResourceStatus"], e.get("ResourceStatusReason")) for e in cfn.describe_stack_events(StackName=stack)["StackEvents"]]

    def test_cloudformation_failed_create_rolls_back(self):
        account = "191919191919"
        cfn, ec2 = self.client("cloudformation", account), self.client("ec2", account)
        template = {"Resources": {
            "Vpc": {"Type": "AWS::EC2::VPC", "Properties": {"CidrBlock": "10.0.0.0/16"}},
            "Group": {"Type": "AWS::EC2::SecurityGroup", "DependsOn": "Vpc", "Properties": {"GroupDescription": "d", "VpcId": "vpc-0000000000000dead"}},
            "Attached": {"Type": "AWS::EC2::SecurityGroupIngress", "Properties": {"GroupId": {"Ref": "Group"}, "IpProtocol": "-1", "CidrIp": "10.0.0.0/8"}},
            "Spread": {"Type": "AWS::EC2::PlacementGroup", "Properties": {"Strategy": "spread"}},
        }, "Outputs": {"Vpc": {"Value": {"Ref": "Vpc"}}}}
        stack_id = cfn.create_stack(StackName="broken", TemplateBody=json.dumps(template))["StackId"]
        stack = lambda: cfn.describe_stacks(StackName="broken")["Stacks"][0]  # noqa: E731
        self.assertEqual((stack()["StackStatus"], [e[1] for e in self.stack_events(cfn, "broken")][-1]), ("CREATE_IN_PROGRESS", "CREATE_IN_PROGRESS"))
        self.assertNotIn("CREATE_FAILED", [e[1] for e in self.stack_events(cfn, "broken")])
        self.wait_for(lambda: stack()["StackStatus"], "ROLLBACK_COMPLETE")
        reason = "The following resource(s) failed to create: [Group, Spread]. Rollback requested by user."
        self.assertEqual((stack()["StackStatusReason"], stack().get("Outputs")), (reason, None))
        events = self.stack_events(cfn, "broken")
        self.assertEqual(events[:5], [
            ("broken", "ROLLBACK_COMPLETE", None),
            ("Vpc", "DELETE_COMPLETE", None),
            ("Vpc", "DELETE_IN_PROGRESS", None),
            ("broken", "ROLLBACK_IN_PROGRESS", reason),
            ("Spread", "CREATE_FAILED", "Resource creation cancelled"),
        ])
        self.assertEqual(events[5][:2], ("Group", "CREATE_FAILED"))
        self.assertTrue(events[5][2].startswith("The vpc ID 'vpc-0000000000000dead' does not exist (Service: AmazonEC2; Status Code: 400; Error Code: InvalidVpcID.NotFound;"), events[5][2])
        failed = cfn.describe_stack_events(StackName="broken")["StackEvents"][5]
        self.assertEqual(failed["ResourceType"], "AWS::EC2::SecurityGroup")
        self.assertNotIn("Attached", [e[0] for e in events], "it needs the failed group: never started")
        self.assertEqual([v["CidrBlock"] for v in ec2.describe_vpcs()["Vpcs"] if not v["IsDefault"]], [], "the VPC went with the rollback")
        self.assertEqual(cfn.describe_stack_resources(StackName="broken")["StackResources"], [])
        self.assertCode("AlreadyExistsException", cfn.create_stack, StackName="broken", TemplateBody=json.dumps(template))

        cfn.delete_stack(StackName="broken")
        self.assertEqual(stack()["StackStatus"], "DELETE_IN_PROGRESS")
        self.wait_for(lambda: cfn.describe_stacks(StackName=stack_id)["Stacks"][0]["StackStatus"], "DELETE_COMPLETE")
        self.assertCode("ValidationError", cfn.describe_stacks, StackName="broken")
        self.assertEqual(cfn.describe_stacks()["Stacks"], [])
        self.assertCode("ValidationError", cfn.create_stack, StackName="t", TemplateBody=json.dumps({"Resources": {"S": {"Type": "AWS::EC2::Subnet", "Properties": {"VpcId": {"Ref": "Nope"}, "CidrBlock": "10.0.0.0/24"}}}}))
        self.assertCode("ValidationError", cfn.create_stack, StackName="t", TemplateBody="Resources:\n  A: {Type: AWS::EC2::VPC\n")
        self.assertCode("ValidationError", cfn.create_stack, StackName="t", TemplateBody="{}")  # no Resources (moto: a 500)
        self.assertEqual(cfn.describe_stacks()["Stacks"], [])

    def test_cloudformation_phases_updates_and_tokens(self):
        account = "202020202020"
        cfn, ec2 = self.client("cloudformation", account), self.client("ec2", account)
        template = "Parameters:\n  Cidr: {Type: String, Default: 10.1.0.0/16}\nResources:\n  Vpc: {Type: AWS::EC2::VPC, Properties: {CidrBlock: !Ref Cidr}}\n  Subnet: {Type: AWS::EC2::Subnet, Properties: {VpcId: !Ref Vpc, CidrBlock: 10.1.0.0/24}}\nOutputs:\n  Subnet: {Value: !Ref Subnet}\n"
        stack_id = cfn.create_stack(StackName="net", TemplateBody=template, ClientRequestToken="c-1", Tags=[{"Key": "forge:stack", "Value": "net"}])["StackId"]
        self.assertEqual(cfn.create_stack(StackName="net", TemplateBody=template, ClientRequestToken="c-1")["StackId"], stack_id)
        self.assertCode("AlreadyExistsException", cfn.create_stack, StackName="net", TemplateBody=template, ClientRequestToken="c-2")
        stack = lambda: cfn.describe_stacks(StackName="net")["Stacks"][0]  # noqa: E731
        self.assertEqual((stack()["StackStatus"], stack().get("Outputs")), ("CREATE_IN_PROGRESS", None))
        self.assertCode("ValidationError", cfn.update_stack, StackName="net", UsePreviousTemplate=True, Tags=[{"Key": "a", "Value": "b"}])
        self.wait_for(lambda: stack()["StackStatus"], "CREATE_COMPLETE")
        subnet = stack()["Outputs"][0]["OutputValue"]
        tags = {t["Key"]: t["Value"] for t in ec2.describe_subnets(SubnetIds=[subnet])["Subnets"][0]["Tags"]}
        self.assertEqual((tags["forge:stack"], tags["aws:cloudformation:logical-id"]), ("net", "Subnet"))
        self.assertEqual({e[2] for e in self.stack_events(cfn, "net")[:1]}, {None})

        with self.assertRaises(ClientError) as same:
            cfn.update_stack(StackName="net", TemplateBody=template, Parameters=[{"ParameterKey": "Cidr", "UsePreviousValue": True}])
        self.assertEqual(same.exception.response["Error"]["Message"], "No updates are to be performed.")
        self.assertCode("ValidationError", cfn.update_stack, StackName="net", UsePreviousTemplate=True)

        broken = template.replace("CidrBlock: 10.1.0.0/24", "CidrBlock: 10.9.0.0/24")
        self.assertEqual(cfn.update_stack(StackName="net", TemplateBody=broken, ClientRequestToken="u-1")["StackId"], stack_id)
        self.assertEqual(cfn.update_stack(StackName="net", TemplateBody=broken, ClientRequestToken="u-1")["StackId"], stack_id)
        self.assertEqual(stack()["StackStatus"], "UPDATE_IN_PROGRESS")
        self.wait_for(lambda: stack()["StackStatus"], "UPDATE_ROLLBACK_COMPLETE")
        events = self.stack_events(cfn, "net")
        self.assertEqual(events[0][:2], ("net", "UPDATE_ROLLBACK_COMPLETE"))
        rollback, failed = events.index(("net", "UPDATE_ROLLBACK_IN_PROGRESS", "The following resource(s) failed to update: [Subnet]. ")), [e[1] for e in events].index("UPDATE_FAILED")
        self.assertEqual((rollback + 1, events[failed][0]), (failed, "Subnet"))
        self.assertIn("InvalidSubnet.Range", events[failed][2])
        self.assertEqual(cfn.describe_stack_events(StackName="net")["StackEvents"][failed]["ClientRequestToken"], "u-1")
        self.assertEqual(stack()["Outputs"][0]["OutputValue"], subnet, "the old subnet stays")

        cfn.update_stack(StackName="net", UsePreviousTemplate=True, Parameters=[{"ParameterKey": "Cidr", "ParameterValue": "10.1.0.0/16"}], Tags=[{"Key": "forge:stack", "Value": "net2"}])
        self.wait_for(lambda: stack()["StackStatus"], "UPDATE_COMPLETE")
        tags = {t["Key"]: t["Value"] for t in ec2.describe_subnets(SubnetIds=[subnet])["Subnets"][0]["Tags"]}
        self.assertEqual(tags["forge:stack"], "net2", "new stack tags reach the resources")

        cfn.delete_stack(StackName="net")
        self.assertEqual(stack()["StackStatus"], "DELETE_IN_PROGRESS")
        self.assertCode("ValidationError", cfn.update_stack, StackName="net", UsePreviousTemplate=True)
        self.wait_for(lambda: cfn.describe_stacks(StackName=stack_id)["Stacks"][0]["StackStatus"], "DELETE_COMPLETE")
        with self.assertRaises(ClientError) as gone:
            cfn.describe_stacks(StackName="net")
        self.assertEqual(gone.exception.response["Error"]["Message"], "Stack with id net does not exist")
        self.assertEqual(self.stack_events(cfn, stack_id)[0][:2], ("net", "DELETE_COMPLETE"))
        self.assertCode("InvalidSubnetID.NotFound", ec2.describe_subnets, SubnetIds=[subnet])

    def test_cloudformation_resource_types(self):
        account = "212121212121"
        cfn, ec2, eks = self.client("cloudformation", account), self.client("ec2", account), self.client("eks", account)
        _, (subnet,) = self.subnets(account, 1)
        role = f"arn:aws:iam::{account}:role/eks"
        eks.create_cluster(name="c", version="1.31", roleArn=role, resourcesVpcConfig={"subnetIds": [subnet]})
        self.wait_for(lambda: eks.describe_cluster(name="c")["cluster"]["status"], "ACTIVE")
        efa = [{"NetworkCardIndex": i, "DeviceIndex": min(i, 1), "InterfaceType": "efa", "Groups": [{"Ref": "Efa"}]} for i in range(4)]
        template = {"Resources": {
            "Vpc": {"Type": "AWS::EC2::VPC", "Properties": {"CidrBlock": "10.0.0.0/16"}},
            "Efa": {"Type": "AWS::EC2::SecurityGroup", "Properties": {"GroupDescription": "efa", "VpcId": {"Ref": "Vpc"}, "SecurityGroupIngress": [{"IpProtocol": "tcp", "FromPort": 22, "ToPort": 22, "CidrIp": "10.0.0.0/8"}]}},
            "EfaIn": {"Type": "AWS::EC2::SecurityGroupIngress", "Properties": {"GroupId": {"Ref": "Efa"}, "IpProtocol": "-1", "SourceSecurityGroupId": {"Ref": "Efa"}}},
            "EfaOut": {"Type": "AWS::EC2::SecurityGroupEgress", "Properties": {"GroupId": {"Ref": "Efa"}, "IpProtocol": "-1", "DestinationSecurityGroupId": {"Ref": "Efa"}}},
            "Pg": {"Type": "AWS::EC2::PlacementGroup", "Properties": {"Strategy": "cluster"}},
            "Lt": {"Type": "AWS::EC2::LaunchTemplate", "Properties": {"LaunchTemplateData": {"InstanceType": "p4d.24xlarge", "Placement": {"GroupName": {"Ref": "Pg"}}, "NetworkInterfaces": efa}}},
            "Ng": {"Type": "AWS::EKS::Nodegroup", "Properties": {"ClusterName": "c", "NodegroupName": "gpu", "NodeRole": role, "Subnets": [subnet], "AmiType": "AL2_x86_64_GPU", "CapacityType": "ON_DEMAND",
                   "ScalingConfig": {"MinSize": 1, "MaxSize": 2, "DesiredSize": 1}, "Labels": {"gpu": "true"}, "Tags": {"team": "ml"},
                   "LaunchTemplate": {"Id": {"Ref": "Lt"}, "Version": {"Fn::GetAtt": ["Lt", "LatestVersionNumber"]}}}},
        }, "Outputs": {
            "Ng": {"Value": {"Ref": "Ng"}}, "NgName": {"Value": {"Fn::GetAtt": ["Ng", "NodegroupName"]}}, "NgArn": {"Value": {"Fn::GetAtt": ["Ng", "Arn"]}}, "NgCluster": {"Value": {"Fn::GetAtt": ["Ng", "ClusterName"]}},
            "Pg": {"Value": {"Ref": "Pg"}}, "Lt": {"Value": {"Ref": "Lt"}}, "Efa": {"Value": {"Fn::GetAtt": ["Efa", "GroupId"]}}, "EfaIn": {"Value": {"Ref": "EfaIn"}},
        }}
        cfn.create_stack(StackName="gpu", TemplateBody=json.dumps(template), Tags=[{"Key": "forge:stack", "Value": "gpu"}])
        stack = lambda: cfn.describe_stacks(StackName="gpu")["Stacks"][0]  # noqa: E731
        nodegroup = lambda: eks.describe_nodegroup(clusterName="c", nodegroupName="gpu")["nodegroup"]  # noqa: E731
        self.assertEqual(nodegroup()["status"], "CREATING")
        self.wait_for(lambda: stack()["StackStatus"], "CREATE_COMPLETE")
        self.assertEqual(nodegroup()["status"], "ACTIVE")
        outputs = {o["OutputKey"]: o["OutputValue"] for o in stack()["Outputs"]}
        self.assertEqual((outputs["Ng"], outputs["NgName"], outputs["NgCluster"]), ("c/gpu", "gpu", "c"))
        self.assertEqual(outputs["NgArn"], nodegroup()["nodegroupArn"])
        self.assertRegex(outputs["EfaIn"], r"^sgr-")
        self.assertEqual((nodegroup()["launchTemplate"]["id"], nodegroup()["launchTemplate"]["version"], nodegroup()["labels"]), (outputs["Lt"], "1", {"gpu": "true"}))
        self.assertEqual((nodegroup()["tags"]["team"], nodegroup()["tags"]["forge:stack"], nodegroup()["tags"]["aws:cloudformation:logical-id"]), ("ml", "gpu", "Ng"))
        placement = ec2.describe_placement_groups(GroupNames=[outputs["Pg"]])["PlacementGroups"][0]
        self.assertEqual((placement["Strategy"], {t["Key"]: t["Value"] for t in placement["Tags"]}["forge:stack"]), ("cluster", "gpu"))
        data = ec2.describe_launch_template_versions(LaunchTemplateId=outputs["Lt"])["LaunchTemplateVersions"][0]["LaunchTemplateData"]
        self.assertEqual([(n["NetworkCardIndex"], n["DeviceIndex"], n["InterfaceType"], n["Groups"]) for n in data["NetworkInterfaces"]], [(i, min(i, 1), "efa", [outputs["Efa"]]) for i in range(4)])
        lt_tags = ec2.describe_launch_templates(LaunchTemplateIds=[outputs["Lt"]])["LaunchTemplates"][0]["Tags"]
        self.assertIn({"Key": "forge:stack", "Value": "gpu"}, lt_tags)
        group = ec2.describe_security_groups(GroupIds=[outputs["Efa"]])["SecurityGroups"][0]
        rules = sorted((p["IpProtocol"], p.get("FromPort"), [g["GroupId"] for g in p["UserIdGroupPairs"]], [r["CidrIp"] for r in p["IpRanges"]]) for p in group["IpPermissions"])
        self.assertEqual(rules, [("-1", None, [outputs["Efa"]], []), ("tcp", 22, [], ["10.0.0.0/8"])])
        self.assertEqual(sorted(g["GroupId"] for p in group["IpPermissionsEgress"] for g in p["UserIdGroupPairs"]), [outputs["Efa"]])

        bigger = json.loads(json.dumps(template))
        bigger["Resources"]["Ng"]["Properties"]["ScalingConfig"]["DesiredSize"] = 2
        bigger["Resources"]["Efa"]["Properties"]["SecurityGroupIngress"][0]["CidrIp"] = "10.1.0.0/16"
        bigger["Resources"]["Lt"]["Properties"]["LaunchTemplateData"]["InstanceType"] = "p5.48xlarge"
        cfn.update_stack(StackName="gpu", TemplateBody=json.dumps(bigger))
        self.assertEqual(nodegroup()["status"], "UPDATING")
        self.wait_for(lambda: stack()["StackStatus"], "UPDATE_COMPLETE")
        self.assertEqual((nodegroup()["status"], nodegroup()["scalingConfig"]["desiredSize"]), ("ACTIVE", 2))
        group = ec2.describe_security_groups(GroupIds=[outputs["Efa"]])["SecurityGroups"][0]
        self.assertEqual(sorted(r["CidrIp"] for p in group["IpPermissions"] for r in p["IpRanges"]), ["10.1.0.0/16"], "the same group, its rule changed")
        self.assertEqual(len(group["IpPermissions"]), 2, "the standalone self rule stays")
        lt = ec2.describe_launch_templates(LaunchTemplateIds=[outputs["Lt"]])["LaunchTemplates"][0]
        self.assertEqual((lt["LatestVersionNumber"], lt["DefaultVersionNumber"]), (2, 2))

        cfn.delete_stack(StackName="gpu")
        self.assertEqual(nodegroup()["status"], "DELETING")
        self.assertCode("ResourceInUseException", eks.delete_cluster, name="c")
        self.wait_for(lambda: cfn.describe_stacks()["Stacks"], [])
        self.assertEqual(eks.list_nodegroups(clusterName="c")["nodegroups"], [])
        self.assertEqual(ec2.describe_placement_groups()["PlacementGroups"], [])
        self.assertCode("InvalidGroup.NotFound", ec2.describe_security_groups, GroupIds=[outputs["Efa"]])

if __name__ == "__main__":
    unittest.main()
