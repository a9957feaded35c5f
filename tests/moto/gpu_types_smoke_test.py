"""Smoke test of the GPU and Trainium instance types the launcher serves (emulator/instance_types.py)
and of EKS node groups over their EFA layouts (emulator/eks.py): DescribeInstanceTypes gives each
type's network cards, EFA, accelerators and architecture; a launch template whose interfaces the
type cannot take fails the node group as EKS does; a good one publishes Nodes with the template's
EFA devices. Runs with the venv's boto3: `python -m unittest`."""

import base64
import json
import ssl
import time
import urllib.request

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

from .launched import Launched

# type: (MaximumNetworkInterfaces of each card, MaximumEfaInterfaces, GPUs, Neuron devices, architecture)
FACTS = {
    "p4d.24xlarge": ([15] * 4, 4, 8, 0, "x86_64"),
    "p4de.24xlarge": ([15] * 4, 4, 8, 0, "x86_64"),
    "p5.48xlarge": ([2] * 32, 32, 8, 0, "x86_64"),
    "p5e.48xlarge": ([2] * 32, 32, 8, 0, "x86_64"),
    "p5en.48xlarge": ([4] * 16, 16, 8, 0, "x86_64"),
    "p6-b200.48xlarge": ([4] * 8, 8, 8, 0, "x86_64"),
    "p6-b300.48xlarge": ([4] * 17, 16, 8, 0, "x86_64"),
    "p6e-gb200.36xlarge": ([1 if i % 2 else 2 for i in range(17)], 17, 4, 0, "arm64"),
    "trn1.32xlarge": ([5] * 8, 8, 0, 16, "x86_64"),
    "trn1n.32xlarge": ([5] * 16, 16, 0, 16, "x86_64"),
    "trn2.48xlarge": ([2] * 16, 16, 0, 16, "x86_64"),
    "trn2u.48xlarge": ([2] * 16, 16, 0, 16, "x86_64"),
}


def nic(card, device, kind):
    return {"NetworkCardIndex": card, "DeviceIndex": device, "InterfaceType": kind, "Groups": ["sg-0123456789abcdef0"]}


# EC2's 2026 layouts: the primary an ENA interface; efa-only at card 0 device 1 when card 0 has
# EFA; efa-only at device 0 of every further EFA card. P6e-GB200: efa on even cards, efa-only on odd.
P5 = [nic(0, 0, "interface"), nic(0, 1, "efa-only")] + [nic(c, 0, "efa-only") for c in range(1, 32)]
P6_B300 = [nic(0, 0, "interface")] + [nic(c, 0, "efa-only") for c in range(1, 17)]
P6E_GB200 = [nic(c, 0, "efa-only" if c % 2 else "efa") for c in range(17)]


