"""Smoke test of the launcher's AWS Parallel Computing Service (emulator/pcs.py) through boto3,
as a client of the real service: the model's checks (the harness's) and error shapes, `pcs_`
ids, the phases, PCS's rules (one cluster CREATING, one subnet, sizes, the order of deletes, the
instance profile's role), `clientToken` replay, tags, an injected node group failure, and a
launch template's network interfaces its instance type cannot take failing the create.
`python -m unittest`."""

import json
import time
import unittest
import urllib.request

import boto3
from botocore.exceptions import ClientError

from .launched import Launched

ACCOUNT = "271828182845"
REGION = "us-west-2"


class Pcs(Launched):
    def client(self, service):
        return boto3.client(service, region_name=REGION, endpoint_url=self.url, aws_access_key_id=ACCOUNT,
                            aws_secret_access_key="smoke")

    def setUp(self):
        self.pcs, ec2, iam = self.client("pcs"), self.client("ec2"), self.client("iam")
        vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
        self.subnets = [ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.0.{i}.0/24")["Subnet"]["SubnetId"] for i in range(2)]
        self.group = ec2.create_security_group(GroupName=f"pcs-{time.time_ns()}", Description="pcs", VpcId=vpc)["GroupId"]
        template = ec2.create_launch_template(LaunchTemplateName=f"pcs-{time.time_ns()}", LaunchTemplateData={"InstanceType": "p5.48xlarge"})
        self.template = {"id": template["LaunchTemplate"]["LaunchTemplateId"], "version": "1"}
        suffix = time.time_ns()
        trust = json.dumps({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"},
                                                                     "Action": "sts:AssumeRole"}]})
        self.profiles = {}
        for kind, role_name, path in (("good", f"AWSPCS-nodes-{suffix}", "/"), ("misnamed", f"nodes-{suffix}", "/")):
            iam.create_role(RoleName=role_name, Path=path, AssumeRolePolicyDocument=trust)
            iam.attach_role_policy(RoleName=role_name, PolicyArn="arn:aws:iam::aws:policy/AWSPCSComputeNodePolicy")
            profile = iam.create_instance_profile(InstanceProfileName=f"{kind}-{suffix}")["InstanceProfile"]
            iam.add_role_to_instance_profile(InstanceProfileName=profile["InstanceProfileName"], RoleName=role_name)
            self.profiles[kind] = profile["Arn"]

    def error(self, call, **kwargs):
        with self.assertRaises(ClientError) as caught:
            call(**kwargs)
        return caught.exception.response

    def wait(self, get, key, status, **kwargs):
        for _ in range(100):
            found = get(**kwargs)[key]
            if found["status"] == status:
                return found
            time.sleep(0.1)
        self.fail(f"{key} never became {status}: {found['status']}")

    def cluster(self, name, **extra):
        request = dict(clusterName=name, scheduler={"type": "SLURM", "version": "25.05"}, size="SMALL",
                       networking={"subnetIds": self.subnets[:1], "securityGroupIds": [self.group]}, **extra)
        return self.pcs.create_cluster(**request)["cluster"]

    def test_the_model_checks_requests_as_pcs_does(self):
        error = self.error(self.pcs.create_cluster, clusterName="pcs_bad", scheduler={"type": "SLURM", "version": "25.05"},
                           size="HUGE", networking={"subnetIds": self.subnets[:1]})
        self.assertEqual(error["Error"]["Code"], "ValidationException")
        self.assertEqual(error["reason"], "fieldValidationFailed")
        self.assertEqual(sorted(f["name"] for f in error["fieldList"]), ["clusterName", "size"])
        error = self.error(self.pcs.create_cluster, clusterName="two-subnets", scheduler={"type": "SLURM", "version": "25.05"},
                           size="SMALL", networking={"subnetIds": self.subnets})
        self.assertEqual(error["fieldList"][0]["name"], "networking.subnetIds")
        error = self.error(self.pcs.create_cluster, clusterName="old-slurm", scheduler={"type": "SLURM", "version": "23.11"},
                           size="SMALL", networking={"subnetIds": self.subnets[:1]})
        self.assertIn("23.11", error["Error"]["Message"])

    def test_a_cluster_its_node_groups_and_queue_live_and_go_in_order(self):
        first = self.cluster("smoke-a", clientToken="token-cluster-a", tags={"forge:stack": "smoke"})
        self.assertEqual(first["status"], "CREATING")
        self.assertRegex(first["id"], r"^pcs_[a-z0-9]{10}$")  # PCS's ids, as the model's identifiers take them
        # Another cluster may not start while one is CREATING; the same token answers again.
        error = self.error(self.cluster, name="smoke-b")
        self.assertEqual(error["Error"]["Code"], "ServiceQuotaExceededException")
        again = self.cluster("smoke-a", clientToken="token-cluster-a", tags={"forge:stack": "smoke"})
        self.assertEqual(again["id"], first["id"])
        # Node groups wait for the cluster to be ACTIVE.
        group = dict(clusterIdentifier=first["id"], computeNodeGroupName="gpu", subnetIds=self.subnets[:1],
                     iamInstanceProfileArn=self.profiles["good"], customLaunchTemplate=self.template,
                     scalingConfiguration={"minInstanceCount": 0, "maxInstanceCount": 2}, instanceConfigs=[{"instanceType": "p5.48xlarge"}])
        self.assertEqual(self.error(self.pcs.create_compute_node_group, **group)["Error"]["Code"], "ConflictException")
        cluster = self.wait(self.pcs.get_cluster, "cluster", "ACTIVE", clusterIdentifier="smoke-a")
        self.assertEqual(cluster["endpoints"][0]["type"], "SLURMCTLD")
        # The role's name, the launch template's version and the size are checked.
        error = self.error(self.pcs.create_compute_node_group, **dict(group, iamInstanceProfileArn=self.profiles["misnamed"]))
        self.assertIn("AWSPCS", error["Error"]["Message"])
        error = self.error(self.pcs.create_compute_node_group, **dict(group, customLaunchTemplate=dict(self.template, version="$Latest")))
        self.assertEqual(error["fieldList"][0]["name"], "customLaunchTemplate.version")
        error = self.error(self.pcs.create_compute_node_group,
                           **dict(group, scalingConfiguration={"minInstanceCount": 0, "maxInstanceCount": 33}))
        self.assertEqual(error["Error"]["Code"], "ServiceQuotaExceededException")
        made = self.pcs.create_compute_node_group(**group)["computeNodeGroup"]
        self.assertRegex(made["id"], r"^pcs_[a-z0-9]{10}$")
        self.wait(self.pcs.get_compute_node_group, "computeNodeGroup", "ACTIVE", clusterIdentifier=first["id"],
                  computeNodeGroupIdentifier="gpu")
        queue = self.pcs.create_queue(clusterIdentifier=first["id"], queueName="gpu",
                                      computeNodeGroupConfigurations=[{"computeNodeGroupId": made["id"]}])["queue"]
        self.assertRegex(queue["id"], r"^pcs_[a-z0-9]{10}$")
        self.wait(self.pcs.get_queue, "queue", "ACTIVE", clusterIdentifier=first["id"], queueIdentifier=queue["id"])
        self.assertEqual(self.pcs.list_tags_for_resource(resourceArn=first["arn"])["tags"], {"forge:stack": "smoke"})
        # Deletes go queue -> node group -> cluster.
        error = self.error(self.pcs.delete_compute_node_group, clusterIdentifier=first["id"], computeNodeGroupIdentifier=made["id"])
        self.assertEqual(error["Error"]["Code"], "ConflictException")
        self.assertEqual(self.error(self.pcs.delete_cluster, clusterIdentifier=first["id"])["Error"]["Code"], "ConflictException")
        self.pcs.delete_queue(clusterIdentifier=first["id"], queueIdentifier=queue["id"])
        self.wait(lambda **k: {"q": {"status": "GONE"}} if not self.pcs.list_queues(**k)["queues"] else {"q": {"status": "?"}},
                  "q", "GONE", clusterIdentifier=first["id"])
        self.pcs.delete_compute_node_group(clusterIdentifier=first["id"], computeNodeGroupIdentifier=made["id"])
        self.wait(lambda **k: {"g": {"status": "GONE"}} if not self.pcs.list_compute_node_groups(**k)["computeNodeGroups"]
                  else {"g": {"status": "?"}}, "g", "GONE", clusterIdentifier=first["id"])
        self.pcs.delete_cluster(clusterIdentifier=first["id"])
        self.wait(lambda: {"c": {"status": "GONE" if not self.pcs.list_clusters()["clusters"] else "?"}}, "c", "GONE")

    def test_an_injected_failure_ends_a_node_group_create_with_its_error_info(self):
        rule = json.dumps([{"account": ACCOUNT, "match": "doomed*", "code": "InsufficientInstanceCapacity"}]).encode()
        urllib.request.urlopen(urllib.request.Request(f"{self.url}/_forge/pcs/failures", data=rule, method="POST"))
        cluster = self.cluster("smoke-fail")
        self.wait(self.pcs.get_cluster, "cluster", "ACTIVE", clusterIdentifier=cluster["id"])
        self.pcs.create_compute_node_group(clusterIdentifier=cluster["id"], computeNodeGroupName="doomed-gpu", subnetIds=self.subnets[:1],
                                           iamInstanceProfileArn=self.profiles["good"],
                                           scalingConfiguration={"minInstanceCount": 1, "maxInstanceCount": 1},
                                           instanceConfigs=[{"instanceType": "p5.48xlarge"}])
        failed = self.wait(self.pcs.get_compute_node_group, "computeNodeGroup", "CREATE_FAILED", clusterIdentifier=cluster["id"],
                           computeNodeGroupIdentifier="doomed-gpu")
        self.assertEqual(failed["errorInfo"][0]["code"], "InsufficientInstanceCapacity")

    def test_network_interfaces_the_type_cannot_launch_fail_the_create(self):
        ec2 = self.client("ec2")
        cluster = self.cluster("smoke-efa")
        self.wait(self.pcs.get_cluster, "cluster", "ACTIVE", clusterIdentifier=cluster["id"])
        good = [{"NetworkCardIndex": 0, "DeviceIndex": 0, "InterfaceType": "interface"}]
        good += [{"NetworkCardIndex": card, "DeviceIndex": 0, "InterfaceType": "efa-only"} for card in range(1, 17)]
        layouts = {"efa-on-card-0": [dict(good[0], InterfaceType="efa"), *good[1:]], "efa-right": good}
        for name, interfaces in layouts.items():
            made = ec2.create_launch_template(LaunchTemplateName=f"{name}-{time.time_ns()}",
                                              LaunchTemplateData={"NetworkInterfaces": interfaces})
            self.pcs.create_compute_node_group(clusterIdentifier=cluster["id"], computeNodeGroupName=name, subnetIds=self.subnets[:1],
                                               iamInstanceProfileArn=self.profiles["good"],
                                               customLaunchTemplate={"id": made["LaunchTemplate"]["LaunchTemplateId"], "version": "1"},
                                               scalingConfiguration={"minInstanceCount": 0, "maxInstanceCount": 1},
                                               instanceConfigs=[{"instanceType": "p6-b300.48xlarge"}])
        # p6-b300's card 0 takes ENA only: EC2's error, as the create's errorInfo.
        failed = self.wait(self.pcs.get_compute_node_group, "computeNodeGroup", "CREATE_FAILED", clusterIdentifier=cluster["id"],
                           computeNodeGroupIdentifier="efa-on-card-0")
        self.assertEqual(failed["errorInfo"][0]["code"], "InvalidParameterCombination")
        self.assertIn("network card index 0 of instance type p6-b300.48xlarge does not support interface type 'efa'",
                      failed["errorInfo"][0]["message"])
        self.wait(self.pcs.get_compute_node_group, "computeNodeGroup", "ACTIVE", clusterIdentifier=cluster["id"],
                  computeNodeGroupIdentifier="efa-right")


if __name__ == "__main__":
    unittest.main()