class GpuTypes(Launched):
    def client(self, service, account="111111111111"):
        return boto3.client(service, endpoint_url=self.url, region_name="us-west-2", aws_access_key_id=account, aws_secret_access_key="x", config=Config(retries={"total_max_attempts": 1, "mode": "standard"}))

    def control(self, path):
        with urllib.request.urlopen(self.url + path) as r:
            return json.loads(r.read())

    def wait_for(self, read, want, seconds=3.0):
        """Poll `read` until it returns `want` (phases last 0.4 s here)."""
        deadline = time.monotonic() + seconds
        while (value := read()) != want and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertEqual(value, want)

    @staticmethod
    def nodes(cluster):
        """The Nodes of an EKS cluster, read over TLS trusting only the cluster's CA."""
        context = ssl.create_default_context(cadata=base64.b64decode(cluster["certificateAuthority"]["data"]).decode())
        request = urllib.request.Request(cluster["endpoint"] + "/api/v1/nodes", headers={"Authorization": "Bearer k8s-aws-v1.x"})
        with urllib.request.urlopen(request, context=context) as answer:
            return json.loads(answer.read())["items"]

    def cluster(self, account):
        """An ACTIVE cluster `c` of the account over two subnets; (ec2, eks, role, subnets)."""
        ec2, eks = self.client("ec2", account), self.client("eks", account)
        vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
        subnets = [ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.0.{i}.0/24", AvailabilityZone=f"us-west-2{z}")["Subnet"]["SubnetId"] for i, z in enumerate("ab")]
        role = f"arn:aws:iam::{account}:role/eks"
        eks.create_cluster(name="c", version="1.31", roleArn=role, resourcesVpcConfig={"subnetIds": subnets})
        self.wait_for(lambda: eks.describe_cluster(name="c")["cluster"]["status"], "ACTIVE")
        return ec2, eks, role, subnets

    def nodegroup(self, ec2, eks, role, subnets, name, kind, interfaces, size=1):
        """A node group `name` of `size` instances of `kind` from a launch template with `interfaces`."""
        template = ec2.create_launch_template(LaunchTemplateName=f"lt-{name}", LaunchTemplateData={"InstanceType": kind, "NetworkInterfaces": interfaces})["LaunchTemplate"]
        created = eks.create_nodegroup(clusterName="c", nodegroupName=name, nodeRole=role, subnets=subnets[:1], scalingConfig={"minSize": 0, "maxSize": size, "desiredSize": size},
                                       launchTemplate={"id": template["LaunchTemplateId"], "version": "1"})["nodegroup"]
        self.assertEqual(created["status"], "CREATING")
        return template["LaunchTemplateId"]

    def test_instance_type_facts(self):
        ec2 = self.client("ec2", "616161616161")
        described = {t["InstanceType"]: t for t in ec2.describe_instance_types(InstanceTypes=list(FACTS))["InstanceTypes"]}
        self.assertEqual(set(described), set(FACTS))
        for name, (per_card, efa, gpus, neuron, arch) in FACTS.items():
            with self.subTest(name):
                t = described[name]
                network = t["NetworkInfo"]
                self.assertEqual(network["MaximumNetworkCards"], len(per_card))
                self.assertEqual([(c["NetworkCardIndex"], c["MaximumNetworkInterfaces"]) for c in network["NetworkCards"]], list(enumerate(per_card)))
                self.assertEqual((network["EfaSupported"], network["EfaInfo"]["MaximumEfaInterfaces"]), (True, efa))
                # The first C - E cards take ENA only: p6-b300's card 0.
                ena_only = [c["NetworkCardIndex"] for c in network["NetworkCards"] if "efa" not in c["InterfaceTypes"]]
                self.assertEqual(ena_only, list(range(len(per_card) - efa)))
                self.assertEqual(sum(g["Count"] for g in t.get("GpuInfo", {}).get("Gpus", [])), gpus)
                self.assertEqual(sum(d["Count"] for d in t.get("NeuronInfo", {}).get("NeuronDevices", [])), neuron)
                self.assertEqual(t["ProcessorInfo"]["SupportedArchitectures"], [arch])
        self.assertEqual(described["p6e-gb200.36xlarge"]["GpuInfo"]["Gpus"][0]["Name"], "GB200")
        self.assertEqual(described["trn2u.48xlarge"]["NeuronInfo"]["NeuronDevices"][0]["Name"], "Trainium2")
        # A filter on the facts finds the new type too.
        arm_efa = ec2.describe_instance_types(Filters=[{"Name": "network-info.efa-supported", "Values": ["true"]}, {"Name": "processor-info.supported-architecture", "Values": ["arm64"]}])
        self.assertIn("p6e-gb200.36xlarge", [t["InstanceType"] for t in arm_efa["InstanceTypes"]])

        by_type = [{"Name": "instance-type", "Values": list(FACTS)}]
        for location in ("availability-zone", "availability-zone-id", "region"):
            offered = ec2.describe_instance_type_offerings(LocationType=location, Filters=by_type)["InstanceTypeOfferings"]
            self.assertEqual({o["InstanceType"] for o in offered}, set(FACTS), location)
        zones = {o["Location"] for o in ec2.describe_instance_type_offerings(LocationType="availability-zone", Filters=[{"Name": "instance-type", "Values": ["p6e-gb200.36xlarge"]}])["InstanceTypeOfferings"]}
        self.assertTrue(zones and zones <= {"us-west-2a", "us-west-2b", "us-west-2c", "us-west-2d"}, zones)
        self.assertEqual(self.control("/_forge/violations?account=616161616161"), [])

    def test_bad_layouts_fail_the_node_group(self):
        account = "626262626262"
        ec2, eks, role, subnets = self.cluster(account)
        efa_only_primary = [nic(0, 0, "efa-only")] + [nic(c, 0, "efa-only") for c in range(1, 17)]
        efa_on_card_0 = [nic(0, 0, "efa")] + [nic(c, 0, "efa-only") for c in range(1, 17)]
        cases = {
            "primary": ("p6-b300.48xlarge", efa_only_primary, "InvalidParameterCombination - An EFA-only network interface cannot be the primary network interface (network card index 0, device index 0)"),
            "card0": ("p6-b300.48xlarge", efa_on_card_0, "InvalidParameterCombination - The network card at network card index 0 of instance type p6-b300.48xlarge does not support interface type 'efa'"),
            "efa-on-0-1": ("p6-b300.48xlarge", [nic(0, 0, "interface"), nic(0, 1, "efa-only")], "network card index 0 of instance type p6-b300.48xlarge does not support interface type 'efa-only'"),
            "card17": ("p6-b300.48xlarge", P6_B300 + [nic(17, 0, "efa-only")], "InvalidParameterValue - The specified network card index '17' is not valid for instance type p6-b300.48xlarge"),
            "twice": ("p5.48xlarge", P5 + [nic(3, 0, "interface")], "InvalidParameterValue - Each network interface requires a unique combination of network card index and device index; network card index 3, device index 0"),
            "odd-card": ("p6e-gb200.36xlarge", P6E_GB200 + [nic(1, 1, "interface")], "the network card at network card index 1. The maximum devices for this network card is 1."),
            "no-efa": ("m5.large", [nic(0, 0, "efa")], "The instance type m5.large does not support Elastic Fabric Adapter (EFA)"),
        }
        for name, (kind, interfaces, _) in cases.items():
            self.nodegroup(ec2, eks, role, subnets, name, kind, interfaces)
        for name, (kind, _, expected) in cases.items():
            with self.subTest(name):
                described = lambda: eks.describe_nodegroup(clusterName="c", nodegroupName=name)["nodegroup"]  # noqa: E731
                self.wait_for(lambda: described()["status"], "CREATE_FAILED")
                (issue,) = described()["health"]["issues"]
                self.assertEqual(issue["code"], "AsgInstanceLaunchFailures")
                self.assertTrue(issue["message"].startswith("Could not launch On-Demand Instances. "), issue["message"])
                self.assertTrue(issue["message"].endswith(" Launching EC2 instance failed."), issue["message"])
                self.assertIn(expected, issue["message"])
                self.assertEqual(issue["resourceIds"], [g["name"] for g in described()["resources"]["autoScalingGroups"]])
        self.assertEqual(self.nodes(eks.describe_cluster(name="c")["cluster"]), [], "no instance launched")
        with self.assertRaises(ClientError) as busy:
            eks.update_nodegroup_config(clusterName="c", nodegroupName="primary", scalingConfig={"desiredSize": 2})
        self.assertEqual(busy.exception.response["Error"]["Code"], "ResourceInUseException")
        # A failed group is deleted as any other.
        for name in cases:
            eks.delete_nodegroup(clusterName="c", nodegroupName=name)
        self.wait_for(lambda: eks.list_nodegroups(clusterName="c")["nodegroups"], [])
        self.assertEqual(self.control(f"/_forge/violations?account={account}"), [])

    def test_good_layouts_go_active_with_their_devices(self):
        account = "636363636363"
        ec2, eks, role, subnets = self.cluster(account)
        cases = {"p5": ("p5.48xlarge", P5, 2), "b300": ("p6-b300.48xlarge", P6_B300, 1), "gb200": ("p6e-gb200.36xlarge", P6E_GB200, 1),
                 "trn2": ("trn2.48xlarge", [nic(0, 0, "interface"), nic(0, 1, "efa-only")] + [nic(c, 0, "efa-only") for c in range(1, 16)], 1)}
        for name, (kind, interfaces, size) in cases.items():
            self.nodegroup(ec2, eks, role, subnets, name, kind, interfaces, size)
        # Without a launch template: EKS's one ENA interface, no EFA.
        eks.create_nodegroup(clusterName="c", nodegroupName="plain", nodeRole=role, subnets=subnets[:1], scalingConfig={"minSize": 0, "maxSize": 1, "desiredSize": 1}, instanceTypes=["p5.48xlarge"])
        for name in [*cases, "plain"]:
            described = lambda: eks.describe_nodegroup(clusterName="c", nodegroupName=name)["nodegroup"]  # noqa: E731
            self.wait_for(lambda: described()["status"], "ACTIVE")
            self.assertEqual(described()["health"], {"issues": []})
        by_group = {}
        for node in self.nodes(eks.describe_cluster(name="c")["cluster"]):
            labels = node["metadata"]["labels"]
            by_group.setdefault(labels["eks.amazonaws.com/nodegroup"], []).append(
                (labels["node.kubernetes.io/instance-type"], labels["kubernetes.io/arch"], labels["forge.emulator/gpus"], labels["forge.emulator/efa"], labels["forge.emulator/neuron"]))
        self.assertEqual(by_group, {
            "p5": [("p5.48xlarge", "amd64", "8", "32", "0")] * 2,
            "b300": [("p6-b300.48xlarge", "amd64", "8", "16", "0")],
            "gb200": [("p6e-gb200.36xlarge", "arm64", "4", "17", "0")],
            "trn2": [("trn2.48xlarge", "amd64", "0", "16", "16")],
            "plain": [("p5.48xlarge", "amd64", "8", "0", "0")],
        })

        # A new template version the type cannot take fails the update; the group keeps its
        # template and Nodes. A good one changes the Nodes' EFA devices.
        template = ec2.describe_launch_templates(LaunchTemplateNames=["lt-b300"])["LaunchTemplates"][0]["LaunchTemplateId"]
        ec2.create_launch_template_version(LaunchTemplateId=template, LaunchTemplateData={"InstanceType": "p6-b300.48xlarge", "NetworkInterfaces": [nic(0, 0, "efa")]})
        ec2.create_launch_template_version(LaunchTemplateId=template, LaunchTemplateData={"InstanceType": "p6-b300.48xlarge", "NetworkInterfaces": P6_B300[:9]})
        bad = eks.update_nodegroup_version(clusterName="c", nodegroupName="b300", launchTemplate={"id": template, "version": "2"})["update"]
        self.wait_for(lambda: eks.describe_update(name="c", updateId=bad["id"], nodegroupName="b300")["update"]["status"], "Failed")
        (error,) = eks.describe_update(name="c", updateId=bad["id"], nodegroupName="b300")["update"]["errors"]
        self.assertEqual(error["errorCode"], "NodeCreationFailure")
        self.assertIn("network card index 0 of instance type p6-b300.48xlarge does not support interface type 'efa'", error["errorMessage"])
        self.wait_for(lambda: eks.describe_nodegroup(clusterName="c", nodegroupName="b300")["nodegroup"]["status"], "ACTIVE")
        self.assertEqual(eks.describe_nodegroup(clusterName="c", nodegroupName="b300")["nodegroup"]["launchTemplate"]["version"], "1")
        good = eks.update_nodegroup_version(clusterName="c", nodegroupName="b300", launchTemplate={"id": template, "version": "3"})["update"]
        self.wait_for(lambda: eks.describe_update(name="c", updateId=good["id"], nodegroupName="b300")["update"]["status"], "Successful")
        efa = [n["metadata"]["labels"]["forge.emulator/efa"] for n in self.nodes(eks.describe_cluster(name="c")["cluster"]) if n["metadata"]["labels"]["eks.amazonaws.com/nodegroup"] == "b300"]
        self.assertEqual(efa, ["8"])
        self.assertEqual(self.control(f"/_forge/violations?account={account}"), [])
